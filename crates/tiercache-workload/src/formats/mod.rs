//! The trace formats tiercache reads, and how a format is recognised from a file.

pub mod csv;
pub mod lines;
pub mod lis;
pub mod oracle;
pub mod presets;
pub mod vscsi;

use std::io::BufRead;
use std::path::Path;

use crate::error::TraceError;
use crate::open::{inner_name, open};
use csv::CsvSpec;

/// A trace format. Text formats (MSR Cambridge, SYSTOR'17, Tencent CBS, Alibaba, Twitter,
/// plain text) are presets of the generic column reader (`presets.rs`).
#[derive(Clone, Debug, PartialEq)]
pub enum TraceFormat {
    /// MSR Cambridge: `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`.
    Msr,
    /// SNIA SYSTOR'17: `Timestamp,Response,IOType,LUN,Offset,Size` with a header.
    Systor,
    /// Tencent Cloud Block Storage: `Timestamp,Offset,Size,IOType,VolumeID`, in sectors.
    TencentCbs,
    /// Alibaba Cloud block storage: `device_id,opcode,offset,length,timestamp`.
    AlibabaBlock,
    /// Twitter's cache traces: `timestamp,key,key_size,value_size,client_id,operation,ttl`.
    Twitter,
    /// libCacheSim's oracleGeneral binary: 24-byte records.
    OracleGeneral,
    /// VMware vscsi binary, versions 1 and 2.
    Vscsi,
    /// Any delimited text, described by a column spec.
    Csv(CsvSpec),
    /// One key per line.
    Txt,
    /// The ARC paper's `.lis`: `start n_blocks ignore request_no`, reads of 512-byte blocks.
    ArcLis,
}

impl TraceFormat {
    pub const NAMES: &'static str = "auto, msr, systor, tencent-cbs, alibaba-block, twitter, \
                                     oracle-general, vscsi, csv, txt, arc-lis";

    /// Parses a `--format` name; `csv` needs a column spec.
    pub fn parse(name: &str, csv_spec: Option<&str>) -> Result<Option<TraceFormat>, TraceError> {
        Ok(Some(match name {
            "auto" => return Ok(None),
            "msr" => TraceFormat::Msr,
            "systor" => TraceFormat::Systor,
            "tencent-cbs" | "tencent" => TraceFormat::TencentCbs,
            "alibaba-block" | "alibaba" => TraceFormat::AlibabaBlock,
            "twitter" => TraceFormat::Twitter,
            "oracle-general" | "oraclegeneral" | "oracle" => TraceFormat::OracleGeneral,
            "vscsi" => TraceFormat::Vscsi,
            "txt" | "text" => TraceFormat::Txt,
            "arc-lis" | "lis" => TraceFormat::ArcLis,
            "csv" => {
                let spec = csv_spec.ok_or_else(|| {
                    TraceError::BadOption(
                        "--format csv needs --csv-spec, e.g. 'time=1,key=2,size=3,op=4,header=true'"
                            .into(),
                    )
                })?;
                TraceFormat::Csv(CsvSpec::parse(spec)?)
            }
            other => {
                return Err(TraceError::BadOption(format!(
                    "unknown trace format '{other}'; known: {}",
                    TraceFormat::NAMES
                )))
            }
        }))
    }

    pub fn name(&self) -> &'static str {
        match self {
            TraceFormat::Msr => "msr",
            TraceFormat::Systor => "systor",
            TraceFormat::TencentCbs => "tencent-cbs",
            TraceFormat::AlibabaBlock => "alibaba-block",
            TraceFormat::Twitter => "twitter",
            TraceFormat::OracleGeneral => "oracle-general",
            TraceFormat::Vscsi => "vscsi",
            TraceFormat::Csv(_) => "csv",
            TraceFormat::Txt => "txt",
            TraceFormat::ArcLis => "arc-lis",
        }
    }

    /// The column spec of a text format; `None` for the binary ones and `.lis`.
    pub fn csv_spec(&self) -> Option<CsvSpec> {
        Some(match self {
            TraceFormat::Msr => CsvSpec::msr(),
            TraceFormat::Systor => CsvSpec::systor(),
            TraceFormat::TencentCbs => CsvSpec::tencent_cbs(),
            TraceFormat::AlibabaBlock => CsvSpec::alibaba_block(),
            TraceFormat::Twitter => CsvSpec::twitter(),
            TraceFormat::Txt => CsvSpec::txt(),
            TraceFormat::Csv(spec) => spec.clone(),
            TraceFormat::OracleGeneral | TraceFormat::Vscsi | TraceFormat::ArcLis => return None,
        })
    }

    /// Recognises a format from the file name, or from the first line of a `.csv`. A file that
    /// cannot be opened says so (missing, unreadable) before its name is looked at.
    pub fn detect(path: &Path) -> Result<TraceFormat, TraceError> {
        if let Err(source) = std::fs::File::open(path) {
            return Err(TraceError::Open { path: path.into(), source });
        }
        let name = inner_name(path).to_ascii_lowercase();
        if name.ends_with(".lis") {
            return Ok(TraceFormat::ArcLis);
        }
        if name.ends_with(".vscsi") {
            return Ok(TraceFormat::Vscsi);
        }
        if name.contains("oraclegeneral") {
            return Ok(TraceFormat::OracleGeneral);
        }
        if name.ends_with(".txt") {
            return Ok(TraceFormat::Txt);
        }
        if name.ends_with(".csv") {
            let mut first = String::new();
            open(path)?.read_line(&mut first).map_err(|source| TraceError::Io {
                path: path.into(),
                unit: "line",
                position: 1,
                source,
            })?;
            return sniff_csv(&first).ok_or(TraceError::UnknownFormat { path: path.into() });
        }
        Err(TraceError::UnknownFormat { path: path.into() })
    }
}

fn sniff_csv(first_line: &str) -> Option<TraceFormat> {
    let fields: Vec<&str> = first_line.trim_end().split(',').collect();
    let numeric = |i: usize| fields[i].trim().parse::<u64>().is_ok();
    if fields.len() == 7 && numeric(0) && numeric(4) && numeric(5) {
        return Some(TraceFormat::Msr);
    }
    if first_line.trim_end() == crate::writer::CSV_HEADER {
        return Some(TraceFormat::Csv(CsvSpec::tiercache()));
    }
    if first_line.starts_with("Timestamp,Response,IOType") {
        return Some(TraceFormat::Systor);
    }
    None
}
