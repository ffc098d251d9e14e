//! How much a tier holds, and how sizes are written by people ("64MiB", "4GiB", "100000").

use serde::{Deserialize, Serialize};

use crate::error::CoreError;

/// What capacity counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Unit {
    /// Object sizes are respected: an object of `size` bytes uses `size` of the capacity.
    #[default]
    Bytes,
    /// Every object uses one slot, whatever its size (the ARC paper's page caches).
    Objects,
}

impl Unit {
    /// How much of a capacity in this unit an object of `size` bytes uses.
    #[inline]
    pub fn charge(self, size: u32) -> u64 {
        match self {
            Unit::Bytes => size as u64,
            Unit::Objects => 1,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Bytes => "bytes",
            Unit::Objects => "objects",
        }
    }
}

/// The capacity of one tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Capacity {
    pub amount: u64,
    pub unit: Unit,
}

impl Capacity {
    pub fn bytes(amount: u64) -> Capacity {
        Capacity { amount, unit: Unit::Bytes }
    }

    pub fn objects(amount: u64) -> Capacity {
        Capacity { amount, unit: Unit::Objects }
    }

    /// How much of the capacity an object of `size` bytes uses.
    #[inline]
    pub fn charge(&self, size: u32) -> u64 {
        self.unit.charge(size)
    }

    /// Whether an object of `size` bytes can ever fit.
    #[inline]
    pub fn fits(&self, size: u32) -> bool {
        self.charge(size) <= self.amount
    }

    /// A share of this capacity (`fraction` in 0..=1), rounded down but at least 1 when the whole
    /// is not empty, so a small queue of a tiny cache still exists.
    pub fn share(&self, fraction: f64) -> u64 {
        let part = (self.amount as f64 * fraction).floor() as u64;
        if self.amount > 0 {
            part.clamp(1, self.amount)
        } else {
            0
        }
    }
}

impl std::fmt::Display for Capacity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.unit {
            Unit::Bytes => write!(f, "{}", format_size(self.amount)),
            Unit::Objects => write!(f, "{} objects", self.amount),
        }
    }
}

/// Parses a size: a plain number, or a number with a suffix. `KiB MiB GiB TiB` and the bare
/// `K M G T` are powers of 1024; `KB MB GB TB` are powers of 1000 (as `dd` reads them).
pub fn parse_size(text: &str) -> Result<u64, CoreError> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_')).unwrap_or(t.len());
    let (number, suffix) = t.split_at(split);
    let number: String = number.chars().filter(|c| *c != '_').collect();
    let bad =
        |reason: &str| CoreError::InvalidSize { text: text.to_string(), reason: reason.into() };
    if number.is_empty() {
        return Err(bad("it does not start with a number"));
    }
    let multiplier: u64 = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ => return Err(bad("unknown suffix; use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB")),
    };
    if let Ok(whole) = number.parse::<u64>() {
        return whole.checked_mul(multiplier).ok_or_else(|| bad("too large"));
    }
    let value: f64 = number.parse().map_err(|_| bad("not a number"))?;
    let total = value * multiplier as f64;
    if !(0.0..1.8e19).contains(&total) {
        return Err(bad("too large"));
    }
    Ok(total.round() as u64)
}

/// Formats bytes for people: `64 MiB`, `1.5 GiB`, `512 B`.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 || value.fract() == 0.0 {
        format!("{} {}", value as u64, UNITS[unit])
    } else {
        format!("{:.1} {}", value, UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_people_sizes() {
        assert_eq!(parse_size("64MiB").unwrap(), 64 << 20);
        assert_eq!(parse_size("4GiB").unwrap(), 4 << 30);
        assert_eq!(parse_size("4G").unwrap(), 4 << 30);
        assert_eq!(parse_size("1MB").unwrap(), 1_000_000);
        assert_eq!(parse_size("100000").unwrap(), 100_000);
        assert_eq!(parse_size("1_000").unwrap(), 1000);
        assert_eq!(parse_size("1.5KiB").unwrap(), 1536);
        assert_eq!(parse_size(" 8 mib ").unwrap(), 8 << 20);
    }

    #[test]
    fn rejects_nonsense_with_the_text() {
        let err = parse_size("12 parsecs").unwrap_err().to_string();
        assert!(err.contains("12 parsecs"), "{err}");
        assert!(parse_size("MiB").is_err());
        assert!(parse_size("99999999999TiB").is_err());
    }

    #[test]
    fn formats_sizes() {
        assert_eq!(format_size(64 << 20), "64 MiB");
        assert_eq!(format_size(1536), "1.5 KiB");
        assert_eq!(format_size(7), "7 B");
    }

    #[test]
    fn charges_by_unit() {
        assert_eq!(Capacity::bytes(100).charge(40), 40);
        assert_eq!(Capacity::objects(100).charge(40), 1);
        assert!(!Capacity::bytes(10).fits(11));
        assert_eq!(Capacity::objects(100).share(0.1), 10);
        assert_eq!(Capacity::objects(3).share(0.1), 1);
    }
}
