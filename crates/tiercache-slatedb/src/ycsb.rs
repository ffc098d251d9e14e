//! YCSB on SlateDB: the load phase and the run phase of the core workloads A-F (Cooper et al.,
//! SoCC'10) against a SlateDB database, every value read checked against what was written.
//!
//! A record is the value under the big-endian bytes of [`ycsb_hash`] of its number, so a scan
//! reads records in YCSB's key order; its bytes are tiercache's YCSB record
//! (`tiercache_workload::gen::ycsb::records`), which proves its number, its version and its
//! wholeness. Clients are tasks of the caller's tokio runtime; a write takes its version and is
//! applied in one step (writes are applied one at a time, as SlateDB applies them anyway), so a
//! client that reads a record it wrote sees at least that version. With `durable`, a write
//! returns once it is in the object store (SlateDB's `await_durable`); otherwise once SlateDB
//! holds it in memory, which is SlateDB's own default.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use hdrhistogram::Histogram;
use serde::Serialize;
use slatedb::{Db, Error, WriteBatch};
use tiercache_engine::latency::{self, Percentiles};
use tiercache_workload::gen::ycsb::records::{check_record, fill_record, Records};
use tiercache_workload::gen::ycsb::{ycsb_hash, YcsbChooser, YcsbConfig, YcsbOperation};

pub use tiercache_workload::gen::ycsb::records::MIN_RECORD_BYTES;
pub use tiercache_workload::gen::ycsb::YcsbWorkload;

/// Records per write batch in the load phase.
const LOAD_BATCH: u64 = 1000;

/// The key of record `keynum`.
pub fn key(keynum: u64) -> [u8; 8] {
    ycsb_hash(keynum).to_be_bytes()
}

/// What the load phase did.
#[derive(Clone, Debug, Serialize)]
pub struct LoadReport {
    pub records: u64,
    pub record_bytes: usize,
    pub seconds: f64,
    pub records_per_second: f64,
}

/// Loads records `0..records` at version 0, in batches of [`LOAD_BATCH`], and flushes them to
/// the object store.
pub async fn load(
    db: &Db,
    records: u64,
    record_bytes: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<LoadReport, Error> {
    assert!(record_bytes >= MIN_RECORD_BYTES);
    let started = Instant::now();
    let mut value = vec![0u8; record_bytes];
    let mut keynum = 0;
    while keynum < records {
        let mut batch = WriteBatch::new();
        for k in keynum..(keynum + LOAD_BATCH).min(records) {
            fill_record(k, 0, &mut value);
            batch.put(key(k), &value);
        }
        db.write(batch).await?;
        keynum = (keynum + LOAD_BATCH).min(records);
        progress(keynum);
    }
    db.flush().await?;
    let seconds = started.elapsed().as_secs_f64();
    Ok(LoadReport {
        records,
        record_bytes,
        seconds,
        records_per_second: records as f64 / seconds.max(1e-9),
    })
}

/// How the run phase runs.
#[derive(Clone)]
pub struct RunOptions {
    pub workload: YcsbWorkload,
    pub operations: u64,
    /// Concurrent clients (tasks).
    pub clients: usize,
    pub record_bytes: usize,
    pub seed: u64,
    /// Writes return once durable in the object store.
    pub durable: bool,
    /// Called now and then with the operations done so far.
    pub progress: Arc<dyn Fn(u64) + Send + Sync>,
}

/// What a run phase did.
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    pub workload: String,
    pub operations: u64,
    pub clients: usize,
    pub seconds: f64,
    pub ops_per_second: f64,
    /// Latency of each kind of operation the workload made.
    pub latency: BTreeMap<&'static str, Percentiles>,
    /// Every operation together.
    pub all: Percentiles,
    pub records_read: u64,
    pub records_written: u64,
    /// Every record read was whole, the one asked for, and no older than this client's last
    /// write of it; and no record that exists was missing.
    pub verified: bool,
    pub failures: u64,
    pub first_failure: Option<String>,
    /// Records at the end.
    pub records: u64,
}

/// What the clients share.
struct Shared {
    db: Arc<Db>,
    records: Arc<Records>,
    options: RunOptions,
    /// The last version given to a write; held while a write is applied, so versions are
    /// applied in order.
    version: tokio::sync::Mutex<u64>,
    done: AtomicU64,
    failures: AtomicU64,
    first_failure: Mutex<Option<String>>,
    stop: AtomicBool,
}

impl Shared {
    fn fail(&self, what: String) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        self.first_failure.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(what);
    }
}

/// One client's tallies.
struct Client {
    histograms: Vec<Histogram<u64>>,
    read: u64,
    written: u64,
    own: HashMap<u64, u64>,
    value: Vec<u8>,
}

impl Client {
    fn expect(&mut self, shared: &Shared, keynum: u64, bytes: Option<&[u8]>) {
        self.read += 1;
        let Some(bytes) = bytes else {
            return shared.fail(format!("record {keynum} is missing"));
        };
        match check_record(ycsb_hash(keynum), bytes) {
            Err(e) => shared.fail(e),
            Ok((_, version)) => match self.own.get(&keynum) {
                Some(&wrote) if version < wrote => shared.fail(format!(
                    "record {keynum} read at version {version} after this client wrote {wrote}"
                )),
                _ => {}
            },
        }
    }

    async fn write(&mut self, shared: &Shared, keynum: u64, read_first: bool) -> Result<(), Error> {
        if read_first {
            let old = shared.db.get(key(keynum)).await?;
            self.expect(shared, keynum, old.as_deref());
        }
        let handle = {
            let mut last = shared.version.lock().await;
            *last += 1;
            fill_record(keynum, *last, &mut self.value);
            self.own.insert(keynum, *last);
            shared.db.put(key(keynum), &self.value).await?
        };
        if shared.options.durable {
            handle.await_durable().await?;
        }
        self.written += 1;
        Ok(())
    }

    async fn operation(&mut self, shared: &Shared, op: YcsbOperation) -> Result<(), Error> {
        match op {
            YcsbOperation::Read(keynum) => {
                let value = shared.db.get(key(keynum)).await?;
                self.expect(shared, keynum, value.as_deref());
            }
            YcsbOperation::Update(keynum) => self.write(shared, keynum, false).await?,
            YcsbOperation::ReadModifyWrite(keynum) => self.write(shared, keynum, true).await?,
            YcsbOperation::Insert => {
                let keynum = shared.records.take();
                self.write(shared, keynum, false).await?;
                shared.records.acknowledge(keynum);
            }
            YcsbOperation::Scan { start, length } => {
                let mut iter = shared.db.scan(key(start)..).await?;
                let mut first = true;
                let mut left = length;
                while left > 0 {
                    let Some(item) = iter.next().await? else { break };
                    left -= 1;
                    let stored = u64::from_be_bytes(match item.key.as_ref().try_into() {
                        Ok(bytes) => bytes,
                        Err(_) => {
                            shared.fail(format!("a key of {} bytes", item.key.len()));
                            continue;
                        }
                    });
                    if first && stored != ycsb_hash(start) {
                        self.read += 1;
                        shared.fail(format!("record {start} is missing from its scan"));
                    }
                    first = false;
                    match check_record(stored, &item.value) {
                        Ok((keynum, _)) => self.expect(shared, keynum, Some(&item.value)),
                        Err(e) => {
                            self.read += 1;
                            shared.fail(e);
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// Runs `options.workload` over `db`, whose records `records` says exist.
pub async fn run(
    db: Arc<Db>,
    records: Arc<Records>,
    options: RunOptions,
) -> Result<RunReport, Error> {
    let clients = options.clients.max(1);
    let shared = Arc::new(Shared {
        db,
        records,
        options: options.clone(),
        version: tokio::sync::Mutex::new(0),
        done: AtomicU64::new(0),
        failures: AtomicU64::new(0),
        first_failure: Mutex::new(None),
        stop: AtomicBool::new(false),
    });
    let started = Instant::now();
    let tasks: Vec<_> = (0..clients as u64)
        .map(|index| {
            let share = options.operations / clients as u64
                + u64::from(index < options.operations % clients as u64);
            tokio::spawn(client(shared.clone(), index, share))
        })
        .collect();
    let mut ended = Vec::new();
    for task in tasks {
        ended.push(task.await.map_err(|e| Error::internal(format!("a YCSB client failed: {e}"))));
    }
    let seconds = started.elapsed().as_secs_f64();
    let mut histograms: Vec<_> =
        YcsbOperation::KINDS.iter().map(|_| latency::histogram()).collect();
    let (mut read, mut written) = (0, 0);
    for ended in ended {
        let client = ended??;
        for (all, one) in histograms.iter_mut().zip(&client.histograms) {
            all.add(one).expect("histograms of one range");
        }
        read += client.read;
        written += client.written;
    }
    let mut all = latency::histogram();
    for h in &histograms {
        all.add(h).expect("histograms of one range");
    }
    let done = shared.done.load(Ordering::Relaxed);
    let failures = shared.failures.load(Ordering::Relaxed);
    let first_failure = shared.first_failure.lock().unwrap_or_else(|p| p.into_inner()).clone();
    Ok(RunReport {
        workload: format!("{:?}", options.workload),
        operations: done,
        clients,
        seconds,
        ops_per_second: done as f64 / seconds.max(1e-9),
        latency: YcsbOperation::KINDS
            .iter()
            .zip(&histograms)
            .filter(|(_, h)| !h.is_empty())
            .map(|(name, h)| (*name, Percentiles::of(h)))
            .collect(),
        all: Percentiles::of(&all),
        records_read: read,
        records_written: written,
        verified: failures == 0,
        failures,
        first_failure,
        records: shared.records.existing(),
    })
}

async fn client(shared: Arc<Shared>, index: u64, operations: u64) -> Result<Client, Error> {
    let options = &shared.options;
    let config = YcsbConfig {
        record_count: shared.records.existing(),
        operation_count: operations,
        record_bytes: options.record_bytes as u32,
        // Clients' streams apart: the seed, then each client a golden-ratio step further.
        seed: options.seed.wrapping_add(index.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
        ..YcsbConfig::new(options.workload)
    };
    let mut chooser = YcsbChooser::new(config).map_err(|e| Error::invalid(e.to_string()))?;
    let mut client = Client {
        histograms: YcsbOperation::KINDS.iter().map(|_| latency::histogram()).collect(),
        read: 0,
        written: 0,
        own: HashMap::new(),
        value: vec![0; options.record_bytes],
    };
    for i in 0..operations {
        if shared.stop.load(Ordering::Relaxed) {
            break;
        }
        let op = chooser.next(shared.records.existing());
        let started = Instant::now();
        if let Err(e) = client.operation(&shared, op).await {
            shared.stop.store(true, Ordering::Relaxed);
            return Err(e);
        }
        let ns = started.elapsed().as_nanos() as u64;
        client.histograms[op.kind()].saturating_record(ns.max(1));
        let done = shared.done.fetch_add(1, Ordering::Relaxed) + 1;
        if index == 0 && i % 64 == 0 {
            (options.progress)(done);
        }
    }
    Ok(client)
}
