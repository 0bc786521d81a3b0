//! The scoring queue's message schema: typed, versioned, validated. A body
//! that is too large, not JSON, of an unknown version, missing a field or
//! naming an invalid event or user id is a permanent failure (structured
//! log, metric, then the DLQ through redrive).

use serde::{Deserialize, Serialize};

use super::entities::{valid_id, EventId};

/// The only message version this build reads and writes.
pub const VERSION: u64 = 1;

/// Bodies above this size are refused (SQS allows 256 KiB).
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// A chunk's users are cut so that its body stays under this size.
pub const CHUNK_BODY_BYTES: usize = 12 * 1024;

/// Users per chunk at most.
pub const CHUNK_USERS: usize = 200;

/// Work for the scoring consumer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase", deny_unknown_fields)]
pub enum ScoreJob {
    /// The event's matches changed: score every prediction of the event
    /// (listed through the GSI and fanned out as `predictions` chunks).
    #[serde(rename_all = "camelCase")]
    Event { event_id: String },
    /// Score these users' predictions for the event (a prediction inserted
    /// or whose picks changed, or one chunk of an event).
    #[serde(rename_all = "camelCase")]
    Predictions {
        event_id: String,
        users: Vec<String>,
    },
}

impl ScoreJob {
    pub fn event_id(&self) -> &str {
        match self {
            ScoreJob::Event { event_id } | ScoreJob::Predictions { event_id, .. } => event_id,
        }
    }
}

pub use crate::engine::body::BodyError;

/// Serialises a job with its version.
pub fn encode(job: &ScoreJob) -> String {
    crate::engine::body::encode(job, VERSION)
}

/// Parses and validates a body.
pub fn decode(body: &str) -> Result<ScoreJob, BodyError> {
    let job: ScoreJob = crate::engine::body::decode(body, VERSION, MAX_BODY_BYTES)?;
    if EventId::parse(job.event_id()).is_none() {
        return Err(BodyError::Invalid(
            "eventId is not <YYYY-MM-DD>-<slug>".into(),
        ));
    }
    if let ScoreJob::Predictions { users, .. } = &job {
        if users.is_empty() || users.len() > CHUNK_USERS || !users.iter().all(|u| valid_id(u)) {
            return Err(BodyError::Invalid(format!(
                "users must be 1..={CHUNK_USERS} valid user ids"
            )));
        }
    }
    Ok(job)
}

/// Chunks of users whose `predictions` bodies stay under the size limit.
pub fn chunks(event_id: &str, users: &[String]) -> Vec<ScoreJob> {
    let mut out = Vec::new();
    let mut current: Vec<String> = Vec::new();
    let mut size = 64 + event_id.len();
    for u in users {
        let extra = u.len() + 3;
        if !current.is_empty() && (current.len() == CHUNK_USERS || size + extra > CHUNK_BODY_BYTES)
        {
            out.push(ScoreJob::Predictions {
                event_id: event_id.to_string(),
                users: std::mem::take(&mut current),
            });
            size = 64 + event_id.len();
        }
        size += extra;
        current.push(u.clone());
    }
    if !current.is_empty() {
        out.push(ScoreJob::Predictions {
            event_id: event_id.to_string(),
            users: current,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sqs::MessageError;

    const EV: &str = "2024-03-03-aew-revolution";

    #[test]
    fn round_trip_carries_the_version() {
        let job = ScoreJob::Predictions {
            event_id: EV.into(),
            users: vec!["sam".into()],
        };
        let body = encode(&job);
        assert_eq!(
            body,
            r#"{"eventId":"2024-03-03-aew-revolution","kind":"predictions","users":["sam"],"version":1}"#
        );
        assert_eq!(decode(&body), Ok(job));
        let ev = ScoreJob::Event {
            event_id: EV.into(),
        };
        assert_eq!(decode(&encode(&ev)), Ok(ev));
    }

    #[test]
    fn bad_bodies_are_refused_with_a_reason() {
        assert_eq!(
            decode(r#"{"kind":"event","eventId":"2024-03-03-x"}"#),
            Err(BodyError::NoVersion)
        );
        assert!(matches!(
            decode(r#"{"version":2,"kind":"event","eventId":"2024-03-03-x"}"#),
            Err(BodyError::UnknownVersion { .. })
        ));
        assert!(matches!(
            decode(r#"{"version":1,"kind":"event","eventId":"yesterday"}"#),
            Err(BodyError::Invalid(_))
        ));
        assert!(matches!(
            decode(r#"{"version":1,"kind":"predictions","eventId":"2024-03-03-x","users":[]}"#),
            Err(BodyError::Invalid(_))
        ));
        assert!(matches!(
            decode(
                r#"{"version":1,"kind":"predictions","eventId":"2024-03-03-x","users":["a#b"]}"#
            ),
            Err(BodyError::Invalid(_))
        ));
        assert!(matches!(
            decode(r#"{"version":1,"kind":"event","eventId":"2024-03-03-x","extra":1}"#),
            Err(BodyError::Invalid(_))
        ));
        assert!(matches!(decode("nope"), Err(BodyError::NotJson(_))));
        assert!(matches!(
            decode(&"x".repeat(MAX_BODY_BYTES + 1)),
            Err(BodyError::TooLarge { .. })
        ));
        let e: MessageError = BodyError::NoVersion.into();
        assert!(matches!(
            e,
            MessageError::Permanent {
                kind: "NoVersion",
                ..
            }
        ));
    }

    #[test]
    fn chunks_cover_every_user_once_and_fit() {
        let users: Vec<String> = (0..1000).map(|i| format!("user-{i:05}")).collect();
        let jobs = chunks(EV, &users);
        assert_eq!(jobs.len(), 5);
        let mut seen = Vec::new();
        for j in &jobs {
            let body = encode(j);
            assert!(body.len() <= MAX_BODY_BYTES);
            assert_eq!(decode(&body).as_ref(), Ok(j));
            if let ScoreJob::Predictions { users, .. } = j {
                seen.extend(users.iter().cloned());
            }
        }
        assert_eq!(seen, users);
        let long: Vec<String> = (0..300).map(|i| format!("{i:0>120}")).collect();
        for j in chunks(EV, &long) {
            assert!(encode(&j).len() <= MAX_BODY_BYTES);
        }
        assert!(chunks(EV, &[]).is_empty());
    }
}
