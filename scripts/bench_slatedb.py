#!/usr/bin/env python3
"""SlateDB's block cache on tiercache against foyer's hybrid cache (SlateDB's own), side by side.

Each round runs, for each cache in turn (alternating, so a slow spell of the machine lands on
both), `tiercache ycsb --db slatedb` twice over a local object store that answers like S3:

- every workload asked for (YCSB's order A, B, C, F, D, E by default) after one load, equal
  budgets of DRAM (--dram) and disk (--disk) for both caches, the data larger than both;
- workload C alone with --restart: the cold run's GETs, then the same run after closing and
  reopening the database and the cache.

The table gives, per workload, each cache's median ops/s, p99 and object-store GETs and their
ratios (tiercache over foyer); every run's JSON goes to --json OUT.json. The machine's CPU
model opens the table. Needs a build with foyer:
`cargo build --release -p tiercache-cli --features foyer`.

    scripts/bench_slatedb.py [--rounds 2] [--records 40000] [--operations 10000]
                             [--dram 4MiB] [--disk 16MiB] [--dir /var/tmp/tc-slatedb]
                             [--tiercache-options '--placement bidirectional:1']
"""

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from bench_hits import cpu_model  # noqa: E402

CACHES = ("tiercache", "foyer")


def ycsb(args, cache, workload, restart, dir):
    """One `tiercache ycsb --db slatedb` run's JSON report."""
    subprocess.run(["rm", "-rf", str(dir)], check=True)
    command = [str(args.binary), "ycsb", "--db", "slatedb", "--slatedb-cache", cache,
               "--workload", workload, "--records", str(args.records),
               "--operations", str(args.operations), "--threads", str(args.clients),
               "--first-byte-ms", str(args.first_byte_ms), "--dram", args.dram,
               "--flash-size", args.disk, "--dir", str(dir), "--json"]
    if cache == "tiercache":
        command += ["--flash-path", str(dir / "tiercache.flash"), *args.tiercache_options.split()]
    if restart:
        command.append("--restart")
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)}\nfailed: {done.stderr.strip()}")
    return json.loads(done.stdout)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--records", type=int, default=40_000)
    parser.add_argument("--operations", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--first-byte-ms", type=float, default=20.0)
    parser.add_argument("--dram", default="4MiB")
    parser.add_argument("--disk", default="16MiB")
    parser.add_argument("--workload", default="A,B,C,F,D,E")
    parser.add_argument("--dir", type=Path, default=Path("/var/tmp/tc-slatedb"))
    parser.add_argument("--binary", type=Path, default=ROOT / "target" / "release" / "tiercache")
    parser.add_argument("--json", type=Path, help="every run's report")
    parser.add_argument("--tiercache-options", default="",
                        help="more options for tiercache's runs ('--placement bidirectional:1')")
    args = parser.parse_args()
    runs = {cache: [] for cache in CACHES}
    restarts = {cache: [] for cache in CACHES}
    started = time.monotonic()
    for round in range(args.rounds):
        order = CACHES if round % 2 == 0 else CACHES[::-1]
        for cache in order:
            print(f"round {round + 1}, {cache} ({time.monotonic() - started:.0f} s in)",
                  file=sys.stderr, flush=True)
            runs[cache].append(ycsb(args, cache, args.workload, False, args.dir / cache))
            restarts[cache].append(ycsb(args, cache, "C", True, args.dir / cache))
    if args.json:
        args.json.write_text(json.dumps({"runs": runs, "restarts": restarts}, indent=1))
    print(f"{cpu_model()}; SlateDB over a local object store, {args.first_byte_ms} ms to the "
          f"first byte; {args.records} records of 1000 B, {args.operations} operations a "
          f"workload, {args.clients} clients; DRAM {args.dram} + disk {args.disk} each; "
          f"tiercache options '{args.tiercache_options}'; medians of {args.rounds} rounds")
    print("| workload | ops/s tiercache / foyer | ratio | p99 ms tiercache / foyer "
          "| GETs tiercache / foyer | ratio | tiercache hit ratio |")
    print("|---|---|---|---|---|---|---|")
    names = [r["workload"] for r in runs["tiercache"][0]["runs"]]
    for i, name in enumerate(names):
        med = {c: {k: statistics.median(run["runs"][i][k] if k != "gets" else
                                        run["runs"][i]["object_store"]["gets"]
                                        for run in runs[c])
                   for k in ("ops_per_second", "gets")} for c in CACHES}
        p99 = {c: statistics.median(run["runs"][i]["all"]["p99_us"] for run in runs[c]) / 1000
               for c in CACHES}
        hits = statistics.median(run["runs"][i]["cache"]["hit_ratio"] or 0
                                 for run in runs["tiercache"])
        t, f = med["tiercache"], med["foyer"]
        print(f"| {name} | {t['ops_per_second']:.0f} / {f['ops_per_second']:.0f} "
              f"| {t['ops_per_second'] / f['ops_per_second']:.2f} "
              f"| {p99['tiercache']:.0f} / {p99['foyer']:.0f} "
              f"| {t['gets']:.0f} / {f['gets']:.0f} | {t['gets'] / max(f['gets'], 1):.2f} "
              f"| {hits * 100:.1f}% |")
    for c in CACHES:
        cold = statistics.median(r["runs"][0]["object_store"]["gets"] for r in restarts[c])
        warm = statistics.median(r["restart"]["object_store"]["gets"] for r in restarts[c])
        print(f"{c}: workload C cold {cold:.0f} GETs, after a restart {warm:.0f} "
              f"({warm / max(cold, 1):.2f} of cold)")


if __name__ == "__main__":
    main()
