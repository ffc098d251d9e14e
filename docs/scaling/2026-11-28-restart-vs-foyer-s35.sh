#!/usr/bin/env bash
# #53: restarts of tiercache and foyer's hybrid cache on the same disk-tier size, after SIGKILL
# and after a clean stop (bench/foyer-compare/src/bin/restart.rs). Xeon-2, 2026-11-28, the
# scratch directory on ext4 (/var/tmp). Outputs beside this file: -1gib.txt (3 rounds) and
# -4gib.txt (1 round).
set -eu
cd "$(dirname "$0")/../../bench/foyer-compare"
cargo build --release --bin restart
target/release/restart /var/tmp/rs --mib 1024 --rounds 3
target/release/restart /var/tmp/rs --mib 4096 --rounds 1
