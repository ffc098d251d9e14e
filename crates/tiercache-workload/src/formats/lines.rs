//! Line-by-line reading for the text formats: one reused buffer, 1-based line numbers for
//! error messages, blank lines and `#` comments skipped, over-long lines refused.

use std::io::BufRead;

use tiercache_core::limits::TRACE_LINE_BYTES_MAX;

use crate::error::{Position, TraceError};

pub struct Lines {
    reader: Box<dyn BufRead + Send>,
    buffer: String,
    pub position: Position,
}

impl Lines {
    pub fn new(reader: Box<dyn BufRead + Send>, path: &std::path::Path) -> Lines {
        Lines { reader, buffer: String::with_capacity(256), position: Position::new(path, "line") }
    }

    /// The next non-blank, non-comment line without its line ending, and where it is.
    pub fn next_line(&mut self) -> Option<Result<(&str, &Position), TraceError>> {
        loop {
            self.buffer.clear();
            self.position.index += 1;
            match self.reader.read_line(&mut self.buffer) {
                Ok(0) => return None,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                    return Some(Err(self.position.malformed("line", "is not valid UTF-8 text")));
                }
                Err(e) => return Some(Err(self.position.io(e))),
            }
            if self.buffer.len() > TRACE_LINE_BYTES_MAX {
                let reason = format!("longer than {TRACE_LINE_BYTES_MAX} bytes");
                return Some(Err(self.position.malformed("line", reason)));
            }
            let line = self.buffer.trim_end_matches(['\n', '\r']);
            if !line.trim().is_empty() && !line.starts_with('#') {
                // Re-borrow so the returned slice lives as long as `self`.
                let len = line.len();
                return Some(Ok((&self.buffer[..len], &self.position)));
            }
        }
    }
}
