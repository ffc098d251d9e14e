#!/usr/bin/env python3
"""Cache hits against the medium alone, measured the way noisy machines need.

Runs `tiercache bench` for DRAM-tier hits and for hits on a memory-mapped tier (a file on
/dev/shm by default), each with and without `--raw`, at each of --threads. Cache and raw runs
alternate, `--repeat` times each, so a slow spell of the machine lands on both; the table gives
the median of each and the ratio of the medians (and the lowest and highest ratio of the
pairs, to show the spread).

    scripts/bench_hits.py [--repeat 5] [--duration 3] [--policy lru] [--slow-path FILE]
                          [--threads 1,2,4,8,16] [--binary TIERCACHE_BINARY]
                          [--baseline OTHER_TIERCACHE_BINARY] [--json OUT.json]
                          [--hit-rule RULE] [--also-rule RULE]

--threads takes any list of thread counts (1 and 2 by default); --binary runs another build
than this checkout's release build (a copy carried to another machine, say).

The cache runs tell the policy of hits by the engine's default rule (`epochs:32`), or by
--hit-rule; --also-rule adds cache runs with another rule (`exact`, say), alternating with the
rest, and a column for them.

With --baseline, the cache runs of another build (an earlier commit's, say) alternate with this
build's and the raw runs, and the table adds its column: a change's cost, measured side by side.
The table opens with the machine's CPU model and core count (results differ by machine); with
--json, every run's figure is written to OUT.json as well.

Needs a release build: `cargo build --release -p tiercache-cli`.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BINARY = ROOT / "target" / "release" / "tiercache"


def run(tier_args, threads, raw, args, binary=None, rule=None):
    binary = binary or args.binary
    command = [
        str(binary), "bench", *tier_args,
        "--working-set", "32MiB", "--read-ratio", "1",
        "--duration", str(args.duration), "--threads", str(threads),
        "--policy", args.policy, "--json",
    ]
    if raw:
        command.append("--raw")
    elif rule:
        command += ["--hit-rule", rule]
    if binary == args.binary and "--slow-path" in tier_args:
        # The tier file is rewritten by each run (the baseline may write another layout).
        command.append("--force")
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(out)["ops_per_second"]


def cpu_model():
    """The CPU's model name, family and model as the kernel reports them (a VM may show only a
    generic name), or what Python knows."""
    fields = {}
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    name = fields.get("model name") or platform.processor() or "unknown CPU"
    if "cpu family" in fields and "model" in fields:
        name += f" (family {fields['cpu family']} model {fields['model']})"
    return name


def thread_counts(text):
    """'1,4,16' as [1, 4, 16]; each count from 1 to 1024."""
    try:
        counts = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of numbers")
    if not counts or any(not 1 <= n <= 1024 for n in counts):
        raise argparse.ArgumentTypeError(f"{text!r}: each thread count must be from 1 to 1024")
    return counts


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--policy", default="lru")
    parser.add_argument("--slow-path", default="/dev/shm/tiercache-bench-hits")
    parser.add_argument("--baseline", help="another tiercache binary to alternate with")
    parser.add_argument("--json", help="also write every run's figure to this file")
    parser.add_argument("--hit-rule", help="how the cache runs tell the policy of hits "
                        "(default: the engine's, epochs:32)")
    parser.add_argument("--also-rule", help="cache runs with this hit rule too, in a column")
    parser.add_argument("--threads", type=thread_counts, default=[1, 2],
                        help="thread counts, comma-separated (default 1,2)")
    parser.add_argument("--binary", type=Path, default=BINARY,
                        help="the tiercache binary to measure (default: the release build)")
    args = parser.parse_args()
    if not args.binary.exists():
        sys.exit(f"{args.binary} is missing: run `cargo build --release -p tiercache-cli` first")
    tiers = [
        ("DRAM", ["--dram", "64MiB"]),
        ("mapped", ["--slow-path", args.slow_path, "--slow-size", "64MiB"]),
    ]
    machine = f"{cpu_model()}, {os.cpu_count()} cores"
    print(f"{machine}; policy {args.policy}, {args.repeat} alternating rounds of "
          f"{args.duration} s runs")
    rows = []
    baseline_head = f" {'baseline ops/s':>14} {'baseline/raw':>12}" if args.baseline else ""
    if args.also_rule:
        baseline_head += f" {args.also_rule + ' ops/s':>18} {'/raw':>6}"
    print(f"{'tier':<8} {'threads':>7} {'cache ops/s':>13} {'raw ops/s':>13} "
          f"{'cache/raw':>9} {'pairs min-max':>15}{baseline_head}")
    baseline_path = f"{args.slow_path}-baseline"
    try:
        for name, tier_args in tiers:
            for threads in args.threads:
                cache, raw, base, also = [], [], [], []
                for _ in range(args.repeat):
                    cache.append(run(tier_args, threads, False, args, rule=args.hit_rule))
                    if args.also_rule:
                        also.append(run(tier_args, threads, False, args, rule=args.also_rule))
                    if args.baseline:
                        # Its own tier file: the baseline may not know this build's header.
                        other = [baseline_path if a == args.slow_path else a for a in tier_args]
                        base.append(run(other, threads, False, args, args.baseline))
                    raw.append(run(tier_args, threads, True, args))
                ratios = [c / r for c, r in zip(cache, raw)]
                c, r = statistics.median(cache), statistics.median(raw)
                line = (f"{name:<8} {threads:>7} {c:>13,.0f} {r:>13,.0f} {c / r:>9.0%} "
                        f"{min(ratios):>7.0%}-{max(ratios):.0%}")
                if base:
                    b = statistics.median(base)
                    line += f" {b:>14,.0f} {b / r:>12.0%}"
                if also:
                    a = statistics.median(also)
                    line += f" {a:>18,.0f} {a / r:>6.0%}"
                print(line, flush=True)
                rows.append({"tier": name, "threads": threads, "cache": cache, "raw": raw,
                             "baseline": base, "also": also, "cache_over_raw": c / r})
        if args.json:
            report = {"machine": machine, "policy": args.policy, "repeat": args.repeat,
                      "hit_rule": args.hit_rule or "epochs:32", "also_rule": args.also_rule,
                      "threads": args.threads,
                      "duration": args.duration, "rows": rows}
            Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    finally:
        Path(args.slow_path).unlink(missing_ok=True)
        Path(baseline_path).unlink(missing_ok=True)


if __name__ == "__main__":
    main()
