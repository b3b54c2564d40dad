//! Module discovery: what lies under `MODULES_DIR` and `GLOBAL_HOOKS_DIR`, read once
//! at startup (the bind step), before any hook runs.
//!
//! A module is a directory `NNN-name` (or just `name`, ordered by
//! `UNNUMBERED_MODULES_ORDER`) in one of the `:`-separated modules directories; a
//! symlink to a directory counts. Its name loses the number prefix, its values key
//! is the name in lowerCamelCase. Each modules directory may hold a `values.yaml`
//! with the `global:` section, module sections and `<key>Enabled` flags; each module
//! may hold its own `values.yaml` (its section and flag), `openapi/`, `enabled`,
//! `hooks/` and a Helm chart (`Chart.yaml` or `templates/`).
//!
//! Hooks of every module are loaded here too (their `--config`), so a module hook
//! with a bad config stops startup with its name, instead of failing later when the
//! module is first enabled.

pub(crate) mod chart_dir;
pub(crate) mod drift_settings;
pub(crate) mod enabled;
mod error;

use crate::addon::config::values::{Schemas, merge, parse_dir_name, values_key};
use crate::flags::addon::AddonFlags;
use crate::hook::config::HookKind;
use crate::hook::{self, Hook};
use crate::log;
pub(crate) use error::ModulesError;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One module, as found on disk.
#[derive(Debug, Clone)]
pub(crate) struct Module {
    /// kebab-case name: the release name and the name in logs.
    pub(crate) name: String,
    /// lowerCamelCase values key.
    pub(crate) key: String,
    pub(crate) order: u32,
    /// The module directory (a symlink stays as given).
    pub(crate) path: PathBuf,
    /// A Helm chart: `Chart.yaml` or `templates/`.
    pub(crate) has_chart: bool,
    /// The chart directory helm gets: `path`, or the one made in the tmp dir for a
    /// module without `Chart.yaml` (`chart_dir.rs`).
    pub(crate) chart: PathBuf,
    /// The executable `enabled` script, if any.
    pub(crate) enabled_script: Option<PathBuf>,
    /// `<key>:` of the modules dir's `values.yaml`, then of the module's own.
    pub(crate) static_values: Value,
    /// `<key>Enabled` of the same two files (the later one wins).
    pub(crate) static_enabled: Option<bool>,
    pub(crate) schemas: Schemas,
    /// `drift.yaml`: the module's drift mode and ignore rules.
    pub(crate) drift: drift_settings::Settings,
}

/// Everything discovery found.
#[derive(Debug)]
pub(crate) struct Layout {
    /// Sorted by (order, name).
    pub(crate) modules: Vec<Module>,
    /// `global:` sections of every modules dir's `values.yaml`, merged in dir order.
    pub(crate) global_static: Value,
    pub(crate) global_schemas: Schemas,
    /// Where global hooks are searched (`<dir>/hooks` when it exists).
    pub(crate) global_hooks_root: PathBuf,
}

impl Layout {
    /// The values key of every module (the ConfigMap keys that are a module's).
    pub(crate) fn module_keys(&self) -> Vec<&str> {
        self.modules.iter().map(|m| m.key.as_str()).collect()
    }

    /// Every module's name and values key (ModuleSettings objects are named by
    /// the first, the ConfigMap by the second).
    pub(crate) fn settings_names(&self) -> Vec<crate::addon::config::settings::spec::Names<'_>> {
        let names = self.modules.iter();
        names
            .map(|m| crate::addon::config::settings::spec::Names {
                name: &m.name,
                key: &m.key,
            })
            .collect()
    }
}

/// Reads the modules directories and the global hooks directory.
pub(crate) fn discover(flags: &AddonFlags) -> Result<Layout, ModulesError> {
    let global_dir = &flags.global_hooks_dir;
    if !global_dir.is_dir() {
        return Err(ModulesError::NoGlobalDir(global_dir.clone()));
    }
    let hooks_sub = global_dir.join("hooks");
    let global_hooks_root = if hooks_sub.is_dir() {
        hooks_sub
    } else {
        global_dir.clone()
    };
    let global_schemas = Schemas::load(&global_dir.join("openapi"), "global")?;
    if flags.modules_dirs.is_empty() {
        log::warn("MODULES_DIR is empty: no modules", &[]);
    }
    let mut global_static = Value::Object(Map::new());
    let mut modules: Vec<Module> = Vec::new();
    for dir in &flags.modules_dirs {
        let common = read_values_file(&dir.join("values.yaml"), flags.strict_values)?;
        if let Some(g) = common.get("global") {
            merge(&mut global_static, g);
        }
        for module in modules_in(dir, &common, flags)? {
            if let Some(other) = modules.iter().find(|m| m.name == module.name) {
                return Err(ModulesError::Twice {
                    module: module.name,
                    first: other.path.clone(),
                    second: module.path,
                });
            }
            modules.push(module);
        }
    }
    modules.sort_by(|a, b| a.order.cmp(&b.order).then_with(|| a.name.cmp(&b.name)));
    Ok(Layout {
        modules,
        global_static,
        global_schemas,
        global_hooks_root,
    })
}

/// The modules of one modules directory, in directory-name order.
fn modules_in(
    dir: &Path,
    common: &Map<String, Value>,
    flags: &AddonFlags,
) -> Result<Vec<Module>, ModulesError> {
    let unlisted = |error| ModulesError::Dir {
        dir: dir.to_path_buf(),
        error,
    };
    let entries = std::fs::read_dir(dir).map_err(unlisted)?;
    let mut paths: Vec<PathBuf> = Vec::new();
    for entry in entries {
        let entry = entry.map_err(unlisted)?;
        let path = entry.path();
        let file_name = entry.file_name().to_string_lossy().into_owned();
        if file_name.starts_with('.') || file_name == "values.yaml" {
            continue;
        }
        // Follows symlinks; a dangling one is skipped with a warning.
        match std::fs::metadata(&path) {
            Ok(m) if m.is_dir() => paths.push(path),
            Ok(_) => log::warn(
                "not a module directory, skipped",
                &[("path", &path.display().to_string())],
            ),
            Err(e) => log::warn(
                "cannot read module directory, skipped",
                &[
                    ("path", &path.display().to_string()),
                    ("error", &e.to_string()),
                ],
            ),
        }
    }
    paths.sort();
    paths
        .into_iter()
        .map(|p| load_module(&p, common, flags))
        .collect()
}

fn load_module(
    path: &Path,
    common: &Map<String, Value>,
    flags: &AddonFlags,
) -> Result<Module, ModulesError> {
    let dir_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let bad_name = |problem| ModulesError::DirName {
        path: path.to_path_buf(),
        problem,
    };
    let (order, name) = parse_dir_name(&dir_name).map_err(bad_name)?;
    crate::addon::modules::chart_dir::check_release_name(path, &name)?;
    let key = values_key(&name);
    let own = read_values_file(&path.join("values.yaml"), flags.strict_values)?;
    let mut static_values = Value::Object(Map::new());
    let mut static_enabled = None;
    for (file, values) in [
        (path.parent().unwrap_or(path).join("values.yaml"), common),
        (path.join("values.yaml"), &own),
    ] {
        if let Some(section) = values.get(&key) {
            if !section.is_object() && !section.is_null() {
                return Err(ModulesError::file(file, format!("'{key}' must be a map")));
            }
            merge(&mut static_values, section);
        }
        let flag = format!("{key}Enabled");
        match values.get(&flag) {
            None | Some(Value::Null) => {}
            Some(Value::Bool(b)) => static_enabled = Some(*b),
            Some(other) => {
                let problem = format!("'{flag}' must be true or false, got {other}");
                return Err(ModulesError::file(file, problem));
            }
        }
    }
    let schemas = Schemas::load(&path.join("openapi"), &name)?;
    Ok(Module {
        order: order.unwrap_or(flags.unnumbered_order),
        has_chart: path.join("Chart.yaml").is_file() || path.join("templates").is_dir(),
        enabled_script: enabled_script(path),
        name,
        key,
        path: path.to_path_buf(),
        chart: path.to_path_buf(),
        static_values,
        static_enabled,
        schemas,
        drift: drift_settings::Settings::load(path)?,
    })
}

/// The module's `enabled` file; one that is not executable is an error, as in
/// flant v1.0 (a silently ignored script would enable a module it meant to veto).
fn enabled_script(module: &Path) -> Option<PathBuf> {
    let path = module.join("enabled");
    path.is_file().then_some(path)
}

/// A `values.yaml` as a map; absent is empty unless `strict` (then an error).
fn read_values_file(path: &Path, strict: bool) -> Result<Map<String, Value>, ModulesError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !strict => return Ok(Map::new()),
        Err(e) => return Err(ModulesError::file(path, e)),
    };
    match serde_yaml::from_str::<Value>(&text) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(Value::Null) => Ok(Map::new()),
        Ok(_) => Err(ModulesError::file(path, "must be a map")),
        Err(e) => Err(ModulesError::file(path, format!("bad YAML: {e}"))),
    }
}

/// Who a hook in the operator's hook list belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owner {
    Global,
    Module(usize),
    /// The operator's own watch on its ConfigMap (not an executable).
    ConfigMap,
}

/// Directories under a module's `hooks/` that hold no hooks: `venv`, a Python
/// virtualenv whose `bin/` is full of executables (flant skips it too).
const MODULE_HOOKS_SKIPPED: &[&str] = &["venv"];

/// Loads global hooks, then every module's hooks; `owners[i]` tells whose hook `i` is.
/// Global hook names are relative to the global hooks root; module hook names to
/// the modules directory (`001-foo/hooks/bar.sh`), as in flant v1.0.
pub(crate) fn load_hooks(
    layout: &Layout,
    timeout: Option<Duration>,
    jq_library: Option<&Path>,
) -> Result<(Vec<Hook>, Vec<Owner>), ModulesError> {
    // (root the name is relative to, path, kind, owner), in the order hooks are kept.
    let mut found: Vec<(PathBuf, PathBuf, HookKind, Owner)> = Vec::new();
    let root = &layout.global_hooks_root;
    let global = |error| ModulesError::Hook {
        module: None,
        error,
    };
    for path in hook::discover(root).map_err(global)? {
        found.push((root.clone(), path, HookKind::Global, Owner::Global));
    }
    for (mi, module) in layout.modules.iter().enumerate() {
        let dir = module.path.join("hooks");
        if !dir.is_dir() {
            continue;
        }
        let root = module.path.parent().unwrap_or(&module.path);
        for path in hook::discover_skipping(&dir, MODULE_HOOKS_SKIPPED).map_err(global)? {
            found.push((
                root.to_path_buf(),
                path,
                HookKind::Module,
                Owner::Module(mi),
            ));
        }
    }
    // Their `--config` run a few at a time; the first error in that order wins.
    let width = crate::threads::startup_width();
    let loaded =
        crate::threads::map_parallel("hook-config", &found, width, |(root, path, kind, _)| {
            hook::load_as(root, path, timeout, jq_library, *kind)
        });
    let mut hooks = Vec::with_capacity(found.len());
    let mut owners = Vec::with_capacity(found.len());
    for (result, (_, _, _, owner)) in loaded.into_iter().zip(found) {
        hooks.push(result.map_err(|error| ModulesError::Hook {
            module: match owner {
                Owner::Module(mi) => Some(layout.modules[mi].name.clone()),
                _ => None,
            },
            error,
        })?);
        owners.push(owner);
    }
    Ok((hooks, owners))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn flags(dirs: Vec<PathBuf>, global: PathBuf) -> AddonFlags {
        AddonFlags {
            modules_dirs: dirs,
            global_hooks_dir: global,
            unnumbered_order: 1,
            config_map: "addon-operator".into(),
            strict_values: false,
            helm_bin: "helm".into(),
            helm_history_max: 10,
            flant_checksum: false,
            settings_resources: false,
            helm_timeout: Duration::from_secs(300),
            helm_ignore_release: String::new(),
            resources_check_period: Duration::from_secs(270),
            monitor_qps: 5.0,
            monitor_burst: 10,
            drift_mode: "warn".into(),
            module_run_parallelism: 2,
            crd_extra_labels: String::new(),
            crd_filters: String::new(),
            ignored: Vec::new(),
        }
    }

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }

    fn temp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("ao-modules-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("mkdir");
        d
    }

    #[test]
    fn modules_are_ordered_named_and_their_static_values_merged() {
        let d = temp("order");
        write(&d.join("global/hooks/.keep"), "");
        write(
            &d.join("modules/values.yaml"),
            "global:\n  param1: 100\nsomeModuleEnabled: true\nsomeModule:\n  a: 1\n  b: 1\n",
        );
        write(
            &d.join("modules/001-some-module/values.yaml"),
            "someModule:\n  b: 2\nsomeModuleEnabled: false\n",
        );
        write(
            &d.join("modules/002-other/Chart.yaml"),
            "name: other\nversion: 0.0.1\n",
        );
        write(&d.join("modules/unnumbered/templates/cm.yaml"), "");
        let store = d.join("store/000-linked");
        write(&store.join("values.yaml"), "");
        std::os::unix::fs::symlink(&store, d.join("modules/000-linked")).expect("symlink");
        let layout = discover(&flags(vec![d.join("modules")], d.join("global"))).expect("discover");
        let names: Vec<(&str, u32)> = layout
            .modules
            .iter()
            .map(|m| (m.name.as_str(), m.order))
            .collect();
        assert_eq!(
            names,
            vec![
                ("linked", 0),
                ("some-module", 1),
                ("unnumbered", 1),
                ("other", 2)
            ]
        );
        let some = &layout.modules[1];
        assert_eq!(some.key, "someModule");
        assert_eq!(some.static_values, serde_json::json!({"a": 1, "b": 2}));
        assert_eq!(
            some.static_enabled,
            Some(false),
            "the module's own values.yaml wins"
        );
        assert!(!some.has_chart);
        assert!(layout.modules[2].has_chart && layout.modules[3].has_chart);
        assert_eq!(layout.global_static, serde_json::json!({"param1": 100}));
        assert_eq!(layout.global_hooks_root, d.join("global/hooks"));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn duplicates_and_bad_flags_name_the_files() {
        let d = temp("dup");
        write(&d.join("a/001-foo/values.yaml"), "");
        write(&d.join("b/002-foo/values.yaml"), "");
        write(&d.join("global/x"), "");
        let err = discover(&flags(vec![d.join("a"), d.join("b")], d.join("global")))
            .expect_err("dup")
            .to_string();
        assert!(err.contains("001-foo") && err.contains("002-foo"), "{err}");
        write(&d.join("c/values.yaml"), "fooEnabled: \"yes\"\n");
        write(&d.join("c/001-foo/hooks/.keep"), "");
        let err = discover(&flags(vec![d.join("c")], d.join("global")))
            .expect_err("string flag")
            .to_string();
        assert!(
            err.contains("fooEnabled") && err.contains("c/values.yaml"),
            "{err}"
        );
        let mut strict = flags(vec![d.join("c")], d.join("global"));
        strict.strict_values = true;
        std::fs::write(d.join("c/values.yaml"), "").expect("fix");
        let err = discover(&strict).expect_err("strict").to_string();
        assert!(err.contains("001-foo/values.yaml"), "{err}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn hooks_of_modules_are_named_from_the_modules_dir() {
        let d = temp("hooks");
        let hook = "#!/bin/sh\necho '{\"configVersion\":\"v1\",\"beforeHelm\":1}'\n";
        write(&d.join("m/001-foo/hooks/a.sh"), hook);
        write(
            &d.join("g/hooks/b.sh"),
            "#!/bin/sh\necho '{\"configVersion\":\"v1\",\"beforeAll\":1}'\n",
        );
        for p in [d.join("m/001-foo/hooks/a.sh"), d.join("g/hooks/b.sh")] {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        }
        let layout = discover(&flags(vec![d.join("m")], d.join("g"))).expect("discover");
        let (hooks, owners) = load_hooks(&layout, None, None).expect("load");
        let names: Vec<&str> = hooks.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, vec!["b.sh", "001-foo/hooks/a.sh"]);
        assert_eq!(owners, vec![Owner::Global, Owner::Module(0)]);
        assert_eq!(hooks[1].config.lifecycle.before_helm, Some(1.0));
        let _ = std::fs::remove_dir_all(&d);
    }
}
