//! Bad input never hangs or panics: every format cut in the middle of a record, given a first
//! record of no version, and mutated at random (bytes flipped, inserted, deleted, duplicated,
//! cut; plain and compressed), read with and without `skip_bad` and a block view. Every read
//! runs on a thread of its own with a deadline, so a reader that spins fails the test instead of
//! hanging it, and every error names the file it is about.

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use common::{scratch, vscsi_v1, vscsi_v2};
use tiercache_core::{Op, Request, SeededRng};
use tiercache_workload::writer::write_oracle_general;
use tiercache_workload::{CsvSpec, TraceFormat, TraceOptions, TraceReader};

/// Long enough for any of these small files on a loaded machine; only a spinning reader
/// reaches it.
const DEADLINE: Duration = Duration::from_secs(60);

/// Requests and skipped records of a whole read, or its error.
type Outcome = Result<(u64, u64), String>;

fn read_guarded(path: &Path, format: &TraceFormat, skip_bad: bool, block: Option<u32>) -> Outcome {
    let (path, format) = (path.to_path_buf(), format.clone());
    let what =
        format!("{} as {} (skip_bad {skip_bad}, block {block:?})", path.display(), format.name());
    let (done, outcome) = mpsc::channel();
    std::thread::spawn(move || {
        let options = TraceOptions { format: Some(format), block_size: block, skip_bad };
        let result =
            TraceReader::open(&path, &options).map_err(|e| e.to_string()).and_then(|mut reader| {
                let requests = reader.by_ref().try_fold(0u64, |n, r| r.map(|_| n + 1));
                requests.map(|n| (n, reader.skipped())).map_err(|e| e.to_string())
            });
        let _ = done.send(result);
    });
    match outcome.recv_timeout(DEADLINE) {
        Ok(result) => result,
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what}: still reading after {DEADLINE:?}"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("{what}: the reader panicked"),
    }
}

fn sample_requests() -> Vec<Request> {
    (0..40u64)
        .map(|i| Request::new(i * 1000, (i * 37) % 11 * 8, 512 * (1 + i as u32 % 3), Op::Read))
        .collect()
}

fn lines(f: impl Fn(&Request) -> String) -> Vec<u8> {
    sample_requests().iter().map(f).collect::<String>().into_bytes()
}

/// A small well-formed file of each format, with the format to read it.
fn samples() -> Vec<(&'static str, TraceFormat, Vec<u8>)> {
    // Tests run at once: each call writes its own file.
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, Ordering::Relaxed);
    let oracle_path = scratch(&format!("sample{call}.oracleGeneral.bin"));
    write_oracle_general(&oracle_path, &mut sample_requests()).unwrap();
    let records: Vec<(u16, u64, u32, u64)> =
        sample_requests().iter().map(|r| (0x28, r.key, r.size, r.time_us)).collect();
    let csv = CsvSpec::parse("time=1,key=2,size=3,op=4,addr_unit=512,volume=5").unwrap();
    vec![
        ("oracle.bin", TraceFormat::OracleGeneral, std::fs::read(&oracle_path).unwrap()),
        ("v1.vscsi", TraceFormat::Vscsi, vscsi_v1(&records)),
        ("v2.vscsi", TraceFormat::Vscsi, vscsi_v2(&records)),
        (
            "msr.csv",
            TraceFormat::Msr,
            lines(|r| format!("{},hm,0,Read,{},{},9\n", r.time_us, r.key, r.size)),
        ),
        ("systor.csv", TraceFormat::Systor, {
            let mut text = b"Timestamp,Response,IOType,LUN,Offset,Size\n".to_vec();
            text.extend(lines(|r| format!("{}.5,0.1,R,1,{},{}\n", r.time_us, r.key, r.size)));
            text
        }),
        (
            "tencent.csv",
            TraceFormat::TencentCbs,
            lines(|r| format!("{},{},8,0,3\n", r.time_us, r.key)),
        ),
        (
            "alibaba.csv",
            TraceFormat::AlibabaBlock,
            lines(|r| format!("2,R,{},{},{}\n", r.key, r.size, r.time_us)),
        ),
        (
            "twitter.csv",
            TraceFormat::Twitter,
            lines(|r| format!("{},k{},5,{},1,get,0\n", r.time_us, r.key, r.size)),
        ),
        (
            "spec.csv",
            TraceFormat::Csv(csv),
            lines(|r| format!("{},{},{},w,4\n", r.time_us, r.key, r.size)),
        ),
        ("keys.txt", TraceFormat::Txt, lines(|r| format!("{}\n", r.key))),
        ("arc.lis", TraceFormat::ArcLis, lines(|r| format!("{} 3 0 1\n", r.key))),
    ]
}

/// Every combination of `skip_bad` and block view.
fn read_every_way(path: &Path, format: &TraceFormat) -> Vec<Outcome> {
    let mut outcomes = Vec::new();
    for skip_bad in [false, true] {
        for block in [None, Some(4096)] {
            let outcome = read_guarded(path, format, skip_bad, block);
            if let Err(e) = &outcome {
                let name = path.file_name().unwrap().to_str().unwrap();
                let about_options = e.contains("object ids") || e.contains("--block-size");
                assert!(e.contains(name) || about_options, "an error without the file: {e}");
            }
            outcomes.push(outcome);
        }
    }
    outcomes
}

fn write(name: &str, bytes: &[u8]) -> PathBuf {
    let path = scratch(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn samples_read_whole() {
    for (name, format, bytes) in samples() {
        let outcome = read_guarded(&write(name, &bytes), &format, false, None);
        assert_eq!(outcome, Ok((40 * if name.ends_with(".lis") { 3 } else { 1 }, 0)), "{name}");
    }
}

#[test]
fn a_cut_last_record_is_skipped_and_the_read_ends() {
    for (name, format, bytes) in samples() {
        for cut in [1, 5, 17] {
            let zst = format!("cut{cut}.{name}.zst");
            let cut_bytes = &bytes[..bytes.len() - cut];
            let path = write(&zst, &zstd::encode_all(cut_bytes, 1).unwrap());
            for outcome in read_every_way(&path, &format) {
                if let Ok((requests, _)) = outcome {
                    assert!(requests > 0, "{zst}: {outcome:?}");
                }
            }
            // Binary records: the cut one is skipped, every other one read.
            if matches!(format, TraceFormat::OracleGeneral | TraceFormat::Vscsi) {
                let outcome = read_guarded(&path, &format, true, None);
                assert_eq!(outcome, Ok((39, 1)), "{zst}");
            }
        }
    }
}

#[test]
fn a_vscsi_file_of_no_version_is_refused_not_spun_on() {
    for bytes in [vec![0xffu8; 64], vec![0u8; 40], b"1,2,3\n".repeat(20)] {
        for name in ["junk.vscsi", "junk.vscsi.zst"] {
            let stored = if name.ends_with(".zst") {
                zstd::encode_all(&bytes[..], 1).unwrap()
            } else {
                bytes.clone()
            };
            let path = write(name, &stored);
            for outcome in read_every_way(&path, &TraceFormat::Vscsi) {
                let e = outcome.unwrap_err();
                assert!(
                    e.contains("neither vscsi version") || e.contains("not a whole number"),
                    "{e}"
                );
            }
        }
    }
}

/// One random change to `bytes`.
fn mutate(bytes: &mut Vec<u8>, rng: &mut SeededRng) {
    let at = rng.below(bytes.len() as u64 + 1) as usize;
    let span = (1 + rng.below(24) as usize).min(bytes.len() - at.min(bytes.len()));
    match rng.below(6) {
        0 if at < bytes.len() => bytes[at] ^= 1 << rng.below(8),
        1 if at < bytes.len() => bytes[at] = rng.next_u64() as u8,
        2 => bytes.splice(at..at, (0..span.max(1)).map(|_| rng.next_u64() as u8)).for_each(drop),
        3 => bytes.drain(at..at + span).for_each(drop),
        4 => {
            let copy: Vec<u8> = bytes[at..at + span].to_vec();
            bytes.splice(at..at, copy).for_each(drop);
        }
        _ => bytes.truncate(at),
    }
}

#[test]
fn random_mutations_never_panic_or_hang() {
    let mut rng = SeededRng::new(0x5eed_0bad);
    for (name, format, bytes) in samples() {
        for round in 0..120 {
            let mut mutated = bytes.clone();
            for _ in 0..1 + rng.below(4) {
                mutate(&mut mutated, &mut rng);
            }
            read_every_way(&write(&format!("m{round}.{name}"), &mutated), &format);
            if round % 4 == 0 {
                // Compressed, and the compressed bytes themselves mutated.
                let mut packed = zstd::encode_all(&mutated[..], 1).unwrap();
                read_every_way(&write(&format!("m{round}.{name}.zst"), &packed), &format);
                mutate(&mut packed, &mut rng);
                read_every_way(&write(&format!("mz{round}.{name}.zst"), &packed), &format);
            }
        }
    }
}
