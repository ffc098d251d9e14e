//! Admission filters: whether a missed key enters the cache at all. They compose with every
//! policy (the frame asks them before the policy's own admission) and with each other: a chain
//! admits a key only if every filter in it does, asked in the order given.
//!
//! - `always`: admit every miss (no filter).
//! - `prob:P`: admit with probability P (seeded; the same seed replays the same choices).
//! - `second-hit[:N]`: admit a key only on its second miss within the last N distinct missed
//!   keys (a ghost list of keys, no data).
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
    },
    Size {
        max_bytes: u64,
    },
}

const KNOWN: &str = "always, prob:P, second-hit[:N], size:BYTES";

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
        let need = |what: &str| PolicyError::bad(name, what, "is required, e.g. prob:0.5");
        match name {
            "always" | "none" => Ok(AdmissionConfig::Always),
            "prob" | "probabilistic" => {
                let text = arg.ok_or_else(|| need("p"))?;
                let p: f64 =
                    text.parse().map_err(|_| PolicyError::bad(name, "p", "is not a number"))?;
                if !(0.0..=1.0).contains(&p) {
                    return Err(PolicyError::bad(name, "p", format!("must be in [0, 1], got {p}")));
                }
                Ok(AdmissionConfig::Prob { p })
            }
            "second-hit" | "second_hit" => {
                let ghost_keys = match arg {
                    None => None,
                    Some(t) => Some(
                        parse_size(t).map_err(|e| PolicyError::bad(name, "N", e.to_string()))?,
                    ),
                };
                if let Some(n) = ghost_keys.filter(|n| !(1..=GHOST_KEYS_MAX).contains(n)) {
                    let reason = format!("must be 1 to {GHOST_KEYS_MAX} keys, got {n}");
                    return Err(PolicyError::bad(name, "N", reason));
                }
                Ok(AdmissionConfig::SecondHit { ghost_keys })
            }
            "size" | "size-limit" => {
                let text = arg.ok_or_else(|| need("max_bytes"))?;
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
            AdmissionConfig::SecondHit { .. } => Some("second-hit".into()),
            AdmissionConfig::Size { max_bytes } => Some(format!("size({max_bytes})")),
        }
    }
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
    Prob { p: f64, rng: SeededRng },
    SecondHit(GhostKeys),
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
                AdmissionConfig::SecondHit { ghost_keys } => {
                    let keys = ghost_keys.unwrap_or(default_ghost).max(1) as usize;
                    Some(Filter::SecondHit(GhostKeys::new(keys)))
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
                Filter::SecondHit(ghost) => {
                    (ghost.seen_or_remember(req.key), RejectReason::FirstMiss)
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
