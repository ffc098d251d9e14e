//! The Network Block Device protocol, as the server side speaks it (the NBD project's
//! `doc/proto.md`): the fixed newstyle handshake with its options, and the transmission
//! phase's requests and replies, simple and structured (with the `base:allocation` metadata
//! context, which `NBD_CMD_BLOCK_STATUS` answers), for `tiercache serve`. Parsing is pure (bytes in,
//! values or a typed refusal out) and the handshake runs over any reader and writer, so both
//! are fuzzed (`fuzz/fuzz_targets/nbd.rs`); serving the requests is the server's.

use std::io::{self, Read, Write};

/// The server's first eight bytes, "NBDMAGIC".
pub const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
/// "IHAVEOPT": newstyle negotiation, and the start of every option the client sends.
pub const IHAVEOPT: u64 = 0x4948_4156_454F_5054;
/// Every option reply starts with it.
pub const REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
pub const STRUCTURED_REPLY_MAGIC: u32 = 0x668e_33ef;

// Handshake flags (server) and client flags.
pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
pub const FLAG_NO_ZEROES: u16 = 1 << 1;
pub const CLIENT_FIXED_NEWSTYLE: u32 = 1 << 0;
pub const CLIENT_NO_ZEROES: u32 = 1 << 1;

// Transmission flags.
pub const TX_HAS_FLAGS: u16 = 1 << 0;
pub const TX_READ_ONLY: u16 = 1 << 1;
pub const TX_SEND_FLUSH: u16 = 1 << 2;
pub const TX_SEND_FUA: u16 = 1 << 3;
pub const TX_SEND_TRIM: u16 = 1 << 5;
pub const TX_SEND_WRITE_ZEROES: u16 = 1 << 6;
pub const TX_SEND_DF: u16 = 1 << 7;
pub const TX_CAN_MULTI_CONN: u16 = 1 << 8;
pub const TX_SEND_CACHE: u16 = 1 << 10;
pub const TX_SEND_FAST_ZERO: u16 = 1 << 11;

// Options.
pub const OPT_EXPORT_NAME: u32 = 1;
pub const OPT_ABORT: u32 = 2;
pub const OPT_LIST: u32 = 3;
pub const OPT_STARTTLS: u32 = 5;
pub const OPT_INFO: u32 = 6;
pub const OPT_GO: u32 = 7;
pub const OPT_STRUCTURED_REPLY: u32 = 8;
pub const OPT_LIST_META_CONTEXT: u32 = 9;
pub const OPT_SET_META_CONTEXT: u32 = 10;
/// An extension this server does not offer; named only in its log.
pub const OPT_EXTENDED_HEADERS: u32 = 11;

// Option replies.
pub const REP_ACK: u32 = 1;
pub const REP_SERVER: u32 = 2;
pub const REP_INFO: u32 = 3;
pub const REP_META_CONTEXT: u32 = 4;
pub const REP_ERR_UNSUP: u32 = (1 << 31) + 1;
pub const REP_ERR_INVALID: u32 = (1 << 31) + 3;
pub const REP_ERR_TLS_REQD: u32 = (1 << 31) + 5;
pub const REP_ERR_UNKNOWN: u32 = (1 << 31) + 6;
pub const INFO_EXPORT: u16 = 0;
pub const INFO_BLOCK_SIZE: u16 = 3;

// Commands and their flag.
pub const CMD_READ: u16 = 0;
pub const CMD_WRITE: u16 = 1;
pub const CMD_DISC: u16 = 2;
pub const CMD_FLUSH: u16 = 3;
pub const CMD_TRIM: u16 = 4;
pub const CMD_CACHE: u16 = 5;
pub const CMD_WRITE_ZEROES: u16 = 6;
pub const CMD_BLOCK_STATUS: u16 = 7;
pub const CMD_FLAG_FUA: u16 = 1 << 0;
/// WRITE_ZEROES: write the zeros, punch no hole.
pub const CMD_FLAG_NO_HOLE: u16 = 1 << 1;
/// READ: the data in one chunk (every read's is).
pub const CMD_FLAG_DF: u16 = 1 << 2;
/// BLOCK_STATUS: one extent only.
pub const CMD_FLAG_REQ_ONE: u16 = 1 << 3;
/// WRITE_ZEROES: fail at once (ENOTSUP) unless zeroing is faster than writing zeros.
pub const CMD_FLAG_FAST_ZERO: u16 = 1 << 4;

// Structured replies: the flag of a reply's last chunk, and the chunks' types.
pub const REPLY_FLAG_DONE: u16 = 1 << 0;
pub const REPLY_TYPE_NONE: u16 = 0;
pub const REPLY_TYPE_OFFSET_DATA: u16 = 1;
pub const REPLY_TYPE_BLOCK_STATUS: u16 = 5;
pub const REPLY_TYPE_ERROR: u16 = (1 << 15) + 1;

/// The one metadata context served, and its id; its extents' flags.
pub const BASE_ALLOCATION: &str = "base:allocation";
pub const ALLOCATION_ID: u32 = 1;
pub const STATE_HOLE: u32 = 1 << 0;
pub const STATE_ZERO: u32 = 1 << 1;

// Errors of replies (Linux errno values, as the protocol fixes them).
pub const EPERM: u32 = 1;
pub const EIO: u32 = 5;
pub const EINVAL: u32 = 22;
pub const EOVERFLOW: u32 = 75;
pub const ENOTSUP: u32 = 95;

/// The name of the export of `--backing`.
pub const EXPORT: &str = "tiercache";

/// The longest option a client may send (an export name and info requests fit easily).
pub const OPTION_MAX: u32 = 64 << 10;
/// The largest request payload served; larger requests get EOVERFLOW.
pub const PAYLOAD_MAX: u32 = 32 << 20;
/// The most extents one BLOCK_STATUS reply carries (8 bytes each); the client asks again
/// from where they end.
pub const EXTENTS_MAX: usize = 1024;
/// The longest string of the protocol (an export name, a metadata context query).
pub const STRING_MAX: usize = 4096;

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
            CMD_BLOCK_STATUS => 8 * EXTENTS_MAX as u64 + 4,
            // Read through the cache a chunk at a time.
            CMD_CACHE => self.length.min(1 << 20) as u64,
            _ => 0,
        }
    }

    /// Whether the request carries a payload the server must read (a write).
    pub fn has_payload(&self) -> bool {
        self.kind == CMD_WRITE
    }

    /// The error a request over an export of `size` bytes gets before it is served, if any,
    /// on a connection that negotiated `session`: a range past the end, a payload over the
    /// maximum, an unknown command, a flag the command does not take (FUA on any; NO_HOLE and
    /// FAST_ZERO on WRITE_ZEROES; DF on READ and REQ_ONE on BLOCK_STATUS with structured
    /// replies), BLOCK_STATUS without a metadata context selected.
    pub fn check(&self, size: u64, session: &Session) -> Option<u32> {
        let allowed = CMD_FLAG_FUA
            | match self.kind {
                CMD_WRITE_ZEROES => CMD_FLAG_NO_HOLE | CMD_FLAG_FAST_ZERO,
                CMD_READ if session.structured => CMD_FLAG_DF,
                CMD_BLOCK_STATUS => CMD_FLAG_REQ_ONE,
                _ => 0,
            };
        if self.flags & !allowed != 0 {
            return Some(EINVAL);
        }
        match self.kind {
            CMD_BLOCK_STATUS if !session.allocation => Some(EINVAL),
            CMD_BLOCK_STATUS | CMD_CACHE if self.length == 0 => Some(EINVAL),
            CMD_READ | CMD_WRITE | CMD_TRIM | CMD_WRITE_ZEROES | CMD_CACHE | CMD_BLOCK_STATUS => {
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

/// A structured reply chunk's header: magic, flags, type, cookie, the payload's length.
pub fn chunk(flags: u16, kind: u16, cookie: u64, length: u32) -> [u8; 20] {
    let mut b = [0u8; 20];
    b[0..4].copy_from_slice(&STRUCTURED_REPLY_MAGIC.to_be_bytes());
    b[4..6].copy_from_slice(&flags.to_be_bytes());
    b[6..8].copy_from_slice(&kind.to_be_bytes());
    b[8..16].copy_from_slice(&cookie.to_be_bytes());
    b[16..20].copy_from_slice(&length.to_be_bytes());
    b
}

/// An error chunk, the last of its reply: the error and a message for people.
pub fn error_chunk(error: u32, cookie: u64, message: &str) -> Vec<u8> {
    let message = &message.as_bytes()[..message.len().min(STRING_MAX)];
    let mut b = chunk(REPLY_FLAG_DONE, REPLY_TYPE_ERROR, cookie, 6 + message.len() as u32).to_vec();
    b.extend_from_slice(&error.to_be_bytes());
    b.extend_from_slice(&(message.len() as u16).to_be_bytes());
    b.extend_from_slice(message);
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

/// Where a connection stands with TLS during the handshake.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tls {
    /// The server has no TLS: STARTTLS is refused as unsupported.
    Off,
    /// The server requires TLS and the connection has not started it: only STARTTLS and ABORT
    /// are taken; every other option is refused with `NBD_REP_ERR_TLS_REQD`, and EXPORT_NAME
    /// (which has no error reply) closes the connection.
    Required,
    /// The options now arrive over TLS: a second STARTTLS is invalid.
    On,
}

/// How a handshake, or its options, ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handshake {
    /// The client moved on to the transmission phase.
    Transmission,
    /// The client aborted, or sent something this server does not take (logged).
    Closed,
    /// The client asked for TLS and was acknowledged: the caller runs the TLS handshake on the
    /// connection and then [`options`] again over it, with [`Tls::On`].
    StartTls,
}

/// An export a handshake offers, by name.
#[derive(Clone, Debug)]
pub struct Export {
    pub name: String,
    pub offer: Offer,
}

/// What a handshake offers of an export: its size, preferred block, and whether it is
/// read-only.
#[derive(Clone, Copy, Debug)]
pub struct Offer {
    pub size: u64,
    pub block: u32,
    pub read_only: bool,
}

/// What a client negotiated in its handshake, for the transmission phase.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Session {
    /// No 124 zero bytes after EXPORT_NAME's reply.
    pub no_zeroes: bool,
    /// Structured replies (NBD_OPT_STRUCTURED_REPLY): reads are answered in chunks, and
    /// metadata contexts may be selected.
    pub structured: bool,
    /// The export the client went on with: its index among those offered.
    pub export: usize,
    /// `base:allocation` selected for the export the client went on with: BLOCK_STATUS works.
    pub allocation: bool,
    /// The export `base:allocation` was selected for (SET_META_CONTEXT names one).
    allocation_for: Option<usize>,
}

/// The fixed newstyle handshake, server side: the greeting, then the options ([`options`]),
/// offering `exports` by name; the empty name (what `nbd+unix:///` asks for) is the first.
/// Returns how it ended and what the client negotiated (which options after a STARTTLS go on
/// from).
pub fn handshake(
    input: &mut impl Read,
    output: &mut impl Write,
    exports: &[Export],
    tls: Tls,
) -> io::Result<(Handshake, Session)> {
    output.write_all(&NBDMAGIC.to_be_bytes())?;
    output.write_all(&IHAVEOPT.to_be_bytes())?;
    output.write_all(&(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_be_bytes())?;
    output.flush()?;
    let mut word = [0u8; 4];
    input.read_exact(&mut word)?;
    let client = u32::from_be_bytes(word);
    let mut session = Session::default();
    if client & CLIENT_FIXED_NEWSTYLE == 0 || client & !3 != 0 {
        eprintln!("tiercache serve: a client with flags {client:#x} (not fixed newstyle) closed");
        return Ok((Handshake::Closed, session));
    }
    session.no_zeroes = client & CLIENT_NO_ZEROES != 0;
    let ended = options(input, output, exports, &mut session, tls)?;
    Ok((ended, session))
}

/// The index of the export `name` stands for, if it is one of `exports`: the empty name is
/// the first, the default.
fn export_named(exports: &[Export], name: &str) -> Option<usize> {
    match name {
        "" => (!exports.is_empty()).then_some(0),
        name => exports.iter().position(|e| e.name == name),
    }
}

/// The transmission flags of `offer` for a connection that negotiated `session`.
fn transmission_flags(offer: &Offer, session: &Session) -> u16 {
    let common = TX_HAS_FLAGS | TX_SEND_FLUSH | TX_CAN_MULTI_CONN | TX_SEND_CACHE;
    let structured = if session.structured { TX_SEND_DF } else { 0 };
    let writes = match offer.read_only {
        true => TX_READ_ONLY,
        false => TX_SEND_FUA | TX_SEND_TRIM | TX_SEND_WRITE_ZEROES | TX_SEND_FAST_ZERO,
    };
    common | structured | writes
}

/// The handshake's options, until the client moves on to transmission, aborts, or (with
/// [`Tls::Required`]) starts TLS; `session` records what it negotiates. A client refused an
/// option for want of TLS that then leaves is an error saying so, for the server's log: the
/// client itself reads only "not supported" or the like.
pub fn options(
    input: &mut impl Read,
    output: &mut impl Write,
    exports: &[Export],
    session: &mut Session,
    tls: Tls,
) -> io::Result<Handshake> {
    let mut refused = None;
    let ended = options_until_done(input, output, exports, session, tls, &mut refused);
    match (refused, ended) {
        (Some(option), Ok(Handshake::Closed) | Err(_)) => Err(io::Error::other(format!(
            "a client asked for {} without TLS, which this server requires (refused with \
             NBD_REP_ERR_TLS_REQD), and left: it needs TLS too (qemu: tls-creds; nbdinfo: \
             nbds://)",
            option_name(option)
        ))),
        (_, ended) => ended,
    }
}

/// An option's name as the NBD protocol document writes it.
fn option_name(option: u32) -> String {
    let name = match option {
        OPT_EXPORT_NAME => "NBD_OPT_EXPORT_NAME",
        OPT_LIST => "NBD_OPT_LIST",
        OPT_INFO => "NBD_OPT_INFO",
        OPT_GO => "NBD_OPT_GO",
        OPT_STRUCTURED_REPLY => "NBD_OPT_STRUCTURED_REPLY",
        OPT_LIST_META_CONTEXT => "NBD_OPT_LIST_META_CONTEXT",
        OPT_SET_META_CONTEXT => "NBD_OPT_SET_META_CONTEXT",
        OPT_EXTENDED_HEADERS => "NBD_OPT_EXTENDED_HEADERS",
        other => return format!("option {other}"),
    };
    name.to_string()
}

/// [`options`]' loop; `refused` is set to the first option refused for want of TLS.
fn options_until_done(
    input: &mut impl Read,
    output: &mut impl Write,
    exports: &[Export],
    session: &mut Session,
    tls: Tls,
    refused: &mut Option<u32>,
) -> io::Result<Handshake> {
    loop {
        let mut head = [0u8; 16];
        input.read_exact(&mut head)?;
        let magic = u64::from_be_bytes(head[0..8].try_into().expect("8 bytes"));
        let option = u32::from_be_bytes(head[8..12].try_into().expect("4 bytes"));
        let length = u32::from_be_bytes(head[12..16].try_into().expect("4 bytes"));
        if magic != IHAVEOPT || length > OPTION_MAX {
            eprintln!(
                "tiercache serve: a malformed option (magic {magic:#x}, {length} bytes) closed"
            );
            return Ok(Handshake::Closed);
        }
        let mut data = vec![0u8; length as usize];
        input.read_exact(&mut data)?;
        if tls == Tls::Required && !matches!(option, OPT_STARTTLS | OPT_ABORT) {
            if option == OPT_EXPORT_NAME {
                eprintln!("tiercache serve: a client asked for the export without TLS; closed");
                return Ok(Handshake::Closed);
            }
            refused.get_or_insert(option);
            output.write_all(&option_reply(option, REP_ERR_TLS_REQD, &[]))?;
            output.flush()?;
            continue;
        }
        match option {
            OPT_EXPORT_NAME => {
                let named = std::str::from_utf8(&data).ok().and_then(|n| export_named(exports, n));
                let Some(export) = named else {
                    eprintln!("tiercache serve: a client asked for an unknown export; closed");
                    return Ok(Handshake::Closed);
                };
                session.export = export;
                session.allocation = session.allocation_for == Some(export);
                let offer = exports[export].offer;
                output.write_all(&offer.size.to_be_bytes())?;
                output.write_all(&transmission_flags(&offer, session).to_be_bytes())?;
                if !session.no_zeroes {
                    output.write_all(&[0u8; 124])?;
                }
                output.flush()?;
                return Ok(Handshake::Transmission);
            }
            OPT_ABORT => {
                output.write_all(&option_reply(option, REP_ACK, &[]))?;
                output.flush()?;
                return Ok(Handshake::Closed);
            }
            OPT_STARTTLS => {
                let reply = match (tls, data.is_empty()) {
                    (Tls::Off, _) => REP_ERR_UNSUP,
                    (Tls::On, _) | (Tls::Required, false) => REP_ERR_INVALID,
                    (Tls::Required, true) => REP_ACK,
                };
                output.write_all(&option_reply(option, reply, &[]))?;
                output.flush()?;
                if reply == REP_ACK {
                    // What was negotiated in the clear does not carry over into TLS.
                    *session = Session { no_zeroes: session.no_zeroes, ..Session::default() };
                    return Ok(Handshake::StartTls);
                }
            }
            OPT_LIST => {
                for export in exports {
                    let mut entry = (export.name.len() as u32).to_be_bytes().to_vec();
                    entry.extend_from_slice(export.name.as_bytes());
                    output.write_all(&option_reply(option, REP_SERVER, &entry))?;
                }
                output.write_all(&option_reply(option, REP_ACK, &[]))?;
            }
            OPT_STRUCTURED_REPLY => {
                let reply = if data.is_empty() { REP_ACK } else { REP_ERR_INVALID };
                session.structured |= reply == REP_ACK;
                output.write_all(&option_reply(option, reply, &[]))?;
            }
            OPT_LIST_META_CONTEXT | OPT_SET_META_CONTEXT => {
                meta_contexts(output, option, &data, (exports, session))?;
            }
            OPT_INFO | OPT_GO => match go_export_name(&data) {
                None => output.write_all(&option_reply(option, REP_ERR_INVALID, &[]))?,
                Some(name) => match export_named(exports, name) {
                    None => output.write_all(&option_reply(option, REP_ERR_UNKNOWN, &[]))?,
                    Some(export) => {
                        let offer = exports[export].offer;
                        let info = info_export(offer.size, transmission_flags(&offer, session));
                        output.write_all(&option_reply(option, REP_INFO, &info))?;
                        let sizes = info_block_size(offer.block);
                        output.write_all(&option_reply(option, REP_INFO, &sizes))?;
                        output.write_all(&option_reply(option, REP_ACK, &[]))?;
                        if option == OPT_GO {
                            session.export = export;
                            session.allocation = session.allocation_for == Some(export);
                            output.flush()?;
                            return Ok(Handshake::Transmission);
                        }
                    }
                },
            },
            _ => output.write_all(&option_reply(option, REP_ERR_UNSUP, &[]))?,
        }
        output.flush()?;
    }
}

/// The export name and the queries of a LIST_META_CONTEXT or SET_META_CONTEXT option's data
/// (each a 32-bit length and a string; the queries after their 32-bit count); `None` if
/// malformed.
pub fn meta_context_query(data: &[u8]) -> Option<(&str, Vec<&str>)> {
    let mut at = 0usize;
    let word = |at: &mut usize| -> Option<u32> {
        let w = u32::from_be_bytes(data.get(*at..*at + 4)?.try_into().ok()?);
        *at += 4;
        Some(w)
    };
    let string = |at: &mut usize| -> Option<&str> {
        let len = word(at)? as usize;
        if len > STRING_MAX {
            return None;
        }
        let text = std::str::from_utf8(data.get(*at..*at + len)?).ok()?;
        *at += len;
        Some(text)
    };
    let name = string(&mut at)?;
    let count = u32::from_be_bytes(data.get(at..at + 4)?.try_into().ok()?);
    at += 4;
    let mut queries = Vec::new();
    for _ in 0..count {
        queries.push(string(&mut at)?);
    }
    (at == data.len()).then_some((name, queries))
}

/// Answers LIST_META_CONTEXT (the contexts the queries match; every one for no query) or
/// SET_META_CONTEXT (selects those the queries name, replacing what was selected): one
/// `REP_META_CONTEXT` per context, then `REP_ACK`. Only `base:allocation` exists.
fn meta_contexts(
    output: &mut impl Write,
    option: u32,
    data: &[u8],
    (exports, session): (&[Export], &mut Session),
) -> io::Result<()> {
    let set = option == OPT_SET_META_CONTEXT;
    let Some((name, queries)) = meta_context_query(data).filter(|_| session.structured) else {
        // Malformed, or before structured replies (which the spec requires first).
        return output.write_all(&option_reply(option, REP_ERR_INVALID, &[]));
    };
    let Some(export) = export_named(exports, name) else {
        return output.write_all(&option_reply(option, REP_ERR_UNKNOWN, &[]));
    };
    // LIST takes a namespace alone ("base:") as every context in it; SET names contexts.
    let matches = |q: &&str| *q == BASE_ALLOCATION || (!set && *q == "base:");
    let found = (!set && queries.is_empty()) || queries.iter().any(matches);
    if set {
        session.allocation_for = found.then_some(export);
    }
    if found {
        let mut reply = (if set { ALLOCATION_ID } else { 0 }).to_be_bytes().to_vec();
        reply.extend_from_slice(BASE_ALLOCATION.as_bytes());
        output.write_all(&option_reply(option, REP_META_CONTEXT, &reply))?;
    }
    output.write_all(&option_reply(option, REP_ACK, &[]))
}

/// A fuzz target's entry point: `data` as a client's handshake and then as request headers.
/// Nothing may panic, and the handshake must end (data runs out).
#[doc(hidden)]
pub fn fuzz(data: &[u8]) {
    let mut input = std::io::Cursor::new(data);
    let mut output = Vec::new();
    let offer = Offer { size: 1 << 30, block: 4096, read_only: false };
    let exports = [Export { name: EXPORT.into(), offer }, Export { name: "b".into(), offer }];
    for tls in [Tls::Off, Tls::Required, Tls::On] {
        input.set_position(0);
        let _ = handshake(&mut input, &mut output, &exports, tls);
    }
    for chunk in data.chunks_exact(Request::BYTES) {
        if let Ok(request) = Request::parse(chunk.try_into().expect("28 bytes")) {
            let session = Session { structured: true, allocation: true, ..Session::default() };
            let _ = (request.check(1 << 30, &session), request.charge(), request.has_payload());
        }
    }
    let _ = (go_export_name(data), meta_context_query(data));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

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
        let plain = Session::default();
        let r = Request::parse(&header(CMD_READ, 4096, 512)).unwrap();
        assert_eq!((r.kind, r.cookie, r.offset, r.length), (CMD_READ, 7, 4096, 512));
        assert_eq!(r.check(8192, &plain), None);
        assert_eq!(r.check(4096, &plain), Some(EINVAL), "past the end");
        let mut flagged = Request::parse(&header(CMD_READ, 0, 512)).unwrap();
        flagged.flags = 1 << 5;
        assert_eq!(flagged.check(4096, &plain), Some(EINVAL), "an undefined flag");
        flagged.flags = CMD_FLAG_NO_HOLE;
        assert_eq!(flagged.check(4096, &plain), Some(EINVAL), "NO_HOLE on a read");
        flagged.flags = CMD_FLAG_FUA;
        assert_eq!(flagged.check(4096, &plain), None, "FUA is taken on any command");
        let huge = Request::parse(&header(CMD_WRITE, 0, PAYLOAD_MAX + 1)).unwrap();
        assert_eq!(huge.check(u64::MAX, &plain), Some(EOVERFLOW));
        let wrap = Request::parse(&header(CMD_TRIM, u64::MAX - 1, 4)).unwrap();
        assert_eq!(wrap.check(u64::MAX, &plain), Some(EINVAL), "offset + length wraps");
        assert_eq!(Request::parse(&header(99, 0, 0)).unwrap().check(1, &plain), Some(EINVAL));
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

    /// A client's option: IHAVEOPT, the option, its data.
    fn option(option: u32, data: &[u8]) -> Vec<u8> {
        let mut o = IHAVEOPT.to_be_bytes().to_vec();
        o.extend_from_slice(&option.to_be_bytes());
        o.extend_from_slice(&(data.len() as u32).to_be_bytes());
        o.extend_from_slice(data);
        o
    }

    /// The option replies in `output` after the 18-byte greeting: (option, reply type).
    fn replies(output: &[u8]) -> Vec<(u32, u32)> {
        let mut at = 18;
        let mut found = Vec::new();
        while at + 20 <= output.len() {
            assert_eq!(output[at..at + 8], REPLY_MAGIC.to_be_bytes());
            let word = |i: usize| u32::from_be_bytes(output[i..i + 4].try_into().unwrap());
            found.push((word(at + 8), word(at + 12)));
            at += 20 + word(at + 16) as usize;
        }
        found
    }

    #[test]
    fn tls_is_required_before_any_option_but_starttls() {
        let offer = Offer { size: 1 << 20, block: 4096, read_only: false };
        let exports = [Export { name: EXPORT.into(), offer }];
        let mut input = CLIENT_FIXED_NEWSTYLE.to_be_bytes().to_vec();
        input.extend(option(OPT_LIST, &[]));
        input.extend(option(OPT_GO, &[0, 0, 0, 0, 0, 0]));
        input.extend(option(OPT_STARTTLS, &[]));
        let mut output = Vec::new();
        let (ended, _) =
            handshake(&mut Cursor::new(input), &mut output, &exports, Tls::Required).unwrap();
        assert_eq!(ended, Handshake::StartTls);
        let expected =
            [(OPT_LIST, REP_ERR_TLS_REQD), (OPT_GO, REP_ERR_TLS_REQD), (OPT_STARTTLS, REP_ACK)];
        assert_eq!(replies(&output), expected);
        // Over TLS: a second STARTTLS is invalid, and GO goes on to transmission.
        let mut input = option(OPT_STARTTLS, &[]);
        input.extend(option(OPT_GO, &[0, 0, 0, 0, 0, 0]));
        let mut output = vec![0; 18];
        let mut session = Session { no_zeroes: true, ..Session::default() };
        let ended =
            options(&mut Cursor::new(input), &mut output, &exports, &mut session, Tls::On).unwrap();
        assert_eq!(ended, Handshake::Transmission);
        let found = replies(&output);
        assert_eq!(found[0], (OPT_STARTTLS, REP_ERR_INVALID));
        assert_eq!(found.last(), Some(&(OPT_GO, REP_ACK)));
        // EXPORT_NAME has no error reply: without TLS, the connection closes.
        let input = [CLIENT_FIXED_NEWSTYLE.to_be_bytes().to_vec(), option(OPT_EXPORT_NAME, &[])];
        let mut output = Vec::new();
        let (ended, _) =
            handshake(&mut Cursor::new(input.concat()), &mut output, &exports, Tls::Required)
                .unwrap();
        assert_eq!((ended, output.len()), (Handshake::Closed, 18), "nothing sent but the greeting");
        // A server without TLS says it does not support it.
        let input = [CLIENT_FIXED_NEWSTYLE.to_be_bytes().to_vec(), option(OPT_STARTTLS, &[])];
        let mut output = Vec::new();
        let _ = handshake(&mut Cursor::new(input.concat()), &mut output, &exports, Tls::Off);
        assert_eq!(replies(&output), [(OPT_STARTTLS, REP_ERR_UNSUP)]);
    }

    /// A LIST_META_CONTEXT or SET_META_CONTEXT option's data.
    fn query(export: &str, queries: &[&str]) -> Vec<u8> {
        let mut data = (export.len() as u32).to_be_bytes().to_vec();
        data.extend_from_slice(export.as_bytes());
        data.extend_from_slice(&(queries.len() as u32).to_be_bytes());
        for q in queries {
            data.extend_from_slice(&(q.len() as u32).to_be_bytes());
            data.extend_from_slice(q.as_bytes());
        }
        data
    }

    #[test]
    fn block_status_needs_structured_replies_and_base_allocation_selected() {
        let offer = Offer { size: 1 << 20, block: 4096, read_only: false };
        let exports = [Export { name: EXPORT.into(), offer }];
        let go = option(OPT_GO, &[0, 0, 0, 0, 0, 0]);
        // Before structured replies, metadata contexts are refused.
        let mut input = CLIENT_FIXED_NEWSTYLE.to_be_bytes().to_vec();
        input.extend(option(OPT_SET_META_CONTEXT, &query("", &[BASE_ALLOCATION])));
        input.extend(option(OPT_STRUCTURED_REPLY, &[]));
        input.extend(option(OPT_LIST_META_CONTEXT, &query(EXPORT, &[])));
        input.extend(option(OPT_SET_META_CONTEXT, &query("nope", &[BASE_ALLOCATION])));
        input.extend(option(OPT_SET_META_CONTEXT, &query("", &["x-other:thing", BASE_ALLOCATION])));
        input.extend(go.clone());
        let mut output = Vec::new();
        let (ended, session) =
            handshake(&mut Cursor::new(input), &mut output, &exports, Tls::Off).unwrap();
        assert_eq!(ended, Handshake::Transmission);
        assert!(session.structured && session.allocation, "{session:?}");
        let expected = [
            (OPT_SET_META_CONTEXT, REP_ERR_INVALID),
            (OPT_STRUCTURED_REPLY, REP_ACK),
            (OPT_LIST_META_CONTEXT, REP_META_CONTEXT),
            (OPT_LIST_META_CONTEXT, REP_ACK),
            (OPT_SET_META_CONTEXT, REP_ERR_UNKNOWN),
            (OPT_SET_META_CONTEXT, REP_META_CONTEXT),
            (OPT_SET_META_CONTEXT, REP_ACK),
            (OPT_GO, REP_INFO),
            (OPT_GO, REP_INFO),
            (OPT_GO, REP_ACK),
        ];
        assert_eq!(replies(&output), expected);
        let status = |flags: u16| Request {
            flags,
            kind: CMD_BLOCK_STATUS,
            cookie: 1,
            offset: 0,
            length: 4096,
        };
        assert_eq!(status(CMD_FLAG_REQ_ONE).check(1 << 20, &session), None);
        assert_eq!(status(CMD_FLAG_DF).check(1 << 20, &session), Some(EINVAL));
        // A selection that named nothing served leaves BLOCK_STATUS refused.
        let mut input = CLIENT_FIXED_NEWSTYLE.to_be_bytes().to_vec();
        input.extend(option(OPT_STRUCTURED_REPLY, &[]));
        input.extend(option(OPT_SET_META_CONTEXT, &query("", &["base:"])));
        input.extend(go);
        let (_, session) =
            handshake(&mut Cursor::new(input), &mut Vec::new(), &exports, Tls::Off).unwrap();
        assert!(session.structured && !session.allocation);
        assert_eq!(status(0).check(1 << 20, &session), Some(EINVAL));
        assert_eq!(meta_context_query(&query("a", &["b"])[..9]), None, "cut short");
    }

    #[test]
    fn exports_are_listed_and_chosen_by_name_the_empty_name_the_first() {
        let offer = |size| Offer { size, block: 4096, read_only: false };
        let exports = [
            Export { name: "a".into(), offer: offer(1 << 20) },
            Export { name: "b".into(), offer: offer(2 << 20) },
        ];
        let go = |name: &str| {
            let mut data = (name.len() as u32).to_be_bytes().to_vec();
            data.extend_from_slice(name.as_bytes());
            data.extend_from_slice(&0u16.to_be_bytes());
            option(OPT_GO, &data)
        };
        let mut input = CLIENT_FIXED_NEWSTYLE.to_be_bytes().to_vec();
        input.extend(option(OPT_LIST, &[]));
        input.extend(go("c"));
        input.extend(go("b"));
        let mut output = Vec::new();
        let (ended, session) =
            handshake(&mut Cursor::new(input), &mut output, &exports, Tls::Off).unwrap();
        assert_eq!((ended, session.export), (Handshake::Transmission, 1));
        let found = replies(&output);
        let expected = [(OPT_LIST, REP_SERVER), (OPT_LIST, REP_SERVER), (OPT_LIST, REP_ACK)];
        assert_eq!(found[..3], expected);
        assert_eq!(found[3], (OPT_GO, REP_ERR_UNKNOWN));
        let info = &output[output.len() - 20 - 20 - 14 - 20 - 12..];
        assert_eq!(u64::from_be_bytes(info[22..30].try_into().unwrap()), 2 << 20, "b's size");
        let mut input = CLIENT_FIXED_NEWSTYLE.to_be_bytes().to_vec();
        input.extend(go(""));
        let (_, session) =
            handshake(&mut Cursor::new(input), &mut Vec::new(), &exports, Tls::Off).unwrap();
        assert_eq!(session.export, 0, "the empty name is the first");
    }
}
