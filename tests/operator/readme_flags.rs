//! The documented flag tables are the CLI's flag tables: the block between
//! `<!-- flags:begin -->` and `<!-- flags:end -->` in docs/cli.md must equal the
//! table generated from shell-operator's flags, and `<!-- addon-flags:begin -->` …
//! `end` in docs/modules.md the one of addon-operator's. On a mismatch the test
//! prints the table to paste.

use shell_operator::flags::{Kind, Program};

fn generated(program: Program) -> String {
    let mut out =
        String::from("| flag | env | default | what it does |\n| --- | --- | --- | --- |\n");
    for f in program.flags() {
        let default = if f.default.is_empty() {
            "`\"\"`".to_string()
        } else {
            format!("`{}`", f.default)
        };
        let mut help = f.help.to_string();
        if let Kind::Choice(values) = f.kind {
            help.push_str(&format!(" One of: {}.", values.join(", ")));
        }
        if f.kind == Kind::List {
            help.push_str(" Repeatable; the env var is comma-separated.");
        }
        let hidden = if f.hidden { " (hidden)" } else { "" };
        let env: Vec<String> = std::iter::once(f.env)
            .chain(f.aliases.iter().copied())
            .map(|e| format!("`{e}`"))
            .collect();
        out.push_str(&format!(
            "| `--{}`{hidden} | {} | {default} | {} |\n",
            f.name,
            env.join(" or "),
            help.replace('|', "\\|")
        ));
    }
    out
}

fn check(program: Program, file: &str, marker: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    let readme = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
    let table = readme
        .split_once(&format!("<!-- {marker}:begin -->\n"))
        .and_then(|(_, rest)| rest.split_once(&format!("<!-- {marker}:end -->")))
        .map(|(table, _)| table)
        .unwrap_or_else(|| panic!("{file} has the {marker}:begin / {marker}:end markers"));
    let expected = generated(program);
    assert!(
        table == expected,
        "{file}: the {marker} table is out of date; replace it with:\n{expected}"
    );
}

#[test]
fn readme_flag_table_matches_the_cli() {
    check(Program::Shell, "docs/cli.md", "flags");
}

#[test]
fn readme_addon_flag_table_matches_the_cli() {
    check(Program::Addon, "docs/modules.md", "addon-flags");
}
