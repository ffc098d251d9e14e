//! Admission filters: whether a missed key enters the cache at all. They compose with every
//! policy (the frame asks them before the policy's own admission) and with each other: a chain
//! admits a key only if every filter in it does, asked in the order given.
//!
//! - `always`: admit every miss (no filter).
//! - `prob:P`: admit with probability P (seeded; the same seed replays the same choices).
//! - `second-hit[:N]`: admit a key only on its second miss within the last N distinct missed
//!   keys (a ghost list of keys, no data). Akamai's "cache on second hit" rule keeps the
//!   one-hit wonders, most of a CDN's objects, out of its disk caches (Maggs and Sitaraman,
//!   "Algorithmic Nuggets in Content Delivery", SIGCOMM CCR 45(3), 2015, section 3).
//! - `second-hit-over:S[:N]`: the same, for values over S bytes only; smaller ones are
//!   admitted. A large value's first miss is the costliest to admit (its bytes written, and as
//!   many bytes of other values pushed out) and one of the likeliest never to be hit.
//! - `size:S`: admit objects of at most S bytes.

use serde::{Deserialize, Serialize};
use tiercache_core::{parse_size, Capacity, KeySet, RejectReason, Request, SeededRng, Unit};

use crate::error::PolicyError;

/// One filter of a chain, as configured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "filter", rename_all = "kebab-case")]
pub enum AdmissionConfig {
    Always,
    Prob {
        p: f64,
    },
    /// `ghost_keys` defaults to the cache's capacity in objects (bytes / 4 KiB for byte caches).
    SecondHit {
        ghost_keys: Option<u64>,
        /// Only values over this many bytes are asked; smaller ones pass.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        over: Option<u64>,
    },
    Size {
        max_bytes: u64,
    },
}

const KNOWN: &str = "always, prob:P, second-hit[:N], second-hit-over:BYTES[:N], size:BYTES";

/// Most keys a second-hit filter remembers (its ring grows as keys arrive, up to this).
pub const GHOST_KEYS_MAX: u64 = 1 << 32;

impl AdmissionConfig {
    /// Parses a chain such as `size:1MiB+second-hit`.
    pub fn parse_chain(spec: &str) -> Result<Vec<AdmissionConfig>, PolicyError> {
        spec.split('+').map(|part| AdmissionConfig::parse(part.trim())).collect()
    }

    pub fn parse(spec: &str) -> Result<AdmissionConfig, PolicyError> {
        let (name, arg) = match spec.split_once(':') {
            Some((n, a)) => (n.trim(), Some(a.trim())),
            None => (spec.trim(), None),
        };
        let need = |what: &str, example: &str| {
            PolicyError::bad(name, what, format!("is required, e.g. {example}"))
        };
        match name {
            "always" | "none" => Ok(AdmissionConfig::Always),
            "prob" | "probabilistic" => {
                let text = arg.ok_or_else(|| need("p", "prob:0.5"))?;
                let p: f64 =
                    text.parse().map_err(|_| PolicyError::bad(name, "p", "is not a number"))?;
                if !(0.0..=1.0).contains(&p) {
                    return Err(PolicyError::bad(name, "p", format!("must be in [0, 1], got {p}")));
                }
                Ok(AdmissionConfig::Prob { p })
            }
            "second-hit" | "second_hit" => {
                Ok(AdmissionConfig::SecondHit { ghost_keys: ghost_keys(name, arg)?, over: None })
            }
            "second-hit-over" | "second_hit_over" => {
                let text = arg.ok_or_else(|| need("S", "second-hit-over:256KiB"))?;
                let (size, keys) = match text.split_once(':') {
                    Some((s, n)) => (s.trim(), Some(n.trim())),
                    None => (text, None),
                };
                let over =
                    parse_size(size).map_err(|e| PolicyError::bad(name, "S", e.to_string()))?;
                Ok(AdmissionConfig::SecondHit {
                    ghost_keys: ghost_keys(name, keys)?,
                    over: Some(over),
                })
            }
            "size" | "size-limit" => {
                let text = arg.ok_or_else(|| need("max_bytes", "size:1MiB"))?;
                let max_bytes = parse_size(text)
                    .map_err(|e| PolicyError::bad(name, "max_bytes", e.to_string()))?;
                Ok(AdmissionConfig::Size { max_bytes })
            }
            _ => Err(PolicyError::UnknownAdmission { name: name.into(), known: KNOWN.into() }),
        }
    }

    fn label(&self) -> Option<String> {
        match self {
            AdmissionConfig::Always => None,
            AdmissionConfig::Prob { p } => Some(format!("prob({p})")),
            AdmissionConfig::SecondHit { over: None, .. } => Some("second-hit".into()),
            AdmissionConfig::SecondHit { over: Some(bytes), .. } => {
                Some(format!("second-hit(over {bytes})"))
            }
            AdmissionConfig::Size { max_bytes } => Some(format!("size({max_bytes})")),
        }
    }
}

/// A second-hit filter's ghost size from its `N` (`name` the filter, for errors): `None`
/// where not given.
fn ghost_keys(name: &str, arg: Option<&str>) -> Result<Option<u64>, PolicyError> {
    let Some(text) = arg else { return Ok(None) };
    let n = parse_size(text).map_err(|e| PolicyError::bad(name, "N", e.to_string()))?;
    if !(1..=GHOST_KEYS_MAX).contains(&n) {
        let reason = format!("must be 1 to {GHOST_KEYS_MAX} keys, got {n}");
        return Err(PolicyError::bad(name, "N", reason));
    }
    Ok(Some(n))
}

/// A ring of recently missed keys with a set for membership. The ring grows as keys arrive,
/// up to `capacity`: memory follows what was seen, not what was asked for.
struct GhostKeys {
    ring: Vec<u64>,
    capacity: usize,
    next: usize,
    members: KeySet,
}

impl GhostKeys {
    fn new(capacity: usize) -> GhostKeys {
        GhostKeys { ring: Vec::new(), capacity, next: 0, members: KeySet::default() }
    }

    /// True if the key missed recently; otherwise remembers it.
    fn seen_or_remember(&mut self, key: u64) -> bool {
        if self.members.contains(&key) {
            return true;
        }
        if self.ring.len() < self.capacity {
            self.ring.push(key);
        } else {
            let old = std::mem::replace(&mut self.ring[self.next], key);
            self.members.remove(&old);
            self.next = (self.next + 1) % self.ring.len();
        }
        self.members.insert(key);
        false
    }
}

enum Filter {
    Prob {
        p: f64,
        rng: SeededRng,
    },
    /// Values over `over` bytes (all where `None`) admitted on their second miss.
    SecondHit {
        ghost: GhostKeys,
        over: Option<u64>,
    },
    Size(u64),
}

/// A chain of admission filters, ready to ask.
pub struct Admission {
    filters: Vec<Filter>,
    configs: Vec<AdmissionConfig>,
}

impl Admission {
    pub fn always() -> Admission {
        Admission { filters: Vec::new(), configs: Vec::new() }
    }

    pub fn new(configs: &[AdmissionConfig], capacity: Capacity, seed: u64) -> Admission {
        let default_ghost = match capacity.unit {
            Unit::Objects => capacity.amount,
            Unit::Bytes => (capacity.amount / 4096).max(1),
        };
        let filters = configs
            .iter()
            .enumerate()
            .filter_map(|(i, config)| match config {
                AdmissionConfig::Always => None,
                AdmissionConfig::Prob { p } => {
                    Some(Filter::Prob { p: *p, rng: SeededRng::new(seed ^ (i as u64 + 1)) })
                }
                AdmissionConfig::SecondHit { ghost_keys, over } => {
                    let keys = ghost_keys.unwrap_or(default_ghost).max(1) as usize;
                    Some(Filter::SecondHit { ghost: GhostKeys::new(keys), over: *over })
                }
                AdmissionConfig::Size { max_bytes } => Some(Filter::Size(*max_bytes)),
            })
            .collect();
        Admission { filters, configs: configs.to_vec() }
    }

    /// Asks every filter in order; the first that declines gives the reason.
    #[inline]
    pub fn admit(&mut self, req: &Request) -> Result<(), RejectReason> {
        for filter in &mut self.filters {
            let (admitted, reason) = match filter {
                Filter::Size(max) => (req.size as u64 <= *max, RejectReason::TooLarge),
                Filter::Prob { p, rng } => (rng.chance(*p), RejectReason::Probability),
                Filter::SecondHit { ghost, over } => {
                    let asked = over.is_none_or(|bytes| req.size as u64 > bytes);
                    (!asked || ghost.seen_or_remember(req.key), RejectReason::FirstMiss)
                }
            };
            if !admitted {
                return Err(reason);
            }
        }
        Ok(())
    }

    pub fn label(&self) -> Option<String> {
        let labels: Vec<String> = self.configs.iter().filter_map(|c| c.label()).collect();
        (!labels.is_empty()).then(|| labels.join("+"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(spec: &str) -> Admission {
        Admission::new(&AdmissionConfig::parse_chain(spec).unwrap(), Capacity::objects(100), 7)
    }

    #[test]
    fn second_hit_admits_on_the_second_miss() {
        let mut a = chain("second-hit:2");
        assert_eq!(a.admit(&Request::read(1, 1)), Err(RejectReason::FirstMiss));
        assert_eq!(a.admit(&Request::read(1, 1)), Ok(()));
        assert_eq!(a.admit(&Request::read(2, 1)), Err(RejectReason::FirstMiss));
        assert_eq!(a.admit(&Request::read(3, 1)), Err(RejectReason::FirstMiss));
        // The ghost holds two keys: 1 was pushed out by 3.
        assert_eq!(a.admit(&Request::read(1, 1)), Err(RejectReason::FirstMiss));
    }

    #[test]
    fn second_hit_over_a_size_asks_only_larger_values() {
        let mut a = chain("second-hit-over:1KiB:2");
        assert_eq!(a.label().as_deref(), Some("second-hit(over 1024)"));
        // Small values pass, and the ghost never sees them.
        assert_eq!(a.admit(&Request::read(1, 1024)), Ok(()));
        assert_eq!(a.admit(&Request::read(2, 1025)), Err(RejectReason::FirstMiss));
        assert_eq!(a.admit(&Request::read(1, 1024)), Ok(()));
        assert_eq!(a.admit(&Request::read(3, 4096)), Err(RejectReason::FirstMiss));
        assert_eq!(a.admit(&Request::read(2, 1025)), Ok(()));
        let err = AdmissionConfig::parse("second-hit-over").unwrap_err().to_string();
        assert!(err.contains("S"), "{err}");
        let err = AdmissionConfig::parse("second-hit-over:1KiB:0").unwrap_err().to_string();
        assert!(err.contains("1 to"), "{err}");
        let config = AdmissionConfig::parse("second-hit-over:256KiB").unwrap();
        let text = toml::to_string(&config).unwrap();
        assert_eq!(toml::from_str::<AdmissionConfig>(&text).unwrap(), config);
    }

    #[test]
    fn size_limit_and_chain_order() {
        let mut a = chain("size:100+second-hit");
        assert_eq!(a.admit(&Request::read(1, 101)), Err(RejectReason::TooLarge));
        // The size filter declined first, so the ghost never saw key 1.
        assert_eq!(a.admit(&Request::read(1, 100)), Err(RejectReason::FirstMiss));
        assert_eq!(a.admit(&Request::read(1, 100)), Ok(()));
    }

    #[test]
    fn probability_is_seeded_and_close_to_p() {
        let mut a = chain("prob:0.25");
        let admitted = (0..40_000).filter(|k| a.admit(&Request::read(*k, 1)).is_ok()).count();
        assert!((9_500..10_500).contains(&admitted), "{admitted}");
        let mut b = chain("prob:0.25");
        let again = (0..40_000).filter(|k| b.admit(&Request::read(*k, 1)).is_ok()).count();
        assert_eq!(admitted, again);
    }

    #[test]
    fn bad_specs_name_the_problem() {
        let err = AdmissionConfig::parse_chain("prob:1.5").unwrap_err().to_string();
        assert!(err.contains("[0, 1]"), "{err}");
        let err = AdmissionConfig::parse_chain("bloom").unwrap_err().to_string();
        assert!(err.contains("bloom") && err.contains("second-hit"), "{err}");
        // Found by fuzzing: a ghost of 10^14 keys was allocated up front and aborted.
        let err = AdmissionConfig::parse("second-hit:99999999999999").unwrap_err().to_string();
        assert!(err.contains("N") && err.contains("1 to"), "{err}");
    }

    #[test]
    fn a_large_ghost_grows_with_what_it_sees() {
        // 2^32 keys may be asked for; memory follows the keys seen.
        let mut a = chain("second-hit:4GiB");
        assert_eq!(a.admit(&Request::read(1, 1)), Err(RejectReason::FirstMiss));
        assert_eq!(a.admit(&Request::read(1, 1)), Ok(()));
    }
}
