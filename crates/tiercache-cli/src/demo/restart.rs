//! Part 3 of the demo: a warm restart after a crash. A child process writes blocks through a
//! write-back cache on a memory-mapped tier, with no sync of its own, and is killed (SIGKILL)
//! once its writes are acknowledged: none is on the backing file, and no clean stop wrote them
//! back. The demo then reopens the cache: it finds the dirty blocks on its tier, and every
//! write reads back; the clean stop at the end writes them to the backing file.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde::Serialize;
use tiercache_engine::{CacheConfig, CachedFile};

const BLOCK: usize = 4096;
/// Blocks of the backing file, and of them written by the child (all or `QUICK_WRITES`).
const BLOCKS: u64 = 16_384;
const WRITES: u64 = 8_192;
const QUICK_WRITES: u64 = 2_048;

/// What the warm restart showed.
#[derive(Serialize)]
pub struct Restart {
    /// Blocks the child wrote (each once, in a scrambled order), acknowledged and not synced,
    /// before it was killed.
    pub blocks_written: u64,
    /// Of them, on the backing file when the child had gone: none, in write-back.
    pub on_backing_before_restart: u64,
    /// Blocks the reopened cache found on its tier, and of them dirty.
    pub recovered: u64,
    pub recovered_dirty: u64,
    /// Seconds to reopen the cache (scan the tier and restore its blocks).
    pub recovery_seconds: f64,
    /// Written blocks that read back with the child's data.
    pub verified: u64,
    /// Of them, on the backing file after the clean stop that ended the demo.
    pub on_backing_after_stop: u64,
}

/// A temporary directory (on tmpfs where there is one), removed when dropped.
pub struct Scratch {
    pub path: PathBuf,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

pub fn scratch_dir(part: &str) -> anyhow::Result<Scratch> {
    let base = crate::lab::memory_dir();
    let path = base.join(format!("tiercache-demo-{part}-{}", std::process::id()));
    std::fs::create_dir_all(&path).with_context(|| format!("cannot create {}", path.display()))?;
    Ok(Scratch { path })
}

/// The cache both processes open: a mapped tier holding every block, in write-back.
fn config(dir: &Path) -> anyhow::Result<CacheConfig> {
    let text = format!(
        "[stack]\npolicy = \"lru\"\ncapacity = \"{}KiB\"\nmode = \"wb\"\nseq_cutoff = \"never\"\n\
         [[media]]\nkind = \"mapped\"\npath = {:?}\n[engine]\nshards = 4\nrecover = \"quiet\"\n",
        BLOCKS * 4,
        dir.join("tier.tc").display().to_string()
    );
    Ok(toml::from_str(&text)?)
}

/// Block `block`'s data as the child writes it: its number and a mark in every 16 bytes.
fn value(block: u64) -> Vec<u8> {
    let mark = 0xdead_beef_u64;
    (0..BLOCK / 16).flat_map(|_| [block.to_le_bytes(), mark.to_le_bytes()].concat()).collect()
}

/// The blocks the child writes, in a scrambled order.
fn written(count: u64) -> impl Iterator<Item = u64> {
    (0..count).map(|i| (i * 7919) % BLOCKS)
}

/// The child: writes, says how many, and waits to be killed, with no sync and no clean stop.
pub fn child(dir: &Path) -> anyhow::Result<()> {
    let count: u64 = std::fs::read_to_string(dir.join("count"))?.trim().parse()?;
    let cache = config(dir)?.builder()?.build()?;
    let file = CachedFile::open(&dir.join("backing"), cache)?;
    for block in written(count) {
        file.write_at(block * BLOCK as u64, &value(block))?;
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "written {count}")?;
    out.flush()?;
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

pub fn run(quick: bool) -> anyhow::Result<Restart> {
    let dir = scratch_dir("restart")?;
    let count = if quick { QUICK_WRITES } else { WRITES };
    let backing = dir.path.join("backing");
    std::fs::write(&backing, vec![0u8; BLOCKS as usize * BLOCK])?;
    std::fs::write(dir.path.join("count"), count.to_string())?;
    let exe = std::env::current_exe().context("cannot find the tiercache executable")?;
    let mut writer = std::process::Command::new(exe)
        .args(["demo", "--restart-child"])
        .arg(&dir.path)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .context("cannot run the warm restart's writer")?;
    let stdout = writer.stdout.take().expect("piped");
    let said = BufReader::new(stdout).lines().next().transpose()?.unwrap_or_default();
    // The crash: SIGKILL as soon as the writes are acknowledged.
    let _ = writer.kill();
    let ended = writer.wait_with_output().context("the warm restart's writer")?;
    if said.trim() != format!("written {count}") {
        bail!(
            "the warm restart's writer failed ({}): {}{}",
            ended.status,
            said,
            String::from_utf8_lossy(&ended.stderr)
        );
    }
    let on_backing = |count: u64| -> anyhow::Result<u64> {
        let bytes = std::fs::read(&backing)?;
        Ok(written(count)
            .filter(|&b| {
                let at = b as usize * BLOCK;
                bytes[at..at + BLOCK] == value(b)[..]
            })
            .count() as u64)
    };
    let on_backing_before_restart = on_backing(count)?;
    let started = Instant::now();
    let cache = config(&dir.path)?.builder()?.build()?;
    let recovery_seconds = started.elapsed().as_secs_f64();
    let stats = cache.stats();
    let recovered_dirty = cache.dirty_blocks() as u64;
    let file = CachedFile::open(&backing, cache)?;
    let mut buf = vec![0u8; BLOCK];
    let mut verified = 0;
    for block in written(count) {
        file.read_at(block * BLOCK as u64, &mut buf)?;
        verified += (buf == value(block)) as u64;
    }
    drop(file);
    Ok(Restart {
        blocks_written: count,
        on_backing_before_restart,
        recovered: stats.recovered,
        recovered_dirty,
        recovery_seconds,
        verified,
        on_backing_after_stop: on_backing(count)?,
    })
}

pub fn print(r: &Restart) {
    println!("3. A warm restart after a crash, write-back on a mapped tier");
    println!(
        "   a child process wrote {} blocks, no sync, and was killed (SIGKILL): {} of them on \
         the backing file",
        r.blocks_written, r.on_backing_before_restart
    );
    println!(
        "   reopened in {:.3} s: {} blocks recovered from the tier, {} dirty; {} of {} writes \
         read back as written",
        r.recovery_seconds, r.recovered, r.recovered_dirty, r.verified, r.blocks_written
    );
    println!(
        "   the clean stop then wrote them back: {} of {} on the backing file",
        r.on_backing_after_stop, r.blocks_written
    );
}
