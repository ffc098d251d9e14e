//! The Network Block Device protocol, as the server side speaks it (the NBD project's
//! `doc/proto.md`): the fixed newstyle handshake with its options, and the transmission
//! phase's requests and simple replies. Parsing is pure (bytes in, values or a typed refusal
//! out), so the parsers can be fuzzed; the I/O is in `serve`.

/// The server's first eight bytes, "NBDMAGIC".
pub const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
/// "IHAVEOPT": newstyle negotiation, and the start of every option the client sends.
pub const IHAVEOPT: u64 = 0x4948_4156_454F_5054;
/// Every option reply starts with it.
pub const REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;

// Handshake flags (server) and client flags.
pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
pub const FLAG_NO_ZEROES: u16 = 1 << 1;
pub const CLIENT_FIXED_NEWSTYLE: u32 = 1 << 0;
pub const CLIENT_NO_ZEROES: u32 = 1 << 1;

// Transmission flags.
pub const TX_HAS_FLAGS: u16 = 1 << 0;
pub const TX_SEND_FLUSH: u16 = 1 << 2;
pub const TX_SEND_FUA: u16 = 1 << 3;
pub const TX_SEND_TRIM: u16 = 1 << 5;
pub const TX_SEND_WRITE_ZEROES: u16 = 1 << 6;
pub const TX_CAN_MULTI_CONN: u16 = 1 << 8;

// Options.
pub const OPT_EXPORT_NAME: u32 = 1;
pub const OPT_ABORT: u32 = 2;
pub const OPT_LIST: u32 = 3;
pub const OPT_INFO: u32 = 6;
pub const OPT_GO: u32 = 7;

// Option replies.
pub const REP_ACK: u32 = 1;
pub const REP_SERVER: u32 = 2;
pub const REP_INFO: u32 = 3;
pub const REP_ERR_UNSUP: u32 = (1 << 31) + 1;
pub const REP_ERR_INVALID: u32 = (1 << 31) + 3;
pub const REP_ERR_UNKNOWN: u32 = (1 << 31) + 6;
pub const INFO_EXPORT: u16 = 0;
pub const INFO_BLOCK_SIZE: u16 = 3;

// Commands and their flag.
pub const CMD_READ: u16 = 0;
pub const CMD_WRITE: u16 = 1;
pub const CMD_DISC: u16 = 2;
pub const CMD_FLUSH: u16 = 3;
pub const CMD_TRIM: u16 = 4;
pub const CMD_WRITE_ZEROES: u16 = 6;
pub const CMD_FLAG_FUA: u16 = 1 << 0;

// Errors of replies (Linux errno values, as the protocol fixes them).
pub const EIO: u32 = 5;
pub const EINVAL: u32 = 22;
pub const EOVERFLOW: u32 = 75;

/// The longest option a client may send (an export name and info requests fit easily).
pub const OPTION_MAX: u32 = 64 << 10;
/// The largest request payload served; larger requests get EOVERFLOW.
pub const PAYLOAD_MAX: u32 = 32 << 20;

/// A request of the transmission phase: 28 bytes on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    pub flags: u16,
    pub kind: u16,
    pub cookie: u64,
    pub offset: u64,
    pub length: u32,
}

/// Why a request header was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum BadRequest {
    /// Not the request magic: the stream is out of step, and the connection must close.
    Magic(u32),
}

impl Request {
    pub const BYTES: usize = 28;

    pub fn parse(b: &[u8; Request::BYTES]) -> Result<Request, BadRequest> {
        let magic = u32::from_be_bytes(b[0..4].try_into().expect("4 bytes"));
        if magic != REQUEST_MAGIC {
            return Err(BadRequest::Magic(magic));
        }
        Ok(Request {
            flags: u16::from_be_bytes(b[4..6].try_into().expect("2 bytes")),
            kind: u16::from_be_bytes(b[6..8].try_into().expect("2 bytes")),
            cookie: u64::from_be_bytes(b[8..16].try_into().expect("8 bytes")),
            offset: u64::from_be_bytes(b[16..24].try_into().expect("8 bytes")),
            length: u32::from_be_bytes(b[24..28].try_into().expect("4 bytes")),
        })
    }

    /// Bytes of buffer serving the request takes: a write's payload, a read's data (capped at
    /// what is served; larger ones are refused).
    pub fn charge(&self) -> u64 {
        match self.kind {
            CMD_READ | CMD_WRITE => self.length.min(PAYLOAD_MAX) as u64,
            _ => 0,
        }
    }

    /// Whether the request carries a payload the server must read (a write).
    pub fn has_payload(&self) -> bool {
        self.kind == CMD_WRITE
    }

    /// The error a request over an export of `size` bytes gets before it is served, if any:
    /// a range past the end, a payload over the maximum, an unknown command.
    pub fn check(&self, size: u64) -> Option<u32> {
        match self.kind {
            CMD_READ | CMD_WRITE | CMD_TRIM | CMD_WRITE_ZEROES => {
                if matches!(self.kind, CMD_READ | CMD_WRITE) && self.length > PAYLOAD_MAX {
                    return Some(EOVERFLOW);
                }
                let end = self.offset.checked_add(self.length as u64);
                if end.is_none_or(|end| end > size) {
                    return Some(EINVAL);
                }
                None
            }
            CMD_FLUSH | CMD_DISC => None,
            _ => Some(EINVAL),
        }
    }
}

/// A simple reply's header: magic, error, cookie.
pub fn simple_reply(error: u32, cookie: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[0..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
    b[4..8].copy_from_slice(&error.to_be_bytes());
    b[8..16].copy_from_slice(&cookie.to_be_bytes());
    b
}

/// An option reply: header and data.
pub fn option_reply(option: u32, kind: u32, data: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(20 + data.len());
    b.extend_from_slice(&REPLY_MAGIC.to_be_bytes());
    b.extend_from_slice(&option.to_be_bytes());
    b.extend_from_slice(&kind.to_be_bytes());
    b.extend_from_slice(&(data.len() as u32).to_be_bytes());
    b.extend_from_slice(data);
    b
}

/// The export information NBD_OPT_INFO and NBD_OPT_GO reply with.
pub fn info_export(size: u64, flags: u16) -> Vec<u8> {
    let mut b = Vec::with_capacity(12);
    b.extend_from_slice(&INFO_EXPORT.to_be_bytes());
    b.extend_from_slice(&size.to_be_bytes());
    b.extend_from_slice(&flags.to_be_bytes());
    b
}

/// The block sizes: minimum 1 (any byte range works), preferred the cache's block, maximum
/// the largest payload.
pub fn info_block_size(preferred: u32) -> Vec<u8> {
    let mut b = Vec::with_capacity(14);
    b.extend_from_slice(&INFO_BLOCK_SIZE.to_be_bytes());
    b.extend_from_slice(&1u32.to_be_bytes());
    b.extend_from_slice(&preferred.to_be_bytes());
    b.extend_from_slice(&PAYLOAD_MAX.to_be_bytes());
    b
}

/// The export name of an NBD_OPT_INFO or NBD_OPT_GO option's data: a 32-bit length, the name,
/// then the info requests (a 16-bit count and the types), which are only checked for length.
pub fn go_export_name(data: &[u8]) -> Option<&str> {
    let len = u32::from_be_bytes(data.get(0..4)?.try_into().ok()?) as usize;
    let name = data.get(4..4 + len)?;
    let count = u16::from_be_bytes(data.get(4 + len..6 + len)?.try_into().ok()?) as usize;
    if data.len() != 6 + len + 2 * count {
        return None;
    }
    std::str::from_utf8(name).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(kind: u16, offset: u64, length: u32) -> [u8; Request::BYTES] {
        let mut b = [0u8; Request::BYTES];
        b[0..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
        b[6..8].copy_from_slice(&kind.to_be_bytes());
        b[8..16].copy_from_slice(&7u64.to_be_bytes());
        b[16..24].copy_from_slice(&offset.to_be_bytes());
        b[24..28].copy_from_slice(&length.to_be_bytes());
        b
    }

    #[test]
    fn requests_parse_and_out_of_range_ones_are_refused() {
        let r = Request::parse(&header(CMD_READ, 4096, 512)).unwrap();
        assert_eq!((r.kind, r.cookie, r.offset, r.length), (CMD_READ, 7, 4096, 512));
        assert_eq!(r.check(8192), None);
        assert_eq!(r.check(4096), Some(EINVAL), "past the end");
        let huge = Request::parse(&header(CMD_WRITE, 0, PAYLOAD_MAX + 1)).unwrap();
        assert_eq!(huge.check(u64::MAX), Some(EOVERFLOW));
        let wrap = Request::parse(&header(CMD_TRIM, u64::MAX - 1, 4)).unwrap();
        assert_eq!(wrap.check(u64::MAX), Some(EINVAL), "offset + length wraps");
        assert_eq!(Request::parse(&header(99, 0, 0)).unwrap().check(1), Some(EINVAL));
        let mut bad = header(CMD_READ, 0, 1);
        bad[0] = 0;
        assert!(matches!(Request::parse(&bad), Err(BadRequest::Magic(_))));
    }

    #[test]
    fn go_options_name_their_export() {
        let mut data = Vec::new();
        data.extend_from_slice(&3u32.to_be_bytes());
        data.extend_from_slice(b"abc");
        data.extend_from_slice(&1u16.to_be_bytes());
        data.extend_from_slice(&INFO_BLOCK_SIZE.to_be_bytes());
        assert_eq!(go_export_name(&data), Some("abc"));
        assert_eq!(go_export_name(&data[..data.len() - 1]), None, "short");
        assert_eq!(go_export_name(&[0, 0, 0, 9]), None, "a name longer than the option");
    }
}
