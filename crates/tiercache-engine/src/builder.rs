//! Building a cache: tiers, their sizes and policies, block size, shards, admission, seed and
//! clock. Everything is validated before anything is opened, and an error names the setting.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tiercache_core::{Capacity, DeviceProfile};
use tiercache_policy::cas::{CacheMode, CasConfig};
use tiercache_policy::{
    AdmissionConfig, AnyPolicy, HitRule, Placement, Policy, PolicyConfig, StackConfig,
};

use crate::behind::WriteBehind;
use crate::cache::{Cache, CacheCore, Settings};
use crate::clock::{Clock, MonotonicClock};
use crate::device::{Device, Emulated, Faults, Faulty};
use crate::error::EngineError;
use crate::latency;
use crate::shard::Shard;
use crate::store::{Layout, Medium};
use crate::tier::TierKind;
use crate::tierfile::{Backing, Previous, Recover};

mod validate;

/// Most shards a cache may have.
pub use tiercache_core::limits::SHARDS_MAX;
/// Smallest block: one sector.
pub const BLOCK_SIZE_MIN: usize = 512;
/// The smallest size class.
pub const SIZE_CLASS_MIN: usize = 64;
/// Blocks each shard's tier must hold when values come in size classes, so that a page can
/// always be emptied for another class (pinned pages and those the request in flight needs are
/// never chosen).
pub const SIZE_CLASS_PAGES_MIN: u64 = 16;
/// Most write-behind threads a cache may have.
pub const WRITERS_MAX: usize = 64;
/// How often the background worker runs periodic work by default.
pub const DEFAULT_TICK: std::time::Duration = std::time::Duration::from_millis(100);
/// How often controllers (NHC) are fed a measurement, unless the builder says otherwise.
pub const DEFAULT_MEASURE: std::time::Duration = std::time::Duration::from_millis(10);

/// One tier: its medium, the bytes of values it holds, and the policy that runs it.
#[derive(Clone, Debug)]
pub struct TierSpec {
    pub kind: TierKind,
    pub capacity_bytes: u64,
    pub policy: PolicyConfig,
    /// Make the medium behave like this device (emulation).
    pub profile: Option<DeviceProfile>,
}

/// What a cache is made of. With one tier, the tier's policy decides alone; with two, the
/// tiers form an exclusive DRAM-first hierarchy (upper tier's victims move to the lower).
pub struct CacheBuilder {
    tiers: Vec<TierSpec>,
    admission: Vec<AdmissionConfig>,
    block_size: usize,
    shards: usize,
    seed: u64,
    clock: Arc<dyn Clock>,
    record_latency: bool,
    missing_emulated_tier: Option<usize>,
    tick_every: Option<std::time::Duration>,
    worker_off: bool,
    placement: Placement,
    nvcache: Option<tiercache_policy::nvcache::NvcacheConfig>,
    nhc: Option<tiercache_policy::nhc::NhcConfig>,
    measure_every: std::time::Duration,
    write_behind: Option<usize>,
    size_classes: u8,
    unlocked_hits: bool,
    hit_rule: HitRule,
    faults: Option<(usize, Faults)>,
    wrappers: Vec<(usize, Wrapper)>,
    mode: Option<CasConfig>,
    overwrite_foreign_files: bool,
    scrub_rate: u64,
    recover: Recover,
    volatile_write_back: bool,
    /// The backing device given to the builder, attached before recovery.
    backing: Option<GivenBacking>,
}

/// A backing device given to the builder, and for a file its identity and path
/// (`backing_file`), checked against the tier files' before recovery writes to it.
struct GivenBacking {
    device: Arc<dyn Device>,
    file: Option<(Backing, PathBuf)>,
}

/// The setting that sizes tier `index`, as errors name it (the third tier and those below it
/// are `add_tier`'s).
fn capacity_setting(index: usize) -> &'static str {
    match index {
        0 => "capacity_bytes",
        1 => "lower_tier.capacity_bytes",
        _ => "add_tier.capacity_bytes",
    }
}

/// Wraps a tier's device in another (see [`CacheBuilder::wrap_tier`]).
pub type Wrapper = Box<dyn FnOnce(Arc<dyn Device>) -> Arc<dyn Device> + Send>;

impl CacheBuilder {
    /// A DRAM cache of 64 MiB in 4 KiB blocks, 16 shards, with `policy`.
    pub fn new(policy: PolicyConfig) -> CacheBuilder {
        CacheBuilder {
            tiers: vec![TierSpec {
                kind: TierKind::Dram,
                capacity_bytes: 64 << 20,
                policy,
                profile: None,
            }],
            admission: Vec::new(),
            block_size: 4096,
            shards: 16,
            seed: 0,
            clock: Arc::new(MonotonicClock::default()),
            record_latency: false,
            missing_emulated_tier: None,
            tick_every: None,
            worker_off: false,
            placement: Placement::DramFirst,
            nvcache: None,
            nhc: None,
            measure_every: DEFAULT_MEASURE,
            write_behind: None,
            size_classes: 1,
            unlocked_hits: true,
            hit_rule: HitRule::ENGINE,
            faults: None,
            wrappers: Vec::new(),
            mode: None,
            overwrite_foreign_files: false,
            scrub_rate: crate::scrub::DEFAULT_RATE,
            recover: Recover::Quiet,
            volatile_write_back: false,
            backing: None,
        }
    }

    /// The device the cache's dirty blocks are written back to, attached before recovery:
    /// a block recovery finds but cannot keep (a tier over its policy's share after a crash
    /// between a block's move and the next sync) is written back to it rather than lost. Put
    /// the cache over the same device ([`CachedFile::over`](crate::CachedFile::over)). Nothing
    /// checks that the blocks recovered are this device's: the caller vouches for it.
    pub fn backing_device(mut self, device: Arc<dyn Device>) -> Self {
        self.backing = Some(GivenBacking { device, file: None });
        self
    }

    /// As [`backing_device`](Self::backing_device), the file (or block device) at `path`,
    /// read and written with direct I/O if `direct`. Recovery checks that the tier files hold
    /// this file's blocks before it writes anything to it (an error naming both otherwise).
    /// Open the cache's [`CachedFile`](crate::CachedFile) over the same path.
    pub fn backing_file(mut self, path: &Path, direct: bool) -> Result<Self, EngineError> {
        let io = |action, source| EngineError::Io { path: path.to_path_buf(), action, source };
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| io("cannot open the backing file", e))?;
        let identity = Backing::of(&file).map_err(|e| io("cannot stat the backing file", e))?;
        let device: Arc<dyn Device> = match direct {
            true => Arc::new(crate::direct::DirectFile::open(path)?),
            false => Arc::new(crate::device::FileDevice::new(file, path)),
        };
        self.backing = Some(GivenBacking { device, file: Some((identity, path.to_path_buf())) });
        Ok(self)
    }

    /// Allows write-back (and write-only) over DRAM tiers only. Without a persistent tier
    /// (mapped or file), dirty blocks are lost in a crash: a sync writes them back to the
    /// backing device, but a write acknowledged since the last sync is gone. Refused unless
    /// asked for by name.
    pub fn volatile_write_back(mut self, on: bool) -> Self {
        self.volatile_write_back = on;
        self
    }

    /// Whether the cache keeps written data dirty: write-back and write-only modes, and the
    /// policies that place dirty blocks themselves.
    fn writes_dirty(&self) -> bool {
        self.dirty_policy()
            || self
                .mode
                .as_ref()
                .is_some_and(|c| matches!(c.mode, CacheMode::WriteBack | CacheMode::WriteOnly))
    }

    /// Whether the policy places dirty blocks itself (Hibachi, Hybrid-ARC: dirty pages in
    /// the lower, persistent tier, clean ones in DRAM).
    fn dirty_policy(&self) -> bool {
        matches!(self.tiers[0].policy, PolicyConfig::Hibachi(_) | PolicyConfig::HybridArc)
    }

    /// What to do with the blocks a reused tier file holds (mapped and file tiers; see
    /// `docs/DURABILITY.md`): keep every block that checks out (`Quiet`, the default: the
    /// cache restarts warm), refuse to start on any damage (`Strict`), or start empty
    /// (`Wipe`). A tier file of another geometry is an error unless wiped.
    pub fn recover(mut self, recover: Recover) -> Self {
        self.recover = recover;
        self
    }

    /// Bytes per second the scrubber of a mapped upper tier reads (see [`crate::scrub`]):
    /// hits without the lock check a mapped block once until it changes, and the scrubber
    /// checks it again within a pass of the tier at this rate. 0: no scrubber, and every hit
    /// checks its block. By default 256 MiB/s.
    pub fn scrub_rate(mut self, bytes_per_second: u64) -> Self {
        self.scrub_rate = bytes_per_second;
        self
    }

    /// Lets a tier path that holds a file which is not a tier file (no tier header) be
    /// overwritten; without it such a file is refused and never written (see
    /// [`crate::tierfile`]).
    pub fn overwrite_foreign_files(mut self, on: bool) -> Self {
        self.overwrite_foreign_files = on;
        self
    }

    /// The medium of the first (upper) tier.
    pub fn tier(mut self, kind: TierKind) -> Self {
        self.tiers[0].kind = kind;
        self
    }

    /// Bytes of values the first tier holds (block headers come on top).
    pub fn capacity_bytes(mut self, bytes: u64) -> Self {
        self.tiers[0].capacity_bytes = bytes;
        self
    }

    /// A policy stack, as `sim`, experiment files and `serve --config` describe one
    /// ([`StackConfig`]), over `media`, one per tier top down: each tier's policy and capacity,
    /// the placement, admission, NVCache, cache mode, NHC, seed and shards. The engine counts
    /// capacity in bytes; a stack counted in objects is an error naming `unit`, and so is a stack with
    /// another number of tiers than `media` has.
    pub fn stack(mut self, stack: &StackConfig, media: Vec<TierKind>) -> Result<Self, EngineError> {
        if stack.tiers.len() != media.len() {
            let reason = format!(
                "the stack has {} tiers and the cache {} media to put them on",
                stack.tiers.len(),
                media.len()
            );
            return Err(EngineError::config("tiers", reason));
        }
        let mut tiers = Vec::new();
        for ((policy, capacity), kind) in stack.tiers.iter().zip(media) {
            if capacity.unit != tiercache_core::Unit::Bytes {
                let reason = "the engine sizes its tiers in bytes: use unit = \"bytes\"";
                return Err(EngineError::config("unit", reason));
            }
            let capacity_bytes = capacity.amount;
            tiers.push(TierSpec { kind, capacity_bytes, policy: policy.clone(), profile: None });
        }
        self.tiers = tiers;
        self.placement = stack.placement;
        self.admission = stack.admission.clone();
        self.nvcache = stack.nvcache.clone();
        self.mode = stack.mode.clone();
        self.nhc = stack.nhc.clone();
        self.seed = stack.seed;
        if let Some(rule) = stack.hit_rule {
            self.hit_rule = rule;
        }
        if let Some(shards) = stack.shards {
            self.shards = shards;
        }
        if let Some(us) = stack.tick_us {
            self.tick_every = Some(std::time::Duration::from_micros(us));
        }
        Ok(self)
    }

    /// A second tier below the first: the first tier's victims move here.
    pub fn lower_tier(mut self, kind: TierKind, capacity_bytes: u64, policy: PolicyConfig) -> Self {
        self.tiers.truncate(1);
        self.tiers.push(TierSpec { kind, capacity_bytes, policy, profile: None });
        self
    }

    /// One more tier below the others (the second, third...): the tier above's victims move
    /// here, as the policy's hierarchy moves them (`tiercache_policy::AnyPolicy::hierarchy`).
    pub fn add_tier(mut self, kind: TierKind, capacity_bytes: u64, policy: PolicyConfig) -> Self {
        self.tiers.push(TierSpec { kind, capacity_bytes, policy, profile: None });
        self
    }

    /// Fault injection: every `every`-th write to tier `tier` (0 upper, 1 lower; a file or
    /// flash tier) fails with an I/O error and writes nothing, as a failing device's would, to
    /// see what the cache does over one. A block whose write failed is dropped (the policy
    /// told) and counted in `io_errors`; the caller's operation still succeeds, since its data
    /// is in the backing store.
    pub fn fail_writes(self, tier: usize, every: u64) -> Self {
        self.faults(tier, Faults { write_every: Some(every), ..Faults::default() })
    }

    /// Fault injection as [`Faults`] says (failing reads, failing and torn writes) on tier
    /// `tier`, a file or flash one: its device is wrapped in a [`Faulty`] one.
    pub fn faults(mut self, tier: usize, faults: Faults) -> Self {
        self.faults = Some((tier, faults));
        self
    }

    /// Wraps tier `tier`'s device in the one `wrapper` makes of it: a [`crate::device::CrashImage`]
    /// to stage crashes, or any other [`Device`]. Wrappers apply in the order given, nearest
    /// the medium, under fault injection and emulation. A wrapped memory tier is read and
    /// written through its device, under its shard's lock (see [`crate::device`]).
    pub fn wrap_tier(
        mut self,
        tier: usize,
        wrapper: impl FnOnce(Arc<dyn Device>) -> Arc<dyn Device> + Send + 'static,
    ) -> Self {
        self.wrappers.push((tier, Box::new(wrapper)));
        self
    }

    /// Makes tier `tier` (0 upper, 1 lower) behave like `profile`.
    pub fn emulate(mut self, tier: usize, profile: DeviceProfile) -> Self {
        if let Some(spec) = self.tiers.get_mut(tier) {
            spec.profile = Some(profile);
        } else {
            self.missing_emulated_tier = Some(tier);
        }
        self
    }

    /// Where misses go and when blocks move up between two tiers (Kassa et al.); DRAM-first
    /// by default.
    /// Admit through NVCache's rules (overhead bypass, small-bypass; Writes Hurt section 3.2),
    /// live: each shard measures its own lookups, inserts and removals. A small-bypass DRAM
    /// size is shared among the shards like the data is.
    pub fn nvcache(mut self, config: tiercache_policy::nvcache::NvcacheConfig) -> Self {
        self.nvcache = Some(config);
        self
    }

    /// Non-hierarchical caching on top of the tiers (Orthus, section 4): the background
    /// worker measures the engine's completed operations and their latency every
    /// [`measure_every`](Self::measure_every) and feeds the scheduler, which sends part of the
    /// clean read hits to the backing device (the caller loads them: `get` returns `None`,
    /// `read_through` calls its loader) and stops admitting read misses while it tunes.
    /// Latency is recorded (it is the signal).
    pub fn nhc(mut self, config: tiercache_policy::nhc::NhcConfig) -> Self {
        self.nhc = Some(config);
        self
    }

    /// The measurement interval of controllers (NHC); 10 ms by default (the paper: 5 ms).
    pub fn measure_every(mut self, interval: std::time::Duration) -> Self {
        self.measure_every = interval;
        self
    }

    /// Runs the policy in an Open CAS cache mode (`tiercache_policy::cas`): the mode decides
    /// what `put` places, updates or drops and whether reads are served from the cache, and a
    /// [`CachedFile`](crate::CachedFile) over the cache follows it. The engine runs every mode,
    /// write-back and write-only over a persistent tier, with NHIT promotion, and no sequential
    /// cutoff: each shard sees only its own keys, so no shard sees a run of consecutive blocks.
    pub fn mode(mut self, config: CasConfig) -> Self {
        self.mode = Some(config);
        self
    }

    pub fn placement(mut self, placement: Placement) -> Self {
        self.placement = placement;
        self
    }

    pub fn block_size(mut self, bytes: usize) -> Self {
        self.block_size = bytes;
        self
    }

    pub fn shards(mut self, shards: usize) -> Self {
        self.shards = shards;
        self
    }

    pub fn admission(mut self, filters: Vec<AdmissionConfig>) -> Self {
        self.admission = filters;
        self
    }

    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// How often the background worker runs the policies' periodic work. By default a worker
    /// runs every 100 ms when a tier's policy has periodic work (LFRU), and none runs otherwise.
    pub fn tick_every(mut self, interval: std::time::Duration) -> Self {
        self.tick_every = Some(interval);
        self
    }

    /// No background worker: periodic work then runs only as requests arrive (deterministic
    /// replays, tests).
    pub fn without_worker(mut self) -> Self {
        self.worker_off = true;
        self
    }

    /// Size classes in the memory tiers (DRAM, mapped): `n` classes of the block size, a half,
    /// a quarter... down to `block_size >> (n - 1)`, so a value takes the smallest class that
    /// holds it rather than a whole block. Policies then count capacity in bytes, each value
    /// as its class's size. A page (one block) holds blocks of one class at a time and goes
    /// back to the pool when it empties; when every free chunk is of the wrong class, the
    /// page with the fewest live blocks is emptied (its blocks dropped, the policy told,
    /// counted in `space_evictions`). 1 (the default) keeps whole blocks. File and flash tiers
    /// store whole blocks only.
    pub fn size_classes(mut self, classes: u8) -> Self {
        self.size_classes = classes;
        self
    }

    /// Chunks a page may split into.
    fn chunks(&self) -> u32 {
        1 << self.size_classes.saturating_sub(1).min(15)
    }

    /// Threads writing file and flash tiers behind their callers (see [`crate::behind`]); 0
    /// writes them on the caller's thread. By default 4 when a tier is flash, 0 otherwise (a
    /// buffered file write costs less than handing it over).
    pub fn write_behind(mut self, threads: usize) -> Self {
        self.write_behind = Some(threads);
        self
    }

    /// Threads writing behind, as set or by default.
    fn writers(&self) -> usize {
        // Write-back writes in the caller's turn (see `validate`).
        let flash = self.tiers.iter().any(|t| matches!(t.kind, TierKind::Flash { .. }));
        let default =
            if flash && !self.writes_dirty() { crate::behind::DEFAULT_THREADS } else { 0 };
        self.write_behind.unwrap_or(default)
    }

    /// Whether upper-tier hits may be served without the shard's lock, the policy told of
    /// them in batches (see [`crate::optimistic`]); on by default. It applies where the
    /// policy's hits are quiet (FIFO, LRU, CLOCK, LFU, ARC, S3-FIFO on one tier), nothing is
    /// timed or measured, and the upper tier is DRAM or mapped memory without size classes or
    /// an emulated profile. Off, every hit takes the lock (to compare the two).
    pub fn unlocked_hits(mut self, on: bool) -> Self {
        self.unlocked_hits = on;
        self
    }

    /// How a policy with quiet hits is told of its hits (see [`tiercache_policy::told`]): by
    /// default [`HitRule::ENGINE`], a key's first hit in each epoch of 1/32 of a shard's top
    /// tier in insertions, which spares the hits that follow it the policy's lock and state;
    /// [`HitRule::Exact`] tells every hit. The simulator replays either
    /// (`tiercache sim --hit-rule`), and a one-thread engine decides as it does.
    pub fn hit_rule(mut self, rule: HitRule) -> Self {
        self.hit_rule = rule;
        self
    }

    /// Keep HDR histograms of read and write latency (two clock reads per operation).
    pub fn record_latency(mut self, on: bool) -> Self {
        self.record_latency = on;
        self
    }

    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Whether a controller is fed measurements (NHC, or measured interference-aware
    /// admission): the worker then measures each interval, and latency is recorded.
    fn measured(&self) -> bool {
        self.nhc.is_some() || self.nvcache.as_ref().is_some_and(|c| c.measured)
    }

    /// Slots of a tier's medium: each shard's region times the shards.
    fn medium_slots(&self, tier: &TierSpec, per_shard: u64) -> u64 {
        self.region_slots(tier, per_shard) * self.shards as u64
    }

    /// Slots of a shard's region of a tier whose policy keeps `per_shard` blocks: those and
    /// the slack, or for a placed tier its sets whole, spare slots included.
    fn region_slots(&self, tier: &TierSpec, per_shard: u64) -> u64 {
        match self.placed(tier) {
            Some(sets) => per_shard / sets.ways as u64 * (sets.ways + sets.spare) as u64,
            None => per_shard + tier.kind.slack_slots(),
        }
    }

    /// For a flash tier run by the set-associative policy (without size classes), its
    /// configuration as the engine runs it: the policy places each block in a slot of its
    /// key's set, with at least two spare slots a set (`Shard::can_pin`), and the shard keeps
    /// no per-block metadata beside the policy's but a checksum and two bits
    /// (`docs/DURABILITY.md`).
    fn placed(&self, tier: &TierSpec) -> Option<tiercache_policy::setassoc::SetAssocConfig> {
        match (&tier.kind, &tier.policy) {
            (TierKind::Flash { .. }, PolicyConfig::Setassoc(c)) if self.size_classes == 1 => {
                Some(tiercache_policy::setassoc::SetAssocConfig {
                    spare: c.spare.max(2),
                    ..c.clone()
                })
            }
            _ => None,
        }
    }

    /// Shard `index`'s policy stack: the cache's stack with each tier's share of slots, the
    /// shard's share of NVCache's budget and its seed ([`StackConfig::shard`], which the
    /// simulator's model of a sharded cache uses too).
    fn policy(&self, per_shard: &[u64], index: usize) -> Result<AnyPolicy, EngineError> {
        let (block, shards) = (self.block_size as u64, self.shards as u64);
        let capacities: Vec<Capacity> = per_shard
            .iter()
            .map(|n| match self.size_classes {
                1 => Capacity::objects(n * shards),
                _ => Capacity::bytes(n * shards * block),
            })
            .collect();
        let stack = StackConfig {
            tiers: self
                .tiers
                .iter()
                .map(|t| match self.placed(t) {
                    Some(sets) => PolicyConfig::Setassoc(sets),
                    None => t.policy.clone(),
                })
                .zip(capacities)
                .collect(),
            placement: self.placement,
            admission: self.admission.clone(),
            nvcache: self.nvcache.clone(),
            mode: self.mode.clone(),
            nhc: self.nhc.clone(),
            seed: self.seed,
            shards: None,
            tick_us: self.tick_every.map(|t| t.as_micros() as u64),
            hit_rule: Some(self.hit_rule),
        };
        Ok(stack.shard(index, self.shards).build()?)
    }

    /// Takes back the blocks of the tiers whose files held a tier of this geometry (mapped and
    /// file tiers without size classes; others start empty, with a note), shard by shard.
    fn recover_blocks(
        &self,
        media: &[Medium],
        shards: &mut [Shard],
    ) -> Result<Option<crate::cache::Recovery>, EngineError> {
        let started = std::time::Instant::now();
        let mut tiers = Vec::new();
        let mut recovery = crate::cache::Recovery::default();
        let mut written_back = Vec::new();
        for (t, medium) in media.iter().enumerate() {
            let Previous::Tier { backing, state, short, headers_crc } = medium.previous else {
                continue;
            };
            let path = medium.path().expect("a tier file");
            if self.size_classes > 1 {
                recovery.notes.push(format!(
                    "{}: blocks of size-classed tiers are not recovered yet (they need a page \
                     map on the medium), so it starts empty",
                    path.display()
                ));
                continue;
            }
            recovery.backing = recovery.backing.or(backing);
            recovery.clean &= state != crate::tierfile::State::Open;
            if state == crate::tierfile::State::Clean {
                // Everything dirty was written back before the stop.
                written_back.push(t);
            }
            if short {
                recovery.notes.push(format!(
                    "{}: the tier file was shorter than its tier; the missing slots read as empty",
                    path.display()
                ));
            }
            // A mapped or flash tier stopped cleanly whose headers (flash: records) are as the
            // stop left them: taken without reading every value (each is checked when first
            // read). Strict reads everything, to refuse any damage before starting.
            let stopped_cleanly =
                state != crate::tierfile::State::Open && !short && headers_crc.is_some();
            let mut headers_only = false;
            if self.recover == Recover::Quiet && stopped_cleanly {
                headers_only = medium.headers_crc()? == headers_crc;
                if !headers_only {
                    recovery.notes.push(format!(
                        "{}: the block headers changed since the clean stop; every block is read \
                         and checked",
                        path.display()
                    ));
                }
            }
            recovery.headers_only += headers_only as usize;
            tiers.push((t, path, headers_only));
        }
        if tiers.is_empty() {
            return Ok(None);
        }
        let bits = self.shards.trailing_zeros();
        let indices: Vec<(usize, bool)> = tiers.iter().map(|(t, _, h)| (*t, *h)).collect();
        let scans = in_parallel(shards.iter_mut().enumerate().collect(), |(i, shard)| {
            let mut scanned =
                shard.scan(&indices, |key| crate::cache::shard_index(key, bits) == i)?;
            scanned.written_back(&written_back);
            Ok(scanned)
        })
        .into_iter()
        .collect::<Result<Vec<_>, EngineError>>()?;
        if self.recover == Recover::Strict {
            // Refused before anything is changed.
            let damaged = shards.iter().zip(&scans).filter_map(|(s, scan)| s.first_damage(scan));
            if let Some((t, at, what)) = damaged.clone().next() {
                let what = format!(
                    "the slot at byte {at} fails its checks ({what}); {} shards have damage",
                    damaged.count()
                );
                let path = tiers.iter().find(|(i, _, _)| *i == t).expect("scanned").1;
                return Err(EngineError::Damaged { path: path.to_path_buf(), what });
            }
        }
        // Blocks found are about to be written back to a backing file given to the builder:
        // it must be theirs.
        if let Some(GivenBacking { file: Some((identity, backing)), .. }) = &self.backing {
            if recovery.backing != Some(*identity) && scans.iter().any(|s| !s.is_empty()) {
                let tier = tiers[0].1;
                return Err(crate::cache::mismatch(tier, recovery.backing, *identity, backing));
            }
        }
        in_parallel(shards.iter_mut().zip(scans).collect(), |(shard, scan)| shard.restore(scan))
            .into_iter()
            .collect::<Result<(), EngineError>>()?;
        recovery.seconds = started.elapsed().as_secs_f64();
        Ok(Some(recovery))
    }

    pub fn build(mut self) -> Result<Cache, EngineError> {
        let per_shard = self.validate()?;
        let mut wrappers = std::mem::take(&mut self.wrappers);
        let mut media: Vec<Medium> = self
            .tiers
            .iter()
            .zip(&per_shard)
            .enumerate()
            .map(|(i, (tier, n))| {
                let layout = Layout {
                    slots: self.medium_slots(tier, *n),
                    slot_bytes: tier.kind.slot_bytes(self.block_size, self.chunks()),
                    chunks: self.chunks(),
                    block_size: self.block_size,
                    shards: self.shards,
                };
                let mut medium =
                    Medium::open(&tier.kind, layout, self.overwrite_foreign_files, self.recover)?;
                for (_, wrapper) in wrappers.extract_if(.., |(t, _)| *t == i) {
                    medium.wrap(wrapper);
                }
                if let Some((_, faults)) = self.faults.filter(|(t, _)| *t == i) {
                    medium.wrap(|device| Arc::new(Faulty::new(device, faults)));
                }
                if let Some(profile) = &tier.profile {
                    medium.wrap(|device| Arc::new(Emulated::new(device, profile.clone())));
                }
                Ok(medium)
            })
            .collect::<Result<_, EngineError>>()?;
        let writers = self.writers();
        let io_tier = self.tiers.iter().any(|t| t.kind.is_io());
        let behind = (writers > 0 && io_tier).then(|| Arc::new(WriteBehind::default()));
        let mut shards = Vec::with_capacity(self.shards);
        // Hits without the lock need a policy whose hits are quiet (asked of the first shard's
        // below; all shards run the same policy), no periodic work, no controller timing tier
        // reads, and a memory upper tier whose slots can be published (not emulated, no size
        // classes).
        let unlocked_hits = self.unlocked_hits
            && !self.tiers.iter().any(|t| t.policy.uses_time())
            && !self.measured()
            && self.tiers[0].profile.is_none()
            && !self.tiers[0].kind.is_io()
            && self.size_classes == 1;
        let mut sets = None;
        let mut tables = Vec::new();
        for i in 0..self.shards as u64 {
            let regions = media
                .iter()
                .zip(self.tiers.iter().zip(&per_shard))
                .map(|(m, (tier, n))| {
                    let slots = self.region_slots(tier, *n);
                    m.region(i * slots, slots, self.placed(tier).is_some())
                })
                .collect::<Result<_, _>>()?;
            let mut shard =
                Shard::new(self.policy(&per_shard, i as usize)?, regions, self.block_size);
            if unlocked_hits && shard.policy.quiet_hits() {
                if sets.is_none() {
                    let slots = (per_shard[0] + self.tiers[0].kind.slack_slots()) as usize;
                    let made =
                        crate::optimistic::Sets::new(self.shards, slots).map_err(|source| {
                            EngineError::Io {
                                path: "<unlocked hits>".into(),
                                action: "cannot allocate the table of published blocks",
                                source,
                            }
                        })?;
                    sets = Some(made);
                }
                let sets = sets.as_ref().expect("made above");
                tables.extend(shard.publish((sets, i as usize)).map(|mut table| {
                    table.check_every_hit(self.scrub_rate == 0);
                    table
                }));
            }
            shard.behind = behind.clone().map(|queue| (queue, i as usize));
            if self.record_latency || self.measured() {
                shard.latency = Some(Box::new([latency::histogram(), latency::histogram()]));
            }
            shards.push(shard);
        }
        if let Some(given) = &self.backing {
            for shard in &mut shards {
                shard.backing = Some(given.device.clone());
            }
        }
        let recovery = self.recover_blocks(&media, &mut shards)?;
        // From here on blocks are written: the tier files say a cache has them open.
        for medium in &mut media {
            medium.begin()?;
        }
        let keeps_dirty = self.writes_dirty();
        // Open CAS write-back cleans on time (ALRU), so requests carry it and the worker ticks.
        let timed = self.tiers.iter().any(|t| t.policy.uses_time())
            || (self.writes_dirty() && self.mode.is_some());
        let measured = self.measured();
        let tick_every = match (self.worker_off, self.tick_every, timed) {
            (true, _, _) => None,
            (false, _, _) if measured => Some(self.measure_every),
            (false, Some(interval), _) => Some(interval),
            // ACP cleaning wakes up on its own period (a disk kept streaming).
            (false, None, true) => Some(match &self.mode {
                Some(m) if m.cleaning_policy == tiercache_policy::cas::Cleaning::Acp => {
                    std::time::Duration::from_micros(m.acp.wake_up_us.max(1_000))
                }
                _ => DEFAULT_TICK,
            }),
            (false, None, false) => None,
        };
        let record_latency = self.record_latency || measured;
        let meter = measured.then(crate::cache::Meter::new);
        let settings = Settings {
            block_size: self.block_size,
            clock: self.clock,
            record_latency,
            timed,
            meter,
            behind,
            keeps_dirty,
            unlocked: (tables.len() == self.shards).then(|| crate::cache::Unlocked {
                tables: tables.into_boxed_slice(),
                log: crate::optimistic::HitLog::new(self.shards),
            }),
        };
        let mut core = CacheCore::new(shards, media, settings);
        core.recovery = recovery;
        if let Some(GivenBacking { device, file }) = self.backing.take() {
            if let Some((identity, path)) = file {
                core.attach_backing(identity, &path)?;
            }
            core.attach_device(device);
        }
        Ok(Cache::start(core, tick_every, writers, self.scrub_rate))
    }
}

/// Runs `work` on every item, the items split into runs over the machine's cores, one thread a
/// run; results come back in the items' order. Recovery reads and checksums whole tiers shard
/// by shard, and each shard's scan and restore touch only that shard.
fn in_parallel<I: Send, T: Send>(items: Vec<I>, work: impl Fn(I) -> T + Sync) -> Vec<T> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let per_thread = items.len().div_ceil(cores).max(1);
    let mut items = items.into_iter();
    let runs: Vec<Vec<I>> = std::iter::from_fn(|| {
        let run: Vec<I> = items.by_ref().take(per_thread).collect();
        (!run.is_empty()).then_some(run)
    })
    .collect();
    std::thread::scope(|s| {
        let work = &work;
        let threads: Vec<_> = runs
            .into_iter()
            .map(|run| s.spawn(move || run.into_iter().map(work).collect::<Vec<T>>()))
            .collect();
        threads.into_iter().flat_map(|t| t.join().expect("a recovery thread panicked")).collect()
    })
}
