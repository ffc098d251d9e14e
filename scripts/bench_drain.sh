#!/bin/bash
# Write-back drain throughput against an emulated disk, and the clean stop of a write-back
# server: the two figures of the "write-back in device order" issue.
#
#   scripts/bench_drain.sh [TIERCACHE_BINARY] [SERVE_MIB]
#
# 1. `tiercache bench` writes a 32 MiB working set into a 64 MiB mapped tier (/dev/shm) in
#    write-back over a backing file that behaves like the `hdd` profile, then writes every dirty
#    block back after the timed run: prints the blocks, the seconds and blocks per second.
# 2. `tiercache serve --mode wb` over the same kind of disk: qemu-io writes SERVE_MIB (128 by
#    default) through NBD, then SIGTERM; prints the seconds to a clean exit (every dirty block
#    written back and synced) and checks that the backing file holds what was written.
#
# Needs a release build (default: target/release/tiercache) and qemu-io for the second part.
set -euo pipefail
BIN=${1:-$(dirname "$0")/../target/release/tiercache}
MIB=${2:-128}
SHM=$(mktemp -d /dev/shm/tiercache-drain-XXXX)
DISK=$(mktemp -d "${TMPDIR:-/var/tmp}/tiercache-drain-XXXX")
trap 'rm -rf "$SHM" "$DISK"' EXIT

"$BIN" bench --slow-path "$SHM/tier" --slow-size 64MiB --working-set 32MiB --read-ratio 0 \
    --dist uniform --backing-profile hdd --write-mode write-back --threads 2 --duration 2 \
    --force --json 2>/dev/null | python3 -c '
import json, sys
r = json.load(sys.stdin)["written_back_after"]
blocks, seconds = r["blocks"], r["seconds"]
print(f"drain: {blocks} blocks in {seconds:.3f} s, {blocks / seconds:,.0f} blocks/s")'
rm -f "$SHM/tier"

command -v qemu-io >/dev/null || { echo "serve: qemu-io not found, skipped"; exit 0; }
truncate -s $((2 * MIB))M "$DISK/disk.img"
"$BIN" serve --backing "$DISK/disk.img" --dram 0 --slow-path "$SHM/tier" \
    --slow-size $((2 * MIB))MiB --mode wb --backing-profile hdd \
    --listen "unix:$SHM/nbd.sock" 2>"$SHM/serve.log" &
PID=$!
for _ in $(seq 100); do [ -S "$SHM/nbd.sock" ] && break; sleep 0.1; done
qemu-io -f raw "nbd+unix:///?socket=$SHM/nbd.sock" -c "write -P 0xab 0 ${MIB}M" >/dev/null
START=$(date +%s.%N)
kill -TERM $PID
wait $PID
END=$(date +%s.%N)
python3 - "$DISK/disk.img" "$MIB" "$START" "$END" <<'PY'
import sys
path, mib, start, end = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
with open(path, "rb") as f:
    missing = sum(f.read(1 << 20) != b"\xab" * (1 << 20) for _ in range(mib))
print(f"serve: {mib} MiB dirty, clean stop in {end - start:.2f} s; {missing} MiB not written back")
PY
