//! user11's finding 3: an org (a history's root) deleted, members put
//! while it is gone, the org put again (round A); then deleted and
//! re-created with other members (round B). The fold reads part of these
//! writes before the writer makes the rest (it catches up between them),
//! so each batch sees the table as the writer left it then. Whatever the
//! moments the fold catches up: every member of a deleted incarnation is
//! cascaded (never carried into the next one, never left under a root
//! that is gone), the re-created org's history starts at its creation and
//! names no member of an earlier incarnation, and `verify` ends clean.
//!
//! Batches are delivered by hand, as Lambda delivers them (a batch that
//! reports a failed record is delivered again from that record on).

use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};
use serde_json::Value;
use shared::item::{s, Item, ItemExt};

use crate::history_recreate::deliver_history;
use crate::items::{assert_clean, attrs, begins, delete, deliver, get, key, put};
use crate::support::{model_env, temp_model, ModelEnv};

/// user11's saas model cut to its history: an org and its memberships in
/// the org's partition.
const SAAS: &str = r#"
jobstream: 1
name: saas
table:
  name: saas
  pk: PK
  sk: SK
  gsis: [{ name: GSI1, pk: GSI1PK, sk: GSI1SK }]
entities:
  org:
    key: { PK: "ORG#${orgId}", SK: "META" }
    attributes: { orgId: string, name: string }
  membership:
    key: { PK: "ORG#${orgId}", SK: "MEMBER#${userId}" }
    attributes: { orgId: string, userId: string, role: [owner, admin, member] }
    project:
      attributes: { GSI1PK: "USER#${userId}", GSI1SK: "ORG#${orgId}" }
  org_entry:
    owner: processor
    key: { PK: "ORG#${orgId}", SK: "HIST#${sequence}" }
history:
  root: { entity: org, created: "Org ${name} created" }
  members:
    membership:
      list: members
      fields: [userId, role]
      added: "${userId} joined as ${role}"
      updated: "${userId}: ${old.role} -> ${new.role}"
      removed: "${userId} left"
  entries: { entity: org_entry, digits: 6 }
"#;

async fn saas() -> ModelEnv {
    let model = temp_model("saas", SAAS);
    model_env("saas", |o| o.model_file = Some(model)).await
}

fn org(o: &str) -> Item {
    attrs(vec![
        ("PK", s(format!("ORG#{o}"))),
        ("SK", s("META")),
        ("type", s("org")),
        ("orgId", s(o)),
        ("name", s("Casc")),
    ])
}

fn member(o: &str, u: &str, role: &str) -> Item {
    attrs(vec![
        ("PK", s(format!("ORG#{o}"))),
        ("SK", s(format!("MEMBER#{u}"))),
        ("type", s("membership")),
        ("orgId", s(o)),
        ("userId", s(u)),
        ("role", s(role)),
    ])
}

/// One of the writer's steps.
#[derive(Clone, Copy, Debug)]
enum Op {
    DeleteOrg,
    Put(&'static str),
    PutOrg,
    /// TransactWriteItems of the org's delete alone.
    TxDeleteOrg,
    /// TransactWriteItems of the org, c1 as owner and c2 as admin (c1 as
    /// it was would be the case README leaves open: a member put back
    /// identical after the last record of the batch that folds its
    /// incarnation's deletion, before that batch is folded).
    TxRecreate,
}

/// Round A, then round B (`recreate`: deleted and re-created with c1 and
/// c2; else deleted for good).
fn ops(recreate: bool) -> Vec<Op> {
    let mut ops = vec![Op::DeleteOrg, Op::Put("c2"), Op::Put("c3"), Op::PutOrg];
    if recreate {
        ops.extend([Op::TxDeleteOrg, Op::TxRecreate]);
    } else {
        ops.push(Op::DeleteOrg);
    }
    ops
}

async fn write(env: &ModelEnv, o: &str, op: Op) {
    let tx_put = |item: Item| {
        TransactWriteItem::builder()
            .put(
                Put::builder()
                    .table_name(&env.rt.config.table)
                    .set_item(Some(item))
                    .build()
                    .expect("a put"),
            )
            .build()
    };
    match op {
        Op::DeleteOrg => delete(env, key(format!("ORG#{o}"), "META")).await,
        Op::Put(u) => put(env, member(o, u, "member")).await,
        Op::PutOrg => put(env, org(o)).await,
        Op::TxDeleteOrg => {
            let d = aws_sdk_dynamodb::types::Delete::builder()
                .table_name(&env.rt.config.table)
                .set_key(Some(key(format!("ORG#{o}"), "META")))
                .build()
                .expect("a delete");
            env.rt
                .dynamodb
                .transact_write_items()
                .transact_items(TransactWriteItem::builder().delete(d).build())
                .send()
                .await
                .expect("transaction");
        }
        Op::TxRecreate => {
            env.rt
                .dynamodb
                .transact_write_items()
                .transact_items(tx_put(org(o)))
                .transact_items(tx_put(member(o, "c1", "owner")))
                .transact_items(tx_put(member(o, "c2", "admin")))
                .send()
                .await
                .expect("transaction");
        }
    }
}

/// The stream records of org `o`'s partition, in order.
async fn records_of(env: &ModelEnv, o: &str) -> Vec<Value> {
    let pk = format!("ORG#{o}");
    env.records()
        .await
        .into_iter()
        .filter(|r| r["dynamodb"]["Keys"]["PK"]["S"].as_str() == Some(pk.as_str()))
        .collect()
}

/// How far the processors have read org `o`'s records: the derive (its
/// projections onto the members are records of its own, processor-owned
/// attributes only), and the history.
#[derive(Default)]
struct Read {
    derive: usize,
    history: usize,
}

/// The derive reads every record written so far (its projections land
/// after them, as they do while the writer goes on).
async fn derive(env: &ModelEnv, o: &str, read: &mut Read) {
    let records = records_of(env, o).await;
    if records.len() > read.derive {
        deliver(env, &records[read.derive..]).await;
        read.derive = records.len();
    }
}

/// The processors catch up: every record of `o` not read yet, in one
/// batch each, until none is left (the cascade's removals and the
/// projections are records too).
async fn catch_up(env: &ModelEnv, o: &str, read: &mut Read) {
    for _ in 0..8 {
        derive(env, o, read).await;
        let records = records_of(env, o).await;
        if records.len() == read.history {
            return;
        }
        assert_eq!(
            deliver_history(env, &records[read.history..]).await,
            0,
            "{o}"
        );
        read.history = records.len();
    }
    panic!("{o}: the records kept coming");
}

/// The org's entries: (sequence, description, members of its snapshot
/// as `user:role`).
async fn history(env: &ModelEnv, o: &str) -> Vec<(i64, String, Vec<String>)> {
    begins(env, &format!("ORG#{o}"), "HIST#")
        .await
        .iter()
        .map(|e| {
            let members = match e.get("snapshot") {
                Some(AttributeValue::M(m)) => match m.get("members") {
                    Some(AttributeValue::L(l)) => l
                        .iter()
                        .map(|v| match v {
                            AttributeValue::M(m) => format!(
                                "{}:{}",
                                m.s("userId").unwrap_or("?"),
                                m.s("role").unwrap_or("?")
                            ),
                            _ => "?".into(),
                        })
                        .collect(),
                    _ => vec![],
                },
                _ => vec!["?".into()],
            };
            (
                e.opt_i64("sequence").ok().flatten().unwrap_or(-1),
                e.s("description").unwrap_or("?").to_string(),
                members,
            )
        })
        .collect()
}

/// The members under org `o` as `user:role`.
async fn members(env: &ModelEnv, o: &str) -> Vec<String> {
    begins(env, &format!("ORG#{o}"), "MEMBER#")
        .await
        .iter()
        .map(|m| {
            format!(
                "{}:{}",
                m.s("userId").unwrap_or("?"),
                m.s("role").unwrap_or("?")
            )
        })
        .collect()
}

async fn mirror(env: &ModelEnv, o: &str) -> Option<i64> {
    get(env, key(format!("ORG#{o}"), "META"))
        .await
        .and_then(|i| i.opt_i64("historySequence").ok().flatten())
}

/// What the org shows once the fold has read everything: after round B's
/// re-creation, c1 (owner) and c2 (admin) only, a history started at the
/// creation that names no member of an earlier incarnation; after a
/// deletion for good, nothing at all under the org.
async fn assert_end(env: &ModelEnv, o: &str, recreate: bool, how: &str) {
    let h = history(env, o).await;
    if !recreate {
        assert!(
            begins(env, &format!("ORG#{o}"), "").await.is_empty(),
            "{o} ({how}): items left under the deleted org: {:?} (history {h:?})",
            members(env, o).await
        );
        return;
    }
    assert_eq!(
        members(env, o).await,
        ["c1:owner", "c2:admin"],
        "{o} ({how}): history {h:?}"
    );
    let seqs: Vec<i64> = h.iter().map(|(q, _, _)| *q).collect();
    let want: Vec<i64> = (1..=h.len() as i64).collect();
    assert_eq!(seqs, want, "{o} ({how}): {h:?}");
    assert_eq!(
        h.first().map(|(_, d, _)| d.as_str()),
        Some("Org Casc created"),
        "{o} ({how}): {h:?}"
    );
    assert!(
        h.iter()
            .all(|(_, d, m)| !d.contains("c3") && !m.iter().any(|m| m.starts_with("c3:"))),
        "{o} ({how}): the re-created org's history names c3, a member of an earlier incarnation: {h:?}"
    );
    assert!(
        h.iter().all(|(_, d, _)| !d.contains("->")),
        "{o} ({how}): c2 never changed role in the re-created org: {h:?}"
    );
    assert_eq!(
        h.last().map(|(_, _, m)| m.clone()),
        Some(vec!["c1:owner".to_string(), "c2:admin".to_string()]),
        "{o} ({how}): {h:?}"
    );
    assert_eq!(mirror(env, o).await, Some(h.len() as i64), "{o} ({how})");
}

/// A moment the fold catches up: before the writer's op `.0`, it folds
/// the records written so far but the last `.1` (the table is ahead of
/// the batch it folds: its reads see the writes after the batch).
type Break = (usize, usize);

/// The plans: one such moment (before every op, leaving out up to 3
/// records), two of them (up to 1 record left out), and before every op.
fn plans(len: usize) -> Vec<Vec<Break>> {
    let mut plans: Vec<Vec<Break>> = Vec::new();
    for j in 1..=len {
        for back in 0..=3 {
            plans.push(vec![(j, back)]);
        }
    }
    for j1 in 1..len {
        for j2 in j1 + 1..=len {
            for (b1, b2) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
                plans.push(vec![(j1, b1), (j2, b2)]);
            }
        }
    }
    plans.push((1..=len).map(|j| (j, 0)).collect());
    plans
}

/// The derive reads what is written; then the history folds the records
/// of `o` not read yet but the last `back`.
async fn fold_behind(env: &ModelEnv, o: &str, read: &mut Read, back: usize) {
    derive(env, o, read).await;
    let records = records_of(env, o).await;
    let to = records.len().saturating_sub(back).max(read.history);
    if to > read.history {
        assert_eq!(
            deliver_history(env, &records[read.history..to]).await,
            0,
            "{o}"
        );
        read.history = to;
    }
}

async fn run(recreate: bool) {
    let mut env = saas().await;
    let ops = ops(recreate);
    let plans = plans(ops.len());
    let tag = if recreate { "r" } else { "d" };
    for (p, breaks) in plans.iter().enumerate() {
        let o = format!("{tag}{p}");
        let how = format!("fold behind at {breaks:?} (op, records left out) of {ops:?}");
        let mut read = Read::default();
        put(&env, org(&o)).await;
        for u in ["c1", "c2", "c3"] {
            put(&env, member(&o, u, "member")).await;
        }
        catch_up(&env, &o, &mut read).await;
        for j in 0..=ops.len() {
            for (_, back) in breaks.iter().filter(|(at, _)| *at == j) {
                fold_behind(&env, &o, &mut read, *back).await;
            }
            if let Some(op) = ops.get(j) {
                write(&env, &o, *op).await;
            }
        }
        catch_up(&env, &o, &mut read).await;
        assert_end(&env, &o, recreate, &how).await;
        // A replay from the start moves nothing.
        let records = records_of(&env, &o).await;
        assert_eq!(deliver_history(&env, &records).await, 0, "{o}");
        assert_end(&env, &o, recreate, &format!("{how}, replayed")).await;
    }
    env.rt.drain().await.expect("drains");
    for (p, breaks) in plans.iter().enumerate() {
        let o = format!("{tag}{p}");
        assert_end(&env, &o, recreate, &format!("drained, breaks {breaks:?}")).await;
    }
    assert_clean(&env).await;
}

/// user11's repro.py: round A, then round B re-creates the org with c1
/// and c2 (admin); c3 belonged to round A's incarnation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_of_a_deleted_incarnation_never_survives_into_the_next_whenever_the_fold_catches_up(
) {
    run(true).await;
}

/// user11's repro2.py: round A, then the org deleted for good: nothing
/// stays under it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_org_deleted_for_good_after_members_were_put_while_it_was_gone_leaves_nothing_whenever_the_fold_catches_up(
) {
    run(false).await;
}
