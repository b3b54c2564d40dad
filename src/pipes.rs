//! The log sink of the one runner (`process/run.rs`): a hook's stdout and stderr
//! split into lines as they arrive and logged with the run's labels (through
//! [`HookOutput`]), and the last 64 KiB of stderr kept for the failure message. The
//! executor runs every hook with it; the runner reads the pipes on the calling thread.

use crate::log::HookOutput;
use crate::process::{Sink, Stream, Tail};

/// Longest line passed on whole; longer ones are split.
pub(crate) const MAX_LINE: usize = 64 * 1024;
/// The part of stderr kept for the failure message (its end).
const STDERR_KEPT: usize = 64 * 1024;

/// Splits a byte stream into lines (lossy UTF-8, without the newline).
#[derive(Default)]
pub(crate) struct LineSplitter {
    line: Vec<u8>,
}

impl LineSplitter {
    /// Feeds bytes; calls `f` for every completed line.
    pub(crate) fn push(&mut self, bytes: &[u8], f: &mut impl FnMut(&str)) {
        for &b in bytes {
            if b == b'\n' {
                f(&String::from_utf8_lossy(&self.line));
                self.line.clear();
            } else {
                self.line.push(b);
                if self.line.len() >= MAX_LINE {
                    f(&String::from_utf8_lossy(&self.line));
                    self.line.clear();
                }
            }
        }
    }

    /// Passes on the last line if it had no newline.
    pub(crate) fn finish(&mut self, f: &mut impl FnMut(&str)) {
        if !self.line.is_empty() {
            f(&String::from_utf8_lossy(&self.line));
            self.line.clear();
        }
    }
}

/// A hook run's output: both streams logged line by line, the end of stderr kept.
pub(crate) struct LogSink {
    splitters: [LineSplitter; 2],
    logs: [HookOutput; 2],
    stderr: Tail,
}

impl LogSink {
    /// `labels` go on every line logged (hook, binding, queue, task, event).
    pub(crate) fn new(labels: &[(&str, &str)]) -> LogSink {
        LogSink {
            splitters: Default::default(),
            logs: [
                HookOutput::new(labels, "stdout"),
                HookOutput::new(labels, "stderr"),
            ],
            stderr: Tail::new(STDERR_KEPT),
        }
    }

    /// Logs what is still buffered; returns the kept end of stderr.
    pub(crate) fn finish(mut self) -> String {
        for log in &mut self.logs {
            log.flush();
        }
        String::from_utf8_lossy(&self.stderr.into_bytes()).into_owned()
    }
}

impl Sink for LogSink {
    fn started(&mut self) {
        crate::latency_trace::spawned();
    }

    fn bytes(&mut self, stream: Stream, bytes: &[u8]) -> bool {
        let i = stream as usize;
        if stream == Stream::Stderr {
            self.stderr.push(bytes);
        }
        let log = &mut self.logs[i];
        self.splitters[i].push(bytes, &mut |line: &str| log.line(line));
        true
    }

    fn closed(&mut self, stream: Stream) {
        let i = stream as usize;
        let log = &mut self.logs[i];
        self.splitters[i].finish(&mut |line: &str| log.line(line));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_lines_and_long_lines() {
        let mut lines = Vec::new();
        let mut s = LineSplitter::default();
        s.push(b"a\nb", &mut |l: &str| lines.push(l.to_string()));
        s.push(b"b\nc", &mut |l: &str| lines.push(l.to_string()));
        s.finish(&mut |l: &str| lines.push(l.to_string()));
        assert_eq!(lines, ["a", "bb", "c"]);
        let mut sizes = Vec::new();
        let mut s = LineSplitter::default();
        s.push(&vec![b'x'; MAX_LINE + 5], &mut |l: &str| {
            sizes.push(l.len())
        });
        s.finish(&mut |l: &str| sizes.push(l.len()));
        assert_eq!(sizes, [MAX_LINE, 5]);
    }
}
