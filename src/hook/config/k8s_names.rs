//! Kubernetes name syntax checks used by config validation: DNS-1123
//! subdomains (webhook names), qualified names (label keys) and label values.
//! Each returns `Err(reason)` with a sentence that says what is accepted.

const SUBDOMAIN_MAX: usize = 253;
const NAME_PART_MAX: usize = 63;

fn is_lower_alnum(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// One DNS-1123 label: lower-case alphanumerics and '-', alphanumeric at both ends.
fn is_dns_label(s: &str) -> bool {
    let ends_ok = s.starts_with(is_lower_alnum) && s.ends_with(is_lower_alnum);
    ends_ok && s.chars().all(|c| is_lower_alnum(c) || c == '-')
}

/// A DNS-1123 subdomain: dot-separated labels, at most 253 characters.
pub(crate) fn dns1123_subdomain(s: &str) -> Result<(), NameError> {
    if s.is_empty() || s.len() > SUBDOMAIN_MAX || !s.split('.').all(is_dns_label) {
        return Err(format!(
            "must be a lower-case DNS-1123 subdomain of at most {SUBDOMAIN_MAX} characters: \
             lower-case letters, digits, '-' and '.', starting and ending with a letter or digit"
        )
        .into());
    }
    Ok(())
}

/// A fully qualified DNS-1123 subdomain with at least three segments, as
/// Kubernetes requires for admission webhook names (`check.example.com`).
pub(crate) fn fully_qualified_name(s: &str) -> Result<(), NameError> {
    dns1123_subdomain(s)?;
    if s.split('.').count() < 3 {
        return Err("must be a fully qualified domain name with at least three \
                    dot-separated segments, like \"check.example.com\""
            .into());
    }
    Ok(())
}

fn is_alnum(c: char) -> bool {
    c.is_ascii_alphanumeric()
}

/// The name part of a qualified name or a non-empty label value.
fn is_name_part(s: &str) -> bool {
    let inner_ok = s
        .chars()
        .all(|c| is_alnum(c) || matches!(c, '-' | '_' | '.'));
    !s.is_empty()
        && s.len() <= NAME_PART_MAX
        && s.starts_with(is_alnum)
        && s.ends_with(is_alnum)
        && inner_ok
}

/// A qualified name (label key): `[prefix/]name`, where prefix is a DNS-1123
/// subdomain and name has at most 63 alphanumerics, '-', '_' or '.'.
pub(crate) fn qualified_name(s: &str) -> Result<(), NameError> {
    let (prefix, name) = match s.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    if let Some(p) = prefix {
        if dns1123_subdomain(p).is_err() {
            return Err(format!(
                "{s:?} is not a valid label key: the prefix before '/' must be a \
                 DNS-1123 subdomain"
            )
            .into());
        }
    }
    if !is_name_part(name) {
        return Err(format!(
            "{s:?} is not a valid label key: expected [prefix/]name where name has 1-63 \
             letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
        )
        .into());
    }
    Ok(())
}

/// A label value: empty, or like the name part of a qualified name.
pub(crate) fn label_value(s: &str) -> Result<(), NameError> {
    if s.is_empty() || is_name_part(s) {
        return Ok(());
    }
    Err(format!(
        "{s:?} is not a valid label value: expected at most 63 letters, digits, '-', '_' \
         or '.', starting and ending with a letter or digit (or empty)"
    )
    .into())
}

/// `schema.ParseGroupVersion`: empty, `version`, or `group/version`.
pub(crate) fn group_version(s: &str) -> Result<(), NameError> {
    if s.matches('/').count() > 1 {
        return Err("unexpected GroupVersion string: expected \"version\" or \
                    \"group/version\", like \"v1\" or \"apps/v1\""
            .into());
    }
    Ok(())
}

/// Why a Kubernetes name was refused: a sentence saying what is accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NameError {
    problem: String,
}

impl From<String> for NameError {
    fn from(problem: String) -> NameError {
        NameError { problem }
    }
}

impl From<&str> for NameError {
    fn from(problem: &str) -> NameError {
        NameError::from(problem.to_string())
    }
}

impl std::fmt::Display for NameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.problem)
    }
}

impl std::error::Error for NameError {}
