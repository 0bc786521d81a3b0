//! The suggestions Lambda: scores (seeker, job) pairs of a city and keeps the
//! TTL-bound suggestion items exactly as the relevance function says.
//!
//! Every write is naturally idempotent: a suggestion's key is the pair, so a
//! redelivered job rewrites the same item (a new level moves it in GSI1; a
//! new generation extends its TTL), and deletes of absent items are no-ops.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_dynamodb::types::{DeleteRequest, PutRequest, WriteRequest};
use chrono::{DateTime, Duration, SecondsFormat, Utc};

use super::entities::{Job, JobStatus, Seeker};
use super::keys;
use super::messages::{decode, BodyError, SuggestionJob};
use super::relevance::{level, score};
use crate::item::{n, s, Item, ItemExt};
use crate::metrics::Metrics;
use crate::sqs::{MessageError, MessageProcessor, Outcome};
use crate::store::{SortKey, Store};

/// Suggestions live a week.
pub const TTL: Duration = Duration::days(7);
/// Jobs posted in the last 30 days are candidates.
pub const WINDOW_DAYS: i64 = 30;

pub struct SuggestionsProcessor {
    store: Store,
    table: String,
    metrics: Metrics,
    now: fn() -> DateTime<Utc>,
}

/// A permanent failure for a body that cannot be read.
pub fn body_error(e: BodyError) -> MessageError {
    let kind = match e {
        BodyError::TooLarge(_) => "BodyTooLarge",
        BodyError::NotJson(_) => "NotJson",
        BodyError::NoVersion => "NoVersion",
        BodyError::UnknownVersion(_) => "UnknownVersion",
        BodyError::Invalid(_) => "InvalidMessage",
    };
    MessageError::Permanent {
        kind,
        reason: e.to_string(),
    }
}

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

fn key(pk: String, sk: String) -> Item {
    [(keys::PK.to_string(), s(pk)), (keys::SK.to_string(), s(sk))].into()
}

fn put(item: Item) -> WriteRequest {
    WriteRequest::builder()
        .put_request(
            PutRequest::builder()
                .set_item(Some(item))
                .build()
                .expect("item"),
        )
        .build()
}

fn delete(k: Item) -> WriteRequest {
    WriteRequest::builder()
        .delete_request(
            DeleteRequest::builder()
                .set_key(Some(k))
                .build()
                .expect("key"),
        )
        .build()
}

fn attr_set(items: &[Item], attr: &str) -> BTreeSet<String> {
    items
        .iter()
        .filter_map(|i| i.s(attr).ok().map(str::to_string))
        .collect()
}

impl SuggestionsProcessor {
    pub fn new(store: Store, table: &str) -> Self {
        Self {
            store,
            table: table.to_string(),
            metrics: Metrics::default(),
            now: Utc::now,
        }
    }

    /// Uses `now` as the clock (tests, demos).
    pub fn with_clock(mut self, now: fn() -> DateTime<Utc>) -> Self {
        self.now = now;
        self
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    fn in_window(&self, job: &Job) -> bool {
        let from = ((self.now)() - Duration::days(WINDOW_DAYS))
            .date_naive()
            .to_string();
        job.posted_at >= from
    }

    async fn q(
        &self,
        index: Option<&str>,
        pk_name: &str,
        pk: String,
        sk: Option<SortKey>,
    ) -> Result<Vec<Item>, MessageError> {
        Ok(self
            .store
            .query(&self.table, index, pk_name, &pk, sk)
            .await?)
    }

    fn begins(name: &str, prefix: String) -> Option<SortKey> {
        Some(SortKey::BeginsWith(name.to_string(), prefix))
    }

    async fn write(&self, writes: Vec<WriteRequest>) -> Result<Outcome, MessageError> {
        if writes.is_empty() {
            return Ok(Outcome::Duplicate);
        }
        self.store.batch_write(&self.table, writes).await?;
        Ok(Outcome::Applied)
    }

    async fn job_opened(&self, city: &str, job_sk: &str) -> Result<Outcome, MessageError> {
        let Some(item) = self
            .store
            .get(&self.table, key(keys::job_pk(city), job_sk.to_string()))
            .await?
        else {
            return Ok(Outcome::Skipped(format!(
                "job {city}/{job_sk} no longer exists"
            )));
        };
        let job = Job::parse(&item).map_err(|e| MessageError::Permanent {
            kind: "BadJob",
            reason: e.to_string(),
        })?;
        if job.status != JobStatus::Open || !self.in_window(&job) {
            return Ok(Outcome::Skipped(format!(
                "job {} is closed or older than {WINDOW_DAYS} days",
                job.job_id
            )));
        }
        let seekers = self
            .q(
                Some("GSI1"),
                keys::GSI1PK,
                keys::city_gsi1pk(city),
                Self::begins(keys::GSI1SK, "seeker#".into()),
            )
            .await?;
        let requested = attr_set(
            &self
                .q(
                    None,
                    keys::PK,
                    keys::employer_pk(&job.employer_id),
                    Self::begins(keys::SK, format!("r#{}#", job.job_id)),
                )
                .await?,
            "seekerId",
        );
        let matched: BTreeSet<String> = self
            .q(
                Some("GSI1"),
                keys::GSI1PK,
                keys::employer_pk(&job.employer_id),
                Self::begins(keys::GSI1SK, "m#".into()),
            )
            .await?
            .iter()
            .filter(|m| m.s("jobId").ok() == Some(job.job_id.as_str()))
            .filter_map(|m| m.s("seekerId").ok().map(str::to_string))
            .collect();
        let existing = attr_set(
            &self
                .q(
                    None,
                    keys::PK,
                    job.pk(),
                    Self::begins(keys::SK, format!("s#{}#", job.job_id)),
                )
                .await?,
            "seekerId",
        );
        let now = (self.now)();
        let mut writes = Vec::new();
        for item in &seekers {
            let Ok(seeker) = Seeker::parse(item) else {
                continue;
            };
            let sk = keys::suggestion_sk(&job.job_id, &seeker.seeker_id);
            let excluded =
                requested.contains(&seeker.seeker_id) || matched.contains(&seeker.seeker_id);
            let points = score(&seeker, &job);
            match level(points).filter(|_| !excluded) {
                Some(l) => writes.push(put(suggestion_item(&seeker, &job, l, points, now))),
                None if existing.contains(&seeker.seeker_id) => {
                    writes.push(delete(key(job.pk(), sk)))
                }
                None => {}
            }
        }
        self.write(writes).await
    }

    async fn seeker_changed(&self, seeker_id: &str) -> Result<Outcome, MessageError> {
        let existing: BTreeMap<(String, String), Item> = self
            .q(
                Some("GSI1"),
                keys::GSI1PK,
                keys::seeker_pk(seeker_id),
                Self::begins(keys::GSI1SK, "j#R".into()),
            )
            .await?
            .into_iter()
            .filter_map(|i| {
                Some((
                    (
                        i.s(keys::PK).ok()?.to_string(),
                        i.s(keys::SK).ok()?.to_string(),
                    ),
                    i,
                ))
            })
            .collect();
        let profile = self
            .store
            .get(
                &self.table,
                key(keys::seeker_pk(seeker_id), keys::PROFILE_SK.into()),
            )
            .await?;
        let mut wanted: BTreeMap<(String, String), Item> = BTreeMap::new();
        if let Some(item) = profile {
            let seeker = Seeker::parse(&item).map_err(|e| MessageError::Permanent {
                kind: "BadSeeker",
                reason: e.to_string(),
            })?;
            let now = (self.now)();
            let from = (now - Duration::days(WINDOW_DAYS)).date_naive();
            let until = now.date_naive();
            let jobs = self
                .q(
                    None,
                    keys::PK,
                    keys::job_pk(&seeker.city),
                    Some(SortKey::Between(
                        keys::SK.into(),
                        format!("j#{from}"),
                        format!("j#{until}#\u{10FFFF}"),
                    )),
                )
                .await?;
            let requested: BTreeSet<String> = self
                .q(
                    Some("GSI1"),
                    keys::GSI1PK,
                    keys::seeker_pk(seeker_id),
                    Self::begins(keys::GSI1SK, "r#".into()),
                )
                .await?
                .iter()
                .filter_map(|r| r.s("jobId").ok().map(str::to_string))
                .collect();
            let matched = attr_set(
                &self
                    .q(
                        None,
                        keys::PK,
                        keys::seeker_pk(seeker_id),
                        Self::begins(keys::SK, "j#".into()),
                    )
                    .await?,
                "jobId",
            );
            for item in &jobs {
                let Ok(job) = Job::parse(item) else { continue };
                if job.status != JobStatus::Open
                    || requested.contains(&job.job_id)
                    || matched.contains(&job.job_id)
                {
                    continue;
                }
                let points = score(&seeker, &job);
                if let Some(l) = level(points) {
                    let it = suggestion_item(&seeker, &job, l, points, now);
                    wanted.insert((job.pk(), keys::suggestion_sk(&job.job_id, seeker_id)), it);
                }
            }
        }
        let mut writes: Vec<WriteRequest> = existing
            .keys()
            .filter(|k| !wanted.contains_key(*k))
            .map(|(pk, sk)| delete(key(pk.clone(), sk.clone())))
            .collect();
        writes.extend(wanted.into_values().map(put));
        self.write(writes).await
    }

    async fn job_closed(&self, city: &str, job_id: &str) -> Result<Outcome, MessageError> {
        let pk = keys::job_pk(city);
        let existing = self
            .q(
                None,
                keys::PK,
                pk.clone(),
                Self::begins(keys::SK, format!("s#{job_id}#")),
            )
            .await?;
        let writes = existing
            .iter()
            .filter_map(|i| i.s(keys::SK).ok())
            .map(|sk| delete(key(pk.clone(), sk.to_string())))
            .collect();
        self.write(writes).await
    }
}

impl MessageProcessor for SuggestionsProcessor {
    fn name(&self) -> &'static str {
        "suggestions"
    }

    fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    async fn process(&self, body: &str) -> Result<Outcome, MessageError> {
        match decode::<SuggestionJob>(body).map_err(body_error)? {
            SuggestionJob::JobOpened { city, job_sk } => self.job_opened(&city, &job_sk).await,
            SuggestionJob::JobClosed { city, job_id } => self.job_closed(&city, &job_id).await,
            SuggestionJob::SeekerChanged { seeker_id } => self.seeker_changed(&seeker_id).await,
            SuggestionJob::PairRequested {
                city,
                job_id,
                seeker_id,
            } => {
                let k = key(
                    keys::job_pk(&city),
                    keys::suggestion_sk(&job_id, &seeker_id),
                );
                self.store.delete_keys(&self.table, vec![k]).await?;
                Ok(Outcome::Applied)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::jobboard::derive::tests::{job, seeker};

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
        let p = crate::engine::derive::DeriveRules::projection(
            &super::super::derive::JobBoardDerive,
            &item,
        )
        .unwrap()
        .unwrap();
        assert!(crate::engine::derive::projection_update(&["pk", "sk"], &item, &p).is_none());
    }
}
