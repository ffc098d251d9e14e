//! Seeded synthetic workloads. The same configuration and seed always give the same stream.
//! Keys are object numbers `0..objects` (scrambled ones are hashed into that range); each
//! object has one size for the whole stream; `time_us` is the request's index.

pub mod mixgraph;
pub mod ycsb;
pub mod zipf;

use serde::{Deserialize, Serialize};
use tiercache_core::{fnv1a_64, Op, Request, SeededRng};

use crate::error::TraceError;
pub use zipf::Zipf;

/// How keys are drawn.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum KeyDistribution {
    Uniform,
    /// Rank r with probability proportional to 1 / (r+1)^theta; rank 0 is key 0.
    Zipf {
        theta: f64,
    },
    /// Zipf ranks scattered over the key space by FNV-1a, as YCSB's scrambled Zipfian.
    ScrambledZipf {
        theta: f64,
    },
    /// `hot_op_fraction` of requests go uniformly to the first `hot_fraction` of keys (YCSB's
    /// hotspot generator; 0.2 / 0.8 by default).
    Hotspot {
        hot_fraction: f64,
        hot_op_fraction: f64,
    },
    /// Zipf over recency: key `objects - 1 - rank`, the newest keys hottest.
    Latest {
        theta: f64,
    },
    /// 0, 1, 2, ... wrapping at `objects`: a sequential scan.
    Sequential,
}

impl std::fmt::Display for KeyDistribution {
    /// As a person reads it: `scrambled zipf 0.90`, `hotspot: 20% of keys, 80% of requests`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyDistribution::Uniform => write!(f, "uniform"),
            KeyDistribution::Zipf { theta } => write!(f, "zipf {theta:.2}"),
            KeyDistribution::ScrambledZipf { theta } => write!(f, "scrambled zipf {theta:.2}"),
            KeyDistribution::Hotspot { hot_fraction, hot_op_fraction } => write!(
                f,
                "hotspot: {:.0}% of keys, {:.0}% of requests",
                hot_fraction * 100.0,
                hot_op_fraction * 100.0
            ),
            KeyDistribution::Latest { theta } => write!(f, "latest, zipf {theta:.2}"),
            KeyDistribution::Sequential => write!(f, "sequential"),
        }
    }
}

/// Object sizes, fixed per object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum SizeDistribution {
    Fixed {
        bytes: u32,
    },
    /// Uniform in `min..=max`, drawn per object from a hash of its key and the seed.
    Uniform {
        min: u32,
        max: u32,
    },
}

impl SizeDistribution {
    #[inline]
    pub fn size_of(&self, key: u64, seed: u64) -> u32 {
        match *self {
            SizeDistribution::Fixed { bytes } => bytes,
            SizeDistribution::Uniform { min, max } => {
                let h = fnv1a_64(&(key ^ seed.rotate_left(17)).to_le_bytes());
                min + (h % (max as u64 - min as u64 + 1)) as u32
            }
        }
    }
}

/// A synthetic workload: a key distribution, an operation mix, object sizes and a length.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SyntheticConfig {
    pub distribution: KeyDistribution,
    pub objects: u64,
    pub requests: u64,
    /// Fraction of reads; the rest are writes.
    pub read_ratio: f64,
    pub size: SizeDistribution,
    pub seed: u64,
}

impl SyntheticConfig {
    pub fn validate(&self) -> Result<(), TraceError> {
        let bad = |what: String| Err(TraceError::BadOption(what));
        if self.objects == 0 {
            return bad("--objects must be at least 1".into());
        }
        if !(0.0..=1.0).contains(&self.read_ratio) {
            return bad(format!("--read-ratio must be in [0, 1], got {}", self.read_ratio));
        }
        match self.distribution {
            KeyDistribution::Zipf { theta }
            | KeyDistribution::ScrambledZipf { theta }
            | KeyDistribution::Latest { theta }
                if !(theta > 0.0 && theta.is_finite()) =>
            {
                bad(format!("--theta must be above 0, got {theta}"))
            }
            KeyDistribution::Hotspot { hot_fraction, hot_op_fraction }
                if !(hot_fraction > 0.0
                    && hot_fraction < 1.0
                    && (0.0..=1.0).contains(&hot_op_fraction)) =>
            {
                bad("hotspot fractions must be in (0, 1)".into())
            }
            _ => match self.size {
                SizeDistribution::Uniform { min, max } if min > max || min == 0 => {
                    bad(format!("size range {min}..{max} is empty or starts at 0"))
                }
                SizeDistribution::Fixed { bytes: 0 } => {
                    bad("object size must be at least 1 byte".into())
                }
                _ => Ok(()),
            },
        }
    }
}

/// The stream of a [`SyntheticConfig`].
pub struct Synthetic {
    config: SyntheticConfig,
    rng: SeededRng,
    zipf: Option<Zipf>,
    index: u64,
}

impl Synthetic {
    pub fn new(config: SyntheticConfig) -> Result<Synthetic, TraceError> {
        config.validate()?;
        let zipf = match config.distribution {
            KeyDistribution::Zipf { theta }
            | KeyDistribution::ScrambledZipf { theta }
            | KeyDistribution::Latest { theta } => Some(Zipf::new(config.objects, theta)),
            _ => None,
        };
        Ok(Synthetic { rng: SeededRng::new(config.seed), zipf, index: 0, config })
    }

    #[inline]
    fn next_key(&mut self) -> u64 {
        let n = self.config.objects;
        match self.config.distribution {
            KeyDistribution::Uniform => self.rng.below(n),
            KeyDistribution::Zipf { .. } => self.zipf.as_mut().unwrap().next(&mut self.rng),
            KeyDistribution::ScrambledZipf { .. } => {
                let rank = self.zipf.as_mut().unwrap().next(&mut self.rng);
                fnv1a_64(&rank.to_le_bytes()) % n
            }
            KeyDistribution::Latest { .. } => {
                n - 1 - self.zipf.as_mut().unwrap().next(&mut self.rng)
            }
            KeyDistribution::Hotspot { hot_fraction, hot_op_fraction } => {
                let hot = ((n as f64 * hot_fraction) as u64).clamp(1, n);
                if self.rng.chance(hot_op_fraction) || hot == n {
                    self.rng.below(hot)
                } else {
                    hot + self.rng.below(n - hot)
                }
            }
            KeyDistribution::Sequential => self.index % n,
        }
    }
}

impl Iterator for Synthetic {
    type Item = Request;

    #[inline]
    fn next(&mut self) -> Option<Request> {
        if self.index >= self.config.requests {
            return None;
        }
        let key = self.next_key();
        let op = if self.config.read_ratio >= 1.0 || self.rng.chance(self.config.read_ratio) {
            Op::Read
        } else {
            Op::Write
        };
        let size = self.config.size.size_of(key, self.config.seed);
        let request = Request::new(self.index, key, size, op);
        self.index += 1;
        Some(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(distribution: KeyDistribution) -> SyntheticConfig {
        SyntheticConfig {
            distribution,
            objects: 1000,
            requests: 20_000,
            read_ratio: 0.7,
            size: SizeDistribution::Uniform { min: 100, max: 200 },
            seed: 9,
        }
    }

    #[test]
    fn distributions_read_as_words() {
        assert_eq!(
            KeyDistribution::ScrambledZipf { theta: 0.9 }.to_string(),
            "scrambled zipf 0.90"
        );
        let hotspot = KeyDistribution::Hotspot { hot_fraction: 0.2, hot_op_fraction: 0.8 };
        assert_eq!(hotspot.to_string(), "hotspot: 20% of keys, 80% of requests");
    }

    #[test]
    fn same_seed_same_stream_other_seed_other_stream() {
        for d in [
            KeyDistribution::Uniform,
            KeyDistribution::Zipf { theta: 0.99 },
            KeyDistribution::ScrambledZipf { theta: 0.99 },
            KeyDistribution::Hotspot { hot_fraction: 0.2, hot_op_fraction: 0.8 },
            KeyDistribution::Latest { theta: 0.99 },
        ] {
            let a: Vec<Request> = Synthetic::new(config(d.clone())).unwrap().collect();
            let b: Vec<Request> = Synthetic::new(config(d.clone())).unwrap().collect();
            let c: Vec<Request> = Synthetic::new(SyntheticConfig { seed: 10, ..config(d.clone()) })
                .unwrap()
                .collect();
            assert_eq!(a, b, "{d:?}");
            assert_ne!(a, c, "{d:?}");
            assert!(a.iter().all(|r| r.key < 1000 && (100..=200).contains(&r.size)));
        }
    }

    #[test]
    fn sizes_are_fixed_per_object_and_mix_follows_ratio() {
        let reqs: Vec<Request> =
            Synthetic::new(config(KeyDistribution::Uniform)).unwrap().collect();
        let mut sizes = std::collections::HashMap::new();
        for r in &reqs {
            assert_eq!(*sizes.entry(r.key).or_insert(r.size), r.size);
        }
        let reads = reqs.iter().filter(|r| r.op == Op::Read).count() as f64 / reqs.len() as f64;
        assert!((reads - 0.7).abs() < 0.02, "{reads}");
    }

    #[test]
    fn hotspot_sends_its_share_to_the_hot_set() {
        let d = KeyDistribution::Hotspot { hot_fraction: 0.2, hot_op_fraction: 0.8 };
        let reqs: Vec<Request> = Synthetic::new(config(d)).unwrap().collect();
        let hot = reqs.iter().filter(|r| r.key < 200).count() as f64 / reqs.len() as f64;
        assert!((hot - 0.8).abs() < 0.02, "{hot}");
    }

    #[test]
    fn bad_configs_are_refused() {
        assert!(Synthetic::new(SyntheticConfig { objects: 0, ..config(KeyDistribution::Uniform) })
            .is_err());
        assert!(Synthetic::new(config(KeyDistribution::Zipf { theta: -1.0 })).is_err());
    }
}
