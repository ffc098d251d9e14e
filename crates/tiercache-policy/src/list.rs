//! Intrusive doubly linked lists in one arena of nodes, addressed by `u32` index: the recency
//! and FIFO queues of every list-based policy. Several lists (ARC's T1/T2/B1/B2, S3-FIFO's
//! small/main/ghost) share one arena, so moving a node between lists never allocates.
//!
//! Invariants: a node is in at most one list; `List::len` and `List::bytes` are the count and
//! the summed sizes of the nodes linked in it; freed nodes are reused before the arena grows.

const NIL: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
pub struct Node {
    pub key: u64,
    pub size: u32,
    /// Per-policy state: a frequency, a reference bit, a list tag.
    pub aux: u32,
    prev: u32,
    next: u32,
}

/// The ends and totals of one list. Head is the most recent insertion (MRU); tail the oldest.
#[derive(Clone, Copy, Debug)]
pub struct List {
    head: u32,
    tail: u32,
    pub len: u64,
    pub bytes: u64,
}

impl Default for List {
    fn default() -> List {
        List { head: NIL, tail: NIL, len: 0, bytes: 0 }
    }
}

impl List {
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The list's share of a capacity counted in `unit` (objects or bytes).
    #[inline]
    pub fn charge(&self, unit: tiercache_core::Unit) -> u64 {
        match unit {
            tiercache_core::Unit::Bytes => self.bytes,
            tiercache_core::Unit::Objects => self.len,
        }
    }
}

#[derive(Default)]
pub struct Arena {
    nodes: Vec<Node>,
    free: Vec<u32>,
}

impl Arena {
    pub fn with_capacity(nodes: usize) -> Arena {
        Arena { nodes: Vec::with_capacity(nodes), free: Vec::new() }
    }

    pub fn alloc(&mut self, key: u64, size: u32, aux: u32) -> u32 {
        let node = Node { key, size, aux, prev: NIL, next: NIL };
        if let Some(index) = self.free.pop() {
            self.nodes[index as usize] = node;
            index
        } else {
            assert!(self.nodes.len() < NIL as usize, "list arena is full");
            self.nodes.push(node);
            (self.nodes.len() - 1) as u32
        }
    }

    /// Returns a node (already unlinked) to the free list.
    pub fn release(&mut self, index: u32) {
        self.free.push(index);
    }

    #[inline]
    pub fn get(&self, index: u32) -> &Node {
        &self.nodes[index as usize]
    }

    #[inline]
    pub fn get_mut(&mut self, index: u32) -> &mut Node {
        &mut self.nodes[index as usize]
    }

    #[inline]
    pub fn push_front(&mut self, list: &mut List, index: u32) {
        let old_head = list.head;
        {
            let node = &mut self.nodes[index as usize];
            node.prev = NIL;
            node.next = old_head;
            list.bytes += node.size as u64;
        }
        if old_head != NIL {
            self.nodes[old_head as usize].prev = index;
        } else {
            list.tail = index;
        }
        list.head = index;
        list.len += 1;
    }

    #[inline]
    pub fn unlink(&mut self, list: &mut List, index: u32) {
        let (prev, next, size) = {
            let node = &self.nodes[index as usize];
            (node.prev, node.next, node.size)
        };
        if prev != NIL {
            self.nodes[prev as usize].next = next;
        } else {
            list.head = next;
        }
        if next != NIL {
            self.nodes[next as usize].prev = prev;
        } else {
            list.tail = prev;
        }
        list.len -= 1;
        list.bytes -= size as u64;
    }

    /// Gives a node in `list` a new size where it stands, keeping the list's byte total.
    pub fn resize(&mut self, list: &mut List, index: u32, size: u32) {
        let node = &mut self.nodes[index as usize];
        list.bytes = list.bytes - node.size as u64 + size as u64;
        node.size = size;
    }

    /// Moves a node already in `list` to its head.
    #[inline]
    pub fn move_to_front(&mut self, list: &mut List, index: u32) {
        if list.head != index {
            self.unlink(list, index);
            self.push_front(list, index);
        }
    }

    /// The oldest node of the list.
    #[inline]
    pub fn back(&self, list: &List) -> Option<u32> {
        (list.tail != NIL).then_some(list.tail)
    }

    /// For policies whose lists are indexed by a node's `aux`: moves `index` from the list its
    /// `aux` names to the head of `lists[to]`, and names that list in its `aux`.
    pub fn relink(&mut self, lists: &mut [List], index: u32, to: u32) {
        let from = self.nodes[index as usize].aux;
        self.unlink(&mut lists[from as usize], index);
        self.push_front(&mut lists[to as usize], index);
        self.nodes[index as usize].aux = to;
    }

    /// For policies whose lists are indexed by a node's `aux`: unlinks `index` from the list its
    /// `aux` names and frees it; returns the node as it was.
    pub fn take(&mut self, lists: &mut [List], index: u32) -> Node {
        let node = self.nodes[index as usize];
        self.unlink(&mut lists[node.aux as usize], index);
        self.release(index);
        node
    }

    /// The node one step newer than `index` (towards the head), `None` at the head: the way a
    /// hand walks a queue from its tail (SIEVE).
    #[inline]
    pub fn newer(&self, index: u32) -> Option<u32> {
        let prev = self.nodes[index as usize].prev;
        (prev != NIL).then_some(prev)
    }

    /// Unlinks the oldest node and returns its index (the caller releases or relinks it).
    #[inline]
    pub fn pop_back(&mut self, list: &mut List) -> Option<u32> {
        let tail = self.back(list)?;
        self.unlink(list, tail);
        Some(tail)
    }

    /// Nodes from head (newest) to tail, for inspection and tests.
    pub fn iter<'a>(&'a self, list: &List) -> impl Iterator<Item = &'a Node> + 'a {
        let mut at = list.head;
        std::iter::from_fn(move || {
            if at == NIL {
                return None;
            }
            let node = &self.nodes[at as usize];
            at = node.next;
            Some(node)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(arena: &Arena, list: &List) -> Vec<u64> {
        arena.iter(list).map(|n| n.key).collect()
    }

    #[test]
    fn push_move_pop_keep_order_and_totals() {
        let mut arena = Arena::default();
        let mut list = List::default();
        let a = arena.alloc(1, 10, 0);
        let b = arena.alloc(2, 20, 0);
        let c = arena.alloc(3, 30, 0);
        for i in [a, b, c] {
            arena.push_front(&mut list, i);
        }
        assert_eq!(keys(&arena, &list), vec![3, 2, 1]);
        arena.move_to_front(&mut list, a);
        assert_eq!(keys(&arena, &list), vec![1, 3, 2]);
        assert_eq!((list.len, list.bytes), (3, 60));
        let tail = arena.pop_back(&mut list).unwrap();
        assert_eq!(arena.get(tail).key, 2);
        arena.release(tail);
        assert_eq!((list.len, list.bytes), (2, 40));
        let d = arena.alloc(4, 5, 0);
        assert_eq!(d, tail, "freed nodes are reused");
    }

    #[test]
    fn nodes_move_between_lists() {
        let mut arena = Arena::default();
        let (mut one, mut two) = (List::default(), List::default());
        let a = arena.alloc(1, 7, 0);
        arena.push_front(&mut one, a);
        arena.unlink(&mut one, a);
        arena.push_front(&mut two, a);
        assert!(one.is_empty() && arena.back(&one).is_none());
        assert_eq!((two.len, two.bytes), (1, 7));
    }
}
