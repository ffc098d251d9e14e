//! A writer killed with SIGKILL, having never called `sync`: the cache reopened over its tier
//! file brings back the blocks it held, each as the last version the writer was told was
//! written (or a write the kill cut short of its acknowledgement), never an older one. The
//! test runs itself as the writer (this binary again, with `CHILD` set), so the kill is a real
//! process's, mid-write, with whatever the kernel holds of its files at that moment.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tiercache_engine::{Cache, CacheBuilder, Recover, TierKind};
use tiercache_policy::PolicyConfig;

use common::{value, version_of};

const BLOCK: usize = 4096;
/// Keys the writer writes: 8 MiB, in a tier of twice that, so every block written stays.
const KEYS: u64 = 2048;
/// The background checkpoints' interval in the writer.
const INTERVAL: Duration = Duration::from_millis(100);
/// Writer threads, each writing the keys `k` with `k % WRITERS == its number`.
const WRITERS: u64 = 2;
/// Set in the writer's environment: the tier's kind, the tier file and the log folder.
const CHILD: &str = "TIERCACHE_KILL_TEST_WRITER";
/// An acknowledgement in a writer's log: microseconds since it started, key, version.
const ACK: usize = 24;

fn open(kind: &str, path: &Path, recover: Recover, interval: Duration) -> Cache {
    let tier = match kind {
        "mapped" => TierKind::Mapped { path: path.to_path_buf() },
        _ => TierKind::Flash { path: path.to_path_buf() },
    };
    CacheBuilder::new(PolicyConfig::Lru)
        .tier(tier)
        .block_size(BLOCK)
        .shards(4)
        .capacity_bytes(2 * KEYS * BLOCK as u64)
        .recover(recover)
        .sync_interval(interval)
        .build()
        .unwrap()
}

/// The writer (run by the test below, never on its own): writes its keys over and over, each
/// time a new version, and logs each acknowledged write, until it is killed.
#[test]
fn killed_writer() {
    let Ok(spec) = std::env::var(CHILD) else { return };
    let parts: Vec<&str> = spec.split('\t').collect();
    let (kind, tier, logs) = (parts[0], Path::new(parts[1]), Path::new(parts[2]));
    let cache = open(kind, tier, Recover::Wipe, INTERVAL);
    let started = Instant::now();
    std::thread::scope(|s| {
        for writer in 0..WRITERS {
            let (cache, started) = (&cache, &started);
            s.spawn(move || {
                let mut log = std::fs::File::create(logs.join(format!("{writer}.log"))).unwrap();
                let mut versions = vec![0u64; KEYS as usize];
                let mut state = 0x9E37_79B9_7F4A_7C15u64 ^ writer;
                loop {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    let key = (state % (KEYS / WRITERS)) * WRITERS + writer;
                    versions[key as usize] += 1;
                    let version = versions[key as usize];
                    assert!(cache.put(key, &value(key, version, BLOCK)).unwrap().cached);
                    let mut ack = [0u8; ACK];
                    let micros = started.elapsed().as_micros() as u64;
                    ack[..8].copy_from_slice(&micros.to_le_bytes());
                    ack[8..16].copy_from_slice(&key.to_le_bytes());
                    ack[16..].copy_from_slice(&version.to_le_bytes());
                    // Unbuffered: each acknowledgement is the file's before the next write.
                    log.write_all(&ack).unwrap();
                }
            });
        }
    });
}

/// Per key, the last version acknowledged and when the key was first written (microseconds),
/// from the writers' logs (a record the kill cut short is left out).
fn acknowledged(logs: &Path) -> Vec<Option<(u64, u64)>> {
    let mut last: Vec<Option<(u64, u64)>> = vec![None; KEYS as usize];
    for writer in 0..WRITERS {
        let bytes = std::fs::read(logs.join(format!("{writer}.log"))).unwrap();
        for ack in bytes.chunks_exact(ACK) {
            let field = |i: usize| u64::from_le_bytes(ack[i * 8..i * 8 + 8].try_into().unwrap());
            let first = last[field(1) as usize].map_or(field(0), |(_, first)| first);
            last[field(1) as usize] = Some((field(2), first));
        }
    }
    last
}

/// When the writers last acknowledged a write, from their logs.
fn last_acknowledged(logs: &Path) -> u64 {
    (0..WRITERS)
        .filter_map(|writer| {
            let bytes = std::fs::read(logs.join(format!("{writer}.log"))).unwrap();
            let ack = bytes.chunks_exact(ACK).last()?;
            Some(u64::from_le_bytes(ack[..8].try_into().unwrap()))
        })
        .max()
        .expect("the writers wrote")
}

fn kill_and_reopen(kind: &str) {
    let dir: PathBuf = common::scratch("kill", kind);
    std::fs::create_dir_all(&dir).unwrap();
    let tier = dir.join("tier");
    let spec = format!("{kind}\t{}\t{}", tier.display(), dir.display());
    let mut writer = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "killed_writer", "--nocapture", "--test-threads=1"])
        .env(CHILD, spec)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // Long enough for several checkpoints and many writes of every key; then a kill at
    // whatever point the writers are.
    std::thread::sleep(INTERVAL * 12);
    assert!(writer.try_wait().unwrap().is_none(), "the writer stopped on its own");
    writer.kill().unwrap(); // SIGKILL
    writer.wait().unwrap();

    let acked = acknowledged(&dir);
    let end = last_acknowledged(&dir);
    let settled = end.saturating_sub(2 * INTERVAL.as_micros() as u64);
    let cache = open(kind, &tier, Recover::Quiet, Duration::ZERO);
    let (mut older, mut back, mut came_back, mut newer) = (0, 0, 0, 0);
    let mut buf = vec![0u8; BLOCK];
    for (key, acked) in acked.iter().enumerate() {
        let Some((version, first)) = *acked else { continue };
        let found = cache.get(key as u64, &mut buf).map(|len| version_of(key as u64, &buf[..len]));
        match found {
            Some(v) if v < version => older += 1,
            Some(v) => {
                assert!(
                    v <= version + 1,
                    "{kind}: key {key} at version {v}, acknowledged {version}"
                );
                newer += (v > version) as u64;
                back += (first <= settled) as u64;
            }
            None => {}
        }
        came_back += found.is_some() as u64;
    }
    let settled_keys =
        acked.iter().flatten().filter(|&&(_, first)| first <= settled).count() as u64;
    let stats = cache.stats();
    eprintln!(
        "{kind}: {} keys written, {came_back} back ({newer} at a write the kill cut short of its \
         acknowledgement), {older} older; {back} of the {settled_keys} cached two intervals \
         before the kill; {} recovered, {} damaged",
        acked.iter().flatten().count(),
        stats.recovered,
        stats.recovery_damaged,
    );
    assert_eq!(older, 0, "{kind}: blocks came back older than their acknowledged version");
    assert!(settled_keys > KEYS / 2, "{kind}: the writers wrote too little to judge");
    assert!(back * 100 >= settled_keys * 95, "{kind}: {back} of {settled_keys} came back");
    drop(cache);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_killed_writer_finds_its_flash_blocks_without_a_sync() {
    kill_and_reopen("flash");
}

#[test]
fn a_killed_writer_finds_its_mapped_blocks_without_a_sync() {
    kill_and_reopen("mapped");
}
