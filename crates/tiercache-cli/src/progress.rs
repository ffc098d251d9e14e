//! Progress on stderr for long runs: nothing for the first second, nothing when stderr is not
//! a terminal, then a bar (known total) or a counter with a rate.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

pub struct Progress {
    started: Instant,
    total: Option<u64>,
    label: String,
    bar: Option<ProgressBar>,
    enabled: bool,
}

impl Progress {
    pub fn new(label: &str, total: Option<u64>) -> Progress {
        Progress {
            started: Instant::now(),
            total,
            label: label.to_string(),
            bar: None,
            enabled: std::io::stderr().is_terminal(),
        }
    }

    pub fn set(&mut self, done: u64) {
        if !self.enabled {
            return;
        }
        if self.bar.is_none() && self.started.elapsed() > Duration::from_secs(1) {
            let bar = match self.total {
                Some(total) => ProgressBar::new(total).with_style(
                    ProgressStyle::with_template(
                        "{msg} [{bar:40}] {pos}/{len} {per_sec} eta {eta}",
                    )
                    .expect("static template")
                    .progress_chars("=> "),
                ),
                None => ProgressBar::new_spinner().with_style(
                    ProgressStyle::with_template("{spinner} {msg} {human_pos} requests, {per_sec}")
                        .expect("static template"),
                ),
            };
            bar.set_message(self.label.clone());
            self.bar = Some(bar);
        }
        if let Some(bar) = &self.bar {
            bar.set_position(done);
        }
    }

    pub fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}
