//! One connection of `tiercache serve`: its stream, the handshake, the requests read and
//! handed to the workers, and the replies, every wait on the client bounded by a deadline.
//!
//! **Deadlines, not timeouts.** A socket's timeout counts from each call, so a client that
//! sends (or reads) a byte now and then would stretch it for ever. Here each phase has one
//! deadline, which bytes moving never extend: the handshake one from the moment the connection
//! was accepted to the transmission phase; a request one from its first byte to its last
//! (header and payload); a reply one from when it starts going out to its last byte written.
//! [`Timed`] keeps them: before each read or write it sets the socket's timeout to the time
//! left. A connection that misses one is cut. Between requests a connection may idle (up to
//! `--idle-timeout`, if given).
//!
//! **Slots.** Connections still in their handshake have a pool of their own
//! ([`Handshaking`], `crate::slots`), apart from the served ones (`--max-connections`): when
//! it is full, the connection that has been in it longest is closed to let a new one in. So clients that never
//! finish their handshake can neither hold a slot past their deadline nor keep one that does
//! from being served.

use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use tiercache_engine::{CachedFile, EngineError};

use crate::nbd::{self, Request};

/// A connection's stream, both kinds.
pub(super) enum Stream {
    Unix(std::os::unix::net::UnixStream),
    Tcp(std::net::TcpStream),
}

impl Stream {
    pub(super) fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
        })
    }

    /// Ends the reading side: a connection waiting for its next request sees the end.
    pub(super) fn stop_reading(&self) {
        let _ = match self {
            Stream::Unix(s) => s.shutdown(std::net::Shutdown::Read),
            Stream::Tcp(s) => s.shutdown(std::net::Shutdown::Read),
        };
    }

    /// Cuts the connection both ways: a thread blocked reading or writing it returns.
    pub(super) fn cut(&self) {
        let _ = match self {
            Stream::Unix(s) => s.shutdown(std::net::Shutdown::Both),
            Stream::Tcp(s) => s.shutdown(std::net::Shutdown::Both),
        };
    }

    /// Reads that wait longer than `timeout` fail (`None`: they wait for ever). The socket's
    /// own option: every clone of the stream shares it.
    fn read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_read_timeout(timeout),
            Stream::Tcp(s) => s.set_read_timeout(timeout),
        }
    }

    /// As [`read_timeout`](Self::read_timeout), for writes.
    fn write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_write_timeout(timeout),
            Stream::Tcp(s) => s.set_write_timeout(timeout),
        }
    }

    pub(super) fn blocking(&self) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_nonblocking(false),
            Stream::Tcp(s) => s.set_nonblocking(false),
        }
    }
}

impl std::os::fd::AsRawFd for Stream {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        match self {
            Stream::Unix(s) => s.as_raw_fd(),
            Stream::Tcp(s) => s.as_raw_fd(),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write(buf),
            Stream::Tcp(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.flush(),
            Stream::Tcp(s) => s.flush(),
        }
    }
}

/// How far a deadline may be overshot: the socket's timeout is set again only once the time
/// left has moved by more than this since it was last set, so a client whose bytes come
/// quickly costs no extra system call per read.
const SLACK: Duration = Duration::from_millis(20);

/// One direction of a stream (a reader's clone reads, a writer's writes) whose calls must all
/// end by `deadline`, however the bytes trickle; with none, a call waits as long as it takes.
/// Before each call the socket's timeout for that direction is set to the time left (when it
/// has moved by more than [`SLACK`]), and a call that times out before the deadline is made
/// again, so the deadline alone decides.
pub(super) struct Timed {
    stream: Stream,
    deadline: Option<Instant>,
    /// The socket's timeout for this direction as last set.
    armed: Option<Duration>,
}

impl Timed {
    pub(super) fn new(stream: Stream, deadline: Option<Instant>) -> Timed {
        Timed { stream, deadline, armed: None }
    }

    /// From now on, calls must end by `deadline` (`None`: no limit).
    pub(super) fn until(&mut self, deadline: Option<Instant>) {
        self.deadline = deadline;
    }

    /// The time left before the deadline, the socket's timeout set to it; an error once it
    /// has passed. `None`: no deadline.
    fn arm(&mut self, set: fn(&Stream, Option<Duration>) -> io::Result<()>) -> io::Result<()> {
        let Some(deadline) = self.deadline else { return Ok(()) };
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "past its deadline"));
        }
        if self.armed.is_none_or(|armed| armed > left + SLACK || armed + SLACK < left) {
            set(&self.stream, Some(left))?;
            self.armed = Some(left);
        }
        Ok(())
    }

    /// Makes `call` until it does not time out before the deadline.
    fn within<T>(
        &mut self,
        set: fn(&Stream, Option<Duration>) -> io::Result<()>,
        mut call: impl FnMut(&mut Stream) -> io::Result<T>,
    ) -> io::Result<T> {
        loop {
            self.arm(set)?;
            match call(&mut self.stream) {
                Err(e)
                    if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) =>
                {
                    // Early (the socket's timeout a little short, or set for an earlier
                    // deadline), or with no deadline at all: the next turn decides.
                    continue;
                }
                other => return other,
            }
        }
    }
}

impl Read for Timed {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.within(Stream::read_timeout, |stream| stream.read(buf))
    }
}

/// The most bytes one write call carries. A unix socket's send timeout counts each wait for
/// room anew, so one large write to a client that drains a little now and then would never
/// time out; in calls of this size, the deadline is looked at between them.
const WRITE_CHUNK: usize = 64 << 10;

impl Write for Timed {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let buf = &buf[..buf.len().min(WRITE_CHUNK)];
        self.within(Stream::write_timeout, |stream| stream.write(buf))
    }

    fn flush(&mut self) -> io::Result<()> {
        self.stream.flush()
    }
}

impl crate::slots::Close for Stream {
    fn close(&self) {
        self.cut();
    }
}

/// The connections still in their handshake, with a clone of each one's stream to close it by
/// (`crate::slots`): apart from the served connections, the oldest closed when a new one finds
/// the pool full.
pub(super) type Handshaking = crate::slots::Slots<Stream>;

/// A connection's slot among those in their handshake.
pub(super) type Ticket = crate::slots::Ticket<Stream>;

/// The exports connections choose from: each one's offer (for the handshake) and its file,
/// in the same order.
pub(super) struct Exports {
    pub offers: Vec<nbd::Export>,
    pub files: Vec<Arc<CachedFile>>,
}

/// How a connection is served: by how many workers, within which deadlines, with TLS required
/// if the server has it, admitted to the served connections if one of `max_served` is free,
/// and its buffers counted in the server's `memory`.
#[derive(Clone)]
pub(super) struct How {
    pub workers: usize,
    pub limits: Limits,
    pub tls: Option<crate::tls::ServerTls>,
    pub served: Arc<AtomicUsize>,
    pub max_served: usize,
    /// The server's request buffers, under one ceiling.
    pub memory: Arc<Memory>,
}

/// How long a connection may take: its handshake (from being accepted), a request (from its
/// first byte to its last) and its reply (from the first byte written to the last), and how
/// long it may idle between requests.
#[derive(Clone, Copy)]
pub(super) struct Limits {
    pub handshake: Duration,
    pub request: Duration,
    pub idle: Option<Duration>,
}

/// Requests a connection may have in flight before the server reads more of it, and the bytes
/// of their buffers: what one client can make the server hold.
const IN_FLIGHT: usize = 64;
const IN_FLIGHT_BYTES: u64 = 256 << 20;

/// The bytes of request buffers the whole server holds (writes' payloads read, reads' data not
/// yet sent), under one ceiling (`--memory-limit`): a connection whose next request would pass
/// it waits, not reading more of its client, until replies go out (or are cut at their
/// deadline) and free some. Counted with an atomic; only waiting takes the lock.
pub(super) struct Memory {
    used: std::sync::atomic::AtomicU64,
    ceiling: u64,
    waiting: Mutex<()>,
    freed: Condvar,
}

impl Memory {
    pub(super) fn new(ceiling: u64) -> Arc<Memory> {
        Arc::new(Memory {
            used: Default::default(),
            ceiling,
            waiting: Mutex::new(()),
            freed: Condvar::new(),
        })
    }

    /// Takes `bytes` once they fit under the ceiling (a request larger than the whole ceiling
    /// goes alone, once nothing else is held). A small request (up to [`RESERVE`]) of a
    /// connection that holds nothing goes at once, over the ceiling if need be: a few clients
    /// that fill the ceiling and read their replies slowly cannot stall everyone else's
    /// requests until their deadlines; the ceiling is passed by at most `RESERVE` a connection.
    ///
    /// The wait ends, with false, at `until` or once the connection is `gone` (cut): a
    /// connection cannot hold its slot waiting for memory the clients filling it keep.
    fn take(&self, bytes: u64, alone: bool, until: Instant, gone: &AtomicBool) -> bool {
        if alone && bytes <= RESERVE {
            self.used.fetch_add(bytes, Ordering::AcqRel);
            return true;
        }
        let mut used = self.used.load(Ordering::Acquire);
        loop {
            if used > 0 && used + bytes > self.ceiling {
                if gone.load(Ordering::Acquire) || Instant::now() >= until {
                    return false;
                }
                let waiting = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
                // Timed: a wake-up between the load and the wait is never lost for long.
                let wait = self.freed.wait_timeout(waiting, Duration::from_millis(10));
                drop(wait.unwrap_or_else(|p| p.into_inner()));
                used = self.used.load(Ordering::Acquire);
                continue;
            }
            match self.used.compare_exchange_weak(
                used,
                used + bytes,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(now) => used = now,
            }
        }
    }

    fn give(&self, bytes: u64) {
        self.used.fetch_sub(bytes, Ordering::AcqRel);
        self.freed.notify_all();
    }

    /// Counts `bytes` for as long as the guard lives, whatever the ceiling: memory a
    /// connection holds beside its requests' buffers (its threads, its fixed buffers), which
    /// exists already; requests find that much less room under the ceiling.
    fn hold(&self, bytes: u64) -> Held<'_> {
        self.used.fetch_add(bytes, Ordering::AcqRel);
        Held(self, bytes)
    }
}

/// Bytes counted under the ceiling until it drops (`Memory::hold`).
struct Held<'a>(&'a Memory, u64);

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.0.give(self.1);
    }
}

/// What a connection costs beside its requests' buffers, counted under the memory ceiling:
/// its thread's stack as touched and its reader's and writer's buffers (measured: 384 idle
/// connections add 12.4 MiB to the server's RSS, 33 KiB each).
const CONNECTION_BYTES: u64 = 48 << 10;
/// A worker thread's stack as touched.
const WORKER_BYTES: u64 = 32 << 10;
/// A TLS connection's pump (`crate::tls`): the decrypted bytes it holds (up to 256 KiB), its
/// read buffer and the session's records.
const TLS_BYTES: u64 = 384 << 10;

/// The largest request a connection holding nothing may always make (see `Memory::take`).
const RESERVE: u64 = 64 << 10;

/// Bytes of request buffers one connection holds, under its own limit and the server's
/// ceiling; reading its client waits while either is reached.
struct Budget<'a> {
    used: Mutex<u64>,
    freed: Condvar,
    server: &'a Memory,
    /// Set once the connection is cut (a reply failed): reading it stops waiting.
    gone: AtomicBool,
}

impl Budget<'_> {
    /// Takes `bytes` for a request once this connection's limit and the server's ceiling let
    /// it, waiting for the server's at most until `until`; false if that did not come.
    fn take(&self, bytes: u64, until: Instant) -> bool {
        let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        // A request larger than the whole budget still goes, alone. This connection's own
        // replies end by their deadlines, so the wait does too.
        while *used > 0 && *used + bytes > IN_FLIGHT_BYTES {
            used = self.freed.wait(used).unwrap_or_else(|p| p.into_inner());
        }
        let alone = *used == 0;
        *used += bytes;
        drop(used);
        if self.server.take(bytes, alone, until, &self.gone) {
            return true;
        }
        *self.used.lock().unwrap_or_else(|p| p.into_inner()) -= bytes;
        false
    }

    fn give(&self, bytes: u64) {
        self.server.give(bytes);
        *self.used.lock().unwrap_or_else(|p| p.into_inner()) -= bytes;
        self.freed.notify_all();
    }
}

/// A served connection, counted among the served ones (and in the metrics) while it lives.
struct Served<'a> {
    served: &'a AtomicUsize,
    metrics: &'a crate::metrics::Metrics,
}

impl Drop for Served<'_> {
    fn drop(&mut self) {
        self.metrics.connections.fetch_sub(1, Ordering::Relaxed);
        self.served.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Serves one connection, accepted at `accepted` and holding `ticket` in the handshake pool:
/// the handshake, then, once admitted among the served connections, requests until the client
/// leaves. The reading thread hands requests to the workers, which serve them side by side
/// and reply as each completes (a reply's header and data go out together).
pub(super) fn connection(
    stream: Stream,
    (accepted, ticket): (Instant, Option<Ticket>),
    exports: &Exports,
    metrics: &crate::metrics::Metrics,
    how: How,
) -> io::Result<()> {
    let late = |e: io::Error| match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
            io::Error::new(e.kind(), "the handshake did not finish by its deadline")
        }
        io::ErrorKind::UnexpectedEof
        | io::ErrorKind::BrokenPipe
        | io::ErrorKind::ConnectionReset => {
            io::Error::new(e.kind(), "the client left during the handshake")
        }
        _ => e,
    };
    // Counted from the start, its handshake's included: clients that never finish one take
    // room under the ceiling too (at most --max-handshakes of them).
    let _connection = how.memory.hold(CONNECTION_BYTES);
    let _pump = how.tls.is_some().then(|| how.memory.hold(TLS_BYTES));
    let deadline = accepted + how.limits.handshake;
    let Some((stream, mut input, output, session)) =
        handshake(stream, &exports.offers, deadline, how.tls.clone()).map_err(late)?
    else {
        return Ok(());
    };
    drop(ticket);
    let (file, export) = (&*exports.files[session.export], exports.offers[session.export].offer);
    if how.served.fetch_add(1, Ordering::SeqCst) >= how.max_served {
        how.served.fetch_sub(1, Ordering::SeqCst);
        return Err(io::Error::other(format!(
            "refused after its handshake: {} connections are served (--max-connections)",
            how.max_served
        )));
    }
    metrics.connections.fetch_add(1, Ordering::Relaxed);
    let _served = Served { served: &how.served, metrics };
    let output = Mutex::new(output);
    let budget = Budget {
        used: Mutex::new(0),
        freed: Condvar::new(),
        server: &how.memory,
        gone: AtomicBool::new(false),
    };
    let (requests, queue) = std::sync::mpsc::sync_channel::<(Request, Vec<u8>)>(IN_FLIGHT);
    let queue = Mutex::new(queue);
    let limits = how.limits;
    let crew = Crew { idle: AtomicUsize::new(0), pending: AtomicUsize::new(0) };
    let work = || loop {
        crew.idle.fetch_add(1, Ordering::AcqRel);
        let next = queue.lock().unwrap_or_else(|p| p.into_inner()).recv();
        crew.idle.fetch_sub(1, Ordering::AcqRel);
        let Ok((request, mut buf)) = next else { return };
        crew.pending.fetch_sub(1, Ordering::AcqRel);
        let started = Instant::now();
        let served = serve(file, &request, &mut buf);
        let moved = match request.kind {
            nbd::CMD_READ | nbd::CMD_WRITE => request.length as u64,
            _ => 0,
        };
        metrics.record(request.kind, moved, started.elapsed(), served.is_err());
        if let Err(e) = &served {
            eprintln!("tiercache serve: request {request:?} failed: {e}");
        }
        // A client gone before its reply, or not reading it by its deadline: the
        // connection is cut, and the reading thread stops.
        let within = (limits.request, session.structured);
        if reply(&output, within, &request, served, &buf).is_err() {
            budget.gone.store(true, Ordering::Release);
            stream.cut();
        }
        budget.give(request.charge());
    };
    // Each worker's stack, counted until the scope has joined them all.
    let hired = std::cell::RefCell::new(Vec::new());
    std::thread::scope(|scope| {
        // A worker more only when those hired are all busy, up to the connection's share: a
        // client that sends one request at a time (or idles) costs one thread, not them all.
        let hire = || {
            let busy = crew.pending.load(Ordering::Acquire) >= crew.idle.load(Ordering::Acquire);
            if busy && hired.borrow().len() < how.workers.max(1) {
                hired.borrow_mut().push(how.memory.hold(WORKER_BYTES));
                scope.spawn(work);
            }
        };
        let to_workers = (&requests, &hire as &dyn Fn(), &crew.pending);
        let read =
            read_requests(&mut input, (&output, limits), (export, &session), to_workers, &budget);
        drop(requests);
        if read.is_err() {
            // A request past its deadline (or malformed): the workers' replies stop too.
            stream.cut();
        }
        read
    })
}

type Handshaken = (Stream, BufReader<Timed>, BufWriter<Timed>, nbd::Session);

/// A connection's workers: how many wait for a request, and how many requests wait for one.
struct Crew {
    idle: AtomicUsize,
    pending: AtomicUsize,
}

/// Where the reading thread hands requests: the queue, a call that hires a worker if all are
/// busy, and the count of requests waiting.
type ToWorkers<'a> =
    (&'a std::sync::mpsc::SyncSender<(Request, Vec<u8>)>, &'a dyn Fn(), &'a AtomicUsize);

/// The handshake, carried on over TLS if the client starts it (with TLS required, it must
/// before anything else), every read and write of it by `deadline`: the stream the connection
/// then goes on with, its reader and its writer; `None` if the client left or was refused.
fn handshake(
    stream: Stream,
    exports: &[nbd::Export],
    deadline: Instant,
    tls: Option<crate::tls::ServerTls>,
) -> io::Result<Option<Handshaken>> {
    let timed = |stream: &Stream| stream.try_clone().map(|s| Timed::new(s, Some(deadline)));
    let mut input = BufReader::new(timed(&stream)?);
    let mut output = BufWriter::new(timed(&stream)?);
    let required = if tls.is_some() { nbd::Tls::Required } else { nbd::Tls::Off };
    let (ended, mut session) = nbd::handshake(&mut input, &mut output, exports, required)?;
    match (ended, tls) {
        (nbd::Handshake::Transmission, _) => Ok(Some((stream, input, output, session))),
        (nbd::Handshake::StartTls, Some(config)) if input.buffer().is_empty() => {
            drop((input, output));
            // The TLS handshake runs in the pump; until it is done no plain byte comes, so
            // the deadline covers it too.
            let plain = Stream::Unix(config.start(stream, deadline)?);
            let mut input = BufReader::new(timed(&plain)?);
            let mut output = BufWriter::new(timed(&plain)?);
            let ended = nbd::options(&mut input, &mut output, exports, &mut session, nbd::Tls::On)?;
            let went_on = ended == nbd::Handshake::Transmission;
            Ok(went_on.then_some((plain, input, output, session)))
        }
        (nbd::Handshake::StartTls, _) => {
            eprintln!("tiercache serve: a client sent bytes before its TLS handshake; closed");
            Ok(None)
        }
        (nbd::Handshake::Closed, _) => Ok(None),
    }
}

/// What serving a request left in its buffer to send back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    /// Nothing: the reply is its header.
    Done,
    /// A read's data.
    Data,
    /// A BLOCK_STATUS chunk's payload: the context's id and its extents.
    Extents,
}

/// Sends a served request's reply, its header and a read's data (in one chunk where
/// structured replies were negotiated, as they must be for reads and block status), all of it
/// written within `within` (a client that reads it too slowly is an error: the caller cuts it).
fn reply(
    output: &Mutex<BufWriter<Timed>>,
    (within, structured): (Duration, bool),
    request: &Request,
    served: Result<Outcome, EngineError>,
    buf: &[u8],
) -> io::Result<()> {
    let mut output = output.lock().unwrap_or_else(|p| p.into_inner());
    output.get_mut().until(Some(Instant::now() + within));
    let cookie = request.cookie;
    match served {
        Ok(Outcome::Data) if structured && request.length == 0 => {
            output.write_all(&nbd::chunk(nbd::REPLY_FLAG_DONE, nbd::REPLY_TYPE_NONE, cookie, 0))?;
        }
        Ok(Outcome::Data) if structured => {
            let (kind, length) = (nbd::REPLY_TYPE_OFFSET_DATA, 8 + request.length);
            output.write_all(&nbd::chunk(nbd::REPLY_FLAG_DONE, kind, cookie, length))?;
            output.write_all(&request.offset.to_be_bytes())?;
            output.write_all(&buf[..request.length as usize])?;
        }
        Ok(Outcome::Data) => {
            output.write_all(&nbd::simple_reply(0, cookie))?;
            output.write_all(&buf[..request.length as usize])?;
        }
        Ok(Outcome::Extents) => {
            let kind = nbd::REPLY_TYPE_BLOCK_STATUS;
            output.write_all(&nbd::chunk(nbd::REPLY_FLAG_DONE, kind, cookie, buf.len() as u32))?;
            output.write_all(buf)?;
        }
        Ok(Outcome::Done) => output.write_all(&nbd::simple_reply(0, cookie))?,
        Err(e) => output.write_all(&error_reply(request, nbd::EIO, structured, &e.to_string()))?,
    }
    output.flush()
}

/// A reply saying `error`: an error chunk for the commands structured replies answer, a
/// simple reply otherwise.
fn error_reply(request: &Request, error: u32, structured: bool, message: &str) -> Vec<u8> {
    match structured && matches!(request.kind, nbd::CMD_READ | nbd::CMD_BLOCK_STATUS) {
        true => nbd::error_chunk(error, request.cookie, message),
        false => nbd::simple_reply(error, request.cookie).to_vec(),
    }
}

/// Waits for the first byte of the next request, up to `idle` (for ever without); false if the
/// client left (or cut) first.
fn next_request(input: &mut BufReader<Timed>, idle: Option<Duration>) -> io::Result<bool> {
    input.get_mut().until(idle.map(|idle| Instant::now() + idle));
    match input.fill_buf() {
        Ok(bytes) => Ok(!bytes.is_empty()),
        Err(e) if e.kind() == io::ErrorKind::TimedOut => {
            Err(io::Error::new(e.kind(), "no request within --idle-timeout"))
        }
        Err(e) => Err(e),
    }
}

/// Reads requests until the client disconnects (or sends DISC), answering the ones refused
/// before serving and handing the others to the workers. Each request must arrive whole within
/// `limits.request` of its first byte.
fn read_requests(
    input: &mut BufReader<Timed>,
    (output, limits): (&Mutex<BufWriter<Timed>>, Limits),
    (export, session): (nbd::Offer, &nbd::Session),
    (requests, hire, pending): ToWorkers<'_>,
    budget: &Budget<'_>,
) -> io::Result<()> {
    let mut header = [0u8; Request::BYTES];
    let late = |e: io::Error| match e.kind() {
        io::ErrorKind::TimedOut => io::Error::new(e.kind(), "a request not whole by its deadline"),
        _ => e,
    };
    loop {
        if !next_request(input, limits.idle)? {
            return Ok(());
        }
        input.get_mut().until(Some(Instant::now() + limits.request));
        match input.read_exact(&mut header) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(late(e)),
        }
        let request = Request::parse(&header)
            .map_err(|bad| io::Error::new(io::ErrorKind::InvalidData, format!("{bad:?}")))?;
        if request.has_payload() && request.length > 4 * nbd::PAYLOAD_MAX {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a write of {} bytes, past any payload served", request.length),
            ));
        }
        let changes =
            matches!(request.kind, nbd::CMD_WRITE | nbd::CMD_TRIM | nbd::CMD_WRITE_ZEROES);
        let refused = (export.read_only && changes).then_some(nbd::EPERM);
        if let Some(error) = refused
            .or_else(|| request.check(export.size, session))
            .or_else(|| slow_zeroes(&request))
        {
            // A refused write's payload is read past, never held: a client cannot make the
            // server buffer what it will not write.
            if request.has_payload() {
                let wanted = request.length as u64;
                let skipped = io::copy(&mut input.by_ref().take(wanted), &mut io::sink());
                if skipped.map_err(late)? != wanted {
                    return Err(io::ErrorKind::UnexpectedEof.into());
                }
            }
            let mut output = output.lock().unwrap_or_else(|p| p.into_inner());
            output.get_mut().until(Some(Instant::now() + limits.request));
            output.write_all(&error_reply(&request, error, session.structured, "refused"))?;
            output.flush()?;
            continue;
        }
        // What the request's buffer holds (a write's payload, a read's data), charged until
        // its reply is sent.
        let charge = request.charge();
        if !budget.take(charge, Instant::now() + limits.request) {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no room under --memory-limit for a request by its deadline",
            ));
        }
        let mut buf = Vec::new();
        if request.has_payload() {
            // Grown as the bytes arrive: a client that announces a large write and sends
            // nothing costs nothing.
            let wanted = request.length as u64;
            let got = input.by_ref().take(wanted).read_to_end(&mut buf);
            if got.is_err() || buf.len() as u64 != wanted {
                // A client that leaves in the middle of a write: nothing of it is written.
                budget.give(charge);
                let e = got.err().unwrap_or_else(|| io::ErrorKind::UnexpectedEof.into());
                return Err(late(e));
            }
        }
        if request.kind == nbd::CMD_DISC {
            budget.give(charge);
            return Ok(());
        }
        hire();
        pending.fetch_add(1, Ordering::AcqRel);
        if requests.send((request, buf)).is_err() {
            return Ok(());
        }
    }
}

/// ENOTSUP for a WRITE_ZEROES that must be fast (FAST_ZERO) but may not punch a hole
/// (NO_HOLE): its zeros would be written, no faster than the client writing them.
fn slow_zeroes(request: &Request) -> Option<u32> {
    let flags = nbd::CMD_FLAG_FAST_ZERO | nbd::CMD_FLAG_NO_HOLE;
    (request.kind == nbd::CMD_WRITE_ZEROES && request.flags & flags == flags)
        .then_some(nbd::ENOTSUP)
}

/// Serves one checked request, leaving in `buf` what its reply sends back.
fn serve(file: &CachedFile, request: &Request, buf: &mut Vec<u8>) -> Result<Outcome, EngineError> {
    let fua = request.flags & nbd::CMD_FLAG_FUA != 0;
    let (offset, length) = (request.offset, request.length as usize);
    match request.kind {
        nbd::CMD_READ => {
            buf.resize(length, 0);
            let n = file.read_at(offset, buf)?;
            // Inside the export, so only a backing file that shrank reads short.
            buf[n..].fill(0);
            Ok(Outcome::Data)
        }
        nbd::CMD_WRITE => {
            file.write_at(offset, &buf[..length])?;
            if fua {
                file.sync()?;
            }
            Ok(Outcome::Done)
        }
        nbd::CMD_FLUSH => file.sync().map(|()| Outcome::Done),
        nbd::CMD_TRIM | nbd::CMD_WRITE_ZEROES => {
            // A trimmed range may read as anything, and zeros are one such thing: both drop
            // the range's cached blocks and punch the backing file, unless the client asked
            // for zeros written (NO_HOLE).
            if request.flags & nbd::CMD_FLAG_NO_HOLE != 0 {
                file.write_zeros(offset, length as u64)?;
            } else {
                file.discard(offset, length as u64)?;
            }
            if fua {
                file.sync()?;
            }
            Ok(Outcome::Done)
        }
        nbd::CMD_CACHE => {
            // Read through the cache, a chunk at a time (the request's charge), for the
            // policy to admit as any read.
            buf.resize((length as u64).min(request.charge()).max(1) as usize, 0);
            let mut at = 0;
            while at < length {
                let n = buf.len().min(length - at);
                file.read_at(offset + at as u64, &mut buf[..n])?;
                at += n;
            }
            buf.clear();
            Ok(Outcome::Done)
        }
        nbd::CMD_BLOCK_STATUS => {
            let most =
                if request.flags & nbd::CMD_FLAG_REQ_ONE != 0 { 1 } else { nbd::EXTENTS_MAX };
            let extents = file.allocation(offset, length as u64, most)?;
            buf.clear();
            buf.extend_from_slice(&nbd::ALLOCATION_ID.to_be_bytes());
            for extent in extents {
                let flags = if extent.data { 0 } else { nbd::STATE_HOLE | nbd::STATE_ZERO };
                // Inside the request, whose length is 32 bits.
                buf.extend_from_slice(&(extent.len as u32).to_be_bytes());
                buf.extend_from_slice(&flags.to_be_bytes());
            }
            Ok(Outcome::Extents)
        }
        _ => unreachable!("checked requests are of known commands"),
    }
}
