//! Job bodies: JSON objects with a `version` field and a size limit, shared
//! by every model's queues. A body that is too large, not a JSON object or
//! missing a field is bad input whose retry cannot help (structured log,
//! metric, skipped: SPEC §2.7). A body of another version is the one a
//! retry can help (another deployment of the consumer reads it): logged,
//! counted, then the DLQ through redrive.

use serde::{de::DeserializeOwned, Serialize};

use crate::sqs::MessageError;

/// Why a body was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    #[error("body of {size} bytes is over the {limit}-byte limit")]
    TooLarge { size: usize, limit: usize },
    #[error("body is not a JSON object: {0}")]
    NotJson(String),
    #[error("missing field `version`")]
    NoVersion,
    #[error("unknown version {found} (this build reads {reads})")]
    UnknownVersion { found: String, reads: u64 },
    #[error("invalid message: {0}")]
    Invalid(String),
}

impl BodyError {
    /// A short, stable name for metrics and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            BodyError::TooLarge { .. } => "BodyTooLarge",
            BodyError::NotJson(_) => "NotJson",
            BodyError::NoVersion => "NoVersion",
            BodyError::UnknownVersion { .. } => "UnknownVersion",
            BodyError::Invalid(_) => "InvalidMessage",
        }
    }
}

impl From<BodyError> for MessageError {
    fn from(e: BodyError) -> Self {
        let (kind, reason) = (e.kind(), e.to_string());
        match e {
            BodyError::UnknownVersion { .. } => MessageError::OtherVersion { kind, reason },
            _ => MessageError::Permanent { kind, reason },
        }
    }
}

/// Serialises `message` with `"version": version`.
pub fn encode<T: Serialize>(message: &T, version: u64) -> String {
    let mut v = serde_json::to_value(message).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.insert("version".into(), version.into());
    }
    v.to_string()
}

/// Parses a body of at most `limit` bytes written with `version`.
pub fn decode<T: DeserializeOwned>(body: &str, version: u64, limit: usize) -> Result<T, BodyError> {
    if body.len() > limit {
        return Err(BodyError::TooLarge {
            size: body.len(),
            limit,
        });
    }
    let mut v: serde_json::Value =
        serde_json::from_str(body).map_err(|e| BodyError::NotJson(e.to_string()))?;
    let o = v
        .as_object_mut()
        .ok_or_else(|| BodyError::NotJson("not an object".into()))?;
    match o.remove("version") {
        None => return Err(BodyError::NoVersion),
        Some(serde_json::Value::Number(n)) if n.as_u64() == Some(version) => {}
        Some(other) => {
            return Err(BodyError::UnknownVersion {
                found: other.to_string(),
                reads: version,
            })
        }
    }
    serde_json::from_value(v).map_err(|e| BodyError::Invalid(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Job {
        id: String,
    }

    #[test]
    fn round_trip_and_every_refusal_has_a_kind() {
        let body = encode(&Job { id: "a".into() }, 3);
        assert_eq!(body, r#"{"id":"a","version":3}"#);
        assert_eq!(decode::<Job>(&body, 3, 100), Ok(Job { id: "a".into() }));
        let kind = |r: Result<Job, BodyError>| r.unwrap_err().kind();
        assert_eq!(kind(decode(&body, 3, 5)), "BodyTooLarge");
        assert_eq!(kind(decode("[1]", 3, 100)), "NotJson");
        assert_eq!(kind(decode(r#"{"id":"a"}"#, 3, 100)), "NoVersion");
        assert_eq!(kind(decode(&body, 4, 100)), "UnknownVersion");
        assert_eq!(kind(decode(r#"{"version":3}"#, 3, 100)), "InvalidMessage");
        let e: MessageError = decode::<Job>("x", 3, 100).unwrap_err().into();
        assert!(matches!(
            e,
            MessageError::Permanent {
                kind: "NotJson",
                ..
            }
        ));
        let e: MessageError = decode::<Job>(&body, 4, 100).unwrap_err().into();
        assert!(matches!(
            e,
            MessageError::OtherVersion {
                kind: "UnknownVersion",
                ..
            }
        ));
    }
}
