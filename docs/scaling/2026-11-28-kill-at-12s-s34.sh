#!/usr/bin/env bash
# #53's bench command: a clean stop against SIGKILL at 12 s, then the reopened cache's first
# second (recovered blocks, hit ratio). Alternating, ROUNDS rounds.
set -u
BIN=${BIN:-/work/main/target/release/tiercache}
D=/work/kb
ROUNDS=${ROUNDS:-2}
common="--flash-size 1GiB --dram 0 --working-set 1GiB --dist uniform --threads 2"
reopen() {  # label
  $BIN bench --backing $D/b --reuse-backing --flash-path $D/f $common --read-ratio 1 --recover quiet --duration 1 --warmup 0 --json > $D/$1.reopen.json 2> $D/$1.reopen.err
  python3 - "$D/$1.reopen.json" "$1" <<'PY'
import json,sys
j=json.load(open(sys.argv[1]))
def find(d,k):
    if isinstance(d,dict):
        for a,b in d.items():
            if a==k: return b
            r=find(b,k)
            if r is not None: return r
    return None
print(sys.argv[2], "recovered", j["cache"]["recovered"], "damaged", j["cache"]["recovery_damaged"], "hit_ratio", j["hit_ratio"], "recovery_s", j["recovery"]["seconds"], "clean", j["recovery"]["clean"])
PY
}
for r in $(seq 1 $ROUNDS); do
  rm -f $D/b $D/f
  $BIN bench --backing $D/b --flash-path $D/f $common --read-ratio 0 --duration 10 --json > $D/clean$r.json 2> $D/clean$r.err
  reopen clean$r
  rm -f $D/b $D/f
  $BIN bench --backing $D/b --flash-path $D/f $common --read-ratio 0 --duration 30 --json > $D/kill$r.json 2> $D/kill$r.err &
  pid=$!
  sleep 12
  kill -9 $pid; wait $pid 2>/dev/null
  reopen kill$r
done
