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

/// user10's #7: one stray entry far above the last one (a writer put
/// `HIST#00000099` beside entries 1..2 and mirror 2) is one extra entry no
/// change produced, not 97 missing ones and a mirror to raise; `--repair`
/// deletes it (guarded: while the mirror and the history's state are below
/// it and it is still the item read), and `--dry-run` lists, readably,
/// exactly what the repair then does. A real entry whose mirror lags (the
/// history's state has it) is never taken for a stray: the mirror is raised.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stray_entry_above_the_history_is_one_extra_entry_deleted_by_repair() {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/tasks/task.yaml");
    let mut env = model_env("hist", |o| o.model_file = Some(file)).await;
    for points in 1..=2 {
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
    assert_eq!(history(&env).await.1, Some(2));
    let stray = crate::items::attrs(vec![
        ("PK", s("T#a")),
        ("SK", s("HIST#00000099")),
        ("id", s("forged")),
        ("sequence", n(99)),
        ("description", s("forged")),
        ("taskId", s("a")),
    ]);
    put(&env.rt, stray).await;
    env.rt.drain().await.expect("drains");
    let report = env.rt.verify().await.expect("verify");
    let seq = &report.kinds["history-sequence"];
    assert_eq!(
        (seq.wrong, seq.missing, seq.extra),
        (0, 0, 1),
        "{}\n{:#?}",
        report.render(),
        report.problems
    );
    let found: Vec<&String> = report
        .problems
        .iter()
        .filter(|p| p.starts_with("history-"))
        .collect();
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].contains("entry 99") && found[0].contains("no change produced it"),
        "{found:#?}"
    );
    // The dry run: one line per repair, by what it does and its keys.
    let lines = report.dry_run(&["PK", "SK"]);
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(
        lines[0].contains("delete") && lines[0].contains("PK=T#a, SK=HIST#00000099"),
        "{lines:#?}"
    );
    assert!(
        !lines[0].contains('{') && !lines[0].contains("S(\""),
        "{lines:#?}"
    );
    // The run does what the dry run said.
    crate::items::repair(&env.rt, &report).await;
    let (entries, mirror) = history(&env).await;
    let seqs: Vec<i64> = entries.iter().map(|(q, _)| *q).collect();
    assert_eq!((seqs, mirror), (vec![1, 2], Some(2)), "{entries:?}");
    env.rt.drain().await.expect("drains");
    crate::items::assert_clean(&env).await;

    // A real entry above a lagging mirror: the history's state has it, so
    // the mirror is raised and the entry kept.
    let behind = [(":h", n(1))];
    crate::items::update(
        &env,
        crate::items::key("T#a", "TASK"),
        "SET historySequence = :h",
        &behind,
    )
    .await;
    let report = env.rt.verify().await.expect("verify");
    let seq = &report.kinds["history-sequence"];
    assert_eq!(
        (seq.wrong, seq.missing, seq.extra),
        (1, 0, 0),
        "{:#?}",
        report.problems
    );
    let lines = report.dry_run(&["PK", "SK"]);
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(
        lines[0].contains("historySequence") && lines[0].contains("PK=T#a, SK=TASK"),
        "{lines:#?}"
    );
    assert!(!lines[0].contains("Update {"), "{lines:#?}");
    crate::items::repair(&env.rt, &report).await;
    let (entries, mirror) = history(&env).await;
    assert_eq!((entries.len(), mirror), (2, Some(2)), "{entries:?}");
    env.rt.drain().await.expect("drains");
    crate::items::assert_clean(&env).await;
}
