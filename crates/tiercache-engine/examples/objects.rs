//! Objects of any size under keys of any bytes: DRAM over a flash tier, values up to 64 MiB,
//! the README's ten lines (run: `cargo run --release -p tiercache-engine --example objects`).

use tiercache_engine::{CacheBuilder, KeyedCache, TierKind};
use tiercache_policy::PolicyConfig;

pub fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("tiercache-objects-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let (data_block, read_index) = (vec![7u8; 16 << 10], || Ok(vec![1u8; 3 << 20]));
    // The README's lines, from here.
    let cache = CacheBuilder::new(PolicyConfig::parse("s3fifo")?)
        .capacity_bytes(256 << 20) // DRAM
        .lower_tier(TierKind::Flash { path: dir.join("app.flash") }, 1 << 30, PolicyConfig::Log)
        .max_value(64 << 20) // objects up to 64 MiB
        .build()?; // errors name the setting
    let objects = KeyedCache::new(cache)?;
    objects.insert(b"sst/000123.sst@4096", &data_block)?; // any key, any size
    let index = objects.fetch(b"sst/000123.sst@index", read_index)?; // one load per key at once
                                                                     // To here.
    assert_eq!(objects.get(b"sst/000123.sst@4096").as_deref(), Some(&data_block[..]));
    println!("a 16 KiB block and a {} MiB index cached under their keys", index.len() >> 20);
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
