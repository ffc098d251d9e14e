//! Errors a person can cause when configuring a policy.

/// A policy or admission configuration that cannot work.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    #[error("unknown policy '{name}'; known policies: {known}")]
    UnknownPolicy { name: String, known: String },
    #[error("unknown admission filter '{name}'; known filters: {known}")]
    UnknownAdmission { name: String, known: String },
    #[error("policy '{policy}': parameter '{key}' {reason}")]
    BadParameter { policy: String, key: String, reason: String },
    #[error("capacity must be at least 1 {unit}, got 0")]
    ZeroCapacity { unit: &'static str },
    /// A setting of a policy stack (a `[cache]` key, a `sim` option) that cannot work.
    #[error("setting '{key}': {reason}")]
    Setting { key: String, reason: String },
}

impl PolicyError {
    pub fn setting(key: &str, reason: impl Into<String>) -> PolicyError {
        PolicyError::Setting { key: key.into(), reason: reason.into() }
    }

    pub fn bad(policy: &str, key: &str, reason: impl Into<String>) -> PolicyError {
        PolicyError::BadParameter { policy: policy.into(), key: key.into(), reason: reason.into() }
    }
}

/// The error for a key no parameter of `policy` has.
pub(crate) fn unknown_key(policy: &str, key: &str) -> PolicyError {
    PolicyError::bad(policy, key, "is not a parameter of this policy")
}
