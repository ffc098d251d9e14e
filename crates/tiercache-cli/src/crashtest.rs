//! `tiercache crashtest`: kill -9 a process writing through a write-back cache, reopen, check
//! (`docs/DURABILITY.md`, crash testing). A child process writes and syncs blocks through a
//! `CachedFile` over a slow emulated backing file, telling its parent through a pipe each
//! write it is about to make and each sync that returned. The parent kills it with SIGKILL at
//! a random moment, reopens the cache over what the child left, and reads every block: each
//! must hold its last synced version or one written after it, whole. Values name their block
//! and version in every 16 bytes, so a torn, stale or misplaced block cannot pass.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;
use serde::Serialize;
use tiercache_core::{DeviceProfile, SeededRng};
use tiercache_engine::{
    CacheBuilder, CacheConfig, CachedFile, EngineError, EngineOptions, MediumKind, MediumSpec,
    Recover,
};
use tiercache_policy::cas::CacheMode;
use tiercache_policy::stack::Amount;
use tiercache_policy::{Placement, PolicyConfig, StackSpec};

const BLOCK: usize = 4096;

#[derive(Args, Clone, Debug)]
pub struct CrashtestArgs {
    /// The tier the dirty blocks live on: mapped, file or flash; or tiers top down joined by
    /// `+` (`dram+mapped+flash`): each holds twice the blocks of the one above, the last
    /// `--cache-blocks`, and the policy runs each.
    #[arg(long, default_value = "mapped")]
    pub tier: String,
    /// The Open CAS mode the child writes in: wb, wo, or any other (wt, wa, wi, pt).
    #[arg(long, default_value = "wb")]
    pub mode: String,
    /// The policy of the tier: any that runs one tier, e.g. `setassoc:ways=8` (a flash tier
    /// run by it keeps its blocks where it places them).
    #[arg(long, default_value = "lru")]
    pub policy: String,
    /// With two or more tiers: dram-first, scm-first[:T] or bidirectional[:T] (Kassa et al.).
    #[arg(long, default_value = "dram-first")]
    pub placement: String,
    /// Times the child is killed (and the cache reopened and checked).
    #[arg(long, default_value_t = 20)]
    pub kills: u64,
    /// Seed of the writes and of when each kill comes.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Blocks of 4 KiB in the backing file.
    #[arg(long, default_value_t = 2048)]
    pub blocks: u64,
    /// Blocks the cache holds: fewer than --blocks, so dirty blocks are evicted (written back
    /// first) while the child writes.
    #[arg(long, default_value_t = 512)]
    pub cache_blocks: u64,
    /// Writes between the child's syncs.
    #[arg(long, default_value_t = 16)]
    pub sync_every: u64,
    /// The device preset the backing file behaves like in the child: write-backs are slow,
    /// so kills land during them.
    #[arg(long, default_value = "sata-ssd")]
    pub backing_profile: String,
    /// The child is killed at a random moment up to this many milliseconds after it opened.
    #[arg(long, default_value_t = 200)]
    pub max_run_ms: u64,
    /// Directory for the backing and tier files (default: a new one in the temporary
    /// directory, removed at the end).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Print the report as one JSON object instead of the summary line.
    #[arg(long)]
    pub json: bool,
    /// Run as the child, numbering writes from this version (used by the parent).
    #[arg(long, hide = true)]
    pub child: Option<u64>,
}

#[derive(Default, Serialize)]
pub struct CrashReport {
    pub tier: String,
    pub mode: String,
    pub policy: String,
    pub placement: String,
    pub kills: u64,
    /// Writes the child made and saw return (acknowledged).
    pub acked_writes: u64,
    /// Writes covered by a sync that returned before the kill.
    pub synced_writes: u64,
    pub syncs: u64,
    /// Blocks that read as a data-loss error or not at all.
    pub lost: u64,
    /// Blocks that read older than their last synced write, or as a version never written.
    pub stale: u64,
    /// Blocks whose bytes mix versions or blocks.
    pub torn: u64,
    /// Blocks the reopened cache found on its tier, over all reopenings.
    pub recovered: u64,
    /// Of those, dirty (not yet written back when the child died).
    pub recovered_dirty: u64,
    /// The longest recovery (scan and restore) of a reopening.
    pub recovery_seconds_max: f64,
    pub seconds: f64,
}

/// A block's value: its number and version in every 16 bytes.
fn value(block: u64, version: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(BLOCK);
    while v.len() < BLOCK {
        v.extend_from_slice(&block.to_le_bytes());
        v.extend_from_slice(&version.to_le_bytes());
    }
    v
}

/// The version a block's bytes hold, or `None` if they are not one whole value of it.
fn version_of(block: u64, bytes: &[u8]) -> Option<u64> {
    let version = u64::from_le_bytes(bytes.get(8..16)?.try_into().ok()?);
    (bytes.len() == BLOCK && bytes == value(block, version)).then_some(version)
}

struct Files {
    dir: PathBuf,
    remove: bool,
    backing: PathBuf,
    tier: PathBuf,
}

impl Drop for Files {
    fn drop(&mut self) {
        if self.remove {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn files(args: &CrashtestArgs) -> anyhow::Result<Files> {
    let (dir, remove) = match &args.dir {
        Some(dir) => (dir.clone(), false),
        None => {
            let name = format!("tiercache-crashtest-{}-{}", std::process::id(), args.seed);
            (std::env::temp_dir().join(name), true)
        }
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(Files { backing: dir.join("backing.img"), tier: dir.join("tier.tc"), dir, remove })
}

/// The file of tier `i` of `--tier` (top down): the first's is `first`, each below it one of
/// its own beside it.
fn tier_path(first: &Path, i: usize) -> std::path::PathBuf {
    match i {
        0 => first.to_path_buf(),
        _ => first.with_extension(format!("{i}.tc")),
    }
}

/// The cache the child writes through and the parent reopens, as every front describes one
/// (a [`CacheConfig`]): `--tier`'s media top down (DRAM only on top), each holding twice the
/// blocks of the one above and the last `--cache-blocks`, all run by `--policy`, in `--mode`
/// without sequential cutoff (each shard sees only its own keys), in 4 shards.
fn config(args: &CrashtestArgs, first: &Path) -> anyhow::Result<CacheConfig> {
    let names: Vec<&str> = args.tier.split('+').collect();
    let dram = names.len() > 1 && names[0] == "dram";
    let mut media = Vec::new();
    for (i, name) in names.iter().enumerate().skip(dram as usize) {
        let kind = match *name {
            "mapped" => MediumKind::Mapped,
            "file" => MediumKind::File,
            "flash" => MediumKind::Flash,
            other => bail!(
                "--tier {other}: not mapped, file or flash (or tiers top down joined by +, \
                 `dram+mapped+flash`, with DRAM only above another, on top)"
            ),
        };
        media.push(MediumSpec { kind, path: tier_path(first, i), profile: None });
    }
    CacheMode::parse(&args.mode)
        .with_context(|| format!("--mode {}: not one of wb, wo, wt, wa, wi, pt", args.mode))?;
    if args.cache_blocks == 0 || args.blocks == 0 || args.sync_every == 0 {
        bail!("--blocks, --cache-blocks and --sync-every must be above 0");
    }
    PolicyConfig::parse(&args.policy).context("--policy")?;
    Placement::parse(&args.placement).context("--placement")?;
    let tiers = names.len();
    let bytes = |i: usize| (args.cache_blocks >> (tiers - 1 - i)).max(1) * BLOCK as u64;
    let mut stack = StackSpec::new(&args.policy, Amount::Count(bytes(0)));
    stack.lower_capacity = (tiers > 1).then(|| Amount::Count(bytes(1)));
    stack.lower_policy = args.policy.clone();
    stack.tier = (2..tiers).map(|i| format!("{}:{}", bytes(i), args.policy)).collect();
    stack.placement = args.placement.clone();
    stack.mode = Some(args.mode.clone());
    stack.seq_cutoff = "never".into();
    let engine = EngineOptions {
        block_size: Amount::Count(BLOCK as u64),
        shards: 4,
        recover: Recover::Quiet,
        ..EngineOptions::default()
    };
    Ok(CacheConfig { stack, media, engine })
}

/// The cache [`config`] describes, over the backing file.
fn cache(args: &CrashtestArgs, files: &Files) -> anyhow::Result<CacheBuilder> {
    let builder = config(args, &files.tier)?.builder()?;
    Ok(builder.backing_file(&files.backing, false)?)
}

pub fn run(args: &CrashtestArgs) -> anyhow::Result<()> {
    if let Some(start) = args.child {
        return child(args, start);
    }
    let started = Instant::now();
    let files = files(args)?;
    config(args, &files.tier)?.builder()?; // Settings are checked before anything is written.
    DeviceProfile::load(&args.backing_profile)
        .map_err(anyhow::Error::msg)
        .context("--backing-profile")?;
    // A new run: no tier file of an earlier one.
    for i in 0..args.tier.split('+').count() {
        let _ = std::fs::remove_file(tier_path(&files.tier, i));
    }
    let initial: Vec<u8> = (0..args.blocks).flat_map(|b| value(b, 0)).collect();
    std::fs::write(&files.backing, initial)
        .with_context(|| format!("cannot write {}", files.backing.display()))?;
    let mut report = CrashReport {
        tier: args.tier.clone(),
        mode: args.mode.clone(),
        policy: args.policy.clone(),
        placement: args.placement.clone(),
        ..Default::default()
    };
    // Per block: the version at the last sync that returned, and those written since.
    let mut durable = vec![0u64; args.blocks as usize];
    let mut since: Vec<Vec<u64>> = vec![Vec::new(); args.blocks as usize];
    let mut rng = SeededRng::new(args.seed);
    let mut next_version = 1;
    let mut progress = crate::progress::Progress::new("kills", Some(args.kills));
    for kill in 0..args.kills {
        let lines = run_child(args, &files, next_version, kill, &mut rng)?;
        let mut pending_write = false;
        for line in &lines {
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                ["W", block, version] => {
                    let (block, version): (u64, u64) = (block.parse()?, version.parse()?);
                    since[block as usize].push(version);
                    next_version = next_version.max(version + 1);
                    report.acked_writes += pending_write as u64;
                    pending_write = true;
                }
                ["S", writes] => {
                    report.acked_writes += pending_write as u64;
                    pending_write = false;
                    report.syncs += 1;
                    report.synced_writes += writes.parse::<u64>()?;
                    for (block, written) in since.iter_mut().enumerate() {
                        if let Some(&last) = written.last() {
                            durable[block] = last;
                            written.clear();
                        }
                    }
                }
                ["R"] => {}
                _ => bail!("the child said {line:?}"),
            }
        }
        check(args, &files, &mut durable, &mut since, &mut report)?;
        progress.set(kill + 1);
    }
    progress.finish();
    report.kills = args.kills;
    report.seconds = started.elapsed().as_secs_f64();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "{} kills of a {} writer on a {} tier: {} writes acknowledged, {} synced in {} syncs",
            report.kills,
            report.mode,
            report.tier,
            report.acked_writes,
            report.synced_writes,
            report.syncs
        );
        println!(
            "after the kills: {} lost, {} stale, {} torn; {} blocks recovered ({} dirty), \
             longest recovery {:.3} s",
            report.lost,
            report.stale,
            report.torn,
            report.recovered,
            report.recovered_dirty,
            report.recovery_seconds_max
        );
    }
    if report.lost + report.stale + report.torn > 0 {
        bail!("acknowledged and synced writes did not survive (see above)");
    }
    Ok(())
}

/// Runs the child until a random moment after it opened its cache, kills it with SIGKILL, and
/// returns every whole line it wrote.
fn run_child(
    args: &CrashtestArgs,
    files: &Files,
    start: u64,
    kill: u64,
    rng: &mut SeededRng,
) -> anyhow::Result<Vec<String>> {
    let exe = std::env::current_exe().context("cannot find the tiercache executable")?;
    let mut child = Command::new(exe)
        .args(["crashtest", "--tier", &args.tier, "--mode", &args.mode, "--policy", &args.policy])
        .args(["--placement", &args.placement])
        .args(["--blocks", &args.blocks.to_string()])
        .args(["--cache-blocks", &args.cache_blocks.to_string()])
        .args(["--sync-every", &args.sync_every.to_string()])
        .args(["--backing-profile", &args.backing_profile])
        .args(["--seed", &(args.seed ^ (kill + 1).wrapping_mul(0x9E37_79B9)).to_string()])
        .arg("--dir")
        .arg(&files.dir)
        .args(["--child", &start.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot start the child")?;
    let stdout = child.stdout.take().expect("piped");
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    // The pipe is drained all the time, so the child never waits on it.
    let reader = std::thread::spawn(move || {
        let mut lines = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if line == "R" {
                let _ = ready_tx.send(());
            }
            lines.push(line);
        }
        lines
    });
    let opened = ready_rx.recv_timeout(Duration::from_secs(60));
    if opened.is_ok() {
        std::thread::sleep(Duration::from_micros(rng.below(args.max_run_ms * 1000 + 1)));
    }
    // SIGKILL: nothing of the child runs after this, no destructor, no flush.
    let _ = child.kill();
    let status = child.wait().context("cannot wait for the child")?;
    let lines = reader.join().expect("the reader thread does not panic");
    if opened.is_err() {
        let mut err = String::new();
        if let Some(mut stderr) = child.stderr.take() {
            use std::io::Read;
            let _ = stderr.read_to_string(&mut err);
        }
        bail!("the child never opened its cache ({status}): {}", err.trim());
    }
    Ok(lines)
}

/// Reopens the cache over what the child left and reads every block against the model, then
/// stops cleanly (everything written back) for the next child.
fn check(
    args: &CrashtestArgs,
    files: &Files,
    durable: &mut [u64],
    since: &mut [Vec<u64>],
    report: &mut CrashReport,
) -> anyhow::Result<()> {
    let cache = cache(args, files)?.build()?;
    let stats = cache.stats();
    report.recovered += stats.recovered;
    report.recovered_dirty += cache.dirty_blocks() as u64;
    if let Some(recovery) = cache.recovery() {
        report.recovery_seconds_max = report.recovery_seconds_max.max(recovery.seconds);
    }
    let file = CachedFile::open(&files.backing, cache)?;
    let mut buf = vec![0u8; BLOCK];
    for block in 0..args.blocks {
        let (last_synced, later) = (durable[block as usize], &since[block as usize]);
        let read = match file.read_at(block * BLOCK as u64, &mut buf) {
            Ok(n) if n == BLOCK => version_of(block, &buf),
            Ok(_) | Err(EngineError::DataLost { .. }) => {
                report.lost += 1;
                eprintln!("block {block}: lost (synced version {last_synced})");
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        match read {
            None => {
                report.torn += 1;
                eprintln!("block {block}: torn (synced version {last_synced})");
            }
            Some(v) if v == last_synced || later.contains(&v) => durable[block as usize] = v,
            Some(v) => {
                report.stale += 1;
                eprintln!(
                    "block {block}: version {v}; synced {last_synced}, written since {later:?}"
                );
                durable[block as usize] = v;
            }
        }
    }
    since.iter_mut().for_each(Vec::clear);
    drop(file);
    Ok(())
}

/// The child: writes random blocks (a third of them among the first 64), numbering versions
/// from `start`, and syncs every --sync-every writes, until it is killed. It says "W block
/// version" before each write and "S writes" after each sync returns.
fn child(args: &CrashtestArgs, start: u64) -> anyhow::Result<()> {
    let dir = args.dir.as_ref().context("the child needs --dir")?;
    let files = Files {
        dir: dir.clone(),
        remove: false,
        backing: dir.join("backing.img"),
        tier: dir.join("tier.tc"),
    };
    let cache = cache(args, &files)?.build()?;
    let profile = DeviceProfile::load(&args.backing_profile).map_err(anyhow::Error::msg)?;
    let file = CachedFile::open(&files.backing, cache)?.emulate_backing(profile);
    let mut out = std::io::stdout().lock();
    writeln!(out, "R")?;
    out.flush()?;
    let mut rng = SeededRng::new(args.seed);
    let (mut version, mut unsynced) = (start, 0u64);
    loop {
        let hot = rng.chance(0.33);
        let block = if hot { rng.below(args.blocks.min(64)) } else { rng.below(args.blocks) };
        writeln!(out, "W {block} {version}")?;
        out.flush()?;
        file.write_at(block * BLOCK as u64, &value(block, version))?;
        version += 1;
        unsynced += 1;
        if unsynced == args.sync_every {
            file.sync()?;
            writeln!(out, "S {unsynced}")?;
            out.flush()?;
            unsynced = 0;
        }
    }
}
