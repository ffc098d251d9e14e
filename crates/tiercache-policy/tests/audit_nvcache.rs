//! The implementation audit of NVCache's admission (Fedorova et al., "Writes Hurt", SoCC'22,
//! section 3.2): small-bypass and the overhead-bypass ratio, each replayed on a sequence worked
//! out by hand from the paper's text, every decision checked. The quotes are the paper's.

use tiercache_core::{Action, Capacity, Decision, Op, RejectReason, Request};
use tiercache_policy::nvcache::NvcacheConfig;
use tiercache_policy::{AnyPolicy, Policy, PolicyConfig};

const BLOCK: u32 = 4096;

fn nvcache(config: &str) -> AnyPolicy {
    let lru = AnyPolicy::from_config(&PolicyConfig::Lru, Capacity::objects(100), &[], 0).unwrap();
    lru.with_nvcache(NvcacheConfig::parse(config).unwrap())
}

fn run(p: &mut AnyPolicy, op: Op, key: u64) -> Decision {
    let mut d = Decision::new();
    p.decide(&Request::new(0, key, BLOCK, op), &mut d);
    d
}

/// Whether the read of `key` was admitted, or why not.
fn admitted(d: &Decision) -> Result<(), RejectReason> {
    for action in &d.actions {
        match action {
            Action::Insert { .. } => return Ok(()),
            Action::Reject { reason, .. } => return Err(*reason),
            _ => {}
        }
    }
    panic!("neither admitted nor refused: {d:?}")
}

/// "Bypass NVCache for datasets fitting into DRAM ... abstain from admitting any blocks until
/// the dataset size outgrows the available DRAM." DRAM of four blocks: the first four distinct
/// blocks are refused, however often read; the fifth makes the dataset outgrow DRAM, and from
/// then on misses are admitted.
#[test]
fn small_bypass_admits_nothing_until_the_dataset_outgrows_dram() {
    let mut p = nvcache(&format!("alloc-read-write,small-bypass={}", 4 * BLOCK));
    for key in [1, 2, 3, 4, 1, 2] {
        assert_eq!(admitted(&run(&mut p, Op::Read, key)), Err(RejectReason::SmallDataset));
    }
    assert_eq!(admitted(&run(&mut p, Op::Read, 5)), Ok(()), "five blocks outgrow four");
    assert_eq!(admitted(&run(&mut p, Op::Read, 1)), Ok(()), "and older blocks are admitted too");
    assert!(run(&mut p, Op::Read, 5).hit.is_some());
}

/// "OBP = (blocks_inserted + blocks_removed) / blocks_looked_up ... NVCache continuously updates
/// OBP and abstains from admitting or evicting cache blocks if OBP exceeds its target (10%)."
/// Worked by hand, every lookup counted before its admission is decided:
///
/// | read of | lookups | inserted + removed before | OBP | decision |
/// |---|---|---|---|---|
/// | 1 | 1 | 0 | 0 | admitted (OBP becomes 1/1) |
/// | 2 to 9 | 2 to 9 | 1 | 1/2 to 1/9 | refused: over 10% |
/// | 10 | 10 | 1 | 1/10 | admitted: 10% does not exceed 10% |
/// | 11 | 11 | 2 | 2/11 | refused |
///
/// Then a write to block 1 frees its old copy (remove-on-free), a removal that counts.
#[test]
fn obp_admits_while_writes_stay_within_a_tenth_of_lookups() {
    let mut p = nvcache("obp:0.1");
    assert_eq!(admitted(&run(&mut p, Op::Read, 1)), Ok(()));
    for key in 2..=9 {
        assert_eq!(admitted(&run(&mut p, Op::Read, key)), Err(RejectReason::Throttled), "{key}");
    }
    assert_eq!(admitted(&run(&mut p, Op::Read, 10)), Ok(()));
    assert_eq!(admitted(&run(&mut p, Op::Read, 11)), Err(RejectReason::Throttled));
    assert_eq!(obp(&p), 2.0 / 11.0);
    // Hits are lookups too, and admit nothing: 19 of them bring OBP to 2/30.
    for _ in 0..19 {
        assert!(run(&mut p, Op::Read, 1).hit.is_some());
    }
    assert_eq!(obp(&p), 2.0 / 30.0);
    // Remove-on-free: the write makes the cached block 1 stale, and it is invalidated.
    let d = run(&mut p, Op::Write, 1);
    assert!(matches!(d.actions[..], [Action::Invalidate { key: 1, .. }]), "{d:?}");
    assert_eq!(obp(&p), 3.0 / 30.0);
    assert_eq!(admitted(&run(&mut p, Op::Read, 12)), Ok(()), "3/31 is within 10%");
}

fn obp(p: &AnyPolicy) -> f64 {
    p.knobs().iter().find(|(name, _)| *name == "obp").expect("NVCache reports its OBP").1
}

/// Table 1's "no eviction" over LFRU (section 3.2.2): "once the cache is full, NVCache stops
/// admitting new blocks" and nothing is evicted, so LFRU's periodic sweep, which is how it
/// evicts, must not run either. Four slots, a sweep every 100 us sparing nothing older than
/// 50 us: eager eviction's sweeps evict the idle blocks and admit new ones; without eviction
/// the first four blocks stay and the rest are refused for want of space.
#[test]
fn no_eviction_stops_lfrus_sweep() {
    let lfru = PolicyConfig::parse("lfru:sweep_interval_us=100,window_us=50").unwrap();
    let run_for = |config: &str| {
        let base = AnyPolicy::from_config(&lfru, Capacity::objects(4), &[], 0).unwrap();
        let mut p = base.with_nvcache(NvcacheConfig::parse(config).unwrap());
        let (mut evicted, mut admitted, mut no_space) = (0, 0, 0);
        for (i, key) in (0..40u64).enumerate() {
            let mut d = Decision::new();
            p.decide(&Request::new(i as u64 * 30, key, BLOCK, Op::Read), &mut d);
            for action in &d.actions {
                match action {
                    Action::Evict { .. } => evicted += 1,
                    Action::Insert { .. } => admitted += 1,
                    Action::Reject { reason: RejectReason::NoSpace, .. } => no_space += 1,
                    _ => {}
                }
            }
        }
        (evicted, admitted, no_space)
    };
    let (evicted, admitted, _) = run_for("no-write-allocate");
    assert!(evicted > 0 && admitted > 4, "eager: {evicted} evicted, {admitted} admitted");
    assert_eq!(run_for("no-write-allocate,no-eviction"), (0, 4, 36));
}

/// "NVCache continuously updates OBP and abstains from admitting or evicting cache blocks if
/// OBP exceeds its target": over LFRU, whose periodic sweep evicts of its own accord, no
/// sweep runs while OBP is over target, and every eviction a sweep makes counts in OBP as a
/// removal (the ratio is always the writes seen over the lookups). Eight slots, a sweep every
/// 100 us sparing nothing younger than 50 us, reads of 40 blocks, one every 10 us.
#[test]
fn obp_abstaining_holds_lfrus_sweeps_and_counts_what_they_evict() {
    let lfru = PolicyConfig::parse("lfru:sweep_interval_us=100,window_us=50").unwrap();
    let base = AnyPolicy::from_config(&lfru, Capacity::objects(8), &[], 0).unwrap();
    let mut p = base.with_nvcache(NvcacheConfig::parse("obp:0.1").unwrap());
    let (mut writes, mut held, mut swept) = (0u64, 0, 0);
    for i in 0..2000u64 {
        let abstaining = i > 0 && obp(&p) > 0.1;
        let mut d = Decision::new();
        p.decide(&Request::new(i * 10, (i * 7) % 40, BLOCK, Op::Read), &mut d);
        let evicted = d.actions.iter().filter(|a| matches!(a, Action::Evict { .. })).count();
        let inserted = d.actions.iter().filter(|a| matches!(a, Action::Insert { .. })).count();
        assert!(!(abstaining && evicted > 0), "request {i}: evicted while abstaining: {d:?}");
        held += abstaining as u64;
        swept += evicted as u64;
        writes += (evicted + inserted) as u64;
        let counted = obp(&p) * (i + 1) as f64;
        assert!((counted - writes as f64).abs() < 1e-6, "request {i}: {counted} {writes}");
    }
    assert!(held > 20 && swept > 20, "abstained {held} times, swept {swept} blocks");
}
