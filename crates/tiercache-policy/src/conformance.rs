//! The conformance checker every policy must pass: a shadow of what is resident in each tier,
//! built only from the actions a policy returns, that checks each decision against the rules of
//! the action vocabulary. The property tests of every policy run through it, and so will the
//! engine's.
//!
//! Rules checked: a hit names a tier that holds the key; an insert goes to a tier that does not
//! hold the key; an evict, move or invalidate names a block that is there, with its size; a key
//! is resident in at most one tier; a dirty block is never evicted before a write-back; after
//! each decision no tier is over capacity; a reported `used` equals the shadow's.

use tiercache_core::{Action, Capacity, Decision, Key, KeyMap, Request, TierId, Unit};

use crate::policy::Policy;

/// What the shadow knows of one resident block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Block {
    tier: TierId,
    size: u32,
    dirty: bool,
}

/// Resident blocks per tier, kept from decisions alone.
#[derive(Default)]
pub struct Shadow {
    blocks: KeyMap<Block>,
    used: Vec<u64>,
    capacities: Vec<Capacity>,
}

fn charge(capacity: Capacity, size: u32) -> u64 {
    match capacity.unit {
        Unit::Bytes => size as u64,
        Unit::Objects => 1,
    }
}

impl Shadow {
    pub fn for_policy(policy: &impl Policy) -> Shadow {
        let capacities: Vec<Capacity> =
            (0..policy.tier_count()).map(|t| policy.capacity(TierId(t as u8))).collect();
        Shadow { blocks: KeyMap::default(), used: vec![0; capacities.len()], capacities }
    }

    pub fn is_resident(&self, key: Key) -> bool {
        self.blocks.contains_key(&key)
    }

    /// Dirty blocks resident in `tier`.
    pub fn dirty_in(&self, tier: TierId) -> usize {
        self.blocks.values().filter(|b| b.dirty && b.tier == tier).count()
    }

    fn add(&mut self, key: Key, tier: TierId, size: u32, dirty: bool) -> Result<(), String> {
        if let Some(old) = self.blocks.insert(key, Block { tier, size, dirty }) {
            return Err(format!("key {key} placed in {tier:?} while resident in {:?}", old.tier));
        }
        self.used[tier.index()] += charge(self.capacities[tier.index()], size);
        Ok(())
    }

    fn take(&mut self, key: Key, tier: TierId, size: u32) -> Result<Block, String> {
        match self.blocks.get(&key).copied() {
            Some(b) if b.tier == tier && b.size == size => {
                self.blocks.remove(&key);
                self.used[tier.index()] -= charge(self.capacities[tier.index()], size);
                Ok(b)
            }
            other => {
                Err(format!("key {key} ({size} B) removed from {tier:?} but shadow has {other:?}"))
            }
        }
    }

    /// Checks one decision for `req` and applies it to the shadow.
    pub fn apply(&mut self, req: &Request, decision: &Decision) -> Result<(), String> {
        if let Some(tier) = decision.hit {
            match self.blocks.get(&req.key) {
                Some(b) if b.tier == tier => {}
                other => {
                    return Err(format!(
                        "hit on key {} in {tier:?} but shadow has {other:?}",
                        req.key
                    ))
                }
            }
        }
        if decision.from_backing {
            let read = matches!(req.op, tiercache_core::Op::Read | tiercache_core::Op::Lookup);
            match self.blocks.get(&req.key) {
                Some(b) if read && !b.dirty && decision.hit.is_some() => {}
                other => {
                    return Err(format!(
                        "{:?} of key {} served from backing, but the cache holds {other:?}",
                        req.op, req.key
                    ))
                }
            }
        }
        for action in &decision.actions {
            match *action {
                Action::Insert { tier, key, size, dirty } => self.add(key, tier, size, dirty)?,
                Action::Evict { tier, key, size } => {
                    if self.take(key, tier, size)?.dirty {
                        return Err(format!(
                            "dirty key {key} evicted from {tier:?} without a write-back"
                        ));
                    }
                }
                // Invalidated data is freed or stale: dropping it, dirty or not, loses nothing.
                Action::Invalidate { tier, key, size } => {
                    self.take(key, tier, size)?;
                }
                Action::Move { key, size, from, to } => {
                    let block = self.take(key, from, size)?;
                    self.add(key, to, size, block.dirty)?;
                }
                Action::Update { tier, key, size, dirty } => {
                    let old = self.blocks.get(&key).copied();
                    match old {
                        Some(b) if b.tier == tier => {
                            self.take(key, tier, b.size)?;
                            self.add(key, tier, size, dirty)?;
                        }
                        None => self.add(key, tier, size, dirty)?,
                        Some(b) => {
                            return Err(format!(
                                "update of key {key} in {tier:?}, resident in {:?}",
                                b.tier
                            ))
                        }
                    }
                }
                Action::WriteBack { tier, key, .. } => match self.blocks.get_mut(&key) {
                    Some(b) if b.tier == tier => b.dirty = false,
                    other => {
                        return Err(format!(
                            "write-back of key {key} from {tier:?}, shadow {other:?}"
                        ))
                    }
                },
                Action::Reject { .. } => {}
            }
        }
        for (t, capacity) in self.capacities.iter().enumerate() {
            if self.used[t] > capacity.amount {
                return Err(format!(
                    "tier {t} holds {} > capacity {}",
                    self.used[t], capacity.amount
                ));
            }
        }
        Ok(())
    }

    /// Checks that the policy's own accounting agrees with the shadow.
    pub fn check_accounting(&self, policy: &impl Policy) -> Result<(), String> {
        for t in 0..self.capacities.len() {
            let reported = policy.used(TierId(t as u8));
            if reported != self.used[t] {
                return Err(format!(
                    "tier {t}: policy reports {reported} used, shadow {}",
                    self.used[t]
                ));
            }
        }
        Ok(())
    }
}

/// Runs a policy over requests through the shadow; returns the number of hits or the first
/// broken rule with the request index.
pub fn check_stream(policy: &mut impl Policy, requests: &[Request]) -> Result<u64, String> {
    check_stream_with(policy, requests, |_| Ok(()))
}

/// As [`check_stream`], with a policy's own placement rule checked after every decision.
pub fn check_stream_with(
    policy: &mut impl Policy,
    requests: &[Request],
    rule: impl Fn(&Shadow) -> Result<(), String>,
) -> Result<u64, String> {
    let mut shadow = Shadow::for_policy(policy);
    let mut decision = Decision::new();
    let mut hits = 0;
    for (i, req) in requests.iter().enumerate() {
        decision.clear();
        policy.decide(req, &mut decision);
        hits += decision.hit.is_some() as u64;
        shadow.apply(req, &decision).map_err(|e| format!("request {i} ({req:?}): {e}"))?;
        shadow.check_accounting(policy).map_err(|e| format!("request {i}: {e}"))?;
        rule(&shadow).map_err(|e| format!("request {i} ({req:?}): {e}"))?;
    }
    Ok(hits)
}
