//! The application tracker's writes as an application makes them (SPEC §3:
//! the seed's items, written with their own attributes only), the scripted
//! scenario the tracker's tests play, and what it implies: the model itself
//! is `models/tracker.yaml`; nothing here is the processors' code.

use aws_sdk_dynamodb::types::AttributeValue;
use shared::item::{n, s, Item, ItemExt};
use shared::models::{BoxError, Context as _, Failed};
use shared::store::{SortKey, Store};

/// The seed's key formats (SPEC §3), as literals.
pub mod keys {
    pub const PK: &str = "PK";
    pub const SK: &str = "SK";
    pub const GSI1PK: &str = "GSI1PK";
    pub const GSI2PK: &str = "GSI2PK";
    pub const META_PK: &str = "META";
    pub const COUNT_SK: &str = "COUNT";
    pub const COUNT_ATTR: &str = "count";
    pub const GSI2_ACTIVE: &str = "ACTIVE";

    /// `APP#<id>`: partition of an application and its children.
    pub fn app_pk(app_id: &str) -> String {
        format!("APP#{app_id}")
    }

    /// Sort key of the application item itself (same as its PK).
    pub fn app_sk(app_id: &str) -> String {
        app_pk(app_id)
    }

    /// `STAGE#<id>`.
    pub fn stage_sk(stage_id: &str) -> String {
        format!("STAGE#{stage_id}")
    }

    /// `HIST#<8-digit zero-padded sequence>`.
    pub fn hist_sk(sequence: u64) -> String {
        format!("HIST#{sequence:08}")
    }
}

/// The description of an adoption entry (`history: entries: imported:`).
pub const IMPORTED: &str = "Imported";

#[derive(Clone)]
pub struct AppWriter {
    pub client: aws_sdk_dynamodb::Client,
    pub table: String,
}

pub fn app_key(id: &str) -> Item {
    [
        (keys::PK.to_string(), s(keys::app_pk(id))),
        (keys::SK.to_string(), s(keys::app_sk(id))),
    ]
    .into()
}

fn stage_key(app_id: &str, stage_id: &str) -> Item {
    [
        (keys::PK.to_string(), s(keys::app_pk(app_id))),
        (keys::SK.to_string(), s(keys::stage_sk(stage_id))),
    ]
    .into()
}

/// A new application's user fields.
pub fn application(id: &str, company: &str, position: &str, status: &str, at: &str) -> Item {
    let mut item = app_key(id);
    for (k, v) in [
        ("id", s(id)),
        ("companyName", s(company)),
        ("positionTitle", s(position)),
        ("status", s(status)),
        ("isArchived", AttributeValue::Bool(false)),
        ("createdAt", s(at)),
        ("updatedAt", s(at)),
    ] {
        item.insert(k.to_string(), v);
    }
    item
}

/// A new interview stage.
pub fn stage(app_id: &str, stage_id: &str, name: &str, order: i64) -> Item {
    let mut item = stage_key(app_id, stage_id);
    for (k, v) in [
        ("id", s(stage_id)),
        ("applicationId", s(app_id)),
        ("name", s(name)),
        ("order", n(order)),
        ("isCompleted", AttributeValue::Bool(false)),
    ] {
        item.insert(k.to_string(), v);
    }
    item
}

impl AppWriter {
    pub fn new(client: aws_sdk_dynamodb::Client, table: &str) -> Self {
        Self {
            client,
            table: table.to_string(),
        }
    }

    /// PutItem of a whole item (no condition).
    pub async fn put(&self, item: Item) -> Result<(), Failed> {
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .send()
            .await
            .context("PutItem")?;
        Ok(())
    }

    pub async fn create_application(
        &self,
        id: &str,
        company: &str,
        position: &str,
        status: &str,
        at: &str,
    ) -> Result<(), Failed> {
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(application(id, company, position, status, at)))
            .condition_expression("attribute_not_exists(PK)")
            .send()
            .await
            .context("creating application")?;
        Ok(())
    }

    /// Creates an application in status `applied` (as
    /// [`Self::create_application`]); panics if the write fails.
    pub async fn create(&self, id: &str, company: &str, position: &str, at: &str) {
        self.create_application(id, company, position, "applied", at)
            .await
            .expect("creating an application");
    }

    async fn update(&self, key: Item, set: &[(&str, AttributeValue)]) -> Result<(), Failed> {
        let mut req = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key))
            .condition_expression("attribute_exists(PK)");
        let mut parts = Vec::new();
        for (i, (k, v)) in set.iter().enumerate() {
            parts.push(format!("#a{i} = :v{i}"));
            req = req
                .expression_attribute_names(format!("#a{i}"), *k)
                .expression_attribute_values(format!(":v{i}"), v.clone());
        }
        req.update_expression(format!("SET {}", parts.join(", ")))
            .send()
            .await
            .context("UpdateItem")?;
        Ok(())
    }

    /// Updates user fields and `updatedAt`.
    pub async fn update_application(
        &self,
        id: &str,
        set: &[(&str, AttributeValue)],
        at: &str,
    ) -> Result<(), Failed> {
        let mut all = set.to_vec();
        all.push(("updatedAt", s(at)));
        self.update(app_key(id), &all).await
    }

    /// Sets one attribute of an application (and `updatedAt`), as
    /// [`Self::update_application`]; panics if the write fails.
    pub async fn set(&self, id: &str, attr: &str, value: AttributeValue, at: &str) {
        self.update_application(id, &[(attr, value)], at)
            .await
            .expect("updating an application");
    }

    /// Sets one attribute of a stage, as [`Self::update_stage`]; panics if
    /// the write fails.
    pub async fn set_stage(&self, app_id: &str, stage_id: &str, attr: &str, value: AttributeValue) {
        self.update_stage(app_id, stage_id, &[(attr, value)])
            .await
            .expect("updating a stage");
    }

    pub async fn set_archived(&self, id: &str, archived: bool, at: &str) -> Result<(), Failed> {
        self.update_application(id, &[("isArchived", AttributeValue::Bool(archived))], at)
            .await
    }

    pub async fn add_stage(
        &self,
        app_id: &str,
        stage_id: &str,
        name: &str,
        order: i64,
    ) -> Result<(), Failed> {
        self.put(stage(app_id, stage_id, name, order)).await
    }

    pub async fn update_stage(
        &self,
        app_id: &str,
        stage_id: &str,
        set: &[(&str, AttributeValue)],
    ) -> Result<(), Failed> {
        self.update(stage_key(app_id, stage_id), set).await
    }

    pub async fn remove_stage(&self, app_id: &str, stage_id: &str) -> Result<(), Failed> {
        self.delete(stage_key(app_id, stage_id)).await
    }

    pub async fn delete_application(&self, id: &str) -> Result<(), Failed> {
        self.delete(app_key(id)).await
    }

    async fn delete(&self, key: Item) -> Result<(), Failed> {
        self.client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(key))
            .send()
            .await
            .context("DeleteItem")?;
        Ok(())
    }
}

/// What the scenario implies once processed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    /// Application id, company, and its history descriptions in order.
    pub histories: Vec<(&'static str, Vec<String>)>,
    /// Applications deleted (nothing of them may remain).
    pub deleted: Vec<&'static str>,
    /// META/COUNT.
    pub count: i64,
    /// GSI2 (active applications), most recently updated first.
    pub active: Vec<&'static str>,
    /// GSI1 partitions and the application ids in each.
    pub by_status: Vec<(String, Vec<&'static str>)>,
}

/// A clock for the scenario: one minute per step.
pub struct Clock(u32);

impl Clock {
    pub fn new() -> Self {
        Self(0)
    }
    /// The next timestamp.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> String {
        self.0 += 1;
        format!(
            "2026-11-01T{:02}:{:02}:00.000Z",
            9 + self.0 / 60,
            self.0 % 60
        )
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

/// Plays the scenario. Application ids get `prefix` so several runs can
/// share a table.
pub async fn play(w: &AppWriter) -> Result<Expected, BoxError> {
    let mut t = Clock::new();
    w.create_application(
        "acme",
        "Acme Robotics",
        "Backend Engineer",
        "applied",
        &t.next(),
    )
    .await?;
    w.create_application(
        "globex",
        "Globex",
        "Data Engineer",
        "unsubmitted",
        &t.next(),
    )
    .await?;
    w.create_application(
        "initech",
        "Initech",
        "Site Reliability Engineer",
        "applied",
        &t.next(),
    )
    .await?;
    w.create_application(
        "umbrella",
        "Umbrella",
        "Platform Engineer",
        "applied",
        &t.next(),
    )
    .await?;

    w.update_application(
        "acme",
        &[
            ("status", s("interviewing")),
            ("notes", s("Referred by Sam")),
        ],
        &t.next(),
    )
    .await?;
    w.add_stage("acme", "s1", "Phone screen", 1).await?;
    w.add_stage("acme", "s2", "Onsite", 2).await?;
    w.update_stage(
        "acme",
        "s1",
        &[
            ("isCompleted", AttributeValue::Bool(true)),
            ("completedDate", s("2026-11-03")),
            ("performanceRating", n(4)),
        ],
    )
    .await?;
    w.remove_stage("acme", "s2").await?;
    w.update_application(
        "acme",
        &[
            ("status", s("given offer")),
            ("salaryMin", n(150000)),
            ("salaryMax", n(180000)),
        ],
        &t.next(),
    )
    .await?;

    // An updatedAt-only touch writes no entry (but folds into the state).
    w.update_application("globex", &[], &t.next()).await?;
    w.update_application(
        "globex",
        &[("companyUrl", s("https://globex.example"))],
        &t.next(),
    )
    .await?;
    w.set_archived("globex", true, &t.next()).await?;

    w.set_archived("initech", true, &t.next()).await?;
    w.set_archived("initech", false, &t.next()).await?;

    w.add_stage("umbrella", "u1", "Take-home", 1).await?;
    w.delete_application("umbrella").await?;

    Ok(Expected {
        histories: vec![
            (
                "acme",
                vec![
                    "Created application Acme Robotics - Backend Engineer".into(),
                    "Updated Status, Notes".into(),
                    "Added interview stage \"Phone screen\"".into(),
                    "Added interview stage \"Onsite\"".into(),
                    "Updated interview stage \"Phone screen\"".into(),
                    "Removed interview stage \"Onsite\"".into(),
                    "Updated Status, Min Salary, Max Salary".into(),
                ],
            ),
            (
                "globex",
                vec![
                    "Created application Globex - Data Engineer".into(),
                    "Updated Company URL".into(),
                    "Archived application".into(),
                ],
            ),
            (
                "initech",
                vec![
                    "Created application Initech - Site Reliability Engineer".into(),
                    "Archived application".into(),
                    "Restored from archive".into(),
                ],
            ),
        ],
        deleted: vec!["umbrella"],
        count: 2,
        active: vec!["initech", "acme"],
        by_status: vec![
            ("STATUS#given offer#ARCHIVED#0".into(), vec!["acme"]),
            ("STATUS#unsubmitted#ARCHIVED#1".into(), vec!["globex"]),
            ("STATUS#applied#ARCHIVED#0".into(), vec!["initech"]),
        ],
    })
}

/// What the table holds after processing, in the shape of [`Expected`].
pub struct Observed {
    pub histories: Vec<(String, Vec<Item>)>,
    pub remaining_of_deleted: usize,
    pub count: Option<i64>,
    pub active: Vec<Item>,
    pub by_status: Vec<(String, Vec<Item>)>,
}

async fn query(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    index: Option<&str>,
    pk_name: &str,
    pk: &str,
    sk: Option<(&str, &str)>,
) -> Result<Vec<Item>, BoxError> {
    let sk = sk.map(|(name, prefix)| SortKey::BeginsWith(name.to_string(), prefix.to_string()));
    let mut items = Store::new(client.clone())
        .query(table, index, pk_name, pk, sk)
        .await?;
    if index.is_some() {
        // Index queries read newest first (GSIs sort by UPDATED#<ts>).
        items.reverse();
    }
    Ok(items)
}

/// Reads what the scenario's expectations talk about.
pub async fn observe(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    expected: &Expected,
) -> Result<Observed, BoxError> {
    let mut histories = Vec::new();
    for (id, _) in &expected.histories {
        let items = query(
            client,
            table,
            None,
            keys::PK,
            &keys::app_pk(id),
            Some((keys::SK, "HIST#")),
        )
        .await?;
        histories.push((id.to_string(), items));
    }
    let mut remaining_of_deleted = 0;
    for id in &expected.deleted {
        remaining_of_deleted += query(client, table, None, keys::PK, &keys::app_pk(id), None)
            .await?
            .len();
    }
    let count = client
        .get_item()
        .table_name(table)
        .key(keys::PK, AttributeValue::S(keys::META_PK.into()))
        .key(keys::SK, AttributeValue::S(keys::COUNT_SK.into()))
        .consistent_read(true)
        .send()
        .await?
        .item
        .and_then(|i| i.opt_i64(keys::COUNT_ATTR).ok().flatten());
    let active = query(
        client,
        table,
        Some("GSI2"),
        keys::GSI2PK,
        keys::GSI2_ACTIVE,
        None,
    )
    .await?;
    let mut by_status = Vec::new();
    for (p, _) in &expected.by_status {
        by_status.push((
            p.clone(),
            query(client, table, Some("GSI1"), keys::GSI1PK, p, None).await?,
        ));
    }
    Ok(Observed {
        histories,
        remaining_of_deleted,
        count,
        active,
        by_status,
    })
}

fn ids(items: &[Item]) -> Vec<String> {
    items
        .iter()
        .map(|i| i.s("id").unwrap_or_default().to_string())
        .collect()
}

/// Asserts the table holds what `expected` implies: no difference.
pub async fn assert_observed(client: &aws_sdk_dynamodb::Client, table: &str, expected: &Expected) {
    let observed = observe(client, table, expected).await.expect("reads");
    assert_eq!(differences(expected, &observed), Vec::<String>::new());
}

/// Every way the observed state differs from the expected one.
pub fn differences(expected: &Expected, observed: &Observed) -> Vec<String> {
    let mut diffs = Vec::new();
    for ((id, want), (_, items)) in expected.histories.iter().zip(&observed.histories) {
        let got: Vec<String> = items
            .iter()
            .map(|i| i.s("description").unwrap_or_default().to_string())
            .collect();
        if &got != want {
            diffs.push(format!("history of {id}: got {got:?}, expected {want:?}"));
        }
    }
    if observed.remaining_of_deleted != 0 {
        diffs.push(format!(
            "{} items of deleted applications remain",
            observed.remaining_of_deleted
        ));
    }
    if observed.count != Some(expected.count) {
        diffs.push(format!(
            "META/COUNT is {:?}, expected {}",
            observed.count, expected.count
        ));
    }
    if ids(&observed.active) != expected.active {
        diffs.push(format!(
            "GSI2 holds {:?}, expected {:?}",
            ids(&observed.active),
            expected.active
        ));
    }
    for ((p, want), (_, items)) in expected.by_status.iter().zip(&observed.by_status) {
        if ids(items) != *want {
            diffs.push(format!(
                "GSI1 {p} holds {:?}, expected {want:?}",
                ids(items)
            ));
        }
    }
    diffs
}
