//! The named text formats: column specs of the public traces people use, each with the layout
//! its publishers give. None of them is guessed by `--format auto` but MSR, SYSTOR'17 and our
//! own CSV, whose first lines say what they are.

use super::csv::{CsvSpec, TimeUnit};
use crate::formats::vscsi::SECTOR_BYTES;

fn names(columns: &[&str]) -> Vec<String> {
    columns.iter().map(|n| n.to_string()).collect()
}

impl CsvSpec {
    /// MSR Cambridge (Narayanan et al., "Write Off-Loading", FAST'08):
    /// `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`, timestamps in 100 ns
    /// Windows ticks, offsets and sizes in bytes, no header; the disk number is the volume.
    pub fn msr() -> CsvSpec {
        CsvSpec {
            time: Some(0),
            size: Some(5),
            op: Some(3),
            volume: Some(2),
            time_unit: TimeUnit::FileTime,
            addr_unit: Some(1),
            hash_text_keys: false,
            names: names(&[
                "Timestamp",
                "Hostname",
                "DiskNumber",
                "Type",
                "Offset",
                "Size",
                "ResponseTime",
            ]),
            ..CsvSpec::base(4)
        }
    }

    /// SNIA SYSTOR'17 (Lee et al., SYSTOR'17): `Timestamp,Response,IOType,LUN,Offset,Size` with
    /// a header, seconds, bytes; the LUN is the volume.
    pub fn systor() -> CsvSpec {
        CsvSpec {
            time: Some(0),
            size: Some(5),
            op: Some(2),
            volume: Some(3),
            header: true,
            time_unit: TimeUnit::Seconds,
            addr_unit: Some(1),
            hash_text_keys: false,
            names: names(&["Timestamp", "Response", "IOType", "LUN", "Offset", "Size"]),
            ..CsvSpec::base(4)
        }
    }

    /// Tencent Cloud Block Storage (Zhang et al., "OSCA: An Online-Model Based Cache Allocation
    /// Scheme in Cloud Block Storage Systems", ATC'20): `Timestamp,Offset,Size,IOType,VolumeID`,
    /// no header, timestamps in seconds, offsets and sizes in 512-byte sectors, IOType 0 for a
    /// read and 1 for a write.
    pub fn tencent_cbs() -> CsvSpec {
        CsvSpec {
            time: Some(0),
            size: Some(2),
            op: Some(3),
            volume: Some(4),
            time_unit: TimeUnit::Seconds,
            addr_unit: Some(SECTOR_BYTES),
            size_unit: SECTOR_BYTES,
            hash_text_keys: false,
            names: names(&["Timestamp", "Offset", "Size", "IOType", "VolumeID"]),
            ..CsvSpec::base(1)
        }
    }

    /// Alibaba Cloud block storage (Li et al., "An In-Depth Analysis of Cloud Block Storage
    /// Workloads in Large-Scale Production", IISWC'20): `device_id,opcode,offset,length,
    /// timestamp`, no header, opcode `R` or `W`, bytes, timestamps in microseconds.
    pub fn alibaba_block() -> CsvSpec {
        CsvSpec {
            time: Some(4),
            size: Some(3),
            op: Some(1),
            volume: Some(0),
            time_unit: TimeUnit::Micros,
            addr_unit: Some(1),
            hash_text_keys: false,
            names: names(&["device_id", "opcode", "offset", "length", "timestamp"]),
            ..CsvSpec::base(2)
        }
    }

    /// Twitter's cache traces (Yang et al., "A large scale analysis of hundreds of in-memory
    /// cache clusters at Twitter", OSDI'20): `timestamp,key,key_size,value_size,client_id,
    /// operation,ttl`, no header, timestamps in seconds, anonymized text keys (hashed). An
    /// object's size is its key size plus its value size, as libCacheSim reads these traces;
    /// operations map as `Op::parse` says.
    pub fn twitter() -> CsvSpec {
        CsvSpec {
            time: Some(0),
            size: Some(3),
            key_size: Some(2),
            op: Some(5),
            time_unit: TimeUnit::Seconds,
            names: names(&[
                "timestamp",
                "key",
                "key_size",
                "value_size",
                "client_id",
                "operation",
                "ttl",
            ]),
            ..CsvSpec::base(1)
        }
    }

    /// The CSV tiercache writes: `time_us,key,size,op` with a header.
    pub fn tiercache() -> CsvSpec {
        CsvSpec {
            time: Some(0),
            size: Some(2),
            op: Some(3),
            header: true,
            hash_text_keys: false,
            ..CsvSpec::base(1)
        }
    }

    /// One key per line.
    pub fn txt() -> CsvSpec {
        CsvSpec { delimiter: None, names: vec!["key".into()], ..CsvSpec::base(0) }
    }
}
