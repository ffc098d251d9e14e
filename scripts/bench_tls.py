#!/usr/bin/env python3
"""`tiercache serve` with TLS next to qemu-nbd with the same x509 credentials, and without TLS
next to another build of itself, over NBD, with libnbd's `nbdcopy` as the client (fio's nbd
engine takes no certificate files, and this QEMU's `qemu-img bench` no TLS object).

One backing file in --dir (filled with data), served whole from memory by each server, so that
what is measured is the protocol and the encryption, not the disk:

  tiercache-tls   tiercache serve --dram (the whole file) --tls-cert --tls-key --tls-client-ca
  qemu-nbd-tls    qemu-nbd --tls-creds (tls-creds-x509, verify-peer: a client certificate
                  required, as tiercache's --tls-client-ca), buffered: the page cache holds
                  the file
  tiercache       tiercache serve --dram (the whole file), no TLS
  baseline        the same with --baseline BINARY (an earlier build), if given
  qemu-nbd        qemu-nbd, buffered, no TLS

The certificates (a CA, the server's for localhost, a client's) are made with openssl in
--dir. Each run is `nbdcopy` of the whole export to `null:` in 4 KiB reads, --depth requests in
flight on one connection over a unix socket, after a warm-up run; the servers alternate within a round and the order reverses
each round. The table gives each server's median ops/s and the ratios of the pairs.

    scripts/bench_tls.py [--size 256MiB] [--depth 16] [--rounds 5]
                         [--binary target/release/tiercache] [--baseline OTHER_BINARY]
                         [--dir /var/tmp/tiercache-bench-tls] [--json FILE]

Needs nbdcopy (Debian: libnbd-bin), qemu-nbd (qemu-utils), openssl, and a release build of tiercache
(`cargo build --release -p tiercache-cli`).
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BINARY = ROOT / "target" / "release" / "tiercache"
sys.path.insert(0, str(ROOT / "scripts"))
from bench_hits import cpu_model  # noqa: E402
from bench_serve import wait_for  # noqa: E402


def certificates(dir):
    """A CA, a server certificate for localhost and a client certificate in `dir`; the
    client's credentials in dir/client (QEMU's tls-creds-x509 layout)."""
    def openssl(*args):
        subprocess.run(["openssl", *args], cwd=dir, check=True, capture_output=True)
    new_key = ["-newkey", "rsa:2048", "-nodes", "-keyout"]
    openssl("req", "-x509", *new_key, "ca-key.pem", "-out", "ca-cert.pem", "-days", "2",
            "-subj", "/CN=tiercache bench CA")
    extensions = {
        "server": ("/CN=localhost", "subjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth\n"),
        "client": ("/CN=client", "extendedKeyUsage=clientAuth\n"),
    }
    for name, (subject, extension) in extensions.items():
        (dir / f"{name}.ext").write_text(extension)
        openssl("req", *new_key, f"{name}-key.pem", "-out", f"{name}.csr", "-subj", subject)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca-cert.pem", "-CAkey",
                "ca-key.pem", "-CAcreateserial", "-out", f"{name}-cert.pem", "-days", "2",
                "-extfile", f"{name}.ext")
    client = dir / "client"
    client.mkdir(exist_ok=True)
    for name in ["ca-cert.pem", "client-cert.pem", "client-key.pem"]:
        (client / name).write_bytes((dir / name).read_bytes())


class Server:
    def __init__(self, name, command, socket, tls, log):
        self.name, self.command, self.socket, self.tls, self.log = name, command, socket, tls, log
        self.process = None

    def start(self):
        self.socket.unlink(missing_ok=True)
        self.process = subprocess.Popen(self.command, stdout=self.log, stderr=self.log)
        wait_for(self.socket, self.process, self.name)

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=60)
        self.socket.unlink(missing_ok=True)


def bench(server, args, creds):
    """libnbd's nbdcopy of the whole export to nowhere, in 4 KiB reads over one connection with
    --depth in flight: reads a second."""
    uri = f"nbd+unix:///?socket={server.socket}"
    if server.tls:
        uri = f"nbds+unix:///?socket={server.socket}&tls-certificates={creds}&tls-hostname=localhost"
    command = ["nbdcopy", "--connections=1", f"--requests={args.depth}", "--request-size=4096",
               "--threads=1", uri, "null:"]
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return args.size_bytes / 4096 / (time.perf_counter() - started)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="256MiB", help="the backing file (default 256MiB)")
    parser.add_argument("--depth", type=int, default=16, help="requests in flight")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--binary", default=str(BINARY))
    parser.add_argument("--baseline", help="another tiercache build, served without TLS")
    parser.add_argument("--dir", default="/var/tmp/tiercache-bench-tls")
    parser.add_argument("--json", help="write every run's figure here")
    args = parser.parse_args()
    units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
    number, unit = re.fullmatch(r"(\d+)(KiB|MiB|GiB)", args.size).groups()
    size = args.size_bytes = int(number) * units[unit]
    work = Path(args.dir)
    work.mkdir(parents=True, exist_ok=True)
    certificates(work)
    backing = work / "backing.img"
    with open(backing, "wb") as f:
        block = os.urandom(1 << 20)
        for _ in range(size >> 20):
            f.write(block)
    log = open(work / "servers.log", "a")
    tls = ["--tls-cert", str(work / "server-cert.pem"), "--tls-key", str(work / "server-key.pem"),
           "--tls-client-ca", str(work / "ca-cert.pem")]
    dram = f"{2 * size >> 20}MiB"

    def tiercache(binary, socket, more):
        return [binary, "serve", "--backing", str(backing), "--dram", dram,
                "--listen", f"unix:{socket}", *more]

    def qemu_nbd(socket, more):
        return ["qemu-nbd", "-f", "raw", "-k", str(socket), "--shared", "8", "--persistent",
                *more, str(backing)]

    qemu_tls = ["--object", f"tls-creds-x509,id=tls0,endpoint=server,dir={work},verify-peer=on",
                "--tls-creds", "tls0"]
    servers = [
        Server("tiercache-tls", tiercache(args.binary, work / "a.sock", tls), work / "a.sock",
               True, log),
        Server("qemu-nbd-tls", qemu_nbd(work / "b.sock", qemu_tls), work / "b.sock", True, log),
        Server("tiercache", tiercache(args.binary, work / "c.sock", []), work / "c.sock", False,
               log),
        Server("qemu-nbd", qemu_nbd(work / "d.sock", []), work / "d.sock", False, log),
    ]
    if args.baseline:
        servers.insert(3, Server("baseline", tiercache(args.baseline, work / "e.sock", []),
                                 work / "e.sock", False, log))
    figures = {s.name: [] for s in servers}
    for round in range(args.rounds):
        for server in servers if round % 2 == 0 else servers[::-1]:
            server.start()
            try:
                bench(server, args, work / "client")  # Warm-up: every block read once.
                figures[server.name].append(bench(server, args, work / "client"))
            finally:
                server.stop()
            print(f"round {round + 1}: {server.name}: {figures[server.name][-1]:,.0f} ops/s",
                  file=sys.stderr)
    median = {name: statistics.median(runs) for name, runs in figures.items()}
    print(f"{cpu_model()}, {os.cpu_count()} cores; nbdcopy of {args.size} in 4 KiB reads, "
          f"depth {args.depth}, one connection, medians of {args.rounds} rounds")
    print()
    print("| server | ops/s (median) | runs |")
    print("|---|---|---|")
    for name, runs in figures.items():
        print(f"| {name} | {median[name]:,.0f} | {', '.join(f'{r:,.0f}' for r in runs)} |")
    print()
    pairs = [("tiercache-tls", "qemu-nbd-tls"), ("tiercache", "qemu-nbd"),
             ("tiercache-tls", "tiercache"), ("tiercache", "baseline")]
    for a, b in pairs:
        if a in median and b in median:
            print(f"{a} / {b}: {median[a] / median[b]:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"figures": figures, "median": median}, indent=1))


if __name__ == "__main__":
    main()
