//! The builder's checks, made before anything is opened: every setting in range, the tiers'
//! kinds and policies compatible, dirty blocks never left where recovery cannot find them,
//! and the DRAM the cache would take within this machine's memory. An error names the
//! setting.

use tiercache_core::limits::BLOCK_SIZE_MAX;
use tiercache_policy::cas::SeqCutoffPolicy;
use tiercache_policy::Placement;

use super::{
    capacity_setting, CacheBuilder, BLOCK_SIZE_MIN, SHARDS_MAX, SIZE_CLASS_MIN,
    SIZE_CLASS_PAGES_MIN, WRITERS_MAX,
};
use crate::aligned::DIRECT_ALIGN;
use crate::error::EngineError;
use crate::tier::superblock::Backing;
use crate::tier::TierKind;

impl CacheBuilder {
    /// Slots per shard in each tier, once every setting checks out (each group of checks
    /// below in turn).
    pub(super) fn validate(&self) -> Result<Vec<u64>, EngineError> {
        self.check_geometry()?;
        self.check_modes()?;
        self.check_controllers()?;
        self.check_size_classes()?;
        self.check_objects()?;
        self.check_test_seams()?;
        self.check_tier_files()?;
        let per_shard = self.slots_per_shard()?;
        self.check_largest_value(&per_shard)?;
        self.check_footprint(&per_shard)?;
        Ok(per_shard)
    }

    /// Each tier's file is a file of its own: not the backing file, not another tier's. (Either
    /// would otherwise be refused as a file another cache has locked, which it is not.) Files
    /// are the same by device and inode where they exist, by their full path where not yet.
    fn check_tier_files(&self) -> Result<(), EngineError> {
        let full = |path: &std::path::Path| {
            let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
            let dir = std::fs::canonicalize(parent.unwrap_or(std::path::Path::new(".")));
            match (dir, path.file_name()) {
                (Ok(dir), Some(name)) => dir.join(name),
                _ => path.to_path_buf(),
            }
        };
        let backing = self.backing.as_ref().and_then(|b| b.file.as_ref());
        let mut seen: Vec<(Option<Backing>, std::path::PathBuf, usize)> = Vec::new();
        for (i, tier) in self.tiers.iter().enumerate() {
            let Some(path) = tier.kind.path() else { continue };
            let (id, at) = (Backing::at(path), full(path));
            if let Some((_, backing_path)) = backing.filter(|(b, _)| Some(*b) == id) {
                let reason = format!(
                    "tier {i}'s file {} is the backing file {}: a tier needs a file of its own",
                    path.display(),
                    backing_path.display()
                );
                return Err(EngineError::config("tier path", reason));
            }
            let same = |(other, other_at, _): &&(Option<Backing>, std::path::PathBuf, usize)| {
                (id.is_some() && *other == id) || *other_at == at
            };
            if let Some((_, _, other)) = seen.iter().find(same) {
                let reason = format!(
                    "tiers {other} and {i} are the same file {}: each tier needs a file of its own",
                    path.display()
                );
                return Err(EngineError::config("tier path", reason));
            }
            seen.push((id, at, i));
        }
        Ok(())
    }

    /// Values larger than a block: the tiers and mode that can keep them.
    fn check_objects(&self) -> Result<(), EngineError> {
        if !self.spans() {
            return Ok(());
        }
        let pages = self.max_value.div_ceil(self.block_size);
        if pages > crate::tier::block::MAX_PAGES as usize {
            let reason = format!(
                "{} bytes span {pages} blocks of {}; a value spans at most {} (a larger \
                 block_size raises the limit)",
                self.max_value,
                self.block_size,
                crate::tier::block::MAX_PAGES
            );
            return Err(EngineError::config("max_value", reason));
        }
        if self.writes_dirty() {
            let reason = format!(
                "{} bytes is larger than a block, and values larger than a block are kept \
                 clean only: use a mode that keeps nothing dirty (write-through, the default)",
                self.max_value
            );
            return Err(EngineError::config("max_value", reason));
        }
        Ok(())
    }

    /// The largest value fits in a shard's largest tier.
    fn check_largest_value(&self, per_shard: &[u64]) -> Result<(), EngineError> {
        let room = per_shard.iter().max().copied().unwrap_or(0) * self.block_size as u64;
        if self.spans() && !self.max_value_fits && self.max_value as u64 > room {
            let reason = format!(
                "{} bytes is more than a shard's largest tier holds ({room} bytes of {} \
                 shards): a smaller max_value, fewer shards or a larger tier",
                self.max_value, self.shards
            );
            return Err(EngineError::config("max_value", reason));
        }
        Ok(())
    }

    /// The block size and the shards.
    fn check_geometry(&self) -> Result<(), EngineError> {
        let b = self.block_size;
        if !(BLOCK_SIZE_MIN..=BLOCK_SIZE_MAX as usize).contains(&b)
            || !b.is_multiple_of(BLOCK_SIZE_MIN)
        {
            let reason =
                format!("{b} must be a multiple of {BLOCK_SIZE_MIN} up to {BLOCK_SIZE_MAX}");
            return Err(EngineError::config("block_size", reason));
        }
        if !self.shards.is_power_of_two() || self.shards > SHARDS_MAX {
            let reason = format!("{} must be a power of two up to {SHARDS_MAX}", self.shards);
            return Err(EngineError::config("shards", reason));
        }
        if self.tiers.iter().any(|t| matches!(t.kind, TierKind::Flash { .. }))
            && !b.is_multiple_of(DIRECT_ALIGN)
        {
            let reason = format!(
                "{b} is not a multiple of {DIRECT_ALIGN}, which direct I/O on the flash tier needs"
            );
            return Err(EngineError::config("block_size", reason));
        }
        Ok(())
    }

    /// Dirty blocks: who decides them, and that a crash cannot lose them; and the modes' own
    /// settings.
    fn check_modes(&self) -> Result<(), EngineError> {
        if self.dirty_policy() && self.mode.is_some() {
            let reason = format!(
                "{} decides itself which blocks are dirty: run it without an Open CAS mode",
                self.tiers[0].policy.name()
            );
            return Err(EngineError::config("mode", reason));
        }
        if self.writes_dirty() {
            let mode = match &self.mode {
                Some(config) => config.mode.short(),
                None => self.tiers[0].policy.name(),
            };
            if self.size_classes > 1 {
                let reason = format!("{mode} needs whole blocks, one per slot: use 1 class");
                return Err(EngineError::config("size_classes", reason));
            }
            if self.writers() > 0 {
                let reason = format!(
                    "{mode} frees a dirty block's old copy once its new one is written, and a \
                     write behind lands later: use 0 threads"
                );
                return Err(EngineError::config("write_behind", reason));
            }
            let persistent = self.tiers.iter().any(|t| !matches!(t.kind, TierKind::Dram));
            if !persistent && !self.volatile_write_back {
                let reason = format!(
                    "{mode} over DRAM only loses every write since the last sync in a crash: add \
                     a mapped, file or flash tier, or allow it by name (volatile_write_back)"
                );
                return Err(EngineError::config("mode", reason));
            }
            self.check_dirty_moves(mode)?;
        }
        if let Some(config) = &self.mode {
            if config.seq_cutoff != SeqCutoffPolicy::Never {
                let reason = "each shard sees only its own keys, so no shard sees a run of \
                              consecutive blocks: set it to never in the engine";
                return Err(EngineError::config("seq_cutoff", reason));
            }
        }
        Ok(())
    }

    /// Controllers fed measurements by the background worker.
    fn check_controllers(&self) -> Result<(), EngineError> {
        let controlled = self.measured();
        if controlled && self.measure_every.is_zero() {
            return Err(EngineError::config("measure_every", "must be above zero".to_string()));
        }
        if controlled && self.worker_off {
            let (setting, what) = match self.nhc {
                Some(_) => ("nhc", "NHC"),
                None => ("nvcache", "measured interference-aware admission"),
            };
            let reason =
                format!("{what} is fed measurements by the background worker; keep the worker");
            return Err(EngineError::config(setting, reason));
        }
        Ok(())
    }

    /// Size classes, and the write-behind threads.
    fn check_size_classes(&self) -> Result<(), EngineError> {
        let b = self.block_size;
        if self.size_classes == 0 || (b >> (self.size_classes - 1).min(15)) < SIZE_CLASS_MIN {
            let reason = format!(
                "{} classes of a {b}-byte block: need 1 or more, the smallest at least {SIZE_CLASS_MIN} bytes",
                self.size_classes
            );
            return Err(EngineError::config("size_classes", reason));
        }
        if self.size_classes > 1 && self.tiers.iter().any(|t| t.kind.is_io()) {
            let reason =
                "file and flash tiers store whole blocks; size classes need DRAM or mapped tiers";
            return Err(EngineError::config("size_classes", reason));
        }
        if self.writers() > WRITERS_MAX {
            let reason = format!("{} threads; at most {WRITERS_MAX}", self.writers());
            return Err(EngineError::config("write_behind", reason));
        }
        Ok(())
    }

    /// Fault injection, wrappers and emulation: the tiers they name, and their settings.
    fn check_test_seams(&self) -> Result<(), EngineError> {
        if let Some((tier, faults)) = self.faults {
            let zero = |every: Option<u64>| every == Some(0);
            let reason = match self.tiers.get(tier) {
                None => Some(format!("there is no tier {tier}")),
                Some(spec) if !spec.kind.is_io() => {
                    Some(format!("tier {tier} is memory, whose writes cannot fail"))
                }
                Some(_) if zero(faults.write_every) || zero(faults.read_every) => {
                    Some("every 0th operation is no operation".to_string())
                }
                Some(_) if faults.tear_sector == Some(0) => {
                    Some("torn writes need a sector of at least one byte".to_string())
                }
                Some(_) => None,
            };
            if let Some(reason) = reason {
                return Err(EngineError::config("fail_writes", reason));
            }
        }
        if let Some((tier, _)) = self.wrappers.iter().find(|(t, _)| *t >= self.tiers.len()) {
            let reason = format!("there is no tier {tier} to wrap");
            return Err(EngineError::config("wrap_tier", reason));
        }
        if let Some(tier) = self.missing_emulated_tier {
            return Err(EngineError::config(
                "emulate",
                format!("there is no tier {tier} to emulate"),
            ));
        }
        for spec in &self.tiers {
            if let Some(profile) = &spec.profile {
                profile.validate().map_err(|reason| EngineError::config("emulate", reason))?;
            }
        }
        Ok(())
    }

    /// Slots per shard in each tier: its bytes in blocks over the shards (whole sets of a
    /// placed tier), each tier's policy one the engine runs.
    fn slots_per_shard(&self) -> Result<Vec<u64>, EngineError> {
        let b = self.block_size;
        let mut per_shard = Vec::new();
        for (i, tier) in self.tiers.iter().enumerate() {
            let setting = capacity_setting(i);
            if tier.policy.needs_future() {
                let reason = format!(
                    "{} reads the future and runs only in the simulator",
                    tier.policy.name()
                );
                return Err(EngineError::config("policy", reason));
            }
            let mut slots = tier.capacity_bytes / b as u64 / self.shards as u64;
            if let Some(sets) = self.placed(tier) {
                // A set-associative flash tier: whole sets of `ways` blocks and the spare
                // slots the engine needs beside them (`Tier::placed`), within the size.
                let stride = (sets.ways + sets.spare) as u64;
                if slots < stride {
                    let reason = format!(
                        "{} bytes hold {slots} blocks per shard, less than one set of {} ways \
                         and {} spare slots ({} shards)",
                        tier.capacity_bytes, sets.ways, sets.spare, self.shards
                    );
                    return Err(EngineError::config(setting, reason));
                }
                slots = slots / stride * sets.ways as u64;
            }
            if slots == 0 || slots > u32::MAX as u64 {
                let reason = format!(
                    "{} bytes must hold between 1 and 2^32 {b}-byte blocks for each of {} shards",
                    tier.capacity_bytes, self.shards
                );
                return Err(EngineError::config(setting, reason));
            }
            if self.size_classes > 1 && slots < SIZE_CLASS_PAGES_MIN {
                let reason = format!(
                    "{} bytes hold {slots} blocks per shard; size classes need {SIZE_CLASS_PAGES_MIN}",
                    tier.capacity_bytes
                );
                return Err(EngineError::config(setting, reason));
            }
            per_shard.push(slots);
        }
        Ok(per_shard)
    }

    /// With dirty blocks over two or more persistent tiers, refuses what a crash could lose.
    /// A dirty block moving between two persistent tiers keeps its old copy until the next
    /// sync; a crash before it can find the old copy and lose the new one, so at recovery the
    /// tier it left holds one block more than its policy's share. With DRAM-first placement
    /// the tier the block was moving to lost the new copy and has that room; a placement that
    /// also moves blocks up does not guarantee it, and a dirty block the policy then evicts to
    /// make room is written back only if the backing device was given to the builder
    /// (`backing_file`, `backing_device`): attached before recovery. Without it, such a
    /// placement is refused. A set-associative tier below another persistent tier is refused
    /// in any case: the kill test found a synced block read back at an older version there.
    pub(super) fn check_dirty_moves(&self, mode: &str) -> Result<(), EngineError> {
        let persistent: Vec<usize> = (0..self.tiers.len())
            .filter(|&t| !matches!(self.tiers[t].kind, TierKind::Dram))
            .collect();
        if persistent.len() < 2 {
            return Ok(());
        }
        if self.backing.is_none() && self.placement != Placement::DramFirst {
            let reason = format!(
                "{mode} over {} persistent tiers moves dirty blocks up and down between them, and \
                 a crash between a move and the next sync could leave a tier too full to take \
                 back its dirty blocks: give the builder the backing device (backing_file), so \
                 recovery writes back what it cannot keep, or use dram-first placement",
                persistent.len()
            );
            return Err(EngineError::config("placement", reason));
        }
        if let Some(&t) = persistent[1..].iter().find(|&&t| self.placed(&self.tiers[t]).is_some()) {
            let reason = format!(
                "{mode} with tier {t} set-associative below another persistent tier: a kill \
                 while dirty blocks move into it can leave a synced block's newer copy \
                 unreadable and an older one in its place (found by the kill test); run that \
                 tier with a fully associative policy (lru)"
            );
            return Err(EngineError::config("policy", reason));
        }
        Ok(())
    }

    /// Refuses a configuration whose DRAM (a DRAM tier's blocks and every tier's metadata)
    /// would not fit in this machine's memory, before any of it is allocated.
    pub(super) fn check_footprint(&self, per_shard: &[u64]) -> Result<(), EngineError> {
        let Some(physical) = crate::footprint::physical_memory_bytes() else {
            return Ok(());
        };
        let mut total = 0u64;
        for (i, (tier, n)) in self.tiers.iter().zip(per_shard).enumerate() {
            let setting = capacity_setting(i);
            let slots = self.medium_slots(tier, *n);
            let per_slot = match self.placed(tier) {
                Some(_) => crate::footprint::PLACED_SLOT_BYTES,
                None => crate::footprint::slot_bytes(&tier.kind, self.chunks()),
            };
            let data = match tier.kind {
                TierKind::Dram => tier.kind.slot_bytes(self.block_size, self.chunks()) as u64,
                _ => 0,
            };
            total = total.saturating_add(slots.saturating_mul(per_slot + data));
            if total > physical {
                let reason = format!(
                    "{} bytes in {}-byte blocks is {slots} slots, whose DRAM ({per_slot} bytes of \
                     metadata each{}) brings the cache to about {} GiB, more than this \
                     machine's {} GiB",
                    tier.capacity_bytes,
                    self.block_size,
                    if data > 0 { " and the block itself" } else { "" },
                    total >> 30,
                    physical >> 30,
                );
                return Err(EngineError::config(setting, reason));
            }
        }
        Ok(())
    }
}
