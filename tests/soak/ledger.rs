//! The hooks' side of the ledger: reads the lines the kubernetes hooks appended
//! (one line of binding contexts per run) as they grow, replays them into the
//! hooks' view of the objects (name → counter), and notes every breach of
//! exactly-once as it goes: an object that appears twice, an event after its
//! Deleted, a Modified or Deleted for an object the hooks never had, an update
//! counter that does not grow.

use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

/// What the hooks saw of one object.
#[derive(Default, Debug)]
pub struct Seen {
    /// Added events plus Synchronization entries: must end at exactly 1.
    pub appearances: u32,
    /// Deleted events: 0 while alive, exactly 1 after a delete.
    pub deletes: u32,
    /// Counters from Added/Synchronization/Modified, in arrival order.
    pub counters: Vec<u64>,
}

/// One kind's ledger file and its replay.
pub struct KindLedger {
    path: PathBuf,
    offset: u64,
    partial: Vec<u8>,
    pub objects: BTreeMap<String, Seen>,
    /// The hooks' current view: live name → last counter.
    pub view: BTreeMap<String, u64>,
    pub problems: Vec<String>,
    pub synchronizations: usize,
    pub contexts: usize,
    pub runs: usize,
}

impl KindLedger {
    pub fn new(path: PathBuf) -> KindLedger {
        KindLedger {
            path,
            offset: 0,
            partial: Vec::new(),
            objects: BTreeMap::new(),
            view: BTreeMap::new(),
            problems: Vec::new(),
            synchronizations: 0,
            contexts: 0,
            runs: 0,
        }
    }

    /// Reads what was appended since the last call; replays complete lines only.
    pub fn poll(&mut self) {
        let Ok(mut file) = std::fs::File::open(&self.path) else {
            return;
        };
        if file.seek(SeekFrom::Start(self.offset)).is_err() {
            return;
        }
        let mut fresh = Vec::new();
        let Ok(n) = file.read_to_end(&mut fresh) else {
            return;
        };
        self.offset += n as u64;
        self.partial.extend_from_slice(&fresh);
        let Some(end) = self.partial.iter().rposition(|b| *b == b'\n') else {
            return;
        };
        let complete: Vec<u8> = self.partial.drain(..=end).collect();
        for line in complete.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            self.replay_run(line);
        }
    }

    fn replay_run(&mut self, line: &[u8]) {
        self.runs += 1;
        match serde_json::from_slice::<Value>(line) {
            Ok(Value::Array(contexts)) => contexts.iter().for_each(|c| self.replay(c)),
            _ => self.problem(format!(
                "a run's contexts are not a JSON array: {}",
                String::from_utf8_lossy(line)
            )),
        }
    }

    fn replay(&mut self, ctx: &Value) {
        self.contexts += 1;
        match (ctx["type"].as_str(), ctx["watchEvent"].as_str()) {
            (Some("Synchronization"), _) => {
                self.synchronizations += 1;
                for item in ctx["objects"].as_array().into_iter().flatten() {
                    self.appear(&item["filterResult"]);
                }
            }
            (Some("Event"), Some("Added")) => self.appear(&ctx["filterResult"]),
            (Some("Event"), Some("Modified")) => self.modify(&ctx["filterResult"]),
            (Some("Event"), Some("Deleted")) => self.delete(&ctx["filterResult"]),
            _ => self.problem(format!("unexpected context {ctx}")),
        }
    }

    fn appear(&mut self, result: &Value) {
        let Some((name, counter)) = self.parse(result) else {
            return;
        };
        let seen = self.objects.entry(name.clone()).or_default();
        seen.appearances += 1;
        let (twice, after_delete) = (seen.appearances > 1, seen.deletes > 0);
        if twice || after_delete {
            self.problem(format!(
                "{name} appeared again (twice: {twice}, after its Deleted: {after_delete})"
            ));
        }
        self.record_counter(&name, counter);
    }

    fn modify(&mut self, result: &Value) {
        let Some((name, counter)) = self.parse(result) else {
            return;
        };
        if !self.view.contains_key(&name) {
            self.problem(format!(
                "Modified {name} (counter {counter}) which the hooks do not have"
            ));
        }
        self.record_counter(&name, counter);
    }

    fn delete(&mut self, result: &Value) {
        let Some((name, _)) = self.parse(result) else {
            return;
        };
        let seen = self.objects.entry(name.clone()).or_default();
        seen.deletes += 1;
        if seen.deletes > 1 {
            self.problem(format!("{name} Deleted twice"));
        }
        if self.view.remove(&name).is_none() {
            self.problem(format!("Deleted {name} which the hooks do not have"));
        }
    }

    /// Counters of one object must grow strictly: no update twice or out of order.
    fn record_counter(&mut self, name: &str, counter: u64) {
        let seen = self.objects.entry(name.to_string()).or_default();
        let last = seen.counters.last().copied();
        seen.counters.push(counter);
        self.view.insert(name.to_string(), counter);
        if last.is_some_and(|l| counter <= l) {
            self.problem(format!(
                "{name}: counter {counter} after {last:?} (twice or out of order)"
            ));
        }
    }

    fn parse(&mut self, result: &Value) -> Option<(String, u64)> {
        let name = result["n"].as_str().map(str::to_string);
        let counter = result["c"].as_str().and_then(|c| c.parse().ok());
        match (name, counter) {
            (Some(n), Some(c)) => Some((n, c)),
            _ => {
                self.problem(format!("filterResult without name and counter: {result}"));
                None
            }
        }
    }

    fn problem(&mut self, text: String) {
        self.problems.push(text);
    }
}

/// The replay itself, on hand-written ledgers: it must flag each breach.
#[cfg(test)]
mod replay {
    use super::KindLedger;
    use crate::common::TempDir;

    fn replay(lines: &[&str]) -> KindLedger {
        let dir = TempDir::new("ledger");
        let path = dir.0.join("x.ledger");
        std::fs::write(&path, lines.join("\n") + "\n").expect("write ledger");
        let mut ledger = KindLedger::new(path);
        ledger.poll();
        ledger
    }

    fn event(kind: &str, name: &str, counter: u64) -> String {
        format!(
            r#"{{"binding":"cms","type":"Event","watchEvent":"{kind}","filterResult":{{"n":"{name}","c":"{counter}"}}}}"#
        )
    }

    #[test]
    fn a_clean_ledger_replays_to_its_view() {
        let sync = r#"[{"binding":"cms","type":"Synchronization","objects":[{"filterResult":{"n":"a","c":"0"}}]}]"#;
        let events = format!(
            "[{},{},{}]",
            event("Added", "b", 0),
            event("Modified", "a", 3),
            event("Deleted", "b", 0)
        );
        let l = replay(&[sync, &events]);
        assert!(l.problems.is_empty(), "{:?}", l.problems);
        assert_eq!(
            l.view.into_iter().collect::<Vec<_>>(),
            [("a".to_string(), 3)]
        );
        assert_eq!((l.runs, l.contexts, l.synchronizations), (2, 4, 1));
    }

    #[test]
    fn each_breach_of_exactly_once_is_flagged() {
        let cases = [
            (
                vec![event("Added", "a", 0), event("Added", "a", 1)],
                "appeared again",
            ),
            (
                vec![event("Added", "a", 2), event("Modified", "a", 2)],
                "twice or out of order",
            ),
            (
                vec![event("Added", "a", 2), event("Modified", "a", 1)],
                "twice or out of order",
            ),
            (
                vec![event("Modified", "a", 1)],
                "which the hooks do not have",
            ),
            (
                vec![event("Deleted", "a", 0)],
                "which the hooks do not have",
            ),
            (
                vec![
                    event("Added", "a", 0),
                    event("Deleted", "a", 0),
                    event("Deleted", "a", 0),
                ],
                "Deleted twice",
            ),
            (
                vec![
                    event("Added", "a", 0),
                    event("Deleted", "a", 0),
                    event("Added", "a", 0),
                ],
                "after its Deleted: true",
            ),
        ];
        for (contexts, want) in cases {
            let line = format!("[{}]", contexts.join(","));
            let l = replay(&[&line]);
            assert!(
                l.problems.iter().any(|p| p.contains(want)),
                "{line}: want {want:?}, got {:?}",
                l.problems
            );
        }
    }

    #[test]
    fn a_partial_last_line_waits_for_its_end() {
        let dir = TempDir::new("ledger-partial");
        let path = dir.0.join("x.ledger");
        let line = format!("[{}]", event("Added", "a", 0));
        std::fs::write(&path, &line[..10]).expect("write");
        let mut l = KindLedger::new(path.clone());
        l.poll();
        assert_eq!(l.runs, 0);
        std::fs::write(&path, format!("{line}\n")).expect("write");
        l.poll();
        assert_eq!((l.runs, l.problems.len(), l.view.len()), (1, 0, 1));
    }
}
