#!/usr/bin/env python3
"""The policies tiercache shares with libCacheSim, side by side: each policy's miss ratio from
libCacheSim 0.3.5 and from tiercache on two traces at two cache sizes (in objects), and each
side's speed (requests per second over the whole run: reading the trace and simulating; for
tiercache the `tiercache sim` process, for libCacheSim its `process_trace` call), the sides
alternating. Where our default follows the paper and libCacheSim departs from it, both our
default and the setting that is libCacheSim's are shown.

Traces: data/cloudPhysicsIO.oracleGeneral.bin.zst, and data/arc_P3.lis.zst converted to
oracleGeneral into --dir. Prints a Markdown table and writes policies.csv into --dir.

Usage: scripts/policy_table.py --binary target/release/tiercache [--dir /tmp/tiercache-policies]
                               [--only LABEL,LABEL]
"""
import argparse
import json
import os
import subprocess
import time

from machine import cpu_model

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (row label, our spec, libCacheSim class)
ROWS = [
    ("lru", "lru", "LRU"),
    ("fifo", "fifo", "FIFO"),
    ("clock", "clock", "Clock"),
    ("arc", "arc", "ARC"),
    ("s3fifo", "s3fifo", "S3FIFO"),
    ("clock2q+", "clock2q+", "Clock2QPlus"),
    ("sieve", "sieve", "Sieve"),
    ("2q", "2q", "TwoQ"),
    ("2q (cap_am)", "2q:cap_am=true", "TwoQ"),
    ("slru", "slru", "SLRU"),
    ("slru (fill_first_room)", "slru:fill_first_room=true", "SLRU"),
    ("lru-k", "lru-k", "LRUK"),
    ("mq", "mq", "MQ"),
    ("gdsf", "gdsf", "GDSF"),
    ("lfuda", "lfuda", "LFUDA"),
    ("w-tinylfu", "w-tinylfu", "WTinyLFU"),
    ("w-tinylfu (libcachesim_rules)", "w-tinylfu:libcachesim_rules=true", "WTinyLFU"),
    ("random (seed 0)", "random", "Random"),
    ("lru-prob (seed 0)", "lru-prob", "LRUProb"),
    ("hyperbolic (seed 0)", "hyperbolic", "Hyperbolic"),
    ("lecar (seed 0)", "lecar", "LeCaR"),
    ("lirs", "lirs", "LIRS"),
    ("clock-pro", "clock-pro", "ClockPro"),
    ("size", "size", "Size"),
    ("belady-size", "belady-size", "BeladySize"),
    ("lhd (seed 0)", "lhd", "LHD"),
    ("cacheus (seed 0)", "cacheus", "Cacheus"),
    ("cacheus (integer_hit_ratio+grow_only)", "cacheus:integer_hit_ratio=true,grow_only=true",
     "Cacheus"),
]


def theirs(lcs, class_name, trace, capacity):
    params = lcs.ReaderInitParam()
    params.ignore_obj_size = True
    reader = lcs.TraceReader(trace=trace, trace_type=lcs.TraceType.ORACLE_GENERAL_TRACE,
                             reader_init_params=params)
    cache = getattr(lcs, class_name)(cache_size=capacity)
    start = time.perf_counter()
    miss, _ = cache.process_trace(reader)
    return miss, time.perf_counter() - start


def ours(binary, spec, trace, capacity):
    start = time.perf_counter()
    out = subprocess.check_output([binary, "sim", "--trace", trace, "--policy", spec, "--unit",
                                   "objects", "--capacity", str(capacity), "--json"])
    elapsed = time.perf_counter() - start
    report = json.loads(out)
    return report["miss_ratio"], elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", required=True, help="the tiercache binary to run")
    parser.add_argument("--dir", default="/tmp/tiercache-policies")
    parser.add_argument("--only", help="these rows only (their labels, comma-separated)")
    args = parser.parse_args()
    rows_run = ROWS
    if args.only:
        wanted = args.only.split(",")
        rows_run = [row for row in ROWS if row[0] in wanted]
        unknown = sorted(set(wanted) - {row[0] for row in rows_run})
        if unknown:
            parser.error(f"--only: no rows {unknown}; known: {', '.join(r[0] for r in ROWS)}")
    import libcachesim as lcs

    os.makedirs(args.dir, exist_ok=True)
    binary = os.path.abspath(args.binary)
    cloud = os.path.join(ROOT, "data", "cloudPhysicsIO.oracleGeneral.bin.zst")
    p3 = os.path.join(args.dir, "arc_P3.oracleGeneral.bin")
    if not os.path.exists(p3):
        subprocess.check_call([binary, "trace", "convert", "--trace",
                               os.path.join(ROOT, "data", "arc_P3.lis.zst"), "--to",
                               "oracle-general", "-o", p3], stdout=subprocess.DEVNULL)
    traces = [("cloudPhysicsIO", cloud, 113_872, [2000, 20000]),
              ("arc_P3", p3, 3_912_296, [10000, 100000])]
    print(f"machine: {os.cpu_count()} cores, {cpu_model()}")
    header = "| policy | " + " | ".join(
        f"{name} {c:,}: libCacheSim / ours" for name, _, _, caps in traces for c in caps
    ) + " | speed on arc_P3, M requests/s: libCacheSim / ours |"
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    rows = []
    for label, spec, class_name in rows_run:
        cells, speeds = [], []
        for name, path, requests, capacities in traces:
            for capacity in capacities:
                their_miss, their_s = theirs(lcs, class_name, path, capacity)
                our_miss, our_s = ours(binary, spec, path, capacity)
                cells.append(f"{their_miss * 100:.2f}% / {our_miss * 100:.2f}%")
                rows.append((label, spec, class_name, name, capacity, their_miss, our_miss,
                             requests / their_s, requests / our_s))
                if name == "arc_P3":
                    speeds.append((requests / their_s / 1e6, requests / our_s / 1e6))
        best = (max(s[0] for s in speeds), max(s[1] for s in speeds))
        print(f"| {label} | " + " | ".join(cells) + f" | {best[0]:.2f} / {best[1]:.2f} |")
    with open(os.path.join(args.dir, "policies.csv"), "w") as f:
        f.write("policy,spec,libcachesim_class,trace,capacity_objects,libcachesim_miss_ratio,"
                "tiercache_miss_ratio,libcachesim_req_s,tiercache_req_s\n")
        for r in rows:
            f.write("%s,%s,%s,%s,%d,%.6f,%.6f,%.0f,%.0f\n" % r)


if __name__ == "__main__":
    main()
