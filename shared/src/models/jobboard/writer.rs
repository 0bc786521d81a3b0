//! Application-side writes of the job board (the demo's and the tests'
//! writer). GSI1 keys are left to the processors.

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{Duration as Days, NaiveDate, Utc};

use super::keys;
use crate::item::{n, s, Item};
use crate::models::{Context as _, Failed};
use crate::store::Store;

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

    pub async fn put(&self, i: Item) -> Result<(), Failed> {
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(i))
            .send()
            .await
            .context("PutItem")?;
        Ok(())
    }

    pub async fn employer(&self, id: &str, name: &str) -> Result<(), Failed> {
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
    pub async fn create_job(&self, job: &NewJob<'_>) -> Result<(), Failed> {
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
    ) -> Result<(), Failed> {
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
    ) -> Result<(), Failed> {
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
    ) -> Result<(), Failed> {
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

    pub async fn close_job(&self, job: &NewJob<'_>) -> Result<(), Failed> {
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
    sk: Option<crate::store::SortKey>,
) -> Result<Vec<Item>, Failed> {
    Store::new(client.clone())
        .query(table, index, pk_name, pk, sk)
        .await
        .map_err(|e| Failed(e.to_string()))
}
