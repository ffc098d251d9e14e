//! Building a cache: tiers, their sizes and policies, block size, shards, admission, seed and
//! clock. Everything is validated before anything is opened, and an error names the setting.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tiercache_core::{Capacity, DeviceProfile};
use tiercache_policy::cas::{CacheMode, CasConfig};
use tiercache_policy::{AdmissionConfig, AnyPolicy, HitRule, Placement, PolicyConfig, StackConfig};

use crate::cache::{Cache, CacheCore, Settings};
use crate::clock::{Clock, MonotonicClock};
use crate::device::{Device, Emulated, Faults, Faulty};
use crate::error::EngineError;
use crate::shard::Shard;
use crate::tier::behind::WriteBehind;
use crate::tier::medium::{Layout, Medium};
use crate::tier::superblock::{Backing, Recover};
use crate::tier::TierKind;

mod stack;
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
    large_values: Option<u64>,
    nvcache: Option<tiercache_policy::nvcache::NvcacheConfig>,
    nhc: Option<tiercache_policy::nhc::NhcConfig>,
    measure_every: std::time::Duration,
    write_behind: Option<usize>,
    size_classes: u8,
    /// The largest value (0: a block).
    max_value: usize,
    /// The largest value is at most `max_value`: less if a shard's largest tier holds less.
    max_value_fits: bool,
    unlocked_hits: bool,
    hit_rule: HitRule,
    faults: Option<(usize, Faults)>,
    wrappers: Vec<(usize, Wrapper)>,
    mode: Option<CasConfig>,
    overwrite_foreign_files: bool,
    scrub_rate: u64,
    sync_interval: Option<std::time::Duration>,
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

/// How many of the largest objects a file or flash region of a cache whose values span pages
/// has room to pin at once (reads and writes behind of their pages, with the shard unlocked),
/// at most as many pages as its policy keeps. With room for one, a 2-thread run of
/// `foyer-compare hybrid --workload objects` wrote a third of its demotions under the shard's
/// lock and did 25.3k ops/s; with room for four, 31.0k-33.9k (eight: 32.3k-37.0k).
const PINNED_OBJECTS: u64 = 4;

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
            large_values: None,
            nvcache: None,
            nhc: None,
            measure_every: DEFAULT_MEASURE,
            write_behind: None,
            size_classes: 1,
            max_value: 0,
            max_value_fits: false,
            unlocked_hits: true,
            hit_rule: HitRule::ENGINE,
            faults: None,
            wrappers: Vec::new(),
            mode: None,
            overwrite_foreign_files: false,
            scrub_rate: crate::scrub::DEFAULT_RATE,
            sync_interval: Some(crate::cache::DEFAULT_SYNC_INTERVAL),
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
            true => Arc::new(crate::device::DirectFile::open(path)?),
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

    /// How often the cache syncs its persistent tiers on its own (see `cache::checkpoint`):
    /// a crash of the machine loses at most this much of their changes, and in write-back
    /// at most this much acknowledged data not yet synced. 1 s by default; 0 turns it off.
    pub fn sync_interval(mut self, interval: std::time::Duration) -> Self {
        self.sync_interval = Some(interval).filter(|i| !i.is_zero());
        self
    }

    /// Lets a tier path that holds a file which is not a tier file (no tier header) be
    /// overwritten; without it such a file is refused and never written (see
    /// [`crate::tier::superblock`]).
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

    /// A miss of a value larger than `bytes` goes to the tier below the top, never promoted
    /// (`tiercache_policy::hierarchy`): so a value near a shard's memory does not push out
    /// that much of it. Needs two or more tiers.
    pub fn large_values(mut self, bytes: u64) -> Self {
        self.large_values = Some(bytes);
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

    /// No background worker: periodic work then runs only as requests arrive, and the tiers
    /// sync only when asked, with no background checkpoints (deterministic replays, tests).
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

    /// Values of up to `bytes` (objects of any size, see [`crate::keyed`]): a value larger than
    /// a block spans as many pages of its tier as it needs, each written with a header of its
    /// own, and is one entry of the policy, sized as its pages. Policies then count capacity in
    /// bytes. The default, and anything up to the block size, keeps values within a block.
    /// Objects spanning pages are kept only in a cache that keeps nothing dirty.
    pub fn max_value(mut self, bytes: usize) -> Self {
        self.max_value = bytes;
        self.max_value_fits = false;
        self
    }

    /// As [`max_value`](Self::max_value), but where a shard's largest tier holds less than
    /// `bytes`, the largest value is what it holds (a default that fits any cache).
    pub fn max_value_at_most(mut self, bytes: usize) -> Self {
        self.max_value = bytes;
        self.max_value_fits = true;
        self
    }

    /// Whether values may span pages.
    fn spans(&self) -> bool {
        self.max_value > self.block_size
    }

    /// The largest value, in bytes.
    fn largest_value(&self) -> usize {
        self.max_value.max(self.block_size)
    }

    /// Chunks a page may split into.
    fn chunks(&self) -> u32 {
        1 << self.size_classes.saturating_sub(1).min(15)
    }

    /// Threads writing file and flash tiers behind their callers (see [`crate::tier::behind`]); 0
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
            if flash && !self.writes_dirty() { crate::tier::behind::DEFAULT_THREADS } else { 0 };
        self.write_behind.unwrap_or(default)
    }

    /// Whether upper-tier hits may be served without the shard's lock, the policy told of
    /// them in batches (see [`crate::tier::optimistic`]); on by default. It applies where the
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
            None => per_shard + self.slack(tier, per_shard),
        }
    }

    /// Slots a tier's region has beyond its policy's capacity: its kind's slack, and in a cache
    /// whose values span pages, room for the largest object's new copy while its old pages
    /// are still held (an overwrite, or a move in before the block it swaps with has left:
    /// [`copy_reserve`](Self::copy_reserve)), and on a file or flash tier room to pin the
    /// pages of a few of the largest objects ([`PINNED_OBJECTS`]) while they are read or
    /// written with the shard unlocked.
    fn slack(&self, tier: &TierSpec, per_shard: u64) -> u64 {
        let largest = self.largest_pages();
        let pinned = match self.spans() && tier.kind.is_io() {
            true => (PINNED_OBJECTS * largest).min(per_shard).max(largest),
            false => 0,
        };
        tier.kind.slack_slots() + pinned + self.copy_reserve()
    }

    /// Slots of a region's slack that pins never take (see `slack`).
    fn copy_reserve(&self) -> u64 {
        match self.spans() {
            true => self.largest_pages(),
            false => 0,
        }
    }

    /// The pages the largest value spans.
    fn largest_pages(&self) -> u64 {
        self.max_value.div_ceil(self.block_size) as u64
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
            .map(|n| match self.size_classes == 1 && !self.spans() {
                true => Capacity::objects(n * shards),
                false => Capacity::bytes(n * shards * block),
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
            large_values: self.large_values,
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

    pub fn build(mut self) -> Result<Cache, EngineError> {
        let per_shard = self.validate()?;
        if self.max_value_fits {
            let room = per_shard.iter().max().copied().unwrap_or(0) as usize * self.block_size;
            self.max_value = self.max_value.min(room);
        }
        let mut media = self.open_media(&per_shard)?;
        let writers = self.writers();
        let io_tier = self.tiers.iter().any(|t| t.kind.is_io());
        let behind = (writers > 0 && io_tier).then(|| Arc::new(WriteBehind::default()));
        let (mut shards, unlocked) = self.make_shards(&media, &per_shard, &behind)?;
        if let Some(given) = &self.backing {
            for shard in &mut shards {
                shard.attach_backing(given.device.clone());
            }
        }
        let backing = self.backing.as_ref().and_then(|b| b.file.as_ref());
        let options = crate::recovery::Options {
            recover: self.recover,
            size_classes: self.size_classes,
            backing: backing.map(|(identity, path)| (*identity, path.as_path())),
        };
        let recovery = crate::recovery::recover(&media, &mut shards, &options)?;
        // From here on blocks are written: the tier files say a cache has them open.
        for medium in &mut media {
            medium.begin()?;
        }
        let measured = self.measured();
        let settings = Settings {
            block_size: self.block_size,
            clock: self.clock.clone(),
            record_latency: self.record_latency || measured,
            timed: self.timed(),
            meter: measured.then(crate::cache::Meter::new),
            behind,
            keeps_dirty: self.writes_dirty(),
            unlocked,
            max_value: self.largest_value(),
        };
        let tick_every = self.worker_interval();
        let mut core = CacheCore::new(shards, media, settings);
        core.recovery = recovery;
        if let Some(GivenBacking { device, file }) = self.backing.take() {
            if let Some((identity, path)) = file {
                core.attach_backing(identity, &path)?;
            }
            core.attach_device(device);
        }
        let sync_every = self.sync_interval.filter(|_| !self.worker_off);
        Ok(Cache::start(core, tick_every, writers, (self.scrub_rate, sync_every)))
    }

    /// Opens each tier's medium, wrapped as the builder says (wrappers nearest the medium,
    /// then fault injection, then emulation).
    fn open_media(&mut self, per_shard: &[u64]) -> Result<Vec<Medium>, EngineError> {
        let mut wrappers = std::mem::take(&mut self.wrappers);
        let mut media = Vec::with_capacity(self.tiers.len());
        for (i, (tier, n)) in self.tiers.iter().zip(per_shard).enumerate() {
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
            media.push(medium);
        }
        Ok(media)
    }

    /// The shards, each with its region of every medium and its policy, writing behind to
    /// `behind`; and, where hits may be served without the lock, the shards' published upper
    /// tiers.
    fn make_shards(
        &self,
        media: &[Medium],
        per_shard: &[u64],
        behind: &Option<Arc<WriteBehind>>,
    ) -> Result<(Vec<Shard>, Option<crate::cache::Unlocked>), EngineError> {
        // Hits without the lock need a policy whose hits are quiet (asked of each shard's
        // below; all shards run the same policy), no periodic work, no controller timing tier
        // reads, and a memory upper tier whose slots can be published (not emulated, no size
        // classes).
        let unlocked_hits = self.unlocked_hits
            && !self.tiers.iter().any(|t| t.policy.uses_time())
            && !self.measured()
            && self.tiers[0].profile.is_none()
            && !self.tiers[0].kind.is_io()
            && self.size_classes == 1
            && !self.spans();
        let mut sets = None;
        let mut tables = Vec::new();
        let mut shards = Vec::with_capacity(self.shards);
        for i in 0..self.shards {
            let regions = media
                .iter()
                .zip(self.tiers.iter().zip(per_shard))
                .map(|(m, (tier, n))| {
                    let slots = self.region_slots(tier, *n);
                    let mut region = m.region(i as u64 * slots, slots, self.placed(tier).is_some());
                    if let Ok(region) = &mut region {
                        region.set_slack(self.slack(tier, *n), self.copy_reserve());
                    }
                    region
                })
                .collect::<Result<_, _>>()?;
            let mut shard = Shard::new(self.policy(per_shard, i)?, regions, self.block_size);
            shard.allow_spans(self.spans());
            if unlocked_hits && shard.quiet_hits() {
                if sets.is_none() {
                    let slots = (per_shard[0] + self.tiers[0].kind.slack_slots()) as usize;
                    let made = crate::tier::optimistic::Sets::new(self.shards, slots).map_err(
                        |source| EngineError::Io {
                            path: "<unlocked hits>".into(),
                            action: "cannot allocate the table of published blocks",
                            source,
                        },
                    )?;
                    sets = Some(made);
                }
                let sets = sets.as_ref().expect("made above");
                tables.extend(shard.publish((sets, i)).map(|mut table| {
                    table.check_every_hit(self.scrub_rate == 0);
                    table
                }));
            }
            let measured = self.measured();
            shard.configure((behind.clone(), i), self.record_latency || measured, measured);
            shards.push(shard);
        }
        let unlocked = (tables.len() == self.shards).then(|| crate::cache::Unlocked {
            tables: tables.into_boxed_slice(),
            log: crate::tier::optimistic::HitLog::new(self.shards),
        });
        Ok((shards, unlocked))
    }

    /// Whether requests carry the time: a tier's policy reads it, or Open CAS write-back
    /// cleans on time (ALRU).
    fn timed(&self) -> bool {
        self.tiers.iter().any(|t| t.policy.uses_time())
            || (self.writes_dirty() && self.mode.is_some())
    }

    /// How often the background worker wakes, if one runs: the measurement interval of a
    /// controller, the interval asked for, or, for a policy with periodic work, the default
    /// tick (ACP cleaning on its own period, keeping a disk streaming).
    fn worker_interval(&self) -> Option<std::time::Duration> {
        match (self.worker_off, self.tick_every, self.timed()) {
            (true, _, _) => None,
            (false, _, _) if self.measured() => Some(self.measure_every),
            (false, Some(interval), _) => Some(interval),
            (false, None, true) => Some(match &self.mode {
                Some(m) if m.cleaning_policy == tiercache_policy::cas::Cleaning::Acp => {
                    std::time::Duration::from_micros(m.acp.wake_up_us.max(1_000))
                }
                _ => DEFAULT_TICK,
            }),
            (false, None, false) => None,
        }
    }
}
