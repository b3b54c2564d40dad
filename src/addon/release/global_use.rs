//! Whether a module's chart can read `global` values, decided by reading its Go
//! templates without running helm. A `global` change (a ConfigMap key, a global
//! hook's patch, a module enabled elsewhere: `global.enabledModules`) reaches every
//! module; a chart shown here not to read `global` keeps its upgrade checksum
//! (`chart_sum.rs` leaves `global` out of it), so the change costs that module no
//! `helm template` and no revision.
//!
//! The reading is conservative: any doubt answers "may read". It follows, in every
//! file under `templates/`, where the root context (what `.` is at a file's top and
//! in a `define`, and what `$` always is) and the values map (`.Values`) go:
//! - a field chain off the root may name `Values`, `Release`, `Chart`,
//!   `Capabilities`, `Template`, `Files` or a lower-case key; off `.Values`, only a
//!   lower-case key other than `global` (upper-case names could be methods of helm's
//!   `Values` type, such as `YAML`, which print everything);
//! - the root or `.Values` themselves may only be the context of `include`,
//!   `template` or `block` (`.Values` not even that), or be kept in a variable;
//!   printed, tested, ranged over, `with`-ed or handed to any other function they
//!   make the chart "may read";
//! - `tpl` and `call` (a template text from values, a function value) always do;
//! - so do subcharts (`charts/`, Chart.yaml `dependencies`, `requirements.yaml`:
//!   helm copies `global` into their values) and `values.schema.json` (it can judge
//!   `global`), and anything this reader does not understand.
//!
//! Variables are tracked per file by name (every assignment joined, repeated until
//! nothing changes), so a loop that assigns the root later cannot hide it.

use crate::addon::release::global_use_lex::{LexError, Tok, lex_actions};
use std::collections::HashMap;
use std::path::Path;

/// Why a chart may read `global` (for the debug log), or `Ok` when it cannot.
pub(crate) type Verdict = Result<(), MayRead>;

/// Why a chart may read `global`, for the debug log: what was found, and in
/// which file (relative to the chart) when the reason is one file's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MayRead {
    file: Option<String>,
    why: String,
}

impl MayRead {
    /// The same reason, found in `file`.
    fn in_file(self, file: &str) -> MayRead {
        MayRead {
            file: Some(file.to_string()),
            why: self.why,
        }
    }
}

impl From<&str> for MayRead {
    fn from(why: &str) -> MayRead {
        MayRead::from(why.to_string())
    }
}

impl From<String> for MayRead {
    fn from(why: String) -> MayRead {
        MayRead { file: None, why }
    }
}

impl From<LexError> for MayRead {
    fn from(e: LexError) -> MayRead {
        MayRead::from(e.to_string())
    }
}

impl std::fmt::Display for MayRead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.file {
            Some(file) => write!(f, "{file}: {}", self.why),
            None => f.write_str(&self.why),
        }
    }
}

/// Reads a chart's files (paths relative to the chart, contents) and answers whether
/// its templates cannot read `global`.
pub(crate) fn chart_ignores_global(files: &[(&Path, &[u8])]) -> Verdict {
    for (path, data) in files {
        let name = path.to_string_lossy();
        let top = path
            .components()
            .next()
            .map(|c| c.as_os_str().to_string_lossy());
        match top.as_deref() {
            Some("charts") => return Err(MayRead::from("subcharts get `global`").in_file(&name)),
            Some("requirements.yaml") => {
                return Err(MayRead::from("subcharts get `global`").in_file(&name));
            }
            Some("values.schema.json") => {
                return Err(MayRead::from("a schema can judge `global`").in_file(&name));
            }
            Some("Chart.yaml") if has_dependencies(data) => {
                return Err(MayRead::from("dependencies get `global`").in_file(&name));
            }
            Some("templates") => {
                let text = std::str::from_utf8(data)
                    .map_err(|_| MayRead::from("not UTF-8").in_file(&name))?;
                template_ignores_global(text).map_err(|why| why.in_file(&name))?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// Whether Chart.yaml declares `dependencies` (any line starting with the key).
fn has_dependencies(chart_yaml: &[u8]) -> bool {
    String::from_utf8_lossy(chart_yaml)
        .lines()
        .any(|l| l.trim_start().starts_with("dependencies"))
}

/// One template file: the analysis is repeated until the variables' taints settle.
pub(crate) fn template_ignores_global(text: &str) -> Verdict {
    let actions = lex_actions(text)?;
    let mut vars: HashMap<String, Taint> = HashMap::new();
    // Each round can only add taint to a variable, so it settles; a chain of
    // assignments that needs more rounds than this (each reads the whole file) is
    // answered "may read" instead.
    for _ in 0..MAX_ROUNDS {
        let before = vars.clone();
        Reader::new(&mut vars).read(&actions)?;
        if vars == before {
            return Ok(());
        }
    }
    Err("variables did not settle".into())
}

/// Most rounds of one file's reading (real templates settle in two or three).
const MAX_ROUNDS: usize = 16;

/// What a value may be: the root context, helm's values map, both, or neither
/// (`SAFE`: derived from neither, or a part of them that holds no `global`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
struct Taint {
    root: bool,
    values: bool,
}

const SAFE: Taint = Taint {
    root: false,
    values: false,
};
const ROOT: Taint = Taint {
    root: true,
    values: false,
};

impl Taint {
    fn is_safe(self) -> bool {
        self == SAFE
    }

    fn join(self, other: Taint) -> Taint {
        Taint {
            root: self.root || other.root,
            values: self.values || other.values,
        }
    }

    /// The taint of `self.<field>`, or why the field may reach `global`.
    fn field(self, field: &str) -> Result<Taint, MayRead> {
        let mut out = SAFE;
        let lower = field.starts_with(|c: char| c.is_ascii_lowercase() || c == '_');
        if self.root {
            match field {
                "Values" => out.values = true,
                "Release" | "Chart" | "Capabilities" | "Template" | "Files" => {}
                _ if lower => {}
                _ => return Err(format!("`.{field}` of the root context").into()),
            }
        }
        if self.values && (field == "global" || !lower) {
            return Err(format!("`.Values.{field}`").into());
        }
        Ok(out)
    }
}

/// A block open in the template, and the dot outside it.
struct Frame {
    outer_dot: Taint,
}

struct Reader<'v> {
    vars: &'v mut HashMap<String, Taint>,
    dot: Taint,
    frames: Vec<Frame>,
}

impl<'v> Reader<'v> {
    fn new(vars: &'v mut HashMap<String, Taint>) -> Self {
        Reader {
            vars,
            dot: ROOT,
            frames: Vec::new(),
        }
    }

    fn read(&mut self, actions: &[Vec<Tok>]) -> Verdict {
        for action in actions {
            self.action(action)?;
        }
        Ok(())
    }

    fn action(&mut self, toks: &[Tok]) -> Verdict {
        let (first, rest) = match toks.split_first() {
            Some((Tok::Ident(word), rest)) => (*word, rest),
            _ => return self.output(toks),
        };
        match first {
            "if" => {
                self.open(self.dot);
                self.plain(rest, "an `if` condition")
            }
            "with" | "range" => {
                let outer = self.dot;
                self.control(rest, first)?;
                self.open(outer);
                self.dot = SAFE;
                Ok(())
            }
            "else" => self.else_branch(rest),
            "end" => {
                let frame = self.frames.pop().ok_or("an `end` without a block")?;
                self.dot = frame.outer_dot;
                Ok(())
            }
            "define" => {
                self.open(self.dot);
                self.dot = ROOT;
                Ok(())
            }
            "block" | "template" => {
                // Its context may be the root (never `.Values`: see `context`).
                let ctx = rest.get(1..).unwrap_or_default();
                if !ctx.is_empty() {
                    self.context(self.pipeline(ctx)?)?;
                }
                if first == "block" {
                    self.open(self.dot);
                    self.dot = ROOT;
                }
                Ok(())
            }
            "break" | "continue" => Ok(()),
            _ => self.output(toks),
        }
    }

    fn open(&mut self, outer_dot: Taint) {
        self.frames.push(Frame { outer_dot });
    }

    /// `else`, `else if …`, `else with …`: the dot is the block's outer one again.
    fn else_branch(&mut self, rest: &[Tok]) -> Verdict {
        let frame = self.frames.last().ok_or("an `else` without a block")?;
        self.dot = frame.outer_dot;
        match rest.split_first() {
            None => Ok(()),
            Some((Tok::Ident("if"), cond)) => self.plain(cond, "an `else if` condition"),
            Some((Tok::Ident("with"), pipe)) => {
                self.control(pipe, "with")?;
                self.dot = SAFE;
                Ok(())
            }
            Some(_) => Err("an `else` this reader does not know".into()),
        }
    }

    /// The pipeline of `with`/`range` (with range's `$k, $v :=`); it must be safe.
    fn control(&mut self, toks: &[Tok], what: &str) -> Verdict {
        let pipe = self.declarations(toks, SAFE)?;
        self.plain(pipe, &format!("a `{what}` value"))
    }

    /// An action that prints its value, or only assigns it.
    fn output(&mut self, toks: &[Tok]) -> Verdict {
        let declared = toks.iter().any(|t| matches!(t, Tok::Declare | Tok::Assign));
        if !declared {
            return self.plain(toks, "a printed value");
        }
        let Some(at) = toks
            .iter()
            .position(|t| matches!(t, Tok::Declare | Tok::Assign))
        else {
            return Err("an assignment this reader does not know".into());
        };
        let taint = self.pipeline(&toks[at + 1..])?;
        self.declarations(toks, taint).map(|_| ())
    }

    /// Joins `taint` into the variables declared before `:=`/`=` and returns the
    /// tokens after it (all of them when there is no declaration).
    fn declarations<'t, 'a>(
        &mut self,
        toks: &'t [Tok<'a>],
        taint: Taint,
    ) -> Result<&'t [Tok<'a>], MayRead> {
        let Some(at) = toks
            .iter()
            .position(|t| matches!(t, Tok::Declare | Tok::Assign))
        else {
            return Ok(toks);
        };
        for tok in &toks[..at] {
            match tok {
                Tok::Var(name) => {
                    let slot = self.vars.entry(name.to_string()).or_default();
                    *slot = slot.join(taint);
                }
                Tok::Comma => {}
                _ => return Err("a declaration this reader does not know".into()),
            }
        }
        Ok(&toks[at + 1..])
    }

    /// A pipeline whose value must hold no root and no `.Values`.
    fn plain(&self, toks: &[Tok], what: &str) -> Verdict {
        if self.pipeline(toks)?.is_safe() {
            Ok(())
        } else {
            Err(format!("{what} is the root context or `.Values`").into())
        }
    }

    /// The context of `include`/`template`/`block`: the root or safe, not `.Values`
    /// (whose `.global` the template could then read as a lower-case key).
    fn context(&self, taint: Taint) -> Verdict {
        if taint.values {
            return Err("`.Values` handed to a template".into());
        }
        Ok(())
    }

    /// `cmd | cmd | …`: each command gets the previous value as its last argument.
    fn pipeline(&self, toks: &[Tok]) -> Result<Taint, MayRead> {
        let mut piped: Option<Taint> = None;
        for cmd in split_top(toks, |t| matches!(t, Tok::Pipe)) {
            piped = Some(self.command(cmd, piped)?);
        }
        piped.ok_or_else(|| "an empty pipeline".into())
    }

    /// A function call (`fn args…`), a method call (`.A.B args…`) or one operand.
    fn command(&self, toks: &[Tok], piped: Option<Taint>) -> Result<Taint, MayRead> {
        let operands = operands(toks)?;
        let Some((head, args)) = operands.split_first() else {
            return Err("an empty command".into());
        };
        let mut values = args
            .iter()
            .map(|o| self.operand(o))
            .collect::<Result<Vec<_>, _>>()?;
        values.extend(piped);
        if let [Tok::Ident(func)] = head.as_slice()
            && !is_literal(func)
        {
            return self.call(func, &values);
        }
        let value = self.operand(head)?;
        if values.is_empty() {
            return Ok(value);
        }
        // A method call: its receiver passed `field`, its arguments must be safe.
        if values.iter().all(|v| v.is_safe()) {
            Ok(SAFE)
        } else {
            Err("the root context or `.Values` passed to a method".into())
        }
    }

    fn call(&self, func: &str, args: &[Taint]) -> Result<Taint, MayRead> {
        match func {
            "tpl" | "call" => Err(format!("`{func}` can run any template text").into()),
            "include" => {
                if let Some(ctx) = args.get(1) {
                    self.context(*ctx)?;
                }
                let others = args.iter().enumerate().filter(|(i, _)| *i != 1);
                if others.into_iter().all(|(_, t)| t.is_safe()) {
                    Ok(SAFE)
                } else {
                    Err("the root context or `.Values` as an `include` name".into())
                }
            }
            _ if args.iter().all(|t| t.is_safe()) => Ok(SAFE),
            _ => Err(format!("the root context or `.Values` passed to `{func}`").into()),
        }
    }

    /// One operand and the field chain glued to it.
    fn operand(&self, toks: &[Tok]) -> Result<Taint, MayRead> {
        let (base, chain) = match toks.first() {
            Some(Tok::Dot) => (self.dot, &toks[1..]),
            Some(Tok::Field(_)) => (self.dot, toks),
            Some(Tok::Var(name)) => (self.var(name), &toks[1..]),
            Some(Tok::LParen) => {
                let close = matching_paren(toks)?;
                (self.pipeline(&toks[1..close])?, &toks[close + 1..])
            }
            Some(Tok::Ident(func)) if toks.len() == 1 && !is_literal(func) => {
                return self.call(func, &[]);
            }
            Some(Tok::Ident(_) | Tok::Literal) => (SAFE, &toks[1..]),
            _ => return Err("an operand this reader does not know".into()),
        };
        let mut taint = base;
        for tok in chain {
            match tok {
                Tok::Field(name) | Tok::GluedField(name) => taint = taint.field(name)?,
                _ => return Err("an operand this reader does not know".into()),
            }
        }
        Ok(taint)
    }

    fn var(&self, name: &str) -> Taint {
        if name.is_empty() {
            return ROOT; // `$`
        }
        // Not assigned yet in this round: assume the worst.
        self.vars.get(name).copied().unwrap_or(ROOT)
    }
}

fn is_literal(word: &str) -> bool {
    matches!(word, "true" | "false" | "nil")
}

/// The tokens split at `sep` outside parentheses.
fn split_top<'t, 'a>(toks: &'t [Tok<'a>], sep: impl Fn(&Tok) -> bool) -> Vec<&'t [Tok<'a>]> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0usize, 0);
    for (i, tok) in toks.iter().enumerate() {
        match tok {
            Tok::LParen => depth += 1,
            Tok::RParen => depth = depth.saturating_sub(1),
            t if depth == 0 && sep(t) => {
                parts.push(&toks[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&toks[start..]);
    parts
}

/// A command's operands: tokens are one operand while glued (a field chain after
/// `.`, a variable, a `)` or another field); a space or a `(` starts the next.
fn operands<'t, 'a>(toks: &'t [Tok<'a>]) -> Result<Vec<Vec<Tok<'a>>>, MayRead> {
    let mut out: Vec<Vec<Tok<'a>>> = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let start = i;
        if matches!(toks[i], Tok::LParen) {
            i = start + matching_paren(&toks[start..])? + 1;
        } else {
            i += 1;
        }
        while let Some(Tok::GluedField(_)) = toks.get(i) {
            i += 1;
        }
        let mut operand = toks[start..i].to_vec();
        operand[0] = operand[0].unglue();
        out.push(operand);
    }
    Ok(out)
}

/// The index of the `)` closing the `(` at 0.
fn matching_paren(toks: &[Tok]) -> Result<usize, MayRead> {
    let mut depth = 0usize;
    for (i, tok) in toks.iter().enumerate() {
        match tok {
            Tok::LParen => depth += 1,
            Tok::RParen => {
                depth = depth.checked_sub(1).ok_or("an unbalanced `)`")?;
                if depth == 0 {
                    return Ok(i);
                }
            }
            _ => {}
        }
    }
    Err("an unclosed `(`".into())
}

#[cfg(test)]
#[path = "global_use_tests.rs"]
mod tests;
