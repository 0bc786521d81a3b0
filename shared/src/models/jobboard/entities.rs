//! The job board's entities, parsed and validated from items. Every item
//! carries `entityType`; the keys must agree with the attributes they are
//! built from.

use std::collections::BTreeSet;

use super::keys;
use crate::error::InputError;
use crate::item::{display_key, key_of, AttrError, Item, ItemExt};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Job,
    Seeker,
    Employer,
    Request,
    Suggestion,
    Match,
}

pub fn key_display(item: &Item) -> String {
    display_key(&key_of(item, &[keys::PK, keys::SK]))
}

fn attr<'a>(entity: &'static str, item: &'a Item) -> impl Fn(AttrError) -> InputError + 'a {
    move |source| InputError::Attribute {
        entity,
        key: key_display(item),
        source,
    }
}

fn invalid(item: &Item, reason: impl Into<String>) -> InputError {
    InputError::Invalid {
        key: key_display(item),
        reason: reason.into(),
    }
}

/// Classifies an item by its `entityType`.
pub fn kind(item: &Item) -> Result<Kind, InputError> {
    let t = item.s(keys::ENTITY_TYPE).map_err(attr("item", item))?;
    Ok(match t {
        "job" => Kind::Job,
        "seeker" => Kind::Seeker,
        "employer" => Kind::Employer,
        "request" => Kind::Request,
        "suggestion" => Kind::Suggestion,
        "match" => Kind::Match,
        _ => {
            return Err(InputError::UnknownEntity {
                key: key_display(item),
            })
        }
    })
}

fn date(item: &Item, entity: &'static str, name: &str) -> Result<String, InputError> {
    let v = item.s(name).map_err(attr(entity, item))?;
    chrono::NaiveDate::parse_from_str(v, "%Y-%m-%d").map_err(|_| {
        attr(entity, item)(AttrError::Invalid {
            name: name.into(),
            reason: "not an ISO date (YYYY-MM-DD)".into(),
        })
    })?;
    Ok(v.to_string())
}

fn check_key(item: &Item, pk: &str, sk: &str) -> Result<(), InputError> {
    if item.s(keys::PK).ok() != Some(pk) || item.s(keys::SK).ok() != Some(sk) {
        return Err(invalid(
            item,
            format!("keys do not match the attributes (expected pk={pk}, sk={sk})"),
        ));
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobStatus {
    Open,
    Closed,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    pub job_id: String,
    pub employer_id: String,
    pub city: String,
    pub posted_at: String,
    pub zip: String,
    pub title: String,
    pub skills: BTreeSet<String>,
    pub category: Option<String>,
    pub salary_min: Option<i64>,
    pub salary_max: Option<i64>,
    pub status: JobStatus,
}

impl Job {
    pub fn parse(item: &Item) -> Result<Self, InputError> {
        let e = attr("job", item);
        let status = match item.s("status").map_err(&e)? {
            "open" => JobStatus::Open,
            "closed" => JobStatus::Closed,
            other => {
                return Err(e(AttrError::Invalid {
                    name: "status".into(),
                    reason: format!("`{other}` is not open/closed"),
                }))
            }
        };
        let job = Job {
            job_id: item.s("jobId").map_err(&e)?.to_string(),
            employer_id: item.s("employerId").map_err(&e)?.to_string(),
            city: item.s("city").map_err(&e)?.to_string(),
            posted_at: date(item, "job", "postedAt")?,
            zip: item.s("zip").map_err(&e)?.to_string(),
            title: item.s("title").map_err(&e)?.to_string(),
            skills: item.opt_ss("skills").map_err(&e)?,
            category: item.opt_s("category").map_err(&e)?.map(str::to_string),
            salary_min: item.opt_i64("salaryMin").map_err(&e)?,
            salary_max: item.opt_i64("salaryMax").map_err(&e)?,
            status,
        };
        check_key(item, &keys::job_pk(&job.city), &job.sk())?;
        Ok(job)
    }

    pub fn pk(&self) -> String {
        keys::job_pk(&self.city)
    }

    pub fn sk(&self) -> String {
        keys::job_sk(&self.posted_at, &self.zip, &self.job_id)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seeker {
    pub seeker_id: String,
    pub name: String,
    pub city: String,
    pub skills: BTreeSet<String>,
    pub desired_salary: Option<i64>,
    pub categories: BTreeSet<String>,
}

impl Seeker {
    pub fn parse(item: &Item) -> Result<Self, InputError> {
        let e = attr("seeker", item);
        let s = Seeker {
            seeker_id: item.s("seekerId").map_err(&e)?.to_string(),
            name: item.s("name").map_err(&e)?.to_string(),
            city: item.s("city").map_err(&e)?.to_string(),
            skills: item.opt_ss("skills").map_err(&e)?,
            desired_salary: item.opt_i64("desiredSalary").map_err(&e)?,
            categories: item.opt_ss("categories").map_err(&e)?,
        };
        check_key(item, &keys::seeker_pk(&s.seeker_id), keys::PROFILE_SK)?;
        Ok(s)
    }

    /// What suggestions depend on: city, skills, salary, categories.
    pub fn matching_profile(&self) -> (String, &BTreeSet<String>, Option<i64>, &BTreeSet<String>) {
        (
            keys::normalize_city(&self.city),
            &self.skills,
            self.desired_salary,
            &self.categories,
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestStatus {
    Pending,
    Approved,
    Declined,
}

/// A seeker's swipe right on a job; carries the job's key parts so that a
/// match can name the job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub employer_id: String,
    pub job_id: String,
    pub seeker_id: String,
    pub status: RequestStatus,
    pub requested_at: String,
    pub job_city: String,
    pub job_posted_at: String,
    pub job_zip: String,
    /// The day it was approved (`approvedAt`), when approved.
    pub approved_at: Option<String>,
}

impl Request {
    pub fn parse(item: &Item) -> Result<Self, InputError> {
        let e = attr("request", item);
        let status = match item.s("status").map_err(&e)? {
            "pending" => RequestStatus::Pending,
            "approved" => RequestStatus::Approved,
            "declined" => RequestStatus::Declined,
            other => {
                return Err(e(AttrError::Invalid {
                    name: "status".into(),
                    reason: format!("`{other}` is not pending/approved/declined"),
                }))
            }
        };
        let approved_at = match item.opt_s("approvedAt").map_err(&e)? {
            Some(_) => Some(date(item, "request", "approvedAt")?),
            None => None,
        };
        if status == RequestStatus::Approved && approved_at.is_none() {
            return Err(e(AttrError::Missing("approvedAt".into())));
        }
        let r = Request {
            employer_id: item.s("employerId").map_err(&e)?.to_string(),
            job_id: item.s("jobId").map_err(&e)?.to_string(),
            seeker_id: item.s("seekerId").map_err(&e)?.to_string(),
            status,
            requested_at: date(item, "request", "requestedAt")?,
            job_city: item.s("jobCity").map_err(&e)?.to_string(),
            job_posted_at: date(item, "request", "jobPostedAt")?,
            job_zip: item.s("jobZip").map_err(&e)?.to_string(),
            approved_at,
        };
        check_key(
            item,
            &keys::employer_pk(&r.employer_id),
            &keys::request_sk(&r.job_id, &r.seeker_id),
        )?;
        Ok(r)
    }
}

/// Fields shared by suggestions and matches: which pair, which job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pair {
    pub job_id: String,
    pub seeker_id: String,
    pub employer_id: String,
    pub city: String,
    pub posted_at: String,
    pub zip: String,
}

impl Pair {
    pub fn parse(entity: &'static str, item: &Item) -> Result<Self, InputError> {
        let e = attr(entity, item);
        Ok(Pair {
            job_id: item.s("jobId").map_err(&e)?.to_string(),
            seeker_id: item.s("seekerId").map_err(&e)?.to_string(),
            employer_id: item.s("employerId").map_err(&e)?.to_string(),
            city: item.s("city").map_err(&e)?.to_string(),
            posted_at: date(item, entity, "postedAt")?,
            zip: item.s("zip").map_err(&e)?.to_string(),
        })
    }
}

/// A suggestion's relevance level (1 = best .. 3).
pub fn suggestion_level(item: &Item) -> Result<u8, InputError> {
    let e = attr("suggestion", item);
    match item.i64("relevance").map_err(&e)? {
        l @ 1..=3 => Ok(l as u8),
        other => Err(e(AttrError::Invalid {
            name: "relevance".into(),
            reason: format!("{other} is not 1..=3"),
        })),
    }
}

/// The day of a match.
pub fn matched_at(item: &Item) -> Result<String, InputError> {
    date(item, "match", "matchedAt")
}
