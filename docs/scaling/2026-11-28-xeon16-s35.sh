#!/bin/bash
# Session 35, on the lent 16-core machine: every row of the sixteen-cores issue (#56) at 1, 4 and
# 16 threads on today's main (after the whole-operation requests, the room word on its own cache
# line, the flash checkpoints), each beside its baseline in the same run, then the diagnostics
# session 32 prepared and could not run (2026-11-28-xeon16-diag2-s32.sh), and a profile.
# Build here first:
#   cargo build --release -p tiercache-cli && strip --strip-debug -o .devbin/tiercache target/release/tiercache
#   (cd bench/foyer-compare && cargo build --release --bins)
#   strip --strip-debug -o .devbin/hybrid bench/foyer-compare/target/release/hybrid
#   git apply docs/scaling/2026-11-28-pins-without-room-s32.patch && cargo build --release -p tiercache-cli \
#     && strip --strip-debug -o .devbin/tiercache-noroom target/release/tiercache; git checkout crates/tiercache-engine/src/pins.rs
#   perf (Debian's 6.1) and the libraries it links, but libc's, packed as .devbin/perf.tar.xz
#   (cd .devbin && tar cJf bins.tar.xz tiercache tiercache-noroom hybrid && rm tiercache tiercache-noroom hybrid)
#   (the working tree that travels holds 64 MiB: the binaries go packed)
# then run with carry [".devbin"] and a limit of about 420 s. Figures land in $OUT:
#   log.txt       everything printed
#   hits.json     DRAM and mapped hits against raw copies (bench_hits.py, default hit rule)
#   rows.jsonl    read handles; DRAM 64 MiB over a mapped and a flash tier (reads; write-back);
#                 the diagnostics
#   hybrid.jsonl  DRAM + direct-I/O disk tier against foyer: blocks (log, lru), objects (log)
#   perf.txt      flat profiles: the hybrid at 16 threads, read handles at 16 threads
set -u
tar xJf .devbin/bins.tar.xz -C .devbin || exit 1
O=${OUT:-/tmp/out}; mkdir -p $O
exec > >(tee $O/log.txt) 2>&1
B=.devbin/tiercache
nproc; grep -m1 "model name" /proc/cpuinfo; python3 -c 'import platform; print(platform.processor())'
grep -m1 -E "^cpu family|^model\s" /proc/cpuinfo; uname -r; df -T /var/tmp /dev/shm | tail -2
SCRATCH=/var/tmp/tc-s35; mkdir -p $SCRATCH
start=$(date +%s)
since() { echo "-- $1 ($(( $(date +%s) - start )) s in)"; }
# row FIGURE THREADS BENCH-ARGS...: one bench run as a JSON line in rows.jsonl
row() {
  local fig=$1 t=$2; shift 2
  rm -f $SCRATCH/back /dev/shm/tc-back
  local r; r=$("$@" --threads $t --json 2>$O/err.txt) || { echo "failed: $fig $t"; return; }
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); c=d.get("cache") or {}; print(json.dumps({"figure": sys.argv[2], "threads": int(sys.argv[3]), "ops_per_second": round(d["ops_per_second"]), "hit_ratio": d.get("hit_ratio"), "writes_dropped": c.get("writes_dropped"), "limbo_syncs": c.get("limbo_syncs"), "backing_syncs": c.get("backing_syncs")}))' "$r" "$fig" $t | tee -a $O/rows.jsonl
}

[ "${ONLY_TIERED:-}" ] || {
since hits
python3 scripts/bench_hits.py --binary $B --repeat 3 --duration 1.5 --threads 1,4,16 \
  --slow-path /dev/shm/tc-hits --json $O/hits.json

since handles
for round in 1 2; do
  for t in 1 4 16; do
    row "DRAM read handles" $t $B bench --dram 64MiB --working-set 32MiB --read-ratio 1 --handle --duration 1.5
  done
  for t in 1 16; do
    row "DRAM read handles, pins without the room word (measurement build)" $t .devbin/tiercache-noroom bench --dram 64MiB --working-set 32MiB --read-ratio 1 --handle --duration 1.5
  done
done

}
since tiered
# DRAM 64 MiB over a 512 MiB tier on /dev/shm, Zipf 0.9 over 256 MiB: reads only, and write-back
# (90% reads; written blocks kept dirty on the tier, written back in device order; the backing
# file on ext4 unless the figure says tmpfs).
for tier in mapped flash; do
  case $tier in
    mapped) T="--slow-path /dev/shm/tc-tier --slow-size 512MiB";;
    flash) T="--flash-path /dev/shm/tc-tier --flash-size 512MiB";;
  esac
  for t in 1 4 16; do
    row "DRAM 64 MiB over $tier, reads" $t $B bench --dram 64MiB $T --working-set 256MiB --read-ratio 1 --force --duration 1.5 --backing $SCRATCH/back
    row "DRAM 64 MiB over $tier, write-back" $t $B bench --dram 64MiB $T --working-set 256MiB --read-ratio 0.9 --mode wb --force --duration 1.5 --backing $SCRATCH/back
  done
  for t in 4 16; do
    row "DRAM 64 MiB over $tier, write-back, backing on tmpfs" $t $B bench --dram 64MiB $T --working-set 256MiB --read-ratio 0.9 --mode wb --force --duration 1.5 --backing /dev/shm/tc-back
  done
  row "DRAM 64 MiB over $tier, write-back, 1024 shards" 16 $B bench --dram 64MiB $T --working-set 256MiB --read-ratio 0.9 --mode wb --force --duration 1.5 --shards 1024 --backing $SCRATCH/back
  rm -f /dev/shm/tc-tier /dev/shm/tc-back
done

[ "${ONLY_TIERED:-}" ] && exit 0
since hybrid
.devbin/hybrid $SCRATCH --threads 1,4,16 --disk-tier direct --disk-policy log,lru \
  --workload blocks --rounds 2 --warmup 1.5 --seconds 2.5 --json | tee -a $O/hybrid.jsonl
.devbin/hybrid $SCRATCH --threads 1,4,16 --disk-tier direct --disk-policy log \
  --workload objects --rounds 2 --warmup 1.5 --seconds 2.5 --json | tee -a $O/hybrid.jsonl

since "hybrid diagnostics"
# 16 threads: 256 shards in both caches; a page-cache disk tier (tiercache alone)
.devbin/hybrid $SCRATCH --threads 16 --disk-tier direct --disk-policy log --workload blocks \
  --shards 256 --warmup 1.5 --seconds 2.5 --json | sed 's/^{/{"diag":"256 shards",/' | tee -a $O/hybrid.jsonl
.devbin/hybrid $SCRATCH --threads 16 --disk-tier file --disk-policy log --workload blocks \
  --warmup 1.5 --seconds 2.5 --json --tiercache-only 2>/dev/null | sed 's/^{/{"diag":"page-cache disk tier",/' | tee -a $O/hybrid.jsonl

since profiles
mkdir -p /tmp/perf && tar xJf .devbin/perf.tar.xz -C /tmp/perf
P="env LD_LIBRARY_PATH=/tmp/perf/lib /tmp/perf/perf"
if $P --version; then
  $P record -F 1999 -e cpu-clock -a -o /tmp/hy.data -- .devbin/hybrid $SCRATCH --threads 16 \
    --disk-tier direct --disk-policy log --workload blocks --warmup 1.5 --seconds 2.5 --json --tiercache-only 2>/dev/null
  { echo "## hybrid, blocks, log, 16 threads, tiercache alone: whole machine, by symbol";
    $P report -i /tmp/hy.data --stdio --no-children --sort comm,dso,symbol --percent-limit 0.4 2>&1 | grep -v "^$"; } > $O/perf.txt
  $P record -F 1999 -e cpu-clock -o /tmp/ha.data -- $B bench --dram 64MiB --working-set 32MiB \
    --read-ratio 1 --handle --threads 16 --duration 1.5
  { echo "## read handles, 16 threads: by symbol";
    $P report -i /tmp/ha.data --stdio --no-children --sort dso,symbol --percent-limit 0.4 2>&1 | grep -v "^$"; } >> $O/perf.txt
fi
since done
