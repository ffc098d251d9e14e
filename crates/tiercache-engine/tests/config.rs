//! `CacheConfig`, the one description of a whole cache: the example in its documentation reads
//! as written, a config builds a working three-tier cache, a misspelt key is an error naming
//! it, and a config survives a round trip through TOML.

mod common;

use tiercache_engine::{CacheConfig, CachedFile, MediumKind, TierKind};

/// The TOML example in `src/config.rs`'s module documentation.
fn documented_example() -> String {
    let source = include_str!("../src/config.rs");
    let lines: Vec<&str> = source.lines().take_while(|l| l.starts_with("//!")).collect();
    let text: Vec<&str> = lines.iter().map(|l| l.trim_start_matches("//!").trim_start()).collect();
    let start = text.iter().position(|l| *l == "```toml").expect("a TOML example") + 1;
    let end = start + text[start..].iter().position(|l| *l == "```").expect("its end");
    text[start..end].join("\n")
}

#[test]
fn the_documented_example_reads_as_written() {
    let config: CacheConfig = toml::from_str(&documented_example()).unwrap();
    let stack = config.stack().unwrap();
    assert_eq!(stack.tiers.len(), 3);
    let kinds = config.tier_kinds(stack.tiers.len());
    assert!(matches!(kinds[0], TierKind::Dram));
    assert!(matches!(kinds[1], TierKind::Mapped { .. }));
    assert!(matches!(kinds[2], TierKind::Flash { .. }));
    assert_eq!(config.media[0].profile.as_deref(), Some("optane-dcpm"));
    assert_eq!(config.engine.shards, 16);
}

#[test]
fn a_config_builds_a_three_tier_write_back_cache() {
    let (slow, flash, backing) = (
        common::scratch("config", "slow.tier"),
        common::scratch("config", "flash.tier"),
        common::scratch("config", "backing.img"),
    );
    std::fs::write(&backing, vec![0u8; 256 * 4096]).unwrap();
    let text = format!(
        r#"
        [stack]
        policy = "lru"
        capacity = "64KiB"
        lower_capacity = "128KiB"
        tier = ["256KiB:lru"]
        placement = "scm-first:2"
        mode = "wb"
        seq_cutoff = "never"

        [[media]]
        kind = "mapped"
        path = "{}"

        [[media]]
        kind = "flash"
        path = "{}"

        [engine]
        shards = 2
        recover = "wipe"
        "#,
        slow.display(),
        flash.display()
    );
    let config: CacheConfig = toml::from_str(&text).unwrap();
    assert_eq!(config.media[1].kind, MediumKind::Flash);
    let cache = config.builder().unwrap().backing_file(&backing, false).unwrap().build().unwrap();
    let file = CachedFile::open(&backing, cache).unwrap();
    // 96 blocks: more than DRAM and the mapped tier hold, less than all three.
    for round in 0..3u8 {
        for block in 0..96u64 {
            file.write_at(block * 4096, &[round ^ block as u8; 4096]).unwrap();
        }
    }
    let mut buf = vec![0u8; 4096];
    for _ in 0..3 {
        for block in 0..96u64 {
            file.read_at(block * 4096, &mut buf).unwrap();
            assert!(buf.iter().all(|b| *b == 2 ^ block as u8), "block {block}");
        }
    }
    let stats = file.cache().stats();
    assert_eq!(stats.tier_hits.len(), 3, "{stats:?}");
    assert!(stats.promotions > 0 && stats.write_backs > 0, "{stats:?}");
}

#[test]
fn a_misspelt_key_is_an_error_naming_it() {
    let text = "[stack]\npolicy = \"lru\"\ncapacity = \"1MiB\"\n[engine]\nshard = 4\n";
    let e = toml::from_str::<CacheConfig>(text).unwrap_err().to_string();
    assert!(e.contains("shard"), "{e}");
    let text = "[stack]\npolicy = \"lru\"\ncapacity = \"1MiB\"\n[[media]]\nkind = \"pmem\"\npath = \"x\"\n";
    let e = toml::from_str::<CacheConfig>(text).unwrap_err().to_string();
    assert!(e.contains("pmem") && e.contains("mapped"), "{e}");
}

/// The background checkpoints' interval: read with its unit, `0` for none, and anything else an
/// error naming the setting and saying what it takes.
#[test]
fn the_sync_interval_reads_with_its_unit_and_a_bad_one_names_the_setting() {
    use std::time::Duration;
    use tiercache_engine::parse_interval;
    let read = |text: &str| parse_interval(text, "sync_interval");
    assert_eq!(read("250ms").unwrap(), Duration::from_millis(250));
    assert_eq!(read("1.5s").unwrap(), Duration::from_millis(1500));
    assert_eq!(read("2").unwrap(), Duration::from_secs(2));
    assert_eq!(read("1min").unwrap(), Duration::from_secs(60));
    assert_eq!(read("0").unwrap(), Duration::ZERO);
    for bad in ["5 parsecs", "fast", "-1s", ""] {
        let e = read(bad).unwrap_err().to_string();
        assert!(e.contains("sync_interval") && e.contains(bad), "{bad}: {e}");
    }
    let text =
        "[stack]\npolicy = \"lru\"\ncapacity = \"1MiB\"\n[engine]\nsync_interval = \"often\"\n";
    let config: CacheConfig = toml::from_str(text).unwrap();
    let e = config.builder().err().expect("refused").to_string();
    assert!(e.contains("sync_interval") && e.contains("often"), "{e}");
}

#[test]
fn a_config_survives_a_round_trip() {
    let config: CacheConfig = toml::from_str(&documented_example()).unwrap();
    let text = toml::to_string(&config).unwrap();
    assert_eq!(toml::from_str::<CacheConfig>(&text).unwrap(), config);
}
