//! Entry point for the fuzz target of the policy and capacity parsers in `fuzz/` (cargo-fuzz),
//! here so that a regular test replays the committed corpus through the same code
//! (`tests/fuzz_corpus.rs`). Arbitrary bytes must never panic, abort or hang.

use tiercache_core::{parse_size, Capacity, Decision, DeviceProfile, Op, Request};

use crate::admission::AdmissionConfig;
use crate::hierarchy::Placement;
use crate::nhc::NhcConfig;
use crate::nvcache::NvcacheConfig;
use crate::policy::Policy;
use crate::registry::AnyPolicy;
use crate::registry::PolicyConfig;

/// The first byte picks the parser; the rest is its text. A policy that parses is built (with
/// the admission chain after a `|`, if any) and decides a few hundred requests.
pub fn specs(data: &[u8]) {
    let Some((&selector, text)) = data.split_first() else { return };
    let Ok(text) = std::str::from_utf8(text) else { return };
    match selector % 7 {
        0 => policy(text),
        1 => drop(AdmissionConfig::parse_chain(text)),
        2 => drop(NvcacheConfig::parse(text)),
        3 => drop(NhcConfig::parse(text)),
        4 => drop(Placement::parse(text)),
        5 => drop(parse_size(text)),
        _ => drop(DeviceProfile::from_toml(text)),
    }
}

/// A policy stack as an experiment file's `[cache]` table holds it (the TOML that `tiercache
/// run` reads); one that parses with modest capacities is built and decides a few hundred
/// requests.
pub fn stack(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(stack) = crate::stack::StackConfig::from_toml(text) else { return };
    if stack.needs_future() || stack.tiers.iter().any(|(_, c)| c.amount > 1 << 20) {
        return;
    }
    let Ok(mut policy) = stack.build() else { return };
    decide_some(&mut policy);
}

fn decide_some(policy: &mut AnyPolicy) {
    let mut decision = Decision::new();
    for i in 0..300u64 {
        let op = [Op::Read, Op::Write, Op::Lookup, Op::Delete][(i % 7 % 4) as usize];
        let request = Request::new(i * 1000, i * 7 % 23, 512 + (i % 5) as u32 * 1024, op);
        decision.clear();
        policy.decide(&request, &mut decision);
    }
}

fn policy(text: &str) {
    let (policy, admission) = text.split_once('|').unwrap_or((text, "always"));
    let (Ok(config), Ok(admission)) =
        (PolicyConfig::parse(policy), AdmissionConfig::parse_chain(admission))
    else {
        return;
    };
    if config.needs_future() {
        return;
    }
    for capacity in [Capacity::objects(8), Capacity::bytes(64 << 10)] {
        let Ok(mut policy) = AnyPolicy::from_config(&config, capacity, &admission, 7) else {
            continue;
        };
        decide_some(&mut policy);
    }
}
