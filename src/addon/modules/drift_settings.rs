//! A module's drift settings: `drift.yaml` in its directory (mode, ignore rules,
//! managers whose fields are theirs), read at discovery; what the drift watcher
//! (`release/drift/`) does with them is documented there and in docs/drift.md.

use serde::Deserialize;
use std::path::Path;

/// What the operator does about drift.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Mode {
    Off,
    Warn,
    Correct,
}

impl Mode {
    /// `--drift-mode` / `drift.yaml`'s `mode`.
    pub(crate) fn parse(text: &str) -> Result<Mode, String> {
        match text.trim() {
            "off" => Ok(Mode::Off),
            "warn" => Ok(Mode::Warn),
            "correct" => Ok(Mode::Correct),
            other => Err(format!("'{other}' is not off, warn or correct")),
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Mode::Off => "off",
            Mode::Warn => "warn",
            Mode::Correct => "correct",
        }
    }
}

/// A module's `drift.yaml`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Settings {
    /// Overrides `--drift-mode` for this module.
    #[serde(default)]
    pub(crate) mode: Option<Mode>,
    #[serde(default)]
    pub(crate) ignore: Vec<IgnoreRule>,
    /// Fields last set by these managers are theirs, never drift (besides
    /// [`DEFAULT_OWNERS`]).
    #[serde(default)]
    pub(crate) ignore_managers: Vec<String>,
}

/// Field managers whose fields are never drift: the HPA controller's replica count.
pub(crate) const DEFAULT_OWNERS: &[&str] = &["kube-controller-manager"];

/// Paths of matching objects that are never drift.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct IgnoreRule {
    /// Only objects of this kind (any when absent).
    #[serde(default)]
    pub(crate) kind: Option<String>,
    /// Only the object of this name (any when absent).
    #[serde(default)]
    pub(crate) name: Option<String>,
    pub(crate) paths: Vec<String>,
}

impl Settings {
    /// `<module>/drift.yaml`, default when absent; an error names the file and field.
    pub(crate) fn load(module_dir: &Path) -> Result<Settings, super::ModulesError> {
        use super::ModulesError;
        let path = module_dir.join("drift.yaml");
        let text = match crate::bounded_read::read_to_string(
            &path,
            crate::bounded_read::MAX_CONFIG_FILE,
        ) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Settings::default()),
            Err(e) => return Err(ModulesError::file(path, e)),
        };
        let settings: Settings = match serde_yaml::from_str::<Option<Settings>>(&text) {
            Ok(s) => s.unwrap_or_default(),
            Err(e) => return Err(ModulesError::file(path, e)),
        };
        for (i, rule) in settings.ignore.iter().enumerate() {
            if let Some(bad) = rule.paths.iter().find(|p| !p.starts_with('/')) {
                let problem =
                    format!("ignore[{i}].paths: '{bad}' must start with '/' (e.g. /spec/replicas)");
                return Err(ModulesError::file(path, problem));
            }
        }
        Ok(settings)
    }

    /// The ignored paths of an object of `kind` named `name`.
    pub(crate) fn ignored(&self, kind: &str, name: &str) -> Vec<String> {
        let applies = |r: &&IgnoreRule| {
            r.kind.as_deref().is_none_or(|k| k == kind)
                && r.name.as_deref().is_none_or(|n| n == name)
        };
        let rules = self.ignore.iter().filter(applies);
        rules.flat_map(|r| r.paths.iter().cloned()).collect()
    }

    /// Whether a field last set by `manager` belongs to it.
    pub(crate) fn owned_by_other(&self, manager: &str) -> bool {
        DEFAULT_OWNERS.contains(&manager) || self.ignore_managers.iter().any(|m| m == manager)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drift_yaml_is_read_and_bad_fields_are_named() {
        let dir = std::env::temp_dir().join(format!("ao-drift-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let dir = dir.as_path();
        assert_eq!(Settings::load(dir).ok(), Some(Settings::default()));
        let file = dir.join("drift.yaml");
        std::fs::write(
            &file,
            "mode: correct\nignore:\n- kind: Deployment\n  paths: [/spec/replicas]\nignoreManagers: [fighter]\n",
        )
        .unwrap();
        let s = Settings::load(dir).unwrap();
        assert_eq!(s.mode, Some(Mode::Correct));
        assert_eq!(s.ignored("Deployment", "web"), ["/spec/replicas"]);
        assert!(s.ignored("Service", "web").is_empty());
        assert!(s.owned_by_other("fighter") && s.owned_by_other("kube-controller-manager"));
        std::fs::write(&file, "mode: fix\n").unwrap();
        let e = Settings::load(dir).unwrap_err().to_string();
        assert!(e.contains("drift.yaml") && e.contains("mode"), "{e}");
        std::fs::write(&file, "ignore:\n- paths: [spec.replicas]\n").unwrap();
        let e = Settings::load(dir).unwrap_err().to_string();
        assert!(e.contains("ignore[0].paths"), "{e}");
        std::fs::write(&file, "ignor: []\n").unwrap();
        assert!(
            Settings::load(dir)
                .unwrap_err()
                .to_string()
                .contains("ignor")
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn modes_parse() {
        assert_eq!(Mode::parse("correct"), Ok(Mode::Correct));
        assert!(Mode::parse("on").unwrap_err().contains("'on'"));
    }
}
