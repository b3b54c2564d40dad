//! The built-in `jq`: `shell-operator jq [flags] <filter> [files...]`, also run when
//! the binary is invoked as `jq` (a symlink or copy named `jq`), so shell hooks in
//! a scratch image need no separate jq. Filters run through [`crate::jq`] (jaq).
//!
//! Flags: `-r` raw strings, `-c` compact, `-e` exit status from the last output,
//! `-n` null input, `-s`/`--slurp` all inputs as one array, `--arg name value`,
//! `--argjson name json`; short flags combine (`-rc`). `$ENV` is defined.
//! Exit codes follow jq: 0 ok; with `-e` 1 if the last output was false or null,
//! 4 if there was none; 2 usage or input errors; 3 compile errors; 5 runtime errors.

use crate::jq::JqFilter;
use serde_json::Value;
use std::io::{Read, Write};

#[derive(Debug, Default)]
struct Opts {
    raw: bool,
    compact: bool,
    exit_status: bool,
    null_input: bool,
    slurp: bool,
    vars: Vec<(String, Value)>,
    filter: Option<String>,
    files: Vec<String>,
}

/// Runs jq with `args` (without the program name); returns the exit code.
pub fn main(args: &[String]) -> i32 {
    let opts = match parse(args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!(
                "jq: error: {e}\nUse jq [-r] [-c] [-e] [-n] [-s] [--arg n v] [--argjson n json] <filter> [files...]"
            );
            return 2;
        }
    };
    let Some(code) = opts.filter.clone() else {
        eprintln!(
            "Usage: jq [-r] [-c] [-e] [-n] [-s] [--arg n v] [--argjson n json] <filter> [files...]"
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

fn parse(args: &[String]) -> Result<Opts, String> {
    let mut o = Opts::default();
    let mut i = 0;
    let mut positional_only = false;
    while i < args.len() {
        let a = args[i].as_str();
        let mut take = |what: &str| -> Result<String, String> {
            i += 1;
            args.get(i)
                .cloned()
                .ok_or_else(|| format!("{a} needs {what}"))
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
                    serde_json::from_str(&text)
                        .map_err(|e| format!("--argjson {name}: invalid JSON text: {e}"))?
                };
                o.vars.push((name, value));
            }
            "--raw-output" => o.raw = true,
            "--compact-output" => o.compact = true,
            "--exit-status" => o.exit_status = true,
            "--null-input" => o.null_input = true,
            "--slurp" => o.slurp = true,
            _ if !a.starts_with("--") => short_flags(&mut o, &a[1..])?,
            _ => return Err(format!("unknown option {a}")),
        }
        i += 1;
    }
    Ok(o)
}

fn short_flags(o: &mut Opts, letters: &str) -> Result<(), String> {
    for c in letters.chars() {
        match c {
            'r' => o.raw = true,
            'c' => o.compact = true,
            'e' => o.exit_status = true,
            'n' => o.null_input = true,
            's' => o.slurp = true,
            'M' => {} // no colour is all we do
            other => return Err(format!("unknown option -{other}")),
        }
    }
    Ok(())
}

/// Every JSON value of stdin or of the files, in order.
fn read_inputs(o: &Opts) -> Result<Vec<Value>, String> {
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
        read.map_err(|e| format!("could not open {name}: {e}"))?;
        for v in serde_json::Deserializer::from_slice(&bytes).into_iter::<Value>() {
            values
                .push(v.map_err(|e| format!("(at {name}:{}): cannot parse input: {e}", e.line()))?);
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
                    e.trim_start_matches("jq error: ")
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
        _ => serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string()),
    };
    out.write_all(text.as_bytes())?;
    out.write_all(b"\n")
}

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
        assert!(parse(&["--argjson".into(), "n".into(), "{".into()]).is_err());
    }
}
