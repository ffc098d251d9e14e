//! The presets of public traces (Tencent CBS, Alibaba block, Twitter) on samples written here,
//! every field of every request spelled out by hand; the column spec's units and volumes; and
//! the sanity checks that refuse a file given to the wrong reader or holding no request.

mod common;

use common::{data, read_all, scratch, write_text};

use tiercache_core::{fnv1a_64, volume_key, Op, Request};
use tiercache_workload::{CsvSpec, TraceFormat, TraceOptions, TraceReader};

fn request(time_us: u64, key: u64, size: u32, op: Op) -> Request {
    Request::new(time_us, key, size, op)
}

fn on(volume: u64, address: u64) -> u64 {
    volume_key(volume, address).unwrap()
}

#[test]
fn tencent_cbs_reads_sectors_seconds_and_volumes() {
    let text = "1538323200,183750432,16,1,1283\n\
                1538323200,8,8,0,7\n\
                1538323201,8,8,0,1283\n\
                1538323205,0,1,1,7\n";
    let path = write_text("tencent.csv", text);
    let got = read_all(&path, Some(TraceFormat::TencentCbs)).unwrap();
    let want = vec![
        request(1_538_323_200_000_000, on(1283, 183_750_432), 8192, Op::Write),
        request(1_538_323_200_000_000, on(7, 8), 4096, Op::Read),
        request(1_538_323_201_000_000, on(1283, 8), 4096, Op::Read),
        request(1_538_323_205_000_000, on(7, 0), 512, Op::Write),
    ];
    assert_eq!(got, want);
    // The same blocks on two volumes stay two blocks; sector 8 is block 1 of 4 KiB.
    let options = TraceOptions {
        format: Some(TraceFormat::TencentCbs),
        block_size: Some(4096),
        ..TraceOptions::default()
    };
    let blocks: Vec<(u64, u32)> = TraceReader::open(&path, &options)
        .unwrap()
        .map(|r| r.unwrap())
        .map(|r| (r.key, r.size))
        .collect();
    let first = 183_750_432 * 512 / 4096;
    let want = [(on(1283, first), 4096), (on(1283, first + 1), 4096)];
    assert_eq!(blocks[..2], want);
    assert_eq!(blocks[2..], [(on(7, 1), 4096), (on(1283, 1), 4096), (on(7, 0), 4096)]);
}

#[test]
fn alibaba_block_reads_bytes_microseconds_and_devices() {
    let text = "0,W,126703644672,4096,1577808000000002\n\
                12,R,4096,16384,1577808000000345\n\
                0,R,126703644672,4096,1577808000001000\n";
    let path = write_text("alibaba.csv", text);
    let got = read_all(&path, Some(TraceFormat::AlibabaBlock)).unwrap();
    let want = vec![
        request(1_577_808_000_000_002, on(0, 126_703_644_672), 4096, Op::Write),
        request(1_577_808_000_000_345, on(12, 4096), 16384, Op::Read),
        request(1_577_808_000_001_000, on(0, 126_703_644_672), 4096, Op::Read),
    ];
    assert_eq!(got, want);
}

#[test]
fn twitter_reads_key_plus_value_sizes_and_every_operation() {
    let ops = [
        ("get", Op::Read),
        ("gets", Op::Read),
        ("set", Op::Write),
        ("add", Op::Write),
        ("replace", Op::Write),
        ("cas", Op::Write),
        ("append", Op::Write),
        ("prepend", Op::Write),
        ("delete", Op::Delete),
        ("incr", Op::Write),
        ("decr", Op::Write),
    ];
    let mut text = String::new();
    let mut want = Vec::new();
    for (i, (name, op)) in ops.iter().enumerate() {
        let key = format!("nz:u:eeW511W3dcH3de3d15ec{}", i % 3);
        let (key_size, value_size) = (key.len(), 100 + i);
        let ttl = if *op == Op::Write { 3600 } else { 0 };
        text += &format!("{i},{key},{key_size},{value_size},{},{name},{ttl}\n", 9 + i);
        let size = (key_size + value_size) as u32;
        want.push(request(i as u64 * 1_000_000, fnv1a_64(key.as_bytes()), size, *op));
    }
    let got = read_all(&write_text("twitter.csv", &text), Some(TraceFormat::Twitter)).unwrap();
    assert_eq!(got, want);
    // Keys are object ids: there are no blocks to split them into.
    let options = TraceOptions {
        format: Some(TraceFormat::Twitter),
        block_size: Some(4096),
        ..TraceOptions::default()
    };
    let e = TraceReader::open(&scratch("twitter.csv"), &options).err().unwrap().to_string();
    assert!(e.contains("object ids"), "{e}");
}

#[test]
fn presets_are_named_and_never_guessed() {
    for (name, format) in [
        ("tencent-cbs", TraceFormat::TencentCbs),
        ("alibaba-block", TraceFormat::AlibabaBlock),
        ("twitter", TraceFormat::Twitter),
    ] {
        assert_eq!(TraceFormat::parse(name, None).unwrap(), Some(format.clone()));
        assert_eq!(format.name(), name);
    }
    // Without --format, a Tencent or Alibaba file is not mistaken for anything.
    let path = write_text("volumes.csv", "1538323200,8,8,0,7\n");
    let e = read_all(&path, None).unwrap_err();
    assert!(e.contains("--format") && e.contains("tencent-cbs"), "{e}");
}

#[test]
fn a_generic_spec_reads_tencent_as_the_preset_does() {
    let text = "5,100,8,1,3\n6,100,8,0,4\n7,101,3,0,3\n";
    let path = write_text("tencent_spec.csv", text);
    let spec =
        CsvSpec::parse("time=1,key=2,size=3,op=4,addr_unit=512,size_unit=512,volume=5,time_unit=s")
            .unwrap();
    let generic = read_all(&path, Some(TraceFormat::Csv(spec))).unwrap();
    assert_eq!(generic, read_all(&path, Some(TraceFormat::TencentCbs)).unwrap());
    assert_eq!(generic[1], request(6_000_000, on(4, 100), 4096, Op::Read));
    assert_eq!(generic[2].size, 1536);
}

#[test]
fn spec_units_and_columns_are_checked() {
    for (spec, needle) in [
        ("key=1,addr_unit=0", "addr_unit=0"),
        ("key=1,size_unit=0", "size_unit=0"),
        ("key=1,size_unit=x", "size_unit=x"),
        ("key=1,volume=0", "columns count from 1"),
        ("key=1,text_keys=maybe", "use hash or number"),
    ] {
        let e = CsvSpec::parse(spec).unwrap_err().to_string();
        assert!(e.contains(needle), "{spec}: {e}");
    }
    let spec = CsvSpec::parse("key=1,size=2,size_unit=512,volume=3,key_size=4").unwrap();
    assert_eq!((spec.size_unit, spec.volume, spec.key_size), (512, Some(2), Some(3)));
}

#[test]
fn volumes_and_sizes_out_of_range_name_the_field() {
    let spec = |s: &str| Some(TraceFormat::Csv(CsvSpec::parse(s).unwrap()));
    let cases = [
        ("1,8,5000000\n", "key=1,size=2,volume=3", "volume 5000000 is past the last"),
        ("17592186044416,8,1\n", "key=1,size=2,volume=3", "does not fit the 44 bits"),
        ("1,x,1\n", "key=1,size=2,volume=3", "'x' is not a number"),
        ("1,8,v7\n", "key=1,size=2,volume=3", "'v7' is not a number"),
        ("1,8388608\n", "key=1,size=2,size_unit=512", "larger than 4 GiB"),
    ];
    for (text, s, needle) in cases {
        let e = read_all(&write_text("range.csv", text), spec(s)).unwrap_err();
        assert!(e.contains("line 1") && e.contains(needle), "{s} on {text:?}: {e}");
    }
}

#[test]
fn empty_traces_are_errors() {
    let e = read_all(&write_text("empty.csv", ""), Some(TraceFormat::Msr)).unwrap_err();
    assert!(e.contains("empty.csv") && e.contains("no requests"), "{e}");
    let e = read_all(&write_text("comments.csv", "# nothing\n\n"), Some(TraceFormat::Msr));
    assert!(e.unwrap_err().contains("no requests"));
    let empty = scratch("empty.oracleGeneral.bin");
    std::fs::write(&empty, b"").unwrap();
    assert!(read_all(&empty, None).unwrap_err().contains("no requests"));
    // Every record malformed and skipped: still nothing to run, and the count says why.
    let path = write_text("all_bad.csv", "1,hm,0,Flush,0,512,1\n2,hm,0,Sync,0,512,1\n");
    let options =
        TraceOptions { format: Some(TraceFormat::Msr), skip_bad: true, ..TraceOptions::default() };
    let e = TraceReader::open(&path, &options).unwrap().next().unwrap().unwrap_err().to_string();
    assert!(e.contains("no requests") && e.contains("2 malformed records were skipped"), "{e}");
}

#[test]
fn a_text_trace_read_as_binary_is_refused() {
    // The MSR sample is 51,000 bytes, a whole number of 24-byte records: only its fields can
    // tell, plain or compressed. Skipping bad records leaves none.
    let text =
        zstd::decode_all(&std::fs::read(data("msr_hm_0_first1000.csv.zst")).unwrap()[..]).unwrap();
    assert_eq!(text.len(), 51_000);
    let plain = scratch("msr_as_oracle.bin");
    std::fs::write(&plain, &text).unwrap();
    for path in [plain.clone(), data("msr_hm_0_first1000.csv.zst")] {
        let e = read_all(&path, Some(TraceFormat::OracleGeneral)).unwrap_err();
        assert!(e.contains("record 1") && e.contains("next_access_vtime"), "{e}");
        let options = TraceOptions {
            format: Some(TraceFormat::OracleGeneral),
            skip_bad: true,
            ..TraceOptions::default()
        };
        let e = TraceReader::open(&path, &options).unwrap().next().unwrap().unwrap_err();
        assert!(e.to_string().contains("no requests"), "{e}");
    }
    // As vscsi: the first record is no version of it.
    let e = read_all(&plain, Some(TraceFormat::Vscsi)).unwrap_err();
    assert!(e.contains("neither vscsi version 1 nor 2"), "{e}");
    // A binary trace read as text is not UTF-8, or not the columns the format has.
    let e = read_all(&data("cloudPhysicsIO.vscsi.zst"), Some(TraceFormat::Msr)).unwrap_err();
    assert!(e.contains("line 1"), "{e}");
}

#[test]
fn oracle_next_access_must_point_forward() {
    let record = |key: u64, next: i64| {
        let mut r = vec![0u8; 4];
        r.extend_from_slice(&key.to_le_bytes());
        r.extend_from_slice(&1u32.to_le_bytes());
        r.extend_from_slice(&next.to_le_bytes());
        r
    };
    let write = |name: &str, records: &[Vec<u8>]| {
        let path = scratch(name);
        std::fs::write(&path, records.concat()).unwrap();
        path
    };
    // Record 2 points at itself.
    let path = write("self.oracleGeneral.bin", &[record(1, 2), record(1, 2)]);
    let e = read_all(&path, None).unwrap_err();
    assert!(e.contains("record 2") && e.contains("later request"), "{e}");
    // Well-formed: 1 -> 3, 2 never, 3 never.
    let path = write("ok.oracleGeneral.bin", &[record(1, 3), record(2, -1), record(1, -1)]);
    let got = read_all(&path, None).unwrap();
    assert_eq!(got.iter().map(|r| r.next_access).collect::<Vec<_>>(), [2, u64::MAX, u64::MAX]);
}
