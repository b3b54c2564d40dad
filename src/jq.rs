//! jq filters through jaq: compiled once (when hooks load), run many times (on every
//! watch event, by the object patcher's JQPatch, by the `jq` subcommand).
//!
//! A compiled [`JqFilter`] is `Send + Sync`; jaq's values are reference-counted and
//! built inside the calling thread, so any thread may run a shared filter. A filter's
//! `halt`/`halt_error` never exits the process here: it is an error (or, for `halt`
//! with no error value, no output), unlike `jaq_core::unwrap_valr`.

use jaq_core::load::{Arena, File, Loader};
use jaq_core::{Compiler, Ctx, Vars, data};
use jaq_json::Val;
use serde::Deserialize;
use serde_json::Value;
use std::path::{Path, PathBuf};

type Filter = jaq_core::Filter<data::JustLut<Val>>;

/// A compiled jq program.
pub struct JqFilter {
    filter: Filter,
    var_count: usize,
}

impl std::fmt::Debug for JqFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JqFilter")
    }
}

impl JqFilter {
    /// Compiles `code`. `library_path` is searched for `import`/`include` modules
    /// (`JQ_LIBRARY_PATH`); `var_names` (without `$`) are the global variables that
    /// [`run`](Self::run) receives, in the same order.
    pub fn compile(
        code: &str,
        library_path: Option<&Path>,
        var_names: &[&str],
    ) -> Result<JqFilter, String> {
        let defs = jaq_core::defs()
            .chain(jaq_std::defs())
            .chain(jaq_json::defs());
        let funs = jaq_core::funs()
            .chain(jaq_std::funs())
            .chain(jaq_json::funs());
        let arena = Arena::default();
        let paths: Vec<PathBuf> = library_path.into_iter().map(Path::to_path_buf).collect();
        let loader = Loader::new(defs).with_std_read(&paths);
        let modules = loader
            .load(
                &arena,
                File {
                    code,
                    path: PathBuf::new(),
                },
            )
            .map_err(|errs| {
                let mut text = Vec::new();
                for (_, e) in errs {
                    match e {
                        jaq_core::load::Error::Io(list) => text.extend(
                            list.into_iter()
                                .map(|(p, m)| format!("cannot load module {p:?}: {m}")),
                        ),
                        jaq_core::load::Error::Lex(list) => {
                            text.extend(list.into_iter().map(|(exp, at)| {
                                format!("expected {} at {}", exp.as_str(), near(at))
                            }))
                        }
                        jaq_core::load::Error::Parse(list) => {
                            text.extend(list.into_iter().map(|(exp, at)| {
                                format!("expected {} at {}", exp.as_str(), near(at))
                            }))
                        }
                    }
                }
                format!("cannot parse jq filter: {}", text.join("; "))
            })?;
        let names: Vec<String> = var_names.iter().map(|n| format!("${n}")).collect();
        let filter = Compiler::default()
            .with_funs(funs)
            .with_global_vars(names.iter().map(String::as_str))
            .compile(modules)
            .map_err(|errs| {
                let undefined: Vec<String> = errs
                    .into_iter()
                    .flat_map(|(_, list)| {
                        list.into_iter()
                            .map(|(name, kind)| format!("{name} ({kind:?})"))
                    })
                    .collect();
                format!(
                    "cannot compile jq filter: undefined {}",
                    undefined.join(", ")
                )
            })?;
        Ok(JqFilter {
            filter,
            var_count: var_names.len(),
        })
    }

    /// Runs the filter on `input` with the global variables' values; returns every output.
    pub fn run(&self, input: &Value, vars: &[Value]) -> Result<Vec<Value>, String> {
        let out = self.run_val(to_val(input)?, vars)?;
        out.iter().map(from_val).collect()
    }

    /// Runs the filter on a jq value; returns jq values.
    fn run_val(&self, input: Val, vars: &[Value]) -> Result<Vec<Val>, String> {
        if vars.len() != self.var_count {
            return Err(format!(
                "jq filter expects {} variables, got {}",
                self.var_count,
                vars.len()
            ));
        }
        let vals = vars.iter().map(to_val).collect::<Result<Vec<_>, _>>()?;
        let ctx = Ctx::<data::JustLut<Val>>::new(&self.filter.lut, Vars::new(vals));
        let mut out = Vec::new();
        for result in self.filter.id.run((ctx, input)) {
            match result {
                Ok(v) => out.push(v),
                Err(exn) => match exn.get_err() {
                    Ok(e) => return Err(format!("jq error: {e}")),
                    Err(exn) => match exn.get_halt() {
                        Ok(0) | Err(_) => break,
                        Ok(code) => return Err(format!("jq halted with exit code {code}")),
                    },
                },
            }
        }
        Ok(out)
    }

    /// [`apply`](Self::apply) from the input's JSON text to the result's canonical
    /// JSON text (keys sorted, as serde_json writes a value), with no serde_json
    /// value tree on the way: the monitor's per-object path.
    pub fn apply_text(&self, input: &str) -> Result<String, String> {
        let mut de = serde_json::Deserializer::from_str(input);
        let input =
            Val::deserialize(&mut de).map_err(|e| format!("cannot read input for jq: {e}"))?;
        let out = self.run_val(input, &[])?;
        let text = match out.as_slice() {
            [] => "null".to_string(),
            [one] => one.to_string(),
            many => {
                let parts: Vec<String> = many.iter().map(Val::to_string).collect();
                format!("[{}]", parts.join(","))
            }
        };
        crate::canonical::canonical_value(&text).map_err(|e| format!("jq output is not JSON: {e}"))
    }

    /// flant's filter result: one output is that value, several are an array of them,
    /// none is `null`.
    pub fn apply(&self, input: &Value) -> Result<Value, String> {
        let mut out = self.run(input, &[])?;
        Ok(match out.len() {
            0 => Value::Null,
            1 => out.pop().unwrap_or(Value::Null),
            _ => Value::Array(out),
        })
    }
}

fn near(at: &str) -> String {
    if at.is_empty() {
        "end of input".to_string()
    } else {
        format!("{:?}", at.chars().take(20).collect::<String>())
    }
}

fn to_val(v: &Value) -> Result<Val, String> {
    Val::deserialize(v).map_err(|e| format!("cannot convert input for jq: {e}"))
}

fn from_val(v: &Val) -> Result<Value, String> {
    serde_json::from_str(&v.to_string()).map_err(|e| format!("jq output is not JSON: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn filters_objects_like_flant() {
        let obj = json!({"metadata": {"name": "cm1", "labels": {"app": "x"}}, "spec": {"nodeName": "n1"}});
        let f = JqFilter::compile(".metadata.labels", None, &[]).expect("compile");
        assert_eq!(f.apply(&obj), Ok(json!({"app": "x"})));
        let f =
            JqFilter::compile("[.spec.nodeName, .metadata.labels]", None, &[]).expect("compile");
        assert_eq!(f.apply(&obj), Ok(json!(["n1", {"app": "x"}])));
        assert_eq!(
            JqFilter::compile(".a, .b", None, &[])
                .expect("c")
                .apply(&json!({"a":1,"b":2})),
            Ok(json!([1, 2]))
        );
        assert_eq!(
            JqFilter::compile("empty", None, &[])
                .expect("c")
                .apply(&obj),
            Ok(Value::Null)
        );
    }

    #[test]
    fn errors_are_reported_never_exit() {
        assert!(
            JqFilter::compile(".foo |", None, &[])
                .unwrap_err()
                .starts_with("cannot parse jq filter")
        );
        assert!(
            JqFilter::compile("$undefined", None, &[])
                .unwrap_err()
                .contains("$undefined")
        );
        assert_eq!(
            JqFilter::compile("error(\"boom\")", None, &[])
                .expect("c")
                .apply(&json!(1)),
            Err("jq error: \"boom\"".into())
        );
        assert!(
            JqFilter::compile("halt_error", None, &[])
                .expect("c")
                .apply(&json!("bye"))
                .is_err()
        );
        assert_eq!(
            JqFilter::compile("1, halt, 2", None, &[])
                .expect("c")
                .run(&json!(0), &[]),
            Ok(vec![json!(1)])
        );
    }

    #[test]
    fn variables_and_library_modules() {
        let f = JqFilter::compile("{ns: $ns, n: ($n + 1)}", None, &["ns", "n"]).expect("compile");
        assert_eq!(
            f.run(&json!(null), &[json!("kube-system"), json!(41)]),
            Ok(vec![json!({"ns": "kube-system", "n": 42})])
        );
        let dir = std::env::temp_dir().join(format!("so-jq-lib-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join("mylib.jq"), "def double: . * 2;").expect("write");
        let f = JqFilter::compile("include \"mylib\"; .x | double", Some(&dir), &[])
            .expect("compile with library");
        assert_eq!(f.apply(&json!({"x": 21})), Ok(json!(42)));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
