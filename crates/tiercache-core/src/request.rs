//! A request is one access to one key: the unit that every reader produces, every generator
//! emits, and every policy decides on.

use serde::{Deserialize, Serialize};

use crate::limits::{VOLUME_ADDRESS_BITS, VOLUME_BITS};

/// A cache key: an object id, or a block number in a block view.
pub type Key = u64;

/// `next_access` value of a request whose key is never requested again.
pub const NEVER: u64 = u64::MAX;

/// What the request does to its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Read,
    Write,
    /// The key's data is freed or trimmed; a cache must drop it (remove-on-free).
    Delete,
    /// A look-aside read (an engine's `get`): a hit is a read hit; a miss changes nothing and
    /// admits nothing, because the caller has no data yet. A caller that loads the data follows
    /// with a `Read`, which then decides exactly as a read-through `Read` would have.
    Lookup,
}

impl Op {
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Delete => "delete",
            Op::Lookup => "lookup",
        }
    }

    /// Parses the spellings traces use: `R`/`W`, `Read`/`Write`, SCSI opcodes, and the memcached
    /// commands of Twitter's traces (Yang et al., OSDI'20), as that paper counts reads and writes:
    /// `get` and `gets` read; `set`, `add`, `replace`, `cas`, `append`, `prepend`, `incr` and
    /// `decr` write; `delete` deletes.
    pub fn parse(text: &str) -> Option<Op> {
        let t = text.trim();
        let lower = t.to_ascii_lowercase();
        match lower.as_str() {
            "r" | "read" | "get" | "gets" | "0" | "rs" => Some(Op::Read),
            "w" | "write" | "set" | "put" | "update" | "1" | "ws" => Some(Op::Write),
            "add" | "replace" | "cas" | "append" | "prepend" | "incr" | "decr" => Some(Op::Write),
            "d" | "delete" | "del" | "trim" | "discard" | "remove" => Some(Op::Delete),
            "lookup" => Some(Op::Lookup),
            _ => scsi_opcode(&lower),
        }
    }
}

/// SCSI READ/WRITE opcodes (6, 10, 12 and 16 byte forms), as vscsi traces record them.
pub fn scsi_op(code: u16) -> Option<Op> {
    match code {
        0x08 | 0x28 | 0xa8 | 0x88 => Some(Op::Read),
        0x0a | 0x2a | 0xaa | 0x8a => Some(Op::Write),
        _ => None,
    }
}

fn scsi_opcode(text: &str) -> Option<Op> {
    let digits = text.strip_prefix("0x").unwrap_or(text);
    u16::from_str_radix(digits, 16).ok().and_then(scsi_op)
}

/// One access. `Copy` and 32 bytes so streams of millions stay cheap.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// Time of the request in microseconds since the trace's own epoch (0 when unknown).
    pub time_us: u64,
    pub key: Key,
    /// Bytes the request touches; the object's size for object traces.
    pub size: u32,
    pub op: Op,
    /// Index (0-based, in the stream) of the next request for the same key, or [`NEVER`].
    /// Only offline policies (Belady) read it; readers that cannot know it leave [`NEVER`].
    pub next_access: u64,
}

impl Request {
    pub fn new(time_us: u64, key: Key, size: u32, op: Op) -> Request {
        Request { time_us, key, size, op, next_access: NEVER }
    }

    pub fn read(key: Key, size: u32) -> Request {
        Request::new(0, key, size, Op::Read)
    }

    pub fn write(key: Key, size: u32) -> Request {
        Request::new(0, key, size, Op::Write)
    }
}

const _: () = assert!(std::mem::size_of::<Request>() <= 32);

/// The key of `address` on `volume` in a trace with a volume column: the volume in the top
/// [`VOLUME_BITS`] bits, the address below, so requests of two volumes never share a key and a
/// block view can split the address and keep the volume. `None` when either does not fit.
pub fn volume_key(volume: u64, address: u64) -> Option<Key> {
    let fits = volume < 1 << VOLUME_BITS && address < 1 << VOLUME_ADDRESS_BITS;
    fits.then_some(volume << VOLUME_ADDRESS_BITS | address)
}

/// The volume and the address of a key made by [`volume_key`].
pub fn split_volume_key(key: Key) -> (u64, u64) {
    (key >> VOLUME_ADDRESS_BITS, key & ((1 << VOLUME_ADDRESS_BITS) - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_trace_spellings() {
        assert_eq!(Op::parse("Read"), Some(Op::Read));
        assert_eq!(Op::parse(" W "), Some(Op::Write));
        assert_eq!(Op::parse("28"), Some(Op::Read));
        assert_eq!(Op::parse("2a"), Some(Op::Write));
        assert_eq!(Op::parse("0x2A"), Some(Op::Write));
        assert_eq!(Op::parse("trim"), Some(Op::Delete));
        assert_eq!(Op::parse("sync"), None);
        assert_eq!(Op::parse("35"), None);
        for write in ["set", "add", "replace", "cas", "append", "prepend", "incr", "decr"] {
            assert_eq!(Op::parse(write), Some(Op::Write), "{write}");
        }
        assert_eq!((Op::parse("gets"), Op::parse("delete")), (Some(Op::Read), Some(Op::Delete)));
    }

    #[test]
    fn volume_keys_keep_volumes_apart() {
        let key = volume_key(3, 12345).unwrap();
        assert_eq!(split_volume_key(key), (3, 12345));
        assert_ne!(volume_key(1, 7), volume_key(2, 7));
        let last = (1 << VOLUME_ADDRESS_BITS) - 1;
        assert_eq!(split_volume_key(volume_key((1 << VOLUME_BITS) - 1, last).unwrap()).1, last);
        assert_eq!(volume_key(1 << VOLUME_BITS, 0), None);
        assert_eq!(volume_key(0, 1 << VOLUME_ADDRESS_BITS), None);
    }
}

/// Sets every request's `next_access` to the index of the next request for the same key (or
/// [`NEVER`]), by one backward pass. Offline policies (Belady) need it.
pub fn annotate_next_access(requests: &mut [Request]) {
    let mut next_seen: crate::hash::KeyMap<u64> = crate::hash::KeyMap::default();
    for index in (0..requests.len()).rev() {
        let key = requests[index].key;
        requests[index].next_access = next_seen.insert(key, index as u64).unwrap_or(NEVER);
    }
}

#[cfg(test)]
mod annotate_tests {
    use super::*;

    #[test]
    fn next_access_points_forward() {
        let mut reqs: Vec<Request> = [5, 6, 5, 7, 6].iter().map(|k| Request::read(*k, 1)).collect();
        annotate_next_access(&mut reqs);
        let next: Vec<u64> = reqs.iter().map(|r| r.next_access).collect();
        assert_eq!(next, vec![2, 4, NEVER, NEVER, NEVER]);
    }
}
