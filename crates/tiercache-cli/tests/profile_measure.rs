//! `tiercache profile measure` on a tmpfs file (mapped) and on a disk file (page cache): a
//! profile with positive latencies, bandwidths, parallelism and read shares, whose TOML the
//! simulator loads as `--profile`; bad paths and sizes are named, and a file that exists is
//! left as it was.

mod common;

use common::{data_trace, sim_json, tiercache, tiercache_fails};

fn scratch(name: &str) -> std::path::PathBuf {
    common::scratch("cli-measure", name)
}

#[test]
fn measured_profiles_are_positive_and_load_as_profiles() {
    let shm = std::path::Path::new("/dev/shm");
    let memory_dir = if shm.is_dir() { shm.to_path_buf() } else { std::env::temp_dir() };
    let media = [
        (memory_dir.join(format!("tiercache-measure-{}", std::process::id())), "memory"),
        (scratch("disk.bin"), "file"),
    ];
    for (path, kind) in media {
        let toml = scratch(&format!("{kind}.toml"));
        let out = tiercache(&[
            "profile",
            "measure",
            "--path",
            path.to_str().unwrap(),
            "--kind",
            kind,
            "--size",
            "16MiB",
            "--threads",
            "2",
            "--duration",
            "0.05",
            "--json",
            "-o",
            toml.to_str().unwrap(),
        ]);
        let m: serde_json::Value = serde_json::from_str(&out).unwrap();
        let p = &m["profile"];
        // The times as measured; the profile's latencies are those less the transfer the
        // simulator adds, 0 where the transfer is all of it (memory).
        for field in ["read_4k_us", "write_4k_us"] {
            let v = m[field].as_f64().unwrap();
            assert!(v > 0.0 && v.is_finite(), "{kind}: {field} = {v}");
        }
        for field in ["read_latency_us", "write_latency_us"] {
            let v = p[field].as_f64().unwrap();
            assert!(
                v >= 0.0 && v < m[field.replace("latency", "4k").as_str()].as_f64().unwrap() + 1e-9,
                "{kind}: {field} = {v}"
            );
        }
        for field in [
            "read_bandwidth_gb_s",
            "write_bandwidth_gb_s",
            "read_share_one_writer",
            "read_share_eight_writers",
        ] {
            let v = p[field].as_f64().unwrap();
            assert!(v > 0.0 && v.is_finite(), "{kind}: {field} = {v}");
        }
        assert!(p["parallelism"].as_u64().unwrap() >= 1);
        assert_eq!(m["parallelism_curve"].as_array().unwrap().len(), 2, "{m}");
        assert!(!path.exists(), "{kind}: the measured file is removed");
        // The TOML loads as a profile: shown (checked), and simulated with.
        assert!(tiercache(&["profile", "show", toml.to_str().unwrap()]).contains("parallelism"));
        let trace = data_trace("msr_hm_0_first1000.csv.zst");
        let r = sim_json(&[
            "--trace",
            trace.to_str().unwrap(),
            "--policy",
            "lru",
            "--capacity",
            "1MiB",
            "--clients",
            "2",
            "--profile",
            toml.to_str().unwrap(),
        ]);
        assert!(r["requests"].as_u64().unwrap() > 0, "{r}");
    }
}

#[test]
fn bad_paths_and_sizes_are_named_and_an_existing_file_is_kept() {
    let existing = scratch("keep.bin");
    std::fs::write(&existing, b"precious").unwrap();
    let err = tiercache_fails(&["profile", "measure", "--path", existing.to_str().unwrap()]);
    assert!(err.contains("exists"), "{err}");
    assert_eq!(std::fs::read(&existing).unwrap(), b"precious");
    let fresh = scratch("fresh.bin");
    let fresh = fresh.to_str().unwrap();
    let cases: [(&[&str], &str); 4] = [
        (&["--size", "1MiB"], "at least 16 MiB"),
        (&["--kind", "tape"], "--kind tape"),
        (&["--duration", "0"], "--duration"),
        (&["--threads", "0"], "--threads"),
    ];
    for (args, needle) in cases {
        let mut all = vec!["profile", "measure", "--path", fresh];
        all.extend_from_slice(args);
        let err = tiercache_fails(&all);
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!std::path::Path::new(fresh).exists(), "{args:?} left the file");
    }
    let missing = scratch("no/such/dir/x.bin");
    let err = tiercache_fails(&["profile", "measure", "--path", missing.to_str().unwrap()]);
    assert!(err.contains("cannot create"), "{err}");
}
