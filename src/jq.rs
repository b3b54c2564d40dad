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
    ) -> Result<JqFilter, JqError> {
        let depth = nesting(code);
        if depth > MAX_NESTING {
            return Err(JqError::TooDeep { depth });
        }
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
                JqError::Parse(text)
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
                JqError::Undefined(undefined)
            })?;
        Ok(JqFilter {
            filter,
            var_count: var_names.len(),
        })
    }

    /// Runs the filter on `input` with the global variables' values; returns every output.
    pub(crate) fn run(&self, input: &Value, vars: &[Value]) -> Result<Vec<Value>, JqError> {
        let out = self.run_val(to_val(input)?, vars)?;
        out.iter().map(from_val).collect()
    }

    /// Runs the filter on a jq value; returns jq values.
    fn run_val(&self, input: Val, vars: &[Value]) -> Result<Vec<Val>, JqError> {
        if vars.len() != self.var_count {
            let (expected, got) = (self.var_count, vars.len());
            return Err(JqError::Vars { expected, got });
        }
        let vals = vars.iter().map(to_val).collect::<Result<Vec<_>, _>>()?;
        let ctx = Ctx::<data::JustLut<Val>>::new(&self.filter.lut, Vars::new(vals));
        let mut out = Vec::new();
        for result in self.filter.id.run((ctx, input)) {
            match result {
                Ok(v) => out.push(v),
                Err(exn) => match exn.get_err() {
                    Ok(e) => return Err(JqError::Runtime(e.to_string())),
                    Err(exn) => match exn.get_halt() {
                        Ok(0) | Err(_) => break,
                        Ok(code) => return Err(JqError::Halted(code.to_string())),
                    },
                },
            }
        }
        Ok(out)
    }

    #[cfg(test)]
    /// [`apply`](Self::apply) from the input's JSON text to the result's canonical
    /// JSON text (keys sorted, as serde_json writes a value), with no serde_json
    /// value tree on the way: the monitor's per-object path.
    pub(crate) fn apply_text(&self, input: &str) -> Result<String, JqError> {
        self.apply_input(read_input(input)?)
    }

    /// [`apply_text`](Self::apply_text) on an input already read ([`read_input`]),
    /// so several filters of one object share one reading of it.
    pub(crate) fn apply_input(&self, input: JqInput) -> Result<String, JqError> {
        let out = self.run_val(input, &[])?;
        let text = match out.as_slice() {
            [] => "null".to_string(),
            [one] => one.to_string(),
            many => {
                let parts: Vec<String> = many.iter().map(Val::to_string).collect();
                format!("[{}]", parts.join(","))
            }
        };
        crate::canonical::canonical_value(&text).map_err(|e| JqError::Output(e.to_string()))
    }

    /// flant's filter result: one output is that value, several are an array of them,
    /// none is `null`.
    pub(crate) fn apply(&self, input: &Value) -> Result<Value, JqError> {
        let mut out = self.run(input, &[])?;
        Ok(match out.len() {
            0 => Value::Null,
            1 => out.pop().unwrap_or(Value::Null),
            _ => Value::Array(out),
        })
    }
}

/// Deepest a filter may nest: jaq parses, compiles and runs a filter recursively, and
/// one ~1,000 levels deep overflows a thread's stack, which aborts the whole operator.
const MAX_NESTING: usize = 200;

/// Keywords that open or chain a construct (each adds a level, like an operator).
const NESTING_WORDS: &[&str] = &[
    "if", "then", "elif", "else", "try", "catch", "reduce", "foreach", "def", "label", "as", "and",
    "or",
];

/// An upper bound on the depth of `code`'s syntax tree: an open bracket adds one, and
/// so does every operator, path step or keyword while its bracket is open. Strings are
/// not skipped, so this can only over-estimate.
fn nesting(code: &str) -> usize {
    let mut per_level: Vec<usize> = vec![0];
    let (mut depth, mut max) = (0usize, 0usize);
    let mut word = String::new();
    for c in code.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_alphanumeric() || c == '_' {
            word.push(c);
            continue;
        }
        let keyword = NESTING_WORDS.contains(&word.as_str());
        word.clear();
        let step = keyword || "|,+-*/%=<>.".contains(c);
        if step && let Some(n) = per_level.last_mut() {
            *n += 1;
            depth += 1;
        }
        match c {
            '(' | '[' | '{' => {
                per_level.push(0);
                depth += 1;
            }
            ')' | ']' | '}' if per_level.len() > 1 => {
                let ops = per_level.pop().unwrap_or_default();
                depth = depth.saturating_sub(ops + 1);
            }
            _ => {}
        }
        max = max.max(depth);
    }
    max
}

fn near(at: &str) -> String {
    if at.is_empty() {
        "end of input".to_string()
    } else {
        format!("{:?}", at.chars().take(20).collect::<String>())
    }
}

/// A filter's input, read from JSON text by jaq: a tree that is cheap to clone.
pub(crate) type JqInput = Val;

/// Reads a filter's input from JSON text (one parse, counted).
pub(crate) fn read_input(text: &str) -> Result<JqInput, JqError> {
    crate::parse_count::parsed(text);
    let mut de = serde_json::Deserializer::from_str(text);
    Val::deserialize(&mut de).map_err(|e| JqError::Input(e.to_string()))
}

fn to_val(v: &Value) -> Result<Val, JqError> {
    Val::deserialize(v).map_err(|e| JqError::Convert(e.to_string()))
}

fn from_val(v: &Val) -> Result<Value, JqError> {
    serde_json::from_str(&v.to_string()).map_err(|e| JqError::Output(e.to_string()))
}

/// Why a jq filter could not be compiled or run.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum JqError {
    /// The filter nests deeper than jaq can take without overflowing a stack.
    TooDeep { depth: usize },
    /// The filter (or a module it loads) does not parse: every problem.
    Parse(Vec<String>),
    /// The filter names functions or variables that do not exist.
    Undefined(Vec<String>),
    /// The filter was run with another number of variables than compiled for.
    Vars { expected: usize, got: usize },
    /// The filter raised an error.
    Runtime(String),
    /// The filter halted with a non-zero exit code.
    Halted(String),
    /// The input text is not JSON.
    Input(String),
    /// The input value cannot be given to jq.
    Convert(String),
    /// An output is not JSON.
    Output(String),
}

impl std::fmt::Display for JqError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JqError::TooDeep { depth } => write!(
                f,
                "jq filter nests too deeply ({depth} levels of brackets, operators and \
                 keywords; at most {MAX_NESTING})"
            ),
            JqError::Parse(problems) => {
                write!(f, "cannot parse jq filter: {}", problems.join("; "))
            }
            JqError::Undefined(names) => {
                write!(
                    f,
                    "cannot compile jq filter: undefined {}",
                    names.join(", ")
                )
            }
            JqError::Vars { expected, got } => {
                write!(f, "jq filter expects {expected} variables, got {got}")
            }
            JqError::Runtime(e) => write!(f, "jq error: {e}"),
            JqError::Halted(code) => write!(f, "jq halted with exit code {code}"),
            JqError::Input(e) => write!(f, "cannot read input for jq: {e}"),
            JqError::Convert(e) => write!(f, "cannot convert input for jq: {e}"),
            JqError::Output(e) => write!(f, "jq output is not JSON: {e}"),
        }
    }
}

impl std::error::Error for JqError {}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Filters of one shape, `n` levels deep.
    fn deep_filters(n: usize) -> Vec<String> {
        let r = |s: &str| s.repeat(n);
        vec![
            format!("{}.{}", r("("), r(")")),
            format!("{}1{}", r("["), r("]")),
            format!("{}.", r(".|")),
            format!("{}1", r("1+")),
            format!("{}1", r("1,")),
            format!("{}1", r(".a//")),
            format!("{}1", r("-")),
            r(".a"),
            format!("{}1{}", r("if . then "), r(" end")),
            format!("{}1", r("try ")),
            format!("{}.{}", r("{a:"), r("}")),
            format!("{}.{}", r("def f: "), r("; f")),
        ]
    }

    /// Each shape at the deepest `n` whose estimate is within the limit.
    fn deepest_allowed() -> Vec<String> {
        (0..deep_filters(1).len())
            .map(|shape| {
                let at = |n: usize| deep_filters(n).swap_remove(shape);
                let n = (1..=MAX_NESTING).take_while(|&n| nesting(&at(n)) <= MAX_NESTING);
                at(n.last().unwrap_or(1))
            })
            .collect()
    }

    #[test]
    fn filters_nested_up_to_the_limit_compile_and_run_on_a_worker_stack() {
        // Worker threads have 2 MiB; debug builds' frames are several times larger.
        let stack = if cfg!(debug_assertions) {
            8 << 20
        } else {
            2 << 20
        };
        let worker = std::thread::Builder::new().stack_size(stack);
        let compiled = worker
            .spawn(|| {
                let filters = deepest_allowed();
                for f in &filters {
                    let filter = JqFilter::compile(f, None, &[]).unwrap();
                    let _ = filter.run(&json!({"a": null}), &[]);
                }
                filters.len()
            })
            .unwrap()
            .join()
            .expect("no stack overflow");
        assert_eq!(compiled, deep_filters(1).len());
    }

    #[test]
    fn filters_nested_too_deeply_are_refused_before_parsing() {
        for f in deep_filters(MAX_NESTING + 1) {
            let err = JqFilter::compile(&f, None, &[]).unwrap_err().to_string();
            assert!(err.contains("nests too deeply"), "{f}: {err}");
        }
        let wide = format!(
            "{{{}}}",
            (0..60)
                .map(|i| format!("k{i}: .a.b"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        assert!(
            JqFilter::compile(&wide, None, &[]).is_ok(),
            "60 keys at one level"
        );
    }

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
                .to_string()
                .starts_with("cannot parse jq filter")
        );
        assert!(
            JqFilter::compile("$undefined", None, &[])
                .unwrap_err()
                .to_string()
                .contains("$undefined")
        );
        assert_eq!(
            JqFilter::compile("error(\"boom\")", None, &[])
                .expect("c")
                .apply(&json!(1)),
            Err(JqError::Runtime("\"boom\"".into()))
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
