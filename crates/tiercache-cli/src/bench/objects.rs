//! `bench --workload objects`: values of mixed sizes under their keys, as a program caching
//! objects (an LSM's blocks, an object store's parts) uses the engine, and as foyer's own
//! benchmark loads a hybrid cache. No backing file: a read looks its key up (`get_object`)
//! and on a miss makes the value and reads it through the cache (`admit`, decided as the read a
//! read-through would make); a write puts a new value. Each key's value has a size of its own,
//! drawn once from `--value-sizes`.

use anyhow::Context;
use tiercache_core::parse_size;

/// Value sizes: log-uniform between two sizes, and for a share of the keys sizes apart, as
/// `64B-64KiB,1MiB@1%` (one key in a hundred has a 1 MiB value).
#[derive(Clone, Debug, PartialEq)]
pub struct ValueSizes {
    min: u64,
    max: u64,
    /// Sizes apart, each with its share of the keys (0..1).
    apart: Vec<(u64, f64)>,
}

impl ValueSizes {
    /// Parses `MIN-MAX[,SIZE@PERCENT%]...`; an error names the part that is wrong.
    pub fn parse(text: &str) -> anyhow::Result<ValueSizes> {
        let mut parts = text.split(',');
        let range = parts.next().unwrap_or_default().trim();
        let (min, max) = match range.split_once('-') {
            Some((a, b)) => (
                parse_size(a.trim()).with_context(|| format!("--value-sizes: '{a}'"))?,
                parse_size(b.trim()).with_context(|| format!("--value-sizes: '{b}'"))?,
            ),
            None => {
                let one = parse_size(range).with_context(|| format!("--value-sizes: '{range}'"))?;
                (one, one)
            }
        };
        anyhow::ensure!(
            min >= 1 && min <= max,
            "--value-sizes {text}: the range must run from 1 byte up, smallest first"
        );
        let mut apart = Vec::new();
        for part in parts {
            let (size, share) = part.trim().split_once('@').with_context(|| {
                format!("--value-sizes: '{part}' is not SIZE@PERCENT% (as 1MiB@1%)")
            })?;
            let size =
                parse_size(size.trim()).with_context(|| format!("--value-sizes: '{size}'"))?;
            let percent: f64 = share
                .trim()
                .trim_end_matches('%')
                .parse()
                .with_context(|| format!("--value-sizes: '{share}' is not a percentage"))?;
            anyhow::ensure!(
                size >= 1 && (0.0..=100.0).contains(&percent),
                "--value-sizes: '{part}' needs a size of 1 byte or more and 0 to 100%"
            );
            apart.push((size, percent / 100.0));
        }
        let shares: f64 = apart.iter().map(|(_, s)| s).sum();
        anyhow::ensure!(shares <= 1.0, "--value-sizes {text}: the shares apart pass 100%");
        Ok(ValueSizes { min, max, apart })
    }

    /// The size of `key`'s value: fixed by the key.
    pub fn size(&self, key: u64) -> usize {
        let h = mix(key);
        let mut share = (h >> 11) as f64 / (1u64 << 53) as f64;
        for &(size, part) in &self.apart {
            if share < part {
                return size as usize;
            }
            share -= part;
        }
        let fraction = (mix(h) >> 11) as f64 / (1u64 << 53) as f64;
        let (min, max) = (self.min as f64, self.max as f64);
        (min * (max / min).powf(fraction)).round().clamp(min, max) as usize
    }

    /// The largest value.
    pub fn largest(&self) -> u64 {
        self.apart.iter().map(|(s, _)| *s).fold(self.max, u64::max)
    }
}

/// SplitMix64's finaliser: a key's bits spread over the word.
fn mix(key: u64) -> u64 {
    let mut h = key.wrapping_add(0x9E37_79B9_7F4A_7C15);
    h = (h ^ (h >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    h ^ (h >> 31)
}

/// Writes `key`'s value of `len` bytes into `buf` (its key at both ends, the rest as the
/// buffer holds it): what a load makes.
pub fn value(key: u64, len: usize, buf: &mut [u8]) -> &[u8] {
    let len = len.max(16);
    buf[..8].copy_from_slice(&key.to_le_bytes());
    buf[len - 8..len].copy_from_slice(&key.to_le_bytes());
    &buf[..len]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_the_spec_and_errors_name_the_part() {
        let sizes = ValueSizes::parse("64B-64KiB,1MiB@1%").unwrap();
        assert_eq!(sizes.largest(), 1 << 20);
        let drawn: Vec<usize> = (0..100_000).map(|k| sizes.size(k)).collect();
        let large = drawn.iter().filter(|&&s| s == 1 << 20).count();
        assert!((800..1200).contains(&large), "{large} keys of 1 MiB in 100,000");
        assert!(drawn.iter().all(|&s| s == 1 << 20 || (64..=65536).contains(&s)));
        let small = drawn.iter().filter(|&&s| s <= 4096).count();
        assert!((55_000..65_000).contains(&small), "log-uniform: {small} of 4 KiB or less");
        assert_eq!(sizes.size(7), sizes.size(7));
        assert_eq!(ValueSizes::parse("4KiB").unwrap().size(3), 4096);
        for (bad, says) in [
            ("64KiB-64B", "smallest first"),
            ("64B-1KiB,1MiB", "SIZE@PERCENT"),
            ("64B-1KiB,1MiB@x%", "percentage"),
            ("64B-1KiB,1MiB@60%,2MiB@50%", "pass 100%"),
            ("lots", "'lots'"),
        ] {
            let e = format!("{:#}", ValueSizes::parse(bad).unwrap_err());
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
