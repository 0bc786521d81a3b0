//! Queue message schemas: typed, versioned, validated. A body that is too
//! large, not JSON, of an unknown version or missing a field is a permanent
//! failure (structured log, metric, then the DLQ through redrive).

use serde::{de::DeserializeOwned, Deserialize, Serialize};

/// The only message version this build reads and writes.
pub const VERSION: u64 = 1;

/// Bodies above this size are refused (SQS allows 256 KiB; ours are tiny).
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// Work for the suggestions Lambda.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase", deny_unknown_fields)]
pub enum SuggestionJob {
    /// A job became open: score it against the city's seekers.
    #[serde(rename_all = "camelCase")]
    JobOpened { city: String, job_sk: String },
    /// A job closed or was deleted: delete its suggestions.
    #[serde(rename_all = "camelCase")]
    JobClosed { city: String, job_id: String },
    /// A seeker profile was created or its city/skills/salary/categories
    /// changed: rescore the seeker against the city's recent jobs.
    #[serde(rename_all = "camelCase")]
    SeekerChanged { seeker_id: String },
    /// A seeker requested a job: the pair is no longer suggested.
    #[serde(rename_all = "camelCase")]
    PairRequested {
        city: String,
        job_id: String,
        seeker_id: String,
    },
}

/// Work for the matches Lambda: an approved request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MatchJob {
    pub employer_id: String,
    pub job_id: String,
    pub seeker_id: String,
    pub city: String,
    pub posted_at: String,
    pub zip: String,
    /// The approval day: the match's date (deterministic across redeliveries).
    pub matched_at: String,
}

/// Why a body was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    #[error("body of {0} bytes is over the {MAX_BODY_BYTES}-byte limit")]
    TooLarge(usize),
    #[error("body is not a JSON object: {0}")]
    NotJson(String),
    #[error("missing field `version`")]
    NoVersion,
    #[error("unknown version {0} (this build reads {VERSION})")]
    UnknownVersion(String),
    #[error("invalid message: {0}")]
    Invalid(String),
}

/// Serialises a message with its version.
pub fn encode<T: Serialize>(message: &T) -> String {
    let mut v = serde_json::to_value(message).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.insert("version".into(), VERSION.into());
    }
    v.to_string()
}

/// Parses and validates a body.
pub fn decode<T: DeserializeOwned>(body: &str) -> Result<T, BodyError> {
    if body.len() > MAX_BODY_BYTES {
        return Err(BodyError::TooLarge(body.len()));
    }
    let mut v: serde_json::Value =
        serde_json::from_str(body).map_err(|e| BodyError::NotJson(e.to_string()))?;
    let o = v
        .as_object_mut()
        .ok_or_else(|| BodyError::NotJson("not an object".into()))?;
    match o.remove("version") {
        None => return Err(BodyError::NoVersion),
        Some(serde_json::Value::Number(n)) if n.as_u64() == Some(VERSION) => {}
        Some(other) => return Err(BodyError::UnknownVersion(other.to_string())),
    }
    let parsed: T = serde_json::from_value(v).map_err(|e| BodyError::Invalid(e.to_string()))?;
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_carries_the_version() {
        let job = SuggestionJob::SeekerChanged {
            seeker_id: "201".into(),
        };
        let body = encode(&job);
        assert_eq!(
            body,
            r#"{"kind":"seekerChanged","seekerId":"201","version":1}"#
        );
        assert_eq!(decode::<SuggestionJob>(&body), Ok(job));
    }

    #[test]
    fn bad_bodies_are_refused_with_a_reason() {
        assert_eq!(
            decode::<SuggestionJob>(r#"{"kind":"seekerChanged","seekerId":"1"}"#),
            Err(BodyError::NoVersion)
        );
        assert!(matches!(
            decode::<SuggestionJob>(r#"{"version":2,"kind":"seekerChanged","seekerId":"1"}"#),
            Err(BodyError::UnknownVersion(v)) if v == "2"
        ));
        assert!(
            matches!(decode::<SuggestionJob>(r#"{"version":1,"kind":"seekerChanged"}"#), Err(BodyError::Invalid(m)) if m.contains("seekerId"))
        );
        assert!(matches!(
            decode::<SuggestionJob>("not json"),
            Err(BodyError::NotJson(_))
        ));
        assert!(matches!(
            decode::<MatchJob>(&"x".repeat(MAX_BODY_BYTES + 1)),
            Err(BodyError::TooLarge(_))
        ));
        assert!(matches!(
            decode::<MatchJob>(
                r#"{"version":1,"employerId":"e","jobId":"j","seekerId":"s","city":"c","postedAt":"d","zip":"z","matchedAt":"m","extra":1}"#
            ),
            Err(BodyError::Invalid(_))
        ));
    }
}
