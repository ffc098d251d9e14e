//! Virtual time: a discrete-event model in which `clients` closed-loop clients drive a policy
//! and every device serves operations as its [`DeviceProfile`] says: a FIFO queue in front of
//! `parallelism` servers, each operation taking the profile's service time (latency plus
//! transfer at a share of bandwidth, reads slowed by writes in flight on the same device).
//!
//! A request becomes a chain of device operations from its decision: a hit reads its tier; a
//! read miss reads the backing device and then installs the block (writes the tier); a write
//! goes to the backing device unless the cache absorbs it dirty (write-back), and to the tier
//! it updates or fills; a move reads one tier and writes the other; a write-back reads the tier
//! and writes the backing device. Operations of one request run one after another; requests of
//! different clients overlap. Events are taken in time order, so each device's queue is served
//! in arrival order. A device whose profile has a sequential latency (a disk) charges it instead
//! of the random latency when an operation's block follows the block it served last.
//!
//! A tier whose writes are done behind (`written_behind`) keeps its device busy with them
//! while the request that caused them goes on, as the engine's flash tier with write-behind
//! threads does.
//!
//! With a [`PageCache`], the operating system's page cache stands in front of the backing
//! device, as buffered I/O puts it: a read the cache under study sends to the backing device is
//! served from the page cache's device (DRAM) when the page cache holds every block of it, and
//! every block read from or written to the backing device enters the page cache. Writes still
//! reach the backing device (the engine syncs them).
//!
//! With a [`CpuModel`], a request first takes the cache's own work on one of `cores` processors
//! (lookup, policy, bookkeeping: a fixed time, more for a miss), queueing when every core is
//! busy; without one, the cache's work is free and only devices take time.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use hdrhistogram::Histogram;
use serde::Serialize;
use tiercache_core::limits::{ARRIVAL_RATE_MAX, CLIENTS_MAX};
use tiercache_core::{
    Action, Capacity, Decision, DeviceProfile, Direction, Interval, Location, Op, Request, TierId,
};
use tiercache_policy::{AnyPolicy, Policy, PolicyConfig};

/// One device operation of a request.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Stage {
    /// Index into the devices: tiers first, the backing device last.
    device: usize,
    direction: Direction,
    bytes: u64,
    /// The first block and how many follow it, so a device can tell a sequential run from
    /// random access. Neighbouring blocks going the same way to the same device are one
    /// operation (a run written back as one I/O).
    key: u64,
    blocks: u64,
    /// Done behind the request: the device is busy with it, the request goes on at once.
    behind: bool,
}

/// A device's servers and counters.
struct Device {
    profile: DeviceProfile,
    /// Per server: when it is next free, and whether it is serving a write until then.
    servers: Vec<(u64, bool)>,
    busy_ns: u64,
    bytes_read: u64,
    bytes_written: u64,
    /// Reads served and their total service time, for the measurement of an interval.
    reads: u64,
    read_service_ns: u64,
    /// The block after the last one served, to recognise sequential runs.
    next_key: Option<u64>,
}

impl Device {
    fn new(profile: DeviceProfile) -> Device {
        let servers = vec![(0, false); profile.parallelism.max(1) as usize];
        Device {
            profile,
            servers,
            busy_ns: 0,
            bytes_read: 0,
            bytes_written: 0,
            reads: 0,
            read_service_ns: 0,
            next_key: None,
        }
    }

    /// Serves one operation arriving at `now`; returns when it completes.
    fn serve(&mut self, now: u64, stage: Stage) -> u64 {
        let (direction, bytes) = (stage.direction, stage.bytes);
        let sequential = self.next_key == Some(stage.key);
        self.next_key = stage.key.checked_add(stage.blocks);
        let (server, &(free, _)) =
            self.servers.iter().enumerate().min_by_key(|(_, s)| s.0).expect("at least one server");
        let start = now.max(free);
        let writers =
            self.servers.iter().filter(|(end, write)| *write && *end > start).count() as u32;
        let others = self.servers.iter().filter(|(end, _)| *end > start).count() as f64;
        let slowed = 1.0 + self.profile.contention * others;
        let service = (self.profile.service_ns_at(direction, bytes, writers, sequential) * slowed)
            .round()
            .max(1.0) as u64;
        self.servers[server] = (start + service, direction == Direction::Write);
        self.busy_ns += service;
        match direction {
            Direction::Read => {
                self.bytes_read += bytes;
                self.reads += 1;
                self.read_service_ns += service;
            }
            Direction::Write => self.bytes_written += bytes,
        }
        start + service
    }
}

/// The processor the cache runs on: each request costs `request_ns` of one core, a miss that
/// brings its block into the cache `miss_ns` more (a miss the admission keeps out costs only
/// the request's time and the devices'), a write `write_ns` more, a hit served by a tier below
/// the top one `lower_hit_ns` more (the engine serves those under the shard's lock, checking
/// the block), and `cores` requests are worked on at once. Measured on the engine (`tiercache lab run
/// calibrate` fits it on runs of all hits, nearly all misses and all writes, and the lower
/// hits on a hierarchy holding its whole set).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CpuModel {
    pub cores: usize,
    pub request_ns: f64,
    pub miss_ns: f64,
    pub write_ns: f64,
    pub lower_hit_ns: f64,
}

impl CpuModel {
    /// `request_ns=N,miss_ns=N,write_ns=N,lower_hit_ns=N,cores=N` (each optional: 0 ns, and
    /// `default_cores`).
    pub fn parse(text: &str, default_cores: usize) -> Result<CpuModel, String> {
        let mut model = CpuModel {
            cores: default_cores,
            request_ns: 0.0,
            miss_ns: 0.0,
            write_ns: 0.0,
            lower_hit_ns: 0.0,
        };
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part.split_once('=').ok_or_else(|| {
                format!(
                    "'{part}': write request_ns=N, miss_ns=N, write_ns=N, lower_hit_ns=N or \
                     cores=N"
                )
            })?;
            let number =
                || value.parse::<f64>().map_err(|_| format!("{key} '{value}': not a number"));
            match key {
                "request_ns" => model.request_ns = number()?,
                "miss_ns" => model.miss_ns = number()?,
                "write_ns" => model.write_ns = number()?,
                "lower_hit_ns" => model.lower_hit_ns = number()?,
                "cores" => {
                    model.cores =
                        value.parse().map_err(|_| format!("cores '{value}': not a count"))?
                }
                other => {
                    return Err(format!(
                        "'{other}': not request_ns, miss_ns, write_ns, lower_hit_ns or cores"
                    ))
                }
            }
        }
        model.check()?;
        Ok(model)
    }

    /// Whether a run can use it: 1 to `CLIENTS_MAX` cores, times from 0 to 1e9 ns.
    fn check(&self) -> Result<(), String> {
        if !(1..=CLIENTS_MAX).contains(&self.cores) {
            return Err(format!("cores must be 1 to {CLIENTS_MAX}, got {}", self.cores));
        }
        let times = [
            ("request_ns", self.request_ns),
            ("miss_ns", self.miss_ns),
            ("write_ns", self.write_ns),
            ("lower_hit_ns", self.lower_hit_ns),
        ];
        match times.iter().find(|(_, t)| !(t.is_finite() && (0.0..=1e9).contains(t))) {
            Some((name, t)) => Err(format!("{name} must be 0 to 1e9, got {t}")),
            None => Ok(()),
        }
    }

    /// The work of a request served from `hit` (None: a miss, which `inserts` or not).
    fn ns(&self, hit: Option<TierId>, inserts: bool, write: bool) -> u64 {
        let served = match hit {
            None if inserts => self.miss_ns,
            None => 0.0,
            Some(TierId::DRAM) => 0.0,
            Some(_) => self.lower_hit_ns,
        };
        let write = if write { self.write_ns } else { 0.0 };
        (self.request_ns + served + write).round() as u64
    }
}

/// The cores of a [`CpuModel`]: when each is next free, and the time they worked.
struct Cores {
    free: Vec<u64>,
    busy_ns: u64,
}

impl Cores {
    /// Works `ns` on the core free first, from `now` or when it frees; returns the end.
    fn serve(&mut self, now: u64, ns: u64) -> u64 {
        let core = self.free.iter_mut().min().expect("at least one core");
        let end = now.max(*core) + ns;
        *core = end;
        self.busy_ns += ns;
        end
    }
}

/// What a device did over the run.
#[derive(Clone, Debug, Serialize)]
pub struct DeviceReport {
    pub name: String,
    /// Busy time over elapsed time, per server (1.0: every server busy all the time).
    pub utilization: f64,
    pub bytes_read: u64,
    pub bytes_written: u64,
}

/// Latency of one kind of request, in microseconds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LatencySummary {
    pub count: u64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p95_us: f64,
    pub p99_us: f64,
}

impl LatencySummary {
    fn of(h: &Histogram<u64>) -> LatencySummary {
        if h.is_empty() {
            return LatencySummary::default();
        }
        let us = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
        LatencySummary {
            count: h.len(),
            mean_us: h.mean() / 1000.0,
            p50_us: us(0.5),
            p95_us: us(0.95),
            p99_us: us(0.99),
        }
    }
}

/// One interval of the time series.
#[derive(Clone, Debug, Serialize)]
pub struct IntervalPoint {
    pub start_seconds: f64,
    pub ops_per_second: f64,
    pub hit_ratio: f64,
    pub mean_latency_us: f64,
    pub p99_latency_us: f64,
    /// The policy's knobs when the interval's first request completed.
    pub knobs: std::collections::BTreeMap<&'static str, f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct TimedReport {
    pub clients: usize,
    pub arrival_rate: Option<f64>,
    pub requests: u64,
    pub hits: u64,
    pub hit_ratio: f64,
    pub virtual_seconds: f64,
    pub ops_per_second: f64,
    pub latency_us_mean: f64,
    pub latency_us_p50: f64,
    pub latency_us_p95: f64,
    pub latency_us_p99: f64,
    pub reads: LatencySummary,
    pub writes: LatencySummary,
    pub devices: Vec<DeviceReport>,
    /// Completed requests per interval: throughput and hit ratio over time.
    pub series: Vec<IntervalPoint>,
}

/// The devices of a run and how requests arrive: one profile per tier of the policy, then the
/// backing device; `clients` closed-loop clients, or (with `arrival_rate`, requests per
/// second) an open loop with one request every 1/rate seconds, however many are in flight.
pub struct TimedOptions {
    pub clients: usize,
    pub arrival_rate: Option<f64>,
    pub tiers: Vec<DeviceProfile>,
    pub backing: DeviceProfile,
    /// Length of one interval of the time series, in microseconds of virtual time.
    pub interval_us: u64,
    /// The cache's own work per request; `None`: free.
    pub cpu: Option<CpuModel>,
    /// Per tier, whether its writes are done behind the requests that cause them (the engine's
    /// flash tier with write-behind threads): the device is busy with them, the request does
    /// not wait. Tiers past the end: no.
    pub written_behind: Vec<bool>,
    /// The OS page cache in front of the backing device; `None`: direct I/O.
    pub page_cache: Option<PageCache>,
}

/// The operating system's page cache below the cache under study and above its backing
/// device (Writes Hurt section 3.1: the block manager reads from disk through the kernel's
/// buffer cache after NVCache misses). Its policy is the kernel's, an LRU of `capacity`; its
/// device is the memory it lives in. It is reported as the last device.
#[derive(Clone, Debug)]
pub struct PageCache {
    pub capacity: Capacity,
    pub device: DeviceProfile,
    /// What reached the backing device before the run (reads and writes), in order: the page
    /// cache starts warm with it.
    pub warm: Vec<Request>,
}

impl PageCache {
    fn build(&self) -> AnyPolicy {
        let mut lru = AnyPolicy::from_config(&PolicyConfig::Lru, self.capacity, &[], 0)
            .expect("an LRU of any capacity");
        let mut decision = Decision::new();
        for req in &self.warm {
            decision.clear();
            lru.decide(req, &mut decision);
        }
        lru
    }
}

impl TimedOptions {
    /// Whether a run with these options can end: a rate above zero and finite, a bounded number
    /// of clients. The error names the setting and its range.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(rate) = self.arrival_rate {
            if !(rate > 0.0 && rate <= ARRIVAL_RATE_MAX) {
                return Err(format!(
                    "arrival_rate must be above 0 and at most {ARRIVAL_RATE_MAX} requests per \
                     second, got {rate}"
                ));
            }
        }
        if !(1..=CLIENTS_MAX).contains(&self.clients) {
            return Err(format!("clients must be 1 to {CLIENTS_MAX}, got {}", self.clients));
        }
        let page_cache = self.page_cache.as_ref().map(|p| &p.device);
        for profile in self.tiers.iter().chain([&self.backing]).chain(page_cache) {
            profile.validate()?;
        }
        self.cpu.as_ref().map_or(Ok(()), |cpu| cpu.check().map_err(|e| format!("cpu: {e}")))
    }

    pub fn closed(
        clients: usize,
        tiers: Vec<DeviceProfile>,
        backing: DeviceProfile,
    ) -> TimedOptions {
        TimedOptions {
            clients,
            arrival_rate: None,
            tiers,
            backing,
            interval_us: 100_000,
            cpu: None,
            written_behind: Vec::new(),
            page_cache: None,
        }
    }
}

/// The device operations that carry out `decision` for `req`.
fn stages(
    req: &Request,
    decision: &Decision,
    backing: usize,
    behind: &[bool],
    out: &mut Vec<Stage>,
) {
    out.clear();
    let stage = |device: usize, direction: Direction, bytes: u32, key: u64| Stage {
        device,
        direction,
        bytes: bytes as u64,
        key,
        blocks: 1,
        behind: direction == Direction::Write && behind.get(device).copied().unwrap_or(false),
    };
    match (req.op, decision.served_from()) {
        (Op::Read | Op::Lookup, Location::Tier(tier)) => {
            out.push(stage(tier.index(), Direction::Read, req.size, req.key))
        }
        (Op::Read | Op::Lookup, Location::Backing) => {
            out.push(stage(backing, Direction::Read, req.size, req.key))
        }
        (Op::Write, _) if !decision.absorbs_write(req.key) => {
            out.push(stage(backing, Direction::Write, req.size, req.key))
        }
        (Op::Write | Op::Delete, _) => {}
    }
    // Write-backs one after another read their blocks from the tier, then write them to the
    // backing device together, so a run reaches the disk as one operation.
    let mut backing_writes = Vec::new();
    for action in &decision.actions {
        if !matches!(action, Action::WriteBack { .. }) {
            out.append(&mut backing_writes);
        }
        match *action {
            Action::Insert { tier, key, size, .. } | Action::Update { tier, key, size, .. } => {
                out.push(stage(tier.index(), Direction::Write, size, key))
            }
            Action::Move { from, to, key, size } => {
                out.push(stage(from.index(), Direction::Read, size, key));
                out.push(stage(to.index(), Direction::Write, size, key));
            }
            Action::WriteBack { tier, key, size } => {
                out.push(stage(tier.index(), Direction::Read, size, key));
                backing_writes.push(stage(backing, Direction::Write, size, key));
            }
            Action::Evict { .. } | Action::Invalidate { .. } | Action::Reject { .. } => {}
        }
    }
    out.append(&mut backing_writes);
    merge_runs(out);
}

/// Sends the chain's backing-device operations through the page cache: a read whose blocks it
/// all holds goes to its device instead; every block read or written enters it.
fn through_page_cache(
    cache: &mut AnyPolicy,
    device: usize,
    backing: usize,
    chain: &mut [Stage],
    time_us: u64,
) {
    let mut decision = Decision::new();
    for stage in chain.iter_mut().filter(|s| s.device == backing) {
        let size = (stage.bytes / stage.blocks.max(1)) as u32;
        let op = match stage.direction {
            Direction::Read => Op::Read,
            Direction::Write => Op::Write,
        };
        let mut held = true;
        for key in stage.key..stage.key + stage.blocks {
            decision.clear();
            cache.decide(&Request::new(time_us, key, size, op), &mut decision);
            held &= decision.hit.is_some();
        }
        if held && op == Op::Read {
            stage.device = device;
        }
    }
}

/// Joins each stage that continues the one before it (same device, same direction, the next
/// block) into that one.
fn merge_runs(stages: &mut Vec<Stage>) {
    stages.dedup_by(|next, run| {
        let continues = next.device == run.device
            && next.direction == run.direction
            && next.behind == run.behind
            && run.key.checked_add(run.blocks) == Some(next.key);
        if continues {
            run.bytes += next.bytes;
            run.blocks += 1;
        }
        continues
    });
}

type Knobs = Vec<(&'static str, f64)>;

/// The interval being measured: what completed in it, and the policy's knobs when it began.
struct Current {
    bucket: usize,
    completed: u64,
    hits: u64,
    reads: u64,
    read_hits: u64,
    latency: Histogram<u64>,
    knobs: Knobs,
    /// Tier 0's reads and their service time when the interval began.
    tier_reads_at: (u64, u64),
}

/// A request in flight: its device operations, when it was issued, and what it was.
struct InFlight {
    chain: Vec<Stage>,
    /// The cache's work before the chain, with a CPU model.
    compute_ns: u64,
    issued: u64,
    write: bool,
    hit: bool,
}

/// The run's state: devices, requests in flight, and what has been measured.
struct Run<'a> {
    policy: &'a mut AnyPolicy,
    requests: &'a [Request],
    devices: Vec<Device>,
    /// The backing device's index: after the tiers.
    backing: usize,
    /// The page cache's policy and its device's index (after the backing device).
    page_cache: Option<(AnyPolicy, usize)>,
    cpu: Option<(CpuModel, Cores)>,
    behind: &'a [bool],
    /// Slots of requests in flight; closed loop: one per client, reused.
    slots: Vec<Option<InFlight>>,
    free: Vec<usize>,
    next: usize,
    hits: u64,
    decision: Decision,
    latency: [Histogram<u64>; 3],
    current: Current,
    series: Vec<IntervalPoint>,
    interval_ns: u64,
}

const ALL: usize = 0;
const READS: usize = 1;
const WRITES: usize = 2;

impl Run<'_> {
    /// Decides the next request at `now` and puts it in `slot`; false when there is none.
    fn issue(&mut self, slot: usize, now: u64) -> bool {
        let Some(req) = self.requests.get(self.next) else { return false };
        let req = Request { time_us: now / 1000, ..*req };
        self.next += 1;
        self.decision.clear();
        self.policy.decide(&req, &mut self.decision);
        let backing = self.backing;
        let mut chain = self.slots[slot].take().map(|f| f.chain).unwrap_or_default();
        stages(&req, &self.decision, backing, self.behind, &mut chain);
        if let Some((cache, device)) = self.page_cache.as_mut() {
            through_page_cache(cache, *device, backing, &mut chain, req.time_us);
        }
        let hit = self.decision.hit.is_some();
        let write = req.op == Op::Write;
        let compute_ns = self.cpu.as_ref().map_or(0, |(model, _)| {
            let inserts = self.decision.actions.iter().any(|a| matches!(a, Action::Insert { .. }));
            model.ns(self.decision.hit, inserts, write)
        });
        self.slots[slot] = Some(InFlight { chain, compute_ns, issued: now, write, hit });
        true
    }

    fn complete(&mut self, slot: usize, now: u64) {
        let flight = self.slots[slot].as_ref().expect("a request in flight");
        let took = (now - flight.issued).max(1);
        let (write, hit) = (flight.write, flight.hit);
        self.latency[ALL].saturating_record(took);
        self.latency[if write { WRITES } else { READS }].saturating_record(took);
        self.hits += hit as u64;
        let bucket = (now / self.interval_ns) as usize;
        while self.current.bucket < bucket {
            self.end_interval();
        }
        let current = &mut self.current;
        current.completed += 1;
        current.hits += hit as u64;
        current.reads += !write as u64;
        current.read_hits += (!write && hit) as u64;
        current.latency.saturating_record(took);
    }

    /// Closes the interval being measured: a point of the series, and the measurement the
    /// policy is fed (completions arrive in time order, so the interval is complete).
    fn end_interval(&mut self) {
        let seconds = self.interval_ns as f64 / 1e9;
        let tier = &self.devices[0];
        let tier_reads = (tier.reads, tier.read_service_ns);
        let c = &mut self.current;
        let reads_in = tier_reads.0 - c.tier_reads_at.0;
        let read_ns_in = tier_reads.1 - c.tier_reads_at.1;
        c.tier_reads_at = tier_reads;
        let us = |q: f64| c.latency.value_at_quantile(q) as f64 / 1000.0;
        let interval = Interval {
            seconds,
            completed: c.completed,
            reads: c.reads,
            read_hits: c.read_hits,
            mean_latency_us: if c.completed > 0 { c.latency.mean() / 1000.0 } else { 0.0 },
            p99_latency_us: if c.completed > 0 { us(0.99) } else { 0.0 },
            tier_reads: reads_in,
            tier_read_mean_us: if reads_in > 0 {
                read_ns_in as f64 / reads_in as f64 / 1000.0
            } else {
                0.0
            },
        };
        self.series.push(IntervalPoint {
            start_seconds: c.bucket as f64 * seconds,
            ops_per_second: interval.ops_per_second(),
            hit_ratio: if c.completed > 0 { c.hits as f64 / c.completed as f64 } else { 0.0 },
            mean_latency_us: interval.mean_latency_us,
            p99_latency_us: interval.p99_latency_us,
            knobs: std::mem::take(&mut c.knobs).into_iter().collect(),
        });
        c.bucket += 1;
        c.completed = 0;
        c.hits = 0;
        c.reads = 0;
        c.read_hits = 0;
        c.latency.reset();
        self.policy.observe(&interval);
        self.current.knobs = self.policy.knobs();
    }
}

/// Runs `requests` through `policy` on modeled devices, closed or open loop. The policy
/// decides each request when it is issued, in virtual-time order.
pub fn simulate_timed(
    policy: &mut AnyPolicy,
    requests: &[Request],
    options: &TimedOptions,
) -> TimedReport {
    assert_eq!(options.tiers.len(), policy.tier_count(), "one device profile per tier");
    let mut devices: Vec<Device> = options.tiers.iter().cloned().map(Device::new).collect();
    devices.push(Device::new(options.backing.clone()));
    let backing = devices.len() - 1;
    let page_cache = options.page_cache.as_ref().map(|p| {
        devices.push(Device::new(p.device.clone()));
        (p.build(), devices.len() - 1)
    });
    let histogram = || Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).expect("bounds");
    let clients = options.clients.max(1);
    let mut run = Run {
        policy,
        requests,
        devices,
        backing,
        page_cache,
        cpu: options.cpu.clone().map(|model| {
            let cores = Cores { free: vec![0; model.cores.max(1)], busy_ns: 0 };
            (model, cores)
        }),
        behind: &options.written_behind,
        slots: Vec::new(),
        free: Vec::new(),
        next: 0,
        hits: 0,
        decision: Decision::new(),
        latency: [histogram(), histogram(), histogram()],
        current: Current {
            bucket: 0,
            completed: 0,
            hits: 0,
            reads: 0,
            read_hits: 0,
            latency: histogram(),
            knobs: Vec::new(),
            tier_reads_at: (0, 0),
        },
        series: Vec::new(),
        interval_ns: options.interval_us.max(1) * 1000,
    };
    // Events: (time, kind, slot, stage); kind 0 is an arrival (open loop), 1 a stage.
    let mut events: BinaryHeap<Reverse<(u64, u8, usize, usize)>> = BinaryHeap::new();
    if let Err(reason) = options.validate() {
        panic!("simulate_timed needs options that pass TimedOptions::validate: {reason}");
    }
    let gap_ns = options.arrival_rate.map(|rate| (1e9 / rate).max(1.0) as u64);
    match gap_ns {
        Some(_) => events.push(Reverse((0, 0, 0, 0))),
        None => {
            for client in 0..clients.min(requests.len()) {
                run.slots.push(None);
                if run.issue(client, 0) {
                    events.push(Reverse((0, 1, client, 0)));
                }
            }
        }
    }
    run.current.knobs = run.policy.knobs();
    let mut end = 0u64;
    while let Some(Reverse((now, kind, slot, stage))) = events.pop() {
        end = end.max(now);
        if kind == 0 {
            let slot = run.free.pop().unwrap_or_else(|| {
                run.slots.push(None);
                run.slots.len() - 1
            });
            if run.issue(slot, now) {
                events.push(Reverse((now, 1, slot, 0)));
                if run.next < requests.len() {
                    events.push(Reverse((now + gap_ns.expect("open loop"), 0, 0, 0)));
                }
            }
            continue;
        }
        // With a CPU model, stage 0 is the cache's work and the chain follows it.
        let first = run.cpu.is_some() as usize;
        if let (Some((_, cores)), 0) = (&mut run.cpu, stage) {
            let ns = run.slots[slot].as_ref().map_or(0, |f| f.compute_ns);
            events.push(Reverse((cores.serve(now, ns), 1, slot, 1)));
            continue;
        }
        let step = run.slots[slot].as_ref().and_then(|f| f.chain.get(stage - first).copied());
        if let Some(s) = step {
            let done = run.devices[s.device].serve(now, s);
            let next = if s.behind { now } else { done };
            events.push(Reverse((next, 1, slot, stage + 1)));
            continue;
        }
        run.complete(slot, now);
        if gap_ns.is_some() {
            run.free.push(slot);
        } else if run.issue(slot, now) {
            events.push(Reverse((now, 1, slot, 0)));
        }
    }
    if run.current.completed > 0 {
        run.end_interval();
    }
    report(run, clients, options, end)
}

fn report(run: Run, clients: usize, options: &TimedOptions, end: u64) -> TimedReport {
    let seconds = end as f64 / 1e9;
    let requests_done = run.latency[ALL].len();
    let all = LatencySummary::of(&run.latency[ALL]);
    let utilization = |busy_ns: u64, servers: usize| match end {
        0 => 0.0,
        _ => busy_ns as f64 / end as f64 / servers as f64,
    };
    let mut devices: Vec<DeviceReport> = run
        .devices
        .iter()
        .map(|d| DeviceReport {
            name: d.profile.name.clone(),
            utilization: utilization(d.busy_ns, d.servers.len()),
            bytes_read: d.bytes_read,
            bytes_written: d.bytes_written,
        })
        .collect();
    if let Some((_, cores)) = &run.cpu {
        devices.push(DeviceReport {
            name: "cpu".into(),
            utilization: utilization(cores.busy_ns, cores.free.len()),
            bytes_read: 0,
            bytes_written: 0,
        });
    }
    TimedReport {
        clients,
        arrival_rate: options.arrival_rate,
        requests: requests_done,
        hits: run.hits,
        hit_ratio: run.hits as f64 / requests_done.max(1) as f64,
        virtual_seconds: seconds,
        ops_per_second: if seconds > 0.0 { requests_done as f64 / seconds } else { 0.0 },
        latency_us_mean: all.mean_us,
        latency_us_p50: all.p50_us,
        latency_us_p95: all.p95_us,
        latency_us_p99: all.p99_us,
        reads: LatencySummary::of(&run.latency[READS]),
        writes: LatencySummary::of(&run.latency[WRITES]),
        devices,
        series: run.series,
    }
}
