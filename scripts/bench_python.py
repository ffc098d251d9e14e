#!/usr/bin/env python3
"""A policy sweep from Python: tiercache.sweep against the same cells through libcachesim.

Six policies (LRU, ARC, S3-FIFO, FIFO, CLOCK, LFU) at 8 capacities (0.1% to 50% of the trace's
footprint, as `tiercache sweep` picks them) over two traces: the CloudPhysics trace of data/
and 10 million requests of Zipf 1.0 over 1 million 4 KiB objects (`tiercache trace gen`, seed
42, oracleGeneral). Each side runs end to end in this process, alternating, --rounds times:

- tiercache: `tiercache.sweep(trace, policies=..., capacities=...)` per trace (its cells on
  every core, each reading the trace itself);
- libcachesim: a reader and `process_trace` per cell, on every core too (a process per core,
  since one Python process runs one simulation at a time), and also one after another, as a
  notebook usually runs them.

Prints medians, the ratio, and the largest miss-ratio difference per policy; LRU and FIFO must
agree exactly (the same algorithm). Writes bench_python.json into --dir.

Usage: scripts/bench_python.py [--dir /tmp/tiercache-bench-python] [--rounds 2] [--quick]
(after `pip install .`; installs libcachesim 0.3.5 if missing)
"""
import argparse
import concurrent.futures
import json
import os
import statistics
import subprocess
import sys
import time

from machine import cpu_model

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POLICIES = ["lru", "arc", "s3fifo", "fifo", "clock", "lfu"]
# tiercache's names for the same algorithms: its LFU ages counts by default (Hibachi's rule);
# libCacheSim's LFU does not.
OURS = {"lfu": "lfu:aging_threshold=none"}
FRACTIONS = [0.001, 0.003, 0.01, 0.03, 0.05, 0.1, 0.2, 0.5]


def libcachesim_cell(trace, policy, capacity):
    import libcachesim as lcs

    make = {
        "lru": lcs.LRU, "fifo": lcs.FIFO, "arc": lcs.ARC,
        "clock": lcs.Clock, "lfu": lcs.LFU, "s3fifo": lcs.S3FIFO,
    }[policy]
    reader = lcs.TraceReader(trace=trace, trace_type=lcs.TraceType.ORACLE_GENERAL_TRACE)
    miss, _byte_miss = make(cache_size=capacity).process_trace(reader)
    return miss


def footprint(trace):
    import tiercache

    t = tiercache.read_trace(trace)
    # Each object's size as its first request has it (oracleGeneral keeps one size per object).
    import numpy as np

    _, first = np.unique(t.key, return_index=True)
    return int(t.size[first].astype(np.uint64).sum())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="/tmp/tiercache-bench-python")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="1M Zipf requests instead of 10M")
    args = parser.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    try:
        import libcachesim  # noqa: F401
    except ImportError:
        subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", "libcachesim==0.3.5"])
    import tiercache

    requests = 1_000_000 if args.quick else 10_000_000
    zipf = os.path.join(args.dir, f"zipf1.0_1M_{requests // 1_000_000}M.oracleGeneral.bin")
    if not os.path.exists(zipf):
        binary = os.path.join(ROOT, "target", "release", "tiercache")
        subprocess.check_call(["cargo", "build", "--release", "-q", "-p", "tiercache-cli"], cwd=ROOT)
        subprocess.check_call([binary, "trace", "gen", "--dist", "zipf", "--theta", "1.0",
                               "--objects", "1000000", "--requests", str(requests), "--size", "4096",
                               "--seed", "42", "--to", "oracle-general", "-o", zipf],
                              stdout=subprocess.DEVNULL)
    traces = [os.path.join(ROOT, "data", "cloudPhysicsIO.oracleGeneral.bin.zst"), zipf]
    capacities = {t: sorted({max(1, int(footprint(t) * f)) for f in FRACTIONS}) for t in traces}
    cells = [(t, p, c) for t in traces for p in POLICIES for c in capacities[t]]
    workers = os.cpu_count() or 1
    print(f"machine: {workers} cores, {cpu_model()}")
    print(f"{len(cells)} cells: {len(POLICIES)} policies x 8 capacities x {len(traces)} traces")

    def run_tiercache():
        rows = {}
        for t in traces:
            policies = [OURS.get(p, p) for p in POLICIES]
            frame = tiercache.sweep(t, policies=policies, capacities=capacities[t], progress=False)
            assert frame["error"].isna().all(), frame["error"].dropna().tolist()
            # Rows come in cell order (policy, then capacity); the policy column holds the
            # report's label (lfu(aging=5.5)), so cells are matched by position.
            mine = [(t, p, c) for p in POLICIES for c in capacities[t]]
            rows.update(zip(mine, frame["miss_ratio"]))
        return rows

    def run_libcachesim_parallel():
        with concurrent.futures.ProcessPoolExecutor(max_workers=workers) as pool:
            misses = list(pool.map(libcachesim_cell, *zip(*cells)))
        return dict(zip(cells, misses))

    def run_libcachesim_serial():
        return {cell: libcachesim_cell(*cell) for cell in cells}

    sides = [("tiercache.sweep", run_tiercache),
             ("libcachesim, all cores", run_libcachesim_parallel),
             ("libcachesim, one after another", run_libcachesim_serial)]
    times = {name: [] for name, _ in sides}
    results = {}
    for r in range(args.rounds):
        for name, run in sides:
            start = time.perf_counter()
            results[name] = run()
            times[name].append(time.perf_counter() - start)
            print(f"round {r + 1}: {name:<32} {times[name][-1]:8.1f} s", flush=True)

    ours = results["tiercache.sweep"]
    theirs = results["libcachesim, all cores"]
    diffs = {}
    for (t, p, c), miss in theirs.items():
        diffs[p] = max(diffs.get(p, 0.0), abs(ours[(t, p, c)] - miss))
    median = {name: statistics.median(ts) for name, ts in times.items()}
    print()
    print(f"{'side':<32} {'median s':>9} {'tiercache faster':>17}")
    for name in times:
        print(f"{name:<32} {median[name]:>9.1f} {median[name] / median['tiercache.sweep']:>16.2f}x")
    print()
    print("largest miss-ratio difference from libcachesim, per policy:")
    for p in POLICIES:
        print(f"  {p:<7} {diffs[p]:.6f}")
    for p in ("lru", "fifo"):
        assert diffs[p] < 1e-9, f"{p} differs from libcachesim by {diffs[p]}"
    with open(os.path.join(args.dir, "bench_python.json"), "w") as f:
        json.dump({"cpu": cpu_model(), "cores": workers, "cells": len(cells),
                   "seconds": times, "median_seconds": median, "max_miss_ratio_difference": diffs,
                   "zipf_requests": requests}, f, indent=2)


if __name__ == "__main__":
    main()
