//! Delimited text traces described by a column spec (the named formats built on it are in
//! `presets.rs`).
//!
//! Spec syntax (columns count from 1, as in libCacheSim's csv options):
//! `time=1,key=2,size=3,op=4,header=true,delim=comma,time_unit=us,addr_unit=512,size_unit=512,
//! volume=5,key_size=6,default_size=1`. Keys are decimal, `0x` hex, or (with `text_keys=hash`,
//! the default) any text, hashed with FNV-1a. Fields are not quoted; traces do not quote.
//!
//! With a volume column, requests on different volumes never share a key: the key is
//! [`volume_key`] of the volume number and the address (a hashed text key keeps its low
//! [`VOLUME_ADDRESS_BITS`] bits), and a block view splits the address within its volume.

use std::path::Path;

use tiercache_core::limits::{VOLUME_ADDRESS_BITS, VOLUME_BITS};
use tiercache_core::{fnv1a_64, volume_key, Op, Request};

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
    /// Bytes per unit of the size column: 1 for bytes, 512 for sectors.
    pub size_unit: u32,
    /// A column added to the size (Twitter's key size, beside its value size).
    pub key_size: Option<usize>,
    /// A volume, LUN or device column (numbers): keys become volume keys.
    pub volume: Option<usize>,
    /// Size of requests when there is no size column.
    pub default_size: u32,
    /// Hash keys that are not numbers instead of calling them malformed.
    pub hash_text_keys: bool,
    /// Column names for error messages (from the preset or the header).
    pub names: Vec<String>,
}

impl CsvSpec {
    pub(crate) fn base(key: usize) -> CsvSpec {
        CsvSpec {
            time: None,
            key,
            size: None,
            op: None,
            header: false,
            delimiter: Some(','),
            time_unit: TimeUnit::Micros,
            addr_unit: None,
            size_unit: 1,
            key_size: None,
            volume: None,
            default_size: 1,
            hash_text_keys: true,
            names: Vec::new(),
        }
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
            let unit = || match number()? {
                0 => Err(bad(format!("{name}=0: a unit is at least 1 byte"))),
                bytes => Ok(bytes),
            };
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
                "addr_unit" => out.addr_unit = Some(unit()?),
                "size_unit" => out.size_unit = unit()?,
                "volume" => out.volume = Some(column()?),
                "key_size" => out.key_size = Some(column()?),
                "default_size" => out.default_size = number()?,
                "text_keys" => {
                    out.hash_text_keys = match value {
                        "hash" => true,
                        "number" => false,
                        _ => return Err(bad(format!("text_keys={value}: use hash or number"))),
                    }
                }
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
        let key = match spec.volume {
            None => key,
            Some(column) => Self::on_volume(spec, key, key_text, get(column, "volume")?, at)?,
        };
        let mut size = match spec.size {
            None => spec.default_size as u64,
            Some(column) => Self::number(spec, get(column, "size")?, column, "size", at)?
                .saturating_mul(spec.size_unit as u64),
        };
        if let Some(column) = spec.key_size {
            size = size.saturating_add(Self::number(
                spec,
                get(column, "key_size")?,
                column,
                "key_size",
                at,
            )?);
        }
        let size = u32::try_from(size).map_err(|_| {
            let column = spec.size.or(spec.key_size).unwrap_or(spec.key);
            at.malformed(
                &spec.column_name(column, "size"),
                format!("{size} bytes is larger than 4 GiB"),
            )
        })?;
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

    fn number(
        spec: &CsvSpec,
        text: &str,
        column: usize,
        role: &str,
        at: &Position,
    ) -> Result<u64, TraceError> {
        parse_u64(text).ok_or_else(|| {
            at.malformed(&spec.column_name(column, role), format!("'{text}' is not a number"))
        })
    }

    /// The volume key of `key` on the volume named by `volume_text`.
    fn on_volume(
        spec: &CsvSpec,
        key: u64,
        key_text: &str,
        volume_text: &str,
        at: &Position,
    ) -> Result<u64, TraceError> {
        let column = spec.volume.expect("a volume column");
        let volume = Self::number(spec, volume_text, column, "volume", at)?;
        let address = match parse_u64(key_text) {
            Some(address) => address,
            // A hashed text key: its low bits are as good a hash as all of them.
            None => key & ((1 << VOLUME_ADDRESS_BITS) - 1),
        };
        volume_key(volume, address).ok_or_else(|| {
            if volume >> VOLUME_BITS != 0 {
                let reason = format!("volume {volume} is past the last, 2^{VOLUME_BITS} - 1");
                at.malformed(&spec.column_name(column, "volume"), reason)
            } else {
                let reason = format!(
                    "address {address} on volume {volume} does not fit the {VOLUME_ADDRESS_BITS} \
                     bits a volume's addresses have"
                );
                at.malformed(&spec.column_name(spec.key, "key"), reason)
            }
        })
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
