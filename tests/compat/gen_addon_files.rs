//! A generated case (`gen_addon.rs`) written out: its module tree as files for one
//! operator's namespace, its description (printed with every failure, with the seed
//! and the parts dropped, `SEED=… DROP=…` replays it), and the parts it can lose
//! ([`Case::without`], the minimiser's moves).

use crate::addon_compare::{patch, rec};
use crate::gen_addon::{Case, GlobalHook, ModHook, Script};
use std::fmt::Write as _;

/// One part of a case that can be dropped: `m<i>` a module (with its ConfigMap
/// entries), `h<i>.<j>` a module's hook, `g<i>` a global hook, `s<i>` a step, `c<i>`
/// an entry of the starting ConfigMap.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Part {
    Module(usize),
    Hook(usize, usize),
    Global(usize),
    Step(usize),
    Start(usize),
}

impl Part {
    pub(crate) fn parse(s: &str) -> Option<Part> {
        let (kind, rest) = s.split_at(1);
        let n = |t: &str| t.parse::<usize>().ok();
        Some(match kind {
            "m" => Part::Module(n(rest)?),
            "h" => {
                let (i, j) = rest.split_once('.')?;
                Part::Hook(n(i)?, n(j)?)
            }
            "g" => Part::Global(n(rest)?),
            "s" => Part::Step(n(rest)?),
            "c" => Part::Start(n(rest)?),
            _ => return None,
        })
    }
}

impl std::fmt::Display for Part {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            Part::Module(i) => write!(f, "m{i}"),
            Part::Hook(i, j) => write!(f, "h{i}.{j}"),
            Part::Global(i) => write!(f, "g{i}"),
            Part::Step(i) => write!(f, "s{i}"),
            Part::Start(i) => write!(f, "c{i}"),
        }
    }
}

/// A hook that patches `path` with the watched object's `k` from its context.
fn from_watched(path: &str) -> String {
    format!(
        "k=$(tr -d ' \\n' < \"$BINDING_CONTEXT_PATH\" | grep -o '\"k\":\"[^\"]*\"' | tail -n1 | cut -d'\"' -f4)\n\
         if [ -n \"$k\" ]; then echo '[{{\"op\":\"add\",\"path\":\"{path}\",\"value\":\"'\"$k\"'\"}}]' > \"$VALUES_JSON_PATCH_PATH\"; fi"
    )
}

/// A `kubernetes` binding on the ConfigMap `name` of `ns`.
fn kube_config(ns: &str, name: &str) -> String {
    format!(
        "configVersion: v1\nkubernetes:\n- name: watched\n  kind: ConfigMap\n  namespace:\n    \
         nameSelector:\n      matchNames: [{ns}]\n  nameSelector:\n    matchNames: [{name}]\n  \
         jqFilter: .data"
    )
}

impl Case {
    /// The module tree for an operator watching `ns`.
    pub(crate) fn files(&self, ns: &str) -> Vec<(String, String)> {
        let mut files = vec![(
            "global-hooks/after-all.sh".to_string(),
            rec("g-after-all", "configVersion: v1\nafterAll: 1", ""),
        )];
        for h in &self.global_hooks {
            let (name, config, body) = match h {
                GlobalHook::Startup => (
                    "startup",
                    "configVersion: v1\nonStartup: 1".to_string(),
                    patch("/global/fromStartup", "s"),
                ),
                GlobalHook::BeforeAll => (
                    "before-all",
                    "configVersion: v1\nbeforeAll: 1".into(),
                    patch("/global/fromBeforeAll", "ba"),
                ),
                GlobalHook::Kube => (
                    "kube",
                    kube_config(ns, "watched-global"),
                    from_watched("/global/watched"),
                ),
            };
            files.push((
                format!("global-hooks/{name}.sh"),
                rec(&format!("g-{name}"), &config, &body),
            ));
        }
        if self.global_schema {
            files.push((
                "global-hooks/openapi/config-values.yaml".into(),
                "type: object\nproperties:\n  region: {type: string, default: eu}\n  \
                 replicas: {type: integer, default: 1}\n"
                    .into(),
            ));
            files.push((
                "global-hooks/openapi/values.yaml".into(),
                "x-extend:\n  schema: config-values.yaml\ntype: object\nproperties:\n  \
                 owner: {type: string}\n  fromStartup: {type: string}\n  \
                 fromBeforeAll: {type: string}\n  watched: {type: string}\n"
                    .into(),
            ));
        }
        let mut common = "global:\n  owner: gen\n".to_string();
        for (i, m) in self.modules.iter().enumerate() {
            let dir = format!("modules/{:03}-{}", (i + 1) * 10, m.name);
            let mut own = String::new();
            if let Some(on) = m.default_on {
                writeln!(common, "{}Enabled: {on}", m.key).expect("write");
            }
            if m.common_values {
                writeln!(common, "{}:\n  color: green", m.key).expect("write");
            }
            if m.own_values {
                writeln!(own, "{}:\n  size: 2", m.key).expect("write");
            }
            if !own.is_empty() {
                files.push((format!("{dir}/values.yaml"), own));
            }
            if m.chart {
                files.push((
                    format!("{dir}/Chart.yaml"),
                    format!("apiVersion: v2\nname: {}\nversion: 0.1.0\n", m.name),
                ));
                let mut t = format!(
                    "{{{{- $m := .Values.{} | default dict }}}}\napiVersion: v1\nkind: ConfigMap\n\
                     metadata:\n  name: {}-values\ndata:\n  color: {{{{ $m.color | quote }}}}\n  \
                     size: {{{{ $m.size | quote }}}}\n  region: {{{{ .Values.global.region | quote }}}}\n",
                    m.key, m.name
                );
                for r in &m.reads {
                    let (name, expr) = match r.strip_prefix("global.") {
                        Some(g) => (format!("g-{g}"), format!(".Values.global.{g}")),
                        None => (r.to_string(), format!("$m.{r}")),
                    };
                    writeln!(t, "  {name}: {{{{ {expr} | quote }}}}").expect("write");
                }
                files.push((format!("{dir}/templates/cm.yaml"), t));
            }
            if m.schema {
                files.push((
                    format!("{dir}/openapi/config-values.yaml"),
                    "type: object\nproperties:\n  color: {type: string, default: blue}\n  \
                     size: {type: integer, default: 3}\n  param1: {type: string}\n  \
                     param2: {type: string}\n"
                        .into(),
                ));
                files.push((
                    format!("{dir}/openapi/values.yaml"),
                    "x-extend:\n  schema: config-values.yaml\ntype: object\nproperties:\n  \
                     fromHook: {type: string}\n  kube: {type: string}\n"
                        .into(),
                ));
            }
            if let Some(script) = m.script {
                let needle = match script {
                    Script::Param2 => "\"param2\":\"stopMePlease\"",
                    Script::GlobalHalt => "\"region\":\"halt\"",
                };
                files.push((
                    format!("{dir}/enabled"),
                    format!(
                        "#!/bin/sh\nprintf '{}-enabled {{\"ctx\":null,\"values\":%s,\"config\":%s}}\\n' \
                         \"$(tr -d '\\n' < \"$VALUES_PATH\")\" \"$(tr -d '\\n' < \"$CONFIG_VALUES_PATH\")\" >> \"$OUT_DIR/runs.log\"\n\
                         if tr -d ' \\n' < \"$VALUES_PATH\" | grep -q '{needle}'; then echo false; else echo true; fi > \"$MODULE_ENABLED_RESULT\"\n",
                        m.name
                    ),
                ));
            }
            for h in &m.hooks {
                let (name, config, body) = match h {
                    ModHook::BeforeHelm => (
                        "before-helm",
                        "configVersion: v1\nbeforeHelm: 1".to_string(),
                        patch(&format!("/{}/fromHook", m.key), "b"),
                    ),
                    ModHook::AfterHelm => (
                        "after-helm",
                        "configVersion: v1\nafterHelm: 1".into(),
                        String::new(),
                    ),
                    ModHook::AfterDelete => (
                        "after-delete",
                        "configVersion: v1\nafterDeleteHelm: 1".into(),
                        String::new(),
                    ),
                    ModHook::Kube => (
                        "kube",
                        kube_config(ns, "watched-modules"),
                        from_watched(&format!("/{}/kube", m.key)),
                    ),
                };
                files.push((
                    format!("{dir}/hooks/{name}.sh"),
                    rec(&format!("{}-{name}", m.name), &config, &body),
                ));
            }
        }
        files.push(("modules/values.yaml".into(), common));
        files
    }

    /// What the case is, one part a line, each with the name [`Part`] drops it by.
    pub(crate) fn describe(&self) -> String {
        let mut s = format!(
            "seed {}; global schema: {}\n",
            self.seed, self.global_schema
        );
        for (i, h) in self.global_hooks.iter().enumerate() {
            writeln!(s, "  g{i}: global hook {h:?}").expect("write");
        }
        for (i, m) in self.modules.iter().enumerate() {
            writeln!(
                s,
                "  m{i}: module {} (chart {}, enabled script {:?}, {}Enabled in modules/values.yaml {:?}, \
                 values in modules/values.yaml {}, own values.yaml {}, schema {}, template also reads {:?})",
                m.name, m.chart, m.script, m.key, m.default_on, m.common_values, m.own_values, m.schema, m.reads
            )
            .expect("write");
            for (j, h) in m.hooks.iter().enumerate() {
                writeln!(s, "    h{i}.{j}: {h:?}").expect("write");
            }
        }
        for (i, (_, k, v)) in self.start.iter().enumerate() {
            writeln!(s, "  c{i}: ConfigMap starts with {k}: {v:?}").expect("write");
        }
        for (i, st) in self.steps.iter().enumerate() {
            let data: Vec<String> = st
                .data
                .iter()
                .map(|(_, k, v)| format!("{k}: {v:?}"))
                .collect();
            writeln!(s, "  s{i}: {} {data:?} (compared: {:?})", st.what, st.check).expect("write");
        }
        s
    }

    /// The case without `part`, or None when there is no such part.
    pub(crate) fn without(&self, part: &Part) -> Option<Case> {
        let mut c = self.clone();
        match *part {
            Part::Module(i) => {
                let name = c.modules.get(i)?.name;
                c.modules.remove(i);
                c.start.retain(|e| e.0 != Some(name));
                for st in &mut c.steps {
                    st.data.retain(|e| e.0 != Some(name));
                }
                c.steps
                    .retain(|st| !st.data.is_empty() || st.watched.is_some());
                if c.modules.is_empty() {
                    return None;
                }
            }
            Part::Hook(i, j) => {
                let m = c.modules.get_mut(i)?;
                (j < m.hooks.len()).then(|| m.hooks.remove(j))?;
            }
            Part::Global(i) => {
                (i < c.global_hooks.len()).then(|| c.global_hooks.remove(i))?;
            }
            Part::Step(i) => {
                (i < c.steps.len()).then(|| c.steps.remove(i))?;
            }
            Part::Start(i) => {
                (i < c.start.len()).then(|| c.start.remove(i))?;
            }
        }
        Some(c)
    }
}
