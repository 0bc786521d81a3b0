//! `jobstream demo`: plays the tracker scenario through the engine, drains
//! the processors and shows what a user would want to see.

use std::time::Instant;

use super::keys;
use super::scenario::{play, Expected};
use super::writer::TrackerWriter;
use crate::engine::setjob::BoxFut;
use crate::item::{Item, ItemExt};
use crate::models::{BoxError, Harness};
use crate::report::render_table;
use crate::store::{SortKey, Store};
use aws_sdk_dynamodb::types::AttributeValue;

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

/// Prints the observed state as tables.
pub fn print(observed: &Observed) {
    for (id, items) in &observed.histories {
        println!("\nHistory of APP#{id}");
        let rows: Vec<Vec<String>> = items
            .iter()
            .map(|i| {
                let (status, stages) = match i.get("snapshot") {
                    Some(AttributeValue::M(m)) => (
                        m.s("status").unwrap_or_default().to_string(),
                        match m.get("interviewStages") {
                            Some(AttributeValue::L(l)) => l.len().to_string(),
                            _ => "-".into(),
                        },
                    ),
                    _ => ("-".into(), "-".into()),
                };
                vec![
                    i.opt_i64("sequence")
                        .ok()
                        .flatten()
                        .unwrap_or(0)
                        .to_string(),
                    i.s("description").unwrap_or_default().to_string(),
                    status,
                    stages,
                ]
            })
            .collect();
        println!(
            "{}",
            render_table(&["seq", "description", "snapshot status", "stages"], &rows)
        );
    }
    println!(
        "\nMETA/COUNT (non-archived applications): {}",
        observed.count.map_or("absent".into(), |c| c.to_string())
    );
    let app_rows = |items: &[Item]| -> Vec<Vec<String>> {
        items
            .iter()
            .map(|i| {
                vec![
                    i.s("id").unwrap_or_default().to_string(),
                    i.s("companyName").unwrap_or_default().to_string(),
                    i.s("status").unwrap_or_default().to_string(),
                    i.s("updatedAt").unwrap_or_default().to_string(),
                    i.opt_i64(keys::HISTORY_SEQUENCE)
                        .ok()
                        .flatten()
                        .map_or("-".into(), |v| v.to_string()),
                ]
            })
            .collect()
    };
    let headers = ["id", "company", "status", "updatedAt", "historySequence"];
    println!("\nGSI2 (GSI2PK = ACTIVE), newest first");
    println!("{}", render_table(&headers, &app_rows(&observed.active)));
    for (p, items) in &observed.by_status {
        println!("\nGSI1 (GSI1PK = {p})");
        println!("{}", render_table(&headers, &app_rows(items)));
    }
}

/// Plays the scenario on a running runtime, prints, and returns the
/// differences from what the scenario implies (empty = success).
pub fn demo(h: &mut dyn Harness) -> BoxFut<'_, Result<Vec<String>, BoxError>> {
    Box::pin(run(h))
}

async fn run(rt: &mut dyn Harness) -> Result<Vec<String>, BoxError> {
    let writer = TrackerWriter::new(rt.dynamodb().clone(), rt.table());
    let started = Instant::now();
    let expected = play(&writer).await?;
    let records = rt.drain().await?;
    let elapsed = started.elapsed();
    let writes_after_drain = rt.processor_writes();
    // A second drain proves the fixpoint: no records, no writes.
    let extra = rt.drain().await?;
    let observed = observe(rt.dynamodb(), rt.table(), &expected).await?;
    print(&observed);
    let mut diffs = differences(&expected, &observed);
    if extra != 0 || rt.processor_writes() != writes_after_drain {
        diffs.push(format!(
            "processors did not reach a fixpoint: {extra} more records after draining"
        ));
    }
    let problems = rt.verify().await?;
    diffs.extend(problems.iter().cloned());
    diffs.extend(rt.dead_letters().await?);
    println!(
        "\nProcessed {records} stream records (history + derive) in {:.2?}; processors wrote {writes_after_drain} items.",
        elapsed
    );
    println!("verify: {} problem(s)", problems.len());
    Ok(diffs)
}
