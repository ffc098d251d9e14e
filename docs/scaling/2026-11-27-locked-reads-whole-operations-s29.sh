#!/bin/bash
# Alternating A/B of the locked read paths: old (the build before) and new, 5 rounds.
OLD=/work/base/target/release/tiercache
NEW=/work/main/target/release/tiercache
run() { # binary, label, args...
  local b=$1; shift; local l=$1; shift
  $b bench "$@" --duration 2 --json 2>/dev/null | python3 -c "import json,sys; d=json.load(sys.stdin); print('$l', d['ops_per_second'], round(d.get('hit_ratio',0),4))"
}
for r in 1 2 3 4 5; do
  for which in old new; do
    b=$OLD; [ $which = new ] && b=$NEW
    run $b "$which dram-locked-1t" --dram 64MiB --working-set 32MiB --read-ratio 1 --threads 1 --locked-hits
    run $b "$which dram-locked-2t" --dram 64MiB --working-set 32MiB --read-ratio 1 --threads 2 --locked-hits
    rm -f /dev/shm/ab-flash.tc
    run $b "$which flash-hits-1t" --dram 0 --flash-path /dev/shm/ab-flash.tc --flash-size 64MiB --working-set 32MiB --read-ratio 1 --threads 1 --force
    rm -f /dev/shm/ab-flash.tc
    run $b "$which flash-hits-2t" --dram 0 --flash-path /dev/shm/ab-flash.tc --flash-size 64MiB --working-set 32MiB --read-ratio 1 --threads 2 --force
    rm -f /dev/shm/ab-flash.tc
  done
done
