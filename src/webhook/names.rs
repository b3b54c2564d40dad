//! Webhook names and paths: flant's `SafeURLString` (binding name → URL path
//! segment) and the split of a request path into (configuration id, webhook id).
//! Pure functions, used at startup (routing table, registration) and by the
//! admission handler threads; also the check that a review carries its uid.

/// The configuration id of every admission webhook path: `/hooks/<webhook id>`.
/// It is also the suffix of the configuration objects' names (`<name>-hooks`).
pub(crate) const CONFIGURATION_ID: &str = "hooks";

/// flant's `SafeURLString`: a `-` before each uppercase letter, lowercase, every
/// character outside `[a-z0-9-/]` becomes `-`, runs of `-` collapse to one.
pub(crate) fn safe_url_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 4);
    let mut push = |c: char| {
        if !(c == '-' && out.ends_with('-')) {
            out.push(c);
        }
    };
    for c in s.chars() {
        if c.is_uppercase() {
            push('-');
        }
        for l in c.to_lowercase() {
            match l {
                'a'..='z' | '0'..='9' | '/' => push(l),
                _ => push('-'),
            }
        }
    }
    out
}

/// Splits a request path into (configuration id, webhook id): the first
/// non-empty segment, and the remaining non-empty segments joined with `/`.
pub(crate) fn split_path(path: &str) -> (String, String) {
    let mut segments = path.split('/').filter(|s| !s.is_empty());
    let first = segments.next().unwrap_or_default().to_string();
    let rest: Vec<&str> = segments.collect();
    (first, rest.join("/"))
}

/// The admission path of a binding: `/hooks/<SafeURLString(name)>`.
pub(crate) fn admission_path(binding: &str) -> String {
    format!("/{CONFIGURATION_ID}/{}", safe_url_string(binding))
}

/// Whether a review's `request` has the non-empty string `uid` its answer must
/// carry: the API server matches the response by it, so a review without one is
/// refused (400) rather than answered with an empty uid.
pub(crate) fn has_uid(request: &serde_json::Value) -> bool {
    request
        .get("uid")
        .and_then(serde_json::Value::as_str)
        .is_some_and(|uid| !uid.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The examples of flant's tests (spec §7).
    #[test]
    fn safe_url_string_matches_flant() {
        let cases = [
            ("importantHook", "important-hook"),
            ("hooks/nextHook", "hooks/next-hook"),
            ("weird spaced Name", "weird-spaced-name"),
            ("weird---dashed---Name", "weird-dashed-name"),
            ("utf8 странное имя для binding", "utf8-binding"),
            (
                "my-crd-validator.example.com",
                "my-crd-validator-example-com",
            ),
            ("Leading", "-leading"),
        ];
        for (input, want) in cases {
            assert_eq!(safe_url_string(input), want, "{input:?}");
        }
    }

    #[test]
    fn path_split_matches_flant() {
        let cases = [
            ("/azaa/qqqq", ("azaa", "qqqq")),
            (
                "/hooks/hook-name/my-crd-validator",
                ("hooks", "hook-name/my-crd-validator"),
            ),
            ("/hooks/", ("hooks", "")),
            ("////", ("", "")),
            ("", ("", "")),
            ("/", ("", "")),
        ];
        for (path, (conf, id)) in cases {
            assert_eq!(
                split_path(path),
                (conf.to_string(), id.to_string()),
                "{path:?}"
            );
        }
    }

    #[test]
    fn admission_path_uses_the_safe_name() {
        assert_eq!(
            admission_path("private-repo-policy.example.com"),
            "/hooks/private-repo-policy-example-com"
        );
    }
}
