#!/usr/bin/env python3
"""Probes `tiercache serve` as a hostile client would (issue "serve safe on a network"):
64 silent connections then a real client; 8 connections announcing 128 MiB writes and
sending nothing (the server's RSS growth); a client that never reads its replies, then
SIGTERM (the time to exit). Usage: scripts/probe_serve.py [TIERCACHE_BINARY]."""
import socket, struct, subprocess, time, os, sys
exe = sys.argv[1] if len(sys.argv) > 1 else 'target/release/tiercache'
d = '/tmp/probe'; os.makedirs(d, exist_ok=True)
for f in os.listdir(d): os.remove(os.path.join(d, f))
open(f'{d}/backing','wb').write(b'\0'*(64<<20))
sock=f'{d}/sock'
def start(extra=[]):
    p = subprocess.Popen([exe,'serve','--backing',f'{d}/backing','--dram','0','--slow-path',f'{d}/tier','--slow-size','64MiB','--mode','wb','--listen','unix:'+sock]+extra, stderr=subprocess.PIPE, text=True)
    for line in p.stderr:
        if 'listening' in line: break
    return p
def rss(pid):
    for l in open(f'/proc/{pid}/status'):
        if l.startswith('VmRSS'): return int(l.split()[1])*1024
def hs():
    c = socket.socket(socket.AF_UNIX); c.connect(sock); c.recv(18)
    c.sendall(struct.pack('>IQII',3,0x49484156454F5054,1,0)); c.recv(10); return c
def req(kind,cookie,off,ln): return struct.pack('>IHHQQI',0x25609513,0,kind,cookie,off,ln)
p = start()
# 64 silent connections, then time until a real client connects and gets its greeting
t=time.time(); silent=[socket.socket(socket.AF_UNIX) for _ in range(64)]
for s in silent: s.connect(sock)
ok=False
while time.time()-t < 40 and not ok:
    try: c=hs(); ok=True
    except Exception: time.sleep(0.2)
print('a real client after 64 silent ones: %s after %.1f s' % ('served' if ok else 'NOT served', time.time()-t))
for s in silent: s.close()
# 8 connections announcing 128 MiB writes
before=rss(p.pid); conns=[hs() for _ in range(8)]
for i,c in enumerate(conns): c.sendall(req(1,i,0,128<<20))
time.sleep(1); print('8 unpaid 128 MiB writes: RSS +%.1f MiB' % ((rss(p.pid)-before)/2**20))
# a client that never reads replies, then SIGTERM
g=hs(); g.settimeout(0.2)
try:
    for i in range(2000): g.sendall(req(0,i,0,32<<20))
except Exception: pass
t=time.time(); p.terminate()
try: p.wait(timeout=30)
except Exception: p.kill(); p.wait()
print('SIGTERM with a non-reading client: exit %d after %.2f s' % (p.returncode, time.time()-t))
