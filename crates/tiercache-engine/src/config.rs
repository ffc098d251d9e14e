//! A whole cache as one value: the policy stack, the media its tiers lie on, and the engine's
//! options. The command line (`bench`, `serve`, `ycsb`, `crashtest`), the `[cache]` and
//! `[serve]` tables of a config file, and the Python package all describe a cache as a
//! [`CacheConfig`] and build it through [`CacheConfig::builder`].
//!
//! ```toml
//! [stack]                 # the simulator's stack spec (`tiercache sim`, `[cache]` tables)
//! policy = "lru"
//! capacity = "64MiB"      # the DRAM tier
//! lower_capacity = "1GiB"
//! tier = ["8GiB:lru"]
//! placement = "scm-first:2"
//! mode = "wb"
//!
//! [[media]]               # below DRAM, top down
//! kind = "mapped"
//! path = "/mnt/pmem/tier.tc"
//! profile = "optane-dcpm"
//!
//! [[media]]
//! kind = "flash"
//! path = "/dev/nvme0n1p3"
//!
//! [engine]
//! block_size = "4KiB"
//! shards = 16
//! recover = "quiet"
//! max_value = "64MiB"     # objects larger than a block (keys of any bytes)
//! sync_interval = "1s"    # background checkpoints of the persistent tiers; "0" turns them off
//! ```

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use tiercache_core::{parse_size, DeviceProfile};
use tiercache_policy::stack::Amount;
use tiercache_policy::{PolicyConfig, StackConfig, StackSpec};

use crate::builder::CacheBuilder;
use crate::error::EngineError;
use crate::tier::superblock::Recover;
use crate::tier::TierKind;

/// A whole cache: its policy stack, the media of its tiers below DRAM, and the engine's
/// options.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheConfig {
    /// The policy stack, top down, as the simulator takes it; the engine sizes tiers in bytes.
    pub stack: StackSpec,
    /// The media of the tiers below DRAM, top down. The stack's top tier is DRAM when the
    /// stack has one tier more than there are media; otherwise each tier lies on its medium.
    #[serde(default)]
    pub media: Vec<MediumSpec>,
    #[serde(default)]
    pub engine: EngineOptions,
}

/// The medium of one tier below DRAM.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MediumSpec {
    pub kind: MediumKind,
    /// The tier file (or, for flash, a block device).
    pub path: PathBuf,
    /// Make the tier behave like this device: a preset (`optane-dcpm`, `cxl`, `nvme`...) or a
    /// TOML profile file.
    #[serde(default)]
    pub profile: Option<String>,
}

/// What a tier below DRAM is made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MediumKind {
    /// Memory mapped from a file: persistent memory, CXL memory, tmpfs.
    Mapped,
    /// A file or block device read and written with direct I/O.
    Flash,
    /// A file read and written through the page cache.
    File,
}

/// The engine's options, apart from the stack and the media.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EngineOptions {
    /// The block: `4KiB` by default.
    pub block_size: Amount,
    /// Shards, a power of two (16 by default); the stack's `shards` wins when given.
    pub shards: usize,
    /// What to do with the blocks tier files hold: `quiet`, `strict` or `wipe`.
    pub recover: Recover,
    /// Make the DRAM tier behave like this device (a preset or a TOML profile).
    pub dram_profile: Option<String>,
    /// Overwrite a tier path that holds a file which is not a tier file.
    pub overwrite_foreign_files: bool,
    /// The largest value (`CacheBuilder::max_value`): beyond the block size, values span
    /// pages. The block size when not given.
    pub max_value: Option<Amount>,
    /// How often the cache syncs its persistent tiers on its own (`CacheBuilder::sync_interval`):
    /// `1s` by default, `250ms`, `0` for never.
    pub sync_interval: Option<String>,
}

impl Default for EngineOptions {
    fn default() -> EngineOptions {
        EngineOptions {
            block_size: Amount::Text("4KiB".into()),
            shards: 16,
            recover: Recover::Quiet,
            dram_profile: None,
            overwrite_foreign_files: false,
            max_value: None,
            sync_interval: None,
        }
    }
}

impl MediumSpec {
    /// The tier kind the engine opens.
    pub fn tier_kind(&self) -> TierKind {
        let path = self.path.clone();
        match self.kind {
            MediumKind::Mapped => TierKind::Mapped { path },
            MediumKind::Flash => TierKind::Flash { path },
            MediumKind::File => TierKind::File { path },
        }
    }
}

impl CacheConfig {
    /// A cache of `stack` over `media`, the engine's options at their defaults.
    pub fn new(stack: StackSpec, media: Vec<MediumSpec>) -> CacheConfig {
        CacheConfig { stack, media, engine: EngineOptions::default() }
    }

    /// The stack, checked.
    pub fn stack(&self) -> Result<StackConfig, EngineError> {
        Ok(StackConfig::try_from(self.stack.clone())?)
    }

    /// The media of `tiers` tiers, top down: DRAM on top when there is one tier more than
    /// media, then the media.
    pub fn tier_kinds(&self, tiers: usize) -> Vec<TierKind> {
        let mut kinds = Vec::new();
        if self.media.is_empty() || tiers > self.media.len() {
            kinds.push(TierKind::Dram);
        }
        kinds.extend(self.media.iter().map(MediumSpec::tier_kind));
        kinds
    }

    /// A builder of this cache, every setting of the config applied; the caller may set more
    /// (a clock, the backing file) before building. An error names the setting.
    pub fn builder(&self) -> Result<CacheBuilder, EngineError> {
        let stack = self.stack()?;
        let kinds = self.tier_kinds(stack.tiers.len());
        let block = match &self.engine.block_size {
            Amount::Count(n) => *n,
            Amount::Text(text) => parse_size(text)
                .map_err(|e| EngineError::config("block_size", format!("'{text}': {e}")))?,
        };
        let mut builder = CacheBuilder::new(PolicyConfig::Lru)
            .shards(self.engine.shards)
            .stack(&stack, kinds.clone())?
            .block_size(block as usize)
            .recover(self.engine.recover)
            .overwrite_foreign_files(self.engine.overwrite_foreign_files);
        if let Some(amount) = &self.engine.max_value {
            let bytes = match amount {
                Amount::Count(n) => *n,
                Amount::Text(text) => parse_size(text)
                    .map_err(|e| EngineError::config("max_value", format!("'{text}': {e}")))?,
            };
            builder = builder.max_value(bytes as usize);
        }
        if let Some(text) = &self.engine.sync_interval {
            builder = builder.sync_interval(parse_interval(text, "sync_interval")?);
        }
        let profile = |name: &str, setting: &'static str| {
            DeviceProfile::load(name).map_err(|e| EngineError::config(setting, e))
        };
        let dram = kinds.iter().position(|k| matches!(k, TierKind::Dram));
        if let (Some(t), Some(name)) = (dram, &self.engine.dram_profile) {
            builder = builder.emulate(t, profile(name, "dram_profile")?);
        }
        let below = kinds.len() - self.media.len();
        for (i, medium) in self.media.iter().enumerate() {
            if let Some(name) = &medium.profile {
                builder = builder.emulate(below + i, profile(name, "media.profile")?);
            }
        }
        Ok(builder)
    }
}

/// An interval: a number of seconds, or a number with `ms`, `s` or `min` after it (`250ms`,
/// `1.5s`); `0` is none. An error names `setting`.
pub fn parse_interval(
    text: &str,
    setting: &'static str,
) -> Result<std::time::Duration, EngineError> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let seconds_per = match unit.trim() {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "min" => 60.0,
        _ => {
            let reason = format!("'{text}': the unit must be ms, s or min (`250ms`, `1s`)");
            return Err(EngineError::config(setting, reason));
        }
    };
    match number.parse::<f64>() {
        Ok(n) if n.is_finite() && n * seconds_per < 1e9 => {
            Ok(std::time::Duration::from_secs_f64(n * seconds_per))
        }
        _ => Err(EngineError::config(
            setting,
            format!("'{text}' is not an interval (`1s`, `250ms`, `0`)"),
        )),
    }
}
