//! History defects a user found from the README alone (a `history:` block in
//! a model file): a backlog deleting and re-creating a root across batches,
//! a catch-all `updated:` rule, a member written while its root is deleted,
//! and a change no `updated:` rule matches.

use std::path::PathBuf;

use aws_sdk_dynamodb::types::AttributeValue;
use shared::item::{n, s, Item, ItemExt};

use crate::support::{model_env, put, ModelEnv};

const TASK: &str = r#"jobstream: 1
table: { name: hist, pk: PK, sk: SK }
entities:
  task:
    key: { PK: "T#${taskId}", SK: "TASK" }
    attributes: { taskId: string, points: int }
  comment:
    key: { PK: "T#${taskId}", SK: "C#${cid}" }
    attributes: { taskId: string, cid: string }
  entry:
    owner: processor
    key: { PK: "T#${taskId}", SK: "HIST#${sequence}" }
history:
  root: { entity: task ROOT_EXTRA }
  members: { comment: { list: comments } }
  entries: { entity: entry }
"#;

fn model(root_extra: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!(
        "jobstream-histdefects-{}.yaml",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::write(&path, TASK.replace("ROOT_EXTRA", root_extra)).expect("writes");
    path
}

async fn env(root_extra: &str) -> ModelEnv {
    let file = model(root_extra);
    model_env("hist", |o| o.model_file = Some(file)).await
}

fn task(id: &str, v: i64) -> Item {
    [
        ("PK", s(format!("T#{id}"))),
        ("SK", s("TASK")),
        ("type", s("task")),
        ("taskId", s(id)),
        ("points", n(v)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

fn comment(id: &str, cid: &str) -> Item {
    [
        ("PK", s(format!("T#{id}"))),
        ("SK", s(format!("C#{cid}"))),
        ("type", s("comment")),
        ("taskId", s(id)),
        ("cid", s(cid)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

async fn delete(env: &ModelEnv, pk: &str, sk: &str) {
    env.rt
        .dynamodb
        .delete_item()
        .table_name(&env.rt.config.table)
        .key("PK", s(pk))
        .key("SK", s(sk))
        .send()
        .await
        .expect("delete");
}

/// The items of a partition, by sort key.
async fn partition(env: &ModelEnv, pk: &str) -> Vec<Item> {
    env.rt
        .dynamodb
        .query()
        .table_name(&env.rt.config.table)
        .key_condition_expression("PK = :pk")
        .expression_attribute_values(":pk", s(pk))
        .consistent_read(true)
        .send()
        .await
        .expect("query")
        .items
        .unwrap_or_default()
}

/// (sequence, description) of a partition's entries, and the root's mirror.
async fn history(env: &ModelEnv, pk: &str) -> (Vec<(i64, String)>, Option<i64>) {
    let items = partition(env, pk).await;
    let entries = items
        .iter()
        .filter(|i| i.s("SK").is_ok_and(|k| k.starts_with("HIST#")))
        .map(|i| {
            (
                i.opt_i64("sequence").ok().flatten().unwrap_or(-1),
                i.s("description").unwrap_or("?").to_string(),
            )
        })
        .collect();
    let mirror = items
        .iter()
        .find(|i| i.s("SK") == Ok("TASK"))
        .and_then(|i| i.opt_i64("historySequence").ok().flatten());
    (entries, mirror)
}

async fn drain(env: &mut ModelEnv) {
    env.rt.drain().await.expect("drains");
}

async fn assert_clean(env: &ModelEnv) {
    let report = env.rt.verify().await.expect("verify");
    assert!(report.is_clean(), "drift: {:#?}", report.problems);
}

/// U02: with the processors behind, 5 changes of task z, 95 of other tasks,
/// then z deleted and re-created: z's delete and re-creation come in a later
/// batch (of 100) than its first changes. The first batch's mirror (5) was
/// written onto the re-created item, and the re-created history's mirror
/// (1) never replaced it: verify reported entries 2..5 missing and
/// `--repair` restored entries no change ever produced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_root_deleted_and_recreated_in_a_later_batch_starts_over_at_one() {
    let mut env = env("").await;
    for i in 0..5 {
        put(&env.rt, task("z", i)).await;
    }
    for i in 0..95 {
        put(&env.rt, task(&format!("f{i}"), i)).await;
    }
    delete(&env, "T#z", "TASK").await;
    put(&env.rt, task("z", 7)).await;
    drain(&mut env).await;
    let (entries, mirror) = history(&env, "T#z").await;
    assert_eq!(entries, [(1, "Created task".to_string())]);
    assert_eq!(mirror, Some(1), "the re-created task's mirror");
    let (entries, mirror) = history(&env, "T#f3").await;
    assert_eq!(entries.len(), 1);
    assert_eq!(mirror, Some(1));
    assert_clean(&env).await;
}

/// U02's repair: a mirror past the last entry is the mirror's drift; repair
/// never writes a placeholder for an entry no change produced (a lost entry
/// between two that exist is still restored).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repair_lowers_a_mirror_past_the_last_entry_and_invents_no_entries() {
    let mut env = env("").await;
    put(&env.rt, task("a", 1)).await;
    put(&env.rt, task("a", 2)).await;
    put(&env.rt, task("a", 3)).await;
    drain(&mut env).await;
    assert_eq!(history(&env, "T#a").await.1, Some(3));
    // Entry 2 lost (between two that exist), and the mirror run ahead.
    delete(&env, "T#a", "HIST#00000002").await;
    env.rt
        .dynamodb
        .update_item()
        .table_name(&env.rt.config.table)
        .key("PK", s("T#a"))
        .key("SK", s("TASK"))
        .update_expression("SET historySequence = :h")
        .expression_attribute_values(":h", n(6))
        .send()
        .await
        .expect("update");
    let report = env.rt.verify().await.expect("verify");
    assert!(!report.is_clean());
    jobstream::tools::verify::repair(&env.rt.processors, &report)
        .await
        .expect("repair");
    let (entries, mirror) = history(&env, "T#a").await;
    let seqs: Vec<i64> = entries.iter().map(|(q, _)| *q).collect();
    assert_eq!(seqs, [1, 2, 3], "{entries:?}");
    assert!(entries[1].1.starts_with("Entry lost"), "{entries:?}");
    assert_eq!(mirror, Some(3));
    drain(&mut env).await;
    assert_clean(&env).await;
}

/// U01: a catch-all `updated:` rule took the processor's own write of the
/// mirror for a change: "Updated " entries without end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catch_all_updated_rule_writes_no_entry_for_the_mirror() {
    let mut env = env(r#", updated: [{ say: "Updated ${changes}" }]"#).await;
    put(&env.rt, task("a", 1)).await;
    for _ in 0..4 {
        drain(&mut env).await;
    }
    put(&env.rt, task("a", 2)).await;
    for _ in 0..4 {
        drain(&mut env).await;
    }
    let (entries, mirror) = history(&env, "T#a").await;
    assert_eq!(
        entries,
        [
            (1, "Created task".to_string()),
            (2, "Updated points".to_string())
        ]
    );
    assert_eq!(mirror, Some(2));
    assert_clean(&env).await;
}

/// U03: a member written while its root is deleted is in the re-created
/// root's first snapshot, and the next deletion cascades it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_written_while_its_root_is_deleted_joins_the_recreated_root() {
    let mut env = env("").await;
    put(&env.rt, task("a", 1)).await;
    drain(&mut env).await;
    delete(&env, "T#a", "TASK").await;
    drain(&mut env).await;
    put(&env.rt, comment("a", "c1")).await;
    drain(&mut env).await;
    put(&env.rt, task("a", 2)).await;
    drain(&mut env).await;
    let items = partition(&env, "T#a").await;
    let latest = items
        .iter()
        .rfind(|i| i.s("SK").is_ok_and(|k| k.starts_with("HIST#")))
        .expect("an entry");
    assert_eq!(latest.s("description"), Ok("Created task"));
    let comments = latest
        .get("snapshot")
        .and_then(|v| v.as_m().ok())
        .and_then(|m| m.get("comments"))
        .and_then(|v| v.as_l().ok())
        .map(Vec::len);
    assert_eq!(comments, Some(1), "{latest:?}");
    assert_clean(&env).await;
    delete(&env, "T#a", "TASK").await;
    drain(&mut env).await;
    assert!(
        partition(&env, "T#a").await.is_empty(),
        "the cascade leaves nothing"
    );
    assert_clean(&env).await;
}

/// U04: a change of a snapshot field no `updated:` rule matches writes no
/// entry (SPEC §3: it folds into the next entry), and verify does not call
/// that state drift.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_no_rule_matches_writes_no_entry_and_is_not_drift() {
    let file = std::env::temp_dir().join(format!(
        "jobstream-histdefects-{}.yaml",
        uuid::Uuid::new_v4().simple()
    ));
    let yaml = TASK
        .replace("points: int }", "points: int, status: string }")
        .replace(
            "ROOT_EXTRA",
            r#", fields: [points, status], updated: [{ when: "old.status != new.status", say: "Status ${new.status}" }]"#,
        );
    std::fs::write(&file, yaml).expect("writes");
    let mut env = model_env("hist", |o| o.model_file = Some(file)).await;
    let mut t = task("a", 3);
    t.insert("status".into(), s("todo"));
    put(&env.rt, t.clone()).await;
    drain(&mut env).await;
    t.insert("points".into(), n(5));
    put(&env.rt, t.clone()).await;
    drain(&mut env).await;
    let (entries, _) = history(&env, "T#a").await;
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_clean(&env).await;
    t.insert("status".into(), s("done"));
    put(&env.rt, t).await;
    drain(&mut env).await;
    let items = partition(&env, "T#a").await;
    let latest = items
        .iter()
        .rfind(|i| i.s("SK").is_ok_and(|k| k.starts_with("HIST#")))
        .expect("an entry");
    assert_eq!(latest.s("description"), Ok("Status done"));
    let shown = latest
        .get("snapshot")
        .and_then(|v| v.as_m().ok())
        .and_then(|m| m.get("points"))
        .cloned();
    assert_eq!(
        shown,
        Some(AttributeValue::N("5".into())),
        "the next entry shows it"
    );
    assert_clean(&env).await;
}
