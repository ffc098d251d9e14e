//! Engine errors: a configuration that cannot work (naming the setting) or an I/O failure
//! (naming the file).

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    #[error("setting '{setting}': {reason}")]
    Config { setting: &'static str, reason: String },
    #[error("{}: {action}: {source}", path.display())]
    Io { path: PathBuf, action: &'static str, source: std::io::Error },
    #[error("value of {len} bytes is larger than the block size of {block_size} bytes")]
    TooLarge { len: usize, block_size: usize },
    /// A value larger than the largest the cache takes (`CacheBuilder::max_value`).
    #[error("value of {len} bytes is larger than the largest value this cache takes (max_value = {max} bytes)")]
    OverMaximum { len: usize, max: usize },
    /// A key and its value that do not fit in the cache's largest value with the key's 4-byte
    /// length (`KeyedCache`).
    #[error("a key of {key} bytes and a value of {value} bytes do not fit: a key and its value share {room} bytes (the cache's largest value, max_value, less the key's 4-byte length)")]
    ObjectTooLarge { key: usize, value: usize, room: usize },
    /// A fetch waited for another thread's load of the same key, and that load failed.
    #[error("key {key}: the load this fetch waited for (another thread's) failed: {reason}")]
    SharedLoad { key: u64, reason: String },
    /// A block whose only copy was dirty in the cache and is gone: it failed its checksum, or
    /// could not be written back before it was dropped. Reads of it fail (EIO to a block
    /// device's client) until it is written again; the backing device's older data is never
    /// served as if current.
    #[error("block {key}: its data was lost: the cache held it dirty and it failed its checksum or could not be written back; write the block again")]
    DataLost { key: u64 },
    /// A tier file made for another cache: another geometry, or another backing file.
    #[error("{}: the tier file holds {found}, and this cache has {wanted}; open it as it was made, or start the cache empty (recover = wipe)", path.display())]
    Mismatch { path: PathBuf, found: String, wanted: String },
    /// Damage that `recover = strict` refuses to start on.
    #[error("{}: {what} (recover = strict refuses to start on damage: quiet drops what fails its checks, wipe starts empty)", path.display())]
    Damaged { path: PathBuf, what: String },
    #[error(transparent)]
    Policy(#[from] tiercache_policy::PolicyError),
}

impl EngineError {
    pub fn config(setting: &'static str, reason: impl Into<String>) -> EngineError {
        EngineError::Config { setting, reason: reason.into() }
    }

    /// The error for a backing file (`backing`, at `path`) other than the one whose blocks
    /// the tier file at `tier` holds (`found`: that file's identity, or none for blocks put
    /// through the cache directly).
    pub(crate) fn mismatch(
        tier: &std::path::Path,
        found: Option<impl std::fmt::Display>,
        backing: impl std::fmt::Display,
        path: &std::path::Path,
    ) -> EngineError {
        EngineError::Mismatch {
            path: tier.to_path_buf(),
            found: match found {
                Some(other) => format!("blocks of the backing file at {other}"),
                None => "blocks of no backing file (put through the cache directly)".into(),
            },
            wanted: format!("{} ({backing}) behind it", path.display()),
        }
    }
}
