//! Validation of list and watch query options, with the rules and messages of
//! the real server's ListOptions validation: `sendInitialEvents` needs
//! `resourceVersionMatch=NotOlderThan` on a watch and is forbidden on a list;
//! `resourceVersionMatch` on a watch needs `sendInitialEvents`; on a list it
//! needs a `resourceVersion`, and `Exact` is forbidden at `"0"`. Failures are
//! 422 Invalid, so clients that get these combinations wrong fail here as they
//! would against a cluster.

use crate::http::Request;
use crate::status::ApiError;

const NOT_OLDER_THAN: &str = "NotOlderThan";

/// Checks the options of a list (`watch == false`) or watch request.
pub fn validate(req: &Request, watch: bool) -> Result<(), ApiError> {
    let errs = if watch {
        watch_errors(req)
    } else {
        list_errors(req)
    };
    match errs.as_slice() {
        [] => Ok(()),
        [one] => Err(invalid(one)),
        many => Err(invalid(&format!("[{}]", many.join(", ")))),
    }
}

fn invalid(detail: &str) -> ApiError {
    ApiError::invalid(format!("ListOptions.meta.k8s.io \"\" is invalid: {detail}"))
}

fn unsupported(value: &str, supported: &str) -> String {
    format!("resourceVersionMatch: Unsupported value: {value:?}: supported values: {supported}")
}

fn watch_errors(req: &Request) -> Vec<String> {
    let mut errs = Vec::new();
    let matched = req.param("resourceVersionMatch").unwrap_or("");
    let initial = req.param("sendInitialEvents").is_some();
    if initial && matched != NOT_OLDER_THAN {
        errs.push(format!(
            "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to {NOT_OLDER_THAN}"
        ));
    }
    if !matched.is_empty() {
        if !initial {
            errs.push(
                "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"
                    .to_string(),
            );
        }
        if matched != NOT_OLDER_THAN {
            errs.push(unsupported(matched, "\"NotOlderThan\""));
        }
        if req.param("continue").is_some_and(|c| !c.is_empty()) {
            errs.push(
                "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided"
                    .to_string(),
            );
        }
    }
    errs
}

fn list_errors(req: &Request) -> Vec<String> {
    let mut errs = Vec::new();
    let matched = req.param("resourceVersionMatch").unwrap_or("");
    let rv = req.param("resourceVersion").unwrap_or("");
    if !matched.is_empty() {
        if rv.is_empty() {
            errs.push(
                "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"
                    .to_string(),
            );
        }
        if matched != "Exact" && matched != NOT_OLDER_THAN {
            errs.push(unsupported(matched, "\"Exact\", \"NotOlderThan\", \"\""));
        }
        if matched == "Exact" && rv == "0" {
            errs.push(
                "resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""
                    .to_string(),
            );
        }
    }
    if req.param("sendInitialEvents").is_some() {
        errs.push(
            "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list".to_string(),
        );
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(q: &[(&str, &str)]) -> Request {
        Request {
            query: q
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn watch_rules() {
        assert!(validate(&req(&[]), true).is_ok());
        let ok = [
            ("sendInitialEvents", "true"),
            ("resourceVersionMatch", "NotOlderThan"),
        ];
        assert!(validate(&req(&ok), true).is_ok());
        let e = validate(&req(&[("sendInitialEvents", "true")]), true).unwrap_err();
        assert_eq!(e.code, 422);
        assert!(
            e.message.ends_with(
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
            )
        );
        let e = validate(&req(&[("resourceVersionMatch", "NotOlderThan")]), true).unwrap_err();
        assert!(e.message.contains("unless sendInitialEvents is provided"));
        let e = validate(
            &req(&[
                ("sendInitialEvents", "true"),
                ("resourceVersionMatch", "Exact"),
            ]),
            true,
        )
        .unwrap_err();
        assert!(
            e.message.contains("[resourceVersionMatch: Forbidden")
                && e.message.contains("Unsupported value: \"Exact\"")
        );
    }

    #[test]
    fn list_rules() {
        assert!(
            validate(
                &req(&[("resourceVersion", "5"), ("resourceVersionMatch", "Exact")]),
                false
            )
            .is_ok()
        );
        assert!(validate(&req(&[("resourceVersionMatch", "Exact")]), false).is_err());
        assert!(
            validate(
                &req(&[("resourceVersion", "0"), ("resourceVersionMatch", "Exact")]),
                false
            )
            .is_err()
        );
        assert!(validate(&req(&[("sendInitialEvents", "true")]), false).is_err());
    }
}
