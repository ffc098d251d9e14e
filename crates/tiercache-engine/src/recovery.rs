//! Recovery: what a cache opening over tier files that hold blocks takes back, in one routine
//! ([`recover`]), called once by the builder between opening the media and starting the
//! cache. It reads top to bottom, each layer contributing one step:
//!
//! 1. **the superblock** (`crate::tier::superblock`, read when the medium was opened): which
//!    tier files hold a tier of this geometry, how their cache stopped (open, synced, or clean
//!    with everything written back), and, for a clean stop, whether the block headers are
//!    still as it left them (`Medium::headers_crc`), so that only the headers need reading;
//! 2. **the region scan** (`Region::scan`, through [`Shard::scan`], every shard at once): each
//!    slot's block, nothing, or damage, changing nothing;
//! 3. **refusals**, before anything is changed: damage under `Recover::Strict`, and blocks of
//!    another backing file than the one the builder was given;
//! 4. **the tier store and the shard** ([`Shard::restore`], every shard at once): the newest
//!    whole copy of each key told to the policy, oldest first, and kept where it lies; older
//!    copies, declined blocks and damaged slots marked free in their tier stores.
//!
//! What each file held before it was opened (another geometry, an older format, a foreign
//! file) is the superblock's to decide when the medium opens (`superblock::open`); a tier
//! that comes to this routine holds blocks of this cache's layout.

use std::path::{Path, PathBuf};

use crate::error::EngineError;
use crate::shard::{Scanned, Shard};
use crate::tier::block::Check;
use crate::tier::medium::Medium;
use crate::tier::superblock::{Backing, Previous, Recover, State};
use crate::tier::TierKind;

/// What a cache found on its tiers when it opened (see [`CacheBuilder::recover`]); the blocks
/// counted are in [`StatsSnapshot`] (`recovered`, `recovery_damaged`, `recovery_stale`,
/// `recovery_declined`).
///
/// [`CacheBuilder::recover`]: crate::CacheBuilder::recover
/// [`StatsSnapshot`]: crate::StatsSnapshot
#[derive(Clone, Debug, serde::Serialize)]
pub struct Recovery {
    /// Seconds the scan and the restore took.
    pub seconds: f64,
    /// Whether every recovered tier had been stopped cleanly (everything synced).
    pub clean: bool,
    /// The backing file the recovered blocks belong to, if a `CachedFile` recorded one.
    #[serde(skip)]
    pub backing: Option<Backing>,
    /// What the user should know (tiers not recovered, short files).
    pub notes: Vec<String>,
    /// Tiers taken from their headers alone (mapped tiers stopped cleanly, their headers'
    /// digest unchanged): their values are checked when first read, not at the start.
    pub headers_only: usize,
    /// Mapped and flash tiers after a crash whose clean blocks were taken from their headers
    /// (flash: slot records) unread, only the dirty blocks' values read at the start (the
    /// others checked when first read).
    pub clean_unread: usize,
}

impl Recovery {
    /// How the tiers had stopped and were taken back, for a person to read.
    pub fn stop(&self) -> &'static str {
        match (self.clean, self.headers_only > 0) {
            (true, true) => {
                "a clean stop; headers unchanged since, so values are checked when first read"
            }
            (true, false) => "a clean stop",
            (false, _) if self.clean_unread > 0 => {
                "a crash or unclean stop; clean blocks taken from their headers, their values \
                 checked when first read"
            }
            (false, _) => "a crash or unclean stop",
        }
    }
}

impl Default for Recovery {
    fn default() -> Recovery {
        Recovery {
            seconds: 0.0,
            clean: true,
            backing: None,
            notes: Vec::new(),
            headers_only: 0,
            clean_unread: 0,
        }
    }
}

/// How the builder asks recovery to run.
pub(crate) struct Options<'a> {
    pub recover: Recover,
    /// Chunks a page splits into: tiers with size classes are not recovered (yet).
    pub size_classes: u8,
    /// The backing file given to the builder, its identity and path: the blocks found must be
    /// its blocks, since recovery may write them back to it.
    pub backing: Option<(Backing, &'a Path)>,
}

/// A tier file that holds blocks to recover.
struct Found<'a> {
    tier: usize,
    path: &'a Path,
    /// Which values its scan reads and checks.
    check: Check,
}

/// Takes back the blocks of the tiers whose files held a tier of this geometry (tiers with
/// size classes start empty, with a note), shard by shard. `None` if no tier file held any.
pub(crate) fn recover(
    media: &[Medium],
    shards: &mut [Shard],
    options: &Options,
) -> Result<Option<Recovery>, EngineError> {
    let started = std::time::Instant::now();
    let mut recovery = Recovery::default();
    // 1. The superblocks: what each tier file held, and how it stopped.
    let (found, written_back) = read_superblocks(media, options, &mut recovery)?;
    if found.is_empty() {
        return Ok(None);
    }
    // 2. The region scans, every shard at once.
    let bits = shards.len().trailing_zeros();
    let tiers: Vec<(usize, Check)> = found.iter().map(|f| (f.tier, f.check)).collect();
    let scans = in_parallel(shards.iter_mut().enumerate().collect(), |(i, shard)| {
        let mut scanned = shard.scan(&tiers, |key| tiercache_core::shard_index(key, bits) == i)?;
        scanned.written_back(&written_back);
        Ok(scanned)
    })
    .into_iter()
    .collect::<Result<Vec<Scanned>, EngineError>>()?;
    // 3. Refusals, before anything is changed.
    if options.recover == Recover::Strict {
        refuse_damage(shards, &scans, &found)?;
    }
    // Blocks found are about to be written back to a backing file given to the builder: it
    // must be theirs.
    if let Some((identity, path)) = options.backing {
        if recovery.backing != Some(identity) && scans.iter().any(|s| !s.is_empty()) {
            let tier = found[0].path;
            return Err(EngineError::mismatch(tier, recovery.backing, identity, path));
        }
    }
    // 4. The tier stores and the shards take back what was found, every shard at once.
    in_parallel(shards.iter_mut().zip(scans).collect(), |(shard, scan)| shard.restore(scan))
        .into_iter()
        .collect::<Result<(), EngineError>>()?;
    recovery.seconds = started.elapsed().as_secs_f64();
    Ok(Some(recovery))
}

/// The superblocks' step: the tier files that hold blocks of this geometry, and the tiers
/// whose cache stopped with everything written back (their dirty flags are history). What
/// the user should know goes into `recovery`'s notes.
fn read_superblocks<'a>(
    media: &'a [Medium],
    options: &Options,
    recovery: &mut Recovery,
) -> Result<(Vec<Found<'a>>, Vec<usize>), EngineError> {
    let mut found = Vec::new();
    let mut written_back = Vec::new();
    for (tier, medium) in media.iter().enumerate() {
        let Previous::Tier { backing, state, short, headers_crc } = medium.previous else {
            continue;
        };
        let path = medium.path().expect("a tier file");
        let note = |what: &str| format!("{}: {what}", path.display());
        if options.size_classes > 1 {
            recovery.notes.push(note(
                "blocks of size-classed tiers are not recovered yet (they need a page map on \
                 the medium), so it starts empty",
            ));
            continue;
        }
        recovery.backing = recovery.backing.or(backing);
        recovery.clean &= state != State::Open;
        if state == State::Clean {
            // Everything dirty was written back before the stop.
            written_back.push(tier);
        }
        if short {
            recovery.notes.push(note(
                "the tier file was shorter than its tier; the missing slots read as empty",
            ));
        }
        // Under quiet, a mapped or flash tier's headers (flash: records) are taken without
        // reading the values they name, each checked when first read: all of them after a
        // clean stop that left the headers as they are, the clean ones after a crash (headers
        // reach the file as they change; dirty values are read now, see `Check::Dirty`).
        // Strict reads everything, to refuse any damage before starting.
        let stopped_cleanly = state != State::Open && !short && headers_crc.is_some();
        let apart = matches!(medium.kind(), TierKind::Flash { .. } | TierKind::Mapped { .. });
        let mut check = Check::Every;
        if options.recover == Recover::Quiet && stopped_cleanly {
            if medium.headers_crc()? == headers_crc {
                check = Check::Headers;
            } else {
                recovery.notes.push(note(
                    "the block headers changed since the clean stop; every block is read and \
                     checked",
                ));
            }
        } else if options.recover == Recover::Quiet && state == State::Open && apart && !short {
            check = Check::Dirty;
        }
        recovery.headers_only += (check == Check::Headers) as usize;
        recovery.clean_unread += (check == Check::Dirty) as usize;
        found.push(Found { tier, path, check });
    }
    Ok((found, written_back))
}

/// Refuses to start on any damage the scans found (`Recover::Strict`), naming the first
/// damaged slot's tier file and offset.
fn refuse_damage(shards: &[Shard], scans: &[Scanned], found: &[Found]) -> Result<(), EngineError> {
    let damaged = shards.iter().zip(scans).filter_map(|(s, scan)| s.first_damage(scan));
    let Some((tier, at, what)) = damaged.clone().next() else { return Ok(()) };
    let what = format!(
        "the slot at byte {at} fails its checks ({what}); {} shards have damage",
        damaged.count()
    );
    let path = found.iter().find(|f| f.tier == tier).expect("scanned").path;
    Err(EngineError::Damaged { path: PathBuf::from(path), what })
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
