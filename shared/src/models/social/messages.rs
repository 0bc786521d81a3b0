//! Timeline job bodies: typed, versioned, validated. A body that is too
//! large, not JSON, of an unknown version, missing a field or naming an id
//! that cannot be in a key is a permanent failure (logged, counted, then the
//! DLQ through redrive).

use serde::{Deserialize, Serialize};

use super::keys;
use crate::sqs::MessageError;

/// The only message version this build reads and writes.
pub const VERSION: u64 = 1;

/// Bodies above this size are refused (ours are under 200 bytes).
pub const MAX_BODY_BYTES: usize = 4 * 1024;

/// Work for the timeline consumer. Each names a scope whose entries the job
/// brings to what the facts imply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase", deny_unknown_fields)]
pub enum TimelineJob {
    /// A post was created, deleted or re-dated: its entries on the
    /// timelines of the author's followers, one page of followers (sort
    /// keys after `after`) per job; the next page is a follow-up job.
    #[serde(rename_all = "camelCase")]
    Post {
        author_id: String,
        post_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        after: Option<String>,
    },
    /// A follow was created or deleted: the author's entries on the
    /// follower's timeline.
    #[serde(rename_all = "camelCase")]
    Follow {
        follower_id: String,
        author_id: String,
    },
}

/// Serialises a job with its version.
pub fn encode(job: &TimelineJob) -> String {
    crate::engine::body::encode(job, VERSION)
}

fn permanent(kind: &'static str, reason: impl Into<String>) -> MessageError {
    MessageError::Permanent {
        kind,
        reason: reason.into(),
    }
}

pub fn decode(body: &str) -> Result<TimelineJob, MessageError> {
    let job: TimelineJob = crate::engine::body::decode(body, VERSION, MAX_BODY_BYTES)?;
    let ids_ok = match &job {
        TimelineJob::Post {
            author_id,
            post_id,
            after,
        } => {
            keys::valid_user_id(author_id)
                && keys::valid_ulid(post_id)
                && after.as_deref().is_none_or(|a| a.starts_with("u#"))
        }
        TimelineJob::Follow {
            follower_id,
            author_id,
        } => keys::valid_user_id(follower_id) && keys::valid_user_id(author_id),
    };
    if !ids_ok {
        return Err(permanent(
            "InvalidMessage",
            "an id cannot be part of a key (user ids: no `#`; post ids: ULIDs)",
        ));
    }
    Ok(job)
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: &str = "01HZY3M5X7Q8R9S0T1V2W3X4Y5";

    #[test]
    fn round_trips_carry_the_version() {
        let job = TimelineJob::Post {
            author_id: "a".into(),
            post_id: P.into(),
            after: None,
        };
        let body = encode(&job);
        assert_eq!(
            body,
            format!(r#"{{"authorId":"a","kind":"post","postId":"{P}","version":1}}"#)
        );
        assert_eq!(decode(&body).unwrap(), job);
        let next = TimelineJob::Post {
            author_id: "a".into(),
            post_id: P.into(),
            after: Some("u#f0999".into()),
        };
        assert_eq!(decode(&encode(&next)).unwrap(), next);
        let follow = TimelineJob::Follow {
            follower_id: "f".into(),
            author_id: "a".into(),
        };
        assert_eq!(
            encode(&follow),
            r#"{"authorId":"a","followerId":"f","kind":"follow","version":1}"#
        );
        assert_eq!(decode(&encode(&follow)).unwrap(), follow);
    }

    #[test]
    fn bad_bodies_are_permanent_with_a_reason() {
        let kind = |body: &str| match decode(body) {
            Err(MessageError::Permanent { kind, .. }) => kind,
            other => panic!("{other:?}"),
        };
        assert_eq!(kind("nope"), "NotJson");
        assert_eq!(kind("[1]"), "NotJson");
        assert_eq!(
            kind(r#"{"kind":"follow","followerId":"f","authorId":"a"}"#),
            "NoVersion"
        );
        assert_eq!(
            kind(r#"{"version":2,"kind":"follow","followerId":"f","authorId":"a"}"#),
            "UnknownVersion"
        );
        assert_eq!(
            kind(r#"{"version":1,"kind":"follow","followerId":"f"}"#),
            "InvalidMessage"
        );
        assert_eq!(
            kind(r#"{"version":1,"kind":"follow","followerId":"f","authorId":"a","x":1}"#),
            "InvalidMessage"
        );
        assert_eq!(
            kind(r#"{"version":1,"kind":"follow","followerId":"f#x","authorId":"a"}"#),
            "InvalidMessage"
        );
        assert_eq!(
            kind(r#"{"version":1,"kind":"post","authorId":"a","postId":"short"}"#),
            "InvalidMessage"
        );
        assert_eq!(kind(&"x".repeat(MAX_BODY_BYTES + 1)), "BodyTooLarge");
    }
}
