//! The options that describe a cache on the command line, declared once for every command that
//! runs the engine (`bench`, `serve`, `ycsb`) and resolved into the engine's one description of
//! a cache, [`CacheConfig`]: a policy stack (the simulator's [`StackSpec`], as `sim` and the
//! `[cache]` tables take it), the media of the tiers below DRAM, and the engine's options.

use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Args;
use tiercache_core::parse_size;
use tiercache_engine::{CacheConfig, EngineOptions, MediumKind, MediumSpec, Recover};
use tiercache_policy::cas::CacheMode;
use tiercache_policy::stack::Amount;
use tiercache_policy::{PolicyConfig, StackSpec};

/// A cache's tiers, policies and engine options.
#[derive(Args, Clone, Debug, Default)]
pub struct CacheArgs {
    /// The DRAM tier's size (0: none) [default: 64MiB; `bench` puts no DRAM over --slow-path
    /// or --flash-path unless given].
    #[arg(long)]
    pub dram: Option<String>,
    /// A mapped tier file (persistent memory, CXL memory, tmpfs, a DAX file), below DRAM and
    /// above a flash tier, with --slow-size.
    #[arg(long)]
    pub slow_path: Option<PathBuf>,
    /// Size of the slow-memory tier at --slow-path (64MiB, 4GiB).
    #[arg(long)]
    pub slow_size: Option<String>,
    /// A flash tier (a file or block device read with direct I/O), below DRAM and a mapped
    /// tier, those given, with --flash-size.
    #[arg(long)]
    pub flash_path: Option<PathBuf>,
    /// Size of the flash tier at --flash-path (1GiB).
    #[arg(long)]
    pub flash_size: Option<String>,
    /// Make the DRAM tier behave like a device: a preset (dram, optane-dcpm, cxl, optane-ssd,
    /// nvme, sata-ssd, hdd) or a TOML profile file (see `tiercache profile show NAME`).
    #[arg(long)]
    pub dram_profile: Option<String>,
    /// Make the mapped tier behave like a device preset or TOML profile.
    #[arg(long)]
    pub slow_profile: Option<String>,
    /// Make the flash tier behave like a device preset or TOML profile.
    #[arg(long)]
    pub flash_profile: Option<String>,
    /// The top tier's policy, with parameters (`lru`, `clock:bits=2`, `s3fifo:small_ratio=0.1`,
    /// `hibachi`) [default: lru].
    #[arg(long)]
    pub policy: Option<String>,
    /// The policy of the tiers below the top one [default: lru].
    #[arg(long)]
    pub lower_policy: Option<String>,
    /// The Open CAS mode: wt, wb, wa, wi, wo, pt (or write-through, write-back, ...)
    /// [default: wt]. Write-back and write-only keep written blocks dirty on a mapped or flash
    /// tier.
    #[arg(long, visible_alias = "write-mode")]
    pub mode: Option<String>,
    /// With two or more tiers, where misses go and when blocks move up (Kassa et al.):
    /// dram-first, scm-first[:T] (misses into the tier below DRAM, promoted after T hits
    /// there), bidirectional[:T] [default: dram-first].
    #[arg(long)]
    pub placement: Option<String>,
    /// With two or more tiers: a miss of a value larger than this size (256KiB) goes to the
    /// tier below DRAM, whatever the placement, and is never promoted [default: off].
    #[arg(long, value_name = "SIZE")]
    pub large_values: Option<String>,
    /// NVCache's admission in front of the cache: obp[:TARGET], alloc-read-write or
    /// no-write-allocate, then ',small-bypass=BYTES', ',window=LOOKUPS', ',write-allocate',
    /// ',no-eviction'; or interference[:TARGET].
    #[arg(long)]
    pub nvcache: Option<String>,
    /// Non-hierarchical caching (Orthus, section 4): 'nhc' tunes load_admit on the engine's
    /// measured throughput; options as in `sim --nhc` (':target=p99-latency',
    /// ':load_admit=0.7' for a static split).
    #[arg(long)]
    pub nhc: Option<String>,
    /// Admission filters joined by `+`: always, prob:P, second-hit[:N],
    /// second-hit-over:BYTES[:N], size:BYTES [default: always].
    #[arg(long)]
    pub admission: Option<String>,
    /// With a write-back mode: the cleaning policy, alru, nop, or acp with its options
    /// ('acp:high_watermark=0.2,low_watermark=0.1'): dirty blocks of every shard written back
    /// in device order while too many are dirty [default: alru].
    #[arg(long)]
    pub cleaning: Option<String>,
    /// How the policy is told of hits: epochs[:DIVISOR] (a key's first hit in each epoch of
    /// 1/DIVISOR of a shard's top tier in insertions; the policies with quiet hits only) or
    /// exact (every hit) [default: epochs:32].
    #[arg(long)]
    pub hit_rule: Option<String>,
    /// [default: 4KiB]
    #[arg(long)]
    pub block_size: Option<String>,
    /// Shards, a power of two [default: 16; `bench`: 16 per core].
    #[arg(long)]
    pub shards: Option<usize>,
    /// What to do with the blocks the tier files hold: quiet (restart warm, dropping what
    /// fails its checks), strict (restart warm, or refuse to start on any damage) or wipe
    /// (start empty) [default: quiet; `bench`: wipe].
    #[arg(long)]
    pub recover: Option<Recover>,
    /// How often the cache syncs its persistent tiers on its own, so that a crash of the
    /// machine loses at most this much (in write-back, of acknowledged writes too): `1s`,
    /// `250ms`, or `0` for never [default: 1s].
    #[arg(long)]
    pub sync_interval: Option<String>,
}

/// What a command assumes where an option is not given.
pub struct Defaults {
    /// A DRAM tier over --slow-path and --flash-path when --dram is not given.
    pub dram_over_lower: bool,
    pub shards: usize,
    pub recover: Recover,
}

impl Defaults {
    /// `serve` and `ycsb`: 64 MiB of DRAM over any tier given, 16 shards, a warm restart.
    pub const SERVE: Defaults =
        Defaults { dram_over_lower: true, shards: 16, recover: Recover::Quiet };
}

impl CacheArgs {
    /// These options, each missing one taken from `file` (a config file's).
    pub fn or(self, file: CacheArgs) -> CacheArgs {
        CacheArgs {
            dram: self.dram.or(file.dram),
            slow_path: self.slow_path.or(file.slow_path),
            slow_size: self.slow_size.or(file.slow_size),
            flash_path: self.flash_path.or(file.flash_path),
            flash_size: self.flash_size.or(file.flash_size),
            dram_profile: self.dram_profile.or(file.dram_profile),
            slow_profile: self.slow_profile.or(file.slow_profile),
            flash_profile: self.flash_profile.or(file.flash_profile),
            policy: self.policy.or(file.policy),
            lower_policy: self.lower_policy.or(file.lower_policy),
            mode: self.mode.or(file.mode),
            placement: self.placement.or(file.placement),
            large_values: self.large_values.or(file.large_values),
            nvcache: self.nvcache.or(file.nvcache),
            nhc: self.nhc.or(file.nhc),
            admission: self.admission.or(file.admission),
            cleaning: self.cleaning.or(file.cleaning),
            hit_rule: self.hit_rule.or(file.hit_rule),
            block_size: self.block_size.or(file.block_size),
            shards: self.shards.or(file.shards),
            recover: self.recover.or(file.recover),
            sync_interval: self.sync_interval.or(file.sync_interval),
        }
    }

    /// The options that describe the policy stack, by flag, when given (a config file's
    /// `[cache]` table describes it instead).
    pub fn stack_options(&self) -> Vec<&'static str> {
        let given = [
            ("--dram", self.dram.is_some()),
            ("--slow-size", self.slow_size.is_some()),
            ("--flash-size", self.flash_size.is_some()),
            ("--policy", self.policy.is_some()),
            ("--lower-policy", self.lower_policy.is_some()),
            ("--mode", self.mode.is_some()),
            ("--placement", self.placement.is_some()),
            ("--large-values", self.large_values.is_some()),
            ("--nvcache", self.nvcache.is_some()),
            ("--nhc", self.nhc.is_some()),
            ("--admission", self.admission.is_some()),
            ("--cleaning", self.cleaning.is_some()),
            ("--hit-rule", self.hit_rule.is_some()),
        ];
        given.iter().filter(|(_, on)| *on).map(|(flag, _)| *flag).collect()
    }

    /// The media below DRAM, top down: the mapped tier, then the flash tier, those given.
    pub fn media(&self) -> Vec<MediumSpec> {
        let slow = self.slow_path.as_ref().map(|path| MediumSpec {
            kind: MediumKind::Mapped,
            path: path.clone(),
            profile: self.slow_profile.clone(),
        });
        let flash = self.flash_path.as_ref().map(|path| MediumSpec {
            kind: MediumKind::Flash,
            path: path.clone(),
            profile: self.flash_profile.clone(),
        });
        slow.into_iter().chain(flash).collect()
    }

    /// The Open CAS mode, checked: `wt` unless given.
    pub fn cache_mode(&self) -> anyhow::Result<CacheMode> {
        let mode = self.mode.as_deref().unwrap_or("wt");
        CacheMode::parse(mode).with_context(|| {
            format!(
                "--mode {mode}: not one of wt, wb, wa, wi, wo, pt (or write-through, \
                 write-back, write-around, write-invalidate, write-only, pass-through)"
            )
        })
    }

    /// The whole cache these options describe, `defaults` filling what is not given; the stack
    /// is `stack` where given (a config file's `[cache]` table), else made of the options.
    pub fn config(
        &self,
        defaults: &Defaults,
        stack: Option<StackSpec>,
    ) -> anyhow::Result<CacheConfig> {
        if self.slow_profile.is_some() && self.slow_path.is_none() {
            bail!("--slow-profile needs --slow-path, the tier it describes");
        }
        if self.flash_profile.is_some() && self.flash_path.is_none() {
            bail!("--flash-profile needs --flash-path, the tier it describes");
        }
        let stack = match stack {
            Some(stack) => stack,
            None => self.stack_spec(defaults)?,
        };
        let block = self.block_size.clone().unwrap_or_else(|| "4KiB".into());
        parse_size(&block).context("--block-size")?;
        let engine = EngineOptions {
            block_size: Amount::Text(block),
            shards: self.shards.unwrap_or(defaults.shards),
            recover: self.recover.unwrap_or(defaults.recover),
            dram_profile: self.dram_profile.clone(),
            overwrite_foreign_files: false,
            max_value: None,
            sync_interval: self.sync_interval.clone(),
        };
        Ok(CacheConfig { stack, media: self.media(), engine })
    }

    /// The stack the options describe: the DRAM tier of `--dram` (unless 0, or left out where
    /// `defaults` puts no DRAM over lower tiers), then the tiers of `--slow-size` and
    /// `--flash-size`, and the rest.
    fn stack_spec(&self, defaults: &Defaults) -> anyhow::Result<StackSpec> {
        let mut lower = Vec::new();
        for (path, size, path_flag, size_flag) in [
            (&self.slow_path, &self.slow_size, "--slow-path", "--slow-size"),
            (&self.flash_path, &self.flash_size, "--flash-path", "--flash-size"),
        ] {
            match (path, size) {
                (Some(_), Some(size)) => lower.push(size.as_str()),
                (Some(_), None) => bail!("{path_flag} needs {size_flag}"),
                (None, Some(_)) => bail!("{size_flag} needs {path_flag}"),
                (None, None) => {}
            }
        }
        let dram = match (&self.dram, lower.is_empty()) {
            (Some(dram), _) => Some(dram.as_str()),
            (None, true) => Some("64MiB"),
            (None, false) => defaults.dram_over_lower.then_some("64MiB"),
        };
        let dram = match dram {
            Some(size) if parse_size(size).context("--dram")? == 0 => None,
            other => other,
        };
        // The tiers' sizes top down: DRAM's if any, then the slow tier's and the flash tier's.
        let sizes: Vec<&str> = dram.into_iter().chain(lower.iter().copied()).collect();
        if sizes.is_empty() {
            bail!("--dram 0 needs --slow-path or --flash-path");
        }
        let policy = self.policy.as_deref().unwrap_or("lru");
        let own = matches!(
            PolicyConfig::parse(policy).with_context(|| format!("--policy {policy}"))?,
            PolicyConfig::Hibachi(_) | PolicyConfig::HybridArc
        );
        let mode = self.cache_mode()?;
        let lower_policy = self.lower_policy.clone().unwrap_or_else(|| "lru".into());
        let mut spec = StackSpec::new(policy, Amount::Text(sizes[0].into()));
        spec.lower_capacity = sizes.get(1).map(|size| Amount::Text((*size).into()));
        spec.tier = sizes.iter().skip(2).map(|size| format!("{size}:{lower_policy}")).collect();
        spec.lower_policy = lower_policy;
        if let Some(placement) = &self.placement {
            spec.placement = placement.clone();
        }
        spec.large_values = self.large_values.clone().map(Amount::Text);
        // Write-through is what a policy does on its own (a write places its block as a miss
        // would); Hibachi and Hybrid-ARC place clean and dirty blocks themselves.
        spec.mode = (mode != CacheMode::WriteThrough && !own).then(|| mode.short().to_string());
        // The engine has no sequential cutoff (each shard sees only its own keys).
        spec.seq_cutoff = "never".into();
        spec.nvcache = self.nvcache.clone();
        spec.nhc = self.nhc.clone();
        spec.admission = self.admission.clone().unwrap_or_else(|| "always".into());
        if let Some(cleaning) = &self.cleaning {
            spec.cleaning = cleaning.clone();
        }
        spec.hit_rule = self.hit_rule.clone();
        Ok(spec)
    }
}
