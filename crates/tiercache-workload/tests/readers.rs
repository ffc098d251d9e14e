//! Every reader: requests written in its format read back unchanged (round trip), a malformed
//! record names the file, the line or record and the field, `skip_bad` skips and counts, and
//! the real traces of the repository's test data read with the counts their provenance gives.

mod common;

use std::path::Path;

use common::{data, error_of, read_all, scratch, vscsi_v1, vscsi_v2, write_text};

use tiercache_core::{volume_key, Op, Request, NEVER};
use tiercache_workload::writer::{write_oracle_general, CsvWriter};
use tiercache_workload::{CsvSpec, TraceFormat, TraceOptions, TraceReader};

fn sample() -> Vec<Request> {
    (0..500u64)
        .map(|i| {
            let op = if i % 3 == 0 { Op::Write } else { Op::Read };
            Request::new(i * 1_000_000, (i * 7919) % 97, 512 * (1 + (i % 5) as u32), op)
        })
        .collect()
}

#[test]
fn csv_round_trip_plain_and_compressed() {
    for name in ["rt.csv", "rt.csv.zst", "rt.csv.gz"] {
        let path = scratch(name);
        let mut writer = CsvWriter::create(&path).unwrap();
        for r in sample() {
            writer.write(&r).unwrap();
        }
        writer.finish().unwrap();
        assert_eq!(read_all(&path, None).unwrap(), sample(), "{name}");
    }
}

#[test]
fn oracle_general_round_trip_keeps_next_access() {
    let path = scratch("rt.oracleGeneral.bin");
    let mut reqs = sample();
    write_oracle_general(&path, &mut reqs).unwrap();
    let back = read_all(&path, None).unwrap();
    // The format has no operation column: everything reads back as a read.
    let fields = |r: &Request| (r.time_us, r.key, r.size, r.next_access);
    assert!(back.iter().map(fields).eq(reqs.iter().map(fields)));
    assert!(back.iter().any(|r| r.next_access != NEVER));
}

#[test]
fn msr_round_trip() {
    let mut text = String::new();
    for r in sample() {
        let ticks = r.time_us * 10 + 128166385295514663;
        let op = if r.op == Op::Read { "Read" } else { "Write" };
        text += &format!("{ticks},hm,0,{op},{},{},2833\n", r.key, r.size);
    }
    let back = read_all(&write_text("rt_msr.csv", &text), None).unwrap();
    for (a, b) in back.iter().zip(sample()) {
        assert_eq!((a.key, a.size, a.op), (b.key, b.size, b.op));
        assert_eq!(a.time_us, b.time_us + 12816638529551466, "filetime ticks are 100 ns");
    }
    assert_eq!(back.len(), 500);
}

#[test]
fn systor_txt_and_generic_csv_round_trip() {
    let mut systor = String::from("Timestamp,Response,IOType,LUN,Offset,Size\n");
    let mut txt = String::new();
    let mut generic = String::from("# a comment\n");
    for r in sample() {
        let op = if r.op == Op::Read { "R" } else { "W" };
        systor += &format!("{}.000000,0.0001,{op},3,{},{}\n", r.time_us / 1_000_000, r.key, r.size);
        txt += &format!("{}\n", r.key);
        generic += &format!("{};{};{};{}\n", r.size, r.key, r.time_us, op);
    }
    let systor_back = read_all(&write_text("rt_systor.csv", &systor), None).unwrap();
    // The LUN is the volume: keys are volume keys of LUN 3.
    let on_lun_3 = |r: Request| Request { key: volume_key(3, r.key).unwrap(), ..r };
    assert_eq!(systor_back, sample().into_iter().map(on_lun_3).collect::<Vec<_>>());
    let txt_back = read_all(&write_text("rt.txt", &txt), None).unwrap();
    assert!(txt_back.iter().zip(sample()).all(|(a, b)| a.key == b.key && a.op == Op::Read));
    let spec = CsvSpec::parse("size=1,key=2,time=3,op=4,delim=semicolon").unwrap();
    let generic_back =
        read_all(&write_text("rt_generic.csv", &generic), Some(TraceFormat::Csv(spec))).unwrap();
    assert_eq!(generic_back, sample());
}

#[test]
fn vscsi_round_trip_both_versions() {
    let records: Vec<(u16, u64, u32, u64)> = sample()
        .iter()
        .map(|r| (if r.op == Op::Read { 0x28 } else { 0x2a }, r.key, r.size, r.time_us))
        .collect();
    for (name, bytes) in [("rt1.vscsi", vscsi_v1(&records)), ("rt2.vscsi", vscsi_v2(&records))] {
        let path = scratch(name);
        std::fs::write(&path, bytes).unwrap();
        assert_eq!(read_all(&path, None).unwrap(), sample(), "{name}");
    }
}

#[test]
fn arc_lis_expands_lines_into_blocks() {
    let path = write_text("rt.lis", "100 3 0 0\n7 1 0 1\n");
    let keys: Vec<u64> = read_all(&path, None).unwrap().iter().map(|r| r.key).collect();
    assert_eq!(keys, vec![100, 101, 102, 7]);
}

#[test]
fn malformed_records_name_file_position_and_field() {
    let msr = "128166385295514663,hm,0,Write,9056014336,2048,2833\n128166385295514664,hm,0,Read,12x,512,1\n";
    let e = error_of("bad_msr.csv", msr.as_bytes());
    assert!(
        e.contains("bad_msr.csv")
            && e.contains("line 2")
            && e.contains("'Offset'")
            && e.contains("12x"),
        "{e}"
    );

    let e = error_of("bad_op.csv", b"128166385295514663,hm,0,Flush,0,512,1\n");
    assert!(e.contains("line 1") && e.contains("'Type'") && e.contains("Flush"), "{e}");

    let e = error_of("bad.lis", b"1 2 0 0\n5 x 0 1\n");
    assert!(e.contains("bad.lis") && e.contains("line 2") && e.contains("n_blocks"), "{e}");

    let mut oracle = vec![0u8; 16];
    oracle.extend_from_slice(&(-1i64).to_le_bytes());
    oracle.extend_from_slice(&[0u8; 6]);
    // A plain file's length tells at once; a compressed one's last record is found cut.
    let e = error_of("short.oracleGeneral.bin", &oracle);
    assert!(e.contains("30 bytes is not a whole number of 24-byte"), "{e}");
    let e = error_of("short.oracleGeneral.bin.zst", &zstd::encode_all(&oracle[..], 3).unwrap());
    assert!(e.contains("record 2") && e.contains("truncated: 6 of 24"), "{e}");

    let mut vscsi = vscsi_v1(&[(0x28, 1, 512, 0), (0x35, 2, 512, 1)]);
    let e = error_of("zero.oracleGeneral.bin", &[0u8; 24]);
    assert!(e.contains("record 1") && e.contains("next_access_vtime"), "{e}");

    let e = error_of("bad.vscsi", &vscsi);
    assert!(e.contains("record 2") && e.contains("'cmd'") && e.contains("0x35"), "{e}");
    vscsi.truncate(40);
    let e = error_of("cut.vscsi", &vscsi);
    assert!(e.contains("40 bytes is not a whole number of 32-byte vscsi records"), "{e}");
    let e = error_of("cut.vscsi.zst", &zstd::encode_all(&vscsi[..], 3).unwrap());
    assert!(e.contains("record 2") && e.contains("truncated"), "{e}");

    let e =
        error_of("bad_systor.csv", b"Timestamp,Response,IOType,LUN,Offset,Size\n1.0,0.1,R,0,100\n");
    assert!(e.contains("line 2") && e.contains("'Size'") && e.contains("missing"), "{e}");
}

#[test]
fn generic_csv_and_txt_malformed_input() {
    let path = write_text("bad_generic.csv", "1,2,3\n4,5\n");
    let spec = CsvSpec::parse("key=1,size=2,op=3").unwrap();
    let options = TraceOptions { format: Some(TraceFormat::Csv(spec)), ..TraceOptions::default() };
    let e = TraceReader::open(&path, &options)
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("bad_generic.csv") && e.contains("line 1") && e.contains("op (column 3)"),
        "{e}"
    );
    let e = error_of("bad.txt", b"17\n\xff\xfe\n");
    assert!(e.contains("bad.txt") && e.contains("line 2") && e.contains("UTF-8"), "{e}");
    let e = CsvSpec::parse("key=0").unwrap_err().to_string();
    assert!(e.contains("key=0") && e.contains("count from 1"), "{e}");
    let e = CsvSpec::parse("time=1").unwrap_err().to_string();
    assert!(e.contains("key=N is required"), "{e}");
}

#[test]
fn skip_bad_skips_and_counts() {
    let path = write_text("skip.lis", "1 1 0 0\nnope\n2 1 0 1\n3 z 0 2\n4 1 0 3\n");
    let options = TraceOptions { skip_bad: true, ..TraceOptions::default() };
    let mut reader = TraceReader::open(&path, &options).unwrap();
    let keys: Vec<u64> = reader.by_ref().map(|r| r.unwrap().key).collect();
    assert_eq!(keys, vec![1, 2, 4]);
    assert_eq!(reader.skipped(), 2);
    assert!(reader.first_skipped().unwrap().contains("line 2"));
}

#[test]
fn missing_files_and_unknown_formats_are_clear() {
    let e = read_all(Path::new("/nonexistent/trace.csv"), Some(TraceFormat::Msr)).unwrap_err();
    assert!(e.contains("/nonexistent/trace.csv") && e.contains("cannot open"), "{e}");
    let e = error_of("mystery.dat", b"1 2 3\n");
    assert!(e.contains("mystery.dat") && e.contains("--format"), "{e}");
    let options = TraceOptions { block_size: Some(4096), ..TraceOptions::default() };
    let e = TraceReader::open(&data("cloudPhysicsIO.oracleGeneral.bin.zst"), &options)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("object ids"), "{e}");
}

#[test]
fn cloudphysics_formats_agree() {
    let vscsi = read_all(&data("cloudPhysicsIO.vscsi.zst"), None).unwrap();
    let oracle = read_all(&data("cloudPhysicsIO.oracleGeneral.bin.zst"), None).unwrap();
    let txt = read_all(&data("cloudPhysicsIO.txt.zst"), None).unwrap();
    assert_eq!((vscsi.len(), oracle.len(), txt.len()), (113_872, 113_872, 113_872));
    assert_eq!(vscsi.iter().filter(|r| r.op == Op::Read).count(), 46_974);
    assert_eq!(vscsi.iter().filter(|r| r.op == Op::Write).count(), 66_898);
    assert!(vscsi
        .iter()
        .zip(&oracle)
        .zip(&txt)
        .all(|((v, o), t)| v.key == o.key && o.key == t.key));
    let distinct: std::collections::HashSet<u64> = oracle.iter().map(|r| r.key).collect();
    assert_eq!(distinct.len(), 48_974);
    // The libCacheSim CSV of the same trace, through a column spec.
    let spec = CsvSpec::parse("time=2,key=5,size=4,op=3,header=true,time_unit=s").unwrap();
    let csv = read_all(&data("cloudPhysicsIO.csv.zst"), Some(TraceFormat::Csv(spec))).unwrap();
    assert!(csv
        .iter()
        .zip(&vscsi)
        .all(|(c, v)| c.key == v.key && c.size == v.size && c.op == v.op));
}

#[test]
fn msr_and_systor_samples_read() {
    let msr = read_all(&data("msr_hm_0_first1000.csv.zst"), None).unwrap();
    assert_eq!(msr.len(), 1000);
    assert_eq!(msr.iter().filter(|r| r.op == Op::Read).count(), 508);
    assert_eq!((msr[0].key, msr[0].size, msr[0].op), (9056014336, 2048, Op::Write));
    for name in ["systor17_traces_sample1000.csv.gz", "systor17_additional_sample1000.csv.gz"] {
        assert_eq!(read_all(&data(name), None).unwrap().len(), 999, "{name}");
    }
}

#[test]
fn block_view_over_a_real_trace() {
    let options = TraceOptions { block_size: Some(4096), ..TraceOptions::default() };
    let reader = TraceReader::open(&data("msr_hm_0_first1000.csv.zst"), &options).unwrap();
    let blocks: Vec<Request> = reader.map(|r| r.unwrap()).collect();
    assert!(blocks.len() >= 1000 && blocks.iter().all(|r| r.size == 4096));
    // The first request, 2048 bytes at 9056014336, sits inside block 2210941.
    assert_eq!(blocks[0].key, 9056014336 / 4096);
}
