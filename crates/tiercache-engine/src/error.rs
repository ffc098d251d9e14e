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
    #[error(transparent)]
    Policy(#[from] tiercache_policy::PolicyError),
}

impl EngineError {
    pub fn config(setting: &'static str, reason: impl Into<String>) -> EngineError {
        EngineError::Config { setting, reason: reason.into() }
    }
}
