#!/usr/bin/env python3
"""Peer check: miss ratios from libCacheSim (the `libcachesim` Python package, an independent
C simulator) on an oracleGeneral trace, printed as JSON for tiercache's tests to compare with.

Usage: peer_libcachesim.py TRACE bytes|objects CAPACITY [CAPACITY ...] [--only NAME,NAME]
                           [--repeat N]
With `objects`, every object counts as one unit of capacity (libCacheSim's ignore_obj_size).
Prints {"<policy>": {"<capacity>": [object_miss_ratio, byte_miss_ratio, lowest, highest], ...}}:
with --repeat N, each cell is run N times in this one process (libCacheSim's randomized
policies draw from a generator that is not seeded per cache but goes on across runs, while
separate processes started within a second draw alike), the ratios are the runs' means and
lowest and highest their object miss ratios' range.
"""
import json
import sys

try:
    import libcachesim as lcs
except ImportError:
    sys.exit("the libcachesim Python package is missing: pip install libcachesim==0.3.5")

POLICIES = {
    "lru": lambda c: lcs.LRU(cache_size=c),
    "fifo": lambda c: lcs.FIFO(cache_size=c),
    "arc": lambda c: lcs.ARC(cache_size=c),
    "clock": lambda c: lcs.Clock(cache_size=c),
    "lfu": lambda c: lcs.LFU(cache_size=c),
    "s3fifo": lambda c: lcs.S3FIFO(cache_size=c),
    "sieve": lambda c: lcs.Sieve(cache_size=c),
    "slru": lambda c: lcs.SLRU(cache_size=c),
    "twoq": lambda c: lcs.TwoQ(cache_size=c),
    "lruk": lambda c: lcs.LRUK(cache_size=c),
    "gdsf": lambda c: lcs.GDSF(cache_size=c),
    "lfuda": lambda c: lcs.LFUDA(cache_size=c),
    "mq": lambda c: lcs.MQ(cache_size=c),
    "wtinylfu": lambda c: lcs.WTinyLFU(cache_size=c),
    "random": lambda c: lcs.Random(cache_size=c),
    "lruprob": lambda c: lcs.LRUProb(cache_size=c),
    "hyperbolic": lambda c: lcs.Hyperbolic(cache_size=c),
    "clock2qplus": lambda c: lcs.Clock2QPlus(cache_size=c),
    "lecar": lambda c: lcs.LeCaR(cache_size=c),
    "lirs": lambda c: lcs.LIRS(cache_size=c),
    "clockpro": lambda c: lcs.ClockPro(cache_size=c),
    "belady": lambda c: lcs.Belady(cache_size=c),
    "beladysize": lambda c: lcs.BeladySize(cache_size=c),
    "size": lambda c: lcs.Size(cache_size=c),
    "lhd": lambda c: lcs.LHD(cache_size=c),
    "cacheus": lambda c: lcs.Cacheus(cache_size=c),
}


def main():
    args = sys.argv[1:]
    only = None
    if "--only" in args:
        at = args.index("--only")
        only = args[at + 1].split(",")
        del args[at:at + 2]
        unknown = [name for name in only if name not in POLICIES]
        if unknown:
            sys.exit(f"--only: unknown policies {unknown}; known: {', '.join(POLICIES)}")
    repeat = 1
    if "--repeat" in args:
        at = args.index("--repeat")
        repeat = int(args[at + 1])
        del args[at:at + 2]
        if repeat < 1:
            sys.exit("--repeat must be at least 1")
    trace, unit = args[0], args[1]
    if unit not in ("bytes", "objects"):
        sys.exit(f"unit must be bytes or objects, not {unit}")
    capacities = [int(c) for c in args[2:]]
    out = {}
    for name, make in POLICIES.items():
        if only is not None and name not in only:
            continue
        out[name] = {}
        for capacity in capacities:
            runs = []
            for _ in range(repeat):
                params = lcs.ReaderInitParam()
                params.ignore_obj_size = unit == "objects"
                reader = lcs.TraceReader(
                    trace=trace,
                    trace_type=lcs.TraceType.ORACLE_GENERAL_TRACE,
                    reader_init_params=params,
                )
                runs.append(make(capacity).process_trace(reader))
            miss = sum(r[0] for r in runs) / repeat
            byte_miss = sum(r[1] for r in runs) / repeat
            lowest, highest = min(r[0] for r in runs), max(r[0] for r in runs)
            out[name][str(capacity)] = [miss, byte_miss, lowest, highest]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
