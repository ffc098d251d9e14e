//! A request is one access to one key: the unit that every reader produces, every generator
//! emits, and every policy decides on.

use serde::{Deserialize, Serialize};

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

    /// Parses the spellings traces use: `R`/`W`, `Read`/`Write`, `get`/`set`, SCSI opcodes.
    pub fn parse(text: &str) -> Option<Op> {
        let t = text.trim();
        let lower = t.to_ascii_lowercase();
        match lower.as_str() {
            "r" | "read" | "get" | "gets" | "0" | "rs" => Some(Op::Read),
            "w" | "write" | "set" | "put" | "update" | "1" | "ws" => Some(Op::Write),
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
