//! The whole policy stack of a cache, built in one place: the simulator, the engine, `tiercache
//! run` (experiment files) and `sim` all describe their cache as a [`StackConfig`] and build
//! it with [`StackConfig::build`].
//!
//! A stack is, from the bottom up: a base policy per tier (one tier, or a hierarchy of two to
//! [`MAX_TIERS`] with a placement), the admission filters in front of the top tier, NVCache's
//! admission, an Open CAS cache mode, and non-hierarchical caching on top.
//!
//! Its written form, [`StackSpec`], is what an experiment file's `[cache]` table holds and what
//! `sim`'s options say, key for key (underscores in files, dashes on the command line), each
//! part in the same little language everywhere: `policy = "clock:bits=2"`,
//! `placement = "scm-first:2"`, `nvcache = "obp:0.1,small-bypass=16GiB"`.
//!
//! ```toml
//! policy = "lru"
//! capacity = "64MiB"           # or a count, with unit = "objects"
//! unit = "bytes"
//! lower_capacity = "1GiB"      # a second tier
//! lower_policy = "lru"
//! placement = "dram-first"
//! tier = ["16GiB:fifo"]        # further tiers, top down
//! admission = "second-hit"
//! mode = "wb"                  # with nhit, seq_cutoff, seq_threshold
//! nvcache = "obp:0.1"
//! nhc = "nhc:load_admit=0.7"
//! seed = 0
//! shards = 32                  # the engine's shards; the simulator models them
//! hit_rule = "epochs:32"       # hits told once an epoch, as the engine's default
//! ```

use serde::{Deserialize, Serialize};
use tiercache_core::limits::SHARDS_MAX;
use tiercache_core::{parse_size, Capacity, Unit};

use crate::admission::AdmissionConfig;
use crate::cas::{AcpConfig, CacheMode, CasConfig, Cleaning, NhitConfig, SeqCutoffPolicy};
use crate::error::PolicyError;
use crate::hierarchy::Placement;
use crate::nhc::NhcConfig;
use crate::nvcache::NvcacheConfig;
use crate::registry::{AnyPolicy, PolicyConfig, MAX_TIERS};
use crate::sharded::Sharded;
use crate::told::HitRule;

/// A cache's policy stack, every part parsed and checked.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(try_from = "StackSpec")]
pub struct StackConfig {
    /// Each tier's base policy and capacity, top (DRAM) first; at least one.
    pub tiers: Vec<(PolicyConfig, Capacity)>,
    /// How blocks are placed across the tiers (with two or more).
    pub placement: Placement,
    /// Admission filters in front of the top tier, in order.
    pub admission: Vec<AdmissionConfig>,
    /// NVCache's admission (Writes Hurt, section 3.2) in front of the cache.
    pub nvcache: Option<NvcacheConfig>,
    /// An Open CAS cache mode the cache runs in (write-back, write-around...).
    pub mode: Option<CasConfig>,
    /// Non-hierarchical caching (Orthus, section 4) on top.
    pub nhc: Option<NhcConfig>,
    /// Seed of the policies' and filters' randomness.
    pub seed: u64,
    /// The engine's shards (a power of two): each runs the stack over its keys with its share
    /// of every tier. The simulator builds that model of the engine ([`Sharded`]); `None`: the
    /// engine's default, and one stack over the whole cache in the simulator.
    pub shards: Option<usize>,
    /// Periodic work every this many microseconds (see `StackSpec::tick_us`).
    pub tick_us: Option<u64>,
    /// Values larger than this many bytes start in the tier below the top (hierarchies of
    /// two or more tiers; see `crate::hierarchy`).
    pub large_values: Option<u64>,
    /// How a policy with quiet hits is told of them (see [`crate::told`]); `None`: the
    /// runner's default, every hit in the simulator ([`HitRule::Exact`]) and the engine's
    /// [`HitRule::ENGINE`].
    pub hit_rule: Option<HitRule>,
}

impl StackConfig {
    /// One tier of `policy` over `capacity`, nothing else.
    pub fn single(policy: PolicyConfig, capacity: Capacity) -> StackConfig {
        StackConfig {
            tiers: vec![(policy, capacity)],
            placement: Placement::DramFirst,
            admission: vec![AdmissionConfig::Always],
            nvcache: None,
            mode: None,
            nhc: None,
            seed: 0,
            shards: None,
            tick_us: None,
            hit_rule: None,
            large_values: None,
        }
    }

    /// A stack written as TOML (the keys of [`StackSpec`]); an error names the key.
    pub fn from_toml(text: &str) -> Result<StackConfig, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    /// Whether any part reads request times (periodic work), so callers must supply them.
    pub fn uses_time(&self) -> bool {
        self.tiers.iter().any(|(p, _)| p.uses_time())
    }

    /// Whether the stack reads `next_access` (the future), so the stream must be annotated.
    pub fn needs_future(&self) -> bool {
        self.tiers.iter().any(|(p, _)| p.needs_future())
    }

    /// Builds the stack: the tiers, then NVCache, the cache mode and NHC around them; with
    /// `shards`, one such stack per shard (see [`StackConfig::shard`]).
    pub fn build(&self) -> Result<AnyPolicy, PolicyError> {
        match self.shards {
            Some(shards) if shards > 1 && self.needs_future() => Err(PolicyError::setting(
                "shards",
                format!(
                    "{shards}: the shards model the engine's, and a policy that reads the \
                     future (belady, belady-size) runs in no engine; leave `shards` out"
                ),
            )),
            Some(shards) if shards > 1 => {
                let stacks = (0..shards)
                    .map(|i| self.shard(i, shards).build())
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(AnyPolicy::Sharded(Box::new(Sharded::new(stacks))))
            }
            _ => self.build_one(),
        }
    }

    /// The stack shard `index` of `shards` runs: every tier's capacity divided among the
    /// shards, NVCache's small-bypass budget too (each shard sees its share of the data), and
    /// the shard's seed, as the engine gives its shards.
    pub fn shard(&self, index: usize, shards: usize) -> StackConfig {
        let n = shards as u64;
        let tiers = self
            .tiers
            .iter()
            .map(|(p, c)| (p.clone(), Capacity { amount: c.amount / n, unit: c.unit }))
            .collect();
        let nvcache = self.nvcache.clone().map(|mut config| {
            config.small_bypass_bytes = config.small_bypass_bytes.map(|bytes| bytes / n);
            config
        });
        StackConfig {
            tiers,
            nvcache,
            seed: tiercache_core::shard_seed(self.seed, index as u64),
            shards: None,
            ..self.clone()
        }
    }

    fn build_one(&self) -> Result<AnyPolicy, PolicyError> {
        let mut policy = self.build_tiers()?;
        if let Some(config) = &self.nvcache {
            policy = policy.with_nvcache(config.clone());
        }
        if let Some(mode) = &self.mode {
            policy = policy.in_mode(mode.clone());
        }
        Ok(match &self.nhc {
            Some(config) => policy.with_nhc(config.clone(), self.seed),
            None => policy.told(self.hit_rule.unwrap_or(HitRule::Exact)),
        })
    }

    fn build_tiers(&self) -> Result<AnyPolicy, PolicyError> {
        let (policy, capacity) = match &self.tiers[..] {
            [] => return Err(PolicyError::setting("tiers", "a cache needs at least one tier")),
            [_] if self.large_values.is_some() => {
                let reason = "places large values in the tier below the top: give a second tier";
                return Err(PolicyError::setting("large_values", reason));
            }
            [(policy, capacity)] => {
                return AnyPolicy::from_config(policy, *capacity, &self.admission, self.seed)
            }
            [top, ..] => top,
        };
        if self.large_values.is_some()
            && matches!(policy, PolicyConfig::Hibachi(_) | PolicyConfig::HybridArc)
        {
            let reason =
                format!("{} places values itself: large_values is for hierarchies", policy.name());
            return Err(PolicyError::setting("large_values", reason));
        }
        match policy {
            PolicyConfig::Hibachi(_) | PolicyConfig::HybridArc if self.tiers.len() != 2 => {
                Err(PolicyError::bad(
                    policy.name(),
                    "tiers",
                    "runs over exactly two tiers (DRAM and NVRAM)",
                ))
            }
            PolicyConfig::Hibachi(config) => {
                AnyPolicy::hibachi(config, [*capacity, self.tiers[1].1])
            }
            PolicyConfig::HybridArc => AnyPolicy::hybrid_arc([*capacity, self.tiers[1].1]),
            _ => {
                let policy =
                    AnyPolicy::hierarchy(self.placement, &self.tiers, &self.admission, self.seed)?;
                Ok(match (self.large_values, policy) {
                    (Some(bytes), AnyPolicy::Hybrid(h)) => {
                        AnyPolicy::Hybrid(Box::new(h.with_large_values(bytes)))
                    }
                    (_, policy) => policy,
                })
            }
        }
    }
}

/// A capacity or size as written: a string with a unit (`"64MiB"`) or a plain count.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Amount {
    Count(u64),
    Text(String),
}

impl Amount {
    fn value(&self, key: &str) -> Result<u64, PolicyError> {
        match self {
            Amount::Count(n) => Ok(*n),
            Amount::Text(text) => {
                parse_size(text).map_err(|e| PolicyError::setting(key, format!("'{text}': {e}")))
            }
        }
    }
}

fn default_admission() -> String {
    "always".into()
}
fn default_lower_policy() -> String {
    "lru".into()
}
fn default_placement() -> String {
    "dram-first".into()
}

fn default_unit() -> String {
    "bytes".into()
}
fn default_seq_cutoff() -> String {
    "full".into()
}
fn default_cleaning() -> String {
    "alru".into()
}
fn default_seq_threshold() -> Amount {
    Amount::Text("1MiB".into())
}

/// A policy stack as written in an experiment file's `[cache]` table or on `sim`'s command
/// line, before it is checked (see the module's example). Every key but `policy` and
/// `capacity` has a default; an unknown key is an error.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StackSpec {
    /// The top tier's policy, with parameters: `lru`, `clock:bits=2`.
    pub policy: String,
    /// The top tier's size: bytes (`"64MiB"`) or, with `unit = "objects"`, a count.
    pub capacity: Amount,
    /// What capacities count: `bytes` (object sizes respected) or `objects`.
    #[serde(default = "default_unit")]
    pub unit: String,
    /// Admission filters joined by `+`: `always`, `prob:P`, `second-hit[:N]`,
    /// `second-hit-over:BYTES[:N]` (large values only), `size:BYTES`.
    #[serde(default = "default_admission")]
    pub admission: String,
    /// A second tier of this capacity (same unit) below the first.
    #[serde(default)]
    pub lower_capacity: Option<Amount>,
    #[serde(default = "default_lower_policy")]
    pub lower_policy: String,
    /// Further tiers below the second, top down, as `CAPACITY[:POLICY]` (policy lru by
    /// default).
    #[serde(default)]
    pub tier: Vec<String>,
    /// Placement across the tiers: `dram-first`, `scm-first[:T]`, `bidirectional[:T]`.
    #[serde(default = "default_placement")]
    pub placement: String,
    /// A miss of a value larger than this (`"256KiB"`) goes to the tier below the top,
    /// whatever the placement, and is never promoted; off by default.
    #[serde(default)]
    pub large_values: Option<Amount>,
    /// An Open CAS cache mode: `wt`, `wb`, `wa`, `wi`, `wo`, `pt`.
    #[serde(default)]
    pub mode: Option<String>,
    /// With `mode`: NHIT promotion (insert on the 3rd miss once the cache is 80% full).
    #[serde(default)]
    pub nhit: bool,
    /// With `mode`: the sequential cutoff policy, `always`, `full` or `never`.
    #[serde(default = "default_seq_cutoff")]
    pub seq_cutoff: String,
    /// With `mode`: the sequential cutoff threshold.
    #[serde(default = "default_seq_threshold")]
    pub seq_threshold: Amount,
    /// With `mode`: the cleaning policy, `alru`, `nop`, or `acp` with the options of
    /// `AcpConfig` (`acp:high_watermark=0.2,low_watermark=0.1,flush_max_buffers=256`).
    #[serde(default = "default_cleaning")]
    pub cleaning: String,
    /// Periodic work (ACP cleaning, LFRU's sweep) every this many microseconds: of the trace's
    /// time in the simulator, of the clock in the engine. The simulator does none without it.
    #[serde(default)]
    pub tick_us: Option<u64>,
    /// NVCache's admission: `obp[:TARGET]`, `alloc-read-write`, ... (see `NvcacheConfig`).
    #[serde(default)]
    pub nvcache: Option<String>,
    /// Non-hierarchical caching: `nhc[:...]` (see `NhcConfig`).
    #[serde(default)]
    pub nhc: Option<String>,
    #[serde(default)]
    pub seed: u64,
    /// The engine's shards, a power of two; the simulator then models them, one stack per
    /// shard over its keys (the engine's default and one stack if not given).
    #[serde(default)]
    pub shards: Option<usize>,
    /// How a policy with quiet hits is told of its hits: `exact` (every hit, the simulator's
    /// default) or `epochs[:DIVISOR]` (a key's first hit in each epoch of capacity / DIVISOR
    /// insertions, the engine's default `epochs:32`; see `crate::told`).
    #[serde(default)]
    pub hit_rule: Option<String>,
}

impl StackSpec {
    /// A spec of `policy` over `capacity`, everything else at its default.
    pub fn new(policy: &str, capacity: Amount) -> StackSpec {
        StackSpec {
            policy: policy.into(),
            capacity,
            unit: default_unit(),
            admission: default_admission(),
            lower_capacity: None,
            lower_policy: default_lower_policy(),
            tier: Vec::new(),
            placement: default_placement(),
            large_values: None,
            mode: None,
            nhit: false,
            seq_cutoff: default_seq_cutoff(),
            seq_threshold: default_seq_threshold(),
            cleaning: default_cleaning(),
            tick_us: None,
            nvcache: None,
            nhc: None,
            seed: 0,
            shards: None,
            hit_rule: None,
        }
    }

    fn capacity(&self, key: &str, amount: &Amount) -> Result<Capacity, PolicyError> {
        let unit = match self.unit.as_str() {
            "bytes" => Unit::Bytes,
            "objects" => Unit::Objects,
            other => {
                return Err(PolicyError::setting(
                    "unit",
                    format!("'{other}': use bytes or objects"),
                ))
            }
        };
        if let (Unit::Objects, Amount::Text(text)) = (unit, amount) {
            if text.trim().parse::<u64>().is_err() {
                let reason = format!(
                    "'{text}' is a size, and with `unit` objects a capacity is a count of objects: \
                     give a count, or `unit` bytes"
                );
                return Err(PolicyError::setting(key, reason));
            }
        }
        match amount.value(key)? {
            0 => Err(PolicyError::setting(key, "must be above 0")),
            amount => Ok(Capacity { amount, unit }),
        }
    }

    fn shards(&self) -> Result<Option<usize>, PolicyError> {
        match self.shards {
            Some(n) if !n.is_power_of_two() || n > SHARDS_MAX => Err(PolicyError::setting(
                "shards",
                format!("{n}: must be a power of two from 1 to {SHARDS_MAX}"),
            )),
            shards => Ok(shards),
        }
    }

    fn mode(&self) -> Result<Option<CasConfig>, PolicyError> {
        let Some(text) = &self.mode else {
            if self.nhit {
                return Err(PolicyError::setting("nhit", "applies to a cache mode: give `mode`"));
            }
            if self.cleaning != default_cleaning() {
                let reason = "applies to a cache mode: give `mode`";
                return Err(PolicyError::setting("cleaning", reason));
            }
            return Ok(None);
        };
        let mode = CacheMode::parse(text).ok_or_else(|| {
            PolicyError::setting("mode", format!("'{text}': use wt, wb, wa, wi, wo or pt"))
        })?;
        let mut config = CasConfig::new(mode);
        if self.nhit {
            config.nhit = Some(NhitConfig::default());
        }
        config.seq_cutoff = match self.seq_cutoff.as_str() {
            "always" => SeqCutoffPolicy::Always,
            "full" => SeqCutoffPolicy::Full,
            "never" => SeqCutoffPolicy::Never,
            other => {
                let reason = format!("'{other}': use always, full or never");
                return Err(PolicyError::setting("seq_cutoff", reason));
            }
        };
        config.seq_threshold_bytes = self.seq_threshold.value("seq_threshold")?;
        let (cleaning, options) = self.cleaning.split_once(':').unwrap_or((&self.cleaning, ""));
        config.cleaning_policy = match cleaning.trim() {
            "alru" => Cleaning::Alru,
            "nop" => Cleaning::Nop,
            "acp" => Cleaning::Acp,
            other => {
                let reason = format!("'{other}': use alru, acp or nop");
                return Err(PolicyError::setting("cleaning", reason));
            }
        };
        let pairs = under("cleaning", crate::params::pairs("acp", options))?;
        if !pairs.is_empty() && config.cleaning_policy != Cleaning::Acp {
            let reason = format!("'{}': options are acp's", self.cleaning);
            return Err(PolicyError::setting("cleaning", reason));
        }
        config.acp = under("cleaning", crate::params::apply("acp", &AcpConfig::default(), &pairs))?;
        under("cleaning", config.acp.validate())?;
        Ok(Some(config))
    }
}

/// Wraps a part's own error with the key it was written under.
fn under<T>(key: &str, parsed: Result<T, PolicyError>) -> Result<T, PolicyError> {
    parsed.map_err(|e| PolicyError::setting(key, e.to_string()))
}

impl TryFrom<StackSpec> for StackConfig {
    type Error = PolicyError;

    fn try_from(spec: StackSpec) -> Result<StackConfig, PolicyError> {
        let mut tiers = vec![(
            under("policy", PolicyConfig::parse(&spec.policy))?,
            spec.capacity("capacity", &spec.capacity)?,
        )];
        match &spec.lower_capacity {
            Some(lower) => tiers.push((
                under("lower_policy", PolicyConfig::parse(&spec.lower_policy))?,
                spec.capacity("lower_capacity", lower)?,
            )),
            None if !spec.tier.is_empty() => {
                let reason = "adds tiers below the lower one: give `lower_capacity` too";
                return Err(PolicyError::setting("tier", reason));
            }
            None => {}
        }
        for text in &spec.tier {
            let (capacity, policy) = text.split_once(':').unwrap_or((text, "lru"));
            let policy = PolicyConfig::parse(policy)
                .map_err(|e| PolicyError::setting("tier", format!("'{text}': {e}")))?;
            let capacity = spec.capacity("tier", &Amount::Text(capacity.into()))?;
            tiers.push((policy, capacity));
        }
        if tiers.len() == 1 && spec.large_values.is_some() {
            let reason = "places large values in the tier below the top, and this stack has \
                          one: give `lower_capacity` too";
            return Err(PolicyError::setting("large_values", reason));
        }
        if tiers.len() == 1 && spec.placement != default_placement() {
            let reason = format!(
                "'{}' places blocks across tiers, and this stack has one: give `lower_capacity` \
                 too, or leave the placement out",
                spec.placement
            );
            return Err(PolicyError::setting("placement", reason));
        }
        if tiers.len() > MAX_TIERS {
            let reason = format!("{} tiers: at most {MAX_TIERS}", tiers.len());
            return Err(PolicyError::setting("tier", reason));
        }
        Ok(StackConfig {
            tiers,
            placement: under("placement", Placement::parse(&spec.placement))?,
            large_values: spec
                .large_values
                .as_ref()
                .map(|a| a.value("large_values"))
                .transpose()?,
            admission: under("admission", AdmissionConfig::parse_chain(&spec.admission))?,
            nvcache: under(
                "nvcache",
                spec.nvcache.as_deref().map(NvcacheConfig::parse).transpose(),
            )?,
            mode: spec.mode()?,
            nhc: under("nhc", spec.nhc.as_deref().map(NhcConfig::parse).transpose())?,
            seed: spec.seed,
            shards: spec.shards()?,
            hit_rule: spec.hit_rule.as_deref().map(HitRule::parse).transpose()?,
            tick_us: match spec.tick_us {
                Some(0) => return Err(PolicyError::setting("tick_us", "must be above 0")),
                other => other,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(toml_text: &str) -> Result<StackConfig, String> {
        StackConfig::from_toml(toml_text)
    }

    #[test]
    fn a_setting_that_would_do_nothing_is_refused() {
        let e = parse("policy = \"lru\"\ncapacity = \"1MiB\"\nplacement = \"scm-first:2\"");
        let e = e.unwrap_err();
        assert!(e.contains("placement") && e.contains("lower_capacity"), "{e}");
        let e = parse("policy = \"lru\"\ncapacity = \"1MiB\"\nunit = \"objects\"").unwrap_err();
        assert!(e.contains("'1MiB' is a size") && e.contains("count"), "{e}");
        assert!(parse("policy = \"lru\"\ncapacity = \"1000\"\nunit = \"objects\"").is_ok());
        assert!(parse("policy = \"lru\"\ncapacity = 1000\nunit = \"objects\"").is_ok());
    }

    /// The shards model the engine's, which runs no policy that reads the future.
    #[test]
    fn a_sharded_stack_refuses_a_policy_that_reads_the_future() {
        for policy in ["belady", "belady-size"] {
            let text = format!("policy = \"{policy}\"\ncapacity = \"1MiB\"\nshards = 4\n");
            let config = parse(&text).unwrap();
            let e = config.build().err().expect("refused").to_string();
            assert!(e.contains("shards") && e.contains("reads the"), "{e}");
            let text = format!("policy = \"{policy}\"\ncapacity = \"1MiB\"\n");
            assert!(parse(&text).unwrap().build().is_ok());
        }
    }

    #[test]
    fn large_values_are_a_size_for_hierarchies_only() {
        let two = "policy = \"lru\"\ncapacity = \"1MiB\"\nlower_capacity = \"8MiB\"\n";
        let stack = parse(&format!("{two}large_values = \"256KiB\"")).unwrap();
        assert_eq!(stack.large_values, Some(256 << 10));
        assert!(stack.build().is_ok());
        let e = parse(&format!("{two}large_values = \"lots\"")).unwrap_err();
        assert!(e.contains("large_values"), "{e}");
        let one = parse("policy = \"lru\"\ncapacity = \"1MiB\"\nlarge_values = \"1KiB\"");
        let e = one.unwrap_err();
        assert!(e.contains("large_values") && e.contains("lower_capacity"), "{e}");
        let mut built = StackConfig::single(PolicyConfig::Lru, Capacity::bytes(1 << 20));
        built.large_values = Some(1024);
        let e = built.build().err().expect("one tier").to_string();
        assert!(e.contains("large_values") && e.contains("second tier"), "{e}");
        let arc = format!("{}\nlarge_values = \"1KiB\"", two.replace("lru", "hybrid-arc"));
        let e = parse(&arc).unwrap().build().err().expect("hybrid-arc").to_string();
        assert!(e.contains("large_values") && e.contains("hierarchies"), "{e}");
    }

    #[test]
    fn a_written_stack_is_read_whole() {
        let stack = parse(
            r#"
            policy = "clock:bits=2"
            capacity = 2000
            unit = "objects"
            lower_capacity = "8000"
            placement = "scm-first:2"
            tier = ["100000:fifo", "200000"]
            admission = "second-hit"
            mode = "wb"
            nhit = true
            seed = 7
            "#,
        )
        .unwrap();
        let objects = Capacity::objects;
        assert_eq!(
            stack.tiers,
            vec![
                (PolicyConfig::parse("clock:bits=2").unwrap(), objects(2000)),
                (PolicyConfig::Lru, objects(8000)),
                (PolicyConfig::Fifo, objects(100_000)),
                (PolicyConfig::Lru, objects(200_000)),
            ]
        );
        assert_eq!(stack.placement, Placement::parse("scm-first:2").unwrap());
        assert_eq!(stack.admission, AdmissionConfig::parse_chain("second-hit").unwrap());
        let mode = stack.mode.as_ref().unwrap();
        assert_eq!((mode.mode, mode.nhit.is_some()), (CacheMode::WriteBack, true));
        assert_eq!(stack.seed, 7);
        let policy = stack.build().unwrap();
        assert_eq!(crate::policy::Policy::tier_count(&policy), 4);
    }

    #[test]
    fn defaults_and_sizes() {
        let stack = parse("policy = 'lru'\ncapacity = '64MiB'").unwrap();
        assert_eq!(stack, StackConfig::single(PolicyConfig::Lru, Capacity::bytes(64 << 20)));
        assert_eq!(
            StackConfig::try_from(StackSpec::new("lru", Amount::Count(5))).unwrap(),
            StackConfig::single(PolicyConfig::Lru, Capacity::bytes(5))
        );
    }

    #[test]
    fn every_bad_setting_is_named() {
        for (text, named) in [
            ("policy = 'lru2'\ncapacity = 1", "policy"),
            ("policy = 'lru'\ncapacity = 0", "capacity"),
            ("policy = 'lru'\ncapacity = '12 parsecs'", "capacity"),
            ("policy = 'lru'\ncapacity = 1\nunit = 'pages'", "unit"),
            ("policy = 'lru'\ncapacity = 1\ntier = ['5']", "tier"),
            ("policy = 'lru'\ncapacity = 1\nlower_capacity = 2\ntier = ['5:lru9']", "tier"),
            ("policy = 'lru'\ncapacity = 1\nplacement = 'sideways'", "placement"),
            ("policy = 'lru'\ncapacity = 1\nadmission = 'maybe'", "admission"),
            ("policy = 'lru'\ncapacity = 1\nmode = 'wz'", "mode"),
            ("policy = 'lru'\ncapacity = 1\nnhit = true", "nhit"),
            ("policy = 'lru'\ncapacity = 1\nmode = 'wb'\nseq_cutoff = 'x'", "seq_cutoff"),
            ("policy = 'lru'\ncapacity = 1\nnvcache = 'obp:x'", "nvcache"),
            ("policy = 'lru'\ncapacity = 1\nnhc = 'nhc:target=speed'", "nhc"),
            ("policy = 'lru'\ncapacity = 1\ncolour = 'blue'", "colour"),
            ("capacity = 1", "policy"),
        ] {
            let err = parse(text).unwrap_err();
            assert!(err.contains(named), "{text}: {err}");
        }
    }

    #[test]
    fn hibachi_takes_exactly_two_tiers() {
        let two = parse("policy = 'hibachi'\ncapacity = 10\nunit = 'objects'\nlower_capacity = 20");
        let two = two.unwrap().build().unwrap();
        assert!(matches!(two, AnyPolicy::Hibachi(_)));
        let one = parse("policy = 'hibachi'\ncapacity = 10\nunit = 'objects'").unwrap();
        assert!(one.build().is_err());
        let three = parse(
            "policy = 'hibachi'\ncapacity = 10\nunit = 'objects'\nlower_capacity = 20\ntier = ['30']",
        )
        .unwrap();
        let err = three.build().err().expect("three tiers refused");
        assert!(err.to_string().contains("two tiers"), "{err}");
    }
}
