//! The generator of addon-operator cases for the differential corpus
//! (`gen_addon_run.rs`): from a seed (splitmix64, deterministic) a module tree —
//! modules with and without charts, `enabled` scripts (one reads the module's own
//! `param2`, as the docs' `stopMePlease` example; one reads `global.region`),
//! values.yaml at both levels, OpenAPI config-values/values schemas with defaults,
//! global and module hooks that patch values the templates read or do not read,
//! `kubernetes` bindings — and the ConfigMap it starts with and the steps it goes
//! through (module and global edits, sections of unknown modules, `<module>Enabled`
//! flips with a section edit, enable/disable/re-enable, a watched object changing).
//! `<module>Maintenance` is not generated: v1.5.0 lacks it and refuses the key (it
//! reads it as the section of a module `<module>-maintenance`, which must be a map).
//! `Case::without` (gen_addon_files.rs) drops one part, which the minimiser uses.

use std::collections::BTreeMap;

/// splitmix64: small, seeded, the same on every machine.
pub(crate) struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
}

/// What a module's `enabled` script reads.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Script {
    /// false when the module's own `param2` is `stopMePlease` (the docs' example).
    Param2,
    /// false when `global.region` is `halt`.
    GlobalHalt,
}

/// A module hook: beforeHelm patches `/<key>/fromHook`, kubernetes patches
/// `/<key>/kube` with the watched object's `k`; the others only record.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum ModHook {
    BeforeHelm,
    AfterHelm,
    AfterDelete,
    Kube,
}

/// A global hook besides the recording afterAll every case has: onStartup patches
/// `global.fromStartup`, beforeAll `global.fromBeforeAll`, kubernetes
/// `global.watched` (the watched object's `k`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum GlobalHook {
    Startup,
    BeforeAll,
    Kube,
}

#[derive(Clone, Debug)]
pub(crate) struct Module {
    pub name: &'static str,
    pub key: &'static str,
    pub chart: bool,
    pub script: Option<Script>,
    /// `<key>Enabled` in modules/values.yaml (never in the module's own values.yaml,
    /// which v1.5.0 ignores: `addon::ALLOWED`).
    pub default_on: Option<bool>,
    /// A `<key>` section in modules/values.yaml (color) / the module's own (size).
    pub common_values: bool,
    pub own_values: bool,
    pub schema: bool,
    pub hooks: Vec<ModHook>,
    /// The values its template reads beyond color, size and global.region.
    pub reads: Vec<&'static str>,
}

/// How much a step is compared: everything; only releases and the ConfigMap (the
/// step after one an `enabled` script reacts to: v1.5.0 follows one edit late,
/// `addon::ALLOWED` "enabled scripts' runs"); nothing (that step itself).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Check {
    All,
    Outcome,
    Nothing,
}

/// A ConfigMap entry: the module it belongs to (None: global or unknown), key, value
/// (None: removed).
pub(crate) type Entry = (Option<&'static str>, String, Option<String>);

#[derive(Clone, Debug)]
pub(crate) struct Step {
    pub what: String,
    pub data: Vec<Entry>,
    /// The watched ConfigMap changed by this step (`watched-global`, which the global
    /// hook watches, or `watched-modules`, which module hooks watch: one object for
    /// both would race, as flant's informers deliver one event to each hook in no
    /// set order) and its `k` after it.
    pub watched: Option<(&'static str, String)>,
    pub check: Check,
}

#[derive(Clone, Debug)]
pub(crate) struct Case {
    pub seed: u64,
    pub global_schema: bool,
    pub global_hooks: Vec<GlobalHook>,
    pub modules: Vec<Module>,
    pub start: Vec<Entry>,
    pub steps: Vec<Step>,
}

const NAMES: [(&str, &str); 5] = [
    ("alpha", "alpha"),
    ("beta", "beta"),
    ("gamma", "gamma"),
    ("delta-app", "deltaApp"),
    ("echo", "echo"),
];
const READABLE: [&str; 5] = [
    "fromHook",
    "kube",
    "global.fromStartup",
    "global.fromBeforeAll",
    "global.watched",
];

/// A section's YAML from its fields.
fn section(fields: &BTreeMap<&'static str, String>) -> String {
    fields.iter().map(|(k, v)| format!("{k}: {v}\n")).collect()
}

impl Case {
    /// The case of `seed`.
    pub(crate) fn generate(seed: u64) -> Case {
        let mut rng = Rng(seed);
        let mut names = NAMES.to_vec();
        let mut modules = Vec::new();
        for _ in 0..1 + rng.below(4) {
            let (name, key) = names.remove(rng.below(names.len()));
            let chart = rng.chance(80);
            let mut hooks: Vec<ModHook> = [
                ModHook::BeforeHelm,
                ModHook::AfterHelm,
                ModHook::AfterDelete,
                ModHook::Kube,
            ]
            .into_iter()
            .filter(|_| rng.chance(45))
            .collect();
            if !chart && hooks.is_empty() {
                hooks.push(ModHook::AfterHelm);
            }
            let schema = rng.chance(50);
            let common_values = rng.chance(50);
            let own_values = rng.chance(50) || !(schema || common_values);
            modules.push(Module {
                name,
                key,
                chart,
                script: [None, None, Some(Script::Param2), Some(Script::GlobalHalt)][rng.below(4)],
                // (The second draw once chose the module's own values.yaml; it stays
                // so that seeds keep their cases.)
                default_on: match (rng.below(20), rng.chance(40)) {
                    (0, _) => None,
                    (1 | 2, _) => Some(false),
                    _ => Some(true),
                },
                common_values,
                own_values,
                schema,
                hooks,
                reads: READABLE.into_iter().filter(|_| rng.chance(40)).collect(),
            });
        }
        let global_hooks: Vec<GlobalHook> =
            [GlobalHook::Startup, GlobalHook::BeforeAll, GlobalHook::Kube]
                .into_iter()
                .filter(|_| rng.chance(50))
                .collect();
        let mut g = Gen {
            rng,
            fields: BTreeMap::new(),
            global: BTreeMap::new(),
            on: modules.iter().map(|m| m.default_on == Some(true)).collect(),
            watched: 0,
            kube: [
                global_hooks.contains(&GlobalHook::Kube),
                modules.iter().any(|m| m.hooks.contains(&ModHook::Kube)),
            ],
        };
        let mut start = Vec::new();
        if g.rng.chance(60) {
            g.global
                .insert("region", g.rng.pick(&["eu", "us", "ap"]).to_string());
            start.push((None, "global".to_string(), Some(section(&g.global))));
        }
        for m in &modules {
            if g.rng.chance(50) {
                let f = g.fields.entry(m.key).or_default();
                f.insert("size", (4 + g.rng.below(5)).to_string());
                start.push((Some(m.name), m.key.to_string(), Some(section(f))));
            }
        }
        let mut steps = Vec::new();
        if g.rng.chance(12) {
            start.push((None, "ghost".into(), Some("a: 1\n".into())));
        }
        for _ in 0..3 + g.rng.below(4) {
            g.step(&modules, &mut steps);
        }
        Case {
            seed,
            global_schema: g.rng.chance(50),
            global_hooks,
            modules,
            start,
            steps,
        }
    }
}

/// The state the steps are generated from.
struct Gen {
    rng: Rng,
    fields: BTreeMap<&'static str, BTreeMap<&'static str, String>>,
    global: BTreeMap<&'static str, String>,
    on: Vec<bool>,
    watched: usize,
    /// Whether a global / a module hook watches its object (else no steps change it).
    kube: [bool; 2],
}

impl Gen {
    /// What the module's `enabled` script answers now.
    fn script_allows(&self, m: &Module) -> bool {
        match m.script {
            None => true,
            Some(Script::Param2) => {
                self.fields
                    .get(m.key)
                    .and_then(|f| f.get("param2"))
                    .map(String::as_str)
                    != Some("stopMePlease")
            }
            Some(Script::GlobalHalt) => {
                self.global.get("region").map(String::as_str) != Some("halt")
            }
        }
    }

    /// Appends one step (and, when an `enabled` script's input changed, the edit
    /// after which v1.5.0 has caught up).
    fn step(&mut self, modules: &[Module], steps: &mut Vec<Step>) {
        let i = self.rng.below(modules.len());
        let m = &modules[i];
        let mut step = Step {
            what: String::new(),
            data: Vec::new(),
            watched: None,
            check: Check::All,
        };
        let mut follow = None;
        let mut kind = self.rng.below(10);
        if self.kube == [false, false] && (7..=8).contains(&kind) {
            kind = 0;
        }
        match kind {
            0..=2 => {
                let (field, value) = if m.script == Some(Script::Param2) && self.rng.chance(60) {
                    let stop = self.fields.get(m.key).and_then(|f| f.get("param2"))
                        != Some(&"stopMePlease".to_string());
                    step.check = Check::Nothing;
                    follow = Some(i);
                    (
                        "param2",
                        if stop { "stopMePlease" } else { "go" }.to_string(),
                    )
                } else {
                    match self.rng.below(3) {
                        0 => (
                            "color",
                            self.rng.pick(&["red", "green", "white"]).to_string(),
                        ),
                        1 => ("size", (1 + self.rng.below(9)).to_string()),
                        _ => ("param1", format!("p{}", self.rng.below(100))),
                    }
                };
                let f = self.fields.entry(m.key).or_default();
                f.insert(field, value.clone());
                step.what = format!("{}.{field} = {value}", m.key);
                step.data
                    .push((Some(m.name), m.key.into(), Some(section(f))));
            }
            3 | 4 => {
                let halts = modules.iter().any(|m| m.script == Some(Script::GlobalHalt));
                let was = self.global.get("region").cloned();
                if self.rng.chance(50) {
                    let r = if halts && self.rng.chance(40) {
                        "halt"
                    } else {
                        self.rng.pick(&["eu", "us", "ap"])
                    };
                    self.global.insert("region", r.into());
                } else {
                    self.global
                        .insert("replicas", (1 + self.rng.below(4)).to_string());
                }
                let now = self.global.get("region").cloned();
                if halts && (was.as_deref() == Some("halt")) != (now.as_deref() == Some("halt")) {
                    step.check = Check::Nothing;
                    follow = Some(usize::MAX);
                }
                step.what = format!("global = {:?}", self.global);
                step.data
                    .push((None, "global".into(), Some(section(&self.global))));
            }
            5 | 6 => {
                // A flip that leaves the module disabled by its script is compared by
                // its outcome only (`addon::ALLOWED`, "<module>Enabled without a
                // change of the enabled set").
                if !self.script_allows(m) {
                    step.check = Check::Outcome;
                }
                self.on[i] = !self.on[i];
                // The section must change too: v1.5.0 ignores a flip alone
                // (`addon::ALLOWED`, "<module>Enabled alone").
                let f = self.fields.entry(m.key).or_default();
                let mut size = (1 + self.rng.below(9)).to_string();
                while f.get("size") == Some(&size) {
                    size = (1 + self.rng.below(9)).to_string();
                }
                f.insert("size", size);
                step.what = format!("{}Enabled = {} with its section", m.key, self.on[i]);
                step.data.push((
                    Some(m.name),
                    format!("{}Enabled", m.key),
                    Some(self.on[i].to_string()),
                ));
                step.data
                    .push((Some(m.name), m.key.into(), Some(section(f))));
            }
            7 | 8 => {
                self.watched += 1;
                let object = match self.kube {
                    [true, true] => ["watched-global", "watched-modules"][self.rng.below(2)],
                    [true, false] => "watched-global",
                    _ => "watched-modules",
                };
                step.what = format!("{object}'s k = w{}", self.watched);
                step.watched = Some((object, format!("w{}", self.watched)));
            }
            _ => {
                step.what = "a section of an unknown module".into();
                let v = format!("a: {}\n", self.rng.below(100));
                step.data.push((None, "ghost".into(), Some(v)));
            }
        }
        steps.push(step);
        if let Some(i) = follow {
            let (what, entry) = if i == usize::MAX {
                let r = (1 + self.rng.below(4)).to_string();
                self.global.insert("replicas", r);
                (
                    "global",
                    (None, "global".into(), Some(section(&self.global))),
                )
            } else {
                let m = &modules[i];
                let f = self.fields.entry(m.key).or_default();
                f.insert("param1", format!("p{}", self.rng.below(100)));
                (m.key, (Some(m.name), m.key.into(), Some(section(f))))
            };
            steps.push(Step {
                what: format!("{what} touched (v1.5.0 catches up)"),
                data: vec![entry],
                watched: None,
                check: Check::Outcome,
            });
        }
    }
}

#[test]
fn the_generator_is_deterministic_and_writes_valid_yaml() {
    for seed in 0..200 {
        let case = Case::generate(seed);
        assert_eq!(
            case.describe(),
            Case::generate(seed).describe(),
            "seed {seed}"
        );
        assert!(
            !case.modules.is_empty() && case.steps.len() >= 3,
            "seed {seed}"
        );
        for (path, text) in case
            .files("ns")
            .iter()
            .filter(|(p, _)| p.ends_with(".yaml") && !p.contains("/templates/"))
        {
            serde_yaml::from_str::<serde_json::Value>(text)
                .unwrap_or_else(|e| panic!("seed {seed} {path}: {e}\n{text}"));
        }
    }
}

#[test]
fn every_part_of_a_case_can_be_dropped_and_named_for_a_replay() {
    use crate::gen_addon_files::Part;
    let case = Case::generate(1011);
    let mut parts: Vec<Part> = (0..case.modules.len()).map(Part::Module).collect();
    parts.extend((0..case.global_hooks.len()).map(Part::Global));
    parts.extend((0..case.modules[0].hooks.len()).map(|j| Part::Hook(0, j)));
    parts.extend((0..case.start.len()).map(Part::Start));
    parts.extend((0..case.steps.len()).map(Part::Step));
    for p in &parts {
        assert_eq!(Part::parse(&p.to_string()).as_ref(), Some(p));
        let smaller = case.without(p).unwrap_or_else(|| panic!("{p}"));
        assert_ne!(smaller.describe(), case.describe(), "{p}");
    }
    // A module goes with its ConfigMap entries, and steps left empty go too.
    let name = case.modules[0].name;
    let without = case.without(&Part::Module(0)).expect("module");
    assert!(without.modules.iter().all(|m| m.name != name));
    assert!(
        without
            .start
            .iter()
            .chain(without.steps.iter().flat_map(|s| &s.data))
            .all(|e| e.0 != Some(name))
    );
    assert!(
        without
            .steps
            .iter()
            .all(|s| !s.data.is_empty() || s.watched.is_some())
    );
    assert!(case.without(&Part::Step(case.steps.len())).is_none());
}
