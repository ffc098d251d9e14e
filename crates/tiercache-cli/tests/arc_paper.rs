//! The ARC paper's published hit ratios (Megiddo and Modha, "ARC: A Self-Tuning, Low Overhead
//! Replacement Cache", FAST'03, Table VII: LRU and ARC on OLTP, P2 and P3 with unit-size pages),
//! reproduced through the command line: `tiercache sim --format arc-lis --unit objects`.
//! LRU must match to the published two decimals; ARC within 0.05 points.

mod common;

use common::{data_trace, sim_json};

fn hit_ratio_percent(trace: &str, policy: &str, pages: u64) -> f64 {
    let path = data_trace(trace);
    let pages = pages.to_string();
    let args = [
        "--trace",
        path.to_str().unwrap(),
        "--format",
        "arc-lis",
        "--unit",
        "objects",
        "--policy",
        policy,
        "--capacity",
        &pages,
    ];
    sim_json(&args)["hit_ratio"].as_f64().unwrap() * 100.0
}

fn check(trace: &str, policy: &str, table: &[(u64, f64)], tolerance: f64) {
    for &(pages, published) in table {
        let ours = hit_ratio_percent(trace, policy, pages);
        assert!(
            (ours - published).abs() <= tolerance,
            "{policy} on {trace} at {pages} pages: {ours:.3}% vs published {published}%"
        );
    }
}

const OLTP_LRU: [(u64, f64); 5] =
    [(1000, 32.83), (2000, 42.47), (5000, 53.65), (10000, 60.70), (15000, 64.63)];
const OLTP_ARC: [(u64, f64); 5] =
    [(1000, 38.93), (2000, 46.08), (5000, 55.25), (10000, 61.87), (15000, 65.40)];

#[test]
fn oltp_lru() {
    // Published to two decimals: agreement means rounding gives the same digits.
    check("arc_OLTP.lis.zst", "lru", &OLTP_LRU, 0.005);
}

#[test]
fn oltp_arc() {
    check("arc_OLTP.lis.zst", "arc", &OLTP_ARC, 0.05);
}

#[test]
fn p2_lru_and_arc() {
    check("arc_P2.lis.zst", "lru", &[(32768, 18.47), (131072, 51.49)], 0.005);
    check("arc_P2.lis.zst", "arc", &[(32768, 27.38), (131072, 58.97)], 0.05);
}

#[test]
fn p3_lru_and_arc() {
    check("arc_P3.lis.zst", "lru", &[(32768, 3.57), (131072, 44.79)], 0.005);
    check("arc_P3.lis.zst", "arc", &[(32768, 17.12), (131072, 50.63)], 0.05);
}
