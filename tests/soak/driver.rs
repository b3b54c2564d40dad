//! The driver's side of the ledger: makes the object changes (creates of uniquely
//! named objects, updates that bump a counter annotation, deletes) straight in
//! kube-sim's store, and keeps its own record of every change. It deletes only
//! objects the hooks have already seen, so every create and every delete must
//! reach the hooks exactly once, even across 410 relists; and it keeps each kind's
//! population near a target so the operator's memory has a steady state.

use crate::hooks::{COUNTER, KINDS, NAMESPACE};
use crate::ledger::KindLedger;
use crate::settings::Rng;
use kube_sim::Sim;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The driver's record of one kind.
#[derive(Default)]
pub struct Record {
    /// Live objects: name → last counter written.
    pub alive: BTreeMap<String, u64>,
    /// Every object ever created: name → (last counter, deleted).
    pub history: BTreeMap<String, (u64, bool)>,
    pub creates: u64,
    pub updates: u64,
    pub deletes: u64,
}

pub struct Driver<'a> {
    sim: &'a Sim,
    rng: Rng,
    next_id: u64,
    pub records: [Record; 2],
}

/// Live objects each kind hovers around.
const TARGET: [usize; 2] = [200, 50];

impl<'a> Driver<'a> {
    pub fn new(sim: &'a Sim, rng: Rng) -> Driver<'a> {
        Driver {
            sim,
            rng,
            next_id: 0,
            records: Default::default(),
        }
    }

    /// Creates `n` objects of kind index `k` (before the operator starts: the
    /// Synchronization's content).
    pub fn create_many(&mut self, k: usize, n: usize) {
        for _ in 0..n {
            self.create(k);
        }
    }

    /// Makes one change: ConfigMaps 4 times in 5, else a Secret.
    pub fn change(&mut self, ledgers: &[KindLedger; 2]) {
        let k = if self.rng.chance(80) { 0 } else { 1 };
        let pop = self.records[k].alive.len();
        let deletable = self.deletable(k, &ledgers[k]);
        let roll = self.rng.below(100);
        if pop < TARGET[k] * 9 / 10 || (roll < 25 && pop < TARGET[k] * 11 / 10) {
            self.create(k);
        } else if let Some(name) = deletable.filter(|_| roll < 50 || pop > TARGET[k] * 11 / 10) {
            self.delete(k, &name);
        } else {
            self.update_random(k);
        }
    }

    /// A live object the hooks have seen, picked at random.
    fn deletable(&mut self, k: usize, ledger: &KindLedger) -> Option<String> {
        let seen: Vec<&String> = self.records[k]
            .alive
            .keys()
            .filter(|n| ledger.objects.get(*n).is_some_and(|s| s.appearances > 0))
            .collect();
        if seen.is_empty() {
            return None;
        }
        let i = self.rng.below(seen.len() as u64) as usize;
        Some(seen[i].clone())
    }

    /// Creates an object named `name` (or a fresh unique name) with counter 0.
    pub fn create_named(&mut self, k: usize, name: &str) {
        let obj = object(KINDS[k].0, name);
        if let Err(e) = self.sim.create(obj) {
            panic!("create {} {name}: {e}", KINDS[k].0);
        }
        let record = &mut self.records[k];
        record.alive.insert(name.to_string(), 0);
        record.history.insert(name.to_string(), (0, false));
        record.creates += 1;
    }

    fn create(&mut self, k: usize) {
        self.next_id += 1;
        let name = format!("o{:07}", self.next_id);
        self.create_named(k, &name);
    }

    fn update_random(&mut self, k: usize) {
        let alive = &self.records[k].alive;
        if alive.is_empty() {
            return self.create(k);
        }
        let i = self.rng.below(alive.len() as u64) as usize;
        let Some(name) = alive.keys().nth(i).cloned() else {
            return;
        };
        let kind = KINDS[k].0;
        let Some(mut obj) = self.sim.get("v1", kind, NAMESPACE, &name) else {
            panic!("{kind} {name} is alive in the record but not in kube-sim");
        };
        let counter = self.records[k].alive[&name] + 1;
        obj["metadata"]["annotations"][COUNTER] = json!(counter.to_string());
        if let Err(e) = self.sim.update(obj) {
            panic!("update {kind} {name}: {e}");
        }
        let record = &mut self.records[k];
        record.alive.insert(name.clone(), counter);
        record.history.insert(name, (counter, false));
        record.updates += 1;
    }

    fn delete(&mut self, k: usize, name: &str) {
        let kind = KINDS[k].0;
        if let Err(e) = self.sim.delete("v1", kind, NAMESPACE, name) {
            panic!("delete {kind} {name}: {e}");
        }
        let record = &mut self.records[k];
        let counter = record.alive.remove(name).unwrap_or(0);
        record.history.insert(name.to_string(), (counter, true));
        record.deletes += 1;
    }

    /// Changes made so far.
    pub fn total(&self) -> u64 {
        self.records
            .iter()
            .map(|r| r.creates + r.updates + r.deletes)
            .sum()
    }
}

fn object(kind: &str, name: &str) -> Value {
    let mut obj = json!({
        "apiVersion": "v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": NAMESPACE, "annotations": {COUNTER: "0"}},
    });
    if kind == "Secret" {
        obj["type"] = json!("Opaque");
        obj["data"] = json!({"k": "dg=="});
    } else {
        obj["data"] = json!({"k": "v"});
    }
    obj
}

/// kube-sim's objects of kind index `k`: name → counter annotation.
pub fn server_state(sim: &Sim, k: usize) -> BTreeMap<String, u64> {
    sim.list("v1", KINDS[k].0, NAMESPACE)
        .iter()
        .filter_map(|o| {
            let name = o["metadata"]["name"].as_str()?.to_string();
            let counter = o["metadata"]["annotations"][COUNTER]
                .as_str()?
                .parse()
                .ok()?;
            Some((name, counter))
        })
        .collect()
}
