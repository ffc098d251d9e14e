//! The implementation audit of Hibachi (Fan et al., MSST'17, section IV): each mechanism the
//! paper describes, replayed on a small sequence worked out by hand from its text, every
//! decision checked. The quotes are the paper's. Section IV-D's ghost increments are audited
//! beside the policy (`hibachi::tests::ghost_hits_move_the_desired_sizes_by_the_papers_increments`),
//! where the ghosts can be filled directly.

use tiercache_core::{Action, Capacity, Decision, Op, Request, TierId};
use tiercache_policy::hibachi::{Hibachi, HibachiConfig};
use tiercache_policy::seqlist::SequentialList;
use tiercache_policy::Policy;

const DRAM: TierId = TierId(0);
const NVRAM: TierId = TierId(1);

fn hibachi(dram: u64, nvram: u64) -> Hibachi {
    Hibachi::new(HibachiConfig::default(), [Capacity::objects(dram), Capacity::objects(nvram)])
}

fn run(h: &mut Hibachi, op: Op, key: u64) -> Vec<Action> {
    let mut d = Decision::new();
    h.decide(&Request::new(0, key, 1, op), &mut d);
    d.actions
}

fn write_back(key: u64) -> Action {
    Action::WriteBack { tier: NVRAM, key, size: 1 }
}

fn evict(tier: TierId, key: u64) -> Action {
    Action::Evict { tier, key, size: 1 }
}

/// IV-B, Right Prediction: "LFU-Aging reduces all frequency counts by half when the average of
/// all the frequency counters in the cache exceeds a given average frequency threshold ... 5.5",
/// the clean cache evicts its least frequent page, the dirty cache its least recently used.
#[test]
fn prediction_clean_pages_by_aged_frequency_dirty_pages_by_recency() {
    let mut h = hibachi(2, 2);
    run(&mut h, Op::Read, 1); // a read miss: count 1
    run(&mut h, Op::Read, 2);
    for _ in 0..5 {
        run(&mut h, Op::Read, 1); // count 6
    }
    for _ in 0..4 {
        run(&mut h, Op::Read, 2); // count 5: the average is 5.5, which does not exceed 5.5
    }
    assert_eq!((h.frequency(1), h.frequency(2)), (Some(6), Some(5)));
    run(&mut h, Op::Read, 2); // count 6: the average 6 exceeds it, and every count halves
    assert_eq!((h.frequency(1), h.frequency(2)), (Some(3), Some(3)));
    run(&mut h, Op::Read, 2); // 2 is now the more frequent
                              // A read miss with DRAM full and the clean side at its desired size: the least frequent
                              // clean page goes.
    let actions = run(&mut h, Op::Read, 3);
    assert_eq!(
        actions,
        [evict(DRAM, 1), Action::Insert { tier: DRAM, key: 3, size: 1, dirty: false }]
    );
    // The dirty cache is LRU: 10 written again is the most recent, so 11 is the victim,
    // whatever its count (a dirty victim no more frequent than DRAM's coldest clean page is
    // written back and evicted, IV-C).
    run(&mut h, Op::Write, 10);
    run(&mut h, Op::Write, 11);
    run(&mut h, Op::Write, 10);
    let actions = run(&mut h, Op::Write, 12);
    assert_eq!(
        actions,
        [
            write_back(11),
            evict(NVRAM, 11),
            Action::Insert { tier: NVRAM, key: 12, size: 1, dirty: true }
        ]
    );
}

/// IV-C, Right Reaction, and IV-F's three cases of a hit: "1) if it is a read hit on a clean
/// page or a dirty page, we increase its frequency counter; 2) if it is a write hit on a clean
/// page, we migrate the page to NVRAM and insert it to the MRU position; or 3) if it is a write
/// hit on a dirty page, we keep it in NVRAM and move it ... to the MRU position." And on
/// eviction: "If the dirty page's frequency is greater than the clean page's frequency, the
/// clean page is evicted instead of the dirty page, and the dirty page will be migrated to
/// DRAM. Otherwise, the dirty page is evicted from NVRAM. Before migrating ... or evicting a
/// dirty page, the page must be first synchronized to storage."
#[test]
fn reaction_read_hits_count_write_hits_move_and_a_hot_dirty_page_trades_places() {
    let mut h = hibachi(2, 2);
    run(&mut h, Op::Read, 1);
    run(&mut h, Op::Read, 2);
    // Case 2: a write hit on clean page 2 moves it to NVRAM, dirty.
    let actions = run(&mut h, Op::Write, 2);
    assert_eq!(
        actions,
        [
            Action::Move { key: 2, size: 1, from: DRAM, to: NVRAM },
            Action::Update { tier: NVRAM, key: 2, size: 1, dirty: true }
        ]
    );
    assert_eq!((h.peek(2), h.is_dirty(2)), (Some((NVRAM, 1)), Some(true)));
    run(&mut h, Op::Write, 3); // a write miss: dirty in NVRAM, count 0
                               // Case 1: read hits on the dirty page 3 raise its count; case 3: a write hit on the dirty
                               // page 2 does not, it only makes 2 the most recent.
    run(&mut h, Op::Read, 3);
    run(&mut h, Op::Read, 3);
    let before = h.frequency(2);
    assert_eq!(
        run(&mut h, Op::Write, 2),
        [Action::Update { tier: NVRAM, key: 2, size: 1, dirty: true }]
    );
    assert_eq!((h.frequency(3), h.frequency(2)), (Some(2), before));
    // NVRAM is full: the LRU dirty page is 3 (count 2), DRAM's least frequent clean page is 1
    // (count 1). 3 is hotter: 1 is evicted, 3 written back and migrated to DRAM, clean.
    let actions = run(&mut h, Op::Write, 4);
    assert_eq!(
        actions,
        [
            write_back(3),
            evict(DRAM, 1),
            Action::Move { key: 3, size: 1, from: NVRAM, to: DRAM },
            Action::Insert { tier: NVRAM, key: 4, size: 1, dirty: true },
        ]
    );
    assert_eq!(h.is_dirty(3), Some(false));
    // Now the LRU dirty page is 2 (count 0 or what it had), no more frequent than 3 (count 2):
    // 2 is written back and evicted.
    let actions = run(&mut h, Op::Write, 5);
    assert_eq!(actions[..2], [write_back(2), evict(NVRAM, 2)]);
}

/// IV-E, Right Transformation, the sequential list: "assuming a sequential list with page
/// numbers 3, 4, 5, and 6 ... When a new dirty page number 7 enters the dirty cache, Hibachi
/// consults two HashMaps ... it merges the new page number 7 with the existing sequential list
/// (3-6) into a larger sequential list (3-7)."
#[test]
fn transformation_merges_runs_as_the_papers_example() {
    let mut runs = SequentialList::default();
    for page in [3, 4, 5, 6] {
        runs.insert(page);
    }
    assert_eq!((runs.longest(), runs.runs()), (Some((3, 6)), 1));
    runs.insert(7);
    assert_eq!((runs.longest(), runs.runs()), (Some((3, 7)), 1));
    // A page with no neighbour starts its own list; one between two lists joins them.
    runs.insert(9);
    assert_eq!(runs.runs(), 2);
    runs.insert(8);
    assert_eq!((runs.longest(), runs.runs()), (Some((3, 9)), 1));
    // "For a dirty page synchronization ... the corresponding sequential list entry containing
    // the page(s) is deleted."
    assert_eq!(runs.take_run(3), (3..=9).collect::<Vec<_>>());
    assert_eq!(runs.runs(), 0);
}

/// IV-E and IV-F, the threshold: "If the length is above the threshold, Hibachi evicts a dirty
/// page with the least frequency among these consecutive dirty pages and migrates the remaining
/// pages to the clean cache. However, if the length is equal to or below the threshold,
/// Hibachi favors temporal locality more" (threshold 10).
#[test]
fn transformation_flushes_a_run_longer_than_ten_and_not_one_of_ten() {
    for (length, flushed) in [(11u64, true), (10, false)] {
        let mut h = hibachi(1, length + 1);
        for page in 100..100 + length {
            run(&mut h, Op::Write, page);
        }
        run(&mut h, Op::Write, 500); // not in the run; NVRAM is now full
        run(&mut h, Op::Read, 103); // the run's one page with a read hit
        let actions = run(&mut h, Op::Write, 600);
        let written: Vec<u64> = actions
            .iter()
            .filter_map(|a| match a {
                Action::WriteBack { key, .. } => Some(*key),
                _ => None,
            })
            .collect();
        if flushed {
            // The whole run is synchronized; its least frequent page (count 0, the lowest
            // number among equals) is evicted; the rest stay, clean, in NVRAM.
            assert_eq!(written, (100..111).collect::<Vec<_>>());
            assert!(actions.contains(&evict(NVRAM, 100)));
            assert!(
                (101..111).all(|p| h.is_dirty(p) == Some(false) && h.peek(p) == Some((NVRAM, 1)))
            );
            assert_eq!(h.is_dirty(500), Some(true), "the page outside the run stays dirty");
            assert_eq!(h.flushed_runs, [11]);
        } else {
            // The LRU dirty page alone: DRAM holds no clean page to compare it with, so it is
            // written back and evicted.
            assert_eq!(written, [100]);
            assert!(actions.contains(&evict(NVRAM, 100)));
            assert!(h.flushed_runs.is_empty());
        }
    }
}

/// IV-E: "evict the least frequent page, and migrate the rest of the pages to the LRU end of the
/// clean cache." The clean cache orders pages by frequency, then recency. Page 51, read once
/// before the run is flushed, and the run's page 103, read once while dirty, are equally
/// frequent: at the LRU end, 103 is evicted before 51, which is older; at the MRU end it would
/// be after both 51 and 50 (read again after 51). The run's pages never read go first, lowest
/// number first among equals.
#[test]
fn transformation_puts_a_flushed_runs_pages_at_the_lru_end_of_the_clean_cache() {
    let mut h = hibachi(1, 13);
    // 51 pushes 50 out of DRAM into the clean ghost; 50 read again is a ghost hit, which lets
    // the clean cache borrow NVRAM for it (IV-D).
    for page in [50, 51, 50] {
        run(&mut h, Op::Read, page);
    }
    assert_eq!((h.peek(51), h.peek(50)), (Some((DRAM, 1)), Some((NVRAM, 1))));
    for page in 100..111 {
        run(&mut h, Op::Write, page);
    }
    run(&mut h, Op::Write, 500); // NVRAM full
    run(&mut h, Op::Read, 103);
    let actions = run(&mut h, Op::Read, 700);
    assert!(actions.contains(&evict(NVRAM, 100)), "the run flushed: {actions:?}");
    let mut victims = Vec::new();
    for page in 701.. {
        for action in run(&mut h, Op::Read, page) {
            if let Action::Evict { key, .. } = action {
                victims.push(key);
            }
        }
        if victims.len() >= 11 {
            break;
        }
    }
    let expected: Vec<u64> = [101, 102].into_iter().chain(104..111).chain([103, 51]).collect();
    assert_eq!(victims, expected);
    assert_eq!(h.peek(50), Some((NVRAM, 1)), "50, newer than 51, stays");
}
