//! The commands end to end: demo, sim (table, JSON, CSV), sweep (CSV and plots), trace
//! stats/convert/gen, and clear errors for bad input, never a panic.

mod common;

use std::path::PathBuf;

use common::{data_trace, sim_blocks, sim_json, tiercache, tiercache_fails};

fn scratch(name: &str) -> PathBuf {
    common::scratch("cli", name)
}

/// `demo --quick --json`: every part. The simulator's classic policies (Belady never beaten)
/// and hybrid stacks; the engine live, DRAM alone and over a mapped tier, its read hits by tier
/// near the simulator's prediction for the same stack; and the warm restart: nothing written
/// back before it, every write recovered dirty and read back, all written back at the stop.
#[test]
fn demo_shows_the_simulator_the_engine_and_a_warm_restart() {
    let out = tiercache(&["demo", "--quick", "--json"]);
    let demo: serde_json::Value = serde_json::from_str(&out).unwrap();
    let points = demo["simulator"].as_array().unwrap();
    assert_eq!(points.len(), 7 * 4);
    for capacity in points.iter().map(|p| p["capacity"].as_u64().unwrap()) {
        let at: Vec<&serde_json::Value> =
            points.iter().filter(|p| p["capacity"] == capacity).collect();
        let belady =
            at.iter().find(|p| p["policy"] == "belady").unwrap()["miss_ratio"].as_f64().unwrap();
        assert!(at.iter().all(|p| p["miss_ratio"].as_f64().unwrap() >= belady));
    }
    let hybrid = demo["hybrid"].as_array().unwrap();
    assert_eq!(hybrid.len(), 6, "{hybrid:?}");
    for h in hybrid {
        let (all, dram, slow) = (&h["hit_ratio"], &h["dram_hit_ratio"], &h["slow_hit_ratio"]);
        assert!(all.as_f64().unwrap() > 0.0 && dram.as_f64().unwrap() > 0.0, "{h}");
        assert!(slow.as_f64().unwrap() > 0.0, "{h}: the slow tier serves reads");
    }
    // What NVCache's OBP trades hits for: bytes written into the slow tier, on each size.
    let written = |stack: &str| -> Vec<f64> {
        let rows = hybrid.iter().filter(|h| h["stack"].as_str().unwrap().starts_with(stack));
        rows.map(|h| h["slow_bytes_written_per_request"].as_f64().unwrap()).collect()
    };
    let (plain, obp) = (written("DRAM-first"), written("NVCache"));
    assert_eq!((plain.len(), obp.len()), (2, 2));
    for (plain, obp) in plain.iter().zip(&obp) {
        assert!(*plain > 0.0 && *obp < *plain / 2.0, "OBP writes less: {plain} and {obp}");
    }
    let engine = demo["engine"].as_array().unwrap();
    assert_eq!(engine.len(), 2);
    for (run, tiers) in engine.iter().zip([1, 2]) {
        let got = run["tier_hit_ratios"].as_array().unwrap();
        let predicted = run["predicted_tier_hit_ratios"].as_array().unwrap();
        assert_eq!((got.len(), predicted.len()), (tiers, tiers), "{run}");
        for (got, predicted) in got.iter().zip(predicted) {
            let (got, predicted) = (got.as_f64().unwrap(), predicted.as_f64().unwrap());
            assert!(got > 0.0 && (got - predicted).abs() < 0.05, "{run}");
        }
        assert!(run["ops_per_second"].as_f64().unwrap() > 0.0, "{run}");
        assert!(run["mean_us"].as_f64().unwrap() > 0.0 && run["p99_us"].is_number(), "{run}");
    }
    let restart = &demo["warm_restart"];
    let written = restart["blocks_written"].as_u64().unwrap();
    assert!(written > 0, "{restart}");
    assert_eq!(restart["on_backing_before_restart"], 0, "{restart}");
    assert_eq!(restart["recovered"].as_u64().unwrap(), written, "{restart}");
    assert_eq!(restart["recovered_dirty"].as_u64().unwrap(), written, "{restart}");
    assert_eq!(restart["verified"].as_u64().unwrap(), written, "{restart}");
    assert_eq!(restart["on_backing_after_stop"].as_u64().unwrap(), written, "{restart}");
    let table = tiercache(&["demo", "--quick"]);
    for part in ["s3fifo", "Hibachi", "emulating Optane", "warm restart", "read back as written"] {
        assert!(table.contains(part), "{part}: {table}");
    }
}

/// A reader that closes the pipe before the command prints (`tiercache sweep --json | head`):
/// every command ends quietly, as SIGPIPE ends other tools, never with a panic, a backtrace or
/// an error message.
#[test]
fn a_closed_stdout_ends_every_command_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let msr = data_trace("msr_hm_0_first1000.csv.zst");
    let msr = msr.to_str().unwrap();
    let backing = scratch("closed-pipe.backing");
    let crash_dir = scratch("closed-pipe-crash");
    std::fs::create_dir_all(&crash_dir).unwrap();
    let sweep_dir = scratch("closed-pipe-sweep");
    let ycsb_db = scratch("closed-pipe.redb");
    let commands: Vec<Vec<&str>> = vec![
        vec!["demo", "--quick", "--json"],
        vec!["demo", "--requests", "100000"],
        vec![
            "sim",
            "--trace",
            msr,
            "--block-size",
            "4KiB",
            "--policy",
            "lru",
            "--capacity",
            "1MiB",
            "--json",
        ],
        vec![
            "sweep",
            "--trace",
            msr,
            "--block-size",
            "4KiB",
            "--policy",
            "lru",
            "--capacities",
            "1MiB,2MiB",
            "--out",
            sweep_dir.to_str().unwrap(),
            "--json",
        ],
        vec!["trace", "stats", "--trace", msr, "--json"],
        vec![
            "bench",
            "--working-set",
            "4MiB",
            "--duration",
            "0.2",
            "--warmup",
            "0",
            "--backing",
            backing.to_str().unwrap(),
            "--force",
            "--json",
        ],
        vec!["crashtest", "--kills", "1", "--dir", crash_dir.to_str().unwrap(), "--json"],
        vec![
            "ycsb",
            "--workload",
            "a",
            "--records",
            "2000",
            "--operations",
            "1000",
            "--no-cache",
            "--path",
            ycsb_db.to_str().unwrap(),
            "--force",
            "--json",
        ],
        vec!["profile", "list"],
    ];
    for args in commands {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tiercache"))
            .args(&args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.contains("panicked")
                && !stderr.contains("backtrace")
                && !stderr.contains("error"),
            "{args:?}: {stderr}"
        );
        let sigpipe = out.status.signal() == Some(libc::SIGPIPE);
        assert!(out.status.success() || sigpipe, "{args:?}: {:?} {stderr}", out.status);
    }
}

#[test]
fn sim_reports_reads_writes_and_writes_csv() {
    let trace = data_trace("msr_hm_0_first1000.csv.zst");
    let csv = scratch("report.csv");
    let args = [
        "--trace",
        trace.to_str().unwrap(),
        "--block-size",
        "4KiB",
        "--policy",
        "lru",
        "--capacity",
        "1MiB",
    ];
    let mut with_csv = args.to_vec();
    with_csv.extend(["--csv", csv.to_str().unwrap()]);
    let report = sim_json(&with_csv);
    let (reads, writes) = (report["reads"].as_u64().unwrap(), report["writes"].as_u64().unwrap());
    assert!(reads >= 508 && writes >= 492);
    for field in
        ["hit_ratio", "byte_hit_ratio", "read_hit_ratio", "write_hit_ratio", "requests_per_second"]
    {
        assert!(report[field].is_number(), "{field} missing");
    }
    let text = std::fs::read_to_string(&csv).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2);
    assert!(lines[0].contains("hit_ratio") && lines[0].contains("bytes_written_to_cache"));
    let mut sim_args = vec!["sim"];
    sim_args.extend_from_slice(&args);
    let table = tiercache(&sim_args);
    assert!(
        table.contains("reads") && table.contains("writes") && table.contains("M requests/s"),
        "{table}"
    );
}

#[test]
fn sweep_writes_csv_svg_and_png() {
    let trace = data_trace("cloudPhysicsIO.oracleGeneral.bin.zst");
    let out = scratch("sweep");
    let stdout = tiercache(&[
        "sweep",
        "--trace",
        trace.to_str().unwrap(),
        "--policy",
        "lru",
        "--policy",
        "s3fifo",
        "--capacities",
        "64MiB,256MiB,1GiB",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(stdout.contains("lru") && stdout.contains("s3fifo"), "{stdout}");
    let csv = std::fs::read_to_string(out.join("sweep.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 2 * 3);
    let svg = std::fs::read_to_string(out.join("mrc.svg")).unwrap();
    assert!(svg.contains("<svg") && svg.contains("s3fifo"));
    let png = std::fs::read(out.join("mrc.png")).expect("a PNG");
    assert_eq!(&png[1..4], b"PNG");
}

/// Plots need no system font: with `TIERCACHE_FONT` set to nothing, the built-in font draws
/// the sweep's plot, its labels laid out.
#[test]
fn sweep_plots_without_a_system_font() {
    let trace = data_trace("msr_hm_0_first1000.csv.zst");
    let out = scratch("sweep-no-font");
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_tiercache"))
        .args(["sweep", "--trace", trace.to_str().unwrap(), "--block-size", "4KiB"])
        .args(["--policy", "lru", "--capacities", "1MiB,2MiB,4MiB", "--out"])
        .arg(&out)
        .env("TIERCACHE_FONT", "")
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let svg = std::fs::read_to_string(out.join("mrc.svg")).expect("mrc.svg without a system font");
    assert!(svg.contains("<svg") && svg.contains("lru") && svg.contains("<text"), "{svg}");
    assert_eq!(&std::fs::read(out.join("mrc.png")).unwrap()[1..4], b"PNG");
}

/// 50,000 requests, Zipf(1.0) over 5,000 objects, 80% reads, seed 3.
fn gen_zipf(path: &str) {
    let args = "trace gen --dist zipf --theta 1.0 --objects 5000 --requests 50000 --read-ratio 0.8 --seed 3 -o";
    let mut args: Vec<&str> = args.split(' ').collect();
    args.push(path);
    tiercache(&args);
}

#[test]
fn trace_gen_convert_and_stats_agree() {
    let generated = scratch("zipf.csv.zst");
    let generated_s = generated.to_str().unwrap();
    gen_zipf(generated_s);
    let oracle = scratch("zipf.oracleGeneral.bin");
    tiercache(&[
        "trace",
        "convert",
        "--trace",
        generated_s,
        "--to",
        "oracle-general",
        "-o",
        oracle.to_str().unwrap(),
    ]);
    let stats = |path: &str| -> serde_json::Value {
        serde_json::from_str(&tiercache(&["trace", "stats", "--trace", path, "--json"])).unwrap()
    };
    let (a, b) = (stats(generated_s), stats(oracle.to_str().unwrap()));
    assert_eq!(a["requests"], 50000);
    assert_eq!(a["unique_keys"], b["unique_keys"]);
    assert_eq!(a["reuse"], b["reuse"]);
    let writes = a["writes"].as_u64().unwrap();
    assert!((9_000..11_000).contains(&writes), "{writes}");
    // Same seed, same file.
    let again = scratch("zipf2.csv.zst");
    gen_zipf(again.to_str().unwrap());
    assert_eq!(stats(again.to_str().unwrap())["reuse"], a["reuse"]);
    let ycsb = scratch("ycsb_a.csv");
    tiercache(&[
        "trace",
        "gen",
        "--ycsb",
        "A",
        "--operations",
        "2000",
        "-o",
        ycsb.to_str().unwrap(),
    ]);
    assert_eq!(stats(ycsb.to_str().unwrap())["requests"], 2000);
}

#[test]
fn trace_gen_mixgraph_takes_db_bench_parameters_and_a_block_view() {
    let stats = |path: &std::path::Path| -> serde_json::Value {
        let text = tiercache(&["trace", "stats", "--trace", path.to_str().unwrap(), "--json"]);
        serde_json::from_str(&text).unwrap()
    };
    // Gets and Puts only (no seeks): one request per operation.
    let kv = scratch("mixgraph.csv");
    let params = "-mix_get_ratio=0.7 -mix_put_ratio=0.3 -mix_seek_ratio=0 -keyrange_num=10";
    let gen = |extra: &[&str], out: &std::path::Path| {
        let mut args = vec!["trace", "gen", "--mixgraph", params, "--objects", "100000"];
        args.extend_from_slice(&["--requests", "20000", "-o", out.to_str().unwrap()]);
        args.extend_from_slice(extra);
        tiercache(&args);
    };
    gen(&[], &kv);
    let a = stats(&kv);
    assert_eq!(a["requests"], 20000);
    let writes = a["writes"].as_u64().unwrap();
    assert!((5_500..6_500).contains(&writes), "{writes}");
    // The block view: the same operations on 4 KiB blocks of about 49 records.
    let blocks = scratch("mixgraph-blocks.csv");
    gen(&["--block-size", "4KiB"], &blocks);
    let b = stats(&blocks);
    assert_eq!(b["requests"], 20000);
    assert_eq!(b["writes"], a["writes"]);
    let (keys, block_keys) =
        (a["unique_keys"].as_u64().unwrap(), b["unique_keys"].as_u64().unwrap());
    assert!(block_keys < keys && block_keys <= 100_000 / 49 + 1, "{keys} {block_keys}");
    // Defaults alone run, and a misspelt parameter or a block view without mixgraph is named.
    let defaults = ["trace", "gen", "--mixgraph", "default", "--requests", "1000", "-o"];
    tiercache(&[&defaults[..], &[kv.to_str().unwrap()]].concat());
    let error = tiercache_fails(&["trace", "gen", "--mixgraph", "keyrange_nun=3", "-o", "x.csv"]);
    assert!(error.contains("unknown parameter 'keyrange_nun'"), "{error}");
    let error = tiercache_fails(&["trace", "gen", "--block-size", "4KiB", "-o", "x.csv"]);
    assert!(error.contains("--block-size is a view of --mixgraph"), "{error}");
}

#[test]
fn lru_hit_ratio_equals_the_reuse_distance_histogram() {
    // Mattson's stack property, two independent computations: LRU of 2^k objects hits exactly
    // the requests whose reuse distance is below 2^k.
    let trace = data_trace("cloudPhysicsIO.txt.zst");
    let path = trace.to_str().unwrap();
    let stats: serde_json::Value =
        serde_json::from_str(&tiercache(&["trace", "stats", "--trace", path, "--json"])).unwrap();
    let buckets: Vec<u64> =
        stats["reuse"]["buckets"].as_array().unwrap().iter().map(|b| b.as_u64().unwrap()).collect();
    for k in [8usize, 11, 14] {
        let below: u64 = buckets.iter().take(k + 1).sum();
        let capacity = (1u64 << k).to_string();
        let report = sim_json(&[
            "--trace",
            path,
            "--policy",
            "lru",
            "--unit",
            "objects",
            "--capacity",
            &capacity,
        ]);
        assert_eq!(report["hits"].as_u64().unwrap(), below, "LRU at {capacity} objects");
    }
}

#[test]
fn bad_input_gets_clear_errors() {
    let e = tiercache_fails(&[
        "sim",
        "--trace",
        "/no/such/trace.csv",
        "--policy",
        "lru",
        "--capacity",
        "1MiB",
    ]);
    assert!(e.contains("/no/such/trace.csv") && e.contains("cannot open"), "{e}");
    let trace = data_trace("msr_hm_0_first1000.csv.zst");
    let t = trace.to_str().unwrap();
    let e = tiercache_fails(&["sim", "--trace", t, "--policy", "lru2", "--capacity", "1MiB"]);
    assert!(e.contains("lru2") && e.contains("known policies"), "{e}");
    let e = tiercache_fails(&["sim", "--trace", t, "--policy", "lru", "--capacity", "12 parsecs"]);
    assert!(e.contains("--capacity") && e.contains("parsecs"), "{e}");
    let e = tiercache_fails(&["sim", "--trace", t, "--policy", "lru", "--capacity", "0"]);
    assert!(e.contains("--capacity"), "{e}");
    let e = tiercache_fails(&[
        "sim",
        "--trace",
        t,
        "--policy",
        "lru",
        "--capacity",
        "1MiB",
        "--admission",
        "prob:2",
    ]);
    assert!(e.contains("prob") && e.contains("[0, 1]"), "{e}");
    let rule = ["--capacity", "1MiB", "--hit-rule", "sometimes"];
    let e = tiercache_fails(&[&["sim", "--trace", t, "--policy", "lru"], &rule[..]].concat());
    assert!(e.contains("--hit-rule") && e.contains("sometimes"), "{e}");
    // The engine's rule replayed: its label says so.
    let report =
        sim_json(&["--trace", t, "--policy", "lru", "--capacity", "64KiB", "--hit-rule", "epochs"]);
    let label = report["policy"].as_str().unwrap_or_default();
    assert!(label.contains("once an epoch"), "{report}");

    let bad = scratch("bad_msr.csv");
    std::fs::write(
        &bad,
        "128166385295514663,hm,0,Write,9056014336,2048,2833\n128166385295514664,hm,0,Read,1,x,2\n",
    )
    .unwrap();
    let b = bad.to_str().unwrap();
    let e = tiercache_fails(&["sim", "--trace", b, "--policy", "lru", "--capacity", "1MiB"]);
    assert!(e.contains("bad_msr.csv") && e.contains("line 2") && e.contains("'Size'"), "{e}");
    let report = sim_json(&["--trace", b, "--policy", "lru", "--capacity", "1MiB", "--skip-bad"]);
    assert_eq!(
        (report["requests"].as_u64(), report["skipped_records"].as_u64()),
        (Some(1), Some(1))
    );
}

#[test]
fn bench_runs_the_engine_and_the_raw_medium_on_every_tier_kind() {
    let backing = scratch("bench.backing");
    let b = backing.to_str().unwrap();
    let slow = scratch("bench.slow");
    let flash = scratch("bench.flash");
    let common = [
        "bench",
        "--working-set",
        "2MiB",
        "--duration",
        "0.2",
        "--warmup",
        "0",
        "--threads",
        "2",
        "--json",
        "--backing",
        b,
        "--reuse-backing",
    ];
    let (slow_path, flash_path) = (slow.to_str().unwrap(), flash.to_str().unwrap());
    let tiers: [Vec<&str>; 5] = [
        vec!["--dram", "1MiB"],
        vec!["--slow-path", slow_path, "--slow-size", "1MiB"],
        vec!["--flash-path", flash_path, "--flash-size", "1MiB"],
        vec!["--dram", "256KiB", "--slow-path", slow_path, "--slow-size", "1MiB"],
        vec![
            "--dram",
            "128KiB",
            "--slow-path",
            slow_path,
            "--slow-size",
            "256KiB",
            "--flash-path",
            flash_path,
            "--flash-size",
            "1MiB",
        ],
    ];
    for (i, tier) in tiers.iter().enumerate() {
        for raw in [false, true].into_iter().filter(|raw| !(*raw && i >= 3)) {
            let mut args: Vec<&str> = common.to_vec();
            args.extend(tier.iter());
            if raw {
                args.push("--raw");
            }
            let report: serde_json::Value = serde_json::from_str(&tiercache(&args)).unwrap();
            let ops = report["read"]["count"].as_u64().unwrap()
                + report["write"]["count"].as_u64().unwrap();
            assert!(
                ops > 0 && report["ops_per_second"].as_f64().unwrap() > 0.0,
                "{tier:?} raw={raw}"
            );
            if !raw {
                let cache = &report["cache"];
                assert_eq!(cache["checksum_failures"], 0);
                assert_eq!(cache["writes_dropped"], 0);
                assert!(cache["hits"].as_u64().unwrap() > 0, "{tier:?}: {cache}");
                if i >= 3 {
                    assert!(cache["demotions"].as_u64().unwrap() > 0, "{cache}");
                    assert!(cache["lower_hits"].as_u64().unwrap() > 0, "{cache}");
                }
                // Reads served by each tier, top down: as many as the cache has tiers.
                let tiers = [1, 1, 1, 2, 3][i];
                let by_tier = cache["tier_hits"].as_array().unwrap();
                assert_eq!(by_tier.len(), tiers, "{cache}");
                let sum: u64 = by_tier.iter().map(|h| h.as_u64().unwrap()).sum();
                assert_eq!(sum, cache["hits"].as_u64().unwrap(), "{cache}");
                if i == 4 {
                    assert!(by_tier[2].as_u64().unwrap() > 0, "the third tier serves: {cache}");
                    let ratios = report["tier_hit_ratios"].as_array().unwrap();
                    assert_eq!(ratios.len(), 3, "{report}");
                    assert!(report["tier"].as_str().unwrap().contains("> lru > lru"), "{report}");
                }
            }
        }
    }
    // --placement: SCM-first puts misses into the tier below DRAM and promotes blocks hit
    // there; write-back with it over two persistent tiers runs too (bench gives the backing
    // file to the builder, so recovery writes back what it cannot keep), and writes back.
    let mut args: Vec<&str> = common.to_vec();
    args.extend(tiers[3].iter());
    args.extend(["--placement", "scm-first:1"]);
    let report: serde_json::Value = serde_json::from_str(&tiercache(&args)).unwrap();
    assert!(report["tier"].as_str().unwrap().contains("scm-first:1 lru > lru"), "{report}");
    assert!(report["cache"]["promotions"].as_u64().unwrap() > 0, "{report}");
    let mut args: Vec<&str> = common.to_vec();
    args.extend(tiers[4].iter());
    args.extend(["--placement", "scm-first:1", "--write-mode", "wb", "--read-ratio", "0.5"]);
    let report: serde_json::Value = serde_json::from_str(&tiercache(&args)).unwrap();
    assert!(report["tier"].as_str().unwrap().contains("scm-first:1 lru > lru > lru"), "{report}");
    assert!(report["cache"]["write_backs"].as_u64().unwrap() > 0, "{report}");
    assert_eq!(report["cache"]["dirty_lost"].as_u64(), Some(0), "{report}");
    // Raw reads alone, the path whose threads share one region of the medium: they run, and
    // write nothing.
    for tier in &tiers[..2] {
        let mut args: Vec<&str> = common.to_vec();
        args.extend(tier.iter());
        args.extend(["--raw", "--read-ratio", "1"]);
        let report: serde_json::Value = serde_json::from_str(&tiercache(&args)).unwrap();
        assert!(report["read"]["count"].as_u64().unwrap() > 0, "{tier:?}: {report}");
        assert_eq!(report["write"]["count"].as_u64(), Some(0), "{tier:?}: {report}");
    }
    assert_eq!(
        std::fs::metadata(&backing).unwrap().len(),
        2 << 20,
        "the backing file was prepared"
    );
    // The backing file alone: its blocks read and written, no cache in the report.
    let mut args: Vec<&str> = common.to_vec();
    args.push("--raw-backing");
    let report: serde_json::Value = serde_json::from_str(&tiercache(&args)).unwrap();
    assert_eq!(report["mode"], "raw", "{report}");
    assert!(report["tier"].as_str().unwrap().contains("backing file"), "{report}");
    assert!(report["cache"].is_null(), "{report}");
    assert!(report["read"]["count"].as_u64().unwrap() > 0, "{report}");
    assert!(report["write"]["count"].as_u64().unwrap() > 0, "{report}");
    let e = tiercache_fails(&["bench", "--raw", "--raw-backing"]);
    assert!(e.contains("--raw-backing") && e.contains("--raw"), "{e}");
    // The objects workload: values of mixed sizes (some spanning many pages) under their keys,
    // DRAM over flash, no backing file; a bad size spec names its part.
    let objects = [
        "bench",
        "--workload",
        "objects",
        "--objects",
        "2000",
        "--value-sizes",
        "64B-32KiB,256KiB@2%",
        "--ops",
        "4000",
        "--warmup",
        "0",
        "--threads",
        "2",
        "--dram",
        "4MiB",
        "--flash-path",
        flash_path,
        "--flash-size",
        "16MiB",
        "--shards",
        "4",
        "--json",
    ];
    let report: serde_json::Value = serde_json::from_str(&tiercache(&objects)).unwrap();
    assert_eq!(report["mode"], "objects", "{report}");
    assert!(report["tier"].as_str().unwrap().contains("max_value 256 KiB"), "{report}");
    let cache = &report["cache"];
    assert!(cache["hits"].as_u64().unwrap() > 500, "{cache}");
    assert!(cache["tier_hits"][1].as_u64().unwrap() > 0, "flash serves objects: {cache}");
    assert_eq!(cache["checksum_failures"], 0);
    assert_eq!(cache["writes_dropped"], 0);
    let e = tiercache_fails(&["bench", "--workload", "objects", "--value-sizes", "1KiB,2KiB"]);
    assert!(e.contains("'2KiB' is not SIZE@PERCENT%"), "{e}");
    let e = tiercache_fails(&["bench", "--workload", "objects", "--raw"]);
    assert!(e.contains("--workload objects runs through the cache"), "{e}");
    // `--ops` ends the run after that many operations over all threads, with no time limit;
    // DRAM hits go without the shard lock unless `--locked-hits`.
    for locked in [false, true] {
        let mut args: Vec<&str> = common.to_vec();
        args.extend(["--dram", "1MiB", "--ops", "5000"]);
        if locked {
            args.push("--locked-hits");
        }
        let report: serde_json::Value = serde_json::from_str(&tiercache(&args)).unwrap();
        let ops =
            report["read"]["count"].as_u64().unwrap() + report["write"]["count"].as_u64().unwrap();
        assert_eq!(ops, 5000, "{report}");
        let unlocked = report["cache"]["unlocked_hits"].as_u64().unwrap();
        assert_eq!(unlocked > 0, !locked, "{report}");
    }
    let e = tiercache_fails(&[
        "bench",
        "--dram",
        "1MiB",
        "--slow-path",
        "/tmp/x",
        "--slow-size",
        "1MiB",
        "--raw",
    ]);
    assert!(e.contains("one tier"), "{e}");
    let e = tiercache_fails(&[
        "bench",
        "--slow-path",
        "/nonexistent/dir/slow",
        "--slow-size",
        "1MiB",
        "--backing",
        b,
        "--reuse-backing",
        "--working-set",
        "2MiB",
    ]);
    assert!(e.contains("/nonexistent/dir/slow"), "{e}");
}

/// `bench --recover quiet` restarts over the tier file the run before it left: every block comes
/// back, and the restarted run's first reads hit. The default (wipe) starts empty.
#[test]
fn bench_restarts_warm_over_its_tier_file() {
    let (backing, slow) = (scratch("warm.backing"), scratch("warm.slow"));
    let bench = |recover: &str| -> serde_json::Value {
        let args = [
            "bench",
            "--slow-path",
            slow.to_str().unwrap(),
            "--slow-size",
            "4MiB",
            "--backing",
            backing.to_str().unwrap(),
            "--reuse-backing",
            "--working-set",
            "8MiB",
            "--dist",
            "uniform",
            "--ops",
            "1000",
            "--warmup",
            "0",
            "--threads",
            "1",
            "--recover",
            recover,
            "--json",
        ];
        serde_json::from_str(&tiercache(&args)).unwrap()
    };
    let cold = bench("wipe");
    assert_eq!(cold["cache"]["recovered"], 0, "{cold}");
    assert!(cold["recovery"].is_null(), "{cold}");
    let warm = bench("quiet");
    let count = |run: &serde_json::Value, counter: &str| run["cache"][counter].as_u64().unwrap();
    let left = count(&cold, "inserts") - count(&cold, "evictions") - count(&cold, "invalidations");
    assert!(left > 500, "{cold}");
    assert_eq!(count(&warm, "recovered"), left, "every block the run before left: {warm}");
    assert_eq!(warm["recovery"]["clean"], true, "{warm}");
    let (cold_hits, warm_hits) =
        (cold["hit_ratio"].as_f64().unwrap(), warm["hit_ratio"].as_f64().unwrap());
    // The same seed replays the same 1,000 requests: a cold cache hits only what it read
    // since it started, a warm one what the run before it left.
    assert!(warm_hits > cold_hits + 0.5, "cold {cold_hits}, warm {warm_hits}");
    let left =
        left + count(&warm, "inserts") - count(&warm, "evictions") - count(&warm, "invalidations");
    let strict = bench("strict");
    assert_eq!(count(&strict, "recovered"), left, "{strict}");
    let e = tiercache_fails(&["bench", "--recover", "maybe"]);
    assert!(e.contains("--recover") && e.contains("wipe, quiet or strict"), "{e}");
}

#[test]
fn sim_runs_two_tier_placements_and_counts_moves() {
    let trace = data_trace("cloudPhysicsIO.vscsi.zst");
    let t = trace.to_str().unwrap();
    let run = |placement: &str| {
        sim_blocks(t, "lru", "500", &["--lower-capacity", "2000", "--placement", placement])
    };
    for placement in ["dram-first", "scm-first:2", "bidirectional:4"] {
        let r = run(placement);
        let (upper, lower) = (r["upper_hits"].as_u64().unwrap(), r["lower_hits"].as_u64().unwrap());
        assert_eq!(upper + lower, r["hits"].as_u64().unwrap(), "{placement}");
        assert!(lower > 0, "{placement}: {r}");
        assert_eq!(r["lower_capacity"], 2000);
        let promoted = r["bytes_promoted"].as_u64().unwrap();
        assert_eq!(
            promoted == 0,
            placement == "dram-first",
            "{placement}: {promoted} bytes promoted"
        );
    }
    let e = tiercache_fails(&[
        "sim",
        "--trace",
        t,
        "--policy",
        "lru",
        "--capacity",
        "1MiB",
        "--lower-capacity",
        "4MiB",
        "--placement",
        "sideways",
    ]);
    assert!(e.contains("sideways"), "{e}");
}

#[test]
fn profiles_list_show_and_load_from_toml() {
    let list = tiercache(&["profile", "list"]);
    assert!(list.contains("optane-dcpm") && list.contains("hdd"), "{list}");
    let toml = tiercache(&["profile", "show", "optane-dcpm"]);
    assert!(toml.contains("read_share_one_writer"), "{toml}");
    let path = scratch("my-device.toml");
    std::fs::write(&path, toml.replace("name = \"optane-dcpm\"", "name = \"mine\"")).unwrap();
    let back = tiercache(&["profile", "show", path.to_str().unwrap()]);
    assert!(back.contains("name = \"mine\""), "{back}");
    std::fs::write(&path, toml.replace("parallelism", "parallelizm")).unwrap();
    let e = tiercache_fails(&["profile", "show", path.to_str().unwrap()]);
    assert!(e.contains("my-device.toml") && e.contains("parallelizm"), "{e}");
}

#[test]
fn sim_runs_open_cas_modes() {
    let trace = data_trace("cloudPhysicsIO.vscsi.zst");
    let t = trace.to_str().unwrap();
    let run = |mode: &str| sim_blocks(t, "lru", "4000", &["--mode", mode]);
    let (wt, wb, wa, pt) = (run("wt"), run("wb"), run("wa"), run("pt"));
    // Write-back writes dirty blocks back (on eviction); write-through never needs to.
    assert_eq!(wt["write_backs"], 0);
    assert!(wb["write_backs"].as_u64().unwrap() > 0);
    // Same placements, so the same hits; write-around places no write misses.
    assert_eq!(wt["hits"], wb["hits"]);
    assert!(wa["insertions"].as_u64().unwrap() < wt["insertions"].as_u64().unwrap());
    assert_eq!((pt["hits"].as_u64(), pt["insertions"].as_u64()), (Some(0), Some(0)));
    let e = tiercache_fails(&[
        "sim",
        "--trace",
        t,
        "--policy",
        "lru",
        "--capacity",
        "1MiB",
        "--mode",
        "wx",
    ]);
    assert!(e.contains("--mode") && e.contains("'wx'"), "{e}");
}

#[test]
fn sim_in_virtual_time_reports_throughput_and_devices() {
    let trace = data_trace("msr_hm_0_first1000.csv.zst");
    let t = trace.to_str().unwrap();
    let run = |clients: &str| {
        sim_blocks(
            t,
            "lru",
            "200",
            &["--clients", clients, "--profile", "dram", "--backing-profile", "hdd"],
        )
    };
    let (one, many) = (run("1"), run("8"));
    assert_eq!(one["requests"], many["requests"]);
    let (a, b) =
        (one["ops_per_second"].as_f64().unwrap(), many["ops_per_second"].as_f64().unwrap());
    // A disk serves one request at a time: more clients queue rather than go faster.
    assert!(a > 0.0 && (b / a - 1.0).abs() < 0.1, "{a} vs {b}");
    assert_eq!(one["devices"].as_array().unwrap().len(), 2);
    let open = sim_blocks(t, "lru", "200", &["--arrival-rate", "50", "--backing-profile", "hdd"]);
    assert_eq!(open["arrival_rate"], 50.0);
    assert!(open["series"].as_array().unwrap().len() > 1, "a time series: {open}");
    let e = tiercache_fails(&[
        "sim",
        "--trace",
        t,
        "--policy",
        "lru",
        "--capacity",
        "1MiB",
        "--clients",
        "2",
        "--profile",
        "tape",
    ]);
    assert!(e.contains("tape") && e.contains("--profile"), "{e}");
}

#[test]
fn experiments_run_from_one_toml_file() {
    let lab = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../lab");
    let files = [
        "kassa-placements.toml",
        "ycsb-b-writeback.toml",
        "three-tiers.toml",
        "nhc-optane-flash.toml",
    ];
    for name in files {
        let out = tiercache(&["run", lab.join(name).to_str().unwrap()]);
        assert!(out.contains("hit ratio"), "{name}: {out}");
    }
    let bad = scratch("bad.toml");
    std::fs::write(&bad, "[cache]\npolicy = \"lru\"\ncapacity = \"100\"\ncapacty = \"5\"\n[workload]\ntrace = \"x.csv\"\n").unwrap();
    let e = tiercache_fails(&["run", bad.to_str().unwrap()]);
    assert!(e.contains("bad.toml") && e.contains("capacty"), "{e}");
    std::fs::write(&bad, "[cache]\npolicy = \"lru\"\n[wokload]\n").unwrap();
    let e = tiercache_fails(&["run", bad.to_str().unwrap()]);
    assert!(e.contains("[wokload]"), "{e}");
}

#[test]
fn sim_runs_hibachi_and_its_hybrid_lru_baseline_on_two_tiers() {
    let trace = data_trace("cloudPhysicsIO.vscsi.zst");
    let t = trace.to_str().unwrap();
    for policy in ["hibachi", "hybrid-lru", "hybrid-arc", "hibachi:seq_threshold=4"] {
        let r = sim_blocks(t, policy, "1024", &["--lower-capacity", "1024"]);
        assert!(r["write_backs"].as_u64().unwrap() > 0, "{policy}: dirty pages are written back");
        assert!(
            r["read_hits"].as_u64().unwrap() > 0 && r["write_hits"].as_u64().unwrap() > 0,
            "{policy}"
        );
    }
    let e = tiercache_fails(&["sim", "--trace", t, "--policy", "hibachi", "--capacity", "1024"]);
    assert!(e.contains("--lower-capacity"), "{e}");
}

#[test]
fn sim_runs_a_hierarchy_of_three_tiers_in_counts_and_in_virtual_time() {
    let trace = data_trace("cloudPhysicsIO.vscsi.zst");
    let t = trace.to_str().unwrap();
    let base = [
        "--trace",
        t,
        "--block-size",
        "4KiB",
        "--unit",
        "objects",
        "--policy",
        "lru",
        "--capacity",
        "500",
        "--lower-capacity",
        "2000",
        "--tier",
        "8000:fifo",
    ];
    let r = sim_json(&base);
    let tiers = r["hits_by_tier"].as_object().unwrap();
    let by_tier: Vec<u64> = (0..3).map(|t| tiers[&t.to_string()].as_u64().unwrap()).collect();
    assert!(by_tier.iter().all(|n| *n > 0), "every tier serves hits: {by_tier:?}");
    assert_eq!(by_tier.iter().sum::<u64>(), r["hits"].as_u64().unwrap());
    assert_eq!(r["policy"], "dram-first(lru > lru > fifo)");
    // The flash tier adds hits over the two tiers alone.
    let two = sim_json(&base[..base.len() - 2]);
    assert!(r["hits"].as_u64() > two["hits"].as_u64());

    let mut timed: Vec<&str> = base.to_vec();
    timed.extend(["--clients", "4", "--tier-profile", "sata-ssd", "--backing-profile", "hdd"]);
    let v = sim_json(&timed);
    let devices: Vec<&str> =
        v["devices"].as_array().unwrap().iter().map(|d| d["name"].as_str().unwrap()).collect();
    assert_eq!(devices, ["dram", "optane-dcpm", "sata-ssd", "hdd"]);
    assert_eq!(v["hits"], r["hits"], "virtual time decides the same");

    let e = tiercache_fails(&[
        "sim",
        "--trace",
        t,
        "--policy",
        "lru",
        "--capacity",
        "500",
        "--unit",
        "objects",
        "--tier",
        "800",
    ]);
    assert!(e.contains("--lower-capacity"), "{e}");
    let mut bad = base.to_vec();
    let last = bad.len() - 1;
    bad[last] = "8000:nosuch";
    let e = tiercache_fails(&[&["sim"], &bad[..]].concat());
    assert!(e.contains("--tier: '8000:nosuch'") && e.contains("nosuch"), "{e}");
    let mut hibachi = base.to_vec();
    hibachi[7] = "hibachi";
    let e = tiercache_fails(&[&["sim"], &hibachi[..]].concat());
    assert!(e.contains("two tiers"), "{e}");
}

#[test]
fn model_orthus_writes_figure_3_as_csv() {
    let out = scratch("orthus");
    let text = tiercache(&["model", "orthus", "--out", out.to_str().unwrap(), "--steps", "10"]);
    assert!(text.contains("100:50"), "{text}");
    let csv = std::fs::read_to_string(out.join("orthus-figure3.csv")).unwrap();
    let rows: Vec<Vec<f64>> =
        csv.lines().skip(1).map(|l| l.split(',').map(|x| x.parse().unwrap()).collect()).collect();
    assert_eq!(rows.len(), 4 * 11);
    // 100:10 at H = S = 0.9: equation 2 gives 50, equation 7 gives 100, equation 9 gives 1/0.01.
    let row = rows.iter().find(|r| r[1] == 10.0 && (r[2] - 0.9).abs() < 1e-9).unwrap();
    assert!((row[3] - 50.0).abs() < 1e-3 && (row[4] - 100.0).abs() < 1e-3, "{row:?}");
    assert!((row[6] - 100.0).abs() < 1e-3, "{row:?}");
    // A file where the directory should be: a clear error naming it.
    let file = scratch("orthus-file");
    std::fs::write(&file, "").unwrap();
    let e = tiercache_fails(&["model", "orthus", "--out", file.to_str().unwrap()]);
    assert!(e.contains("orthus-file"), "{e}");
}

#[test]
fn sim_runs_behind_nvcache_admission() {
    let trace = data_trace("cloudPhysicsIO.vscsi.zst");
    let t = trace.to_str().unwrap();
    let run = |nvcache: &str| sim_blocks(t, "lru", "20000", &["--nvcache", nvcache]);
    let (always, obp) = (run("alloc-read-write"), run("obp:0.1"));
    let inserts = |r: &serde_json::Value| r["insertions"].as_u64().unwrap();
    let reads = obp["reads"].as_u64().unwrap();
    // OBP: inserts plus removals stay near 10% of lookups (reads).
    let writes =
        inserts(&obp) + obp["evictions"].as_u64().unwrap() + obp["invalidations"].as_u64().unwrap();
    assert!(writes as f64 <= 0.101 * reads as f64, "{writes} writes for {reads} lookups");
    assert!(inserts(&always) > 20 * inserts(&obp));
    assert!(obp["rejections_by_reason"]["throttled"].as_u64().unwrap() > 0, "{obp}");
    assert!(obp["policy"].as_str().unwrap().contains("obp 10%"));
    let e = tiercache_fails(&[
        "sim",
        "--trace",
        t,
        "--policy",
        "lru",
        "--capacity",
        "100",
        "--unit",
        "objects",
        "--nvcache",
        "obp:lots",
    ]);
    assert!(e.contains("--nvcache") && e.contains("'lots'"), "{e}");
}

/// Every lab experiment runs (at its tiny test scale) and writes a report whose claims each
/// carry a rule and a verdict, with the files the report links. A verdict follows its cases:
/// "holds" or "holds in shape" only when every case meets the rule, "not tested" only with no
/// case. The quick and full scales are the same code with more requests.
#[test]
fn lab_experiments_write_reports_with_verdicts() {
    let list = tiercache(&["lab", "list"]);
    for name in ["writes-hurt", "orthus", "kassa", "hibachi", "ycsb", "calibrate"] {
        assert!(list.contains(name), "{list}");
    }
    let out = scratch("lab");
    tiercache(&["lab", "run", "all", "--smoke", "--out", out.to_str().unwrap()]);
    for name in ["writes-hurt", "orthus", "kassa", "hibachi", "ycsb", "calibrate"] {
        let report = std::fs::read_to_string(out.join(format!("{name}.md"))).unwrap();
        let rows: Vec<&str> = report
            .lines()
            .skip_while(|l| !l.starts_with("| # | the paper says"))
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .collect();
        assert!(rows.len() >= 3, "{name}: {report}");
        let json = std::fs::read_to_string(out.join(name).join("claims.json")).unwrap();
        let claims: serde_json::Value = serde_json::from_str(&json).unwrap();
        let claims = claims.as_array().unwrap();
        assert_eq!(claims.len(), rows.len(), "{name}: one row per claim");
        for (row, claim) in rows.iter().zip(claims) {
            let cases = claim["cases"].as_array().unwrap();
            let all_hold = cases.iter().all(|c| c["holds"].as_bool().unwrap());
            let verdict = claim["verdict"].as_str().unwrap();
            let expected = match (cases.is_empty(), all_hold, claim["kind"].as_str().unwrap()) {
                (true, _, _) => "not_tested",
                (false, false, _) => "does_not_hold",
                (false, true, "value") => "holds",
                (false, true, _) => "holds_in_shape",
            };
            assert_eq!(verdict, expected, "{name}: {row}");
            let shown = format!("**{}**", verdict.replace('_', " "));
            assert!(row.contains(&shown), "{name}: {row} should show {shown}");
            assert!(!claim["rule"].as_str().unwrap().is_empty(), "{name}: {row}");
        }
        for link in report.split("](").skip(1).filter_map(|s| s.split(')').next()) {
            assert!(out.join(link).exists(), "{name}: {link} is linked but missing");
        }
    }
    // A paper's headline results each have a sweep (a chart and its CSV), and a paragraph at
    // the top that says whether the result reproduces on the paper's setup. The report opens
    // with the fidelity tables, each row quoting the paper (file and line) or saying how an
    // assumption is covered, and fidelity.json holds the same.
    for (name, results) in [("writes-hurt", 4), ("orthus", 2), ("kassa", 4), ("hibachi", 1)] {
        let report = std::fs::read_to_string(out.join(format!("{name}.md"))).unwrap();
        let fidelity = report.find("## Fidelity: the paper's setup beside ours");
        let claims = report.find("## Claims");
        assert!(fidelity.is_some() && fidelity < claims, "{name}: the fidelity tables first");
        let json = std::fs::read_to_string(out.join(name).join("fidelity.json")).unwrap();
        let tables: serde_json::Value = serde_json::from_str(&json).unwrap();
        for table in tables.as_array().unwrap() {
            let params = table["params"].as_array().unwrap();
            assert!(params.iter().any(|p| p["paper"]["file"].is_string()), "{name}: {table}");
            for p in params {
                let line = p["paper"]["line"].as_u64();
                assert!(p["paper"].is_null() || line.is_some_and(|l| l > 0), "{name}: {p}");
            }
        }
        let sweeps = report.split("\n## Sensitivity: ").skip(1);
        assert_eq!(sweeps.count(), results, "{name}: one sweep per headline result");
        let top = report
            .split("## The headline results on the paper's setup")
            .nth(1)
            .and_then(|rest| rest.split("\n## Setup").next())
            .unwrap_or_else(|| panic!("{name}: no headline results"));
        let paragraphs: Vec<&str> = top.split("\n\n").filter(|p| p.starts_with("**")).collect();
        assert_eq!(paragraphs.len(), results, "{name}: {top}");
        for paragraph in paragraphs {
            assert!(paragraph.contains("On the paper's setup ("), "{name}: {paragraph}");
            assert!(paragraph.contains("reproduce"), "{name}: {paragraph}");
            assert!(paragraph.contains("/sensitivity-"), "{name}: {paragraph}");
        }
    }
    let err = tiercache_fails(&["lab", "run", "tape", "--smoke"]);
    assert!(err.contains("tape") && err.contains("orthus"), "{err}");
    // The tally is the claims' own verdicts, counted by origin: every claim has one, the
    // papers' and the lab's own apart.
    let tally = tiercache(&["lab", "tally", "--dir", out.to_str().unwrap(), "--json"]);
    let tally: serde_json::Value = serde_json::from_str(&tally).unwrap();
    let mut expected = std::collections::BTreeMap::<(String, String), u64>::new();
    let mut uncounted = std::collections::BTreeMap::<&str, u64>::new();
    for name in ["writes-hurt", "orthus", "kassa", "hibachi", "ycsb", "calibrate"] {
        let json = std::fs::read_to_string(out.join(name).join("claims.json")).unwrap();
        let claims: serde_json::Value = serde_json::from_str(&json).unwrap();
        for claim in claims.as_array().unwrap() {
            let origin = claim["origin"].as_str().unwrap();
            assert!(["paper", "ours"].contains(&origin), "{name}: origin {origin}");
            // A claim that follows from another, or whose figure is arithmetic, is judged
            // and shown but not counted.
            if claim.get("not_counted").is_some() {
                *uncounted.entry(name).or_default() += 1;
                continue;
            }
            let verdict = claim["verdict"].as_str().unwrap().to_string();
            *expected.entry((origin.to_string(), verdict)).or_default() += 1;
        }
    }
    for ((origin, verdict), n) in &expected {
        let key = if origin == "paper" { "papers" } else { "ours" };
        assert_eq!(tally[key][verdict].as_u64(), Some(*n), "{origin} {verdict}: {tally}");
    }
    for (name, n) in &uncounted {
        assert_eq!(tally["not_counted"][name].as_u64(), Some(*n), "{name}: {tally}");
    }
    assert!(uncounted.contains_key("orthus") && uncounted.contains_key("kassa"), "{tally}");
    assert!(tally["ours"]["claims"].as_u64().unwrap() >= 5, "the lab's own claims: {tally}");
    // A claims.json written before claims had an origin is refused, naming it; so is a
    // missing one, never counted as no claims.
    let old = scratch("lab-old");
    for name in ["writes-hurt", "orthus", "kassa", "hibachi", "ycsb", "calibrate"] {
        std::fs::create_dir_all(old.join(name)).unwrap();
        std::fs::copy(out.join(name).join("claims.json"), old.join(name).join("claims.json"))
            .unwrap();
    }
    std::fs::write(old.join("kassa/claims.json"), r#"[{"verdict": "holds"}]"#).unwrap();
    let err = tiercache_fails(&["lab", "tally", "--dir", old.to_str().unwrap()]);
    assert!(err.contains("kassa/claims.json") && err.contains("origin"), "{err}");
    std::fs::remove_file(old.join("kassa/claims.json")).unwrap();
    let err = tiercache_fails(&["lab", "tally", "--dir", old.to_str().unwrap()]);
    assert!(err.contains("kassa/claims.json is missing") && err.contains("lab run kassa"), "{err}");
    assert!(err.contains("--dir docs/lab"), "where the committed runs are: {err}");
}

/// `bench` runs the controllers by the flags every engine command shares (`--nhc`,
/// `--nvcache`, in front of `--policy`): NHC holding a static split sends hits to the backing
/// file; OBP throttles admissions. The policy is the stack spec's, so a policy joined to
/// another, as the old `--policy nhc+lru` was, is an error that names it.
#[test]
fn bench_runs_the_controllers_through_policy() {
    let backing = scratch("bench-controllers.backing");
    let run = |controller: &[&str]| -> serde_json::Value {
        let args = [
            "bench",
            "--dram",
            "1MiB",
            "--working-set",
            "2MiB",
            "--read-ratio",
            "1",
            "--duration",
            "1",
            "--warmup",
            "0.5",
            "--measure-ms",
            "2",
            "--json",
            "--backing",
            backing.to_str().unwrap(),
            "--reuse-backing",
        ];
        serde_json::from_str(&tiercache(&[&args[..], controller].concat())).unwrap()
    };
    let nhc = run(&["--nhc", "nhc:load_admit=0.5,window=2", "--policy", "s3fifo"]);
    assert_eq!(nhc["knobs"]["load_admit"], 0.5, "{}", nhc["knobs"]);
    assert!(nhc["cache"]["offloaded"].as_u64().unwrap() > 0, "{}", nhc["cache"]);
    assert!(nhc["tier"].as_str().unwrap().contains("nhc:load_admit=0.5,window=2+s3fifo"), "{nhc}");
    let obp = run(&["--nvcache", "obp:0.1"]);
    assert!(obp["knobs"]["obp"].as_f64().unwrap() <= 0.11, "{}", obp["knobs"]);
    assert!(obp["cache"]["rejections"]["throttled"].as_u64().unwrap() > 0, "{}", obp["cache"]);
    let e =
        tiercache_fails(&["bench", "--policy", "nhc+lru", "--backing", backing.to_str().unwrap()]);
    assert!(e.contains("--policy nhc+lru"), "{e}");
}

/// `crashtest`: a child writing through a write-back cache is killed with SIGKILL 20 times per
/// tier; after each kill the cache reopens over what it left, and every block holds its last
/// synced write or a later one, whole. The flash tier also with the set-associative policy,
/// whose blocks lie where it places them; and three tiers, DRAM over a mapped tier over a
/// flash tier, whose dirty blocks move down through both (and up again, SCM-first).
#[test]
fn crashtest_kills_a_write_back_writer_and_loses_nothing() {
    for (tier, policy, placement) in [
        ("mapped", "lru", "dram-first"),
        ("file", "lru", "dram-first"),
        ("flash", "lru", "dram-first"),
        ("flash", "setassoc:ways=8", "dram-first"),
        ("dram+mapped+flash", "lru", "dram-first"),
        ("dram+mapped+flash", "lru", "scm-first:2"),
    ] {
        let dir = scratch(&format!("crashtest-{tier}-{}-{}", policy.len(), placement.len()));
        let args = ["crashtest", "--tier", tier, "--mode", "wb", "--kills", "20", "--seed", "11"];
        let args = [&args[..], &["--policy", policy, "--placement", placement]].concat();
        let out = tiercache(&[&args[..], &["--json", "--dir", dir.to_str().unwrap()]].concat());
        let report: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(report["kills"], 20, "{report}");
        for field in ["lost", "stale", "torn"] {
            assert_eq!(report[field], 0, "{tier}: {field}: {report}");
        }
        // Worth something only if the kills found synced and dirty data to check.
        assert!(report["synced_writes"].as_u64().unwrap() > 1000, "{tier}: {report}");
        assert!(report["recovered_dirty"].as_u64().unwrap() > 100, "{tier}: {report}");
        let _ = std::fs::remove_dir_all(&dir);
    }
    let err = tiercache_fails(&["crashtest", "--tier", "pmem", "--kills", "1"]);
    assert!(err.contains("--tier pmem"), "{err}");
    let err = tiercache_fails(&["crashtest", "--tier", "mapped+dram", "--kills", "1"]);
    assert!(err.contains("--tier dram") && err.contains("above another"), "{err}");
}

/// `bench --write-mode wb`: writes stay dirty on the mapped tier, evictions write them back,
/// and what is dirty at the end is written back after the run and reported.
#[test]
fn bench_runs_write_back_and_reports_the_deferred_write_backs() {
    let (backing, slow) = (scratch("wb.backing"), scratch("wb.slow"));
    let args = [
        "bench",
        "--slow-path",
        slow.to_str().unwrap(),
        "--slow-size",
        "2MiB",
        "--backing",
        backing.to_str().unwrap(),
        "--working-set",
        "8MiB",
        "--read-ratio",
        "0.5",
        "--dist",
        "uniform",
        "--ops",
        "4000",
        "--warmup",
        "0",
        "--threads",
        "1",
        "--write-mode",
        "wb",
        "--json",
    ];
    let report: serde_json::Value = serde_json::from_str(&tiercache(&args)).unwrap();
    let cache = &report["cache"];
    assert!(cache["write_backs"].as_u64().unwrap() > 100, "{report}");
    assert_eq!(cache["dirty_lost"], 0, "{report}");
    let after = &report["written_back_after"];
    assert!(after["blocks"].as_u64().unwrap() > 0, "{report}");
    let _ = std::fs::remove_file(&backing);
    let err = tiercache_fails(&["bench", "--write-mode", "wb", "--ops", "10"]);
    assert!(err.contains("volatile_write_back"), "{err}");
}
