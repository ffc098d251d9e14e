//! `tiercache mrc` against full simulations: LRU's curve from stack distances is the
//! simulator's exactly; sampled curves are within a point of the full sweep at a 1% sampling
//! rate on a trace of 760,000 keys (issue #55's bound) and, post-stratified, on a skewed one of
//! 187,000; bad options are named.

mod common;

use common::{data_trace, scratch, tiercache, tiercache_fails};

fn mrc_json(name: &str, args: &[&str]) -> serde_json::Value {
    let out = scratch("mrc", name);
    let mut all = vec!["mrc", "--json", "--out", out.to_str().unwrap()];
    all.extend_from_slice(args);
    let report: serde_json::Value = serde_json::from_str(&tiercache(&all)).expect("JSON");
    for file in ["mrc.csv", "mrc.svg", "mrc.png"] {
        assert!(out.join(file).exists(), "{file} not written");
    }
    report
}

/// arc_P3 (3.9 million requests, 762,543 keys; data/README.md): LRU exact in bytes and in
/// objects, ARC and S3-FIFO sampled at 1% over three samples, each checked against its full
/// simulation.
#[test]
fn lru_is_exact_and_sampled_curves_are_within_a_point_of_the_full_simulations() {
    let trace = data_trace("arc_P3.lis.zst");
    for (unit, capacities) in [("bytes", "4MiB,16MiB,64MiB"), ("objects", "2000,8000,32000")] {
        let report = mrc_json(
            unit,
            &[
                "--trace",
                trace.to_str().unwrap(),
                "--unit",
                unit,
                "--capacities",
                capacities,
                "--policy",
                "lru",
                "--policy",
                "arc",
                "--policy",
                "s3fifo",
                "--check",
            ],
        );
        let points = report["points"].as_array().unwrap();
        let check = &report["check"];
        let errors = check["error"].as_array().unwrap();
        assert_eq!(points.len(), 9);
        for (point, error) in points.iter().zip(errors) {
            let error = error.as_f64().unwrap();
            match point["policy"].as_str().unwrap() {
                "lru" => {
                    assert_eq!(point["method"], "exact");
                    assert_eq!(error, 0.0, "{unit}: LRU's exact curve is off: {point}");
                }
                _ => {
                    assert_eq!(point["method"], "sampled");
                    assert_eq!(point["samples"], 3);
                    assert!((point["rate"].as_f64().unwrap() - 0.01).abs() < 1e-9);
                    assert!(point["spread"].as_f64().unwrap() > 0.0, "{point}");
                }
            }
        }
        let mae = check["mean_absolute_error"].as_f64().unwrap();
        assert!(mae < 0.01, "{unit}: mean absolute error {mae} at rate 0.01");
    }
}

/// arc_OLTP (914,145 requests, 186,880 keys, 100 of which take 13.6% of the requests): whether
/// a 1% sample holds a few of the hottest keys moves its plain miss ratio (misses over requests)
/// by points; post-stratified by the keys' request counts (the default) the curve is within a
/// point of the full simulations at the sizes whose sampled cache holds at least 100 blocks,
/// where the plain ratio is not.
#[test]
fn stratified_sampling_holds_a_skewed_trace_within_a_point() {
    let trace = data_trace("arc_OLTP.lis.zst");
    let mae = |estimator: &str| {
        let report = mrc_json(
            estimator,
            &[
                "--trace",
                trace.to_str().unwrap(),
                "--capacities",
                "9568256,19136512,47841280",
                "--policy",
                "fifo",
                "--policy",
                "arc",
                "--estimator",
                estimator,
                "--check",
            ],
        );
        assert!(report["points"].as_array().unwrap().iter().all(|p| p["estimator"] == estimator));
        report["check"]["mean_absolute_error"].as_f64().unwrap()
    };
    let (stratified, plain) = (mae("stratified"), mae("plain"));
    assert!(stratified < 0.01, "stratified: mean absolute error {stratified}");
    assert!(plain > 0.015, "plain: mean absolute error {plain} (the samples' hot keys)");
}

/// `--min-sampled-objects` raises the rate where the sampled cache would be small: on arc_OLTP
/// (512-byte blocks) 93.4 KiB holds 186 blocks, so 100 of them need a rate above a half, and the
/// point is the whole trace's simulation, once (no error); 280.3 KiB holds 560, a rate of 0.178.
#[test]
fn small_sizes_can_be_sampled_at_a_higher_rate() {
    let trace = data_trace("arc_OLTP.lis.zst");
    let report = mrc_json(
        "min-objects",
        &[
            "--trace",
            trace.to_str().unwrap(),
            "--capacities",
            "95682,287047",
            "--policy",
            "fifo",
            "--min-sampled-objects",
            "100",
            "--check",
        ],
    );
    let (whole, raised) = (&report["points"][0], &report["points"][1]);
    assert_eq!((whole["rate"].as_f64(), whole["samples"].as_u64()), (Some(1.0), Some(1)));
    let error = report["check"]["error"][0].as_f64().unwrap();
    assert!(error.abs() < 1e-9, "the whole trace's point is off by {error}");
    let rate = raised["rate"].as_f64().unwrap();
    assert!((0.17..0.19).contains(&rate) && raised["samples"] == 3, "{raised}");
    let err = tiercache_fails(&[
        "mrc",
        "--trace",
        trace.to_str().unwrap(),
        "--min-sampled-objects",
        "100",
        "--sample-keys",
        "1000",
    ]);
    assert!(err.contains("--sample-keys"), "{err}");
}

/// A bound on the keys sampled sets the rate: cloudPhysicsIO has 48,974 keys, so 1,000 keys
/// is a rate near 2%, and the requests simulated are near 2% of 113,872 per sample.
#[test]
fn a_key_bound_sets_the_rate() {
    let trace = data_trace("cloudPhysicsIO.oracleGeneral.bin.zst");
    let report = mrc_json(
        "keys",
        &[
            "--trace",
            trace.to_str().unwrap(),
            "--policy",
            "sieve",
            "--capacities",
            "64MiB",
            "--sample-keys",
            "1000",
            "--samples",
            "2",
        ],
    );
    let point = &report["points"][0];
    let rate = point["rate"].as_f64().unwrap();
    assert!((0.015..0.025).contains(&rate), "rate {rate}");
    let simulated = point["simulated_requests"].as_u64().unwrap();
    assert!((2 * 1000..2 * 4000).contains(&simulated), "{simulated} requests over two samples");
}

#[test]
fn impossible_sampling_options_are_named() {
    let trace = data_trace("cloudPhysicsIO.oracleGeneral.bin.zst");
    let trace = trace.to_str().unwrap();
    for (flag, value, expected) in [
        ("--rate", "0", "--rate must be in (0, 1]"),
        ("--rate", "1.5", "--rate must be in (0, 1]"),
        ("--samples", "0", "--samples must be at least 1"),
        ("--sample-keys", "0", "--sample-keys must be at least 1"),
    ] {
        let err = tiercache_fails(&["mrc", "--trace", trace, flag, value]);
        assert!(err.contains(expected), "{flag} {value}: {err}");
    }
}
