//! The job board locally: table, queues on moto, the derive stream consumer
//! and the two queue consumers, an application-side writer, and the demo
//! scenario with the seed's six access patterns.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{Duration as Days, NaiveDate, Utc};
use shared::item::{n, s, Item};
use shared::lambda::{
    jobboard_derive_processor, matches_processor, suggestions_processor, Config,
    JobBoardDeriveProcessor, Model,
};
use shared::models::jobboard::{
    self, keys, matches::MatchesProcessor, queues::queues, suggestions::SuggestionsProcessor,
};
use shared::models::table;
use shared::store::{Backoff, Store};

use crate::demo::render_table;
use crate::engine::{ensure_table, sdk_config};
use crate::esm::{handler, stream_arn, FailedBatch, MappingConfig, RecordReader, StreamMapping};
use crate::sqs_esm::{create_queue, sqs_handler, Queue, QueueMapping};

/// Where the job board runtime connects.
#[derive(Clone)]
pub struct JobBoardOptions {
    pub endpoint: Option<String>,
    pub sqs_endpoint: Option<String>,
    pub reader: RecordReader,
    pub table: String,
    pub ledger_table: String,
    /// Prefix of the queue names (tests use a unique one per test).
    pub queue_prefix: String,
    /// Local visibility timeout (Lambda's is 6 x the function timeout; a
    /// short one makes local retries quick).
    pub visibility: Duration,
    pub mapping: MappingConfig,
    pub max_attempts: u32,
    pub backoff: Backoff,
    /// Endpoint the processors write DynamoDB through (a fault proxy in tests).
    pub processor_endpoint: Option<String>,
}

impl JobBoardOptions {
    pub fn new(
        endpoint: Option<String>,
        sqs_endpoint: Option<String>,
        reader: RecordReader,
    ) -> Self {
        Self {
            endpoint,
            sqs_endpoint,
            reader,
            table: jobboard::table().name.to_string(),
            ledger_table: table::ledger().name.to_string(),
            queue_prefix: String::new(),
            visibility: Duration::from_secs(1),
            mapping: MappingConfig::new("derive"),
            max_attempts: 5,
            backoff: Backoff::default(),
            processor_endpoint: None,
        }
    }
}

pub struct JobBoardRuntime {
    pub config: Config,
    pub dynamodb: aws_sdk_dynamodb::Client,
    pub sqs: aws_sdk_sqs::Client,
    pub derive: Arc<JobBoardDeriveProcessor>,
    pub suggestions: Arc<SuggestionsProcessor>,
    pub matches: Arc<MatchesProcessor>,
    pub stream: Vec<StreamMapping>,
    pub queues: Vec<QueueMapping>,
}

impl JobBoardRuntime {
    pub async fn start(opts: JobBoardOptions) -> anyhow::Result<Self> {
        let sdk = sdk_config(opts.endpoint.as_deref(), opts.max_attempts).await;
        let sqs_sdk = sdk_config(opts.sqs_endpoint.as_deref(), opts.max_attempts).await;
        let dynamodb = aws_sdk_dynamodb::Client::new(&sdk);
        let sqs = aws_sdk_sqs::Client::new(&sqs_sdk);
        ensure_table(&dynamodb, &jobboard::table(), &opts.table).await?;
        ensure_table(&dynamodb, &table::ledger(), &opts.ledger_table).await?;
        let mut created: Vec<(shared::models::jobboard::queues::QueueDef, Queue)> = Vec::new();
        for def in queues() {
            let q = create_queue(&sqs, &def, &opts.queue_prefix, opts.visibility).await?;
            created.push((def, q));
        }
        let url = |logical: &str| {
            created
                .iter()
                .find(|(d, _)| d.logical == logical)
                .map(|(_, q)| q.url.clone())
        };
        let config = Config {
            table: opts.table.clone(),
            ledger_table: opts.ledger_table.clone(),
            model: Model::JobBoard,
            suggestions_queue_url: url(jobboard::derive::SUGGESTIONS_QUEUE),
            matches_queue_url: url(jobboard::derive::MATCHES_QUEUE),
        };
        let processor_client = match &opts.processor_endpoint {
            Some(e) => aws_sdk_dynamodb::Client::new(&sdk_config(Some(e), opts.max_attempts).await),
            None => dynamodb.clone(),
        };
        let store = || Store::with_backoff(processor_client.clone(), opts.backoff);
        let derive = Arc::new(jobboard_derive_processor(&config, store(), sqs.clone()));
        let suggestions = Arc::new(suggestions_processor(&config, store()));
        let matches = Arc::new(matches_processor(&config, store()));
        let arn = stream_arn(&dynamodb, &config.table).await?;
        let streams = aws_sdk_dynamodbstreams::Client::new(&sdk);
        let stream = vec![StreamMapping::new(
            opts.mapping.clone(),
            streams,
            opts.reader.clone(),
            arn,
            handler(derive.clone()),
        )];
        let mut mappings = Vec::new();
        for (def, q) in created {
            let h = match def.consumer {
                "suggestions" => sqs_handler(suggestions.clone()),
                _ => sqs_handler(matches.clone()),
            };
            mappings.push(QueueMapping::new(
                def.consumer,
                sqs.clone(),
                q,
                def.batch_size,
                h,
            ));
        }
        Ok(Self {
            config,
            dynamodb,
            sqs,
            derive,
            suggestions,
            matches,
            stream,
            queues: mappings,
        })
    }

    /// Processes the stream and the queues until all are empty (failed
    /// messages included: they come back after the visibility timeout and
    /// end in their DLQ). Gives up after `limit`.
    pub async fn drain_within(&mut self, limit: Duration) -> anyhow::Result<usize> {
        let started = Instant::now();
        let mut total = 0;
        let mut quiet = 0;
        while quiet < 2 {
            anyhow::ensure!(started.elapsed() < limit, "not drained within {limit:?}");
            let mut active = false;
            for m in &mut self.stream {
                let r = m.poll_once().await?;
                total += r.done;
                active |= r.done > 0 || r.pending > 0;
            }
            for q in &mut self.queues {
                let done = q.poll_once().await?;
                total += done;
                let (visible, in_flight) = q.depth().await?;
                active |= done > 0 || visible > 0 || in_flight > 0;
            }
            if active {
                quiet = 0;
                tokio::time::sleep(Duration::from_millis(20)).await;
            } else {
                quiet += 1;
            }
        }
        Ok(total)
    }

    pub async fn drain(&mut self) -> anyhow::Result<usize> {
        self.drain_within(Duration::from_secs(120)).await
    }

    /// One polling round of the stream and the queues; true if there was work.
    async fn poll_round(&mut self) -> bool {
        let mut busy = crate::esm::poll_streams(&mut self.stream).await;
        for q in &mut self.queues {
            match q.poll_once().await {
                Ok(n) => busy |= n > 0,
                Err(e) => tracing::warn!(error = %e, "queue poll failed"),
            }
        }
        busy
    }

    /// Polls until `stop` resolves.
    pub async fn run_until(
        &mut self,
        stop: impl std::future::Future<Output = ()>,
    ) -> anyhow::Result<()> {
        tokio::pin!(stop);
        loop {
            let busy = self.poll_round().await;
            if crate::esm::pause_or_stop(busy, stop.as_mut()).await {
                return Ok(());
            }
        }
    }

    pub fn failed_batches(&self) -> Vec<FailedBatch> {
        self.stream
            .iter()
            .flat_map(|m| m.on_failure.take())
            .collect()
    }

    /// Messages currently in a consumer's DLQ.
    pub async fn dlq_depth(&self, consumer: &str) -> anyhow::Result<u64> {
        let q = self
            .queues
            .iter()
            .find(|q| q.name == consumer)
            .context("no such consumer")?;
        let (visible, in_flight) = crate::sqs_esm::depth(&self.sqs, &q.queue.dlq_url).await?;
        Ok(visible + in_flight)
    }

    /// The URL of a consumer's queue.
    pub fn queue_url(&self, consumer: &str) -> Option<String> {
        self.queues
            .iter()
            .find(|q| q.name == consumer)
            .map(|q| q.queue.url.clone())
    }
}

/// Application-side writes of the job board. GSI1 keys are left to the
/// processors.
#[derive(Clone)]
pub struct JobBoardWriter {
    pub client: aws_sdk_dynamodb::Client,
    pub table: String,
}

fn ss(v: &[&str]) -> AttributeValue {
    AttributeValue::Ss(v.iter().map(|s| s.to_string()).collect())
}

fn item(pairs: Vec<(&str, AttributeValue)>) -> Item {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// A job posting.
pub struct NewJob<'a> {
    pub job_id: &'a str,
    pub employer_id: &'a str,
    pub city: &'a str,
    pub posted_at: String,
    pub zip: &'a str,
    pub title: &'a str,
    pub skills: &'a [&'a str],
    pub category: &'a str,
    pub salary_max: i64,
}

impl NewJob<'_> {
    pub fn item(&self) -> Item {
        item(vec![
            (keys::PK, s(keys::job_pk(self.city))),
            (
                keys::SK,
                s(keys::job_sk(&self.posted_at, self.zip, self.job_id)),
            ),
            (keys::ENTITY_TYPE, s("job")),
            ("jobId", s(self.job_id)),
            ("employerId", s(self.employer_id)),
            ("city", s(self.city)),
            ("postedAt", s(&self.posted_at)),
            ("zip", s(self.zip)),
            ("title", s(self.title)),
            (
                "description",
                s(format!("{} at {}", self.title, self.employer_id)),
            ),
            ("skills", ss(self.skills)),
            ("category", s(self.category)),
            ("salaryMin", n(self.salary_max * 8 / 10)),
            ("salaryMax", n(self.salary_max)),
            ("status", s("open")),
        ])
    }
}

impl JobBoardWriter {
    pub fn new(client: aws_sdk_dynamodb::Client, table: &str) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }

    pub async fn put(&self, i: Item) -> anyhow::Result<()> {
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(i))
            .send()
            .await
            .context("PutItem")?;
        Ok(())
    }

    pub async fn employer(&self, id: &str, name: &str) -> anyhow::Result<()> {
        self.put(item(vec![
            (keys::PK, s(keys::employer_pk(id))),
            (keys::SK, s(keys::PROFILE_SK)),
            (keys::ENTITY_TYPE, s("employer")),
            ("employerId", s(id)),
            ("name", s(name)),
        ]))
        .await
    }

    /// Access pattern 6: create a job, refusing to overwrite one.
    pub async fn create_job(&self, job: &NewJob<'_>) -> anyhow::Result<()> {
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(job.item()))
            .condition_expression("attribute_not_exists(pk) AND attribute_not_exists(sk)")
            .send()
            .await
            .context("creating job")?;
        Ok(())
    }

    pub async fn seeker(
        &self,
        id: &str,
        name: &str,
        city: &str,
        skills: &[&str],
        desired: i64,
        categories: &[&str],
    ) -> anyhow::Result<()> {
        let mut i = item(vec![
            (keys::PK, s(keys::seeker_pk(id))),
            (keys::SK, s(keys::PROFILE_SK)),
            (keys::ENTITY_TYPE, s("seeker")),
            ("seekerId", s(id)),
            ("name", s(name)),
            ("city", s(city)),
            ("skills", ss(skills)),
            ("desiredSalary", n(desired)),
        ]);
        if !categories.is_empty() {
            i.insert("categories".into(), ss(categories));
        }
        self.put(i).await
    }

    /// A seeker's swipe right.
    pub async fn request(
        &self,
        job: &NewJob<'_>,
        seeker_id: &str,
        requested_at: &str,
    ) -> anyhow::Result<()> {
        self.put(item(vec![
            (keys::PK, s(keys::employer_pk(job.employer_id))),
            (keys::SK, s(keys::request_sk(job.job_id, seeker_id))),
            (keys::ENTITY_TYPE, s("request")),
            ("employerId", s(job.employer_id)),
            ("jobId", s(job.job_id)),
            ("seekerId", s(seeker_id)),
            ("status", s("pending")),
            ("requestedAt", s(requested_at)),
            ("jobCity", s(job.city)),
            ("jobPostedAt", s(&job.posted_at)),
            ("jobZip", s(job.zip)),
        ]))
        .await
    }

    pub async fn set_request_status(
        &self,
        employer_id: &str,
        job_id: &str,
        seeker_id: &str,
        status: &str,
        day: &str,
    ) -> anyhow::Result<()> {
        self.client
            .update_item()
            .table_name(&self.table)
            .key(keys::PK, s(keys::employer_pk(employer_id)))
            .key(keys::SK, s(keys::request_sk(job_id, seeker_id)))
            .update_expression("SET #s = :s, approvedAt = :d")
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_names("#s", "status")
            .expression_attribute_values(":s", s(status))
            .expression_attribute_values(":d", s(day))
            .send()
            .await
            .context("updating request")?;
        Ok(())
    }

    pub async fn close_job(&self, job: &NewJob<'_>) -> anyhow::Result<()> {
        self.client
            .update_item()
            .table_name(&self.table)
            .key(keys::PK, s(keys::job_pk(job.city)))
            .key(
                keys::SK,
                s(keys::job_sk(&job.posted_at, job.zip, job.job_id)),
            )
            .update_expression("SET #s = :closed")
            .expression_attribute_names("#s", "status")
            .expression_attribute_values(":closed", s("closed"))
            .send()
            .await
            .context("closing job")?;
        Ok(())
    }
}

/// `days` days before today (UTC), as `YYYY-MM-DD`.
pub fn days_ago(days: i64) -> String {
    (Utc::now().date_naive() - Days::days(days)).to_string()
}

pub fn today() -> NaiveDate {
    Utc::now().date_naive()
}

/// A query for the access patterns.
pub async fn query(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    index: Option<&str>,
    pk_name: &str,
    pk: &str,
    sk: Option<shared::store::SortKey>,
) -> anyhow::Result<Vec<Item>> {
    Ok(Store::new(client.clone())
        .query(table, index, pk_name, pk, sk)
        .await?)
}

/// Readable rows of items: the given attributes.
pub fn rows(items: &[Item], attrs: &[&str]) -> Vec<Vec<String>> {
    items
        .iter()
        .map(|i| {
            attrs
                .iter()
                .map(|a| match i.get(*a) {
                    Some(AttributeValue::S(v)) => v.clone(),
                    Some(AttributeValue::N(v)) => v.clone(),
                    Some(AttributeValue::Ss(v)) => v.join(","),
                    Some(_) => "?".into(),
                    None => "-".into(),
                })
                .collect()
        })
        .collect()
}

pub fn print_items(title: &str, items: &[Item], attrs: &[&str]) {
    println!("\n{title}");
    println!("{}", render_table(attrs, &rows(items, attrs)));
}
