//! The files hooks answer webhooks with, parsed strictly enough that every
//! mistake becomes a clear message: `$VALIDATING_RESPONSE_PATH`
//! (`{"allowed", "message"?, "warnings"?, "patch"?}`, the patch being base64 of
//! a JSON-patch array) and `$CONVERSION_RESPONSE_PATH`
//! (`{"convertedObjects": [...]}` or `{"failedMessage": "..."}`). Unknown keys
//! are ignored, as in flant. Pure functions, called by the handler threads.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::Deserialize;
use serde_json::Value;

/// A hook's admission answer.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct AdmissionAnswer {
    pub(crate) allowed: bool,
    pub(crate) message: String,
    pub(crate) warnings: Vec<String>,
    /// Base64 of a JSON-patch array, checked to decode to one.
    pub(crate) patch: Option<String>,
}

#[derive(Deserialize)]
struct RawAdmission {
    #[serde(default)]
    allowed: bool,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    warnings: Option<Vec<String>>,
    #[serde(default)]
    patch: Option<Value>,
}

/// Parses the admission response file. `Err` is a message for the API client.
pub(crate) fn admission(bytes: &[u8]) -> Result<AdmissionAnswer, ResponseError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err("the response file $VALIDATING_RESPONSE_PATH is empty".into());
    }
    let raw: RawAdmission = serde_json::from_slice(bytes).map_err(|e| {
        ResponseError::from(format!(
            "the response file $VALIDATING_RESPONSE_PATH is not valid: {e}"
        ))
    })?;
    let patch = match raw.patch {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => Some(check_patch(&s)?),
        // A JSON-patch array written as JSON is accepted too (flant requires base64).
        Some(v @ Value::Array(_)) => Some(STANDARD.encode(v.to_string())),
        Some(_) => return Err("'patch' must be a base64 string of a JSON patch".into()),
    };
    Ok(AdmissionAnswer {
        allowed: raw.allowed,
        message: raw.message.unwrap_or_default(),
        warnings: raw.warnings.unwrap_or_default(),
        patch,
    })
}

/// Checks that `b64` decodes to a JSON array; returns it unchanged.
fn check_patch(b64: &str) -> Result<String, ResponseError> {
    let bytes = STANDARD
        .decode(b64.trim())
        .map_err(|e| ResponseError::from(format!("'patch' is not base64: {e}")))?;
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Array(_)) => Ok(b64.trim().to_string()),
        Ok(_) => Err("'patch' does not decode to a JSON-patch array".into()),
        Err(e) => Err(format!("'patch' does not decode to JSON: {e}").into()),
    }
}

/// A hook's conversion answer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ConversionAnswer {
    Converted(Vec<Value>),
    Failed(String),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawConversion {
    #[serde(default)]
    converted_objects: Option<Vec<Value>>,
    #[serde(default)]
    failed_message: Option<String>,
}

/// Parses the conversion response file. `Err` is a message for the API client.
pub(crate) fn conversion(bytes: &[u8]) -> Result<ConversionAnswer, ResponseError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err("the response file $CONVERSION_RESPONSE_PATH is empty".into());
    }
    let raw: RawConversion = serde_json::from_slice(bytes).map_err(|e| {
        ResponseError::from(format!(
            "the response file $CONVERSION_RESPONSE_PATH is not valid: {e}"
        ))
    })?;
    match (raw.failed_message, raw.converted_objects) {
        (Some(m), _) if !m.is_empty() => Ok(ConversionAnswer::Failed(m)),
        (_, Some(objects)) => Ok(ConversionAnswer::Converted(objects)),
        _ => Err(
            "the response file $CONVERSION_RESPONSE_PATH has neither convertedObjects nor failedMessage"
                .into(),
        ),
    }
}

/// Why a hook's admission or conversion response file was refused: the field and the problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResponseError {
    problem: String,
}

impl From<String> for ResponseError {
    fn from(problem: String) -> ResponseError {
        ResponseError { problem }
    }
}

impl From<&str> for ResponseError {
    fn from(problem: &str) -> ResponseError {
        ResponseError::from(problem.to_string())
    }
}

impl std::fmt::Display for ResponseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.problem)
    }
}

impl std::error::Error for ResponseError {}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn admission_answers() {
        assert_eq!(
            admission(br#"{"allowed":true,"extra":1}"#),
            Ok(AdmissionAnswer {
                allowed: true,
                ..Default::default()
            })
        );
        let deny =
            admission(br#"{"allowed":false,"message":"no","warnings":["w"]}"#).expect("valid");
        assert_eq!((deny.message.as_str(), deny.warnings.len()), ("no", 1));
        let b64 = STANDARD.encode(r#"[{"op":"add","path":"/x","value":1}]"#);
        let with_patch =
            admission(format!(r#"{{"allowed":true,"patch":"{b64}"}}"#).as_bytes()).expect("valid");
        assert_eq!(with_patch.patch, Some(b64));
        let as_array =
            admission(br#"{"allowed":true,"patch":[{"op":"remove","path":"/x"}]}"#).expect("valid");
        assert_eq!(
            as_array.patch.map(|p| STANDARD.decode(p).expect("b64")),
            Some(br#"[{"op":"remove","path":"/x"}]"#.to_vec())
        );
    }

    #[test]
    fn admission_mistakes_are_explained() {
        let err = |b: &[u8]| admission(b).expect_err("invalid").to_string();
        assert!(err(b" \n").contains("is empty"));
        assert!(err(b"{allowed").contains("is not valid"));
        assert!(err(br#"{"allowed":true,"patch":"%%%"}"#).contains("not base64"));
        let obj = STANDARD.encode("{}");
        assert!(err(format!(r#"{{"allowed":true,"patch":"{obj}"}}"#).as_bytes()).contains("array"));
    }

    #[test]
    fn conversion_answers() {
        assert_eq!(
            conversion(br#"{"convertedObjects":[{"a":1}]}"#),
            Ok(ConversionAnswer::Converted(vec![json!({"a":1})]))
        );
        assert_eq!(
            conversion(br#"{"failedMessage":"nope"}"#),
            Ok(ConversionAnswer::Failed("nope".into()))
        );
        assert!(conversion(b"").is_err());
        assert!(conversion(b"{}").is_err());
        assert!(conversion(b"[").is_err());
    }
}
