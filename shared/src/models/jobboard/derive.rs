//! Derived data of the job board maintained by the stream: GSI1 keys of
//! every entity that has them, and the asynchronous jobs (suggestions,
//! matches) that follow from a change.

use aws_sdk_dynamodb::types::AttributeValue;

use super::entities::{
    kind, matched_at, suggestion_level, Job, JobStatus, Kind, Pair, Request, RequestStatus, Seeker,
};
use super::keys;
use super::messages::{encode, MatchJob, SuggestionJob};
use crate::change::{Change, ChangeKind};
use crate::engine::rules::{OutMessage, Projection, Rules};
use crate::error::InputError;
use crate::item::{Item, ItemExt};

/// Logical queue names (mapped to URLs by configuration).
pub const SUGGESTIONS_QUEUE: &str = "suggestions";
pub const MATCHES_QUEUE: &str = "matches";

#[derive(Debug, Clone, Copy, Default)]
pub struct JobBoardDerive;

fn gsi1(pk: String, sk: String, sources: Vec<&'static str>) -> Option<Projection> {
    Some(Projection {
        attrs: vec![
            (keys::GSI1PK, Some(AttributeValue::S(pk))),
            (keys::GSI1SK, Some(AttributeValue::S(sk))),
        ],
        sources,
    })
}

fn parse<T>(
    image: &Option<Item>,
    f: impl Fn(&Item) -> Result<T, InputError>,
) -> Result<Option<T>, InputError> {
    image.as_ref().map(f).transpose()
}

/// The old image as a trigger sees it: one that was bad input implied
/// nothing, so a valid new image starts what it would start from nothing
/// (the old record was logged and counted when it came).
fn parse_old<T>(image: &Option<Item>, f: impl Fn(&Item) -> Result<T, InputError>) -> Option<T> {
    image.as_ref().and_then(|i| f(i).ok())
}

fn suggestion(job: SuggestionJob) -> OutMessage {
    OutMessage {
        queue: SUGGESTIONS_QUEUE,
        body: encode(&job),
    }
}

impl JobBoardDerive {
    fn job_messages(old: Option<Job>, new: Option<Job>) -> Vec<OutMessage> {
        let open = |j: &Option<Job>| j.as_ref().is_some_and(|j| j.status == JobStatus::Open);
        let mut out = Vec::new();
        match (&old, &new) {
            (_, Some(n)) if open(&new) => {
                // Everything a suggestion is scored from or copies.
                let scored_same = old.as_ref().is_some_and(|o| {
                    open(&old)
                        && o.title == n.title
                        && o.skills == n.skills
                        && o.category == n.category
                        && o.salary_max == n.salary_max
                });
                if !scored_same {
                    out.push(suggestion(SuggestionJob::JobOpened {
                        city: keys::normalize_city(&n.city),
                        job_sk: n.sk(),
                    }));
                }
            }
            (Some(o), _) if open(&old) => {
                out.push(suggestion(SuggestionJob::JobClosed {
                    city: keys::normalize_city(&o.city),
                    job_id: o.job_id.clone(),
                }));
            }
            _ => {}
        }
        out
    }
}

impl Rules for JobBoardDerive {
    fn key_names(&self) -> &'static [&'static str] {
        &[keys::PK, keys::SK]
    }

    fn projection(&self, image: &Item) -> Result<Option<Projection>, InputError> {
        Ok(match kind(image)? {
            Kind::Job => {
                let j = Job::parse(image)?;
                gsi1(
                    keys::employer_pk(&j.employer_id),
                    j.sk(),
                    vec!["employerId", "postedAt", "zip", "jobId"],
                )
            }
            Kind::Seeker => {
                let s = Seeker::parse(image)?;
                gsi1(
                    keys::city_gsi1pk(&s.city),
                    keys::seeker_pk(&s.seeker_id),
                    vec!["city", "seekerId"],
                )
            }
            Kind::Request => {
                let r = Request::parse(image)?;
                gsi1(
                    keys::seeker_pk(&r.seeker_id),
                    keys::request_gsi1sk(&r.requested_at, &r.job_id),
                    vec!["seekerId", "requestedAt", "jobId"],
                )
            }
            Kind::Suggestion => {
                let p = Pair::parse("suggestion", image)?;
                let level = suggestion_level(image)?;
                gsi1(
                    keys::seeker_pk(&p.seeker_id),
                    keys::suggestion_gsi1sk(level, &p.posted_at, &p.zip, &p.job_id),
                    vec!["seekerId", "relevance", "postedAt", "zip", "jobId"],
                )
            }
            Kind::Match => {
                let p = Pair::parse("match", image)?;
                let day = matched_at(image)?;
                gsi1(
                    keys::employer_pk(&p.employer_id),
                    keys::match_gsi1sk(&day, &p.job_id, &p.seeker_id),
                    vec!["employerId", "matchedAt", "jobId", "seekerId"],
                )
            }
            Kind::Employer => None,
        })
    }

    /// A seeker is a member of its city's seeker index: the suggestions
    /// job lists a city's seekers from it (exact), not from GSI1 (which may
    /// lag).
    fn memberships(&self, image: &Item) -> Result<Vec<(String, String)>, InputError> {
        Ok(match kind(image) {
            Ok(Kind::Seeker) => {
                let s = Seeker::parse(image)?;
                vec![(city_seekers_index(&s.city), s.seeker_id)]
            }
            _ => vec![],
        })
    }

    /// Suggestions are the suggestions job's items, written with their GSI1
    /// keys: their records need no read.
    fn ignores(&self, keys: &Item) -> bool {
        keys.s(keys::SK).is_ok_and(|sk| sk.starts_with("s#"))
    }

    fn messages(&self, change: &Change) -> Result<Vec<OutMessage>, InputError> {
        let image = change.latest_image().unwrap_or(&change.keys);
        Ok(match kind(image)? {
            Kind::Job => Self::job_messages(
                parse_old(&change.old, Job::parse),
                parse(&change.new, Job::parse)?,
            ),
            Kind::Seeker => {
                let old = parse_old(&change.old, Seeker::parse);
                let new = parse(&change.new, Seeker::parse)?;
                let changed = match (&old, &new) {
                    (Some(o), Some(n)) => o.matching_profile() != n.matching_profile(),
                    _ => true,
                };
                let id = new
                    .as_ref()
                    .or(old.as_ref())
                    .map(|s| s.seeker_id.clone())
                    .unwrap_or_default();
                if changed {
                    vec![suggestion(SuggestionJob::SeekerChanged { seeker_id: id })]
                } else {
                    vec![]
                }
            }
            Kind::Request => {
                let old = parse_old(&change.old, Request::parse);
                let Some(new) = parse(&change.new, Request::parse)? else {
                    return Ok(vec![]);
                };
                let mut out = Vec::new();
                if change.kind == ChangeKind::Insert {
                    out.push(suggestion(SuggestionJob::PairRequested {
                        city: keys::normalize_city(&new.job_city),
                        job_id: new.job_id.clone(),
                        seeker_id: new.seeker_id.clone(),
                    }));
                }
                let was_approved = old
                    .as_ref()
                    .is_some_and(|o| o.status == RequestStatus::Approved);
                if new.status == RequestStatus::Approved && !was_approved {
                    out.push(OutMessage {
                        queue: MATCHES_QUEUE,
                        body: encode(&MatchJob {
                            employer_id: new.employer_id.clone(),
                            job_id: new.job_id.clone(),
                            seeker_id: new.seeker_id.clone(),
                            city: keys::normalize_city(&new.job_city),
                            posted_at: new.job_posted_at.clone(),
                            zip: new.job_zip.clone(),
                            matched_at: new.approved_at.clone().unwrap_or_default(),
                        }),
                    });
                }
                out
            }
            // Suggestions (including their TTL expiry), matches and
            // employers start no job.
            Kind::Suggestion | Kind::Match | Kind::Employer => vec![],
        })
    }
}

/// The ledger index of a city's seekers (members: seeker ids).
pub fn city_seekers_index(city: &str) -> String {
    format!("city-seekers#{}", keys::normalize_city(city))
}

/// The entity type of an item, for writers.
pub fn entity_type(item: &Item) -> Option<&str> {
    item.s(keys::ENTITY_TYPE).ok()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::change::Origin;
    use crate::engine::derive::projection_update;
    use crate::item::{n, s};

    pub fn item(pairs: &[(&str, AttributeValue)]) -> Item {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    pub fn ss(v: &[&str]) -> AttributeValue {
        AttributeValue::Ss(v.iter().map(|s| s.to_string()).collect())
    }

    pub fn job(id: &str, status: &str) -> Item {
        item(&[
            ("pk", s("job#montreal")),
            ("sk", s(format!("j#2026-11-01#H2X#{id}"))),
            ("entityType", s("job")),
            ("jobId", s(id)),
            ("employerId", s("301")),
            ("city", s("Montreal")),
            ("postedAt", s("2026-11-01")),
            ("zip", s("H2X")),
            ("title", s("Rust dev")),
            ("skills", ss(&["rust", "aws"])),
            ("category", s("tech")),
            ("salaryMax", n(120000)),
            ("status", s(status)),
        ])
    }

    pub fn seeker(id: &str, city: &str) -> Item {
        item(&[
            ("pk", s(format!("seeker#{id}"))),
            ("sk", s("profile")),
            ("entityType", s("seeker")),
            ("seekerId", s(id)),
            ("name", s("Ada")),
            ("city", s(city)),
            ("skills", ss(&["rust"])),
            ("desiredSalary", n(100000)),
        ])
    }

    pub fn request(status: &str) -> Item {
        let mut r = item(&[
            ("pk", s("employer#301")),
            ("sk", s("r#101#201")),
            ("entityType", s("request")),
            ("employerId", s("301")),
            ("jobId", s("101")),
            ("seekerId", s("201")),
            ("status", s(status)),
            ("requestedAt", s("2026-11-02")),
            ("jobCity", s("Montreal")),
            ("jobPostedAt", s("2026-11-01")),
            ("jobZip", s("H2X")),
        ]);
        if status == "approved" {
            r.insert("approvedAt".into(), s("2026-11-03"));
        }
        r
    }

    use crate::change::test_change as change;

    fn bodies(c: Change) -> Vec<(&'static str, serde_json::Value)> {
        JobBoardDerive
            .messages(&c)
            .unwrap()
            .into_iter()
            .map(|m| (m.queue, serde_json::from_str(&m.body).unwrap()))
            .collect()
    }

    #[test]
    fn gsi1_keys_of_each_entity() {
        let p = JobBoardDerive
            .projection(&job("101", "open"))
            .unwrap()
            .unwrap();
        assert_eq!(p.attrs[0], ("GSI1PK", Some(s("employer#301"))));
        assert_eq!(p.attrs[1], ("GSI1SK", Some(s("j#2026-11-01#H2X#101"))));
        let p = JobBoardDerive
            .projection(&seeker("201", "New York"))
            .unwrap()
            .unwrap();
        assert_eq!(p.attrs[0], ("GSI1PK", Some(s("city#new-york"))));
        assert_eq!(p.attrs[1], ("GSI1SK", Some(s("seeker#201"))));
        let p = JobBoardDerive
            .projection(&request("pending"))
            .unwrap()
            .unwrap();
        assert_eq!(p.attrs[0], ("GSI1PK", Some(s("seeker#201"))));
        assert_eq!(p.attrs[1], ("GSI1SK", Some(s("r#2026-11-02#101"))));
        let emp = item(&[
            ("pk", s("employer#301")),
            ("sk", s("profile")),
            ("entityType", s("employer")),
        ]);
        assert_eq!(JobBoardDerive.projection(&emp).unwrap(), None);
        let mut projected = job("101", "open");
        projected.insert("GSI1PK".into(), s("employer#301"));
        projected.insert("GSI1SK".into(), s("j#2026-11-01#H2X#101"));
        let p = JobBoardDerive.projection(&projected).unwrap().unwrap();
        assert!(
            projection_update(&["pk", "sk"], &projected, &p).is_none(),
            "fixpoint"
        );
    }

    #[test]
    fn key_must_match_attributes_and_entity_type_must_be_known() {
        let mut j = job("101", "open");
        j.insert("zip".into(), s("OTHER"));
        assert_eq!(JobBoardDerive.projection(&j).unwrap_err().kind(), "Invalid");
        let mut j = job("101", "open");
        j.insert("entityType".into(), s("spaceship"));
        assert_eq!(
            JobBoardDerive.projection(&j).unwrap_err().kind(),
            "UnknownEntity"
        );
        let mut j = job("101", "open");
        j.insert("status".into(), s("maybe"));
        assert_eq!(
            JobBoardDerive.projection(&j).unwrap_err().kind(),
            "InvalidValue"
        );
    }

    #[test]
    fn jobs_open_close_and_rescore() {
        let opened = bodies(change(ChangeKind::Insert, None, Some(job("101", "open"))));
        assert_eq!(
            opened,
            vec![(
                "suggestions",
                serde_json::json!({"version":1,"kind":"jobOpened","city":"montreal","jobSk":"j#2026-11-01#H2X#101"})
            )]
        );
        assert!(bodies(change(ChangeKind::Insert, None, Some(job("101", "closed")))).is_empty());
        let closed = bodies(change(
            ChangeKind::Modify,
            Some(job("101", "open")),
            Some(job("101", "closed")),
        ));
        assert_eq!(
            closed,
            vec![(
                "suggestions",
                serde_json::json!({"version":1,"kind":"jobClosed","city":"montreal","jobId":"101"})
            )]
        );
        assert_eq!(
            bodies(change(ChangeKind::Remove, Some(job("101", "open")), None)).len(),
            1
        );
        // Same scoring inputs and copied attributes: nothing to do. Other
        // skills or another title (copied into suggestions): rescore.
        let mut redescribed = job("101", "open");
        redescribed.insert("description".into(), s("Now with more Rust"));
        assert!(bodies(change(
            ChangeKind::Modify,
            Some(job("101", "open")),
            Some(redescribed)
        ))
        .is_empty());
        let mut retitled = job("101", "open");
        retitled.insert("title".into(), s("Senior Rust dev"));
        assert_eq!(
            bodies(change(
                ChangeKind::Modify,
                Some(job("101", "open")),
                Some(retitled)
            ))
            .len(),
            1
        );
        // A bad old image implies nothing: the valid new one starts its job.
        let mut bad = job("101", "open");
        bad.insert("salaryMax".into(), s("lots"));
        assert_eq!(
            bodies(change(
                ChangeKind::Modify,
                Some(bad),
                Some(job("101", "open"))
            ))
            .len(),
            1
        );
        let mut reskilled = job("101", "open");
        reskilled.insert("skills".into(), ss(&["go"]));
        assert_eq!(
            bodies(change(
                ChangeKind::Modify,
                Some(job("101", "open")),
                Some(reskilled)
            ))
            .len(),
            1
        );
    }

    #[test]
    fn seekers_rescore_only_when_matching_fields_change() {
        assert_eq!(
            bodies(change(
                ChangeKind::Insert,
                None,
                Some(seeker("201", "Montreal"))
            ))
            .len(),
            1
        );
        let mut renamed = seeker("201", "Montreal");
        renamed.insert("name".into(), s("Ada L."));
        assert!(bodies(change(
            ChangeKind::Modify,
            Some(seeker("201", "Montreal")),
            Some(renamed)
        ))
        .is_empty());
        assert_eq!(
            bodies(change(
                ChangeKind::Modify,
                Some(seeker("201", "Montreal")),
                Some(seeker("201", "Toronto"))
            ))
            .len(),
            1
        );
    }

    #[test]
    fn approval_enqueues_one_match_job() {
        let inserted = bodies(change(ChangeKind::Insert, None, Some(request("pending"))));
        assert_eq!(inserted[0].1["kind"], "pairRequested");
        assert_eq!(inserted.len(), 1);
        let approved = bodies(change(
            ChangeKind::Modify,
            Some(request("pending")),
            Some(request("approved")),
        ));
        assert_eq!(
            approved,
            vec![(
                "matches",
                serde_json::json!({"version":1,"employerId":"301","jobId":"101","seekerId":"201","city":"montreal","postedAt":"2026-11-01","zip":"H2X","matchedAt":"2026-11-03"})
            )]
        );
        assert!(bodies(change(
            ChangeKind::Modify,
            Some(request("approved")),
            Some(request("approved"))
        ))
        .is_empty());
        let mut no_day = request("approved");
        no_day.remove("approvedAt");
        assert!(JobBoardDerive
            .messages(&change(
                ChangeKind::Modify,
                Some(request("pending")),
                Some(no_day)
            ))
            .is_err());
    }

    #[test]
    fn an_expired_suggestion_starts_nothing() {
        let sug = item(&[
            ("pk", s("job#montreal")),
            ("sk", s("s#101#201")),
            ("entityType", s("suggestion")),
            ("jobId", s("101")),
            ("seekerId", s("201")),
            ("employerId", s("301")),
            ("city", s("montreal")),
            ("postedAt", s("2026-11-01")),
            ("zip", s("H2X")),
            ("relevance", n(2)),
        ]);
        let mut c = change(ChangeKind::Remove, Some(sug), None);
        c.origin = Origin::TtlExpiry;
        assert!(bodies(c).is_empty());
    }
}
