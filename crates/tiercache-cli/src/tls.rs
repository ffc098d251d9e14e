//! TLS for `tiercache serve`: the server's configuration from PEM files, and the encryption of
//! a connection whose client sent NBD_OPT_STARTTLS.
//!
//! A connection is read by one thread and written by several (its workers' replies), and cut
//! from outside to end it. A TLS session is one object that both directions go through, so
//! rather than lock it around every read and write, a pump thread owns it: it carries bytes
//! between the client's socket (TLS records) and one end of a socket pair (plain bytes), and
//! the connection uses the pair's other end as it uses any socket. Timeouts, cuts and ends
//! pass through: the connection's end closed or cut ends the session (close_notify, then the
//! socket); the client gone or its socket cut ends the pair. Memory is bounded: the pump reads
//! the client only while less than [`PLAIN_MAX`] bytes wait for the connection, and reads the
//! connection only once everything it wrote is on its way to the client.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, CertificateRevocationListDer, PrivateKeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, ServerConfig};
use rustls::{ServerConnection, SignatureScheme};

mod psk;
mod subject;

/// The server's TLS: certificates (rustls), or pre-shared keys (GnuTLS, `psk`).
#[derive(Clone)]
pub enum ServerTls {
    Certificates(Arc<ServerConfig>),
    Psk(Arc<psk::Keys>),
}

impl ServerTls {
    /// The keys of `--tls-psk FILE`.
    pub fn psk(path: &Path) -> anyhow::Result<ServerTls> {
        Ok(ServerTls::Psk(psk::Keys::load(path)?))
    }

    /// Starts TLS on `socket` (the client has just been told to go ahead), its handshake to
    /// end by `deadline`, and returns the plain end of the connection.
    pub fn start<S>(&self, socket: S, deadline: Instant) -> io::Result<UnixStream>
    where
        S: Read + Write + AsRawFd + Send + 'static,
    {
        match self {
            ServerTls::Certificates(config) => start(socket, config.clone()),
            ServerTls::Psk(keys) => psk::start(socket, keys.clone(), deadline),
        }
    }
}

/// Decrypted bytes the pump holds for a connection that has not read them yet.
const PLAIN_MAX: usize = 256 << 10;

/// How long the pump tries to send the end of the session once the connection is done.
const CLOSING: Duration = Duration::from_secs(2);

/// Which clients TLS admits, by their certificates: signed by the certificate authority `ca`
/// (PEM), not revoked by a certificate revocation list of `crl` (PEM, one or more; a client
/// whose issuer has none there is refused), and, unless `authz` is empty, with a subject among
/// its distinguished names (RFC 4514's form, as `openssl x509 -noout -subject -nameopt
/// RFC2253` prints them).
pub struct Clients<'a> {
    pub ca: &'a Path,
    pub crl: Option<&'a Path>,
    pub authz: Vec<String>,
}

/// The server's TLS configuration: its certificate chain and key (PEM files), and with
/// `clients`, who may connect (a client without a certificate is refused). Each error names
/// its file.
pub fn server_config(
    cert: &Path,
    key: &Path,
    clients: Option<Clients<'_>>,
) -> anyhow::Result<Arc<ServerConfig>> {
    let certs = certificates(cert, "--tls-cert")?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| {
        anyhow::anyhow!("--tls-key {}: no private key read from it ({e})", key.display())
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?;
    let builder = match clients {
        None => builder.with_no_client_auth(),
        Some(Clients { ca, crl, authz }) => {
            let mut roots = RootCertStore::empty();
            for cert in certificates(ca, "--tls-client-ca")? {
                roots.add(cert).with_context(|| {
                    format!("--tls-client-ca {}: not a usable CA certificate", ca.display())
                })?;
            }
            let mut verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            if let Some(path) = crl {
                let read = CertificateRevocationListDer::pem_file_iter(path)
                    .and_then(|crls| crls.collect::<Result<Vec<_>, _>>())
                    .map_err(|e| anyhow::anyhow!("--tls-crl {}: {e}", path.display()))?;
                anyhow::ensure!(!read.is_empty(), "--tls-crl {}: no CRL in it", path.display());
                verifier = verifier.with_crls(read).only_check_end_entity_revocation();
            }
            let verifier = verifier.build().with_context(|| match crl {
                Some(crl) => {
                    format!("--tls-client-ca {} with --tls-crl {}", ca.display(), crl.display())
                }
                None => format!("--tls-client-ca {}", ca.display()),
            })?;
            match authz.is_empty() {
                true => builder.with_client_cert_verifier(verifier),
                false => {
                    builder.with_client_cert_verifier(Arc::new(Authorized { verifier, authz }))
                }
            }
        }
    };
    let config = builder.with_single_cert(certs, key).with_context(|| {
        format!("--tls-cert {} and --tls-key: they do not go together", cert.display())
    })?;
    Ok(Arc::new(config))
}

/// The names of `--tls-authz`: each value a distinguished name, or `@FILE` for a file of them,
/// one a line (blank lines and lines starting with '#' skipped).
pub fn authorized_names(values: &[String]) -> anyhow::Result<Vec<String>> {
    let mut names = Vec::new();
    for value in values {
        match value.strip_prefix('@') {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("--tls-authz @{path}: cannot read it"))?;
                let lines = text.lines().map(str::trim);
                names.extend(
                    lines.filter(|l| !l.is_empty() && !l.starts_with('#')).map(String::from),
                );
            }
            None => names.push(value.trim().to_string()),
        }
    }
    anyhow::ensure!(
        names.iter().all(|n| n.contains('=')),
        "--tls-authz: {:?} is not a distinguished name (as CN=client,O=Example Org)",
        names.iter().find(|n| !n.contains('=')).expect("one")
    );
    Ok(names)
}

/// A client certificate verifier that also wants the certificate's subject among `authz`.
#[derive(Debug)]
struct Authorized {
    verifier: Arc<dyn ClientCertVerifier>,
    authz: Vec<String>,
}

/// Why a client's certificate was refused by `--tls-authz`.
#[derive(Debug)]
struct NotAuthorized(String);

impl std::fmt::Display for NotAuthorized {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the subject {:?} is not in --tls-authz", self.0)
    }
}

impl std::error::Error for NotAuthorized {}

impl ClientCertVerifier for Authorized {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.verifier.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let verified = self.verifier.verify_client_cert(end_entity, intermediates, now)?;
        let subject = subject::subject(end_entity);
        match subject {
            Some(name) if self.authz.contains(&name) => Ok(verified),
            _ => {
                let name = subject.unwrap_or_else(|| "(unreadable)".into());
                let other = rustls::OtherError(Arc::new(NotAuthorized(name)));
                Err(rustls::Error::InvalidCertificate(rustls::CertificateError::Other(other)))
            }
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verifier.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verifier.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.verifier.supported_verify_schemes()
    }
}

/// The certificates of a PEM file, at least one.
fn certificates(path: &Path, option: &str) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let read = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| anyhow::anyhow!("{option} {}: {e}", path.display()))?;
    anyhow::ensure!(!read.is_empty(), "{option} {}: no certificate in it", path.display());
    Ok(read)
}

/// Starts TLS on `socket` (the client has just been told to go ahead) and returns the plain
/// end of the connection. The TLS handshake itself runs in the pump: a client that fails it
/// finds the connection closed, and the caller's next read sees the end.
pub fn start<S>(socket: S, config: Arc<ServerConfig>) -> io::Result<UnixStream>
where
    S: Read + Write + AsRawFd + Send + 'static,
{
    let session = ServerConnection::new(config).map_err(io::Error::other)?;
    let (plain, pumped) = UnixStream::pair()?;
    nonblocking(socket.as_raw_fd())?;
    pumped.set_nonblocking(true)?;
    std::thread::Builder::new()
        .name("tls".into())
        .spawn(move || Pump { socket, plain: pumped, session }.run())?;
    Ok(plain)
}

fn nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor this process holds open, with no pointer arguments.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The thread that owns a connection's TLS session (see the module's documentation).
struct Pump<S> {
    socket: S,
    plain: UnixStream,
    session: ServerConnection,
}

impl<S: Read + Write + AsRawFd> Pump<S> {
    fn run(mut self) {
        if let Err(e) = self.carry() {
            static FAILED: std::sync::Mutex<crate::failures::Failures> =
                std::sync::Mutex::new(crate::failures::Failures::new("a TLS session failed"));
            FAILED.lock().unwrap_or_else(|p| p.into_inner()).note(&e);
        }
        // Dropping both ends: the connection's reads see the end, and the client's socket closes.
    }

    fn carry(&mut self) -> io::Result<()> {
        let mut buf = vec![0u8; 64 << 10];
        let mut to_plain: Vec<u8> = Vec::new();
        // Whether the client may still send (its socket not at its end), whether the
        // connection may (its end of the pair not closed), and when it closed.
        let (mut client_open, mut closed_at, mut told_end) = (true, None::<Instant>, false);
        loop {
            // Out first: TLS records to the client, plain bytes to the connection.
            while self.session.wants_write() {
                match self.session.write_tls(&mut self.socket) {
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(_) if closed_at.is_some() => return Ok(()), // The client is gone.
                    Err(e) => return Err(e),
                }
            }
            if !to_plain.is_empty() {
                match self.plain.write(&to_plain) {
                    Ok(n) => drop(to_plain.drain(..n)),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(_) => return Ok(()), // The connection is gone.
                }
            }
            if !client_open && to_plain.is_empty() && !told_end {
                // Everything the client sent is delivered: the connection reads its end.
                let _ = self.plain.shutdown(std::net::Shutdown::Write);
                told_end = true;
            }
            if let Some(at) = closed_at {
                if !self.session.wants_write() || at.elapsed() > CLOSING {
                    return Ok(());
                }
            }
            let socket_events =
                (if client_open && to_plain.len() < PLAIN_MAX { libc::POLLIN } else { 0 })
                    | (if self.session.wants_write() { libc::POLLOUT } else { 0 });
            let plain_events =
                (if closed_at.is_none() && !self.session.wants_write() { libc::POLLIN } else { 0 })
                    | (if to_plain.is_empty() { 0 } else { libc::POLLOUT });
            let mut fds = [
                libc::pollfd { fd: self.socket.as_raw_fd(), events: socket_events, revents: 0 },
                libc::pollfd { fd: self.plain.as_raw_fd(), events: plain_events, revents: 0 },
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
            let readable = |events: i16, revents: i16| {
                events & libc::POLLIN != 0
                    && revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0
            };
            if readable(socket_events, fds[0].revents) {
                match self.session.read_tls(&mut self.socket) {
                    Ok(0) => client_open = false,
                    Ok(_) => {
                        if let Err(e) = self.session.process_new_packets() {
                            // The alert saying why goes out if it can.
                            let _ = self.session.write_tls(&mut self.socket);
                            return Err(io::Error::other(format!("a client refused: {e}")));
                        }
                        loop {
                            match self.session.reader().read(&mut buf) {
                                Ok(0) => {
                                    client_open = false; // close_notify
                                    break;
                                }
                                Ok(n) => to_plain.extend_from_slice(&buf[..n]),
                                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                                Err(e) => return Err(e),
                            }
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(_) => client_open = false,
                }
            }
            if readable(plain_events, fds[1].revents) {
                match self.plain.read(&mut buf) {
                    Ok(n) if n > 0 => self.session.writer().write_all(&buf[..n])?,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    _ => {
                        // The connection is done (or cut): end the session.
                        self.session.send_close_notify();
                        closed_at = Some(Instant::now());
                    }
                }
            }
        }
    }
}
