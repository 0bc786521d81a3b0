//! Suggestions as a set job: for a job (opened, changed, closed, a pair
//! requested) or a seeker (created, matching profile changed), the
//! suggestions that should exist are computed from consistent reads of the
//! job, the seekers, the requests and the match markers, and the engine
//! writes the difference (see [`crate::engine::setjob`]).
//!
//! Every write is guarded by the facts it was computed from: the job's and
//! the seeker's scoring attributes, the request's absence (or presence) and
//! the match marker's. So a late `jobClosed` never wipes the suggestions of
//! a job reopened since (it re-reads the job), and a rescoring racing a
//! request or a match never brings back a suggestion for that pair.
//!
//! Rules (documented in the README):
//! - candidates: seekers of the job's city and open jobs posted on or after
//!   today - 30 days (future-dated jobs included, on both paths);
//! - a suggestion lives 7 days from its generation (`ttl`); it is rewritten
//!   only when its level or content changes, so rescoring does not extend
//!   it, and nothing regenerates it once expired unless the job or the
//!   seeker changes.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Duration, SecondsFormat, Utc};

use super::derive::{city_seekers_index, SUGGESTIONS_QUEUE};
use super::entities::{Job, JobStatus, Seeker};
use super::keys;
use super::messages::{decode, encode, SuggestionJob};
use super::relevance::{level, score};
use crate::engine::derive::index_members;
use crate::engine::once;
use crate::engine::rules::OutMessage;
use crate::engine::setjob::{BoxFut, Guard, Guarded, Plan, Reads, SetJob};
use crate::item::{n, s, Item, ItemExt};
use crate::sqs::MessageError;
use crate::store::SortKey;

/// Suggestions live a week.
pub const TTL: Duration = Duration::days(7);
/// Jobs posted in the last 30 days (or later) are candidates.
pub const WINDOW_DAYS: i64 = 30;
/// Seekers per page of a job's suggestions job, and jobs per page of a
/// seeker's: each page reads about three items per pair (profile or job,
/// request, match marker) and writes at most one, so a page stays far
/// below the consumer's timeout whatever the size of the city.
pub const SEEKERS_PER_PAGE: usize = 100;
pub const JOBS_PER_PAGE: usize = 100;
/// The consumer's name (also the once-marker namespace of matches).
pub const MATCHES: &str = "matches";

/// The suggestions set job.
#[derive(Debug, Clone, Copy, Default)]
pub struct Suggestions;

/// The suggestion item of a pair (every attribute, GSI1 keys and TTL included).
pub fn suggestion_item(
    seeker: &Seeker,
    job: &Job,
    relevance: u8,
    score: i64,
    now: DateTime<Utc>,
) -> Item {
    [
        (keys::PK, s(job.pk())),
        (
            keys::SK,
            s(keys::suggestion_sk(&job.job_id, &seeker.seeker_id)),
        ),
        (keys::ENTITY_TYPE, s("suggestion")),
        (keys::GSI1PK, s(keys::seeker_pk(&seeker.seeker_id))),
        (
            keys::GSI1SK,
            s(keys::suggestion_gsi1sk(
                relevance,
                &job.posted_at,
                &job.zip,
                &job.job_id,
            )),
        ),
        ("jobId", s(&job.job_id)),
        ("seekerId", s(&seeker.seeker_id)),
        ("employerId", s(&job.employer_id)),
        ("city", s(keys::normalize_city(&job.city))),
        ("postedAt", s(&job.posted_at)),
        ("zip", s(&job.zip)),
        ("title", s(&job.title)),
        ("relevance", n(relevance)),
        ("score", n(score)),
        (
            "generatedAt",
            s(now.to_rfc3339_opts(SecondsFormat::Secs, true)),
        ),
        (keys::TTL, n((now + TTL).timestamp())),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

pub(crate) fn key(pk: String, sk: String) -> Item {
    [(keys::PK.to_string(), s(pk)), (keys::SK.to_string(), s(sk))].into()
}

/// Guards pinning an item as read: absent, or these attributes as they were.
fn as_read(key: Item, item: Option<&Item>, attrs: &[&'static str]) -> Vec<Guard> {
    match item {
        None => vec![Guard::absent(key)],
        Some(i) => attrs
            .iter()
            .map(|a| Guard::same(key.clone(), a, i.get(*a)))
            .collect(),
    }
}

/// The job attributes a suggestion depends on.
const JOB_FACTS: &[&str] = &["status", "skills", "category", "salaryMax", "title"];
/// The seeker attributes a suggestion depends on.
const SEEKER_FACTS: &[&str] = &["city", "skills", "desiredSalary", "categories"];

/// The first day of the candidate window.
pub fn window_start(now: DateTime<Utc>) -> String {
    (now - Duration::days(WINDOW_DAYS)).date_naive().to_string()
}

/// Whether a job is a candidate at `now`.
pub fn candidate(job: &Job, now: DateTime<Utc>) -> bool {
    job.status == JobStatus::Open && job.posted_at >= window_start(now)
}

/// The facts of one (job, seeker) pair, read consistently.
struct PairFacts {
    requested: bool,
    matched: bool,
}

async fn pair_facts(
    reads: &Reads,
    pairs: &[(&Job, String)],
) -> Result<BTreeMap<(String, String), PairFacts>, MessageError> {
    let mut request_keys = Vec::new();
    let mut marker_keys = Vec::new();
    for (job, seeker_id) in pairs {
        request_keys.push(key(
            keys::employer_pk(&job.employer_id),
            keys::request_sk(&job.job_id, seeker_id),
        ));
        marker_keys.push(once::marker_key(MATCHES, &pair_key(seeker_id, &job.job_id)));
    }
    let requests = reads.store.batch_get(&reads.table, request_keys).await?;
    let markers = reads
        .store
        .batch_get(&reads.ledger_table, marker_keys)
        .await?;
    let mut out = BTreeMap::new();
    for (job, seeker_id) in pairs {
        let requested = requests.iter().any(|r| {
            r.s("jobId").ok() == Some(job.job_id.as_str())
                && r.s("seekerId").ok() == Some(seeker_id.as_str())
        });
        let pk = once::marker_key(MATCHES, &pair_key(seeker_id, &job.job_id));
        let matched = markers.iter().any(|m| m.get("pk") == pk.get("pk"));
        out.insert(
            (job.job_id.clone(), seeker_id.clone()),
            PairFacts { requested, matched },
        );
    }
    Ok(out)
}

/// The once key of a pair's match: `<seekerId>#<jobId>`.
pub fn pair_key(seeker_id: &str, job_id: &str) -> String {
    format!("{seeker_id}#{job_id}")
}

/// Guards of a pair's request and match state as read.
fn pair_guards(job: &Job, seeker_id: &str, f: &PairFacts) -> Vec<Guard> {
    let request = key(
        keys::employer_pk(&job.employer_id),
        keys::request_sk(&job.job_id, seeker_id),
    );
    let marker = once::marker_key(MATCHES, &pair_key(seeker_id, &job.job_id));
    vec![
        if f.requested {
            Guard::exists(request)
        } else {
            Guard::absent(request)
        },
        if f.matched {
            Guard::exists(marker).in_ledger()
        } else {
            Guard::absent(marker).in_ledger()
        },
    ]
}

/// The suggestion a pair should have, if any.
fn wanted(seeker: &Seeker, job: &Job, f: &PairFacts, now: DateTime<Utc>) -> Option<Item> {
    if f.requested || f.matched || !candidate(job, now) {
        return None;
    }
    if keys::normalize_city(&seeker.city) != keys::normalize_city(&job.city) {
        return None;
    }
    let points = score(seeker, job);
    level(points).map(|l| suggestion_item(seeker, job, l, points, now))
}

impl Suggestions {
    async fn query(
        reads: &Reads,
        index: Option<&str>,
        pk_name: &str,
        pk: String,
        sk: Option<SortKey>,
    ) -> Result<Vec<Item>, MessageError> {
        Ok(reads
            .store
            .query(&reads.table, index, pk_name, &pk, sk)
            .await?)
    }

    /// One page of a job's suggestions: the seekers of the job's city with
    /// ids in (`after`, the page's last], from the city's seeker index in
    /// the ledger (exact, read consistently), or the one seeker `only` (a
    /// pair requested). The next page is a follow-up job.
    async fn job_scope(
        &self,
        reads: &Reads,
        city: &str,
        job_id: &str,
        job_sk: Option<String>,
        after: Option<&str>,
        only: Option<&str>,
    ) -> Result<Plan, MessageError> {
        let pk = keys::job_pk(city);
        let prefix = format!("s#{job_id}#");
        // A `jobClosed` names only the job id: its key is on its
        // suggestions.
        let job_sk = match job_sk {
            Some(sk) => Some(sk),
            None => {
                let (first, _) = reads
                    .store
                    .query_page(&reads.table, keys::PK, &pk, keys::SK, Some(&prefix), 1)
                    .await?;
                first
                    .iter()
                    .filter(|e| e.s(keys::SK).is_ok_and(|sk| sk.starts_with(&prefix)))
                    .find_map(|e| {
                        Some(keys::job_sk(
                            e.s("postedAt").ok()?,
                            e.s("zip").ok()?,
                            job_id,
                        ))
                    })
            }
        };
        let Some(job_sk) = job_sk else {
            return Ok(Plan::default());
        };
        let job_key = key(pk.clone(), job_sk.clone());
        let job_item = reads.store.get(&reads.table, job_key.clone()).await?;
        let job = match job_item.as_ref().map(Job::parse).transpose() {
            Ok(job) => job,
            // Bad input: its suggestions stay as its earlier valid states
            // implied (logged and counted by the consumer).
            Err(e) => {
                return Ok(Plan {
                    bad_input: vec![e],
                    ..Plan::default()
                })
            }
        };
        let job_guards = as_read(job_key, job_item.as_ref(), JOB_FACTS);
        let lower = after.unwrap_or_default();
        // The page: its seekers, its existing suggestions, where it ends.
        let (members, existing, next) = match only {
            Some(seeker) => {
                let sug = reads
                    .store
                    .get(
                        &reads.table,
                        key(pk.clone(), keys::suggestion_sk(job_id, seeker)),
                    )
                    .await?;
                (vec![seeker.to_string()], sug.into_iter().collect(), None)
            }
            None if job.as_ref().is_some_and(|j| candidate(j, reads.now)) => {
                let (members, next) = index_members(
                    &reads.store,
                    &reads.ledger_table,
                    &city_seekers_index(city),
                    after,
                    SEEKERS_PER_PAGE,
                )
                .await?;
                let upper = match &next {
                    Some(last) => format!("{prefix}{last}"),
                    None => format!("{prefix}\u{10FFFF}"),
                };
                let existing = Self::query(
                    reads,
                    None,
                    keys::PK,
                    pk.clone(),
                    Some(SortKey::Between(
                        keys::SK.into(),
                        format!("{prefix}{lower}"),
                        upper,
                    )),
                )
                .await?;
                (members, existing, next)
            }
            // Closed or gone: its suggestions go, a page at a time.
            None => {
                let (page, next) = reads
                    .store
                    .query_page(
                        &reads.table,
                        keys::PK,
                        &pk,
                        keys::SK,
                        Some(&format!("{prefix}{lower}")),
                        SEEKERS_PER_PAGE,
                    )
                    .await?;
                let all = page.len();
                let existing: Vec<Item> = page
                    .into_iter()
                    .filter(|e| e.s(keys::SK).is_ok_and(|sk| sk.starts_with(&prefix)))
                    .collect();
                let next = next
                    .filter(|_| existing.len() == all)
                    .and_then(|sk| sk.strip_prefix(&prefix).map(str::to_string));
                (vec![], existing, next)
            }
        };
        let mut seekers: BTreeMap<String, Option<Item>> = BTreeMap::new();
        for id in members {
            seekers.insert(id, None);
        }
        for e in &existing {
            if let Ok(id) = e.s("seekerId") {
                // (Between is inclusive: the page starts after `after`.)
                if after != Some(id) {
                    seekers.entry(id.to_string()).or_insert(None);
                }
            }
        }
        let existing: Vec<Item> = existing
            .into_iter()
            .filter(|e| after.is_none() || e.s("seekerId").ok() != after)
            .collect();
        let profile_keys: Vec<Item> = seekers
            .keys()
            .map(|id| key(keys::seeker_pk(id), keys::PROFILE_SK.into()))
            .collect();
        for p in reads.store.batch_get(&reads.table, profile_keys).await? {
            if let Ok(id) = p.s("seekerId") {
                let id = id.to_string();
                seekers.insert(id, Some(p));
            }
        }
        let pairs: Vec<(&Job, String)> = match &job {
            Some(j) => seekers.keys().map(|id| (j, id.clone())).collect(),
            None => vec![],
        };
        let facts = pair_facts(reads, &pairs).await?;
        let mut want_of: BTreeMap<String, Vec<Guard>> = BTreeMap::new();
        // Seekers whose profile is bad input keep their suggestions.
        let mut kept = BTreeSet::new();
        let mut plan = Plan::default();
        for (id, profile) in &seekers {
            if let Some(Err(e)) = profile.as_ref().map(Seeker::parse) {
                kept.insert(id.clone());
                plan.bad_input.push(e);
            }
        }
        for (id, profile) in &seekers {
            let seeker_key = key(keys::seeker_pk(id), keys::PROFILE_SK.into());
            let mut guards = job_guards.clone();
            guards.extend(as_read(seeker_key, profile.as_ref(), SEEKER_FACTS));
            if let (Some(job), Some(f)) = (&job, facts.get(&(job_id.to_string(), id.clone()))) {
                guards.extend(pair_guards(job, id, f));
                let seeker = profile.as_ref().and_then(|p| Seeker::parse(p).ok());
                if let Some(item) = seeker.and_then(|s| wanted(&s, job, f, reads.now)) {
                    plan.desired.push(Guarded {
                        item,
                        guards: guards.clone(),
                    });
                }
            }
            want_of.insert(id.clone(), guards);
        }
        for e in existing {
            let id = e.s("seekerId").unwrap_or_default().to_string();
            if kept.contains(&id) {
                continue;
            }
            let guards = want_of
                .get(&id)
                .cloned()
                .unwrap_or_else(|| job_guards.clone());
            plan.existing.push(Guarded { item: e, guards });
        }
        if let Some(after) = next {
            plan.then.push(OutMessage {
                queue: SUGGESTIONS_QUEUE,
                body: encode(&SuggestionJob::JobPage {
                    city: city.to_string(),
                    job_id: job_id.to_string(),
                    job_sk: Some(job_sk),
                    after,
                }),
            });
        }
        Ok(plan)
    }

    /// One page of a seeker's suggestions: the candidate jobs of the
    /// seeker's city with sort keys in (`after`, the page's last], read
    /// consistently from the table. The first page also takes the
    /// suggestions the seeker has elsewhere (another city, a job out of the
    /// window), from GSI1. The next page is a follow-up job.
    async fn seeker_scope(
        &self,
        reads: &Reads,
        seeker_id: &str,
        after: Option<&str>,
    ) -> Result<Plan, MessageError> {
        let seeker_key = key(keys::seeker_pk(seeker_id), keys::PROFILE_SK.into());
        let profile = reads.store.get(&reads.table, seeker_key.clone()).await?;
        let seeker = match profile.as_ref().map(Seeker::parse).transpose() {
            Ok(seeker) => seeker,
            // Bad input: its suggestions stay as its earlier valid states
            // implied (logged and counted by the consumer).
            Err(e) => {
                return Ok(Plan {
                    bad_input: vec![e],
                    ..Plan::default()
                })
            }
        };
        let seeker_guards = as_read(seeker_key, profile.as_ref(), SEEKER_FACTS);
        let window = format!("j#{}", window_start(reads.now));
        let mut jobs: BTreeMap<(String, String), Option<Item>> = BTreeMap::new();
        let mut next = None;
        let mut existing = Vec::new();
        if let Some(seeker) = &seeker {
            let pk = keys::job_pk(&seeker.city);
            let from = after.map_or(window.clone(), str::to_string);
            let (page, more) = reads
                .store
                .query_page(
                    &reads.table,
                    keys::PK,
                    &pk,
                    keys::SK,
                    Some(&from),
                    JOBS_PER_PAGE,
                )
                .await?;
            let all = page.len();
            let page: Vec<Item> = page
                .into_iter()
                .filter(|j| j.s(keys::SK).is_ok_and(|sk| sk.starts_with("j#")))
                .collect();
            next = more.filter(|_| page.len() == all);
            for j in page {
                if let Ok(sk) = j.s(keys::SK) {
                    jobs.insert((pk.clone(), sk.to_string()), Some(j.clone()));
                }
            }
            // The page's suggestions, by key (exact).
            let keys_of: Vec<Item> = jobs
                .keys()
                .filter_map(|(pk, sk)| {
                    let job_id = sk.rsplit('#').next()?;
                    Some(key(pk.clone(), keys::suggestion_sk(job_id, seeker_id)))
                })
                .collect();
            existing = reads.store.batch_get(&reads.table, keys_of).await?;
        }
        if after.is_none() {
            // Suggestions outside the current city's window: GSI1 (the
            // only way to list a seeker's).
            let city_pk = seeker.as_ref().map(|s| keys::job_pk(&s.city));
            for e in Self::query(
                reads,
                Some("GSI1"),
                keys::GSI1PK,
                keys::seeker_pk(seeker_id),
                Some(SortKey::BeginsWith(keys::GSI1SK.into(), "j#R".into())),
            )
            .await?
            {
                let (Ok(pk), Ok(posted), Ok(zip), Ok(job_id)) =
                    (e.s(keys::PK), e.s("postedAt"), e.s("zip"), e.s("jobId"))
                else {
                    continue;
                };
                let sk = keys::job_sk(posted, zip, job_id);
                if city_pk.as_deref() == Some(pk) && sk > window {
                    continue; // a page of the window has it
                }
                jobs.entry((pk.to_string(), sk)).or_insert(None);
                existing.push(e);
            }
        }
        let missing: Vec<Item> = jobs
            .iter()
            .filter(|(_, i)| i.is_none())
            .map(|((pk, sk), _)| key(pk.clone(), sk.clone()))
            .collect();
        for j in reads.store.batch_get(&reads.table, missing).await? {
            if let (Ok(pk), Ok(sk)) = (j.s(keys::PK), j.s(keys::SK)) {
                jobs.insert((pk.to_string(), sk.to_string()), Some(j.clone()));
            }
        }
        let mut plan = Plan::default();
        // Jobs that are bad input keep their suggestions (by job id).
        let mut kept = BTreeSet::new();
        let mut parsed: Vec<((String, String), Option<Job>)> = Vec::new();
        for (k, i) in &jobs {
            match i.as_ref().map(Job::parse).transpose() {
                Ok(j) => parsed.push((k.clone(), j)),
                Err(e) => {
                    if let Some(id) = k.1.rsplit('#').next() {
                        kept.insert(id.to_string());
                    }
                    plan.bad_input.push(e);
                }
            }
        }
        let pairs: Vec<(&Job, String)> = parsed
            .iter()
            .filter_map(|(_, j)| j.as_ref().map(|j| (j, seeker_id.to_string())))
            .collect();
        let facts = pair_facts(reads, &pairs).await?;
        let mut guards_of: BTreeMap<String, Vec<Guard>> = BTreeMap::new();
        for ((pk, sk), job) in &parsed {
            let item = jobs.get(&(pk.clone(), sk.clone())).cloned().flatten();
            let mut guards = seeker_guards.clone();
            guards.extend(as_read(
                key(pk.clone(), sk.clone()),
                item.as_ref(),
                JOB_FACTS,
            ));
            if let Some(job) = job {
                if let Some(f) = facts.get(&(job.job_id.clone(), seeker_id.to_string())) {
                    guards.extend(pair_guards(job, seeker_id, f));
                    if let Some(it) = seeker.as_ref().and_then(|s| wanted(s, job, f, reads.now)) {
                        plan.desired.push(Guarded {
                            item: it,
                            guards: guards.clone(),
                        });
                    }
                }
                guards_of.insert(job.job_id.clone(), guards);
            }
        }
        for e in existing {
            let job_id = e.s("jobId").unwrap_or_default().to_string();
            if kept.contains(&job_id) {
                continue;
            }
            let guards = guards_of
                .get(&job_id)
                .cloned()
                .unwrap_or_else(|| seeker_guards.clone());
            plan.existing.push(Guarded { item: e, guards });
        }
        if let Some(after) = next {
            plan.then.push(OutMessage {
                queue: SUGGESTIONS_QUEUE,
                body: encode(&SuggestionJob::SeekerPage {
                    seeker_id: seeker_id.to_string(),
                    after,
                }),
            });
        }
        Ok(plan)
    }
}

impl SetJob for Suggestions {
    fn name(&self) -> &'static str {
        "suggestions"
    }

    fn key_names(&self) -> &'static [&'static str] {
        &[keys::PK, keys::SK]
    }

    fn volatile(&self) -> &'static [&'static str] {
        &["generatedAt", keys::TTL]
    }

    fn plan<'a>(
        &'a self,
        body: &'a str,
        reads: &'a Reads,
    ) -> BoxFut<'a, Result<Plan, MessageError>> {
        Box::pin(async move {
            match decode::<SuggestionJob>(body)? {
                SuggestionJob::JobOpened { city, job_sk } => {
                    let job_id = job_sk.rsplit('#').next().unwrap_or_default().to_string();
                    self.job_scope(reads, &city, &job_id, Some(job_sk), None, None)
                        .await
                }
                SuggestionJob::JobClosed { city, job_id } => {
                    self.job_scope(reads, &city, &job_id, None, None, None)
                        .await
                }
                SuggestionJob::JobPage {
                    city,
                    job_id,
                    job_sk,
                    after,
                } => {
                    self.job_scope(reads, &city, &job_id, job_sk, Some(&after), None)
                        .await
                }
                SuggestionJob::PairRequested {
                    city,
                    job_id,
                    seeker_id,
                } => {
                    self.job_scope(reads, &city, &job_id, None, None, Some(&seeker_id))
                        .await
                }
                SuggestionJob::SeekerChanged { seeker_id } => {
                    self.seeker_scope(reads, &seeker_id, None).await
                }
                SuggestionJob::SeekerPage { seeker_id, after } => {
                    self.seeker_scope(reads, &seeker_id, Some(&after)).await
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::jobboard::derive::tests::{job, seeker};

    #[test]
    fn the_readme_documents_the_pair_marker_the_code_writes() {
        let key = once::marker_key(MATCHES, &pair_key("201", "101"));
        assert_eq!(key["pk"], s("ONCE#matches#201#101"));
        assert_eq!(key["sk"], s("ONCE"));
        let readme = include_str!("README.md");
        assert!(readme.contains("`ONCE#matches#<seekerId>#<jobId>` (sort key `ONCE`)"));
        assert!(
            !readme.contains("MATCH#<seekerId>"),
            "no stale marker format"
        );
    }

    #[test]
    fn suggestion_item_has_every_key_the_ttl_and_the_entity_type() {
        let now = DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        let j = Job::parse(&job("101", "open")).unwrap();
        let sk = Seeker::parse(&seeker("201", "Montreal")).unwrap();
        let item = suggestion_item(&sk, &j, 2, 6000, now);
        assert_eq!(item["pk"], s("job#montreal"));
        assert_eq!(item["sk"], s("s#101#201"));
        assert_eq!(item["GSI1PK"], s("seeker#201"));
        assert_eq!(item["GSI1SK"], s("j#R2#2026-11-01#H2X#101"));
        assert_eq!(item["entityType"], s("suggestion"));
        assert_eq!(item["ttl"], n(1_800_000_000 + 7 * 24 * 3600));
        assert_eq!(item["relevance"], n(2));
        assert_eq!(item.len(), 16);
        // What the derive rules compute for it is what it already carries.
        let p =
            crate::engine::rules::Rules::projection(&super::super::derive::JobBoardDerive, &item)
                .unwrap()
                .unwrap();
        assert!(crate::engine::derive::projection_update(&["pk", "sk"], &item, &p).is_none());
    }

    #[test]
    fn future_dated_jobs_are_candidates_old_ones_are_not() {
        let now = DateTime::parse_from_rfc3339("2026-11-20T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let mut j = Job::parse(&job("101", "open")).unwrap();
        j.posted_at = "2026-12-24".into();
        assert!(candidate(&j, now), "future-dated jobs are suggested");
        j.posted_at = "2026-10-21".into();
        assert!(candidate(&j, now), "30 days back is still in");
        j.posted_at = "2026-10-20".into();
        assert!(!candidate(&j, now));
        j.posted_at = "2026-11-19".into();
        j.status = JobStatus::Closed;
        assert!(!candidate(&j, now));
    }

    #[test]
    fn requested_or_matched_pairs_get_no_suggestion() {
        let now = DateTime::parse_from_rfc3339("2026-11-02T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let j = Job::parse(&job("101", "open")).unwrap();
        let sk = Seeker::parse(&seeker("201", "Montreal")).unwrap();
        let free = PairFacts {
            requested: false,
            matched: false,
        };
        assert!(wanted(&sk, &j, &free, now).is_some());
        let requested = PairFacts {
            requested: true,
            matched: false,
        };
        assert!(wanted(&sk, &j, &requested, now).is_none());
        let matched = PairFacts {
            requested: false,
            matched: true,
        };
        assert!(wanted(&sk, &j, &matched, now).is_none());
        let elsewhere = Seeker::parse(&seeker("201", "Toronto")).unwrap();
        assert!(wanted(&elsewhere, &j, &free, now).is_none());
    }
}
