#!/usr/bin/env python3
"""How the engine scales with threads: every figure of the scaling table in one run.

At each thread count of --threads (1,2,4,8,16 by default), in this order:

- hits against raw copies, DRAM and a mapped tier (`bench_hits.py`, which alternates cache and
  raw runs);
- read handles on DRAM (`bench --handle`, all hits);
- DRAM 64 MiB over a 512 MiB mapped tier, then over a 512 MiB flash tier, both files on
  --tier-dir (tmpfs by default), Zipf 0.9 over a 256 MiB working set, 90% reads, write-through;
  and each medium alone (`--raw`) at the same thread count, so a medium that stops scaling
  first shows itself; and the backing file alone (`--raw-backing`, in the temporary
  directory), which every write of a write-through cache reaches;
- with --foyer DIR (a folder holding the `foyer-compare` and `hybrid` binaries of
  bench/foyer-compare): foyer's in-memory cache next to ours, and its hybrid cache next to
  DRAM + a direct-I/O disk tier in --disk-dir (which must not be tmpfs).

Then, at the largest thread count, what moves the tiered rows: more shards, no writes, more
write-behind threads.

Every run's JSON goes to OUT/scaling.jsonl, one object a line with its `figure` and `threads`;
a table of the medians is printed at the end and written to OUT/scaling.md. The machine (CPU
model, cores, kernel, file systems) opens both.

    scripts/bench_scaling.py [--threads 1,2,4,8,16] [--binary target/release/tiercache]
                             [--foyer DIR] [--out DIR] [--duration 2] [--quick]

Needs release builds: `cargo build --release -p tiercache-cli`, and for --foyer,
`cargo build --release` in bench/foyer-compare.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from bench_hits import cpu_model, thread_counts  # noqa: E402


class Runner:
    """Runs commands, records each JSON result with its figure and thread count."""

    def __init__(self, args):
        self.args = args
        self.out = Path(args.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.log = open(self.out / "scaling.jsonl", "a")
        self.rows = {}

    def record(self, figure, threads, value, extra):
        self.rows.setdefault(figure, {}).setdefault(threads, []).append(value)
        entry = {"figure": figure, "threads": threads, "value": value, **extra}
        self.log.write(json.dumps(entry) + "\n")
        self.log.flush()

    def bench(self, figure, threads, options):
        command = [str(self.args.binary), "bench", "--threads", str(threads),
                   "--duration", str(self.args.duration), "--json", *options]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            print(f"{figure} at {threads}: failed: {done.stderr.strip()}", file=sys.stderr)
            return None
        report = json.loads(done.stdout)
        ops = report["ops_per_second"]
        extra = {"hit_ratio": report.get("hit_ratio"), "tier": report["tier"]}
        cache = report.get("cache") or {}
        extra["writes_dropped"] = cache.get("writes_dropped")
        self.record(figure, threads, ops, extra)
        print(f"  {figure:<42} {threads:>3} threads {ops:>14,.0f} ops/s", flush=True)
        return ops

    def foyer(self, binary, threads, options):
        command = [str(binary), "--threads", str(threads), "--json", *options]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            print(f"{binary.name} at {threads}: failed: {done.stderr.strip()}", file=sys.stderr)
            return
        for line in done.stdout.splitlines():
            row = json.loads(line)
            name = f"foyer-compare {row['cache']}"
            self.record(f"{name}: tiercache", threads, row["tiercache_ops_per_second"], row)
            self.record(f"{name}: foyer", threads, row["foyer_ops_per_second"], row)
            ratio = row["tiercache_ops_per_second"] / row["foyer_ops_per_second"]
            self.record(f"{name}: tiercache / foyer", threads, ratio, {})
            print(f"  {name:<42} {threads:>3} threads tiercache/foyer {ratio:.2f} "
                  f"dropped {row['tiercache_dropped']}/{row['foyer_dropped']}", flush=True)


def tiered(runner, threads, tier_dir, extra=(), label="", read_ratio=0.9):
    """DRAM over a mapped tier and over a flash tier, then each medium alone."""
    mapped, flash = tier_dir / "tc-scaling-mapped", tier_dir / "tc-scaling-flash"
    common = ["--working-set", "256MiB", "--read-ratio", str(read_ratio), "--force", *extra]
    try:
        for name, tier in (("mapped", ["--slow-path", str(mapped), "--slow-size", "512MiB"]),
                           ("flash", ["--flash-path", str(flash), "--flash-size", "512MiB"])):
            runner.bench(f"DRAM 64 MiB over {name}{label}", threads,
                         ["--dram", "64MiB", *tier, *common])
            if not label:
                runner.bench(f"{name} medium alone (--raw)", threads, ["--raw", *tier, *common])
    finally:
        mapped.unlink(missing_ok=True)
        flash.unlink(missing_ok=True)


def hits(runner, threads):
    """bench_hits.py at one thread count: cache and raw runs alternating."""
    args = runner.args
    out = runner.out / f"hits-{threads}.json"
    command = [sys.executable, str(ROOT / "scripts" / "bench_hits.py"), "--threads",
               str(threads), "--repeat", str(args.repeat), "--duration", str(args.duration),
               "--binary", str(args.binary), "--slow-path", str(args.tier_dir / "tc-hits"),
               "--json", str(out)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        print(f"bench_hits at {threads}: failed: {done.stderr.strip()}", file=sys.stderr)
        return
    for row in json.loads(out.read_text())["rows"]:
        runner.record(f"{row['tier']} hits / raw", threads, row["cache_over_raw"], row)
        print(f"  {row['tier'] + ' hits / raw':<42} {threads:>3} threads "
              f"{row['cache_over_raw']:>14.2f}", flush=True)


def machine():
    lines = [f"{cpu_model()}, {os.cpu_count()} cores, kernel {platform.release()}"]
    for label, path in (("tiers", "tier_dir"), ("disk tier", "disk_dir")):
        where = getattr(ARGS, path)
        fs = subprocess.run(["df", "-T", str(where)], capture_output=True, text=True).stdout
        kind = fs.splitlines()[-1].split()[1] if fs.strip() else "?"
        lines.append(f"{label}: {where} ({kind})")
    return "; ".join(lines)


def table(runner, header):
    counts = sorted({t for rows in runner.rows.values() for t in rows})
    lines = [header, "", "| figure | " + " | ".join(f"{t} thr" for t in counts) + " |",
             "|---|" + "---|" * len(counts)]
    for figure, rows in runner.rows.items():
        cells = []
        for t in counts:
            if t not in rows:
                cells.append("")
                continue
            value = statistics.median(rows[t])
            cells.append(f"{value:.2f}" if value < 100 else f"{value:,.0f}")
        lines.append(f"| {figure} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    global ARGS
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=thread_counts, default=[1, 2, 4, 8, 16])
    parser.add_argument("--binary", type=Path, default=ROOT / "target" / "release" / "tiercache")
    parser.add_argument("--foyer", type=Path, help="folder with foyer-compare and hybrid")
    parser.add_argument("--out", default="scaling-results")
    parser.add_argument("--duration", type=float, default=2.0)
    parser.add_argument("--repeat", type=int, default=2, help="bench_hits.py's pairs")
    parser.add_argument("--tier-dir", type=Path, default=Path("/dev/shm"))
    parser.add_argument("--disk-dir", type=Path, default=Path("scaling-scratch"))
    parser.add_argument("--quick", action="store_true",
                        help="skip the diagnostics at the largest thread count")
    ARGS = args = parser.parse_args()
    if not args.binary.exists():
        sys.exit(f"{args.binary} is missing: run `cargo build --release -p tiercache-cli` first")
    args.disk_dir.mkdir(parents=True, exist_ok=True)
    runner = Runner(args)
    header = f"{machine()}; {time.strftime('%Y-%m-%d %H:%M')}"
    print(header, flush=True)
    started = time.monotonic()
    for threads in args.threads:
        print(f"{threads} threads ({time.monotonic() - started:.0f} s in)", flush=True)
        hits(runner, threads)
        runner.bench("DRAM read handles (bench --handle)", threads,
                     ["--handle", "--working-set", "32MiB", "--read-ratio", "1"])
        tiered(runner, threads, args.tier_dir)
        runner.bench("backing file alone (--raw-backing)", threads,
                     ["--raw-backing", "--working-set", "256MiB", "--read-ratio", "0.9"])
        if args.foyer:
            runner.foyer(args.foyer / "foyer-compare", threads,
                         ["--seconds", str(args.duration / 2)])
            runner.foyer(args.foyer / "hybrid", threads,
                         [str(args.disk_dir), "--disk-tier", "direct", "--warmup", "2",
                          "--seconds", str(args.duration * 1.5)])
    if not args.quick:
        most = max(args.threads)
        print(f"diagnostics at {most} threads ({time.monotonic() - started:.0f} s in)")
        tiered(runner, most, args.tier_dir, ["--shards", "1024"], ", 1024 shards")
        tiered(runner, most, args.tier_dir, [], ", reads only", read_ratio=1.0)
        tiered(runner, most, args.tier_dir, ["--write-behind", "16"], ", 16 write-behind")
    text = table(runner, header)
    (runner.out / "scaling.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
