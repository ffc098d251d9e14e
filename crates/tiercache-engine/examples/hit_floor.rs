//! The floor under a hit without the lock: how close to a raw copy's rate the lookup alone
//! gets on this machine, before any policy is told of the hit.
//!
//! `scripts/bench_hits.py` compares whole cache hits (lookup, copy, telling the policy) with
//! raw copies. This measures the parts below telling with the engine's own code, in one
//! process, the variants alternating in short chunks so that a slow spell of the machine lands
//! on all of them:
//!
//! - `raw`: a 4 KiB copy from the key's slot, its address drawn with the key (so the copy is
//!   all it does, as in `tiercache bench --raw`, and it reads the same bytes as the others);
//! - `lookup`: [`SlotTable::read`], the hit path's seqlock read: the key's set, then the copy
//!   from its slot, then the check that the set did not change;
//! - `lookup+ring`: that, and the hit recorded in the thread's [`HitLog`] ring for its shard,
//!   the rings taken under the shard's lock when full (as the cache does), but told to no
//!   policy;
//! - `told`: that, and each hit taken told to the shard's LRU policy as the cache tells it
//!   (prefetched for the batch, then decided as a lookup), without the cache's counters.
//!
//! The geometry is `bench_hits.py`'s: a 64 MiB tier of 4 KiB slots in the shards `tiercache
//! bench` makes on this machine, sets as the cache sizes them, 32 MiB of keys (all resident),
//! Zipf(0.9) scrambled, the keys drawn before the run (so none of the bench's per-operation
//! work is in any variant). Blocks on a mapped tier are read without their header here, as
//! hits read them once checked (see `crate::tier::optimistic`).
//!
//! Run: `cargo run --release -p tiercache-engine --example hit_floor -- [--threads N]
//! [--mapped FILE] [--rounds R] [--json]` (`--mapped` takes a path that does not exist yet,
//! on /dev/shm say, and removes it afterwards).

use std::sync::{Arc, Barrier, Mutex};
use std::time::Instant;

use memmap2::{MmapOptions, MmapRaw};
use tiercache_core::hash::shard_index;
use tiercache_core::{Capacity, Decision, Op, Request};
use tiercache_engine::tier::optimistic::{
    Hit, HitLog, Landing, Recorded, Sets, SlotLayout, SlotTable,
};
use tiercache_policy::{AnyPolicy, Policy, PolicyConfig};
use tiercache_workload::gen::{KeyDistribution, SizeDistribution, Synthetic, SyntheticConfig};

const BLOCK: usize = 4096;
const TIER_BYTES: usize = 64 << 20;
const WORKING_SET: usize = 32 << 20;
/// Operations a thread runs in one chunk of one variant.
const CHUNK: usize = 1 << 16;

#[derive(Clone, Copy, PartialEq)]
enum Variant {
    Raw,
    Lookup,
    LookupRing,
    Told,
}

const VARIANTS: [(Variant, &str); 4] = [
    (Variant::Raw, "raw"),
    (Variant::Lookup, "lookup"),
    (Variant::LookupRing, "lookup+ring"),
    (Variant::Told, "told"),
];

/// A shard's lock, and what its holder tells: the policy and its decision.
type Shard = Mutex<(AnyPolicy, Decision)>;

struct Options {
    threads: usize,
    mapped: Option<std::path::PathBuf>,
    rounds: usize,
    json: bool,
}

fn options() -> Result<Options, String> {
    let mut options = Options { threads: 1, mapped: None, rounds: 30, json: false };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        // A count in 1..=max.
        let mut count = |name: &str, max: usize| -> Result<usize, String> {
            value(name)?
                .parse()
                .ok()
                .filter(|n| (1..=max).contains(n))
                .ok_or(format!("{name} takes 1 to {max}"))
        };
        match arg.as_str() {
            "--threads" => options.threads = count("--threads", 64)?,
            "--rounds" => options.rounds = count("--rounds", 10_000)?,
            "--mapped" => options.mapped = Some(value("--mapped")?.into()),
            "--json" => options.json = true,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(options)
}

/// The tier's memory: anonymous on huge pages where the kernel has them (as the DRAM tier's),
/// or a new file mapped shared (as a mapped tier's).
fn memory(mapped: Option<&std::path::Path>) -> Result<Arc<MmapRaw>, String> {
    let mapping = match mapped {
        None => {
            let memory = MmapOptions::new()
                .len(TIER_BYTES)
                .map_anon()
                .map_err(|e| format!("cannot map {TIER_BYTES} bytes: {e}"))?;
            #[cfg(target_os = "linux")]
            let _ = memory.advise(memmap2::Advice::HugePage);
            MmapRaw::from(memory)
        }
        Some(path) => {
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(path)
                .map_err(|e| {
                    format!("{}: cannot create it (it must not exist): {e}", path.display())
                })?;
            file.set_len(TIER_BYTES as u64).map_err(|e| format!("{}: {e}", path.display()))?;
            MmapOptions::new().map_raw(&file).map_err(|e| format!("{}: {e}", path.display()))?
        }
    };
    // SAFETY: the mapping is this process's alone and `TIER_BYTES` long; nothing reads it yet.
    unsafe { std::ptr::write_bytes(mapping.as_mut_ptr(), 1, TIER_BYTES) };
    Ok(Arc::new(mapping))
}

/// Thread `t`'s keys: Zipf(0.9) scrambled over the working set's blocks, as `tiercache bench`
/// draws them.
fn keys(t: usize) -> Vec<u64> {
    let config = SyntheticConfig {
        distribution: KeyDistribution::ScrambledZipf { theta: 0.9 },
        objects: (WORKING_SET / BLOCK) as u64,
        requests: u64::MAX,
        read_ratio: 1.0,
        size: SizeDistribution::Fixed { bytes: BLOCK as u32 },
        seed: 42 ^ (t as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15),
    };
    let generator = Synthetic::new(config).expect("a valid generator");
    generator.take(CHUNK * 8).map(|request| request.key).collect()
}

fn main() {
    let options = options().unwrap_or_else(|e| {
        eprintln!("hit_floor: {e}");
        std::process::exit(2)
    });
    let mapping = memory(options.mapped.as_deref()).unwrap_or_else(|e| {
        eprintln!("hit_floor: {e}");
        std::process::exit(1)
    });
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let shards = (cores * 16).next_power_of_two();
    let shard_bits = shards.trailing_zeros();
    let per_shard = TIER_BYTES / BLOCK / shards;
    // Sized as the cache sizes them: for the shard's slots and its spare ones.
    let slack = tiercache_engine::tier::MEMORY_SLACK_SLOTS as usize;
    let sets = Sets::new(shards, per_shard + slack).expect("memory for the sets");
    let tables: Vec<SlotTable> = (0..shards)
        .map(|s| {
            let layout = SlotLayout {
                slots_at: s * per_shard * BLOCK,
                slots: per_shard,
                slot_bytes: BLOCK,
                headers_at: None,
            };
            SlotTable::new((&sets, s), mapping.clone(), layout)
        })
        .collect();
    // Every key of the working set in the next free slot of its shard, and where that is,
    // for the raw copies.
    let base = mapping.as_ptr() as usize;
    let mut used = vec![0usize; shards];
    let mut address = vec![0usize; WORKING_SET / BLOCK];
    for (key, at) in address.iter_mut().enumerate() {
        let shard = shard_index(key as u64, shard_bits);
        let slot = used[shard];
        assert!(slot < per_shard, "shard {shard} is full");
        tables[shard].publish(slot as u32, key as u64, BLOCK);
        *at = base + (shard * per_shard + slot) * BLOCK;
        used[shard] += 1;
    }
    let log = HitLog::new(shards);
    // An LRU policy a shard, of the shard's slots, which the keys entered as misses.
    let locks: Vec<Shard> = (0..shards)
        .map(|_| {
            let capacity = Capacity::objects(per_shard as u64);
            let policy = AnyPolicy::from_config(&PolicyConfig::Lru, capacity, &[], 42)
                .expect("an LRU policy");
            Mutex::new((policy, Decision::new()))
        })
        .collect();
    for key in 0..(WORKING_SET / BLOCK) as u64 {
        let (policy, decision) =
            &mut *locks[shard_index(key, shard_bits)].lock().expect("not poisoned");
        decision.clear();
        policy.decide(&Request::new(0, key, BLOCK as u32, Op::Read), decision);
    }

    let threads = options.threads;
    let barrier = Barrier::new(threads);
    // Per variant, each round's seconds for `CHUNK` operations on every thread.
    let seconds = Mutex::new(vec![Vec::new(); VARIANTS.len()]);
    let mut unpublished = 0u64;
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (tables, log, locks, barrier, seconds, address) =
                    (&tables, &log, &locks, &barrier, &seconds, &address);
                let rounds = options.rounds;
                scope.spawn(move || {
                    let keys = keys(t);
                    let addresses: Vec<usize> =
                        keys.iter().map(|&key| address[key as usize]).collect();
                    let mut buf = vec![0u8; BLOCK];
                    let mut missed = 0u64;
                    let mut next = 0;
                    // One round unmeasured first, to warm the caches and the rings. Each round
                    // starts with the next variant, so that none always follows the same one.
                    for round in 0..=rounds {
                        for i in 0..VARIANTS.len() {
                            let v = (round + i) % VARIANTS.len();
                            let variant = VARIANTS[v].0;
                            barrier.wait();
                            let started = Instant::now();
                            for _ in 0..CHUNK {
                                let (key, at) = (keys[next], addresses[next]);
                                next = (next + 1) % keys.len();
                                match variant {
                                    Variant::Raw => {
                                        // SAFETY: the slot lies in the mapping, which lives
                                        // until the threads end; nothing writes it now.
                                        let slot = unsafe {
                                            std::slice::from_raw_parts(at as *const u8, BLOCK)
                                        };
                                        buf.copy_from_slice(slot);
                                    }
                                    Variant::Lookup | Variant::LookupRing | Variant::Told => {
                                        let shard = shard_index(key, shard_bits);
                                        let Some((len, _)) =
                                            tables[shard].read(key, &mut buf, Landing::Direct)
                                        else {
                                            missed += 1;
                                            continue;
                                        };
                                        if variant != Variant::Lookup {
                                            let hit = Hit { key, len: len as u32, ns: 0 };
                                            record(log, locks, shard, hit, variant);
                                        }
                                    }
                                }
                                std::hint::black_box(&buf);
                            }
                            barrier.wait();
                            if t == 0 && round > 0 {
                                let elapsed = started.elapsed().as_secs_f64();
                                seconds.lock().expect("not poisoned")[v].push(elapsed);
                            }
                        }
                    }
                    missed
                })
            })
            .collect();
        unpublished = handles.into_iter().map(|h| h.join().expect("no panic")).sum();
    });
    if let Some(path) = &options.mapped {
        let _ = std::fs::remove_file(path);
    }

    let ops = (CHUNK * threads) as f64;
    let medians: Vec<f64> = seconds
        .into_inner()
        .expect("not poisoned")
        .into_iter()
        .map(|mut s| {
            s.sort_by(f64::total_cmp);
            ops / s[s.len() / 2]
        })
        .collect();
    let tier = match &options.mapped {
        Some(path) => format!("mapped {}", path.display()),
        None => "DRAM".into(),
    };
    if options.json {
        let rates: Vec<String> = VARIANTS
            .iter()
            .zip(&medians)
            .map(|((_, name), rate)| format!("\"{name}\": {rate:.0}"))
            .collect();
        println!(
            "{{\"tier\": \"{tier}\", \"threads\": {threads}, \"rounds\": {}, \
             \"unpublished_lookups\": {unpublished}, \"ops_per_second\": {{{}}}}}",
            options.rounds,
            rates.join(", ")
        );
        return;
    }
    println!(
        "{tier}, {threads} thread(s), {} shards, {} rounds of {CHUNK} operations a thread",
        shards, options.rounds
    );
    println!("{:<12} {:>14} {:>8}", "variant", "ops/s", "of raw");
    for ((_, name), rate) in VARIANTS.iter().zip(&medians) {
        println!("{name:<12} {rate:>14.0} {:>7.0}%", 100.0 * rate / medians[0]);
    }
    if unpublished > 0 {
        println!("({unpublished} lookups found their key unpublished: a full set)");
    }
}

/// Records a hit in the thread's ring for `shard`; a full ring is taken under the shard's
/// lock first, and its hits told to the shard's policy if `variant` is `Told`.
fn record(log: &HitLog, locks: &[Shard], shard: usize, hit: Hit, variant: Variant) {
    loop {
        match log.record(shard, hit) {
            Recorded::Yes => return,
            Recorded::Full => {
                let (policy, decision) = &mut *locks[shard].lock().expect("not poisoned");
                log.take(shard, false, |hits| {
                    if variant != Variant::Told {
                        std::hint::black_box(hits);
                        return;
                    }
                    for hit in hits {
                        policy.prefetch(hit.key);
                    }
                    for hit in hits {
                        decision.clear();
                        let lookup = Request::new(0, hit.key, BLOCK as u32, Op::Lookup);
                        policy.decide(&lookup, decision);
                        debug_assert!(decision.hit.is_some(), "key {} is resident", hit.key);
                    }
                });
            }
            Recorded::NoStripe => return,
        }
    }
}
