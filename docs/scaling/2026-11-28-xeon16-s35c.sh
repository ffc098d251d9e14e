#!/bin/bash
# Session 35's third run on the 16-core machine: the objects workload, where tiercache did
# 0.68x foyer at 16 threads in the first run (2026-11-28-xeon16-s35.sh). The harness now also
# reports each cache's storage KiB read and written per operation (/proc/self/io).
# - both caches at 4 and 16 threads, and at 16 threads with 128 shards (16 by default);
# - tiercache alone at 16 threads under perf: flat by symbol, and the kernel's callers of the
#   spinning symbols; then where its threads sleep (sched_switch). As run, that last report
#   came back empty (its `--comm hybrid` filter matched nothing).
# Binary: .devbin/bins3.tar.xz holds the harness at this session's build (stripped); perf as for
# the first run.
set -u
tar xJf .devbin/bins3.tar.xz -C .devbin || exit 1
O=${OUT:-/tmp/out}; mkdir -p $O
exec > >(tee $O/log.txt) 2>&1
grep -m1 "model name" /proc/cpuinfo; grep -m1 -E "^model\s" /proc/cpuinfo; nproc
S=/var/tmp/tc-s35c; mkdir -p $S
start=$(date +%s)
since() { echo "-- $1 ($(( $(date +%s) - start )) s in)"; }
mkdir -p /tmp/perf && tar xJf .devbin/perf.tar.xz -C /tmp/perf
P="env LD_LIBRARY_PATH=/tmp/perf/lib /tmp/perf/perf"
W="--disk-tier direct --disk-policy log --workload objects --warmup 1.5 --seconds 2.5 --json"
since objects
.devbin/hybrid $S --threads 4,16 $W | tee -a $O/objects.jsonl
.devbin/hybrid $S --threads 16 --shards 128 $W | sed 's/^{/{"diag":"128 shards",/' | tee -a $O/objects.jsonl
since profile
$P record -F 999 -e cpu-clock -a -g -o /tmp/ob.data -- .devbin/hybrid $S --threads 16 $W --tiercache-only 2>$O/counters.txt | tee -a $O/objects.jsonl
{ echo "## objects, 16 threads, tiercache alone: whole machine by symbol";
  $P report -i /tmp/ob.data --stdio --no-children --sort comm,dso,symbol -g none --percent-limit 0.5 2>/dev/null | grep -v "^#" | grep -v "^$" | cut -c1-160;
  for s in osq_lock rwsem_spin_on_owner __pv_queued_spin_lock_slowpath native_queued_spin_lock_slowpath futex_wait clear_page_erms; do
    echo "## callers of $s";
    $P report -i /tmp/ob.data --stdio --no-children --sort symbol -S $s -G --percent-limit 0.3 2>/dev/null | grep -v "^#" | grep -v "^$" | head -50
  done; } > $O/perf.txt
since "off-CPU"
# Where tiercache's threads sleep (kernel stacks at each switch away): a futex is a lock of
# ours, io_schedule a device wait, an rwsem a kernel lock.
$P record -e sched:sched_switch -a -g -o /tmp/sw.data -- .devbin/hybrid $S --threads 16 $W --tiercache-only >/dev/null 2>&1 &&
{ echo "## objects, 16 threads, tiercache alone: switches away, by the kernel's stack";
  $P report -i /tmp/sw.data --stdio --no-children --comm hybrid --sort symbol -G --percent-limit 2 2>/dev/null | grep -v "^#" | grep -v "^$" | head -150; } > $O/offcpu.txt
since done
