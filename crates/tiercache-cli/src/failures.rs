//! Log lines for failures and refusals that a client can cause at will (connections refused,
//! ended, TLS sessions failed): one line a second at most per kind, with the count since, so
//! that a flood of them cannot flood the log.

use std::time::{Duration, Instant};

/// Failures and refusals of one kind, logged at most once a second with the count since.
pub struct Failures {
    what: &'static str,
    last: Option<Instant>,
    since: u64,
}

impl Failures {
    pub const fn new(what: &'static str) -> Failures {
        Failures { what, last: None, since: 0 }
    }

    pub fn note(&mut self, detail: &dyn std::fmt::Display) {
        self.since += 1;
        if self.last.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
            eprintln!(
                "tiercache serve: {} ({} times in the last second): {detail}",
                self.what, self.since
            );
            self.last = Some(Instant::now());
            self.since = 0;
        }
    }
}
