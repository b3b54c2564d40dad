//! The README's flag table is the CLI's flag table: the block between
//! `<!-- flags:begin -->` and `<!-- flags:end -->` must equal the table generated
//! from `flags::START_FLAGS`. On a mismatch the test prints the table to paste.

use shell_operator::flags::{Kind, START_FLAGS};

fn generated() -> String {
    let mut out =
        String::from("| flag | env | default | what it does |\n| --- | --- | --- | --- |\n");
    for f in START_FLAGS {
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
        out.push_str(&format!(
            "| `--{}`{hidden} | `{}` | {default} | {} |\n",
            f.name,
            f.env,
            help.replace('|', "\\|")
        ));
    }
    out
}

#[test]
fn readme_flag_table_matches_the_cli() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let readme = std::fs::read_to_string(path).expect("README.md");
    let table = readme
        .split_once("<!-- flags:begin -->\n")
        .and_then(|(_, rest)| rest.split_once("<!-- flags:end -->"))
        .map(|(table, _)| table)
        .expect("README has the flags:begin / flags:end markers");
    let expected = generated();
    assert!(
        table == expected,
        "README flag table is out of date; replace it with:\n{expected}"
    );
}
