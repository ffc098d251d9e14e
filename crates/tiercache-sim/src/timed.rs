//! Virtual time: a discrete-event model in which `clients` closed-loop clients drive a policy
//! and every device serves operations as its [`DeviceProfile`] says: a FIFO queue in front of
//! `parallelism` servers, each operation taking the profile's service time (latency plus
//! transfer at a share of bandwidth, reads slowed by writes in flight on the same device).
//!
//! A request becomes a chain of device operations from its decision: a hit reads its tier; a
//! read miss reads the backing device and then installs the block (writes the tier); a write
//! goes to the backing device (write-through) and to the tier it updates or fills; a move reads
//! one tier and writes the other; a write-back reads the tier and writes the backing device.
//! Operations of one request run one after another; requests of different clients overlap.
//! Events are taken in time order, so each device's queue is served in arrival order.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use serde::Serialize;
use tiercache_core::{Action, Decision, DeviceProfile, Direction, Op, Request, TierId};
use tiercache_policy::{AnyPolicy, Policy};

/// One device operation of a request.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Stage {
    /// Index into the devices: tiers first, the backing device last.
    device: usize,
    direction: Direction,
    bytes: u64,
}

/// A device's servers and counters.
struct Device {
    profile: DeviceProfile,
    /// Per server: when it is next free, and whether it is serving a write until then.
    servers: Vec<(u64, bool)>,
    busy_ns: u64,
    bytes_read: u64,
    bytes_written: u64,
}

impl Device {
    fn new(profile: DeviceProfile) -> Device {
        let servers = vec![(0, false); profile.parallelism.max(1) as usize];
        Device { profile, servers, busy_ns: 0, bytes_read: 0, bytes_written: 0 }
    }

    /// Serves one operation arriving at `now`; returns when it completes.
    fn serve(&mut self, now: u64, direction: Direction, bytes: u64) -> u64 {
        let (server, &(free, _)) =
            self.servers.iter().enumerate().min_by_key(|(_, s)| s.0).expect("at least one server");
        let start = now.max(free);
        let writers =
            self.servers.iter().filter(|(end, write)| *write && *end > start).count() as u32;
        let service = self.profile.service_ns(direction, bytes, writers).round().max(1.0) as u64;
        self.servers[server] = (start + service, direction == Direction::Write);
        self.busy_ns += service;
        match direction {
            Direction::Read => self.bytes_read += bytes,
            Direction::Write => self.bytes_written += bytes,
        }
        start + service
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

#[derive(Clone, Debug, Serialize)]
pub struct TimedReport {
    pub clients: usize,
    pub requests: u64,
    pub hits: u64,
    pub hit_ratio: f64,
    pub virtual_seconds: f64,
    pub ops_per_second: f64,
    pub latency_us_mean: f64,
    pub latency_us_p50: f64,
    pub latency_us_p95: f64,
    pub latency_us_p99: f64,
    pub devices: Vec<DeviceReport>,
}

/// The devices of a run: one profile per tier of the policy, then the backing device.
pub struct TimedOptions {
    pub clients: usize,
    pub tiers: Vec<DeviceProfile>,
    pub backing: DeviceProfile,
}

/// The device operations that carry out `decision` for `req`.
fn stages(req: &Request, decision: &Decision, backing: usize, out: &mut Vec<Stage>) {
    out.clear();
    let bytes = req.size as u64;
    match (req.op, decision.hit) {
        (Op::Read | Op::Lookup, Some(tier)) => {
            out.push(Stage { device: tier.index(), direction: Direction::Read, bytes })
        }
        (Op::Read | Op::Lookup, None) => {
            out.push(Stage { device: backing, direction: Direction::Read, bytes })
        }
        (Op::Write, _) => out.push(Stage { device: backing, direction: Direction::Write, bytes }),
        (Op::Delete, _) => {}
    }
    let device = |t: TierId| t.index();
    for action in &decision.actions {
        match *action {
            Action::Insert { tier, size, .. } | Action::Update { tier, size, .. } => {
                out.push(Stage {
                    device: device(tier),
                    direction: Direction::Write,
                    bytes: size as u64,
                })
            }
            Action::Move { from, to, size, .. } => {
                out.push(Stage {
                    device: device(from),
                    direction: Direction::Read,
                    bytes: size as u64,
                });
                out.push(Stage {
                    device: device(to),
                    direction: Direction::Write,
                    bytes: size as u64,
                });
            }
            Action::WriteBack { tier, size, .. } => {
                out.push(Stage {
                    device: device(tier),
                    direction: Direction::Read,
                    bytes: size as u64,
                });
                out.push(Stage {
                    device: backing,
                    direction: Direction::Write,
                    bytes: size as u64,
                });
            }
            Action::Evict { .. } | Action::Invalidate { .. } | Action::Reject { .. } => {}
        }
    }
}

/// Runs `requests` through `policy` on modeled devices with `clients` closed-loop clients. The
/// policy decides each request when its client issues it, in issue-time order.
pub fn simulate_timed(
    policy: &mut AnyPolicy,
    requests: &[Request],
    options: &TimedOptions,
) -> TimedReport {
    assert_eq!(options.tiers.len(), policy.tier_count(), "one device profile per tier");
    let mut devices: Vec<Device> = options.tiers.iter().cloned().map(Device::new).collect();
    devices.push(Device::new(options.backing.clone()));
    let backing = devices.len() - 1;
    let clients = options.clients.max(1);
    let mut latency =
        hdrhistogram::Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).expect("bounds");
    // Events: (time, client, stage of the client's current request). A client past its last
    // stage completes its request and issues the next one.
    let mut events: BinaryHeap<Reverse<(u64, usize, usize)>> = BinaryHeap::new();
    let mut chains: Vec<Vec<Stage>> = vec![Vec::new(); clients];
    let mut issued_at: Vec<Option<u64>> = vec![None; clients];
    let mut decision = Decision::new();
    let (mut next, mut hits, mut end) = (0usize, 0u64, 0u64);
    for client in 0..clients.min(requests.len()) {
        events.push(Reverse((0, client, 0)));
    }
    while let Some(Reverse((now, client, stage))) = events.pop() {
        end = end.max(now);
        if let Some(s) = chains[client].get(stage).copied() {
            let done = devices[s.device].serve(now, s.direction, s.bytes);
            events.push(Reverse((done, client, stage + 1)));
            continue;
        }
        if let Some(issued) = issued_at[client].take() {
            latency.saturating_record((now - issued).max(1));
        }
        let Some(req) = requests.get(next) else { continue };
        // The client issues its next request: decided now, in virtual-time order.
        let req = Request { time_us: now / 1000, ..*req };
        decision.clear();
        policy.decide(&req, &mut decision);
        hits += decision.hit.is_some() as u64;
        stages(&req, &decision, backing, &mut chains[client]);
        issued_at[client] = Some(now);
        next += 1;
        events.push(Reverse((now, client, 0)));
    }
    let seconds = end as f64 / 1e9;
    let requests_done = next as u64;
    let us = |ns: u64| ns as f64 / 1000.0;
    TimedReport {
        clients,
        requests: requests_done,
        hits,
        hit_ratio: hits as f64 / requests_done.max(1) as f64,
        virtual_seconds: seconds,
        ops_per_second: if seconds > 0.0 { requests_done as f64 / seconds } else { 0.0 },
        latency_us_mean: latency.mean() / 1000.0,
        latency_us_p50: us(latency.value_at_quantile(0.5)),
        latency_us_p95: us(latency.value_at_quantile(0.95)),
        latency_us_p99: us(latency.value_at_quantile(0.99)),
        devices: devices
            .iter()
            .map(|d| DeviceReport {
                name: d.profile.name.clone(),
                utilization: if end > 0 {
                    d.busy_ns as f64 / end as f64 / d.servers.len() as f64
                } else {
                    0.0
                },
                bytes_read: d.bytes_read,
                bytes_written: d.bytes_written,
            })
            .collect(),
    }
}
