//! LHD, least hit density (Beckmann, Chen and Cidon, "LHD: Improving Cache Hit Rate by
//! Maximizing Hit Density", NSDI'18): a key's worth is the hits it can still be expected to
//! get per byte of space and per unit of time it will hold that space, judged from its age
//! (the time since its last reference) and the ages at which keys of its class were hit or
//! evicted before. The victim is the resident key of least hit density among a few drawn at
//! random; no order is kept.
//!
//! As the paper (section 4) and its authors' simulator (the one libCacheSim carries) run it:
//!
//! - A key's class is the sum of its last two hit ages on a log scale, 16 classes; ages count
//!   references (hits and insertions), coarsened by a shift (2^10 to start), up to 20,000.
//! - Each class counts hits and evictions by age; every 2^20 references the counts decay by
//!   0.9 and each class's density at age `a` becomes its hits at ages from `a` on over the
//!   space-time they took, `Σ_{x≥a} hits(x) / Σ_{x≥a} (x − a + 1) events(x)`. At the 5th and
//!   25th reconfiguration the shift is set so that the resident keys' typical lifetime spans
//!   1% of the ages, and the counts are stretched or compressed to it.
//! - Until then, densities start as `(class + 1) / (age + 1)`, a GDSF-like guess, the class
//!   counted as the simulator does (16 to 31: its one application's classes follow those of
//!   an application 0); a key of an age past the last counts as no worth at all. A key's
//!   density is divided by its size (1 with the capacity in objects).
//! - An eviction weighs 32 keys drawn with replacement (8 until the 50th reconfiguration) and
//!   the last 8 keys admitted that looked no better than recent victims then (their density
//!   under the victims' moving average, decay 0.9), while still resident.
//! - Until the 50th reconfiguration one reference in 32 makes its key an explorer, worth one
//!   more than its density (rarely evicted), within a budget of 1% of the capacity, so that
//!   the counts see keys live long.
//!
//! libCacheSim's `LHD` runs this; ours draws from our own seeded generator
//! (`lhd:seed=N`), so the two agree over seeds, not run by run (`tests/peer_libcachesim.rs`).
//! On traces shorter than 2^20 references it never reconfigures and decides by the starting
//! guess alone, as libCacheSim's does.

use serde::{Deserialize, Serialize};
use tiercache_core::{Capacity, Key, Request, SeededRng, Unit};

use crate::error::PolicyError;
use crate::frame::Eviction;
use crate::queue::expected_objects;
use crate::sampled::Dense;

/// Ages kept; the last is every age past it.
const AGES: usize = 20_000;
const HIT_AGE_CLASSES: usize = 16;
/// Where the simulator's classes of its one application start (see the module comment).
const FIRST_CLASS: usize = 16;
const RECONFIGURE_EVERY: u64 = 1 << 20;
const DECAY: f32 = 0.9;
/// Reconfigurations of warm-up: few candidates and explorers until then.
const WARM_UP: u32 = 50;
const WARM_UP_CANDIDATES: u32 = 8;
const EXPLORE_ONE_IN: u64 = 32;
const EXPLORER_SHARE: f64 = 0.01;
/// The share of the ages a typical lifetime should span once the coarsening is set.
const COARSENING_SHARE: f32 = 0.01;
const FIRST_SHIFT: u32 = 10;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LhdConfig {
    /// Keys drawn per eviction once warmed up.
    pub associativity: u32,
    /// Recently admitted keys also weighed at each eviction.
    pub admissions: u32,
    /// The seed of the draws.
    pub seed: u64,
}

impl Default for LhdConfig {
    fn default() -> LhdConfig {
        LhdConfig { associativity: 32, admissions: 8, seed: 0 }
    }
}

/// What is kept of each resident key.
#[derive(Clone, Copy)]
struct Tag {
    /// The clock at its last reference.
    stamp: u64,
    last_hit_age: u64,
    last_last_hit_age: u64,
    explorer: bool,
}

/// One class's counts by age, and its densities by age. The counts are allocated when first
/// written, the densities when first modelled (until then the starting guess,
/// `weight / (age + 1)`, holds), so that a cache that never sees a class pays nothing for it.
struct Class {
    hits: Vec<f32>,
    evictions: Vec<f32>,
    modeled: Vec<f32>,
    weight: f32,
}

impl Class {
    fn new(index: usize) -> Class {
        Class {
            hits: Vec::new(),
            evictions: Vec::new(),
            modeled: Vec::new(),
            weight: (FIRST_CLASS + index + 1) as f32,
        }
    }

    fn density(&self, age: usize) -> f32 {
        match self.modeled.get(age) {
            Some(&density) => density,
            None => self.weight / (age + 1) as f32,
        }
    }

    /// A hit, or an eviction, of a key of age `age`.
    fn record(&mut self, hit: bool, age: usize) {
        if self.hits.is_empty() {
            self.hits = vec![0.0; AGES];
            self.evictions = vec![0.0; AGES];
        }
        let counts = if hit { &mut self.hits } else { &mut self.evictions };
        counts[age] += 1.0;
    }

    fn decay(&mut self) {
        self.hits.iter_mut().chain(self.evictions.iter_mut()).for_each(|n| *n *= DECAY);
    }

    /// Densities from the counts, in one pass from the oldest age down: the hits from an age
    /// on over the space-time all keys from that age on took.
    fn model(&mut self) {
        let last = AGES - 1;
        if self.modeled.is_empty() {
            self.modeled = (0..AGES).map(|age| self.density(age)).collect();
        }
        if self.hits.is_empty() {
            // No events: no age has a density (as the counts' pass would find).
            self.modeled[..last].iter_mut().for_each(|d| *d = 0.0);
            return;
        }
        let mut events = self.hits[last] + self.evictions[last];
        let mut hits = self.hits[last];
        let mut lifetime = events;
        for age in (0..last).rev() {
            hits += self.hits[age];
            events += self.hits[age] + self.evictions[age];
            lifetime += events;
            self.modeled[age] = if events > 1e-5 { hits / lifetime } else { 0.0 };
        }
    }

    /// The counts moved to a coarsening `delta` steps finer (negative) or coarser (positive).
    fn rescale(&mut self, delta: i32) {
        let last = AGES - 1;
        for counts in [&mut self.hits, &mut self.evictions] {
            if counts.is_empty() {
                continue;
            }
            if delta < 0 {
                let by = (-delta) as u32;
                let tail: f32 = counts[(AGES >> by)..last].iter().sum();
                counts[last] += tail;
                for age in (0..last).rev() {
                    counts[age] = counts[age >> by] / (1u32 << by) as f32;
                }
            } else if delta > 0 {
                let by = delta as u32;
                for age in 0..(AGES >> by) {
                    counts[age] = counts[(age << by)..((age + 1) << by)].iter().sum();
                }
                counts[(AGES >> by)..last].iter_mut().for_each(|n| *n = 0.0);
            }
        }
    }
}

/// The hit-age class of a sum of hit ages: about `log2(AGES / age)`, the youngest last.
fn hit_age_class(age: u64) -> usize {
    if age == 0 {
        return HIT_AGE_CLASSES - 1;
    }
    let mut age = age;
    let mut class = 0;
    while age < AGES as u64 && class < HIT_AGE_CLASSES - 1 {
        age <<= 1;
        class += 1;
    }
    class
}

pub struct Lhd {
    keys: Dense<Tag>,
    classes: Vec<Class>,
    unit: Unit,
    associativity: u32,
    rng: SeededRng,
    /// Recently admitted keys that looked like victims; a ring.
    admitted: Vec<Option<Key>>,
    admitted_next: usize,
    /// References (hits and insertions) so far.
    clock: u64,
    reconfigurations: u32,
    shift: u32,
    objects_average: f32,
    objects_mass: f32,
    victim_density: f32,
    explorer_budget: i64,
}

impl crate::frame::Registered for Lhd {
    type Config = LhdConfig;
    const VARIANTS: &'static [&'static str] = &["associativity=4,admissions=0,seed=7"];
    const QUIET_HITS: bool = true;
    const COUNTS_HITS: bool = true;

    fn validate(config: &LhdConfig) -> Result<(), PolicyError> {
        if !(1..=1024).contains(&config.associativity) {
            return Err(PolicyError::bad("lhd", "associativity", "must be 1 to 1024"));
        }
        if config.admissions > 64 {
            return Err(PolicyError::bad("lhd", "admissions", "must be 0 to 64"));
        }
        Ok(())
    }

    fn build(config: &LhdConfig, capacity: Capacity) -> Result<Lhd, PolicyError> {
        Ok(Lhd {
            keys: Dense::new(capacity.unit, expected_objects(capacity)),
            classes: (0..HIT_AGE_CLASSES).map(Class::new).collect(),
            unit: capacity.unit,
            associativity: config.associativity,
            rng: SeededRng::new(config.seed),
            admitted: vec![None; config.admissions as usize],
            admitted_next: 0,
            clock: 0,
            reconfigurations: 0,
            shift: FIRST_SHIFT,
            objects_average: 0.0,
            objects_mass: 0.0,
            victim_density: 0.0,
            explorer_budget: (capacity.amount as f64 * EXPLORER_SHARE) as i64,
        })
    }
}

impl Lhd {
    /// The size a key's density is divided by and its exploring costs.
    fn weight(&self, size: u32) -> u32 {
        match self.unit {
            Unit::Bytes => size,
            Unit::Objects => 1,
        }
    }

    fn age(&self, tag: &Tag) -> usize {
        (((self.clock - tag.stamp) >> self.shift) as usize).min(AGES - 1)
    }

    fn class(tag: &Tag) -> usize {
        hit_age_class(tag.last_hit_age + tag.last_last_hit_age)
    }

    fn density(&self, tag: &Tag, size: u32) -> f32 {
        let age = self.age(tag);
        if age == AGES - 1 {
            return f32::MIN;
        }
        let density = self.classes[Self::class(tag)].density(age) / self.weight(size) as f32;
        if tag.explorer {
            density + 1.0
        } else {
            density
        }
    }

    /// A reference to `key`, resident now (a hit or the insertion just made).
    fn reference(&mut self, key: Key, inserted: bool) {
        let entry = *self.keys.get(key).expect("a referenced key is resident");
        let weight = self.weight(entry.size) as i64;
        let mut tag = entry.meta;
        if !inserted {
            let age = self.age(&tag);
            self.classes[Self::class(&tag)].record(true, age);
            if tag.explorer {
                self.explorer_budget += weight;
            }
            tag.last_last_hit_age = tag.last_hit_age;
            tag.last_hit_age = age as u64;
        }
        tag.stamp = self.clock;
        let explore = self.rng.below(EXPLORE_ONE_IN) == 0;
        tag.explorer = explore && self.explorer_budget > 0 && self.reconfigurations < WARM_UP;
        if tag.explorer {
            self.explorer_budget -= weight;
        }
        if inserted
            && !explore
            && !self.admitted.is_empty()
            && self.density(&tag, entry.size) < self.victim_density
        {
            let slot = self.admitted_next % self.admitted.len();
            self.admitted[slot] = Some(key);
            self.admitted_next += 1;
        }
        self.keys.get_mut(key).expect("resident").meta = tag;
        self.clock += 1;
        if self.clock.is_multiple_of(RECONFIGURE_EVERY) {
            self.reconfigure();
            self.reconfigurations += 1;
        }
    }

    fn reconfigure(&mut self) {
        self.classes.iter_mut().for_each(Class::decay);
        self.adapt_coarsening();
        self.classes.iter_mut().for_each(Class::model);
    }

    /// At the 5th and 25th reconfiguration, the shift that makes the resident keys' count
    /// (a moving average) span `COARSENING_SHARE` of the ages.
    fn adapt_coarsening(&mut self) {
        self.objects_average = self.objects_average * DECAY + self.keys.len() as f32;
        self.objects_mass = self.objects_mass * DECAY + 1.0;
        if self.reconfigurations != 5 && self.reconfigurations != 25 {
            return;
        }
        let objects = self.objects_average / self.objects_mass;
        let best = objects / (COARSENING_SHARE * AGES as f32);
        let mut shift = 1;
        while ((1u64 << shift) as f32) < best {
            shift += 1;
        }
        let delta = shift as i32 - self.shift as i32;
        self.shift = shift;
        // Weigh the average more, to put off another change.
        self.objects_average *= 8.0;
        self.objects_mass *= 8.0;
        self.classes.iter_mut().for_each(|class| class.rescale(delta));
    }
}

impl Eviction for Lhd {
    fn peek(&self, key: Key) -> Option<u32> {
        self.keys.get(key).map(|e| e.size)
    }

    #[inline]
    fn prefetch(&self, key: Key) {
        self.keys.prefetch(key);
    }

    fn access(&mut self, req: &Request) -> Option<u32> {
        let size = self.keys.get(req.key)?.size;
        self.reference(req.key, false);
        Some(size)
    }

    fn evict(&mut self, _incoming: &Request) -> Option<(Key, u32)> {
        let candidates =
            if self.reconfigurations > WARM_UP { self.associativity } else { WARM_UP_CANDIDATES };
        let mut victim: Option<(Key, f32)> = None;
        for _ in 0..candidates {
            let entry = self.keys.at(self.keys.draw(&mut self.rng)?);
            let density = self.density(&entry.meta, entry.size);
            if victim.is_none_or(|(_, least)| density < least) {
                victim = Some((entry.key, density));
            }
        }
        for key in self.admitted.iter().flatten() {
            let Some(entry) = self.keys.get(*key) else { continue };
            let density = self.density(&entry.meta, entry.size);
            if victim.is_none_or(|(_, least)| density < least) {
                victim = Some((entry.key, density));
            }
        }
        let (key, density) = victim?;
        self.victim_density = DECAY * self.victim_density + (1.0 - DECAY) * density;
        let entry = self.keys.remove(key).expect("the victim is resident");
        let age = self.age(&entry.meta);
        self.classes[Self::class(&entry.meta)].record(false, age);
        if entry.meta.explorer {
            self.explorer_budget += self.weight(entry.size) as i64;
        }
        Some((entry.key, entry.size))
    }

    fn insert(&mut self, req: &Request) {
        let tag =
            Tag { stamp: 0, last_hit_age: 0, last_last_hit_age: AGES as u64, explorer: false };
        self.keys.insert(req.key, req.size, tag);
        self.reference(req.key, true);
    }

    fn remove(&mut self, key: Key) -> Option<u32> {
        let entry = self.keys.remove(key)?;
        if entry.meta.explorer {
            self.explorer_budget += self.weight(entry.size) as i64;
        }
        Some(entry.size)
    }

    fn used(&self) -> u64 {
        self.keys.used()
    }

    fn resident(&self) -> u64 {
        self.keys.len()
    }

    fn label(&self) -> String {
        "lhd".into()
    }

    fn knobs(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("age_shift", self.shift as f64),
            ("victim_density", self.victim_density as f64),
            ("reconfigurations", self.reconfigurations as f64),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Registered;

    #[test]
    fn hit_age_classes_run_from_the_oldest_to_the_youngest() {
        assert_eq!(hit_age_class(0), 15);
        assert_eq!(hit_age_class(1), 15);
        assert_eq!(hit_age_class(AGES as u64), 0);
        assert_eq!(hit_age_class(AGES as u64 + AGES as u64), 0);
        assert_eq!(hit_age_class(AGES as u64 - 1), 1);
        assert_eq!(hit_age_class(AGES as u64 / 2), 1);
        assert_eq!(hit_age_class(AGES as u64 / 2 - 1), 2);
    }

    /// Ten hits at age 2 and ten evictions at age 5: from age 0 on, 10 hits over a space-time
    /// of 3 × 10 + 6 × 10; from age 2, 10 over 1 × 10 + 4 × 10; from age 3, none.
    #[test]
    fn densities_are_hits_over_the_space_time_they_took() {
        let mut class = Class::new(0);
        for _ in 0..10 {
            class.record(true, 2);
            class.record(false, 5);
        }
        class.model();
        assert!((class.density(0) - 10.0 / 90.0).abs() < 1e-6);
        assert!((class.density(2) - 10.0 / 50.0).abs() < 1e-6);
        assert_eq!(class.density(3), 0.0);
        assert_eq!(class.density(6), 0.0);
    }

    /// Coarser ages sum neighbouring counts; finer ones spread each count over the ages it
    /// stands for; either way the counts' total stays.
    #[test]
    fn rescaling_keeps_the_counts() {
        let mut class = Class::new(0);
        class.rescale(1);
        class.record(true, 0);
        for age in 0..100 {
            class.hits[age] = age as f32;
        }
        class.rescale(2);
        assert_eq!(class.hits[0], 0.0 + 1.0 + 2.0 + 3.0);
        assert_eq!(class.hits[1], 4.0 + 5.0 + 6.0 + 7.0);
        assert_eq!(class.hits.iter().sum::<f32>(), (0..100).sum::<i32>() as f32);
        class.rescale(-1);
        assert_eq!(class.hits[0], 3.0);
        assert_eq!(class.hits[1], 3.0);
        assert_eq!(class.hits.iter().sum::<f32>(), (0..100).sum::<i32>() as f32);
    }

    /// Keys hit again and again outlive a stream of keys referenced once, and a seed replays
    /// the evictions.
    #[test]
    fn keys_hit_often_outlive_a_scan_and_a_seed_replays() {
        let run = || {
            let capacity = Capacity { amount: 100, unit: Unit::Objects };
            let mut lhd = Lhd::build(&LhdConfig::default(), capacity).unwrap();
            let mut victims = Vec::new();
            for key in 0..100u64 {
                lhd.insert(&Request::read(key, 4096));
            }
            for key in 100..2000u64 {
                for hot in 0..10 {
                    lhd.access(&Request::read(hot, 4096));
                }
                victims.push(lhd.evict(&Request::read(key, 4096)).unwrap().0);
                lhd.insert(&Request::read(key, 4096));
            }
            let hot_left = (0..10).filter(|k| lhd.peek(*k).is_some()).count();
            (victims, hot_left)
        };
        let (victims, hot_left) = run();
        assert!(hot_left >= 9, "{hot_left} of 10 hot keys left");
        assert_eq!(run().0, victims);
    }
}
