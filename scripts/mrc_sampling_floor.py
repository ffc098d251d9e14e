#!/usr/bin/env python3
"""The error that sampling keys alone causes in a miss-ratio curve, whatever the miniature.

Usage: mrc_sampling_floor.py TRACE.lis[.zst] [--rate 0.01] [--samples 3] [--trials 200]

For an ARC-format trace (data/arc_*.lis.zst: "start count ..." per line, one block per count),
LRU's hits of every request at the eight default sizes of `tiercache mrc` (0.1% to 50% of the
keys, in objects) come from exact stack distances. A perfect miniature would give each sampled key
exactly those hits; this script draws `--trials` sets of `--samples` samples at `--rate` (each key
kept with probability `rate`) and reports the mean absolute error, over the sizes, of the mean of
each set's estimates against the full curve, for the two estimators `tiercache mrc` offers:

- plain: a sample's hits over its requests (SHARDS);
- stratified: each stratum's (keys by ⌊log2⌋ of their request count) hit ratio in the sample,
  weighted by the stratum's share of the trace's requests; a stratum the sample lacks pools the
  nearest ones.

What it prints is a floor for each estimator: a real miniature adds its own error (a cache of a
few objects stands poorly for one of many). Needs numpy.
"""

import argparse
import subprocess
import sys

import numpy as np

FRACTIONS = [0.001, 0.003, 0.01, 0.03, 0.05, 0.1, 0.2, 0.5]


def blocks(path):
    text = (subprocess.run(["zstd", "-dc", path], capture_output=True, text=True, check=True).stdout
            if path.endswith(".zst") else open(path).read())
    keys = []
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if len(fields) < 2:
            sys.exit(f"{path}:{number}: expected 'start count ...', got {line!r}")
        start, count = int(fields[0]), int(fields[1])
        keys.extend(range(start, start + count))
    return np.array(keys, dtype=np.int64)


def stack_distances(kid, keys):
    """Each request's LRU stack distance in objects (a huge number for a first request)."""
    n = len(kid)
    tree = np.zeros(n + 1, dtype=np.int64)
    last = np.full(keys, -1, dtype=np.int64)
    dist = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)

    def add(i, d):
        i += 1
        while i <= n:
            tree[i] += d
            i += i & -i

    def prefix(i):
        s = 0
        while i > 0:
            s += tree[i]
            i -= i & -i
        return s

    for i, k in enumerate(kid.tolist()):
        p = last[k]
        if p >= 0:
            dist[i] = prefix(i) - prefix(p + 1) + 1
            add(p, -1)
        add(i, 1)
        last[k] = i
    return dist


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("trace")
    parser.add_argument("--rate", type=float, default=0.01)
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if not 0 < args.rate <= 1:
        sys.exit(f"--rate must be in (0, 1], got {args.rate}")
    _, kid = np.unique(blocks(args.trace), return_inverse=True)
    keys, n = int(kid.max()) + 1, len(kid)
    dist = stack_distances(kid, keys)
    requests = np.bincount(kid, minlength=keys)
    sizes = [max(1, int(keys * f)) for f in FRACTIONS]
    hits = {c: np.bincount(kid, weights=(dist <= c), minlength=keys) for c in sizes}
    full = {c: 1 - hits[c].sum() / n for c in sizes}
    stratum = np.floor(np.log2(requests)).astype(int)
    strata = stratum.max() + 1
    share = np.bincount(stratum, weights=requests, minlength=strata)

    def stratified(kept, c):
        got = np.bincount(stratum[kept], weights=requests[kept], minlength=strata)
        hit = np.bincount(stratum[kept], weights=hits[c][kept], minlength=strata)
        total = 0.0
        for s in np.nonzero(share)[0]:
            low, high = s, s
            while got[low:high + 1].sum() == 0:
                low, high = max(0, low - 1), min(strata - 1, high + 1)
            total += share[s] * hit[low:high + 1].sum() / got[low:high + 1].sum()
        return 1 - total / n

    rng = np.random.default_rng(args.seed)
    errors = {"plain": [], "stratified": []}
    for _ in range(args.trials):
        estimates = {name: {c: [] for c in sizes} for name in errors}
        for _ in range(args.samples):
            kept = rng.random(keys) < args.rate
            if not kept.any():
                continue
            for c in sizes:
                estimates["plain"][c].append(1 - hits[c][kept].sum() / requests[kept].sum())
                estimates["stratified"][c].append(stratified(kept, c))
        for name in errors:
            if estimates[name][sizes[0]]:
                errors[name].append(np.mean([abs(np.mean(estimates[name][c]) - full[c])
                                             for c in sizes]))
    print(f"{args.trace}: {n} requests, {keys} keys; rate {args.rate}, {args.samples} samples a "
          f"point, {args.trials} trials; a perfect miniature's mean absolute error, in points:")
    for name, values in errors.items():
        values = 100 * np.array(values)
        print(f"  {name:10s} mean {values.mean():.2f}, median {np.median(values):.2f}, "
              f"10th percentile {np.percentile(values, 10):.2f}, 90th {np.percentile(values, 90):.2f}")


if __name__ == "__main__":
    main()
