//! The out file every contender appends to (`<unix ns> <pod name>` per line), read
//! incrementally: when each pod name was seen, so the scenario can ask "when was pod
//! X first seen at or after time T".

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

/// Lines read so far from one out file.
pub struct Seen {
    path: PathBuf,
    offset: u64,
    partial: String,
    times: HashMap<String, Vec<u128>>,
}

impl Seen {
    pub fn new(path: PathBuf) -> Seen {
        Seen {
            path,
            offset: 0,
            partial: String::new(),
            times: HashMap::new(),
        }
    }

    /// Reads what was appended since the last call (nothing if the file is absent).
    pub fn refresh(&mut self) {
        let Ok(mut file) = std::fs::File::open(&self.path) else {
            return;
        };
        if file.seek(SeekFrom::Start(self.offset)).is_err() {
            return;
        }
        let mut text = String::new();
        let Ok(n) = file.read_to_string(&mut text) else {
            return;
        };
        self.offset += n as u64;
        self.partial.push_str(&text);
        let complete = match self.partial.rfind('\n') {
            Some(i) => self.partial.drain(..=i).collect::<String>(),
            None => return,
        };
        for line in complete.lines() {
            let Some((t, name)) = line.split_once(' ') else {
                continue;
            };
            if let Ok(t) = t.parse::<u128>() {
                self.times.entry(name.to_string()).or_default().push(t);
            }
        }
    }

    /// The first time `name` was seen at or after `since` (unix ns).
    pub fn first_after(&self, name: &str, since: u128) -> Option<u128> {
        self.times
            .get(name)?
            .iter()
            .copied()
            .filter(|t| *t >= since)
            .min()
    }

    /// How many distinct times were stamped at or after `since`: hook runs for the
    /// operators (every line of one run carries its start time).
    pub fn stamps_since(&self, since: u128) -> usize {
        let mut stamps: Vec<u128> = self
            .times
            .values()
            .flatten()
            .copied()
            .filter(|t| *t >= since)
            .collect();
        stamps.sort_unstable();
        stamps.dedup();
        stamps.len()
    }

    /// For each of `wanted` (name, since), when it was first seen after `since`;
    /// `None` until every one was.
    pub fn all_after(&self, wanted: &[(String, u128)]) -> Option<Vec<u128>> {
        wanted
            .iter()
            .map(|(name, since)| self.first_after(name, *since))
            .collect()
    }
}

/// Now as unix nanoseconds (the clock `date +%s%N` and `time.time_ns()` read).
pub fn now_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}
