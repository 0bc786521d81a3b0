//! user7's V04: a history root that is bad input gets no processor write.
//! The fold keeps its last valid state (its entries go on with members'
//! changes), but the sequence mirror waits until the root is valid again
//! (or deleted): a write onto the rejected item would make a stream record
//! of its own, which every processor reading it counts as bad input again
//! (one bad put is one `BadInput` per processor). `verify` lists the item
//! as bad input and finds no drift in its mirror (a repair would write
//! onto it); once the writer fixes it, the fold sets the mirror.

use aws_sdk_dynamodb::types::AttributeValue;
use shared::item::{s, Item, ItemExt};
use shared::metrics::names::BAD_INPUT;

use crate::items::{attrs, begins, get, key, metric_of, put};
use crate::support::{model_env, temp_model, ModelEnv};

/// user7's mini.yaml (a task counted per project, its history), with an
/// optional attribute and a member (comments) in the history. `ROOT`
/// stands for the root's declaration.
const MINI: &str = r#"
jobstream: 1
name: badroot
table: { name: badroot, pk: PK, sk: SK }
formats:
  id: { pattern: "^[A-Za-z0-9_-]+$" }
entities:
  task:
    key: { PK: "P#${projectId}", SK: "TASK#${taskId}" }
    attributes: { projectId: id, taskId: id, title: string, status: [todo, done], points: int? }
    count:
      - counter: pcount
        with: { projectId: projectId }
        add: { tasks: 1 }
  comment:
    key: { PK: "P#${projectId}", SK: "TASK#${taskId}#C#${commentId}" }
    attributes: { projectId: id, taskId: id, commentId: id, text: string }
  pcount:
    owner: processor
    key: { PK: "P#${projectId:id}", SK: "COUNT" }
    counter: { attributes: [tasks], created_by: processor }
  entry:
    owner: processor
    key: { PK: "P#${projectId:id}", SK: "TASK#${taskId:id}#HIST#${sequence}" }
history:
  root: ROOT
  members:
    comment: { list: comments, fields: [commentId, text], order: [commentId] }
  entries: { entity: entry, digits: 4 }
"#;

fn task(id: &str) -> Item {
    attrs(vec![
        ("PK", s("P#p")),
        ("SK", s(format!("TASK#{id}"))),
        ("type", s("task")),
        ("projectId", s("p")),
        ("taskId", s(id)),
        ("title", s("T")),
        ("status", s("todo")),
    ])
}

/// Task `id` as bad input: without its required `title` (`missing`), or
/// with its optional `points` of the wrong type, which the valid task did
/// not have (nothing the valid task held differs).
fn bad_task(id: &str, missing: bool) -> Item {
    let mut t = task(id);
    if missing {
        t.remove("title");
    } else {
        t.insert("points".into(), s("x"));
    }
    t
}

fn comment(task: &str, c: &str) -> Item {
    attrs(vec![
        ("PK", s("P#p")),
        ("SK", s(format!("TASK#{task}#C#{c}"))),
        ("type", s("comment")),
        ("projectId", s("p")),
        ("taskId", s(task)),
        ("commentId", s(c)),
        ("text", s("hi")),
    ])
}

/// The stream records of the item at `P#p`/`sk`.
async fn records_of_key(env: &ModelEnv, sk: &str) -> usize {
    env.records()
        .await
        .iter()
        .filter(|r| r["dynamodb"]["Keys"]["SK"]["S"].as_str() == Some(sk))
        .count()
}

/// `(history, derive)` bad input counted so far.
fn bad_inputs(env: &ModelEnv) -> (u64, u64) {
    (
        metric_of(env, "history", BAD_INPUT),
        metric_of(env, "derive", BAD_INPUT),
    )
}

/// Task `id`'s `historySequence` (`None`: absent).
async fn mirror(env: &ModelEnv, id: &str) -> Option<i64> {
    get(env, key("P#p", format!("TASK#{id}")))
        .await
        .expect("the task")
        .opt_i64("historySequence")
        .expect("a number")
}

/// Four tasks put valid then bad: f and g both before the processors run
/// (one batch), s and t after the valid put was folded (its mirror
/// written); f and s lose their `title`, g and t gain a `points` of the
/// wrong type (the root as folded still holds on them: only the declared
/// attribute the valid task lacked tells them apart). Then a comment on
/// each (an entry of the last valid state), then each task put valid again.
async fn a_bad_root_gets_no_processor_write(root: &str) {
    let model = temp_model("badroot", &MINI.replace("ROOT", root));
    let mut env = model_env("badroot", |o| o.model_file = Some(model)).await;
    let tasks = [("f", true), ("g", false), ("s", true), ("t", false)];
    for (id, missing) in &tasks[..2] {
        put(&env, task(id)).await;
        put(&env, bad_task(id, *missing)).await;
    }
    for (id, _) in &tasks[2..] {
        put(&env, task(id)).await;
    }
    env.rt.drain().await.expect("drains");
    for (id, _) in &tasks[2..] {
        assert_eq!(mirror(&env, id).await, Some(1), "{id}: valid, mirrored");
    }
    for (id, missing) in &tasks[2..] {
        put(&env, bad_task(id, *missing)).await;
    }
    env.rt.drain().await.expect("drains");
    // The writer's records only: f and g two puts, s and t two puts and
    // the mirror of the valid one.
    let writes = |id: &str| if ["f", "g"].contains(&id) { 2 } else { 3 };
    for (id, _) in &tasks {
        assert_eq!(
            mirror(&env, id).await,
            None,
            "{id}: a processor wrote the mirror onto the bad task"
        );
        let sk = format!("TASK#{id}");
        assert_eq!(records_of_key(&env, &sk).await, writes(id), "{id}");
    }
    assert_eq!(bad_inputs(&env), (4, 4), "one bad put, one BadInput each");
    // A comment on each: an entry of the task's last valid state, and
    // still nothing onto the bad task.
    for (id, _) in &tasks {
        put(&env, comment(id, "c1")).await;
    }
    env.rt.drain().await.expect("drains");
    for (id, _) in &tasks {
        let entries = begins(&env, "P#p", &format!("TASK#{id}#HIST#")).await;
        let seqs: Vec<i64> = entries
            .iter()
            .map(|e| crate::items::num(e, "sequence"))
            .collect();
        assert_eq!(seqs, [1, 2], "{id}");
        let snap = entries[1].get("snapshot").expect("a snapshot");
        let AttributeValue::M(snap) = snap else {
            panic!("{id}: a map")
        };
        assert_eq!(
            snap.get("title"),
            Some(&s("T")),
            "{id}: the last valid task"
        );
        assert_eq!(mirror(&env, id).await, None, "{id}: mirror on the bad task");
        let sk = format!("TASK#{id}");
        assert_eq!(records_of_key(&env, &sk).await, writes(id), "{id}");
    }
    assert_eq!(bad_inputs(&env), (4, 4));
    // verify: the bad tasks listed as bad input, no drift (a lagging
    // mirror on a bad root is not one: its repair would write onto it).
    let report = env.rt.verify().await.expect("verify");
    assert!(report.is_clean(), "drift: {:#?}", report.problems);
    for (id, _) in &tasks {
        assert!(
            report
                .bad_input
                .iter()
                .any(|b| b.contains(&format!("TASK#{id}"))),
            "{id}: {:#?}",
            report.bad_input
        );
    }
    assert!(report.repairs.is_empty(), "{:#?}", report.repairs);
    // Each task valid again (as it was): no entry, the mirror set.
    for (id, _) in &tasks {
        put(&env, task(id)).await;
    }
    env.rt.drain().await.expect("drains");
    for (id, _) in &tasks {
        assert_eq!(mirror(&env, id).await, Some(2), "{id}");
    }
    assert_eq!(bad_inputs(&env), (4, 4));
    let report = env.rt.verify().await.expect("verify");
    assert!(report.is_clean(), "drift: {:#?}", report.problems);
    assert!(report.bad_input.is_empty(), "{:#?}", report.bad_input);
    assert_eq!(
        get(&env, key("P#p", "COUNT"))
            .await
            .map(|c| crate::items::num(&c, "tasks")),
        Some(4)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_history_root_gets_no_mirror_and_is_one_bad_input_per_processor() {
    a_bad_root_gets_no_processor_write(r#"{ entity: task, created: "created" }"#).await;
}

/// The root's snapshot keeps `title` and `status` only: what the fold
/// folded says nothing of `points`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_history_root_whose_snapshot_keeps_some_fields_gets_no_mirror() {
    a_bad_root_gets_no_processor_write(
        r#"{ entity: task, created: "created", fields: [title, status] }"#,
    )
    .await;
}
