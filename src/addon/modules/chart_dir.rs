//! Charts of modules that have `templates/` but no `Chart.yaml`, and the startup
//! check of module names as release names. Both run once at startup (the bind
//! step, on the main thread), so a module that could never install stops the
//! operator there, or is made installable, instead of failing at every helm run.
//!
//! flant's addon-operator gives such a module the chart metadata `name: <module>`,
//! `version: 0.2.0`. We never write into the module directory (often read-only: an
//! image layer, a ConfigMap mount): the chart helm gets is `<tmp dir>/charts/<module>`,
//! which holds that `Chart.yaml` (made like every file a child process reads, see
//! [`crate::executor::replace_file`]) and a symlink to each other entry of the module
//! directory, except the directories flant leaves out of the chart (`crds`, `docs`,
//! `hooks`, `images`, `lib`). helm follows the links, so a template edited in place
//! is seen by the next helm run, as with a module that has its own `Chart.yaml`.

use crate::addon::modules::Module;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// The generated `Chart.yaml` of module `name` (flant's content).
pub(crate) fn generated_chart_yaml(name: &str) -> String {
    format!("name: {name}\nversion: 0.2.0\n")
}

/// Entries of a module directory that never go into its generated chart (flant's list,
/// plus the `Chart.yaml` we write ourselves).
const LEFT_OUT: &[&str] = &["crds", "docs", "hooks", "images", "lib", "Chart.yaml"];

/// For each module with `templates/` and no `Chart.yaml`, makes its chart under
/// `<tmp_dir>/charts/` and points `module.chart` at it. An error names the module
/// and the path.
pub(crate) fn generate_charts(
    modules: &mut [Module],
    tmp_dir: &Path,
) -> Result<(), super::ModulesError> {
    for module in modules.iter_mut() {
        if !module.has_chart || module.path.join("Chart.yaml").is_file() {
            continue;
        }
        let dir = tmp_dir.join("charts").join(&module.name);
        make_chart(&module.path, &dir, &module.name).map_err(|error| {
            super::ModulesError::Chart {
                module: module.name.clone(),
                dir: dir.clone(),
                error,
            }
        })?;
        module.chart = dir;
    }
    Ok(())
}

/// Makes `dir` afresh (left from an earlier run, it is replaced): the Chart.yaml and
/// a symlink to each entry of `module_dir` helm should see.
fn make_chart(module_dir: &Path, dir: &Path, name: &str) -> std::io::Result<()> {
    if std::fs::symlink_metadata(dir).is_ok() {
        std::fs::remove_dir_all(dir)?;
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    crate::executor::replace_file(
        &dir.join("Chart.yaml"),
        generated_chart_yaml(name).as_bytes(),
    )?;
    let module_dir = std::fs::canonicalize(module_dir)?;
    for entry in std::fs::read_dir(&module_dir)? {
        let file_name = entry?.file_name();
        if LEFT_OUT.iter().any(|n| file_name == *n) {
            continue;
        }
        let target: PathBuf = module_dir.join(&file_name);
        std::os::unix::fs::symlink(&target, dir.join(&file_name))?;
    }
    Ok(())
}

/// Helm's limit on a release name.
const MAX_RELEASE_NAME: usize = 53;

/// Refuses a module whose name cannot be a Helm release name: at most 53
/// characters, and a DNS-1123 label (lower-case letters, digits and `-`, starting and
/// ending with a letter or digit). The error names the module directory and the rule.
pub(crate) fn check_release_name(module_dir: &Path, name: &str) -> Result<(), super::ModulesError> {
    let fail = |rule: String| {
        Err(super::ModulesError::DirName {
            path: module_dir.to_path_buf(),
            problem: format!("module name '{name}' cannot be a Helm release name: {rule}"),
        })
    };
    let chars = name.chars().count();
    if chars > MAX_RELEASE_NAME {
        return fail(format!(
            "it must be at most {MAX_RELEASE_NAME} characters long, it has {chars}"
        ));
    }
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if !name.chars().all(allowed) || !alnum(name.chars().next()) || !alnum(name.chars().last()) {
        return fail(
            "it must be a DNS-1123 label: lower-case letters, digits and '-', \
             starting and ending with a letter or digit"
                .into(),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_names_follow_helm_rules() {
        let dir = Path::new("/m/001-x");
        let check = |name: &str| check_release_name(dir, name).map_err(|e| e.to_string());
        assert_eq!(check("cert-manager-2"), Ok(()));
        assert_eq!(check(&"a".repeat(53)), Ok(()));
        assert_eq!(
            check(&"a".repeat(54)),
            Err(format!(
                "module dir '/m/001-x': module name '{}' cannot be a Helm release name: \
                 it must be at most 53 characters long, it has 54",
                "a".repeat(54)
            ))
        );
        for bad in ["foo.bar", "caf\u{e9}", "-a", "a-", "a b"] {
            let err = check(bad).expect_err(bad);
            assert!(
                err.ends_with("starting and ending with a letter or digit"),
                "{err}"
            );
        }
    }

    #[test]
    fn a_generated_chart_links_the_module_files_and_is_remade() {
        let base = std::env::temp_dir().join(format!("so-chartdir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let module = base.join("modules/001-plain");
        for d in ["templates", "hooks", "crds"] {
            std::fs::create_dir_all(module.join(d)).expect("mkdir");
        }
        std::fs::write(module.join("values.yaml"), "").expect("write");
        let dir = base.join("tmp/charts/plain");
        make_chart(&module, &dir, "plain").expect("made");
        // Once more, as after a restart with the same tmp dir.
        make_chart(&module, &dir, "plain").expect("remade");
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .expect("ls")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["Chart.yaml", "templates", "values.yaml"]);
        assert_eq!(
            std::fs::read_to_string(dir.join("Chart.yaml")).expect("read"),
            "name: plain\nversion: 0.2.0\n"
        );
        assert!(dir.join("templates").is_dir());
        let _ = std::fs::remove_dir_all(&base);
    }
}
