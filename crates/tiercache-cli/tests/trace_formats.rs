//! Block traces with volumes through the command line: a Tencent CBS trace read by its preset
//! and by the equivalent column spec gives the same run, equal to an LRU computed here, apart,
//! over blocks keyed by volume and block number; `trace stats` counts per volume.

mod common;

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;

use common::{sim_blocks, tiercache, tiercache_fails};

const BLOCK: u64 = 4096;
const SECTOR: u64 = 512;
const CAPACITY_BLOCKS: usize = 300;
/// Volume numbers, one past 2^16 among them.
const VOLUMES: [u64; 4] = [1, 2, 3, 70_000];

/// One line of a Tencent CBS trace: seconds, offset and size in sectors, 0 read or 1 write,
/// volume.
struct Line {
    time_s: u64,
    offset: u64,
    sectors: u64,
    write: bool,
    volume: u64,
}

/// A seeded Tencent CBS trace whose volumes share their offsets, so that a reader that mixed
/// volumes up would find other hits, written to a scratch file of this name.
fn tencent_trace(name: &str) -> (PathBuf, Vec<Line>) {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    let lines: Vec<Line> = (0..4000)
        .map(|i| Line {
            time_s: 1_538_323_200 + i / 10,
            offset: next(600) * 8 + if next(4) == 0 { next(8) } else { 0 },
            sectors: 1 + next(40),
            write: next(3) == 0,
            volume: VOLUMES[next(VOLUMES.len() as u64) as usize],
        })
        .collect();
    let text: String = lines
        .iter()
        .map(|l| {
            let op = u8::from(l.write);
            format!("{},{},{},{op},{}\n", l.time_s, l.offset, l.sectors, l.volume)
        })
        .collect();
    let dir = std::env::temp_dir().join(format!("tiercache-formats-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    (path, lines)
}

/// Hits and requests of an LRU cache of `CAPACITY_BLOCKS` 4 KiB blocks, every request a lookup
/// that inserts on a miss, keyed by `key(volume, block)`.
fn lru_hits(lines: &[Line], key: impl Fn(u64, u64) -> (u64, u64)) -> (u64, u64) {
    let mut recency: VecDeque<(u64, u64)> = VecDeque::new();
    let (mut hits, mut requests) = (0, 0);
    for line in lines {
        let start = line.offset * SECTOR;
        let end = start + line.sectors * SECTOR;
        for block in start / BLOCK..=(end - 1) / BLOCK {
            requests += 1;
            let k = key(line.volume, block);
            match recency.iter().position(|&r| r == k) {
                Some(at) => {
                    hits += 1;
                    recency.remove(at);
                }
                None if recency.len() == CAPACITY_BLOCKS => {
                    recency.pop_back();
                }
                None => {}
            }
            recency.push_front(k);
        }
    }
    (hits, requests)
}

fn run(trace: &str, format: &[&str]) -> serde_json::Value {
    sim_blocks(trace, "lru", &CAPACITY_BLOCKS.to_string(), format)
}

#[test]
fn tencent_preset_and_spec_agree_with_an_lru_over_volume_blocks() {
    let (path, lines) = tencent_trace("lru.csv");
    let trace = path.to_str().unwrap();
    let preset = run(trace, &["--format", "tencent-cbs"]);
    let spec = "time=1,key=2,size=3,op=4,addr_unit=512,size_unit=512,volume=5,time_unit=s";
    let generic = run(trace, &["--format", "csv", "--csv-spec", spec]);
    for field in ["requests", "hits", "read_hits", "write_hits", "bytes_requested", "evictions"] {
        assert_eq!(preset[field], generic[field], "{field}");
    }

    let (hits, requests) = lru_hits(&lines, |volume, block| (volume, block));
    assert_eq!(preset["requests"].as_u64(), Some(requests));
    assert_eq!(preset["hits"].as_u64(), Some(hits));
    // Were volumes mixed up, the hits would differ: the test can tell.
    let (mixed_hits, _) = lru_hits(&lines, |_, block| (0, block));
    assert!(mixed_hits > hits + 100, "{mixed_hits} mixed against {hits}");
}

#[test]
fn trace_stats_counts_each_volume() {
    let (path, lines) = tencent_trace("stats.csv");
    let trace = path.to_str().unwrap();
    let json: serde_json::Value = serde_json::from_str(&tiercache(&[
        "trace",
        "stats",
        "--json",
        "--trace",
        trace,
        "--format",
        "tencent-cbs",
    ]))
    .unwrap();
    let volumes = json["volumes"].as_array().unwrap();
    let numbers: Vec<u64> = volumes.iter().map(|v| v["volume"].as_u64().unwrap()).collect();
    assert_eq!(numbers, VOLUMES);
    let mut by_volume: HashMap<u64, (u64, u64, std::collections::HashSet<u64>)> = HashMap::new();
    for line in &lines {
        let counts = by_volume.entry(line.volume).or_default();
        counts.0 += 1;
        counts.1 += u64::from(line.write);
        counts.2.insert(line.offset);
    }
    for v in volumes {
        let (requests, writes, offsets) = &by_volume[&v["volume"].as_u64().unwrap()];
        assert_eq!(v["requests"].as_u64(), Some(*requests));
        assert_eq!(v["writes"].as_u64(), Some(*writes));
        assert_eq!(v["unique_keys"].as_u64(), Some(offsets.len() as u64));
    }
    let text = tiercache(&["trace", "stats", "--trace", trace, "--format", "tencent-cbs"]);
    assert!(text.contains("4 volumes, the busiest first"), "{text}");
}

#[test]
fn presets_and_volume_columns_refuse_what_they_cannot_read() {
    let (path, _) = tencent_trace("refused.csv");
    let trace = path.to_str().unwrap();
    // Not guessed: the user names the format.
    let e = tiercache_fails(&["sim", "--trace", trace, "--policy", "lru", "--capacity", "10"]);
    assert!(e.contains("tencent-cbs"), "{e}");
    let e = tiercache_fails(&[
        "sim",
        "--trace",
        trace,
        "--format",
        "csv",
        "--csv-spec",
        "key=2,addr_unit=0",
        "--policy",
        "lru",
        "--capacity",
        "10",
    ]);
    assert!(e.contains("addr_unit=0"), "{e}");
    let empty = path.with_file_name("empty.csv");
    std::fs::write(&empty, "").unwrap();
    let e = tiercache_fails(&[
        "sim",
        "--trace",
        empty.to_str().unwrap(),
        "--format",
        "tencent-cbs",
        "--policy",
        "lru",
        "--capacity",
        "10",
    ]);
    assert!(e.contains("empty.csv") && e.contains("no requests"), "{e}");
}
