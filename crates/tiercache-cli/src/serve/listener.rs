//! Where `tiercache serve` listens: the socket `--listen` names, made here, or the one systemd
//! passes by socket activation (`LISTEN_PID` and `LISTEN_FDS`, the socket as descriptor 3,
//! systemd's `sd_listen_fds(3)`), so a unit's `.socket` holds the address and permissions and
//! the server starts on the first connection.

use std::io;
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;

use anyhow::{bail, Context};

use super::connection::Stream;
use super::ServeArgs;

/// Where the server listens: a unix socket (with its path, and whether this server made it,
/// and so removes it when it stops) or TCP.
pub(super) enum Listener {
    Unix(UnixListener, PathBuf, bool),
    Tcp(std::net::TcpListener),
}

fn listen(spec: &str, args: &ServeArgs) -> anyhow::Result<Listener> {
    if let Some(path) = spec.strip_prefix("unix:") {
        let path = PathBuf::from(path);
        if path.exists() {
            // A socket no server answers on is left from a stop that could not remove it.
            use std::os::unix::fs::FileTypeExt;
            let socket = std::fs::metadata(&path)?.file_type().is_socket();
            if !socket || std::os::unix::net::UnixStream::connect(&path).is_ok() {
                bail!(
                    "--listen {spec}: {} exists (another server, or not a socket)",
                    path.display()
                );
            }
            std::fs::remove_file(&path)?;
        }
        let mode = match &args.socket_mode {
            Some(text) => u32::from_str_radix(text, 8)
                .ok()
                .filter(|m| *m <= 0o777)
                .with_context(|| format!("--socket-mode {text}: permissions in octal, as 660"))?,
            None => 0o600,
        };
        if mode & 0o600 != 0o600 {
            bail!(
                "--socket-mode {:o}: the socket's owner must be able to read and write it (a \
                 client connects with both), as 600 or 660",
                mode
            );
        }
        // Created with no permission for others at all (the umask), then given its mode: no
        // moment where another user could connect.
        // SAFETY: umask only sets this process's file-creation mask; it is restored at once.
        let umask = unsafe { libc::umask(0o177) };
        let bound = UnixListener::bind(&path);
        // SAFETY: as above.
        unsafe { libc::umask(umask) };
        let listener = bound
            .with_context(|| format!("--listen {spec}: cannot listen on {}", path.display()))?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).with_context(
            || format!("--socket-mode: cannot set {}'s permissions", path.display()),
        )?;
        listener.set_nonblocking(true)?;
        return Ok(Listener::Unix(listener, path, true));
    }
    if let Some(address) = spec.strip_prefix("tcp:") {
        let listener = std::net::TcpListener::bind(address)
            .with_context(|| format!("--listen {spec}: cannot listen on {address}"))?;
        exposed(&listener, args, &format!("--listen {spec}"))?;
        listener.set_nonblocking(true)?;
        return Ok(Listener::Tcp(listener));
    }
    bail!("--listen {spec}: use unix:PATH or tcp:HOST:PORT")
}

impl Listener {
    /// Where clients connect, as `--listen` takes it (a TCP port 0 resolved to the one bound).
    pub(super) fn address(&self) -> String {
        match self {
            Listener::Unix(_, path, _) => format!("unix:{}", path.display()),
            Listener::Tcp(l) => match l.local_addr() {
                Ok(address) => format!("tcp:{address}"),
                Err(_) => "tcp:?".to_string(),
            },
        }
    }

    /// The next connection, and the client's address over TCP.
    pub(super) fn accept(&self) -> io::Result<(Stream, Option<std::net::IpAddr>)> {
        match self {
            Listener::Unix(l, _, _) => l.accept().map(|(s, _)| (Stream::Unix(s), None)),
            Listener::Tcp(l) => l.accept().map(|(s, at)| {
                let _ = s.set_nodelay(true);
                (Stream::Tcp(s), Some(at.ip()))
            }),
        }
    }
}

/// The first descriptor systemd passes (`SD_LISTEN_FDS_START`).
const LISTEN_FDS_START: RawFd = 3;

impl Listener {
    /// The socket systemd passed (`activated`), if this process was started by socket
    /// activation; else the one `--listen` names, made now.
    pub(super) fn new(args: &ServeArgs, activated: Option<Listener>) -> anyhow::Result<Listener> {
        if let Some(listener) = activated {
            return Ok(listener);
        }
        let Some(spec) = &args.listen else {
            bail!(
                "--listen: where to listen (unix:PATH or tcp:HOST:PORT) is missing (or start \
                 the server by systemd socket activation)"
            )
        };
        listen(spec, args)
    }

    /// Removes the unix socket if this server made it (a socket systemd passed is systemd's).
    pub(super) fn remove(&self) {
        if let Listener::Unix(_, path, true) = self {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The socket systemd passed: `LISTEN_PID` is this process and `LISTEN_FDS` says one socket
/// (descriptor 3), a listening unix or TCP socket. `None` when the variables are not this
/// process's (they were meant for a parent). Each refusal names what is wrong. Called before
/// the server opens any file, so that descriptor 3 is still the one it was started with.
pub(super) fn activated(args: &ServeArgs) -> anyhow::Result<Option<Listener>> {
    let Ok(pid) = std::env::var("LISTEN_PID") else { return Ok(None) };
    if pid.trim().parse::<u32>().ok() != Some(std::process::id()) {
        return Ok(None);
    }
    let count = std::env::var("LISTEN_FDS").unwrap_or_default();
    if count.trim() != "1" {
        bail!(
            "socket activation: LISTEN_FDS={count}: tiercache serve listens on one socket (give \
             its unit one ListenStream=)"
        );
    }
    if let Some(listen) = &args.listen {
        bail!("--listen {listen}: the server was given its socket by socket activation; drop it");
    }
    if args.socket_mode.is_some() {
        bail!("--socket-mode: a socket systemd passed has its unit's SocketMode=");
    }
    let fd = LISTEN_FDS_START;
    let int = |level, name| -> io::Result<libc::c_int> {
        let mut value: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt writes at most `len` bytes into `value`, which this frame owns.
        let done =
            unsafe { libc::getsockopt(fd, level, name, (&raw mut value).cast(), &raw mut len) };
        if done != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(value)
    };
    let what = "socket activation: descriptor 3";
    let listening = int(libc::SOL_SOCKET, libc::SO_ACCEPTCONN)
        .with_context(|| format!("{what} is not a socket"))?;
    if listening == 0 {
        bail!(
            "{what} is a socket that does not listen (give the unit ListenStream=, not Accept=yes)"
        );
    }
    let family = int(libc::SOL_SOCKET, libc::SO_DOMAIN)?;
    // SAFETY: fcntl on the descriptor systemd passed, no pointers: close it on exec, so
    // nothing this process starts holds the socket.
    unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    let listener = match family {
        libc::AF_UNIX => {
            // SAFETY: descriptor 3 is a listening socket systemd passed to this process alone
            // (LISTEN_PID), owned from here on by the listener.
            let listener = unsafe { UnixListener::from_raw_fd(fd) };
            let address = listener.local_addr()?;
            let path =
                address.as_pathname().map(PathBuf::from).unwrap_or_else(|| "(abstract)".into());
            listener.set_nonblocking(true)?;
            Listener::Unix(listener, path, false)
        }
        libc::AF_INET | libc::AF_INET6 => {
            // SAFETY: as above.
            let listener = unsafe { std::net::TcpListener::from_raw_fd(fd) };
            exposed(&listener, args, what)?;
            listener.set_nonblocking(true)?;
            Listener::Tcp(listener)
        }
        other => bail!("{what} is a socket of family {other}, neither unix nor TCP"),
    };
    Ok(Some(listener))
}

/// Refuses a TCP socket other machines reach when TLS is off, unless `--insecure-no-tls`
/// says so: anyone who reaches it could read and write the exports.
fn exposed(listener: &std::net::TcpListener, args: &ServeArgs, what: &str) -> anyhow::Result<()> {
    let bound = listener.local_addr()?;
    let tls = args.tls_cert.is_some() || args.tls_psk.is_some();
    if !bound.ip().is_loopback() && !tls && !args.insecure_no_tls {
        bail!(
            "{what}: {} is reachable from other machines, and TLS is off: anyone who reaches \
             it could read and write the export. Give --tls-cert and --tls-key (and \
             --tls-client-ca to admit only clients with a certificate it signed), listen on \
             127.0.0.1 or a unix socket, or pass --insecure-no-tls to serve it without TLS on \
             a network you trust",
            bound.ip()
        );
    }
    Ok(())
}
