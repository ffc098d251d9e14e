#!/usr/bin/env python3
"""Miss-ratio curves of a trace, from Python: read it, sweep policies over cache sizes, plot.

    pip install '.[plot]'        # the package and matplotlib
    python3 examples/mrc.py data/cloudPhysicsIO.oracleGeneral.bin.zst -o mrc.png

Capacities run from 0.1% to 50% of the trace's footprint (the bytes of its distinct keys),
as `tiercache sweep` picks them; the sweep runs on every core, `--ray` on a Ray cluster.
"""
import argparse
import sys

import numpy as np

import tiercache

# Checked before the sweep, not after it: a missing plotting library stops the run at once.
try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit("examples/mrc.py draws with matplotlib: pip install '.[plot]' (or matplotlib)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("--format", default="auto")
    parser.add_argument("--policies", default="lru,fifo,clock,arc,s3fifo,lfu")
    parser.add_argument("--ray", action="store_true", help="run the cells as Ray tasks")
    parser.add_argument("-o", "--output", default="mrc.png")
    args = parser.parse_args()

    trace = tiercache.read_trace(args.trace, format=args.format)
    _, first = np.unique(trace.key, return_index=True)
    footprint = int(trace.size[first].astype(np.uint64).sum())
    print(f"{len(trace.key)} requests, {len(first)} keys, footprint {footprint / 2**20:.1f} MiB")
    fractions = np.geomspace(0.001, 0.5, 12)
    capacities = sorted({max(1, int(footprint * f)) for f in fractions})

    frame = tiercache.sweep(
        args.trace,
        policies=args.policies.split(","),
        capacities=capacities,
        format=args.format,
        backend="ray" if args.ray else "local",
    )
    print(frame[["policy", "capacity", "miss_ratio"]].to_string(index=False))

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for policy, rows in frame.groupby("policy", sort=False):
        ax.plot(rows["capacity"] / 2**20, rows["miss_ratio"], marker="o", label=policy)
    ax.set_xscale("log")
    ax.set_xlabel("cache size (MiB)")
    ax.set_ylabel("miss ratio")
    ax.set_title(f"miss ratio: {args.trace.rsplit('/', 1)[-1]}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
