//! Live metrics of `tiercache serve`, in Prometheus' text format at `/metrics` on
//! `--metrics HOST:PORT`: the cache's counters (hits, misses, bytes, evictions, write-backs,
//! checksum failures, I/O errors...), the dirty blocks now, the open connections, and per NBD
//! command the requests, errors, bytes and a latency histogram.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tiercache_engine::CachedFile;

use crate::nbd;

/// Upper bounds of the latency buckets, in seconds.
const BUCKETS: [f64; 12] =
    [10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 50e-3, 250e-3];

/// The commands counted, with their names in the metrics.
const COMMANDS: [(u16, &str); 5] = [
    (nbd::CMD_READ, "read"),
    (nbd::CMD_WRITE, "write"),
    (nbd::CMD_FLUSH, "flush"),
    (nbd::CMD_TRIM, "trim"),
    (nbd::CMD_WRITE_ZEROES, "write_zeroes"),
];

/// One command's counts, updated without locks by the threads serving requests.
#[derive(Default)]
struct Command {
    requests: AtomicU64,
    errors: AtomicU64,
    bytes: AtomicU64,
    nanos: AtomicU64,
    /// Requests at or under each bound (not cumulative; summed when written out), then over all.
    buckets: [AtomicU64; BUCKETS.len() + 1],
}

/// What the server counts beside the cache.
#[derive(Default)]
pub struct Metrics {
    commands: [Command; COMMANDS.len()],
    pub connections: AtomicU64,
}

impl Metrics {
    /// Counts a served request of `kind` that moved `bytes` and took `elapsed`.
    pub fn record(&self, kind: u16, bytes: u64, elapsed: Duration, failed: bool) {
        let Some(i) = COMMANDS.iter().position(|(k, _)| *k == kind) else { return };
        let c = &self.commands[i];
        c.requests.fetch_add(1, Ordering::Relaxed);
        c.errors.fetch_add(failed as u64, Ordering::Relaxed);
        c.bytes.fetch_add(bytes, Ordering::Relaxed);
        c.nanos.fetch_add(elapsed.as_nanos() as u64, Ordering::Relaxed);
        let seconds = elapsed.as_secs_f64();
        let bucket = BUCKETS.iter().position(|b| seconds <= *b).unwrap_or(BUCKETS.len());
        c.buckets[bucket].fetch_add(1, Ordering::Relaxed);
    }

    /// Every metric, in Prometheus' text exposition format: the cache's of the first export
    /// (the default), and with several, a few of each export's labelled by its name.
    pub fn render(&self, files: &[(String, Arc<CachedFile>)]) -> String {
        let cache = files[0].1.cache();
        let mut text = cache.stats().to_prometheus();
        text += "# HELP tiercache_dirty_blocks Blocks held dirty in the cache now.\n";
        text += "# TYPE tiercache_dirty_blocks gauge\n";
        text += &format!("tiercache_dirty_blocks {}\n", cache.dirty_blocks());
        let (used, slots) = cache.occupancy();
        text += "# HELP tiercache_resident_blocks Blocks cached now, and the slots for them.\n";
        text += "# TYPE tiercache_resident_blocks gauge\n";
        text += &format!("tiercache_resident_blocks {used}\ntiercache_slots {slots}\n");
        if files.len() > 1 {
            text += &per_export(files);
        }
        text += "# HELP tiercache_nbd_connections NBD connections open now.\n";
        text += "# TYPE tiercache_nbd_connections gauge\n";
        let connections = self.connections.load(Ordering::Relaxed);
        text += &format!("tiercache_nbd_connections {connections}\n");
        let per = |name: &str, help: &str, value: &dyn Fn(&Command) -> u64| {
            let mut s = format!("# HELP {name} {help}\n# TYPE {name} counter\n");
            for ((_, command), c) in COMMANDS.iter().zip(&self.commands) {
                s += &format!("{name}{{command=\"{command}\"}} {}\n", value(c));
            }
            s
        };
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        text +=
            &per("tiercache_nbd_requests_total", "NBD requests served.", &|c| load(&c.requests));
        text += &per("tiercache_nbd_errors_total", "NBD requests answered with an error.", &|c| {
            load(&c.errors)
        });
        text += &per("tiercache_nbd_bytes_total", "Bytes NBD requests read or wrote.", &|c| {
            load(&c.bytes)
        });
        let name = "tiercache_nbd_request_seconds";
        text += &format!("# HELP {name} Time to serve an NBD request.\n# TYPE {name} histogram\n");
        for ((_, command), c) in COMMANDS.iter().zip(&self.commands) {
            let mut below = 0;
            for (i, bound) in BUCKETS.iter().enumerate() {
                below += load(&c.buckets[i]);
                text += &format!("{name}_bucket{{command=\"{command}\",le=\"{bound}\"}} {below}\n");
            }
            below += load(&c.buckets[BUCKETS.len()]);
            text += &format!("{name}_bucket{{command=\"{command}\",le=\"+Inf\"}} {below}\n");
            let sum = load(&c.nanos) as f64 / 1e9;
            text += &format!("{name}_sum{{command=\"{command}\"}} {sum}\n");
            text += &format!("{name}_count{{command=\"{command}\"}} {below}\n");
        }
        text
    }
}

/// Each export's hits, misses, dirty and resident blocks, labelled by its name.
fn per_export(files: &[(String, Arc<CachedFile>)]) -> String {
    let mut text = String::new();
    type Metric = (&'static str, &'static str, &'static str, fn(&CachedFile) -> u64);
    let metrics: [Metric; 4] = [
        ("tiercache_export_hits_total", "counter", "Reads served from the export's cache.", |f| {
            f.cache().stats().hits
        }),
        ("tiercache_export_misses_total", "counter", "Reads the export's cache missed.", |f| {
            f.cache().stats().misses
        }),
        ("tiercache_export_dirty_blocks", "gauge", "Blocks the export's cache holds dirty.", |f| {
            f.cache().dirty_blocks() as u64
        }),
        ("tiercache_export_resident_blocks", "gauge", "Blocks the export's cache holds.", |f| {
            f.cache().occupancy().0
        }),
    ];
    for (name, kind, help, value) in metrics {
        text += &format!("# HELP {name} {help}\n# TYPE {name} {kind}\n");
        for (export, file) in files {
            let label = export.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
            text += &format!("{name}{{export=\"{label}\"}} {}\n", value(file));
        }
    }
    text
}

/// Serves `/metrics` on `listener` until the process ends, as Prometheus scrapes: each
/// connection its own thread, so one slow client does not hold the others. Connections still
/// sending their request line have a few slots (`crate::slots`); when they are all taken, the
/// one that has been at it longest is closed, so clients that drip a request line a byte at a
/// time cannot keep a scrape out. A request line must arrive whole within its deadline, and
/// the reply be read within another.
pub fn serve(listener: TcpListener, metrics: Arc<Metrics>, files: Vec<(String, Arc<CachedFile>)>) {
    let reading = crate::slots::Slots::new(SCRAPES_AT_ONCE, SCRAPES_AT_ONCE);
    let files = Arc::new(files);
    for stream in listener.incoming() {
        let stream = match stream.and_then(|s| Ok((s.try_clone()?, s))) {
            Ok(stream) => stream,
            Err(_) => {
                // Out of descriptors: back off rather than spin.
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        let (handle, stream) = stream;
        let from = stream.peer_addr().ok().map(|a| a.ip());
        let (ticket, _) = crate::slots::Slots::enter(&reading, from, handle);
        let (metrics, files) = (metrics.clone(), files.clone());
        let spawned =
            std::thread::Builder::new().spawn(move || scrape(stream, ticket, &metrics, &files));
        if spawned.is_err() {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Connections reading their request line at once; a new one closes the oldest.
const SCRAPES_AT_ONCE: usize = 8;
/// The longest request line read, and the time a client has to send it, and to read the reply.
const REQUEST_LINE_MAX: usize = 8 << 10;
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(2);

/// Answers one HTTP request: the request line must arrive whole within its deadline and the
/// size limit (the rest of the request is not read), and the reply be read within another.
/// The connection leaves the slots for request lines (`ticket`) once it has its line.
fn scrape(
    mut stream: std::net::TcpStream,
    ticket: crate::slots::Ticket<std::net::TcpStream>,
    metrics: &Metrics,
    files: &[(String, Arc<CachedFile>)],
) {
    let deadline = std::time::Instant::now() + SCRAPE_TIMEOUT;
    let mut line = Vec::with_capacity(256);
    let mut chunk = [0u8; 512];
    while !line.contains(&b'\n') {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() || line.len() > REQUEST_LINE_MAX {
            return;
        }
        let _ = stream.set_read_timeout(Some(left));
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => line.extend_from_slice(&chunk[..n]),
        }
    }
    drop(ticket);
    let line = String::from_utf8_lossy(&line);
    let response = match line.split_whitespace().nth(1) {
        Some("/metrics") => {
            let body = metrics.render(files);
            format!(
                "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n\
                 Content-Length: {}\r\n\r\n{body}",
                body.len()
            )
        }
        _ => "HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_string(),
    };
    // Written within its deadline, however slowly the client reads.
    let deadline = std::time::Instant::now() + SCRAPE_TIMEOUT;
    let mut unsent = response.as_bytes();
    while !unsent.is_empty() {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() || stream.set_write_timeout(Some(left)).is_err() {
            return;
        }
        match stream.write(unsent) {
            Ok(0) | Err(_) => return,
            Ok(n) => unsent = &unsent[n..],
        }
    }
}
