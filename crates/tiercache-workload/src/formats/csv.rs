//! Delimited text traces described by a column spec, and the presets built on it: MSR Cambridge
//! (Narayanan et al., "Write off-loading", FAST'08: `Timestamp,Hostname,DiskNumber,Type,Offset,
//! Size,ResponseTime`, timestamps in 100 ns Windows ticks, offsets and sizes in bytes), SNIA
//! SYSTOR'17 (`Timestamp,Response,IOType,LUN,Offset,Size`, seconds) and one key per line.
//!
//! Spec syntax (columns count from 1, as in libCacheSim's csv options):
//! `time=1,key=2,size=3,op=4,header=true,delim=comma,time_unit=us,addr_unit=512,default_size=1`.
//! Keys are decimal, `0x` hex, or (with `text_keys=hash`, the default) any text, hashed with
//! FNV-1a. Fields are not quoted; traces do not quote.

use std::path::Path;

use tiercache_core::{fnv1a_64, Op, Request};

use super::lines::Lines;
use crate::error::{Position, TraceError};

/// Unit of a time column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeUnit {
    Seconds,
    Millis,
    Micros,
    Nanos,
    /// Windows FILETIME ticks of 100 ns (MSR Cambridge).
    FileTime,
}

impl TimeUnit {
    fn parse(text: &str) -> Option<TimeUnit> {
        Some(match text {
            "s" => TimeUnit::Seconds,
            "ms" => TimeUnit::Millis,
            "us" => TimeUnit::Micros,
            "ns" => TimeUnit::Nanos,
            "filetime" | "100ns" => TimeUnit::FileTime,
            _ => return None,
        })
    }

    fn to_us(self, value: f64) -> f64 {
        match self {
            TimeUnit::Seconds => value * 1e6,
            TimeUnit::Millis => value * 1e3,
            TimeUnit::Micros => value,
            TimeUnit::Nanos => value / 1e3,
            TimeUnit::FileTime => value / 10.0,
        }
    }
}

/// Which columns hold what. Columns are 0-based here.
#[derive(Clone, Debug, PartialEq)]
pub struct CsvSpec {
    pub time: Option<usize>,
    pub key: usize,
    pub size: Option<usize>,
    pub op: Option<usize>,
    pub header: bool,
    /// `None` splits on runs of white space.
    pub delimiter: Option<char>,
    pub time_unit: TimeUnit,
    /// Bytes per key unit when keys are addresses: 1 for byte offsets, 512 for sectors.
    pub addr_unit: Option<u32>,
    /// Size of requests when there is no size column.
    pub default_size: u32,
    /// Hash keys that are not numbers instead of calling them malformed.
    pub hash_text_keys: bool,
    /// Column names for error messages (from the preset or the header).
    pub names: Vec<String>,
}

impl CsvSpec {
    fn base(key: usize) -> CsvSpec {
        CsvSpec {
            time: None,
            key,
            size: None,
            op: None,
            header: false,
            delimiter: Some(','),
            time_unit: TimeUnit::Micros,
            addr_unit: None,
            default_size: 1,
            hash_text_keys: true,
            names: Vec::new(),
        }
    }

    pub fn msr() -> CsvSpec {
        let names =
            ["Timestamp", "Hostname", "DiskNumber", "Type", "Offset", "Size", "ResponseTime"];
        CsvSpec {
            time: Some(0),
            size: Some(5),
            op: Some(3),
            time_unit: TimeUnit::FileTime,
            addr_unit: Some(1),
            hash_text_keys: false,
            names: names.iter().map(|n| n.to_string()).collect(),
            ..CsvSpec::base(4)
        }
    }

    pub fn systor() -> CsvSpec {
        let names = ["Timestamp", "Response", "IOType", "LUN", "Offset", "Size"];
        CsvSpec {
            time: Some(0),
            size: Some(5),
            op: Some(2),
            header: true,
            time_unit: TimeUnit::Seconds,
            addr_unit: Some(1),
            hash_text_keys: false,
            names: names.iter().map(|n| n.to_string()).collect(),
            ..CsvSpec::base(4)
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

    pub fn txt() -> CsvSpec {
        CsvSpec { delimiter: None, names: vec!["key".into()], ..CsvSpec::base(0) }
    }

    /// Parses a spec such as `time=1,key=2,size=3,op=4,header=true`.
    pub fn parse(spec: &str) -> Result<CsvSpec, TraceError> {
        let bad = |reason: String| TraceError::BadSpec { spec: spec.to_string(), reason };
        let mut key = None;
        let mut out = CsvSpec::base(0);
        for pair in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, value) =
                pair.split_once('=').ok_or_else(|| bad(format!("'{pair}' is not key=value")))?;
            let column = || -> Result<usize, TraceError> {
                match value.parse::<usize>() {
                    Ok(c) if c >= 1 => Ok(c - 1),
                    _ => Err(bad(format!("{name}={value}: columns count from 1"))),
                }
            };
            let flag = || match value {
                "true" | "yes" | "1" => Ok(true),
                "false" | "no" | "0" => Ok(false),
                _ => Err(bad(format!("{name}={value}: use true or false"))),
            };
            let number =
                || value.parse::<u32>().map_err(|_| bad(format!("{name}={value}: not a number")));
            match name {
                "time" => out.time = Some(column()?),
                "key" => key = Some(column()?),
                "size" => out.size = Some(column()?),
                "op" => out.op = Some(column()?),
                "header" => out.header = flag()?,
                "delim" | "delimiter" => {
                    out.delimiter = match value {
                        "comma" => Some(','),
                        "tab" => Some('\t'),
                        "semicolon" => Some(';'),
                        "space" | "whitespace" => None,
                        v if v.chars().count() == 1 => v.chars().next(),
                        v => {
                            return Err(bad(format!(
                                "delim={v}: use comma, tab, semicolon, space or one character"
                            )))
                        }
                    }
                }
                "time_unit" => {
                    out.time_unit = TimeUnit::parse(value).ok_or_else(|| {
                        bad(format!("time_unit={value}: use s, ms, us, ns or filetime"))
                    })?
                }
                "addr_unit" => out.addr_unit = Some(number()?.max(1)),
                "default_size" => out.default_size = number()?,
                "text_keys" => out.hash_text_keys = value == "hash",
                other => return Err(bad(format!("unknown field '{other}'"))),
            }
        }
        out.key = key.ok_or_else(|| bad("key=N is required".into()))?;
        Ok(out)
    }

    fn column_name(&self, column: usize, role: &str) -> String {
        match self.names.get(column) {
            Some(name) => name.clone(),
            None => format!("{role} (column {})", column + 1),
        }
    }
}

/// Reads requests from delimited text.
pub struct CsvReader {
    lines: Lines,
    spec: CsvSpec,
    header_pending: bool,
    fields: Vec<(usize, usize)>,
}

impl CsvReader {
    pub fn new(reader: Box<dyn std::io::BufRead + Send>, path: &Path, spec: CsvSpec) -> CsvReader {
        let header_pending = spec.header;
        CsvReader { lines: Lines::new(reader, path), spec, header_pending, fields: Vec::new() }
    }

    fn split(fields: &mut Vec<(usize, usize)>, line: &str, delimiter: Option<char>) {
        fields.clear();
        let base = line.as_ptr() as usize;
        let mut push = |part: &str| {
            let start = part.as_ptr() as usize - base;
            fields.push((start, start + part.len()));
        };
        match delimiter {
            Some(d) => line.split(d).for_each(&mut push),
            None => line.split_whitespace().for_each(&mut push),
        }
    }

    fn parse_line(
        spec: &CsvSpec,
        line: &str,
        fields: &[(usize, usize)],
        at: &Position,
    ) -> Result<Request, TraceError> {
        let get = |column: usize, role: &str| -> Result<&str, TraceError> {
            match fields.get(column) {
                Some(&(a, b)) => Ok(line[a..b].trim()),
                None => Err(at.malformed(
                    &spec.column_name(column, role),
                    format!("missing: the line has {} fields", fields.len()),
                )),
            }
        };
        let key_text = get(spec.key, "key")?;
        let key = match parse_u64(key_text) {
            Some(k) => k,
            None if spec.hash_text_keys => fnv1a_64(key_text.as_bytes()),
            None => {
                let field = spec.column_name(spec.key, "key");
                return Err(at.malformed(&field, format!("'{key_text}' is not a number")));
            }
        };
        let size = match spec.size {
            None => spec.default_size,
            Some(column) => {
                let text = get(column, "size")?;
                let field = spec.column_name(column, "size");
                let value = parse_u64(text)
                    .ok_or_else(|| at.malformed(&field, format!("'{text}' is not a number")))?;
                u32::try_from(value)
                    .map_err(|_| at.malformed(&field, format!("{value} is larger than 4 GiB")))?
            }
        };
        let op = match spec.op {
            None => Op::Read,
            Some(column) => {
                let text = get(column, "op")?;
                Op::parse(text).ok_or_else(|| {
                    at.malformed(
                        &spec.column_name(column, "op"),
                        format!("'{text}' is not a read, write or delete"),
                    )
                })?
            }
        };
        let time_us = match spec.time {
            None => 0,
            Some(column) => {
                let text = get(column, "time")?;
                let value: f64 = text.parse().map_err(|_| {
                    at.malformed(
                        &spec.column_name(column, "time"),
                        format!("'{text}' is not a number"),
                    )
                })?;
                let us = spec.time_unit.to_us(value);
                if !(0.0..1.8e19).contains(&us) {
                    return Err(at.malformed(
                        &spec.column_name(column, "time"),
                        format!("{text} is out of range"),
                    ));
                }
                us.round() as u64
            }
        };
        Ok(Request::new(time_us, key, size, op))
    }
}

fn parse_u64(text: &str) -> Option<u64> {
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

impl Iterator for CsvReader {
    type Item = Result<Request, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        let (line, at) = match self.lines.next_line()? {
            Ok(found) => found,
            Err(e) => return Some(Err(e)),
        };
        if self.header_pending {
            self.header_pending = false;
            if self.spec.names.is_empty() {
                let names =
                    line.split(self.spec.delimiter.unwrap_or(',')).map(|n| n.trim().to_string());
                self.spec.names = names.collect();
            }
            return self.next();
        }
        Self::split(&mut self.fields, line, self.spec.delimiter);
        Some(Self::parse_line(&self.spec, line, &self.fields, at))
    }
}
