//! TLS with pre-shared keys, for `tiercache serve --tls-psk FILE`: what qemu-nbd
//! (`tls-creds-psk`) and nbdkit (`--tls-psk`) serve, for clients that hold a key instead of a
//! certificate. The keys file is GnuTLS's `psktool` format, `identity:key in hex` a line, the
//! file those servers and their clients read.
//!
//! rustls has no external pre-shared keys (rustls/rustls#174), so these sessions run in GnuTLS,
//! the library qemu, nbdkit and libnbd use themselves, loaded when the option is given
//! (`libgnutls.so.30`: Debian's `libgnutls30`, which qemu-utils and libnbd-bin depend on). Nothing
//! is built or linked against it, and where it is missing the option is an error saying so.
//!
//! A session is a pump as for certificates (`crate::tls`): the connection reads and writes
//! plain bytes on one end of a socket pair. Here two threads carry them, one each way (GnuTLS
//! takes one sending and one receiving thread on a session); either end closing or being cut
//! ends both. The handshake must finish by the connection's handshake deadline.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use anyhow::{bail, Context};

type Session = *mut c_void;

/// The GnuTLS functions used, from the library loaded at run time.
struct Gnutls {
    psk_allocate_server_credentials: unsafe extern "C" fn(*mut *mut c_void) -> c_int,
    psk_set_server_credentials_file: unsafe extern "C" fn(*mut c_void, *const c_char) -> c_int,
    init: unsafe extern "C" fn(*mut Session, c_uint) -> c_int,
    priority_set_direct: unsafe extern "C" fn(Session, *const c_char, *mut *const c_char) -> c_int,
    credentials_set: unsafe extern "C" fn(Session, c_int, *mut c_void) -> c_int,
    transport_set_int2: unsafe extern "C" fn(Session, c_int, c_int),
    handshake_set_timeout: unsafe extern "C" fn(Session, c_uint),
    handshake: unsafe extern "C" fn(Session) -> c_int,
    record_recv: unsafe extern "C" fn(Session, *mut c_void, usize) -> isize,
    record_send: unsafe extern "C" fn(Session, *const c_void, usize) -> isize,
    record_check_pending: unsafe extern "C" fn(Session) -> usize,
    bye: unsafe extern "C" fn(Session, c_int) -> c_int,
    deinit: unsafe extern "C" fn(Session),
    strerror: unsafe extern "C" fn(c_int) -> *const c_char,
    error_is_fatal: unsafe extern "C" fn(c_int) -> c_int,
}

// GnuTLS's constants (gnutls/gnutls.h).
const SERVER: c_uint = 1;
const CRD_PSK: c_int = 4;
const SHUT_WR: c_int = 1;
const E_AGAIN: isize = -28;
const E_INTERRUPTED: isize = -52;
/// TLS 1.2 and 1.3 only, the pre-shared key exchanges (with ephemeral keys first) added.
const PRIORITIES: &CStr = c"NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:+ECDHE-PSK:+DHE-PSK:+PSK";

/// The library, loaded once; why not, if it cannot be.
fn gnutls() -> Result<&'static Gnutls, String> {
    static LOADED: OnceLock<Result<Gnutls, String>> = OnceLock::new();
    LOADED.get_or_init(load).as_ref().map_err(Clone::clone)
}

fn load() -> Result<Gnutls, String> {
    const LIBRARY: &CStr = c"libgnutls.so.30";
    // SAFETY: dlopen of a library by name; its constructors are GnuTLS's own.
    let handle = unsafe { libc::dlopen(LIBRARY.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if handle.is_null() {
        return Err(
            "libgnutls.so.30 cannot be loaded (install GnuTLS: Debian's libgnutls30)".into()
        );
    }
    // SAFETY: each field's type is the C signature (gnutls.h, GnuTLS 3) of the function of
    // that name; the handle is never closed, so the functions stay valid.
    unsafe {
        Ok(Gnutls {
            psk_allocate_server_credentials: function(
                handle,
                c"gnutls_psk_allocate_server_credentials",
            )?,
            psk_set_server_credentials_file: function(
                handle,
                c"gnutls_psk_set_server_credentials_file",
            )?,
            init: function(handle, c"gnutls_init")?,
            priority_set_direct: function(handle, c"gnutls_priority_set_direct")?,
            credentials_set: function(handle, c"gnutls_credentials_set")?,
            transport_set_int2: function(handle, c"gnutls_transport_set_int2")?,
            handshake_set_timeout: function(handle, c"gnutls_handshake_set_timeout")?,
            handshake: function(handle, c"gnutls_handshake")?,
            record_recv: function(handle, c"gnutls_record_recv")?,
            record_send: function(handle, c"gnutls_record_send")?,
            record_check_pending: function(handle, c"gnutls_record_check_pending")?,
            bye: function(handle, c"gnutls_bye")?,
            deinit: function(handle, c"gnutls_deinit")?,
            strerror: function(handle, c"gnutls_strerror")?,
            error_is_fatal: function(handle, c"gnutls_error_is_fatal")?,
        })
    }
}

/// The function `name` of the library `handle`, as `F`.
///
/// # Safety
/// `F` must be a function pointer type of the C function's own signature.
unsafe fn function<F: Copy>(handle: *mut c_void, name: &CStr) -> Result<F, String> {
    assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>());
    // SAFETY: dlsym on a handle dlopen returned, with a NUL-terminated name.
    let found = unsafe { libc::dlsym(handle, name.as_ptr()) };
    if found.is_null() {
        return Err(format!("libgnutls.so.30 has no {}", name.to_string_lossy()));
    }
    // SAFETY: a function's address, as the caller's function pointer type (same size).
    Ok(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&found) })
}

/// GnuTLS's words for error `code`.
fn error(code: isize) -> io::Error {
    let text = match gnutls() {
        // SAFETY: gnutls_strerror returns a static NUL-terminated string for any code.
        Ok(g) => unsafe { CStr::from_ptr((g.strerror)(code as c_int)) }.to_string_lossy().into(),
        Err(e) => e,
    };
    io::Error::other(format!("TLS-PSK: {text}"))
}

/// The server's pre-shared keys: GnuTLS credentials over the keys file.
pub struct Keys {
    credentials: *mut c_void,
}

// SAFETY: GnuTLS credentials are only read once set, and reading them from several sessions
// in several threads at once is safe (GnuTLS's manual, "Thread safety").
unsafe impl Send for Keys {}
unsafe impl Sync for Keys {}

impl Keys {
    /// The keys of `path` (`identity:hex key` a line, psktool's format), checked here so that a
    /// bad file is an error naming its line, not a failed handshake later.
    pub fn load(path: &Path) -> anyhow::Result<Arc<Keys>> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("--tls-psk {}: cannot read it", path.display()))?;
        let mut keys = 0;
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let place = || format!("--tls-psk {}, line {}", path.display(), i + 1);
            let Some((identity, key)) = line.split_once(':') else {
                bail!("{}: not identity:key (the key in hex, as psktool writes it)", place());
            };
            let hex = !key.is_empty() && key.len() % 2 == 0;
            if identity.is_empty() || !hex || !key.bytes().all(|b| b.is_ascii_hexdigit()) {
                bail!("{}: not identity:key (the key in hex, as psktool writes it)", place());
            }
            keys += 1;
        }
        if keys == 0 {
            bail!("--tls-psk {}: no keys in it", path.display());
        }
        let g = gnutls().map_err(|e| anyhow::anyhow!("--tls-psk: {e}"))?;
        let file = CString::new(path.as_os_str().as_encoded_bytes())?;
        let mut credentials = std::ptr::null_mut();
        // SAFETY: GnuTLS allocates the credentials into the pointer given, and keeps a copy
        // of the file's name; both calls' arguments live for the calls.
        let done = unsafe {
            match (g.psk_allocate_server_credentials)(&raw mut credentials) {
                0 => (g.psk_set_server_credentials_file)(credentials, file.as_ptr()),
                failed => failed,
            }
        };
        if done != 0 {
            bail!("--tls-psk {}: {}", path.display(), error(done as isize));
        }
        Ok(Arc::new(Keys { credentials }))
    }
}

/// A session, shared by the pump's two threads (one sending, one receiving, as GnuTLS allows).
struct Shared {
    session: Session,
    /// The client's socket, owned by the session's lifetime.
    socket: RawFd,
}

// SAFETY: one thread receives and one sends on the session, which GnuTLS allows; nothing
// else touches it until both are done.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

/// Starts a TLS-PSK session on `socket` (the client has just been told to go ahead), its
/// handshake to end by `deadline`, and returns the plain end of the connection.
pub fn start<S>(socket: S, keys: Arc<Keys>, deadline: Instant) -> io::Result<UnixStream>
where
    S: Read + Write + AsRawFd + Send + 'static,
{
    let g = gnutls().map_err(io::Error::other)?;
    let (plain, pumped) = UnixStream::pair()?;
    let mut session: Session = std::ptr::null_mut();
    // SAFETY: gnutls_init writes a new session into the pointer; the calls after set it up
    // with the credentials (which outlive it: `keys` moves into the pump) and the socket.
    let done = unsafe {
        match (g.init)(&raw mut session, SERVER) {
            0 => {
                match (g.priority_set_direct)(session, PRIORITIES.as_ptr(), std::ptr::null_mut()) {
                    0 => (g.credentials_set)(session, CRD_PSK, keys.credentials),
                    failed => failed,
                }
            }
            failed => failed,
        }
    };
    if done != 0 {
        if !session.is_null() {
            // SAFETY: the session gnutls_init made, used by nothing else.
            unsafe { (g.deinit)(session) };
        }
        return Err(error(done as isize));
    }
    let fd = socket.as_raw_fd();
    // SAFETY: the session reads and writes the socket's descriptor, which `socket` keeps open
    // for as long as the pump (and so the session) lives.
    unsafe { (g.transport_set_int2)(session, fd, fd) };
    let shared = Arc::new(Shared { session, socket: fd });
    std::thread::Builder::new().name("tls-psk".into()).spawn(move || {
        let _owned = (socket, keys);
        if let Err(e) = pump(g, &shared, pumped, deadline) {
            static FAILED: std::sync::Mutex<crate::failures::Failures> =
                std::sync::Mutex::new(crate::failures::Failures::new("a TLS-PSK session failed"));
            FAILED.lock().unwrap_or_else(|p| p.into_inner()).note(&e);
        }
        // SAFETY: both threads are done with the session.
        unsafe { (g.deinit)(shared.session) };
    })?;
    Ok(plain)
}

/// The handshake, then the bytes both ways until either end closes.
fn pump(
    g: &'static Gnutls,
    shared: &Arc<Shared>,
    plain: UnixStream,
    deadline: Instant,
) -> io::Result<()> {
    let left = deadline.saturating_duration_since(Instant::now());
    // SAFETY: the session, used by this thread alone until the handshake is done.
    unsafe { (g.handshake_set_timeout)(shared.session, left.as_millis().max(1) as c_uint) };
    loop {
        // SAFETY: as above.
        let done = unsafe { (g.handshake)(shared.session) } as isize;
        if done == 0 {
            break;
        }
        // SAFETY: a pure function of the code.
        let fatal = unsafe { (g.error_is_fatal)(done as c_int) } != 0;
        if fatal || Instant::now() >= deadline {
            cut(shared.socket);
            return Err(error(done));
        }
    }
    super::nonblocking(shared.socket)?;
    let sending = {
        let (shared, plain) = (shared.clone(), plain.try_clone()?);
        std::thread::Builder::new()
            .name("tls-psk-out".into())
            .spawn(move || send(g, &shared, plain))?
    };
    let received = receive(g, shared, plain);
    let sent = sending.join().unwrap_or_else(|_| Err(io::Error::other("the sender panicked")));
    received.and(sent)
}

/// Client to connection: records in, plain bytes out, until the client ends (its end passed
/// on) or the connection's end closes (the client's socket cut).
fn receive(g: &Gnutls, shared: &Shared, mut plain: UnixStream) -> io::Result<()> {
    let mut buf = vec![0u8; 16 << 10];
    loop {
        // SAFETY: the session; this thread alone receives.
        if unsafe { (g.record_check_pending)(shared.session) } == 0 {
            let ready = wait(shared.socket, libc::POLLIN, &plain)?;
            if !ready {
                cut(shared.socket); // The connection is done, or cut.
                return Ok(());
            }
        }
        // SAFETY: the session and a buffer of the length given; this thread alone receives.
        let n = unsafe { (g.record_recv)(shared.session, buf.as_mut_ptr().cast(), buf.len()) };
        match n {
            0 => {
                let _ = plain.shutdown(std::net::Shutdown::Write);
                return Ok(());
            }
            n if n > 0 => {
                if plain.write_all(&buf[..n as usize]).is_err() {
                    cut(shared.socket);
                    return Ok(());
                }
            }
            E_AGAIN | E_INTERRUPTED => {}
            failed => {
                let _ = plain.shutdown(std::net::Shutdown::Both);
                cut(shared.socket);
                return Err(error(failed));
            }
        }
    }
}

/// Connection to client: plain bytes in, records out, until the connection's end closes (the
/// session ended with close_notify) or the client's socket fails.
fn send(g: &Gnutls, shared: &Shared, mut plain: UnixStream) -> io::Result<()> {
    let mut buf = vec![0u8; 16 << 10];
    loop {
        let n = match plain.read(&mut buf) {
            Ok(0) | Err(_) => {
                // SAFETY: the session; this thread alone sends. The socket is non-blocking, so
                // a client that reads nothing cannot hold the close.
                unsafe { (g.bye)(shared.session, SHUT_WR) };
                cut(shared.socket);
                return Ok(());
            }
            Ok(n) => n,
        };
        let mut at = 0;
        while at < n {
            // SAFETY: the session and the unsent part of the buffer; this thread alone sends
            // (after E_AGAIN the same bytes are offered again, as GnuTLS asks).
            let sent =
                unsafe { (g.record_send)(shared.session, buf[at..n].as_ptr().cast(), n - at) };
            match sent {
                sent if sent > 0 => at += sent as usize,
                E_AGAIN | E_INTERRUPTED => {
                    if !wait(shared.socket, libc::POLLOUT, &plain)? {
                        cut(shared.socket);
                        return Ok(());
                    }
                }
                failed => {
                    let _ = plain.shutdown(std::net::Shutdown::Both);
                    cut(shared.socket);
                    return Err(error(failed));
                }
            }
        }
    }
}

/// Waits until the client's socket is ready for `events`: true; false once the connection's
/// end of the pair is closed or cut (checked twice a second), or the socket is.
fn wait(socket: RawFd, events: i16, plain: &UnixStream) -> io::Result<bool> {
    loop {
        let mut fds = [
            libc::pollfd { fd: socket, events, revents: 0 },
            libc::pollfd { fd: plain.as_raw_fd(), events: libc::POLLRDHUP, revents: 0 },
        ];
        // SAFETY: two pollfd structures this frame owns, their count given.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), 2, 500) };
        if ready < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if fds[1].revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0 {
            return Ok(false);
        }
        if fds[0].revents & (events | libc::POLLHUP | libc::POLLERR) != 0 {
            return Ok(true);
        }
    }
}

/// Cuts the client's socket both ways: the other thread's wait or call on it returns.
fn cut(socket: RawFd) {
    // SAFETY: shutdown on a descriptor the pump keeps open; no memory involved.
    unsafe { libc::shutdown(socket, libc::SHUT_RDWR) };
}
