//! `tiercache serve`: backing files behind caches, exported as block devices over the Network
//! Block Device protocol (`crate::nbd`), so QEMU, `nbd-client`, fio and anything else that
//! speaks NBD can use them. One server may have several exports, each its own backing file and
//! cache, chosen by the name a client asks for (`config`).
//!
//! Threads, not an async runtime: the cache is thread-safe and every request is a blocking call
//! into it (a read may wait on the backing device), so a thread per request in flight is what
//! an async server would need anyway, without the runtime. Each connection has a thread that
//! reads its requests and a few that serve them side by side (`--threads-per-connection`),
//! replying as each completes, so a client that sends many requests before reading replies
//! gets them served concurrently. Connections run side by side. A FLUSH syncs the whole cache and the backing file,
//! so it covers writes acknowledged on every connection, and the export says so (multi-conn).
//!
//! SIGTERM and SIGINT stop the server cleanly: it stops accepting, lets each connection finish
//! the request it is serving (up to `--shutdown-timeout`, then cuts it), writes every dirty
//! block back, syncs the backing file and exits 0.
//!
//! Exposure is by choice: with `--tls-cert` and `--tls-key` every client must start TLS
//! (NBD_OPT_STARTTLS, `crate::tls`), with `--tls-client-ca` also show a certificate that CA
//! signed; TCP off loopback without TLS needs `--insecure-no-tls`; the unix socket is 0600;
//! the backing file is locked. Every wait on a client is bounded by a deadline that bytes
//! trickling in or out never extend: the handshake, a request, a reply, and idling (optional);
//! a write's buffer grows only as its bytes arrive. Connections still in their handshake have
//! slots of their own, apart from the served ones (`connection`).

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;
use tiercache_engine::{CacheConfig, CachedFile};

use crate::failures::Failures;
use crate::nbd;

mod addresses;
mod config;
mod connection;
mod listener;

use crate::slots::Closed;
use connection::{connection, Handshaking, How, Limits, Memory, Stream};
use listener::Listener;

/// `tiercache serve`'s options. Each may also come from `--config FILE.toml`: its `[serve]`
/// table holds these options by name (underscores for dashes; paths relative to the file), and
/// its `[cache]` table the policy stack, in the schema of `sim`'s options and experiment files
/// (`tiercache_policy::StackSpec`). An option on the command line wins over the file.
#[derive(Args, Clone, Debug, Default)]
pub struct ServeArgs {
    /// A TOML file of options (`[serve]`) and the policy stack (`[cache]`).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The file exported as `tiercache` (read and written through the cache); its length is
    /// the export's size.
    #[arg(long)]
    pub backing: Option<PathBuf>,
    /// Another export: NAME=PATH, or NAME=PATH,read-only, served through a cache of its own
    /// (the cache options less the tier files, which are `--backing`'s; a config file's
    /// `[[export]]` tables give an export its own). May be given several times; a client
    /// chooses by name, and the empty name is the first export.
    #[arg(long)]
    pub export: Vec<String>,
    /// Read and write the backing file with direct I/O (O_DIRECT), so that the page cache
    /// holds none of it and the cache's tiers are the only cache (blocks and the file's length
    /// in whole 4 KiB pages).
    #[arg(long)]
    pub direct: bool,
    /// Make the backing file behave like this device (a preset such as `hdd`, or a TOML
    /// profile): its latency, bandwidth and parallelism, for a disk-like backing on a machine
    /// without one.
    #[arg(long)]
    pub backing_profile: Option<String>,
    /// The cache: its tiers, policies and engine options (shared with `bench` and `ycsb`).
    #[command(flatten)]
    pub cache: crate::cache_args::CacheArgs,
    /// Where to listen: unix:PATH or tcp:HOST:PORT.
    #[arg(long)]
    pub listen: Option<String>,
    /// Most connections served at once (past their handshake); more are closed with a log line
    /// [default: 64].
    #[arg(long)]
    pub max_connections: Option<usize>,
    /// Serve metrics in Prometheus' text format at http://HOST:PORT/metrics (port 0: any free
    /// one, logged).
    #[arg(long)]
    pub metrics: Option<String>,
    /// Threads serving each connection's requests side by side (its replies go out as each
    /// completes) [default: 4].
    #[arg(long)]
    pub threads_per_connection: Option<usize>,
    /// Export the device read-only: writes, trims and zeroes are refused (EPERM), the backing
    /// file is opened read-only, and the cache must not keep dirty blocks (write-through).
    #[arg(long)]
    pub read_only: bool,
    /// The server's certificate chain (PEM): with --tls-key, every client must start TLS
    /// (NBD_OPT_STARTTLS) before anything else; plain clients are refused.
    #[arg(long)]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long)]
    pub tls_key: Option<PathBuf>,
    /// TLS with pre-shared keys instead of certificates: a file of `identity:key` lines (the
    /// key in hex, as GnuTLS's psktool writes them; qemu's tls-creds-psk and nbdkit's
    /// --tls-psk read the same). Every client must start TLS with one of them. Needs GnuTLS
    /// (libgnutls30) at run time.
    #[arg(long)]
    pub tls_psk: Option<PathBuf>,
    /// A certificate authority (PEM): every client must present a certificate it signed.
    #[arg(long)]
    pub tls_client_ca: Option<PathBuf>,
    /// Certificate revocation lists (PEM) of --tls-client-ca: a client whose certificate one
    /// revokes is refused, and so is one whose issuer has no list in the file.
    #[arg(long)]
    pub tls_crl: Option<PathBuf>,
    /// Only clients whose certificate's subject is this distinguished name, as RFC 4514
    /// writes it (`openssl x509 -noout -subject -nameopt RFC2253` prints it: CN=client,O=Org);
    /// or @FILE, a file of them one a line. May be given several times; needs
    /// --tls-client-ca.
    #[arg(long)]
    pub tls_authz: Vec<String>,
    /// Listen on a TCP address other than loopback without TLS: anyone who reaches the port
    /// can read and write the export.
    #[arg(long)]
    pub insecure_no_tls: bool,
    /// Over TCP, only clients from these networks may connect (comma-separated, CIDR: as
    /// 10.0.0.0/8,192.168.1.7,fd00::/8); others are closed as they are accepted.
    #[arg(long)]
    pub allow: Option<String>,
    /// Over TCP, clients from these networks are closed as they are accepted (CIDR, as
    /// --allow); it wins over --allow.
    #[arg(long)]
    pub deny: Option<String>,
    /// The unix socket's permissions, in octal [default: 600: its owner alone].
    #[arg(long)]
    pub socket_mode: Option<String>,
    /// Seconds a client has, from being accepted, to finish the handshake (TLS included)
    /// before its connection is closed, however its bytes trickle in [default: 10].
    #[arg(long)]
    pub handshake_timeout: Option<f64>,
    /// The most bytes the server holds for requests and replies in flight, over all
    /// connections (writes read, reads not yet sent); a request that would pass it waits for
    /// others' replies to go out. Each connection holds at most 256 MiB of it
    /// [default: 1GiB].
    #[arg(long)]
    pub memory_limit: Option<String>,
    /// Connections in their handshake at once (a thread each), apart from the served ones:
    /// when all are taken, the one that has been at it longest is closed to let a new one in
    /// [default: 512].
    #[arg(long)]
    pub max_handshakes: Option<usize>,
    /// Connections from one address in their handshake at once: a new one past it closes that
    /// address's oldest, so one address cannot take the whole pool [default: 64].
    #[arg(long)]
    pub max_handshakes_per_address: Option<usize>,
    /// Seconds a request may take to arrive whole once its first byte has, and its reply to
    /// be read by the client once it starts going out; a client slower than that is cut
    /// [default: 10].
    #[arg(long)]
    pub request_timeout: Option<f64>,
    /// Seconds a connection may send nothing (no request) before it is closed [default: none].
    #[arg(long)]
    pub idle_timeout: Option<f64>,
    /// Seconds a stop (SIGTERM, SIGINT) waits for the requests in flight; connections still
    /// busy then are cut, and the dirty blocks written back all the same [default: 10].
    #[arg(long)]
    pub shutdown_timeout: Option<f64>,
}

/// Set by SIGTERM and SIGINT.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

pub fn run(args: &ServeArgs) -> anyhow::Result<()> {
    let (args, planned) = config::resolve(args)?;
    let activated = listener::activated(&args)?;
    let addresses = addresses::Addresses::new(args.allow.as_deref(), args.deny.as_deref())?;
    if addresses.is_set() && !args.listen.as_deref().is_some_and(|l| l.starts_with("tcp:")) {
        bail!(
            "--allow and --deny choose clients by their TCP address; a unix socket's \
             permissions (--socket-mode) say who may connect to it"
        );
    }
    let tls = tls(&args)?;
    let exports = planned.iter().map(open).collect::<anyhow::Result<Vec<_>>>()?;
    let (limits, shutdown, ceiling) = limits(&args)?;
    // Listening last: a bad option above leaves no socket behind.
    let listener = Listener::new(&args, activated)?;
    let metrics = Arc::new(crate::metrics::Metrics::default());
    if let Some(address) = &args.metrics {
        let http = std::net::TcpListener::bind(address)
            .with_context(|| format!("--metrics {address}: cannot listen"))?;
        let at = http.local_addr()?;
        eprintln!("tiercache serve: metrics on http://{at}/metrics");
        if !at.ip().is_loopback() {
            eprintln!(
                "warning: --metrics {address}: reachable from other machines, without TLS or \
                 authentication: anyone who reaches it reads the cache's counters (listen on \
                 127.0.0.1 and scrape through a proxy you trust)"
            );
        }
        let files = exports.iter().map(|e| (e.name.clone(), e.file.clone())).collect();
        let metrics = metrics.clone();
        std::thread::spawn(move || crate::metrics::serve(http, metrics, files));
    }
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
    }
    let names: Vec<String> = exports.iter().map(|e| format!("'{}'", e.name)).collect();
    eprintln!(
        "tiercache serve: listening on {}{} (export{} {})",
        listener.address(),
        match (&tls, &args.tls_client_ca) {
            (None, _) => "",
            (Some(crate::tls::ServerTls::Psk(_)), _) => " with TLS-PSK",
            (Some(_), None) => " with TLS",
            (Some(_), Some(_)) if !args.tls_authz.is_empty() => {
                " with TLS and client certificates named in --tls-authz"
            }
            (Some(_), Some(_)) => " with TLS and client certificates",
        },
        if names.len() == 1 { "" } else { "s" },
        names.join(", ")
    );
    let served = connection::Exports {
        offers: exports
            .iter()
            .map(|e| -> anyhow::Result<nbd::Export> {
                let (size, block) = (e.file.len()?, e.file.cache().block_size() as u32);
                let offer = nbd::Offer { size, block, read_only: e.read_only };
                Ok(nbd::Export { name: e.name.clone(), offer })
            })
            .collect::<anyhow::Result<_>>()?,
        files: exports.iter().map(|e| e.file.clone()).collect(),
    };
    let serving = Serving {
        exports: Arc::new(served),
        metrics,
        how: How {
            workers: args.threads_per_connection.unwrap_or(4),
            limits,
            tls,
            served: Arc::new(AtomicUsize::new(0)),
            max_served: args.max_connections.unwrap_or(64),
            memory: Memory::new(ceiling),
        },
        handshaking: Handshaking::new(
            args.max_handshakes.unwrap_or(512),
            args.max_handshakes_per_address.unwrap_or(64),
        ),
        addresses,
    };
    let connections = serving.accept_until_stopped(&listener);
    finish(connections, shutdown);
    listener.remove();
    for export in &exports {
        let dirty = export.file.cache().dirty_blocks();
        export.file.flush_backing()?;
        eprintln!(
            "tiercache serve: export '{}': wrote back {dirty} dirty blocks and synced the backing \
             file",
            export.name
        );
    }
    Ok(())
}

/// The server's TLS configuration, if the options ask for TLS (an error names the option that
/// does not go with the others).
fn tls(args: &ServeArgs) -> anyhow::Result<Option<crate::tls::ServerTls>> {
    if let Some(keys) = &args.tls_psk {
        let certificates = [
            ("--tls-cert", args.tls_cert.is_some()),
            ("--tls-key", args.tls_key.is_some()),
            ("--tls-client-ca", args.tls_client_ca.is_some()),
            ("--tls-crl", args.tls_crl.is_some()),
            ("--tls-authz", !args.tls_authz.is_empty()),
        ];
        if let Some((option, _)) = certificates.iter().find(|(_, given)| *given) {
            bail!("--tls-psk with {option}: pre-shared keys or certificates, one or the other");
        }
        return Ok(Some(crate::tls::ServerTls::psk(keys)?));
    }
    Ok(match (&args.tls_cert, &args.tls_key, &args.tls_client_ca) {
        (Some(cert), Some(key), ca) => {
            let clients = match ca {
                Some(ca) => Some(crate::tls::Clients {
                    ca,
                    crl: args.tls_crl.as_deref(),
                    authz: crate::tls::authorized_names(&args.tls_authz)?,
                }),
                None if args.tls_crl.is_some() || !args.tls_authz.is_empty() => bail!(
                    "--tls-crl and --tls-authz choose clients by their certificates: give \
                     --tls-client-ca, the authority that signs them"
                ),
                None => None,
            };
            let config = crate::tls::server_config(cert, key, clients)?;
            Some(crate::tls::ServerTls::Certificates(config))
        }
        (Some(_), None, _) => bail!("--tls-cert: give its private key with --tls-key"),
        (None, Some(_), _) => bail!("--tls-key: give its certificate with --tls-cert"),
        (None, None, Some(_)) => {
            bail!("--tls-client-ca: client certificates need TLS (--tls-cert and --tls-key)")
        }
        (None, None, None) => None,
    })
}

/// An export being served: its name, the file it serves through its cache, whether it is
/// read-only, and the lock on its backing file (one server per backing file: two writing back
/// to it would overwrite each other).
struct Exported {
    name: String,
    file: Arc<CachedFile>,
    read_only: bool,
    _lock: std::fs::File,
}

/// Opens the export `plan` describes: its backing file checked and locked, its cache built.
fn open(plan: &config::Planned) -> anyhow::Result<Exported> {
    let args = &plan.args;
    let backing = args.backing.clone().expect("every export planned has a backing file");
    let opened = (|| {
        check_backing(&backing)?;
        let lock = lock_backing(&backing)?;
        if args.read_only && args.direct {
            bail!(
                "--read-only with --direct: not supported together yet (serve read-only \
                 buffered)"
            );
        }
        Ok((lock, export(&plan.config, args, &backing)?))
    })();
    let (lock, file) = match opened {
        Ok(opened) => opened,
        Err(e) if plan.name == nbd::EXPORT => return Err(e),
        Err(e) => return Err(e.context(format!("export '{}'", plan.name))),
    };
    eprintln!(
        "tiercache serve: export '{}'{} of {} bytes from {}{}{}, mode {}",
        plan.name,
        if args.read_only { ", read-only," } else { "" },
        file.len()?,
        backing.display(),
        if args.direct { " with direct I/O" } else { "" },
        match &args.backing_profile {
            Some(name) => format!(", behaving as {name}"),
            None => String::new(),
        },
        file.mode().short()
    );
    Ok(Exported { name: plan.name.clone(), file, read_only: args.read_only, _lock: lock })
}

/// The export's file: the cache `config` describes, built (recovering what its tier files
/// hold) and put in front of `backing` as `args` say.
fn export(
    config: &CacheConfig,
    args: &ServeArgs,
    backing: &Path,
) -> anyhow::Result<Arc<CachedFile>> {
    // The backing file goes to the builder too: recovery writes back what it cannot keep (a
    // read-only export keeps nothing dirty, and has nothing to write back).
    let builder = config.builder()?;
    let cache = match args.read_only {
        true => builder.build()?,
        false => builder.backing_file(backing, args.direct)?.build()?,
    };
    for warning in cache.warnings() {
        eprintln!("note: {warning}");
    }
    if let Some(r) = cache.recovery() {
        let s = cache.stats();
        eprintln!(
            "recovered {} blocks ({} dirty) in {:.3} s, after {}",
            s.recovered,
            cache.dirty_blocks(),
            r.seconds,
            r.stop()
        );
    }
    let file = match (args.read_only, args.direct) {
        (true, _) => CachedFile::open_read_only(backing, cache).context("--read-only")?,
        (false, true) => CachedFile::open_direct(backing, cache)?,
        (false, false) => CachedFile::open(backing, cache)?,
    };
    let file = match &args.backing_profile {
        Some(name) => {
            let profile = tiercache_core::DeviceProfile::load(name)
                .map_err(|e| anyhow::anyhow!("--backing-profile: {e}"))?;
            file.emulate_backing(profile)
        }
        None => file,
    };
    Ok(Arc::new(file))
}

/// The deadlines of a connection, the time a stop waits for the requests in flight, and the
/// server's memory ceiling, as the options give them (an error names the option).
fn limits(args: &ServeArgs) -> anyhow::Result<(Limits, Duration, u64)> {
    let seconds = |option: &str, value: Option<f64>| -> anyhow::Result<Option<Duration>> {
        value
            .map(|s| Duration::try_from_secs_f64(s).ok().filter(|d| !d.is_zero()))
            .map(|d| d.with_context(|| format!("--{option}: a number of seconds above 0")))
            .transpose()
    };
    let limits = Limits {
        handshake: seconds("handshake-timeout", args.handshake_timeout.or(Some(10.0)))?
            .expect("a default"),
        request: seconds("request-timeout", args.request_timeout.or(Some(10.0)))?
            .expect("a default"),
        idle: seconds("idle-timeout", args.idle_timeout)?,
    };
    let shutdown =
        seconds("shutdown-timeout", args.shutdown_timeout.or(Some(10.0)))?.expect("a default");
    let ceiling = args.memory_limit.as_deref().unwrap_or("1GiB");
    let ceiling = tiercache_core::parse_size(ceiling)
        .ok()
        .filter(|&bytes| bytes > 0)
        .with_context(|| format!("--memory-limit {ceiling}: a size above 0, as 512MiB"))?;
    Ok((limits, shutdown, ceiling))
}

/// What every connection is served with, and the slots and addresses it is admitted by.
struct Serving {
    exports: Arc<connection::Exports>,
    metrics: Arc<crate::metrics::Metrics>,
    /// Cloned for each connection (the counts and the memory shared).
    how: How,
    handshaking: Arc<Handshaking>,
    addresses: addresses::Addresses,
}

impl Serving {
    /// Accepts connections until a stop is asked (SIGTERM, SIGINT), each served by a thread of
    /// its own: the connections still open, each thread with a clone of its stream to stop or
    /// cut it by.
    fn accept_until_stopped(
        &self,
        listener: &Listener,
    ) -> Vec<(std::thread::JoinHandle<()>, Stream)> {
        let mut connections: Vec<(std::thread::JoinHandle<()>, Stream)> = Vec::new();
        let mut failures = Failures::new("accept failed");
        let mut evictions =
            Failures::new("a connection still in its handshake closed for a new one");
        let ended = Arc::new(std::sync::Mutex::new(Failures::new("a connection ended")));
        let mut refused = Failures::new("a client refused by its address");
        while !STOP.load(Ordering::SeqCst) {
            let (stream, from) = match listener.accept() {
                Ok((stream, Some(at))) if !self.addresses.admit(at) => {
                    refused.note(&format!("{at} (--allow, --deny)"));
                    drop(stream);
                    continue;
                }
                Ok(accepted) => accepted,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(20));
                    connections.retain(|(handle, _)| !handle.is_finished());
                    continue;
                }
                Err(e) => {
                    // Out of descriptors or memory: the connection waits in the backlog, and
                    // the loop backs off instead of spinning on it; one line a second at most.
                    failures.note(&e);
                    std::thread::sleep(Duration::from_millis(100));
                    connections.retain(|(handle, _)| !handle.is_finished());
                    continue;
                }
            };
            let accepted = Instant::now();
            // Out of descriptors or threads: this connection is dropped, the server goes on.
            let clones =
                stream.blocking().and_then(|()| Ok((stream.try_clone()?, stream.try_clone()?)));
            let (keep, held) = match clones {
                Ok(clones) => clones,
                Err(e) => {
                    failures.note(&e);
                    continue;
                }
            };
            let (ticket, closed) = crate::slots::Slots::enter(&self.handshaking, from, held);
            match closed {
                Closed::Nothing => {}
                Closed::Oldest => {
                    let open = self.handshaking.len();
                    evictions.note(&format!("{open} in their handshake (--max-handshakes)"));
                }
                Closed::SameAddress => {
                    let at = from.map_or("?".into(), |a| a.to_string());
                    evictions.note(&format!("from {at} (--max-handshakes-per-address)"));
                }
            }
            let (exports, metrics) = (self.exports.clone(), self.metrics.clone());
            let (how, ended) = (self.how.clone(), ended.clone());
            let spawned = std::thread::Builder::new().spawn(move || {
                let at = (accepted, Some(ticket));
                if let Err(e) = connection(stream, at, &exports, &metrics, how) {
                    ended.lock().unwrap_or_else(|p| p.into_inner()).note(&e);
                }
            });
            match spawned {
                Ok(handle) => connections.push((handle, keep)),
                Err(e) => failures.note(&e),
            }
        }
        connections
    }
}

/// A stop: each connection finishes the request it is serving, up to `shutdown`, then those
/// still busy are cut; a connection stuck in the cache or the backing file beyond a second
/// more is left behind (the process ends after the write-back).
fn finish(connections: Vec<(std::thread::JoinHandle<()>, Stream)>, shutdown: Duration) {
    eprintln!("tiercache serve: stopping: finishing the requests in flight");
    for (_, stream) in &connections {
        stream.stop_reading();
    }
    // Bounded: a client that does not read its replies cannot hold the stop.
    let deadline = Instant::now() + shutdown;
    while connections.iter().any(|(h, _)| !h.is_finished()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let busy: Vec<_> = connections.iter().filter(|(h, _)| !h.is_finished()).collect();
    if !busy.is_empty() {
        eprintln!(
            "tiercache serve: cutting {} connections still busy after {:.1} s \
             (--shutdown-timeout)",
            busy.len(),
            shutdown.as_secs_f64()
        );
        busy.iter().for_each(|(_, stream)| stream.cut());
    }
    let grace = Instant::now() + Duration::from_secs(1);
    for (handle, _) in connections {
        while !handle.is_finished() && Instant::now() < grace {
            std::thread::sleep(Duration::from_millis(10));
        }
        if handle.is_finished() {
            let _ = handle.join();
        }
    }
}

/// Refuses a backing file that is not one, before anything opens it: a FIFO (opening it would
/// wait for a writer), a character device (`/dev/null` would export nothing), a directory, or
/// an empty file (a disk of no bytes).
fn check_backing(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let meta = std::fs::metadata(path)
        .with_context(|| format!("--backing {}: cannot open it", path.display()))?;
    let kind = meta.file_type();
    let what = if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_file() && meta.len() == 0 {
        "an empty file (a disk of no bytes; give it its size first, as `truncate -s 1G`)"
    } else {
        return Ok(());
    };
    bail!("--backing {}: {what}, not a file or block device to export", path.display())
}

/// Opens `path` and locks it (`flock`, exclusive) for as long as the file lives: a second
/// server on the same backing file is refused.
fn lock_backing(path: &Path) -> anyhow::Result<std::fs::File> {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open(path)
        .with_context(|| format!("--backing {}: cannot open it", path.display()))?;
    // SAFETY: flock on a descriptor this function owns; no memory is involved.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            bail!(
                "--backing {}: another server has it open (it is locked); two caches writing \
                 back to one file would overwrite each other's data",
                path.display()
            );
        }
        return Err(e).with_context(|| format!("--backing {}: cannot lock it", path.display()));
    }
    Ok(file)
}

/// A fuzz target's entry point: `data` as what a client sends once its handshake asked for
/// the export (requests and their payloads, any bytes), through a socket pair to this server's
/// own connection loop (reading requests, the budget, the workers, the replies) over a 1 MiB
/// backing file cached in DRAM. Nothing may panic or hang: the connection ends when the data
/// does, or at the first malformed request.
#[doc(hidden)]
pub fn fuzz(data: &[u8]) {
    use std::os::unix::net::UnixStream;
    const SIZE: u64 = 1 << 20;
    static SERVED: std::sync::OnceLock<(connection::Exports, crate::metrics::Metrics)> =
        std::sync::OnceLock::new();
    let (exports, metrics) = SERVED.get_or_init(|| {
        // A client gone mid-reply must be an error, not the end of the process.
        // SAFETY: setting a signal's disposition to ignore, before any thread of this target.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
        let path = std::env::temp_dir().join(format!("tiercache-fuzz-{}.img", std::process::id()));
        std::fs::write(&path, vec![0u8; SIZE as usize]).expect("a scratch backing file");
        let cache = tiercache_engine::CacheBuilder::new(tiercache_policy::PolicyConfig::Lru)
            .capacity_bytes(SIZE / 4)
            .block_size(4096)
            .shards(2)
            .build()
            .expect("a DRAM cache");
        let file = CachedFile::open(&path, cache).expect("the scratch backing file");
        let _ = std::fs::remove_file(&path); // Open, it lives on; nothing is left behind.
        let offer = nbd::Offer { size: SIZE, block: 4096, read_only: false };
        let exports = connection::Exports {
            offers: vec![nbd::Export { name: nbd::EXPORT.into(), offer }],
            files: vec![Arc::new(file)],
        };
        (exports, crate::metrics::Metrics::default())
    });
    let (client, server) = UnixStream::pair().expect("a socket pair");
    let option = |sent: &mut Vec<u8>, option: u32, data: &[u8]| {
        sent.extend_from_slice(&nbd::IHAVEOPT.to_be_bytes());
        sent.extend_from_slice(&option.to_be_bytes());
        sent.extend_from_slice(&(data.len() as u32).to_be_bytes());
        sent.extend_from_slice(data);
    };
    // Fixed newstyle, no zeroes. Data that starts with 'S' goes on with structured replies
    // and `base:allocation` (so block status and structured read replies are fuzzed too);
    // other data, as EXPORT_NAME.
    let mut sent = 3u32.to_be_bytes().to_vec();
    match data.split_first() {
        Some((b'S', rest)) => {
            option(&mut sent, nbd::OPT_STRUCTURED_REPLY, &[]);
            let mut query = 0u32.to_be_bytes().to_vec(); // The default export.
            query.extend_from_slice(&1u32.to_be_bytes());
            query.extend_from_slice(&(nbd::BASE_ALLOCATION.len() as u32).to_be_bytes());
            query.extend_from_slice(nbd::BASE_ALLOCATION.as_bytes());
            option(&mut sent, nbd::OPT_SET_META_CONTEXT, &query);
            option(&mut sent, nbd::OPT_GO, &[0; 6]);
            sent.extend_from_slice(rest);
        }
        _ => {
            option(&mut sent, nbd::OPT_EXPORT_NAME, &[]);
            sent.extend_from_slice(data);
        }
    }
    let mut writing = client.try_clone().expect("a clone");
    let mut reading = client;
    let writer = std::thread::spawn(move || {
        let _ = writing.write_all(&sent);
        let _ = writing.shutdown(std::net::Shutdown::Write);
    });
    let reader = std::thread::spawn(move || io::copy(&mut reading, &mut io::sink()));
    let second = Duration::from_secs(1);
    let limits = Limits { handshake: second, request: second, idle: Some(second) };
    let served = Arc::new(AtomicUsize::new(0));
    let memory = Memory::new(64 << 20);
    let how = How { workers: 2, limits, tls: None, served, max_served: 1, memory };
    let at = (Instant::now(), None);
    let _ = connection(Stream::Unix(server), at, exports, metrics, how);
    writer.join().expect("the writer does not panic");
    let _ = reader.join().expect("the reader does not panic");
}
