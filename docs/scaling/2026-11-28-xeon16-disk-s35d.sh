#!/bin/bash
# Session 35's fourth call on the 16-core machine: the virtio disk's direct-I/O bandwidth under
# /var/tmp (ext4), to check the ceiling the objects workload's traffic points to (1.24-1.49
# GiB/s, RESULTS "Sixteen cores"). dd with direct I/O: 8 writers, then 8 readers, then 8 of
# each at once, 32 KiB and 256 KiB requests, 256 MiB a process. (`wait` names its processes:
# a bare one would also wait for the tee behind the output.)
set -u
O=${OUT:-/tmp/out}; mkdir -p $O
exec > >(tee $O/disk.txt) 2>&1
D=/var/tmp/tc-disk; mkdir -p $D
grep -m1 "model name" /proc/cpuinfo; nproc; df -T $D | tail -1
rate() { python3 -c "import sys; print(f'{$1/$2/1024:.2f} GiB/s ({$1} MiB in {$2:.2f} s)')"; }
for bs in 32 256; do
  n=$(( 256 * 1024 / bs ))
  t0=$(date +%s.%N)
  pids=""; for i in $(seq 8); do dd if=/dev/zero of=$D/w$i bs=${bs}k count=$n oflag=direct status=none & pids="$pids $!"; done; wait $pids
  t1=$(date +%s.%N); echo "writes ${bs} KiB, 8 at once: $(rate 2048 $(python3 -c "print($t1 - $t0)"))"
  t0=$(date +%s.%N)
  pids=""; for i in $(seq 8); do dd if=$D/w$i of=/dev/null bs=${bs}k iflag=direct status=none & pids="$pids $!"; done; wait $pids
  t1=$(date +%s.%N); echo "reads ${bs} KiB, 8 at once: $(rate 2048 $(python3 -c "print($t1 - $t0)"))"
  t0=$(date +%s.%N)
  pids=""
  for i in $(seq 8); do
    dd if=$D/w$i of=/dev/null bs=${bs}k iflag=direct status=none & pids="$pids $!"
    dd if=/dev/zero of=$D/x$i bs=${bs}k count=$n oflag=direct status=none & pids="$pids $!"
  done; wait $pids
  t1=$(date +%s.%N); echo "8 readers and 8 writers, ${bs} KiB: $(rate 4096 $(python3 -c "print($t1 - $t0)"))"
  rm -f $D/w* $D/x*
done
