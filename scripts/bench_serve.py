#!/usr/bin/env python3
"""`tiercache serve` against its peers, over NBD, with fio's nbd engine as the client.

One backing file on the machine's disk (filled with data, so that every read touches the
disk), served by each of:

  tiercache      tiercache serve --direct: the cache in DRAM, the file read with O_DIRECT
  nbdkit-cache   nbdkit's cache filter (cache-on-read, 4 KiB blocks, its cache file in
                 /dev/shm: memory, as tiercache's DRAM tier) in front of the same file served
                 with O_DIRECT by qemu-nbd --cache=none. nbdkit 1.32's file plugin has no
                 direct I/O, and its cache=none cannot be given beside the cache filter (which
                 takes `cache=` itself), so the filter reaches the file through nbdkit's nbd
                 plugin and a qemu-nbd over a Unix socket.
  qemu-nbd       qemu-nbd --cache=none --aio=threads: the file with O_DIRECT, no cache at all.

Workloads (4 KiB, iodepth 16, 1 and 2 jobs, each job its own connection):
  zipf-read      random reads, Zipf 0.9 over the whole export
  zipf-mix       90% reads, 10% writes, Zipf 0.9
  uniform-read   random reads, uniform (a cache cannot help: its cost shows)
and, for write-back against write-through (tiercache alone, both over a mapped tier in
/dev/shm that holds every block written, the backing file behaving as a disk: `--backing-profile
hdd`, since the machine's own disk may be flash):
  random-write   uniform random writes over the first quarter of the export

nbdkit-cache-file is nbdkit's cache filter over its own file plugin, buffered: the page cache
holds the file beside the filter's cache, which can only flatter it; it is there to show that
the chain through qemu-nbd is not what makes nbdkit-cache slow.

Each server is started fresh and warmed with the workload for --warmup seconds before each
measured run. Servers alternate within a round and the order reverses each round (A B C,
C B A, ...), so a slow spell of the machine lands on all of them. The table gives the median
IOPS and p99 latency of the rounds, and the ratios to the peers.

    scripts/bench_serve.py [--size 2GiB] [--cache 256MiB] [--runtime 15] [--warmup 10]
                           [--rounds 2] [--dir /var/tmp/tiercache-bench-serve] [--json FILE]

Needs fio, qemu-nbd and nbdkit (Debian: fio qemu-utils nbdkit), and a release build of
tiercache (`cargo build --release -p tiercache-cli`).
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from machine import cpu_model

ROOT = Path(__file__).resolve().parent.parent
BINARY = ROOT / "target" / "release" / "tiercache"

UNITS = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def size_bytes(text):
    text = text.lower().removesuffix("b").removesuffix("i")
    if text and text[-1] in UNITS:
        return int(float(text[:-1]) * UNITS[text[-1]])
    return int(text)


def fill(path, size):
    """A backing file of `size` bytes of data (no holes: reads of holes never touch the disk)."""
    if path.exists() and path.stat().st_size == size:
        return
    print(f"writing the {size >> 20} MiB backing file {path}...", file=sys.stderr)
    chunk = bytearray(os.urandom(1 << 20))
    with open(path, "wb") as f:
        for i in range(size >> 20):
            chunk[:8] = i.to_bytes(8, "little")
            f.write(chunk)
        f.flush()
        os.fsync(f.fileno())


def wait_for(socket, process, what):
    for _ in range(600):
        if socket.exists():
            return
        if process.poll() is not None:
            sys.exit(f"{what} exited before it listened (status {process.returncode})")
        time.sleep(0.05)
    sys.exit(f"{what} did not listen on {socket}")


class Server:
    """One server (and what it needs behind it), started fresh; `stop` ends all of them."""

    def __init__(self, name, args, workdir, mode="wt"):
        self.name = name
        self.socket = workdir / f"{name}.sock"
        self.processes = []
        self.cleanup = []
        self.kill = False
        backing = args.backing
        cache = args.cache
        for stale in workdir.glob("*.sock"):
            stale.unlink()
        log = open(workdir / f"{name}.log", "ab")
        if name.startswith("tiercache"):
            command = [str(args.binary), "serve", "--backing", str(backing), "--direct",
                       "--listen", f"unix:{self.socket}", "--mode", mode,
                       "--threads-per-connection", "16"]
            if name == "tiercache":
                command += ["--dram", cache]
            else:
                # Write-back needs a persistent tier: a mapped one in memory, fresh each run.
                tier = Path("/dev/shm") / f"tiercache-bench-serve-{os.getpid()}.tier"
                tier.unlink(missing_ok=True)
                self.cleanup.append(tier)
                command += ["--dram", "0", "--slow-path", str(tier), "--slow-size",
                            args.write_cache, "--recover", "wipe",
                            "--backing-profile", args.write_backing]
                # Its dirty blocks are not written back at the end: over an emulated disk that
                # takes minutes, and it is not what is measured.
                self.kill = mode == "wb"
            self.start(command, log, name)
        elif name == "nbdkit-cache":
            behind = workdir / "qemu-nbd-behind.sock"
            self.start(["qemu-nbd", "-k", str(behind), "-f", "raw", "--cache=none",
                        "--aio=threads", "-e", "16", "-t", str(backing)], log, "qemu-nbd", behind)
            env = dict(os.environ, TMPDIR="/dev/shm")
            self.start(["nbdkit", "-f", "-U", str(self.socket), "--filter=cache", "nbd",
                        f"socket={behind}", "cache=writethrough", "cache-on-read=true",
                        f"cache-max-size={size_bytes(cache)}", "cache-min-block-size=4096"],
                       log, name, env=env)
        elif name == "nbdkit-cache-file":
            # nbdkit's own file plugin, buffered: the page cache caches the file beside the
            # filter, which can only help it.
            env = dict(os.environ, TMPDIR="/dev/shm")
            self.start(["nbdkit", "-f", "-U", str(self.socket), "--filter=cache", "file",
                        f"file={backing}", "cache=writethrough", "cache-on-read=true",
                        f"cache-max-size={size_bytes(cache)}", "cache-min-block-size=4096"],
                       log, name, env=env)
        elif name == "qemu-nbd":
            self.start(["qemu-nbd", "-k", str(self.socket), "-f", "raw", "--cache=none",
                        "--aio=threads", "-e", "16", "-t", str(backing)], log, name)
        else:
            raise ValueError(name)

    def start(self, command, log, what, socket=None, env=None):
        process = subprocess.Popen(command, stdout=log, stderr=log, env=env)
        self.processes.append(process)
        wait_for(socket or self.socket, process, what)

    def uri(self):
        return f"nbd+unix:///?socket={self.socket}"

    def stop(self):
        for process in reversed(self.processes):
            process.send_signal(signal.SIGKILL if self.kill else signal.SIGTERM)
            try:
                process.wait(timeout=120)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for path in self.cleanup:
            path.unlink(missing_ok=True)


WORKLOADS = {
    "zipf-read": ["--rw=randread", "--random_distribution=zipf:0.9"],
    "zipf-mix": ["--rw=randrw", "--rwmixread=90", "--random_distribution=zipf:0.9"],
    "uniform-read": ["--rw=randread"],
    "random-write": ["--rw=randwrite"],
}


def fio(server, workload, jobs, seconds, args, workdir):
    command = ["fio", "--name=bench", "--ioengine=nbd", f"--uri={server.uri()}",
               "--bs=4k", "--iodepth=16", f"--numjobs={jobs}", "--group_reporting",
               "--time_based", f"--runtime={seconds}", "--output-format=json",
               "--randrepeat=0", *WORKLOADS[workload]]
    if workload == "random-write":
        command.append(f"--size={args.size_bytes // 4}")
    out = subprocess.run(command, capture_output=True, text=True, cwd=workdir)
    if out.returncode != 0:
        sys.exit(f"fio failed against {server.name}: {out.stderr or out.stdout}")
    job = json.loads(out.stdout[out.stdout.index("{"):])["jobs"][0]
    iops = job["read"]["iops"] + job["write"]["iops"]
    side = job["read"] if job["read"]["iops"] >= job["write"]["iops"] else job["write"]
    p99 = side["clat_ns"].get("percentile", {}).get("99.000000", 0) / 1000
    return {"iops": iops, "p99_us": p99}


def run(args):
    workdir = Path(args.dir)
    workdir.mkdir(parents=True, exist_ok=True)
    args.size_bytes = size_bytes(args.size)
    args.backing = workdir / "backing.img"
    fill(args.backing, args.size_bytes)
    results = []
    plans = [(w, j, ["tiercache", "nbdkit-cache", "nbdkit-cache-file", "qemu-nbd"], "wt")
             for w in ["zipf-read", "zipf-mix", "uniform-read"] for j in args.jobs]
    plans += [("random-write", j, ["tiercache-wt", "tiercache-wb"], None) for j in args.jobs]
    for workload, jobs, servers, _ in plans:
        for round_ in range(args.rounds):
            order = servers if round_ % 2 == 0 else list(reversed(servers))
            for name in order:
                mode = {"tiercache-wt": "wt", "tiercache-wb": "wb"}.get(name, "wt")
                server = Server(name, args, workdir, mode)
                try:
                    if args.warmup > 0 and workload != "random-write":
                        fio(server, workload, jobs, args.warmup, args, workdir)
                    measured = fio(server, workload, jobs, args.runtime, args, workdir)
                finally:
                    server.stop()
                row = {"workload": workload, "jobs": jobs, "server": name, "round": round_,
                       **measured}
                print(f"{workload:13} jobs={jobs} {name:13} round {round_}: "
                      f"{measured['iops']:10.0f} IOPS  p99 {measured['p99_us']:8.0f} us",
                      file=sys.stderr)
                results.append(row)
    return results


def median(rows, key):
    return statistics.median(r[key] for r in rows)


def table(results):
    lines = ["| workload | jobs | server | IOPS (median) | p99 us (median) | vs nbdkit-cache "
             "| vs qemu-nbd |", "|---|---|---|---|---|---|---|"]
    groups = {}
    for r in results:
        groups.setdefault((r["workload"], r["jobs"]), {}).setdefault(r["server"], []).append(r)
    for (workload, jobs), servers in groups.items():
        iops = {name: median(rows, "iops") for name, rows in servers.items()}
        for name, rows in servers.items():
            p99 = median(rows, "p99_us")
            peer = lambda other: f"{iops[name] / iops[other]:.2f}x" if other in iops else ""
            versus = ([peer("nbdkit-cache"), peer("qemu-nbd")] if name != "tiercache-wb"
                      else [f"{iops[name] / iops['tiercache-wt']:.1f}x write-through", ""])
            lines.append(f"| {workload} | {jobs} | {name} | {iops[name]:.0f} | {p99:.0f} | "
                         f"{versus[0]} | {versus[1]} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="2GiB", help="the backing file (default 2GiB)")
    parser.add_argument("--cache", default="256MiB", help="each cache's size (default 256MiB)")
    parser.add_argument("--write-cache", default="1GiB",
                        help="the mapped tier of the write-back runs (default 1GiB)")
    parser.add_argument("--write-backing", default="hdd",
                        help="the device the write-back runs' backing file behaves as "
                             "(default hdd)")
    parser.add_argument("--runtime", type=int, default=15, help="seconds measured per run")
    parser.add_argument("--warmup", type=int, default=10, help="seconds of warm-up per run")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--dir", default="/var/tmp/tiercache-bench-serve",
                        help="where the backing file lives (the machine's disk, not tmpfs)")
    parser.add_argument("--binary", default=str(BINARY))
    parser.add_argument("--json", help="write every run's figures here")
    args = parser.parse_args()
    for tool in ["fio", "qemu-nbd", "nbdkit"]:
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is missing (Debian: apt-get install fio qemu-utils nbdkit)")
    if not Path(args.binary).exists():
        sys.exit(f"{args.binary} is missing: cargo build --release -p tiercache-cli")
    results = run(args)
    print(f"machine: {cpu_model()}, {os.cpu_count()} CPUs; backing {args.size} on "
          f"{args.dir}; caches {args.cache}; {args.rounds} rounds of {args.runtime} s after "
          f"{args.warmup} s of warm-up; fio 4 KiB, iodepth 16")
    print(table(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
