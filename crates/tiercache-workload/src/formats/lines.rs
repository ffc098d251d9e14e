//! Line-by-line reading for the text formats: one reused buffer, 1-based line numbers for
//! error messages, blank lines and `#` comments skipped, over-long lines refused.
//!
//! A line is read at most [`TRACE_LINE_BYTES_MAX`] bytes at a time: an over-long line (a binary
//! file read as text, a line with no end) is skipped to its end without being held, so memory
//! stays bounded whatever the file holds.

use std::io::{BufRead, Read};

use tiercache_core::limits::TRACE_LINE_BYTES_MAX;

use crate::error::{Position, TraceError};

pub struct Lines {
    reader: Box<dyn BufRead + Send>,
    buffer: Vec<u8>,
    pub position: Position,
}

impl Lines {
    pub fn new(reader: Box<dyn BufRead + Send>, path: &std::path::Path) -> Lines {
        Lines { reader, buffer: Vec::with_capacity(256), position: Position::new(path, "line") }
    }

    /// The next non-blank, non-comment line without its line ending, and where it is.
    pub fn next_line(&mut self) -> Option<Result<(&str, &Position), TraceError>> {
        loop {
            self.buffer.clear();
            self.position.index += 1;
            let limit = TRACE_LINE_BYTES_MAX as u64 + 1;
            match (&mut self.reader).take(limit).read_until(b'\n', &mut self.buffer) {
                Ok(0) => return None,
                Ok(_) => {}
                Err(e) => return Some(Err(self.position.io(e))),
            }
            if self.buffer.len() > TRACE_LINE_BYTES_MAX {
                if let Err(e) = self.skip_rest_of_line() {
                    return Some(Err(self.position.io(e)));
                }
                let reason = format!("longer than {TRACE_LINE_BYTES_MAX} bytes");
                return Some(Err(self.position.malformed("line", reason)));
            }
            let Ok(text) = std::str::from_utf8(&self.buffer) else {
                return Some(Err(self.position.malformed("line", "is not valid UTF-8 text")));
            };
            let line = text.trim_end_matches(['\n', '\r']);
            if !line.trim().is_empty() && !line.starts_with('#') {
                // Re-borrow so the returned slice lives as long as `self`.
                let len = line.len();
                let line = std::str::from_utf8(&self.buffer[..len]).expect("checked above");
                return Some(Ok((line, &self.position)));
            }
        }
    }

    /// Consumes the input up to and including the next newline (or to the end), holding none
    /// of it.
    fn skip_rest_of_line(&mut self) -> std::io::Result<()> {
        if self.buffer.last() == Some(&b'\n') {
            return Ok(());
        }
        loop {
            let available = match self.reader.fill_buf() {
                Ok(bytes) => bytes,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if available.is_empty() {
                return Ok(());
            }
            match available.iter().position(|&b| b == b'\n') {
                Some(at) => {
                    self.reader.consume(at + 1);
                    return Ok(());
                }
                None => {
                    let all = available.len();
                    self.reader.consume(all);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufReader;

    #[test]
    fn an_endless_line_is_skipped_in_bounded_memory() {
        // 64 MiB with no newline, then a good line.
        let endless = std::io::repeat(b'7').take(64 << 20);
        let input = endless.chain(&b"\n42\n"[..]);
        let mut lines = Lines::new(Box::new(BufReader::new(input)), std::path::Path::new("t"));
        let e = lines.next_line().unwrap().unwrap_err().to_string();
        assert!(e.contains("line 1") && e.contains("longer than"), "{e}");
        assert!(lines.buffer.capacity() <= 2 * TRACE_LINE_BYTES_MAX + 256);
        let (line, at) = lines.next_line().unwrap().unwrap();
        assert_eq!((line, at.index), ("42", 2));
        assert!(lines.next_line().is_none());
    }

    #[test]
    fn invalid_utf8_and_comments() {
        let input: &[u8] = b"# c\n\n\xff\xfe\r\n1 2\r\n";
        let mut lines = Lines::new(Box::new(input), std::path::Path::new("t"));
        let e = lines.next_line().unwrap().unwrap_err().to_string();
        assert!(e.contains("line 3") && e.contains("UTF-8"), "{e}");
        assert_eq!(lines.next_line().unwrap().unwrap().0, "1 2");
    }
}
