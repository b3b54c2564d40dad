//! The built-in `jq`: `shell-operator jq [flags] <filter> [files...]`, also run when
//! the binary is invoked as `jq` (a symlink or copy named `jq`), so shell hooks in
//! a scratch image need no separate jq. Filters run through [`crate::jq`] (jaq).
//!
//! Flags: `-r` raw strings, `-j` raw without newlines, `-c` compact, `--tab`,
//! `--indent n`, `-S` (keys are always sorted here), `-e` exit status from the last
//! output, `-n` null input, `-s`/`--slurp` all inputs as one array, `--arg name value`,
//! `--argjson name json`, `--slurpfile name file`, `--rawfile name file`,
//! `--version`; short flags combine (`-rc`). `$ENV` is defined.
//! Exit codes follow jq: 0 ok; with `-e` 1 if the last output was false or null,
//! 4 if there was none; 2 usage or input errors; 3 compile errors; 5 runtime errors.

use crate::jq::JqFilter;
use serde_json::Value;
use std::io::{Read, Write};

#[derive(Debug, Default)]
struct Opts {
    raw: bool,
    /// `-j`: raw strings and no newline after each output.
    join: bool,
    compact: bool,
    /// Pretty-printing indent (`--tab`, `--indent n`); `None` is jq's two spaces.
    indent: Option<Vec<u8>>,
    version: bool,
    exit_status: bool,
    null_input: bool,
    slurp: bool,
    vars: Vec<(String, Value)>,
    filter: Option<String>,
    files: Vec<String>,
}

/// Runs jq with `args` (without the program name); returns the exit code.
pub(crate) fn main(args: &[String]) -> i32 {
    let opts = match parse(args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!(
                "jq: error: {e}\nUse jq [-r] [-j] [-c] [-e] [-n] [-s] [-S] [--tab] [--indent n] [--arg n v] [--argjson n json] [--slurpfile n f] [--rawfile n f] <filter> [files...]"
            );
            return 2;
        }
    };
    if opts.version {
        println!("jq-1.6");
        return 0;
    }
    let Some(code) = opts.filter.clone() else {
        eprintln!(
            "Usage: jq [-r] [-j] [-c] [-e] [-n] [-s] [-S] [--tab] [--indent n] [--arg n v] [--argjson n json] [--slurpfile n f] [--rawfile n f] <filter> [files...]"
        );
        return 2;
    };
    let mut names: Vec<&str> = opts.vars.iter().map(|(n, _)| n.as_str()).collect();
    names.push("ENV");
    let filter = match JqFilter::compile(&code, None, &names) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("jq: error: {e}\njq: 1 compile error");
            return 3;
        }
    };
    let inputs = match read_inputs(&opts) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("jq: error: {e}");
            return 2;
        }
    };
    run(&opts, &filter, inputs)
}

fn parse(args: &[String]) -> Result<Opts, UsageError> {
    let mut o = Opts::default();
    let mut i = 0;
    let mut positional_only = false;
    while i < args.len() {
        let a = args[i].as_str();
        let mut take = |what: &str| -> Result<String, UsageError> {
            i += 1;
            args.get(i)
                .cloned()
                .ok_or_else(|| UsageError::from(format!("{a} needs {what}")))
        };
        match a {
            _ if positional_only || !a.starts_with('-') || a == "-" => {
                if o.filter.is_none() {
                    o.filter = Some(a.to_string());
                } else {
                    o.files.push(a.to_string());
                }
            }
            "--" => positional_only = true,
            "--arg" | "--argjson" => {
                let name = take("a name and a value")?;
                let text = take("a value")?;
                let value = if a == "--arg" {
                    Value::String(text)
                } else {
                    serde_json::from_str(&text).map_err(|e| {
                        UsageError::from(format!("--argjson {name}: invalid JSON text: {e}"))
                    })?
                };
                o.vars.push((name, value));
            }
            "--slurpfile" | "--rawfile" => {
                let name = take("a name and a file")?;
                let file = take("a file")?;
                let text = std::fs::read_to_string(&file).map_err(|e| {
                    UsageError::from(format!("{a} {name}: could not open {file}: {e}"))
                })?;
                let value = if a == "--rawfile" {
                    Value::String(text)
                } else {
                    let values: Result<Vec<Value>, _> = serde_json::Deserializer::from_str(&text)
                        .into_iter::<Value>()
                        .collect();
                    Value::Array(
                        values.map_err(|e| UsageError::from(format!("{a} {name}: {file}: {e}")))?,
                    )
                };
                o.vars.push((name, value));
            }
            "--indent" => {
                let n: usize = take("a number")?
                    .parse()
                    .ok()
                    .filter(|n| *n <= 7)
                    .ok_or("--indent takes a number from 0 to 7")?;
                o.indent = Some(vec![b' '; n]);
                o.compact = n == 0;
            }
            "--tab" => o.indent = Some(b"\t".to_vec()),
            "--version" => o.version = true,
            "--join-output" => (o.raw, o.join) = (true, true),
            "--sort-keys" => {}
            "--raw-output" => o.raw = true,
            "--compact-output" => o.compact = true,
            "--exit-status" => o.exit_status = true,
            "--null-input" => o.null_input = true,
            "--slurp" => o.slurp = true,
            _ if !a.starts_with("--") => short_flags(&mut o, &a[1..])?,
            _ => return Err(format!("unknown option {a}").into()),
        }
        i += 1;
    }
    Ok(o)
}

fn short_flags(o: &mut Opts, letters: &str) -> Result<(), UsageError> {
    for c in letters.chars() {
        match c {
            'r' => o.raw = true,
            'j' => (o.raw, o.join) = (true, true),
            'S' => {} // keys are always sorted (serde_json's maps)
            'c' => o.compact = true,
            'e' => o.exit_status = true,
            'n' => o.null_input = true,
            's' => o.slurp = true,
            'M' => {} // no colour is all we do
            other => return Err(format!("unknown option -{other}").into()),
        }
    }
    Ok(())
}

/// Every JSON value of stdin or of the files, in order.
fn read_inputs(o: &Opts) -> Result<Vec<Value>, UsageError> {
    let mut values = Vec::new();
    let sources: Vec<Option<&str>> = if o.files.is_empty() {
        vec![None]
    } else {
        o.files.iter().map(|f| Some(f.as_str())).collect()
    };
    if o.null_input && !o.slurp {
        return Ok(values);
    }
    for src in sources {
        let mut bytes = Vec::new();
        let read = match src {
            None => std::io::stdin().read_to_end(&mut bytes),
            Some(f) => std::fs::File::open(f).and_then(|mut file| file.read_to_end(&mut bytes)),
        };
        let name = src.unwrap_or("<stdin>");
        read.map_err(|e| UsageError::from(format!("could not open {name}: {e}")))?;
        for v in serde_json::Deserializer::from_slice(&bytes).into_iter::<Value>() {
            values.push(v.map_err(|e| {
                UsageError::from(format!("(at {name}:{}): cannot parse input: {e}", e.line()))
            })?);
        }
    }
    Ok(values)
}

fn run(o: &Opts, filter: &JqFilter, inputs: Vec<Value>) -> i32 {
    let inputs = match (o.null_input, o.slurp) {
        (true, _) => vec![Value::Null],
        (false, true) => vec![Value::Array(inputs)],
        (false, false) => inputs,
    };
    let mut vars: Vec<Value> = o.vars.iter().map(|(_, v)| v.clone()).collect();
    vars.push(Value::Object(
        std::env::vars()
            .map(|(k, v)| (k, Value::String(v)))
            .collect(),
    ));
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let (mut last, mut failed) = (None, false);
    for input in &inputs {
        match filter.run(input, &vars) {
            Ok(values) => {
                for v in values {
                    if write_value(&mut out, o, &v).is_err() {
                        return 0; // a closed pipe (e.g. `| head`) is not an error
                    }
                    last = Some(v);
                }
            }
            Err(e) => {
                let _ = out.flush();
                eprintln!(
                    "jq: error (at <input>): {}",
                    e.to_string().trim_start_matches("jq error: ")
                );
                failed = true;
            }
        }
    }
    let _ = out.flush();
    match (failed, o.exit_status, last) {
        (true, ..) => 5,
        (false, false, _) => 0,
        (false, true, None) => 4,
        (false, true, Some(Value::Null | Value::Bool(false))) => 1,
        (false, true, Some(_)) => 0,
    }
}

fn write_value(out: &mut impl Write, o: &Opts, v: &Value) -> std::io::Result<()> {
    let text = match v {
        Value::String(s) if o.raw => s.clone(),
        _ if o.compact => v.to_string(),
        _ => pretty(v, o.indent.as_deref().unwrap_or(b"  ")),
    };
    out.write_all(text.as_bytes())?;
    if o.join {
        return Ok(());
    }
    out.write_all(b"\n")
}

/// `v` pretty-printed with `indent` per level.
fn pretty(v: &Value, indent: &[u8]) -> String {
    use serde::Serialize;
    let mut buf = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(indent);
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, formatter);
    match v.serialize(&mut ser) {
        Ok(()) => String::from_utf8(buf).unwrap_or_else(|_| v.to_string()),
        Err(_) => v.to_string(),
    }
}

/// A jq command line this jq does not take: the option or argument and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UsageError {
    problem: String,
}

impl From<String> for UsageError {
    fn from(problem: String) -> UsageError {
        UsageError { problem }
    }
}

impl From<&str> for UsageError {
    fn from(problem: &str) -> UsageError {
        UsageError::from(problem.to_string())
    }
}

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.problem)
    }
}

impl std::error::Error for UsageError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_combine_and_args_parse() {
        let args: Vec<String> = [
            "-rce",
            "--arg",
            "a",
            "x",
            "--argjson",
            "b",
            "{\"k\":1}",
            ".a",
            "f1",
            "f2",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let o = parse(&args).expect("parse");
        assert!(o.raw && o.compact && o.exit_status && !o.slurp);
        assert_eq!(
            o.vars,
            vec![
                ("a".into(), Value::from("x")),
                ("b".into(), serde_json::json!({"k": 1}))
            ]
        );
        assert_eq!((o.filter.as_deref(), o.files.len()), (Some(".a"), 2));
        assert!(parse(&["-z".to_string()]).is_err());
        let more: Vec<String> = ["-jS", "--tab", "--version", "."]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let o = parse(&more).expect("parse");
        assert!(o.raw && o.join && o.version);
        assert_eq!(o.indent.as_deref(), Some(&b"\t"[..]));
        let bad = ["--indent".to_string(), "9".to_string()];
        assert!(parse(&bad).is_err());
        assert!(parse(&["--argjson".into(), "n".into(), "{".into()]).is_err());
    }
}
