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
    /// The next page of a job's suggestions: seekers after `after`.
    #[serde(rename_all = "camelCase")]
    JobPage {
        city: String,
        job_id: String,
        /// The job's sort key, when known (a `jobClosed` names the id only).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        job_sk: Option<String>,
        after: String,
    },
    /// The next page of a seeker's suggestions: jobs after sort key `after`.
    #[serde(rename_all = "camelCase")]
    SeekerPage { seeker_id: String, after: String },
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

pub use crate::engine::body::BodyError;

/// Serialises a message with its version.
pub fn encode<T: Serialize>(message: &T) -> String {
    crate::engine::body::encode(message, VERSION)
}

/// Parses and validates a body.
pub fn decode<T: DeserializeOwned>(body: &str) -> Result<T, BodyError> {
    crate::engine::body::decode(body, VERSION, MAX_BODY_BYTES)
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
            Err(BodyError::UnknownVersion { found, .. }) if found == "2"
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
            Err(BodyError::TooLarge { .. })
        ));
        assert!(matches!(
            decode::<MatchJob>(
                r#"{"version":1,"employerId":"e","jobId":"j","seekerId":"s","city":"c","postedAt":"d","zip":"z","matchedAt":"m","extra":1}"#
            ),
            Err(BodyError::Invalid(_))
        ));
    }
}
