//! Bad input through the command line: absurd numbers are errors naming the option and its
//! range (never a panic, an abort or a run that cannot end), and a cut binary trace read with
//! --skip-bad ends in every command that reads traces. Each command runs with a deadline, so a
//! hang fails the test instead of hanging it.

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{data_trace, tiercache_fails};

/// Long enough for each of these small runs on a loaded machine; only a hang reaches it.
const DEADLINE: Duration = Duration::from_secs(120);

fn scratch(name: &str) -> PathBuf {
    common::scratch("cli-bad", name)
}

/// Runs `tiercache ARGS` to its end or the deadline; returns success and stderr.
fn run(args: &[&str]) -> (bool, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tiercache"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > DEADLINE {
            child.kill().unwrap();
            panic!("tiercache {args:?} still running after {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert!(!stderr.contains("panicked"), "tiercache {args:?} panicked: {stderr}");
    (output.status.success(), stderr)
}

fn fails_naming(args: &[&str], needles: &[&str]) {
    let (ok, stderr) = run(args);
    assert!(!ok, "tiercache {args:?} should have failed");
    for needle in needles {
        assert!(stderr.contains(needle), "tiercache {args:?}: '{needle}' not in: {stderr}");
    }
}

#[test]
fn bench_refuses_absurd_numbers() {
    let backing = scratch("bench.backing");
    let backing = backing.to_str().unwrap();
    let base = ["bench", "--working-set", "1MiB", "--backing", backing];
    let cases: [(&[&str], &[&str]); 12] = [
        (&["--block-size", "0"], &["--block-size", "multiple of 512"]),
        (&["--duration=-1"], &["--duration", "above 0"]),
        (&["--duration", "nan"], &["--duration"]),
        (&["--duration", "1e30"], &["--duration", "at most"]),
        (&["--warmup", "1e30"], &["--warmup", "0 to 604800"]),
        (&["--warmup=-1"], &["--warmup", "0 to"]),
        (&["--threads", "20000"], &["--threads", "1 to 1024"]),
        (&["--threads", "0"], &["--threads"]),
        (&["--raw", "--dram", "0"], &["--dram 0", "--slow-path"]),
        (&["--measure-ms", "0"], &["--measure-ms"]),
        (&["--read-ratio", "2"], &["--read-ratio"]),
        (
            &["--flash-path", "/nonexistent-dir/f", "--flash-size", "1TiB"],
            &["capacity_bytes", "GiB"],
        ),
    ];
    for (extra, needles) in cases {
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        fails_naming(&args, needles);
    }
}

#[test]
fn sim_refuses_rates_that_never_end_from_flags_and_files() {
    let trace = data_trace("msr_hm_0_first1000.csv.zst");
    let trace = trace.to_str().unwrap();
    for rate in ["0", "-5", "nan", "inf"] {
        let flag = format!("--arrival-rate={rate}");
        let args = ["sim", "--trace", trace, "--policy", "lru", "--capacity", "10", &flag];
        fails_naming(&args, &["arrival_rate", "above 0"]);
    }
    let file = scratch("rate.toml");
    let text = format!(
        "[workload]\ntrace = {trace:?}\n[cache]\npolicy = \"lru\"\ncapacity = \"10\"\n\
         [devices]\narrival_rate = -5\n"
    );
    std::fs::write(&file, text).unwrap();
    fails_naming(&["run", file.to_str().unwrap()], &["arrival_rate", "-5"]);
    // A profile file whose device would need a 64 GiB queue.
    let profile = scratch("wide.toml");
    let text = common::tiercache(&["profile", "show", "nvme"]);
    let text = text.replace("parallelism = 32", "parallelism = 4294967295");
    assert!(text.contains("4294967295"), "{text}");
    std::fs::write(&profile, text).unwrap();
    let args = [
        "sim",
        "--trace",
        trace,
        "--policy",
        "lru",
        "--capacity",
        "10",
        "--clients",
        "2",
        "--backing-profile",
        profile.to_str().unwrap(),
    ];
    fails_naming(&args, &["parallelism", "1 to 65536"]);
}

#[test]
fn a_cut_binary_trace_with_skip_bad_ends_in_every_command() {
    let whole = zstd::decode_all(
        &std::fs::read(data_trace("cloudPhysicsIO.oracleGeneral.bin.zst")).unwrap()[..],
    )
    .unwrap();
    let cut = scratch("cut.oracleGeneral.bin.zst");
    std::fs::write(&cut, zstd::encode_all(&whole[..24 * 500 + 7], 1).unwrap()).unwrap();
    let cut = cut.to_str().unwrap();
    let out = scratch("cut.csv");
    let sweep_out = scratch("sweep");
    let commands: [Vec<&str>; 4] = [
        vec![
            "sim",
            "--trace",
            cut,
            "--skip-bad",
            "--policy",
            "lru",
            "--capacity",
            "100",
            "--unit",
            "objects",
        ],
        vec!["trace", "stats", "--trace", cut, "--skip-bad"],
        vec!["trace", "convert", "--trace", cut, "--skip-bad", "-o", out.to_str().unwrap()],
        vec![
            "sweep",
            "--trace",
            cut,
            "--skip-bad",
            "--policy",
            "lru",
            "--capacities",
            "10,100",
            "--unit",
            "objects",
            "--out",
            sweep_out.to_str().unwrap(),
        ],
    ];
    for args in commands {
        let (ok, stderr) = run(&args);
        assert!(ok, "{args:?}: {stderr}");
    }
    // Without --skip-bad the cut record is the error, and it says where.
    let (ok, stderr) = run(&["trace", "stats", "--trace", cut]);
    assert!(!ok && stderr.contains("record 501") && stderr.contains("truncated"), "{stderr}");
}

/// A file of someone's with bytes worth keeping.
fn precious(name: &str) -> (PathBuf, Vec<u8>) {
    let path = scratch(name);
    let bytes: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&path, &bytes).unwrap();
    (path, bytes)
}

#[test]
fn foreign_files_given_as_tiers_or_backing_are_never_written() {
    let backing = scratch("safe.backing");
    let backing = backing.to_str().unwrap();
    let quick = ["--working-set", "1MiB", "--duration", "0.1", "--warmup", "0"];
    for (flag, size_flag) in [("--slow-path", "--slow-size"), ("--flash-path", "--flash-size")] {
        for raw in [false, true] {
            let (path, bytes) = precious(&format!("data{flag}{raw}.db"));
            let mut args = vec!["bench", "--backing", backing, "--reuse-backing"];
            args.extend([flag, path.to_str().unwrap(), size_flag, "1MiB"]);
            args.extend(quick);
            if raw {
                args.push("--raw");
            }
            fails_naming(&args, &["not a tiercache tier file", path.to_str().unwrap()]);
            assert_eq!(std::fs::read(&path).unwrap(), bytes, "{flag} raw {raw}");
            // On purpose, it is taken.
            args.push("--force");
            let (ok, stderr) = run(&args);
            assert!(ok, "{args:?}: {stderr}");
        }
    }
    // The backing file: an existing one only when asked, and never through a link.
    let (data, bytes) = precious("mydata.img");
    let args = ["bench", "--backing", data.to_str().unwrap()];
    let args: Vec<&str> = args.iter().chain(&quick).copied().collect();
    fails_naming(&args, &["exists", "--reuse-backing"]);
    assert_eq!(std::fs::read(&data).unwrap(), bytes);
    let link = scratch("link.backing");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&data, &link).unwrap();
    let args = ["bench", "--backing", link.to_str().unwrap(), "--reuse-backing"];
    let args: Vec<&str> = args.iter().chain(&quick).copied().collect();
    fails_naming(&args, &["link"]);
    assert_eq!(std::fs::read(&data).unwrap(), bytes);
}

#[test]
fn a_tier_file_in_use_is_refused_and_private() {
    use std::os::unix::fs::PermissionsExt;
    let tier = scratch("shared.mem");
    let tier = tier.to_str().unwrap();
    let first_backing = scratch("first.backing");
    let mut first = Command::new(env!("CARGO_BIN_EXE_tiercache"))
        .args(["bench", "--slow-path", tier, "--slow-size", "1MiB", "--working-set", "1MiB"])
        .args(["--duration", "20", "--warmup", "0", "--backing"])
        .arg(&first_backing)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait for the first bench to hold the file (it exists once locked, before it runs).
    let start = Instant::now();
    while !std::path::Path::new(tier).exists() && start.elapsed() < DEADLINE {
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(200));
    let args = ["bench", "--slow-path", tier, "--slow-size", "1MiB", "--working-set", "1MiB"];
    let second = run(&args);
    first.kill().unwrap();
    first.wait().unwrap();
    assert!(!second.0 && second.1.contains("in use"), "{}", second.1);
    let mode = std::fs::metadata(tier).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "tier files are private");
}

#[test]
fn a_killed_run_leaves_no_truncated_trace_behind() {
    // The generated trace goes to the temporary directory: a private one here.
    let tmp = scratch("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let experiment = scratch("generated.toml");
    std::fs::write(
        &experiment,
        "[workload.generate]\nycsb = \"B\"\nrecords = \"10000\"\noperations = \"2000000\"\n\
         [cache]\nunit = \"objects\"\npolicy = \"lru\"\ncapacity = \"1000\"\n",
    )
    .unwrap();
    let mut first = Command::new(env!("CARGO_BIN_EXE_tiercache"))
        .args(["run", experiment.to_str().unwrap()])
        .env("TMPDIR", &tmp)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    first.kill().unwrap();
    first.wait().unwrap();
    // Whatever the kill interrupted, a trace under the name later runs use is whole.
    for entry in std::fs::read_dir(&tmp).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        if name.starts_with("tiercache-experiment-") && !name.contains("partial") {
            let text = zstd::decode_all(&std::fs::read(&path).unwrap()[..]).unwrap();
            assert_eq!(text.iter().filter(|&&b| b == b'\n').count(), 2_000_001, "{name}");
        }
    }
    let again = Command::new(env!("CARGO_BIN_EXE_tiercache"))
        .args(["run", experiment.to_str().unwrap()])
        .env("TMPDIR", &tmp)
        .output()
        .unwrap();
    assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
}

/// An option that would do nothing is refused, naming it and what it needs: a placement or a
/// lower tier's device without a lower tier, a device without virtual time, a size where a
/// count of objects is meant, large values with one tier. A missing trace is missing.
#[test]
fn options_that_would_do_nothing_are_refused_naming_what_they_need() {
    let trace = data_trace("cloudPhysicsIO.oracleGeneral.bin.zst");
    let sim = |extra: &[&str]| {
        let mut args = vec!["sim", "--trace", trace.to_str().unwrap(), "--policy", "lru"];
        args.extend_from_slice(extra);
        tiercache_fails(&args)
    };
    let e = sim(&["--capacity", "8MiB", "--placement", "scm-first:2"]);
    assert!(e.contains("--placement") && e.contains("--lower-capacity"), "{e}");
    let e = sim(&["--capacity", "8MiB", "--lower-profile", "hdd", "--clients", "4"]);
    assert!(e.contains("--lower-profile") && e.contains("--lower-capacity"), "{e}");
    let e = sim(&["--capacity", "8MiB", "--lower-capacity", "64MiB", "--lower-profile", "hdd"]);
    assert!(e.contains("--lower-profile") && e.contains("--clients"), "{e}");
    let e = sim(&["--capacity", "1MiB", "--unit", "objects"]);
    assert!(e.contains("--capacity") && e.contains("'1MiB' is a size"), "{e}");
    let e = sim(&["--capacity", "8MiB", "--large-values", "64KiB"]);
    assert!(e.contains("--large-values") && e.contains("--lower-capacity"), "{e}");
    // A missing trace says it is missing, whatever its name would say of its format.
    let e =
        tiercache_fails(&["sim", "--trace", "nope.bin", "--policy", "lru", "--capacity", "1MiB"]);
    assert!(e.contains("nope.bin: cannot open trace") && e.contains("No such file"), "{e}");
}
