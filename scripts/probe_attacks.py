#!/usr/bin/env python3
"""Runs 64 hostile clients of each kind against `tiercache serve` at once, on a unix socket and
its /metrics port on loopback, and measures what a legitimate client gets meanwhile (issue "serve
under attack"):

  listers      finish the greeting, then send NBD_OPT_LIST every 5 s (each answered)
  drippers     drip the handshake a byte a second
  idlers       finish the handshake, then drip a request header a byte every 2 s
  slow-readers pipeline 64 reads of 32 MiB, then read 64 KiB of replies every 3 s
  scrapers     drip an HTTP request line to /metrics a byte a second
  oversized    write 128 MiB past the end of the export (4x the payload maximum)

Every attacker reconnects as soon as it is cut. Before the attack, one client reads the whole
export, so the cache's own memory (its 64 MiB DRAM tier full, and its index) is in the server's
RSS; the rule, stated before the data: the RSS may grow under attack by at most --memory-limit,
which counts the requests' buffers and each connection's threads and fixed buffers. Every 2 s
for --seconds, a legitimate client connects, finishes the handshake and reads 4 KiB (and
scrapes /metrics), within 2 s; the output gives how long each took (the median and the worst),
how many failed, the RSS the cache filled and the peak growth under attack against the limit,
and how many connections the attackers got cut. The server's log is left in
/tmp/tiercache-probe-attacks/server.log.

    scripts/probe_attacks.py [--binary target/release/tiercache] [--seconds 40]
                             [--memory-limit 256MiB] [--json FILE]

An older build that lacks an option the probe gives (`--memory-limit`) runs without it.
"""

import argparse
import json
import os
import socket
import statistics
import struct
import subprocess
import threading
import time

MAGIC = 0x49484156454F5054


def request(kind, cookie, offset, length):
    return struct.pack(">IHHQQI", 0x25609513, 0, kind, cookie, offset, length)


def option(kind):
    return struct.pack(">QII", MAGIC, kind, 0)


def recv_exact(s, n):
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def greeted(sock):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(30)
    s.connect(sock)
    recv_exact(s, 18)
    s.sendall(struct.pack(">I", 3))
    return s


def export(sock):
    s = greeted(sock)
    s.sendall(struct.pack(">QII", MAGIC, 1, 0))
    recv_exact(s, 10)
    return s


def drip(s, data, every, stop):
    for byte in data:
        if stop.is_set():
            return
        time.sleep(every)
        s.sendall(bytes([byte]))


class Attack:
    def __init__(self, sock, metrics, stop):
        self.sock, self.metrics, self.stop = sock, metrics, stop
        self.cut = {}

    def lister(self):
        s = greeted(self.sock)
        while not self.stop.is_set():
            s.sendall(option(3))
            time.sleep(5)
            s.setblocking(False)
            try:
                while s.recv(65536):
                    pass
            except BlockingIOError:
                pass
            s.setblocking(True)

    def dripper(self):
        s = socket.socket(socket.AF_UNIX)
        s.connect(self.sock)
        drip(s, struct.pack(">I", 3) + option(3) * 100, 1.0, self.stop)

    def idler(self):
        s = export(self.sock)
        drip(s, request(0, 1, 0, 4096) * 10, 2.0, self.stop)

    def slow_reader(self):
        s = export(self.sock)
        s.settimeout(2)
        for cookie in range(64):
            s.sendall(request(0, cookie, 0, 32 << 20))
        s.settimeout(3)
        while not self.stop.is_set():
            if not s.recv(64 << 10):
                return
            time.sleep(3)

    def scraper(self):
        host, port = self.metrics
        s = socket.create_connection((host, port))
        drip(s, b"GET /metrics HTTP/1.0\r\n\r\n", 1.0, self.stop)

    def oversized(self):
        s = export(self.sock)
        s.sendall(request(1, 1, 64 << 20, 128 << 20))
        zeros = bytes(1 << 20)
        for _ in range(128):
            s.sendall(zeros)
        s.settimeout(30)
        recv_exact(s, 16)

    def run(self, kind):
        """One attacker of `kind`, reconnecting whenever it is cut."""
        while not self.stop.is_set():
            try:
                getattr(self, kind)()
            except (OSError, ConnectionError):
                self.cut[kind] = self.cut.get(kind, 0) + 1
                time.sleep(0.1)


def legitimate(sock, metrics):
    """A real client's handshake and 4 KiB read, then a real scrape: each one's seconds, or
    the exception it ended with."""
    started = time.time()
    try:
        s = export(sock)
        s.sendall(request(0, 7, 0, 4096))
        reply = recv_exact(s, 16 + 4096)
        assert struct.unpack(">I", reply[4:8])[0] == 0
        s.close()
        served = time.time() - started
    except (OSError, ConnectionError, AssertionError) as e:
        served = "read: " + repr(e)
    started = time.time()
    try:
        h = socket.create_connection(metrics, timeout=30)
        h.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
        assert recv_exact(h, 15).startswith(b"HTTP/1.0 200")
        h.close()
        scraped = time.time() - started
    except (OSError, ConnectionError, AssertionError) as e:
        scraped = "scrape: " + repr(e)
    return served, scraped


def rss(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) * 1024
    return 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default="target/release/tiercache")
    parser.add_argument("--seconds", type=float, default=40)
    parser.add_argument("--memory-limit", default="256MiB")
    parser.add_argument("--json")
    args = parser.parse_args()
    d = "/tmp/tiercache-probe-attacks"
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        os.remove(os.path.join(d, f))
    with open(f"{d}/backing", "wb") as f:
        f.truncate(256 << 20)
    sock = f"{d}/sock"
    help_text = subprocess.run([args.binary, "serve", "--help"], capture_output=True, text=True).stdout
    extra = ["--max-connections", "512"]
    for flag, value in [("--memory-limit", args.memory_limit)]:
        if flag in help_text:
            extra += [flag, value]
    command = [args.binary, "serve", "--backing", f"{d}/backing", "--dram", "64MiB",
               "--listen", "unix:" + sock, "--metrics", "127.0.0.1:0", *extra]
    server = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    metrics = None
    for line in server.stderr:
        if "metrics on http://" in line:
            host, port = line.split("http://")[1].split("/")[0].rsplit(":", 1)
            metrics = (host, int(port))
        if "listening" in line:
            break
    def keep_log():
        with open(f"{d}/server.log", "w") as log:
            for line in server.stderr:
                log.write(line)

    threading.Thread(target=keep_log, daemon=True).start()
    started_rss = rss(server.pid)
    filling = export(sock)
    for i in range(256):
        filling.sendall(request(0, i, i << 20, 1 << 20))
        recv_exact(filling, 16 + (1 << 20))
    filling.close()
    time.sleep(1)
    before = rss(server.pid)
    stop = threading.Event()
    attack = Attack(sock, metrics, stop)
    kinds = ["lister", "dripper", "idler", "slow_reader", "scraper", "oversized"]
    threads = [threading.Thread(target=attack.run, args=(k,), daemon=True)
               for k in kinds for _ in range(64)]
    for t in threads:
        t.start()
    served, scraped, failed, peak, errors = [], [], 0, 0, []
    started = time.time()
    while time.time() - started < args.seconds:
        time.sleep(2)
        peak = max(peak, rss(server.pid) - before)
        for took, times in zip(legitimate(sock, metrics), (served, scraped)):
            if isinstance(took, str):
                failed += 1
                errors.append(took)
            else:
                times.append(took)
    stop.set()
    server.terminate()
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
    result = {
        "binary": args.binary,
        "options": extra,
        "legitimate_reads": len(served),
        "legitimate_scrapes": len(scraped),
        "failed": failed,
        "read_seconds_median": statistics.median(served) if served else None,
        "read_seconds_worst": max(served) if served else None,
        "scrape_seconds_worst": max(scraped) if scraped else None,
        "rss_cache_filled_mib": (before - started_rss) / 2**20,
        "rss_growth_peak_mib": peak / 2**20,
        "memory_limit": args.memory_limit,
        "legitimate_within_2s": all(t <= 2 for t in served + scraped) and failed == 0,
        "attackers_cut": attack.cut,
        "errors": errors,
    }
    print(json.dumps(result, indent=1))
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
