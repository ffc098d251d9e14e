//! Errors of the shared vocabulary: values a person typed that do not make sense.

/// An operating error in core parsing or validation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CoreError {
    #[error("invalid size '{text}': {reason}")]
    InvalidSize { text: String, reason: String },
}
