//! `tiercache ycsb`: every workload on redb, with and without the cache, checks out; bad
//! options are named; and a database in write-back over a mapped tier, killed with SIGKILL in
//! the middle of a write-heavy run, opens cleanly with every acknowledged commit.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{tiercache, tiercache_fails};
use tiercache_redb::redb;
use tiercache_redb::ycsb::check_all;

fn scratch(name: &str) -> PathBuf {
    common::scratch("cli-ycsb", name)
}

fn json(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["ycsb", "--json"];
    all.extend_from_slice(args);
    serde_json::from_str(&tiercache(&all)).expect("ycsb --json prints JSON")
}

#[test]
fn every_workload_checks_out_with_and_without_the_cache() {
    // Without the cache; DRAM; DRAM over a slow tier behind NVCache; DRAM over a slow tier
    // over a flash tier.
    let (tier, mid, low) = (scratch("all.tier"), scratch("all-mid.tier"), scratch("all.flash"));
    let (tier, mid, low) = (tier.to_str().unwrap(), mid.to_str().unwrap(), low.to_str().unwrap());
    let small = ["--workload", "all", "--records", "3000", "--operations", "1500"];
    let three = ["--slow-path", mid, "--slow-size", "2MiB", "--flash-path", low, "--flash-size"];
    let stacks: [&[&str]; 4] = [
        &["--no-cache", "--backing-profile", "nvme"],
        &["--dram", "4MiB"],
        &["--dram", "1MiB", "--slow-path", tier, "--slow-size", "8MiB", "--nvcache", "obp"],
        &[&["--dram", "512KiB"], &three[..], &["8MiB"]].concat(),
    ];
    for stack in stacks {
        let mut args = small.to_vec();
        args.extend_from_slice(stack);
        args.extend_from_slice(&["--threads", "2", "--db-cache", "1MiB"]);
        let report = json(&args);
        assert_eq!(report["verified"], true, "{stack:?}: {report}");
        let runs = report["runs"].as_array().unwrap();
        let names: Vec<&str> = runs.iter().map(|r| r["workload"].as_str().unwrap()).collect();
        assert_eq!(names, ["A", "B", "C", "F", "D", "E"]);
        for run in runs {
            assert_eq!(run["failures"], 0, "{stack:?}: {run}");
            assert!(run["ops_per_second"].as_f64().unwrap() > 0.0);
            assert!(run["records_read"].as_u64().unwrap() > 0, "{run}");
            assert!(run["db_cache"]["read_hits"].as_u64().unwrap() > 0, "{run}");
        }
        // The scan workload reads about 50 records a scan, in key order.
        let e = &runs[5];
        assert!(e["records_read"].as_u64().unwrap() > 20 * 1500, "{e}");
        assert!(e["latency"]["scan"]["count"].as_u64().unwrap() > 1300, "{e}");
        // Inserts grew the database: D's and E's records are there.
        assert!(e["records"].as_u64().unwrap() > 3000 + 100, "{e}");
        match stack[0] {
            "--no-cache" => assert!(report["cache"].is_null()),
            _ => {
                let ratio = report["cache"]["hit_ratio"].as_f64().unwrap();
                assert!(ratio > 0.0 && ratio <= 1.0, "{report}");
            }
        }
    }
}

#[test]
fn the_slow_tier_counts_what_is_written_to_it_and_obp_writes_less() {
    let written = |nvcache: &[&str]| {
        let tier = scratch(&format!("written{}.tier", nvcache.len()));
        let mut args = vec![
            "--workload",
            "A",
            "--records",
            "4000",
            "--operations",
            "3000",
            "--dram",
            "512KiB",
            "--slow-path",
            tier.to_str().unwrap(),
            "--slow-size",
            "16MiB",
            "--db-cache",
            "512KiB",
        ];
        args.extend_from_slice(nvcache);
        let report = json(&args);
        assert_eq!(report["verified"], true);
        report["runs"][0]["cache"]["slow_tier_bytes_written"].as_u64().unwrap()
    };
    let always = written(&[]);
    let obp = written(&["--nvcache", "obp,small-bypass=0"]);
    assert!(always > 0, "a write-heavy run over a slow tier writes to it");
    assert!(obp < always, "OBP throttles admission: {obp} bytes against {always}");
}

#[test]
fn bad_options_are_named_and_an_existing_file_is_not_overwritten() {
    let existing = scratch("existing.redb");
    std::fs::write(&existing, b"precious").unwrap();
    let path = existing.to_str().unwrap();
    let err = tiercache_fails(&["ycsb", "--path", path, "--records", "10"]);
    assert!(err.contains("--path") && err.contains("not empty"), "{err}");
    assert_eq!(std::fs::read(&existing).unwrap(), b"precious");
    // --check of a file that is not a database: an error, and the file unchanged.
    let err = tiercache_fails(&["ycsb", "--check", "--path", path, "--no-cache"]);
    assert!(err.contains(path), "{err}");
    assert_eq!(std::fs::read(&existing).unwrap(), b"precious");
    let cases: [(&[&str], &str); 9] = [
        (&["--recover", "strict"], "--recover"),
        (&["--workload", "G"], "--workload G"),
        (&["--db", "sqlite"], "--db sqlite"),
        (&["--threads", "0"], "--threads 0"),
        (&["--record-size", "8"], "--record-size 8"),
        (&["--records", "0"], "--records"),
        (&["--durability", "eventually"], "--durability eventually"),
        (&["--no-cache", "--dram", "1MiB"], "--dram"),
        (&["--slow-profile", "optane-dcpm"], "--slow-profile"),
    ];
    for (args, needle) in cases {
        let mut all = vec!["ycsb", "--records", "10", "--operations", "10"];
        all.extend_from_slice(args);
        let err = tiercache_fails(&all);
        assert!(err.contains(needle), "{args:?}: '{needle}' not in {err}");
    }
}

/// The acknowledged commits of a commit log: whole `NUMBER VERSION` lines (the last may be
/// cut by the kill).
fn acknowledged(log: &Path) -> Vec<(u64, u64)> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let whole = match text.rfind('\n') {
        Some(end) => &text[..end],
        None => "",
    };
    whole
        .lines()
        .map(|line| {
            let (k, v) = line.split_once(' ').expect("NUMBER VERSION");
            (k.parse().unwrap(), v.parse().unwrap())
        })
        .collect()
}

#[test]
fn a_database_in_write_back_killed_mid_run_keeps_every_acknowledged_commit() {
    for round in 0..3u64 {
        let db = scratch(&format!("killed{round}.redb"));
        let tier = scratch(&format!("killed{round}.tier"));
        let log = scratch(&format!("killed{round}.log"));
        let (db_arg, tier_arg) = (db.to_str().unwrap(), tier.to_str().unwrap());
        // The tier holds the whole database, so nothing is written back before the kill:
        // whatever was committed lives in the tier alone.
        let stack =
            ["--dram", "0", "--slow-path", tier_arg, "--slow-size", "32MiB", "--mode", "wb"];
        let mut child = Command::new(env!("CARGO_BIN_EXE_tiercache"))
            .args(["ycsb", "--workload", "A", "--records", "2000", "--operations", "100000000"])
            .args(["--threads", "2", "--db-cache", "256KiB", "--path", db_arg])
            .args(["--seed", &round.to_string(), "--commit-log", log.to_str().unwrap()])
            .args(stack)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Killed after some commits, a different number each round.
        let wanted = 50 + 150 * round as usize;
        let deadline = Instant::now() + Duration::from_secs(120);
        while acknowledged(&log).len() < wanted {
            assert!(child.try_wait().unwrap().is_none(), "the run ended before the kill");
            assert!(Instant::now() < deadline, "no {wanted} commits in two minutes");
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(7 * round));
        child.kill().unwrap();
        child.wait().unwrap();
        let acked = acknowledged(&log);

        // Reopened through the cache: the tier's blocks recovered, redb opens, every record
        // checks out. Closing writes them back, so the file then stands alone.
        let mut args = vec!["ycsb", "--check", "--json", "--path", db_arg, "--recover", "strict"];
        args.extend_from_slice(&stack);
        let check: serde_json::Value = serde_json::from_str(&tiercache(&args)).unwrap();
        assert_eq!(check["verified"], true, "{check}");
        assert!(check["recovered_dirty"].as_u64().unwrap() > 0, "nothing dirty to recover");
        assert!(check["contiguous_records"].as_u64().unwrap() >= 2000, "{check}");
        if round == 0 {
            // That check stopped cleanly: reopened again, nothing is dirty (counted before
            // redb's open writes its header).
            let again: serde_json::Value = serde_json::from_str(&tiercache(&args)).unwrap();
            assert_eq!(again["verified"], true, "{again}");
            assert_eq!(again["recovered_dirty"], 0, "{again}");
        }

        let db = redb::Database::open(&db).expect("redb opens the written-back file");
        let found = check_all(&db).unwrap();
        assert_eq!(found.bad, 0, "{:?}", found.first_bad);
        for (keynum, version) in &acked {
            let stored = found.versions.get(keynum).copied();
            assert!(
                stored.is_some_and(|v| v >= *version),
                "round {round}: record {keynum} committed at version {version}, found {stored:?}"
            );
        }
        assert!(acked.len() >= wanted);
    }
}

#[test]
fn slatedb_runs_over_tiercache_and_restarts_warm() {
    let dir = scratch("slatedb");
    let _ = std::fs::remove_dir_all(&dir);
    let flash = dir.join("cache.flash");
    let (dir_arg, flash_arg) = (dir.to_str().unwrap(), flash.to_str().unwrap());
    let report = json(&[
        "--db",
        "slatedb",
        "--workload",
        "C,B",
        "--records",
        "4000",
        "--operations",
        "1500",
        "--threads",
        "8",
        "--first-byte-ms",
        "2",
        "--dram",
        "512KiB",
        "--flash-path",
        flash_arg,
        "--flash-size",
        "8MiB",
        "--restart",
        "--dir",
        dir_arg,
    ]);
    assert_eq!(report["verified"], true, "{report}");
    for field in ["ops_per_second", "p99_us", "hit_ratio"] {
        assert!(report[field].as_f64().unwrap() > 0.0, "{field}: {report}");
    }
    let runs = report["runs"].as_array().unwrap();
    let names: Vec<&str> = runs.iter().map(|r| r["workload"].as_str().unwrap()).collect();
    assert_eq!(names, ["C", "B"]);
    let cold = &runs[0];
    let gets = cold["object_store"]["gets"].as_u64().unwrap();
    assert!(gets > 0 && report["object_store_gets"].as_u64().unwrap() >= gets, "{report}");
    assert!(cold["cache"]["tier_hits"][1].as_u64().unwrap() > 0, "flash hits: {cold}");
    // Reopened over the same tier file, the first workload again: half the GETs of the cold
    // run or fewer. (Not after inserts: SlateDB's compaction of them would write the data
    // into new SSTs, under new ids, which no cache has seen.)
    let again = &report["restart"];
    assert_eq!(again["workload"], "C");
    assert!(
        again["object_store"]["gets"].as_u64().unwrap() * 2 <= gets,
        "cold {cold}, warm {again}"
    );
    // A second load into the same folder would overwrite the database: refused.
    let err = tiercache_fails(&["ycsb", "--db", "slatedb", "--records", "10", "--dir", dir_arg]);
    assert!(err.contains("--dir") && err.contains("objects"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn slatedb_without_a_cache_and_with_its_own_reads_back_every_value() {
    for cache in ["none", "object-store"] {
        let report = json(&[
            "--db",
            "slatedb",
            "--slatedb-cache",
            cache,
            "--workload",
            "B",
            "--records",
            "2000",
            "--operations",
            "500",
            "--first-byte-ms",
            "1",
            "--flash-size",
            "4MiB",
        ]);
        assert_eq!(report["verified"], true, "{cache}: {report}");
        assert!(report["hit_ratio"].is_null(), "{cache}: {report}");
        assert!(report["object_store_gets"].as_u64().unwrap() > 0, "{cache}: {report}");
    }
    let cases: [(&[&str], &str); 5] = [
        (&["--db", "slatedb", "--slatedb-cache", "moka"], "--slatedb-cache moka"),
        (&["--db", "slatedb", "--path", "x.redb"], "--path"),
        (&["--db", "slatedb", "--first-byte-ms=-1"], "--first-byte-ms"),
        (&["--db", "slatedb", "--bandwidth", "fast"], "--bandwidth"),
        (&["--restart"], "--restart"),
    ];
    for (args, needle) in cases {
        let mut all = vec!["ycsb", "--records", "10", "--operations", "10"];
        all.extend_from_slice(args);
        let err = tiercache_fails(&all);
        assert!(err.contains(needle), "{args:?}: '{needle}' not in {err}");
    }
}
