//! Peer check against libCacheSim (the `libcachesim` Python package, an independent simulator
//! written in C) on the CloudPhysics block trace in oracleGeneral form, at four capacities in
//! each unit. Both sides run the same trace file; ours through `tiercache sim`.
//!
//! - LRU, FIFO, SIEVE, 2Q, LRU-K, MQ and SIZE: identical object and byte miss ratios.
//! - Clock2Q+: within 0.15 points (exact in half the cells; the largest gap 0.11).
//! - GDSF: within 0.02 points. libCacheSim inserts a missed key before making room, with the
//!   age as it was, and may evict the key itself; ours ranks it after making room, with the age
//!   the evictions set, and always keeps it (the order of Cao and Irani's GreedyDual-Size).
//! - SLRU with libCacheSim's fill rule (`slru:fill_first_room=true`): identical in objects;
//!   within 0.5 points in bytes, where libCacheSim also evicts when a hit's demotions overfill
//!   its lowest segment (ours keeps hits quiet).
//! - CLOCK, LFU (no aging), S3-FIFO and ARC: within 0.5 percentage points, except where our
//!   semantics differ on purpose (below), where both numbers are pinned.
//! - Random, LRU with probabilistic promotion, Hyperbolic, LeCaR, LHD and CACHEUS (with
//!   libCacheSim's rules): ours averaged over four
//!   seeds within 0.5 points of libCacheSim averaged over four runs (its draws are not seeded),
//!   each seed replaying exactly.
//! - Where a paper's rule is our default and libCacheSim's differs (SLRU's fill, 2Q's capped
//!   Am, LFU-DA's hits, W-TinyLFU's counting), the default's distance from libCacheSim is pinned
//!   (`paper_defaults_differ_as_pinned`).
//!
//! Documented difference: ARC with capacity in bytes. libCacheSim adapts `p` by
//! `max(|B2| / |B1|, 1)` bytes (integer division, not scaled by the object's size) and evicts
//! on every ghost hit even when the cache has room; tiercache scales the step by the object's
//! size (one ARC "page" is the object) and evicts only to make room. With capacity in objects
//! both are the paper's ARC and agree.
//!
//! Needs `python3` with `libcachesim==0.3.5` (the test command installs it).

mod common;

use std::collections::HashMap;
use std::process::Command;

use common::{data_trace, sim_json};

const TRACE: &str = "cloudPhysicsIO.oracleGeneral.bin.zst";
const BYTES: [u64; 4] = [16 << 20, 64 << 20, 256 << 20, 1 << 30];
const OBJECTS: [u64; 4] = [500, 2000, 8000, 20000];

/// Per policy and capacity: the object and byte miss ratios (the means, with `--repeat`), and
/// the object miss ratio's lowest and highest over the runs.
type Peer = HashMap<String, HashMap<String, (f64, f64, f64, f64)>>;

/// libCacheSim's miss ratios of `only` (every policy of the script if empty) at `capacities`,
/// each cell run `repeat` times in one process.
fn peer_runs(unit: &str, capacities: &[u64], only: &[&str], repeat: usize) -> Peer {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/peer_libcachesim.py");
    let trace = data_trace(TRACE);
    let mut command = Command::new("python3");
    command.arg(script).arg(&trace).arg(unit);
    command.args(capacities.iter().map(|c| c.to_string()));
    if !only.is_empty() {
        command.arg("--only").arg(only.join(","));
    }
    command.arg("--repeat").arg(repeat.to_string());
    let output = command.output().expect("python3 must be installed for the peer check");
    assert!(
        output.status.success(),
        "libCacheSim peer failed (pip install libcachesim==0.3.5): {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let raw: HashMap<String, HashMap<String, Vec<f64>>> =
        serde_json::from_slice(&output.stdout).unwrap();
    raw.into_iter()
        .map(|(policy, by_capacity)| {
            let by_capacity =
                by_capacity.into_iter().map(|(c, v)| (c, (v[0], v[1], v[2], v[3]))).collect();
            (policy, by_capacity)
        })
        .collect()
}

fn peer_of(unit: &str, capacities: &[u64], only: &[&str]) -> Peer {
    peer_runs(unit, capacities, only, 1)
}

fn peer(unit: &str, capacities: &[u64]) -> Peer {
    let names: Vec<&str> = PAIRS.iter().map(|(name, ..)| *name).collect();
    peer_of(unit, capacities, &names)
}

fn ours(policy: &str, unit: &str, capacity: u64) -> (f64, f64) {
    let trace = data_trace(TRACE);
    let capacity = capacity.to_string();
    let args = [
        "--trace",
        trace.to_str().unwrap(),
        "--policy",
        policy,
        "--unit",
        unit,
        "--capacity",
        &capacity,
    ];
    let report = sim_json(&args);
    (report["miss_ratio"].as_f64().unwrap(), report["byte_miss_ratio"].as_f64().unwrap())
}

/// (libCacheSim name, our policy spec, tolerance in points in objects and in bytes; 0 means
/// identical).
const PAIRS: [(&str, &str, f64, f64); 15] = [
    ("lru", "lru", 0.0, 0.0),
    ("fifo", "fifo", 0.0, 0.0),
    ("sieve", "sieve", 0.0, 0.0),
    ("twoq", "2q:cap_am=true", 0.0, 0.0),
    ("lruk", "lru-k", 0.0, 0.0),
    ("mq", "mq", 0.0, 0.0),
    ("size", "size", 0.0, 0.0),
    ("gdsf", "gdsf", 0.02, 0.02),
    ("clock2qplus", "clock2q+", 0.15, 0.15),
    ("slru", "slru:fill_first_room=true", 0.0, 0.5),
    ("clock", "clock", 0.5, 0.5),
    ("lfu", "lfu:aging_threshold=none", 0.5, 0.5),
    ("s3fifo", "s3fifo", 0.5, 0.5),
    ("arc", "arc", 0.5, 0.5),
    // Identical but for libCacheSim's departure on hits of HIR keys S no longer holds (see
    // `tiercache_policy::lirs`): 0, 1, 5 and 22 such hits at 500 to 20,000 objects here, and
    // 0, 0, 2 and 9 misses apart.
    ("lirs", "lirs", 0.01, 0.02),
];

fn compare(unit: &str, capacities: &[u64], exempt: &[(&str, u64)]) {
    let peer = peer(unit, capacities);
    for (peer_name, spec, in_objects, in_bytes) in PAIRS {
        let tolerance = if unit == "objects" { in_objects } else { in_bytes };
        for &capacity in capacities {
            if exempt.contains(&(peer_name, capacity)) {
                continue;
            }
            let (their_miss, their_byte_miss, ..) = peer[peer_name][&capacity.to_string()];
            let (miss, byte_miss) = ours(spec, unit, capacity);
            let what = format!("{spec} at {capacity} {unit}");
            if unit == "objects" {
                // libCacheSim's ignore_obj_size makes every size 1, so its byte ratio is its
                // object ratio; ours still weighs bytes by real sizes. Only objects compare.
                assert_eq!(their_miss, their_byte_miss);
            }
            let byte_miss = if unit == "objects" { their_byte_miss } else { byte_miss };
            if tolerance == 0.0 {
                assert!(
                    (miss - their_miss).abs() < 1e-12,
                    "{what}: miss {miss} vs libCacheSim {their_miss}"
                );
                assert!(
                    (byte_miss - their_byte_miss).abs() < 1e-12,
                    "{what}: byte miss {byte_miss} vs libCacheSim {their_byte_miss}"
                );
            } else {
                let gap = (miss - their_miss).abs() * 100.0;
                assert!(
                    gap <= tolerance,
                    "{what}: miss {miss:.4} vs libCacheSim {their_miss:.4} ({gap:.2} points)"
                );
                let gap = (byte_miss - their_byte_miss).abs() * 100.0;
                assert!(
                    gap <= tolerance,
                    "{what}: byte miss {byte_miss:.4} vs {their_byte_miss:.4}"
                );
            }
        }
    }
}

#[test]
fn agrees_with_libcachesim_in_objects() {
    compare("objects", &OBJECTS, &[]);
}

#[test]
fn agrees_with_libcachesim_in_bytes() {
    compare("bytes", &BYTES, &[("arc", 256 << 20)]);
}

#[test]
fn byte_arc_difference_is_pinned() {
    // The one pair outside 0.5 points, with the reason in the module comment.
    let peer = peer_of("bytes", &[256 << 20], &["arc"]);
    let (their_miss, ..) = peer["arc"][&(256u64 << 20).to_string()];
    let (miss, _) = ours("arc", "bytes", 256 << 20);
    assert!((their_miss - 0.75401).abs() < 1e-4, "libCacheSim byte ARC at 256 MiB: {their_miss}");
    assert!((miss - 0.73764).abs() < 1e-4, "tiercache byte ARC at 256 MiB: {miss}");
}

/// The paper's rule where libCacheSim's departs from it, measured against libCacheSim: SLRU's
/// new keys entering the probationary segment (libCacheSim fills the first segment with room,
/// so while the cache fills new keys land in the protected ones; on this trace, which never
/// stops filling at 20,000 blocks, that is 4.7 points fewer misses), and 2Q's Am taking what
/// A1in leaves (libCacheSim caps it; A1in never falls below its share here, so they agree);
/// LFU-DA's hit counting one reference (libCacheSim's adds the lowest priority resident, so
/// before the first eviction hits count nothing: 0.6 points more misses than the paper's here);
/// W-TinyLFU's count-min sketch raised on every reference and halved after ten times its width
/// (libCacheSim counts in a Bloom filter, raised on misses, main-cache hits and every candidate
/// it weighs, and drains the window into the main cache while candidates win: 1.0 point fewer
/// misses here, and from 1.9 points more to 3.4 fewer at the other sizes in objects, within 0.42
/// in bytes; RESULTS has the table); CLOCK-Pro's hands as the paper and its authors' code run
/// them (libCacheSim's 2025 `ClockPro` refuses to insert a key while the cold keys fill their
/// share, and misses more than LRU here: 76.3% against 63.3%; ours 52.8%, beside LIRS's 51.5%).
#[test]
fn paper_defaults_differ_as_pinned() {
    let only = ["slru", "twoq", "lfuda", "wtinylfu", "clockpro"];
    let peer = peer_of("objects", &[20000], &only);
    let cases = [
        ("slru", "slru", 0.532493, 0.579739),
        ("twoq", "2q", 0.633193, 0.633193),
        ("lfuda", "lfuda", 0.625395, 0.618932),
        ("wtinylfu", "w-tinylfu", 0.523386, 0.533415),
        ("clockpro", "clock-pro", 0.763304, 0.527663),
    ];
    for (peer_name, spec, theirs_pinned, ours_pinned) in cases {
        let (theirs, ..) = peer[peer_name]["20000"];
        let (ours, _) = ours(spec, "objects", 20000);
        assert!((theirs - theirs_pinned).abs() < 1e-6, "libCacheSim {peer_name}: {theirs}");
        assert!((ours - ours_pinned).abs() < 1e-6, "tiercache {spec}: {ours}");
    }
}

/// W-TinyLFU with libCacheSim's rules (`w-tinylfu:libcachesim_rules=true`: its counting filter,
/// what it counts, its window drain, its segments' fill): identical to libCacheSim in objects
/// at every size, within a quarter point in bytes (0.23 the most, at 16 MiB; not traced
/// further). Both sides are deterministic.
#[test]
fn w_tinylfu_with_libcachesims_rules_agrees() {
    for (unit, capacities, bound) in [("objects", &OBJECTS[..], 0.0), ("bytes", &BYTES[..], 0.25)] {
        let peer = peer_of(unit, capacities, &["wtinylfu"]);
        for &capacity in capacities {
            let (theirs, ..) = peer["wtinylfu"][&capacity.to_string()];
            let (ours, _) = ours("w-tinylfu:libcachesim_rules=true", unit, capacity);
            let gap = (theirs - ours).abs() * 100.0;
            assert!(
                gap <= bound + 1e-9,
                "at {capacity} {unit}: ours {ours:.6}, libCacheSim {theirs:.6} ({gap:.2} points)"
            );
        }
    }
}

/// CLOCK-Pro is LIRS run by clock hands (its paper, section 1): on CloudPhysics in objects it
/// misses within 2.5 points of our LIRS at every size (1.98 at 8,000 objects, the most), where
/// CLOCK, the policy it improves, misses up to 12 points more than LIRS.
#[test]
fn clock_pro_tracks_lirs() {
    for capacity in OBJECTS {
        let (clock_pro, _) = ours("clock-pro", "objects", capacity);
        let (lirs, _) = ours("lirs", "objects", capacity);
        let gap = (clock_pro - lirs).abs() * 100.0;
        assert!(gap <= 2.5, "at {capacity}: CLOCK-Pro {clock_pro:.4}, LIRS {lirs:.4} ({gap:.2})");
    }
}

/// Belady-Size weighs every resident key where libCacheSim's weighs 128 drawn at random at each
/// eviction: ours misses no more than libCacheSim's in any cell (at most 0.34 points less, at
/// 64 MiB), and within half a point. At 20,000 objects and 1 GiB, where few evictions are
/// made, each side's Belady-Size misses as its own Belady does.
#[test]
fn belady_size_weighs_every_key() {
    for (unit, capacities) in [("objects", &OBJECTS[..]), ("bytes", &BYTES[..])] {
        let peer = peer_of(unit, capacities, &["beladysize"]);
        for &capacity in capacities {
            let (theirs, ..) = peer["beladysize"][&capacity.to_string()];
            let (ours, _) = ours("belady-size", unit, capacity);
            let gap = (theirs - ours) * 100.0;
            assert!(
                (0.0..=0.5).contains(&gap),
                "belady-size at {capacity} {unit}: {ours:.4} vs libCacheSim {theirs:.4}"
            );
        }
    }
}

/// Random eviction, LRU with probabilistic promotion, Hyperbolic, LeCaR, LHD and CACHEUS (with
/// libCacheSim's two rules, see `tiercache_policy::cacheus`) draw: ours averaged
/// over seeds 0-3 within half a point of libCacheSim averaged over four runs in one process (its
/// draws are not seeded), at every capacity in both units, or, where its own runs spread wider than
/// that, within their range; a seed replays. LeCaR at 1 GiB is such a point: it swings between
/// 56.7% and 58.4% from run to run on both sides (its learned weights amplify the draws), so
/// four runs' means can be a point apart, while the means of eight runs were 0.18 apart.
#[test]
fn seeded_policies_agree_over_seeds() {
    const RUNS: usize = 4;
    let seeded = [
        ("random", "random"),
        ("lruprob", "lru-prob"),
        ("hyperbolic", "hyperbolic"),
        ("lecar", "lecar"),
        ("lhd", "lhd"),
        ("cacheus", "cacheus:integer_hit_ratio=true,grow_only=true"),
    ];
    let names: Vec<&str> = seeded.iter().map(|(name, _)| *name).collect();
    for (unit, capacities) in [("objects", &OBJECTS[..]), ("bytes", &BYTES[..])] {
        let peer = peer_runs(unit, capacities, &names, RUNS);
        for (peer_name, spec) in seeded {
            for &capacity in capacities {
                let (theirs, _, low, high) = peer[peer_name][&capacity.to_string()];
                let seeded = |seed: usize| {
                    let joint = if spec.contains(':') { ',' } else { ':' };
                    format!("{spec}{joint}seed={seed}")
                };
                let runs: Vec<f64> =
                    (0..RUNS).map(|seed| ours(&seeded(seed), unit, capacity).0).collect();
                let mean = runs.iter().sum::<f64>() / RUNS as f64;
                let gap = (mean - theirs).abs() * 100.0;
                let bound = f64::max(0.5, (high - low) * 100.0);
                assert!(
                    gap <= bound,
                    "{spec} at {capacity} {unit}: {mean:.4} vs {theirs:.4} (theirs {low:.4}-{high:.4})"
                );
                let again = ours(&seeded(0), unit, capacity).0;
                assert_eq!(again, runs[0], "{spec} at {capacity} {unit}: seed 0 did not replay");
            }
        }
    }
}
