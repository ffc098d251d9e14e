//! Hibachi's sequential list (Fan et al., "Hibachi: A Cooperative Hybrid Cache with NVRAM and
//! DRAM for Storage Arrays", MSST'17, section IV-E): the runs of consecutive dirty page numbers,
//! kept so the longest run can be found at once and flushed as one sequential write. An
//! ordered map holds each run by its first page and a hash map by its last; a priority queue
//! orders runs by length. Inserting a page merges it with the run ending just before it and
//! the run starting just after it; removing a page splits its run. Both cost O(log runs),
//! whatever the runs' lengths: a page's run is the one starting at or before it.
//!
//! Invariants: runs are disjoint and never adjacent (adjacent runs are merged); `pages` holds
//! exactly the pages of the runs.

use std::collections::{BTreeMap, BTreeSet};

use tiercache_core::{Key, KeyMap, KeySet};

#[derive(Default)]
pub struct SequentialList {
    /// First page -> last page, in page order, and last page -> first page.
    by_start: BTreeMap<Key, Key>,
    by_end: KeyMap<Key>,
    /// (length, first page), longest last.
    by_length: BTreeSet<(u64, Key)>,
    /// Every page of every run.
    pages: KeySet,
}

impl SequentialList {
    pub fn contains(&self, page: Key) -> bool {
        self.pages.contains(&page)
    }

    /// The first page of the run holding `page`, which must be listed.
    fn run_of(&self, page: Key) -> Key {
        let (&start, &end) = self.by_start.range(..=page).next_back().expect("a listed page");
        debug_assert!(end >= page, "page {page} outside its run {start}..={end}");
        start
    }

    pub fn runs(&self) -> usize {
        self.by_start.len()
    }

    /// The longest run, as (first page, last page); among equals, the one starting last.
    pub fn longest(&self) -> Option<(Key, Key)> {
        let &(_, start) = self.by_length.last()?;
        Some((start, self.by_start[&start]))
    }

    fn add_run(&mut self, start: Key, end: Key) {
        self.by_start.insert(start, end);
        self.by_end.insert(end, start);
        self.by_length.insert((end - start + 1, start));
    }

    fn drop_run(&mut self, start: Key) -> Key {
        let end = self.by_start.remove(&start).expect("a listed run");
        self.by_end.remove(&end);
        self.by_length.remove(&(end - start + 1, start));
        end
    }

    /// Adds a dirty page, merging it with its neighbours' runs.
    pub fn insert(&mut self, page: Key) {
        if !self.pages.insert(page) {
            return;
        }
        let mut start = page;
        let mut end = page;
        if let Some(&left) = page.checked_sub(1).and_then(|p| self.by_end.get(&p)) {
            self.drop_run(left);
            start = left;
        }
        if let Some(&right_end) = page.checked_add(1).and_then(|p| self.by_start.get(&p)) {
            self.drop_run(page + 1);
            end = right_end;
        }
        self.add_run(start, end);
    }

    /// Removes one page (evicted or written back), splitting its run.
    pub fn remove(&mut self, page: Key) {
        if !self.pages.remove(&page) {
            return;
        }
        let start = self.run_of(page);
        let end = self.drop_run(start);
        if start < page {
            self.add_run(start, page - 1);
        }
        if page < end {
            self.add_run(page + 1, end);
        }
    }

    /// Removes a whole run; returns its pages in order.
    pub fn take_run(&mut self, start: Key) -> Vec<Key> {
        let end = self.drop_run(start);
        for p in start..=end {
            self.pages.remove(&p);
        }
        (start..=end).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Runs of a set of pages, computed the plain way.
    fn runs_of(pages: &std::collections::BTreeSet<u64>) -> Vec<(u64, u64)> {
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for &p in pages {
            match runs.last_mut() {
                Some(run) if run.1 + 1 == p => run.1 = p,
                _ => runs.push((p, p)),
            }
        }
        runs
    }

    proptest! {
        #[test]
        fn agrees_with_sorting_the_pages(ops in prop::collection::vec((any::<bool>(), 0u64..60), 1..300)) {
            let mut list = SequentialList::default();
            let mut pages = std::collections::BTreeSet::new();
            for (insert, page) in ops {
                if insert {
                    list.insert(page);
                    pages.insert(page);
                } else {
                    list.remove(page);
                    pages.remove(&page);
                }
                let runs = runs_of(&pages);
                prop_assert_eq!(list.runs(), runs.len());
                let longest = runs.iter().map(|r| r.1 - r.0 + 1).max();
                prop_assert_eq!(list.longest().map(|(a, b)| b - a + 1), longest);
            }
        }
    }

    #[test]
    fn the_papers_example_run_3_to_6_plus_7_becomes_3_to_7() {
        let mut list = SequentialList::default();
        for page in [3, 4, 5, 6] {
            list.insert(page);
        }
        assert_eq!((list.runs(), list.longest()), (1, Some((3, 6))));
        list.insert(7);
        assert_eq!((list.runs(), list.longest()), (1, Some((3, 7))));
        assert_eq!(list.by_start[&3], 7);
        assert_eq!(list.by_end[&7], 3);
    }

    #[test]
    fn a_page_between_two_runs_joins_them_and_removal_splits() {
        let mut list = SequentialList::default();
        for page in [1, 2, 4, 5, 6, 20] {
            list.insert(page);
        }
        assert_eq!(list.runs(), 3);
        assert_eq!(list.longest(), Some((4, 6)));
        list.insert(3);
        assert_eq!((list.runs(), list.longest()), (2, Some((1, 6))));
        list.remove(4);
        // 1-3, 5-6 and 20 remain; the longest is 1-3.
        assert_eq!(list.runs(), 3);
        assert_eq!(list.longest(), Some((1, 3)));
        assert_eq!(list.take_run(1), vec![1, 2, 3]);
        assert!(!list.contains(2) && list.contains(5) && list.contains(20));
        assert_eq!(list.longest(), Some((5, 6)));
    }
}
