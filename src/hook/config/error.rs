//! `ConfigError`: every problem found in one hook's `--config` output. Parsing
//! collects all problems instead of stopping at the first, so a user can fix a
//! config in one go. Each problem says where it is (binding type, index and
//! name) and which field, then what is wrong and what is accepted.

use std::fmt;

/// One problem in a hook config.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Problem {
    /// Where: `schedule[1] "every-min"`, `kubernetes[0]`, or empty for the top level.
    pub(crate) at: String,
    /// Field path inside `at`, e.g. `labelSelector.matchExpressions[0].operator`;
    /// empty when the problem is about the whole binding or config.
    pub(crate) field: String,
    /// What is wrong and what is accepted.
    pub(crate) message: String,
}

/// All problems in one hook's config; displayed one problem per line, each line
/// starting with `hook '<name>':`.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError {
    hook: String,
    problems: Vec<Problem>,
}

impl ConfigError {
    /// An error made of the given problems (at least one).
    pub(crate) fn new(hook: &str, problems: Vec<Problem>) -> Self {
        ConfigError {
            hook: hook.to_owned(),
            problems,
        }
    }

    #[cfg(test)]
    /// The hook name the error is about.
    pub(crate) fn hook(&self) -> &str {
        &self.hook
    }

    #[cfg(test)]
    /// Every problem found, in config order.
    pub(crate) fn problems(&self) -> &[Problem] {
        &self.problems
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.at.is_empty() {
            write!(f, "{}: ", self.at)?;
        }
        if !self.field.is_empty() {
            write!(f, "field '{}': ", self.field)?;
        }
        f.write_str(&self.message)
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "hook '{}': {p}", self.hook)?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}
