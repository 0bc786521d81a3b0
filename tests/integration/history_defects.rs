//! History defects a user found from the README alone (a `history:` block in
//! a model file, tests/scenarios/tasks/task.yaml): the repair of a mirror
//! run ahead. The other defects (a root re-created in a later batch, a
//! catch-all `updated:` rule, a member written while its root is deleted,
//! a change no rule matches) are scenario files in tests/scenarios/tasks/.

use shared::item::{n, s, ItemExt};

use crate::support::{model_env, put, ModelEnv};

/// U02's repair: a mirror past the last entry is the mirror's drift; repair
/// never writes a placeholder for an entry no change produced (a lost entry
/// between two that exist is still restored).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repair_lowers_a_mirror_past_the_last_entry_and_invents_no_entries() {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/tasks/task.yaml");
    let mut env = model_env("hist", |o| o.model_file = Some(file)).await;
    for points in 1..=3 {
        let task = crate::items::attrs(vec![
            ("PK", s("T#a")),
            ("SK", s("TASK")),
            ("type", s("task")),
            ("taskId", s("a")),
            ("points", n(points)),
        ]);
        put(&env.rt, task).await;
    }
    env.rt.drain().await.expect("drains");
    assert_eq!(history(&env).await.1, Some(3));
    // Entry 2 lost (between two that exist), and the mirror run ahead.
    crate::items::delete(&env, crate::items::key("T#a", "HIST#00000002")).await;
    let ahead = [(":h", n(6))];
    crate::items::update(
        &env,
        crate::items::key("T#a", "TASK"),
        "SET historySequence = :h",
        &ahead,
    )
    .await;
    let report = env.rt.verify().await.expect("verify");
    assert!(!report.is_clean());
    crate::items::repair(&env.rt, &report).await;
    let (entries, mirror) = history(&env).await;
    let seqs: Vec<i64> = entries.iter().map(|(q, _)| *q).collect();
    assert_eq!(seqs, [1, 2, 3], "{entries:?}");
    assert!(entries[1].1.starts_with("Entry lost"), "{entries:?}");
    assert_eq!(mirror, Some(3));
    env.rt.drain().await.expect("drains");
    crate::items::assert_clean(&env).await;
}

/// (sequence, description) of task a's entries, and its mirror.
async fn history(env: &ModelEnv) -> (Vec<(i64, String)>, Option<i64>) {
    let items = crate::items::partition(env, "T#a").await;
    let entries = items
        .iter()
        .filter(|i| i.s("SK").is_ok_and(|k| k.starts_with("HIST#")))
        .map(|i| {
            let sequence = i.opt_i64("sequence").ok().flatten().unwrap_or(-1);
            (sequence, i.s("description").unwrap_or("?").to_string())
        })
        .collect();
    let mirror = items
        .iter()
        .find(|i| i.s("SK") == Ok("TASK"))
        .and_then(|i| i.opt_i64("historySequence").ok().flatten());
    (entries, mirror)
}
