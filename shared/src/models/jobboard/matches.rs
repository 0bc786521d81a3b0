//! Matches as a once effect: an approved request becomes exactly one match
//! item, and the pair's suggestion goes, in one transaction with a permanent
//! marker per (seeker, job) in the ledger (see [`crate::engine::once`]).
//!
//! Exactly one match per pair however often and however late the job is
//! delivered, whatever the approval day. A request no longer approved, or a
//! job or seeker that no longer exists, ends the message as a logged
//! `Skipped` instead of retrying it forever.

use super::keys;
use super::messages::{decode, MatchJob};
use super::suggestions::{key, pair_key, MATCHES};
use crate::engine::once::{Once, OncePlan};
use crate::engine::setjob::{BoxFut, Guard, Reads};
use crate::item::{s, Item};
use crate::sqs::MessageError;

/// The matches rule.
#[derive(Debug, Clone, Copy, Default)]
pub struct Matches;

/// The match item of an approved request.
pub fn match_item(m: &MatchJob) -> Item {
    [
        (keys::PK, s(keys::seeker_pk(&m.seeker_id))),
        (keys::SK, s(keys::match_sk(&m.matched_at, &m.job_id))),
        (keys::ENTITY_TYPE, s("match")),
        (keys::GSI1PK, s(keys::employer_pk(&m.employer_id))),
        (
            keys::GSI1SK,
            s(keys::match_gsi1sk(&m.matched_at, &m.job_id, &m.seeker_id)),
        ),
        ("jobId", s(&m.job_id)),
        ("seekerId", s(&m.seeker_id)),
        ("employerId", s(&m.employer_id)),
        ("city", s(&m.city)),
        ("postedAt", s(&m.posted_at)),
        ("zip", s(&m.zip)),
        ("matchedAt", s(&m.matched_at)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// What a match job does, given its body.
pub fn plan(m: &MatchJob) -> OncePlan {
    OncePlan {
        once_key: pair_key(&m.seeker_id, &m.job_id),
        checks: vec![
            (
                Guard::equals(
                    key(
                        keys::employer_pk(&m.employer_id),
                        keys::request_sk(&m.job_id, &m.seeker_id),
                    ),
                    "status",
                    s("approved"),
                ),
                format!("request {}/{} is not approved", m.job_id, m.seeker_id),
            ),
            (
                Guard::exists(key(
                    keys::job_pk(&m.city),
                    keys::job_sk(&m.posted_at, &m.zip, &m.job_id),
                )),
                format!("job {} no longer exists", m.job_id),
            ),
            (
                Guard::exists(key(keys::seeker_pk(&m.seeker_id), keys::PROFILE_SK.into())),
                format!("seeker {} no longer exists", m.seeker_id),
            ),
        ],
        puts: vec![match_item(m)],
        deletes: vec![key(
            keys::job_pk(&m.city),
            keys::suggestion_sk(&m.job_id, &m.seeker_id),
        )],
    }
}

impl Once for Matches {
    fn name(&self) -> &'static str {
        MATCHES
    }

    fn key_names(&self) -> &'static [&'static str] {
        &[keys::PK, keys::SK]
    }

    fn plan<'a>(
        &'a self,
        body: &'a str,
        _reads: &'a Reads,
    ) -> BoxFut<'a, Result<OncePlan, MessageError>> {
        Box::pin(async move {
            let m: MatchJob = decode(body)?;
            Ok(plan(&m))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_match_per_pair_whatever_the_day() {
        let mut m = MatchJob {
            employer_id: "301".into(),
            job_id: "101".into(),
            seeker_id: "201".into(),
            city: "montreal".into(),
            posted_at: "2026-11-01".into(),
            zip: "H2X".into(),
            matched_at: "2026-11-03".into(),
        };
        let a = plan(&m);
        m.matched_at = "2026-11-09".into();
        let b = plan(&m);
        assert_eq!(a.once_key, "201#101");
        assert_eq!(a.once_key, b.once_key, "the marker ignores the day");
        assert_eq!(a.checks.len(), 3);
        let item = &a.puts[0];
        assert_eq!(item["pk"], s("seeker#201"));
        assert_eq!(item["sk"], s("j#2026-11-03#101"));
        assert_eq!(item["GSI1SK"], s("m#2026-11-03#101#201"));
        assert_eq!(item.len(), 12);
        assert_eq!(a.deletes[0]["sk"], s("s#101#201"));
    }
}
