//! Job board checks for `verify` beyond what the stream rules imply:
//! suggestions (the set job's items) and match uniqueness.
//!
//! A suggestion lives 7 days from its generation and is not regenerated
//! unless its job or seeker changes, so a *missing* suggestion is drift only
//! for jobs posted in the last 6 days (any suggestion of such a job was
//! generated on or after its posting day and cannot have expired yet).
//! Existing suggestions are checked against the relevance function, the
//! exclusions (requested, matched pairs, closed or deleted jobs) and the TTL.
//! Repairs re-run the suggestions job of the job concerned, through its
//! guards.

use std::collections::{BTreeMap, BTreeSet};

use chrono::Duration;

use super::derive::{MATCHES_QUEUE, SUGGESTIONS_QUEUE};
use super::entities::{kind, Job, JobStatus, Kind, Pair, Request, RequestStatus, Seeker};
use super::keys;
use super::messages::{encode, MatchJob, SuggestionJob};
use super::relevance::{level, score};
use super::suggestions::candidate;
use crate::item::{display_key, key_of, ItemExt};
use crate::models::{CheckInput, Drift, Finding, Repair};

fn rescore(job: &Job) -> Option<Repair> {
    Some(Repair::Job {
        queue: SUGGESTIONS_QUEUE,
        body: encode(&SuggestionJob::JobOpened {
            city: keys::normalize_city(&job.city),
            job_sk: job.sk(),
        }),
    })
}

/// The job board's model-specific findings.
pub fn check(input: &CheckInput<'_>) -> Vec<Finding> {
    let now = input.now;
    let mut out = Vec::new();
    let key = |i: &crate::item::Item| key_of(i, &[keys::PK, keys::SK]);
    let mut jobs: BTreeMap<String, Job> = BTreeMap::new();
    let mut seekers: BTreeMap<String, Seeker> = BTreeMap::new();
    let mut requested: BTreeSet<(String, String)> = BTreeSet::new();
    let mut approved: Vec<Request> = Vec::new();
    // Jobs and seekers that are bad input keep the suggestions their
    // earlier valid states implied (SPEC §5): not drift.
    let mut bad_jobs: BTreeSet<String> = BTreeSet::new();
    let mut bad_seekers: BTreeSet<String> = BTreeSet::new();
    let mut matches: BTreeMap<(String, String), Vec<crate::item::Item>> = BTreeMap::new();
    let mut suggestions = Vec::new();
    for item in input.items {
        match kind(item) {
            Ok(Kind::Job) => match Job::parse(item) {
                Ok(j) => {
                    jobs.insert(j.job_id.clone(), j);
                }
                Err(_) => {
                    if let Ok(sk) = item.s(keys::SK) {
                        bad_jobs.insert(sk.rsplit('#').next().unwrap_or_default().to_string());
                    }
                }
            },
            Ok(Kind::Seeker) => match Seeker::parse(item) {
                Ok(s) => {
                    seekers.insert(s.seeker_id.clone(), s);
                }
                Err(_) => {
                    if let Ok(pk) = item.s(keys::PK) {
                        bad_seekers.insert(pk.trim_start_matches("seeker#").to_string());
                    }
                }
            },
            Ok(Kind::Request) => {
                if let (Ok(j), Ok(s)) = (item.s("jobId"), item.s("seekerId")) {
                    requested.insert((s.to_string(), j.to_string()));
                }
                if let Ok(r) = Request::parse(item) {
                    if r.status == RequestStatus::Approved {
                        approved.push(r);
                    }
                }
            }
            Ok(Kind::Match) => {
                if let Ok(p) = Pair::parse("match", item) {
                    matches
                        .entry((p.seeker_id, p.job_id))
                        .or_default()
                        .push(item.clone());
                }
            }
            Ok(Kind::Suggestion) => suggestions.push(item.clone()),
            _ => {}
        }
    }
    for ((seeker, job), ms) in &matches {
        for extra in ms.iter().skip(1) {
            out.push(Finding {
                kind: "matches",
                drift: Drift::Extra,
                what: format!("seeker {seeker} / job {job}: {} matches", ms.len()),
                repair: Some(Repair::DeleteIfUnchanged(extra.clone())),
            });
        }
    }
    // An approved request of a job and seeker that exist has its match.
    for r in &approved {
        let pair = (r.seeker_id.clone(), r.job_id.clone());
        if matches.contains_key(&pair)
            || !jobs.contains_key(&r.job_id)
            || !seekers.contains_key(&r.seeker_id)
        {
            continue;
        }
        out.push(Finding {
            kind: "matches",
            drift: Drift::Missing,
            what: format!(
                "seeker {} / job {}: approved, no match",
                r.seeker_id, r.job_id
            ),
            repair: Some(Repair::Job {
                queue: MATCHES_QUEUE,
                body: encode(&MatchJob {
                    employer_id: r.employer_id.clone(),
                    job_id: r.job_id.clone(),
                    seeker_id: r.seeker_id.clone(),
                    city: keys::normalize_city(&r.job_city),
                    posted_at: r.job_posted_at.clone(),
                    zip: r.job_zip.clone(),
                    matched_at: r.approved_at.clone().unwrap_or_default(),
                }),
            }),
        });
    }
    let present: BTreeSet<(String, String)> = suggestions
        .iter()
        .filter_map(|s| {
            Some((
                s.s("seekerId").ok()?.to_string(),
                s.s("jobId").ok()?.to_string(),
            ))
        })
        .collect();
    let fresh = (now - Duration::days(6)).date_naive().to_string();
    for j in jobs
        .values()
        .filter(|j| candidate(j, now) && j.posted_at >= fresh)
    {
        for sk in seekers
            .values()
            .filter(|s| keys::normalize_city(&s.city) == keys::normalize_city(&j.city))
        {
            let pair = (sk.seeker_id.clone(), j.job_id.clone());
            if present.contains(&pair) || requested.contains(&pair) || matches.contains_key(&pair) {
                continue;
            }
            if let Some(l) = level(score(sk, j)) {
                out.push(Finding {
                    kind: "suggestions",
                    drift: Drift::Missing,
                    what: format!(
                        "seeker {} / job {}: R{l} but no suggestion",
                        sk.seeker_id, j.job_id
                    ),
                    repair: rescore(j),
                });
            }
        }
    }
    let week = Duration::days(7).num_seconds();
    for sug in &suggestions {
        let k = key(sug);
        let label = display_key(&k);
        let Ok(pair) = Pair::parse("suggestion", sug) else {
            out.push(Finding {
                kind: "suggestions",
                drift: Drift::Wrong,
                what: format!("{label}: unreadable"),
                repair: Some(Repair::DeleteIfUnchanged(sug.clone())),
            });
            continue;
        };
        if bad_jobs.contains(&pair.job_id) || bad_seekers.contains(&pair.seeker_id) {
            continue;
        }
        let pk = (pair.seeker_id.clone(), pair.job_id.clone());
        let (job, seeker) = (jobs.get(&pair.job_id), seekers.get(&pair.seeker_id));
        let why_extra = match (job, seeker) {
            (None, _) => Some("the job no longer exists"),
            (_, None) => Some("the seeker no longer exists"),
            (Some(j), _) if j.status != JobStatus::Open => Some("the job is closed"),
            _ if requested.contains(&pk) => Some("the pair was requested"),
            _ if matches.contains_key(&pk) => Some("the pair is matched"),
            (Some(j), Some(s)) if level(score(s, j)).is_none() => Some("the pair scores below R3"),
            (Some(j), Some(s))
                if keys::normalize_city(&s.city) != keys::normalize_city(&j.city) =>
            {
                Some("the seeker moved to another city")
            }
            _ => None,
        };
        if let Some(why) = why_extra {
            // The job gone: the stale suggestion has no job to rescore.
            let repair = job
                .and_then(rescore)
                .unwrap_or_else(|| Repair::DeleteIfUnchanged(sug.clone()));
            out.push(Finding {
                kind: "suggestions",
                drift: Drift::Extra,
                what: format!("{label}: {why}"),
                repair: Some(repair),
            });
            continue;
        }
        let (Some(j), Some(sk)) = (job, seeker) else {
            continue;
        };
        let want = level(score(sk, j)).unwrap_or(3);
        let ttl = sug.opt_i64(keys::TTL).ok().flatten();
        let ttl_ok = ttl.is_some_and(|t| t <= now.timestamp() + week);
        if sug.i64("relevance").ok() != Some(i64::from(want)) || !ttl_ok {
            out.push(Finding {
                kind: "suggestions",
                drift: Drift::Wrong,
                what: format!("{label}: relevance/TTL differ from the function (want R{want})"),
                repair: rescore(j),
            });
        }
    }
    out
}
