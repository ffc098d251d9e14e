#!/usr/bin/env python3
"""Cache hits against the medium alone, measured the way noisy machines need.

Runs `tiercache bench` for DRAM-tier hits and for hits on a memory-mapped tier (a file on
/dev/shm by default), each with and without `--raw`, at 1 and 2 threads. Cache and raw runs
alternate, `--repeat` times each, so a slow spell of the machine lands on both; the table gives
the median of each and the ratio of the medians (and the lowest and highest ratio of the
pairs, to show the spread).

    scripts/bench_hits.py [--repeat 5] [--duration 3] [--policy lru] [--slow-path FILE]

Needs a release build: `cargo build --release -p tiercache-cli`.
"""

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BINARY = ROOT / "target" / "release" / "tiercache"


def run(tier_args, threads, raw, args):
    command = [
        str(BINARY), "bench", *tier_args,
        "--working-set", "32MiB", "--read-ratio", "1",
        "--duration", str(args.duration), "--threads", str(threads),
        "--policy", args.policy, "--json",
    ]
    if raw:
        command.append("--raw")
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(out)["ops_per_second"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--policy", default="lru")
    parser.add_argument("--slow-path", default="/dev/shm/tiercache-bench-hits")
    args = parser.parse_args()
    if not BINARY.exists():
        sys.exit(f"{BINARY} is missing: run `cargo build --release -p tiercache-cli` first")
    tiers = [
        ("DRAM", ["--dram", "64MiB"]),
        ("mapped", ["--slow-path", args.slow_path, "--slow-size", "64MiB"]),
    ]
    print(f"policy {args.policy}, {args.repeat} alternating pairs of {args.duration} s runs")
    print(f"{'tier':<8} {'threads':>7} {'cache ops/s':>13} {'raw ops/s':>13} "
          f"{'cache/raw':>9} {'pairs min-max':>15}")
    try:
        for name, tier_args in tiers:
            for threads in (1, 2):
                cache, raw = [], []
                for _ in range(args.repeat):
                    cache.append(run(tier_args, threads, False, args))
                    raw.append(run(tier_args, threads, True, args))
                ratios = [c / r for c, r in zip(cache, raw)]
                c, r = statistics.median(cache), statistics.median(raw)
                print(f"{name:<8} {threads:>7} {c:>13,.0f} {r:>13,.0f} {c / r:>9.0%} "
                      f"{min(ratios):>7.0%}-{max(ratios):.0%}", flush=True)
    finally:
        Path(args.slow_path).unlink(missing_ok=True)


if __name__ == "__main__":
    main()
