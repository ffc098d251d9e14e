//! The one place policies are registered: one line per policy in `registry!` below. A
//! single-tier policy is a file with its [`Eviction`] state machine and its [`Registered`]
//! facts (config, how to build it); the line gives its name and aliases. From those lines come
//! [`PolicyConfig`] (serde, with the papers' defaults), [`AnyPolicy`] and every match over
//! them. Options (`clock:bits=2`) are set through [`crate::params`], by the config's own field
//! names, with no parser per policy. The two-tier policies (Hibachi and its Hybrid-ARC) and the
//! wrappers (Open CAS modes, NVCache, NHC, hierarchies, shards) are written out below.

use serde::{Deserialize, Serialize};
use tiercache_core::{Capacity, Decision, Request, TierId};

use crate::admission::{Admission, AdmissionConfig};
use crate::cas::{Cas, CasConfig};
use crate::error::PolicyError;
use crate::frame::{Eviction, Registered, SingleTier};
use crate::hibachi::{Hibachi, HibachiConfig};
use crate::hierarchy::{Hybrid, Placement};
use crate::hybrid_arc::HybridArc;
use crate::policy::Policy;

/// Generates, from one line per single-tier policy, [`PolicyConfig`], [`AnyPolicy`] and the
/// matches over them. `$d` is a `$` passed in, for the `dispatch!` macro it defines.
macro_rules! registry {
    (
        $d:tt
        plain { $($pv:ident = $pname:literal $(| $palias:literal)* => $pty:ty,)* }
        configured { $($cv:ident = $cname:literal $(| $calias:literal)* => $cty:ty,)* }
    ) => {
        /// A policy and its parameters, as written in a configuration file or on the command
        /// line (`name = "s3fifo"` with its parameters beside it).
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "name")]
        pub enum PolicyConfig {
            $(#[serde(rename = $pname $(, alias = $palias)*)] $pv,)*
            $(#[serde(rename = $cname $(, alias = $calias)*)] $cv(<$cty as Registered>::Config),)*
            /// Two tiers (DRAM and NVRAM) only.
            #[serde(rename = "hibachi")]
            Hibachi(HibachiConfig),
            /// Two tiers (DRAM and NVRAM) only: Hibachi's Hybrid-ARC baseline.
            #[serde(rename = "hybrid-arc", alias = "hybridarc")]
            HybridArc,
        }

        const KNOWN: &str = concat!(
            $($pname, ", ",)* $($cname, ", ",)*
            "hibachi, hybrid-lru and hybrid-arc (two tiers)"
        );

        impl PolicyConfig {
            /// The single-tier policies' names, for help texts and sweeps.
            pub const NAMES: &'static [&'static str] = &[$($pname,)* $($cname,)*];

            /// The policy called `name` (lower case), with its defaults.
            fn by_name(name: &str) -> Option<PolicyConfig> {
                Some(match name {
                    $($pname $(| $palias)* => PolicyConfig::$pv,)*
                    $($cname $(| $calias)* => PolicyConfig::$cv(Default::default()),)*
                    "hibachi" => PolicyConfig::Hibachi(HibachiConfig::default()),
                    "hybrid-lru" => PolicyConfig::Hibachi(HibachiConfig {
                        hybrid_lru: true,
                        ..HibachiConfig::default()
                    }),
                    "hybrid-arc" => PolicyConfig::HybridArc,
                    _ => return None,
                })
            }

            /// This config with `pairs` set (`key`, `value` as text), through the one grammar
            /// of options ([`crate::params`]).
            pub fn with_options(self, pairs: &[(&str, &str)]) -> Result<PolicyConfig, PolicyError> {
                let name = self.name();
                let none = |pairs: &[(&str, &str)]| match pairs.first() {
                    Some((key, _)) => Err(crate::error::unknown_key(name, key)),
                    None => Ok(()),
                };
                Ok(match self {
                    $(PolicyConfig::$pv => {
                        none(pairs)?;
                        PolicyConfig::$pv
                    })*
                    $(PolicyConfig::$cv(c) => {
                        PolicyConfig::$cv(crate::params::apply(name, &c, pairs)?)
                    })*
                    PolicyConfig::Hibachi(c) => {
                        PolicyConfig::Hibachi(crate::params::apply(name, &c, pairs)?)
                    }
                    PolicyConfig::HybridArc => {
                        none(pairs)?;
                        PolicyConfig::HybridArc
                    }
                })
            }

            pub fn name(&self) -> &'static str {
                match self {
                    $(PolicyConfig::$pv => $pname,)*
                    $(PolicyConfig::$cv(_) => $cname,)*
                    PolicyConfig::Hibachi(_) => "hibachi",
                    PolicyConfig::HybridArc => "hybrid-arc",
                }
            }

            pub fn validate(&self) -> Result<(), PolicyError> {
                match self {
                    $(PolicyConfig::$pv => <$pty as Registered>::validate(&()),)*
                    $(PolicyConfig::$cv(c) => <$cty as Registered>::validate(c),)*
                    PolicyConfig::Hibachi(_) | PolicyConfig::HybridArc => Ok(()),
                }
            }

            /// Whether the policy reads request times (periodic work), so callers must supply
            /// them.
            pub fn uses_time(&self) -> bool {
                match self {
                    $(PolicyConfig::$pv => <$pty as Registered>::USES_TIME,)*
                    $(PolicyConfig::$cv(_) => <$cty as Registered>::USES_TIME,)*
                    PolicyConfig::Hibachi(_) | PolicyConfig::HybridArc => false,
                }
            }

            /// Whether the policy reads `next_access` (the future), so the stream must be
            /// annotated.
            pub fn needs_future(&self) -> bool {
                match self {
                    $(PolicyConfig::$pv => <$pty as Registered>::NEEDS_FUTURE,)*
                    $(PolicyConfig::$cv(_) => <$cty as Registered>::NEEDS_FUTURE,)*
                    PolicyConfig::Hibachi(_) | PolicyConfig::HybridArc => false,
                }
            }

            /// Every registered policy: each single-tier policy with its defaults and with
            /// each of its [`Registered::VARIANTS`], then the two-tier ones. The conformance
            /// suite runs them all.
            pub fn registered() -> Vec<PolicyConfig> {
                let mut all = vec![$(PolicyConfig::$pv,)*];
                $(
                    all.push(PolicyConfig::$cv(Default::default()));
                    for options in <$cty as Registered>::VARIANTS {
                        let spec = format!("{}:{options}", $cname);
                        all.push(PolicyConfig::parse(&spec).expect("a registered variant"));
                    }
                )*
                all.push(PolicyConfig::Hibachi(HibachiConfig::default()));
                all.push(PolicyConfig::parse("hybrid-lru").expect("a registered policy"));
                all.push(PolicyConfig::HybridArc);
                all
            }

            /// The policy as the eviction half of a tier, for hierarchies that compose
            /// tiers.
            pub fn eviction(
                &self,
                capacity: Capacity,
            ) -> Result<Box<dyn Eviction + Send>, PolicyError> {
                self.validate()?;
                if self.needs_future() {
                    return Err(PolicyError::bad(
                        self.name(),
                        "tier",
                        "an offline policy cannot run one tier of a hierarchy",
                    ));
                }
                Ok(match self {
                    $(PolicyConfig::$pv => Box::new(<$pty as Registered>::build(&(), capacity)?),)*
                    $(PolicyConfig::$cv(c) => Box::new(<$cty as Registered>::build(c, capacity)?),)*
                    PolicyConfig::Hibachi(_) | PolicyConfig::HybridArc => {
                        return Err(PolicyError::bad(
                            self.name(),
                            "tier",
                            "is a two-tier policy, not one tier of a hierarchy",
                        ))
                    }
                })
            }
        }

        /// Any registered policy, built from its configuration. Dispatch is a `match`, so the
        /// simulator's inner loop stays monomorphic per arm.
        pub enum AnyPolicy {
            $($pv(SingleTier<$pty>),)*
            $($cv(SingleTier<$cty>),)*
            /// Two or more tiers (Kassa et al.'s hybrid cache); tiers behind trait objects.
            Hybrid(Box<Hybrid>),
            /// Any of these run in an Open CAS cache mode.
            Cas(Box<Cas<AnyPolicy>>),
            /// Hibachi over DRAM and NVRAM.
            Hibachi(Box<Hibachi>),
            /// Hibachi's Hybrid-ARC baseline over DRAM and NVRAM.
            HybridArc(Box<HybridArc>),
            /// A single-tier policy behind NVCache's admission (overhead bypass, small-bypass).
            Nvcache(Box<crate::nvcache::Nvcache<AnyPolicy>>),
            Nhc(Box<crate::nhc::Nhc<AnyPolicy>>),
            /// Independent stacks over the keys of each shard, as the engine runs them.
            Sharded(Box<crate::sharded::Sharded<AnyPolicy>>),
            /// A policy with quiet hits told of a key's hits once an epoch.
            Told(Box<crate::told::Told<AnyPolicy>>),
        }

        macro_rules! dispatch {
            ($d self_:expr, $d p:ident => $d body:expr) => {
                match $d self_ {
                    $(AnyPolicy::$pv($d p) => $d body,)*
                    $(AnyPolicy::$cv($d p) => $d body,)*
                    AnyPolicy::Hybrid($d p) => $d body,
                    AnyPolicy::Cas($d p) => $d body,
                    AnyPolicy::Hibachi($d p) => $d body,
                    AnyPolicy::HybridArc($d p) => $d body,
                    AnyPolicy::Nvcache($d p) => $d body,
                    AnyPolicy::Nhc($d p) => $d body,
                    AnyPolicy::Sharded($d p) => $d body,
                    AnyPolicy::Told($d p) => $d body,
                }
            };
        }

        impl AnyPolicy {
            /// Builds a single-tier policy of `capacity` with an admission chain, seeded by
            /// `seed`.
            pub fn from_config(
                config: &PolicyConfig,
                capacity: Capacity,
                admission: &[AdmissionConfig],
                seed: u64,
            ) -> Result<AnyPolicy, PolicyError> {
                config.validate()?;
                if capacity.amount == 0 {
                    return Err(PolicyError::ZeroCapacity { unit: capacity.unit.as_str() });
                }
                let filters = Admission::new(admission, capacity, seed);
                Ok(match config {
                    $(PolicyConfig::$pv => {
                        let policy = <$pty as Registered>::build(&(), capacity)?;
                        AnyPolicy::$pv(SingleTier::new(policy, capacity, filters))
                    })*
                    $(PolicyConfig::$cv(c) => {
                        let policy = <$cty as Registered>::build(c, capacity)?;
                        AnyPolicy::$cv(SingleTier::new(policy, capacity, filters))
                    })*
                    PolicyConfig::Hibachi(_) | PolicyConfig::HybridArc => {
                        let reason =
                            "runs two tiers (DRAM and NVRAM): give a lower tier (--lower-capacity)";
                        return Err(PolicyError::bad(config.name(), "tiers", reason));
                    }
                })
            }

            /// Whether the policy's hits are quiet ([`Policy::quiet_hits`]).
            fn hits_are_quiet(&self) -> bool {
                match self {
                    $(AnyPolicy::$pv(_) => <$pty as Registered>::QUIET_HITS,)*
                    $(AnyPolicy::$cv(_) => <$cty as Registered>::QUIET_HITS,)*
                    AnyPolicy::Cas(cas) => cas.quiet_hits(),
                    AnyPolicy::Told(told) => told.quiet_hits(),
                    _ => false,
                }
            }

            /// Whether the policy's order counts hits ([`Registered::COUNTS_HITS`]).
            pub fn counts_hits(&self) -> bool {
                match self {
                    $(AnyPolicy::$pv(_) => <$pty as Registered>::COUNTS_HITS,)*
                    $(AnyPolicy::$cv(_) => <$cty as Registered>::COUNTS_HITS,)*
                    AnyPolicy::Cas(cas) => cas.inner().counts_hits(),
                    _ => false,
                }
            }
        }
    };
}
// One line per single-tier policy: its variant, its name and aliases, its type.
registry! {
    $
    plain {
        Fifo = "fifo" => crate::fifo::Fifo,
        Log = "log" | "log-fifo" => crate::log::Log,
        Lru = "lru" => crate::lru::Lru,
        Arc = "arc" => crate::arc::Arc,
        Belady = "belady" | "opt" | "min" => crate::belady::Belady,
        BeladySize = "belady-size" | "beladysize" => crate::belady_size::BeladySize,
        Size = "size" => crate::size::Size,
        Sieve = "sieve" => crate::sieve::Sieve,
        Gdsf = "gdsf" => crate::gdsf::Gdsf,
        Lfuda = "lfuda" | "lfu-da" => crate::lfuda::Lfuda,
    }
    configured {
        Clock = "clock" => crate::clock::Clock,
        Lfu = "lfu" => crate::lfu::Lfu,
        S3fifo = "s3fifo" | "s3-fifo" => crate::s3fifo::S3Fifo,
        Clock2QPlus = "clock2q+" | "clock2qplus" => crate::clock2qplus::Clock2QPlus,
        Lfru = "lfru" => crate::lfru::Lfru,
        Slru = "slru" => crate::slru::Slru,
        LruK = "lru-k" | "lruk" => crate::lruk::LruK,
        Mq = "mq" => crate::mq::Mq,
        WTinyLfu = "w-tinylfu" | "wtinylfu" => crate::wtinylfu::WTinyLfu,
        Random = "random" => crate::random::Random,
        LruProb = "lru-prob" | "lruprob" => crate::lruprob::LruProb,
        Hyperbolic = "hyperbolic" => crate::hyperbolic::Hyperbolic,
        LeCaR = "lecar" => crate::lecar::LeCaR,
        Lhd = "lhd" => crate::lhd::Lhd,
        Cacheus = "cacheus" => crate::cacheus::Cacheus,
        TwoQ = "2q" | "twoq" => crate::twoq::TwoQ,
        Lirs = "lirs" => crate::lirs::Lirs,
        ClockPro = "clock-pro" | "clockpro" => crate::clockpro::ClockPro,
        Setassoc = "setassoc" | "set-associative" => crate::setassoc::SetAssoc,
    }
}

impl PolicyConfig {
    /// Whether the policy runs two tiers of its own (Hibachi, Hybrid-ARC) rather than one.
    pub fn is_two_tier(&self) -> bool {
        matches!(self, PolicyConfig::Hibachi(_) | PolicyConfig::HybridArc)
    }

    /// Parses `name` or `name:key=value,key=value`, e.g. `clock:bits=2`,
    /// `lfu:aging_threshold=none`: the name in any case, the options by the fields of the
    /// policy's config ([`crate::params`]).
    pub fn parse(spec: &str) -> Result<PolicyConfig, PolicyError> {
        let (name, options) = match spec.split_once(':') {
            Some((n, p)) => (n.trim().to_ascii_lowercase(), p),
            None => (spec.trim().to_ascii_lowercase(), ""),
        };
        let config = PolicyConfig::by_name(&name).ok_or_else(|| PolicyError::UnknownPolicy {
            name: name.clone(),
            known: KNOWN.into(),
        })?;
        let config = config.with_options(&crate::params::pairs(&name, options)?)?;
        config.validate()?;
        Ok(config)
    }
}

impl AnyPolicy {
    /// The Open CAS mode the policy runs in, if it runs in one.
    pub fn cache_mode(&self) -> Option<crate::cas::CacheMode> {
        match self {
            AnyPolicy::Cas(cas) => Some(cas.mode()),
            AnyPolicy::Told(told) => told.inner().cache_mode(),
            _ => None,
        }
    }
}

impl AnyPolicy {
    /// Hibachi over DRAM (`capacities[0]`) and NVRAM (`capacities[1]`), both in pages.
    pub fn hibachi(
        config: &HibachiConfig,
        capacities: [Capacity; 2],
    ) -> Result<AnyPolicy, PolicyError> {
        check_pages("hibachi", &capacities)?;
        Ok(AnyPolicy::Hibachi(Box::new(Hibachi::new(config.clone(), capacities))))
    }

    /// Hibachi's Hybrid-ARC baseline over DRAM and NVRAM, both in pages.
    pub fn hybrid_arc(capacities: [Capacity; 2]) -> Result<AnyPolicy, PolicyError> {
        check_pages("hybrid-arc", &capacities)?;
        Ok(AnyPolicy::HybridArc(Box::new(HybridArc::new(capacities))))
    }

    /// This policy behind NVCache's admission.
    pub fn with_nvcache(mut self, config: crate::nvcache::NvcacheConfig) -> AnyPolicy {
        // No eviction stops LFRU's sweep too: the sweep is how LFRU evicts (section 3.1), and
        // Table 1's "no eviction" means nothing leaves but by removal.
        if let (false, AnyPolicy::Lfru(lfru)) = (config.evict, &mut self) {
            lfru.eviction_mut().stop_sweeping();
        }
        AnyPolicy::Nvcache(Box::new(crate::nvcache::Nvcache::new(self, config)))
    }

    /// This policy with non-hierarchical caching's decision points and scheduler on top.
    pub fn with_nhc(self, config: crate::nhc::NhcConfig, seed: u64) -> AnyPolicy {
        AnyPolicy::Nhc(Box::new(crate::nhc::Nhc::new(self, config, seed)))
    }

    /// This policy told of its hits by `rule`: with epochs, a policy with quiet hits whose
    /// order does not count them is wrapped in [`crate::told::Told`]; any other is told every
    /// hit, as with `Exact`.
    pub fn told(self, rule: crate::told::HitRule) -> AnyPolicy {
        match rule {
            crate::told::HitRule::Epochs { divisor }
                if self.quiet_hits() && !self.counts_hits() =>
            {
                AnyPolicy::Told(Box::new(crate::told::Told::new(self, divisor)))
            }
            _ => self,
        }
    }

    /// The current epoch's tag of a policy told by epochs (`crate::told`): a key whose last
    /// told hit carries it has its hits decided without the policy. `None`: every hit is told.
    #[inline]
    pub fn hit_tag(&self) -> Option<u8> {
        match self {
            AnyPolicy::Told(told) => Some(told.tag()),
            _ => None,
        }
    }

    /// Hits decided without telling the policy (`crate::told`); 0 where every hit is told.
    pub fn untold_hits(&self) -> u64 {
        match self {
            AnyPolicy::Told(told) => told.untold(),
            _ => 0,
        }
    }

    /// This policy run in an Open CAS cache mode.
    pub fn in_mode(self, config: CasConfig) -> AnyPolicy {
        AnyPolicy::Cas(Box::new(Cas::new(self, config)))
    }

    /// Two tiers as an exclusive DRAM-first hierarchy: `upper` runs tier 0, `lower` tier 1.
    pub fn dram_first(
        upper: &PolicyConfig,
        lower: &PolicyConfig,
        capacities: [Capacity; 2],
        admission: &[AdmissionConfig],
        seed: u64,
    ) -> Result<AnyPolicy, PolicyError> {
        AnyPolicy::hybrid(Placement::DramFirst, upper, lower, capacities, admission, seed)
    }

    /// Two tiers as an exclusive hierarchy with one of Kassa et al.'s placements.
    pub fn hybrid(
        placement: Placement,
        upper: &PolicyConfig,
        lower: &PolicyConfig,
        capacities: [Capacity; 2],
        admission: &[AdmissionConfig],
        seed: u64,
    ) -> Result<AnyPolicy, PolicyError> {
        let tiers = [(upper.clone(), capacities[0]), (lower.clone(), capacities[1])];
        AnyPolicy::hierarchy(placement, &tiers, admission, seed)
    }

    /// Two or more tiers from the top (DRAM) down, each a single-tier policy with its
    /// capacity: each tier's victims move to the tier below; the last tier's are dropped.
    /// Placements that promote move a block hit often enough in any lower tier to the top.
    pub fn hierarchy(
        placement: Placement,
        tiers: &[(PolicyConfig, Capacity)],
        admission: &[AdmissionConfig],
        seed: u64,
    ) -> Result<AnyPolicy, PolicyError> {
        if tiers.len() < 2 || tiers.len() > MAX_TIERS {
            return Err(PolicyError::bad(
                "hierarchy",
                "tiers",
                format!("{} tiers: a hierarchy has 2 to {MAX_TIERS}", tiers.len()),
            ));
        }
        for (_, c) in tiers {
            if c.amount == 0 {
                return Err(PolicyError::ZeroCapacity { unit: c.unit.as_str() });
            }
        }
        let evictions = tiers
            .iter()
            .map(|(config, capacity)| config.eviction(*capacity))
            .collect::<Result<_, _>>()?;
        let capacities: Vec<Capacity> = tiers.iter().map(|(_, c)| *c).collect();
        let filters = Admission::new(admission, capacities[0], seed);
        Ok(AnyPolicy::Hybrid(Box::new(Hybrid::new(evictions, capacities, filters, placement))))
    }
}

/// The most tiers a hierarchy may have.
pub const MAX_TIERS: usize = 8;

fn check_pages(policy: &str, capacities: &[Capacity; 2]) -> Result<(), PolicyError> {
    for c in capacities {
        if c.unit != tiercache_core::Unit::Objects {
            return Err(PolicyError::bad(
                policy,
                "unit",
                "counts pages: use capacities in objects",
            ));
        }
        if c.amount == 0 {
            return Err(PolicyError::ZeroCapacity { unit: c.unit.as_str() });
        }
    }
    Ok(())
}

impl Policy for AnyPolicy {
    fn peek(&self, key: tiercache_core::Key) -> Option<(TierId, u32)> {
        dispatch!(self, p => p.peek(key))
    }

    fn tick(&mut self, now_us: u64, out: &mut Decision) {
        dispatch!(self, p => p.tick(now_us, out))
    }

    fn hold_evictions(&mut self, hold: bool) {
        if let AnyPolicy::Lfru(lfru) = self {
            lfru.eviction_mut().hold_sweeps(hold);
        }
    }

    fn observe(&mut self, interval: &tiercache_core::Interval) {
        dispatch!(self, p => p.observe(interval))
    }

    #[inline]
    fn prefetch(&self, key: tiercache_core::Key) {
        dispatch!(self, p => p.prefetch(key))
    }

    #[inline]
    fn decide(&mut self, req: &Request, out: &mut Decision) {
        dispatch!(self, p => p.decide(req, out))
    }

    fn restore(
        &mut self,
        key: tiercache_core::Key,
        size: u32,
        tier: TierId,
        dirty: bool,
        out: &mut Decision,
    ) -> bool {
        dispatch!(self, p => p.restore(key, size, tier, dirty, out))
    }

    fn write_back(&mut self, tier: Option<TierId>, out: &mut Decision) {
        dispatch!(self, p => p.write_back(tier, out))
    }

    fn persist(&mut self, tier: TierId, below: Option<TierId>, now_us: u64, out: &mut Decision) {
        dispatch!(self, p => p.persist(tier, below, now_us, out))
    }

    fn move_down(
        &mut self,
        key: tiercache_core::Key,
        to: TierId,
        now_us: u64,
        out: &mut Decision,
    ) -> bool {
        dispatch!(self, p => p.move_down(key, to, now_us, out))
    }

    fn tier_count(&self) -> usize {
        dispatch!(self, p => p.tier_count())
    }

    fn capacity(&self, tier: TierId) -> Capacity {
        dispatch!(self, p => p.capacity(tier))
    }

    fn used(&self, tier: TierId) -> u64 {
        dispatch!(self, p => p.used(tier))
    }

    fn resident(&self, tier: TierId) -> u64 {
        dispatch!(self, p => p.resident(tier))
    }

    fn placement(&mut self, tier: TierId) -> Option<&mut dyn crate::placed::PlacedSlots> {
        dispatch!(self, p => p.placement(tier))
    }

    fn placement_ref(&self, tier: TierId) -> Option<&dyn crate::placed::PlacedSlots> {
        dispatch!(self, p => p.placement_ref(tier))
    }

    fn label(&self) -> String {
        dispatch!(self, p => p.label())
    }

    fn knobs(&self) -> Vec<(&'static str, f64)> {
        dispatch!(self, p => p.knobs())
    }

    fn quiet_hits(&self) -> bool {
        self.hits_are_quiet()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ClockConfig;
    use crate::lfu::LfuConfig;

    #[test]
    fn parses_names_and_parameters() {
        assert_eq!(PolicyConfig::parse("LRU").unwrap(), PolicyConfig::Lru);
        let clock = PolicyConfig::parse("clock:bits=2").unwrap();
        assert_eq!(clock, PolicyConfig::Clock(ClockConfig { bits: 2 }));
        let lfu = PolicyConfig::parse("lfu:aging_threshold=none").unwrap();
        assert_eq!(lfu, PolicyConfig::Lfu(LfuConfig { aging_threshold: None }));
    }

    #[test]
    fn errors_name_the_policy_and_the_key() {
        let err = PolicyConfig::parse("lru2").unwrap_err().to_string();
        assert!(err.contains("lru2") && err.contains("s3fifo"), "{err}");
        let err = PolicyConfig::parse("clock:bits=9").unwrap_err().to_string();
        assert!(err.contains("clock") && err.contains("bits"), "{err}");
        let err = PolicyConfig::parse("arc:p=3").unwrap_err().to_string();
        assert!(err.contains("'p'"), "{err}");
        let err = PolicyConfig::parse("clock:bits=two").unwrap_err().to_string();
        assert!(err.contains("two"), "{err}");
    }

    #[test]
    fn zero_capacity_is_refused() {
        let err = AnyPolicy::from_config(&PolicyConfig::Lru, Capacity::objects(0), &[], 0);
        assert!(err.is_err());
    }
}
