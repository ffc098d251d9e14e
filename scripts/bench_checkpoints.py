#!/usr/bin/env python3
"""What background checkpoints cost: bench rows with checkpoints and without, alternating.

A cache whose tiers have files syncs them on its own every `--sync-interval` (1 s by default;
`0` turns it off), so that a crash of the machine loses at most that much. This runs the bench
rows RESULTS records (a flash tier, DRAM over a flash tier, a mapped tier; 90% reads, 2
threads) with the default interval and with checkpoints off, alternating, `--rounds` times, and
prints each row's medians, their ratio (with checkpoints over without: 1.00 costs nothing) and
the checkpoints each run made.

    scripts/bench_checkpoints.py [--rounds 3] [--duration 4] [--warmup 2] [--dir DIR]
                                 [--interval 1s] [--binary TIERCACHE_BINARY] [--json OUT.json]

The tier files go in --dir (the temporary directory by default: put it on the device to
measure). Needs a release build: `cargo build --release -p tiercache-cli`.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import cpu_model  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BINARY = ROOT / "target" / "release" / "tiercache"


def rows(directory):
    flash = ["--flash-path", str(directory / "checkpoints.flash"), "--flash-size", "64MiB"]
    mapped = ["--slow-path", str(directory / "checkpoints.mapped"), "--slow-size", "64MiB"]
    return {
        "flash 64 MiB, working set 48 MiB": ["--dram", "0", *flash, "--working-set", "48MiB"],
        "DRAM 16 MiB over flash 64 MiB, working set 256 MiB":
            ["--dram", "16MiB", *flash, "--working-set", "256MiB"],
        "mapped 64 MiB, working set 48 MiB": ["--dram", "0", *mapped, "--working-set", "48MiB"],
    }


def run(args, tier_args, interval):
    command = [
        str(args.binary), "bench", *tier_args, "--read-ratio", "0.9", "--threads", "2",
        "--warmup", str(args.warmup), "--duration", str(args.duration), "--force",
        "--sync-interval", interval, "--json",
    ]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"error: {' '.join(command)} failed:\n{done.stderr.strip()}")
    out = json.loads(done.stdout)
    return out["ops_per_second"], out["cache"]["checkpoints"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=4.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--interval", default="1s", help="the checkpoints' interval measured")
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--binary", type=Path, default=BINARY)
    parser.add_argument("--json", type=Path, help="write every run's figures here too")
    args = parser.parse_args()
    if not args.binary.exists():
        sys.exit(f"error: {args.binary} not found: cargo build --release -p tiercache-cli")
    if args.rounds < 1:
        sys.exit("error: --rounds must be at least 1")
    print(f"{cpu_model()}, {os.cpu_count()} cores; {args.rounds} alternating rounds of "
          f"{args.duration} s after {args.warmup} s of warm-up, 2 threads, 90% reads; "
          f"tier files in {args.dir}")
    print(f"{'row':<52} {'with ops/s':>12} {'without':>12} {'ratio':>7} {'checkpoints':>12}")
    report = []
    for name, tier_args in rows(args.dir).items():
        runs = {args.interval: [], "0": []}
        made = []
        for _ in range(args.rounds):
            for interval in runs:
                ops, checkpoints = run(args, tier_args, interval)
                runs[interval].append(ops)
                if interval != "0":
                    made.append(checkpoints)
        with_, without = (statistics.median(runs[i]) for i in (args.interval, "0"))
        print(f"{name:<52} {with_:>12,.0f} {without:>12,.0f} {with_ / without:>7.3f} "
              f"{statistics.median(made):>12.0f}")
        report.append({"row": name, "interval": args.interval, "with": runs[args.interval],
                       "without": runs["0"], "checkpoints": made, "ratio": with_ / without})
        for path in args.dir.glob("checkpoints.*"):
            path.unlink()
    if args.json:
        args.json.write_text(json.dumps({"machine": cpu_model(), "rows": report}, indent=1))


if __name__ == "__main__":
    main()
