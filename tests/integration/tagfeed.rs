//! Questions fanned out to the followers of their tag
//! (tests/scenarios/tagfeed/: a feed item keyed by user and question
//! carries the tag, which the question's `primaryTag` determines).
//!
//! A join set whose fact moves its target to another row: a job
//! of the question's old tag, run after the re-tag (a late or redelivered
//! message: one a killed consumer held comes back after the visibility
//! timeout, user15 #9), lists the old tag's followers; for one who follows
//! the new tag too, the feed item is the new tag's row's, and the old
//! row's job must leave it (before: it deleted it, guarded only by the
//! question as read, which still held, so the item was missing for good).

use shared::engine::joinset::{JoinJob, Vars};
use shared::item::{s, Item, ItemExt};

use crate::items::{attrs, delete, deliver_jobs, get, key, put};
use jobstream::local::runtime::Runtime;

use crate::support::{model_env, ModelEnv};

fn model() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/tagfeed/tagfeed.yaml")
}

fn follow(tag: &str, user: &str) -> Item {
    attrs(vec![
        ("PK", s(format!("TAG#{tag}"))),
        ("SK", s(format!("F#{user}"))),
        ("type", s("follow")),
        ("tag", s(tag)),
        ("userId", s(user)),
    ])
}

fn question(id: &str, tag: &str) -> Item {
    attrs(vec![
        ("PK", s(format!("Q#{id}"))),
        ("SK", s("Q")),
        ("type", s("question")),
        ("questionId", s(id)),
        ("title", s(format!("title {id}"))),
        ("primaryTag", s(tag)),
    ])
}

/// The job a change of question `q` starts for tag `t`.
fn question_job(q: &str, t: &str) -> String {
    let bind: Vars = [("q", q), ("t", t)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    JoinJob {
        set: "tagfeed".into(),
        scope: "question".into(),
        bind,
        step: 0,
        after: None,
    }
    .encode()
}

async fn feed_tag(rt: &Runtime, user: &str, q: &str) -> Option<String> {
    get(rt, key(format!("FEED#{user}"), format!("Q#{q}")))
        .await
        .map(|i| i.s("tag").unwrap().to_string())
}

/// u4 follows py and go, u8 py only; q1 moves from py to go. The py job
/// run again afterwards keeps u4's item (now go's) and deletes none that
/// the facts imply; u8's (py's only) is gone either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_job_of_the_old_tag_keeps_the_item_the_new_tag_implies() {
    let ModelEnv { engine: _e, mut rt } =
        model_env("tagfeed", |o| o.model_file = Some(model())).await;
    for f in [follow("py", "u4"), follow("go", "u4"), follow("py", "u8")] {
        put(&rt, f).await;
    }
    put(&rt, question("q1", "py")).await;
    rt.drain().await.unwrap();
    assert_eq!(feed_tag(&rt, "u4", "q1").await.as_deref(), Some("py"));
    assert_eq!(feed_tag(&rt, "u8", "q1").await.as_deref(), Some("py"));

    put(&rt, question("q1", "go")).await;
    rt.drain().await.unwrap();
    assert_eq!(feed_tag(&rt, "u4", "q1").await.as_deref(), Some("go"));
    assert_eq!(feed_tag(&rt, "u8", "q1").await, None);

    // The re-tag's job of the old tag, delivered again (and the new
    // tag's, in either order): the facts have not changed since.
    for body in [
        question_job("q1", "py"),
        question_job("q1", "go"),
        question_job("q1", "py"),
    ] {
        deliver_jobs(&rt, "tagfeed", &[body]).await;
        assert_eq!(
            feed_tag(&rt, "u4", "q1").await.as_deref(),
            Some("go"),
            "u4 follows go: its feed keeps q1"
        );
        assert_eq!(feed_tag(&rt, "u8", "q1").await, None);
    }
    crate::items::assert_clean(&rt).await;
}

/// A feed item deleted by hand (as a lost job would leave it): `explain`
/// of its key says the join set's row implies it and that it is missing,
/// as `verify` does (user15 #10; before: "a derived item (absent)" and "no
/// source item implies it now", the derive's view). A key no row implies
/// says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_of_a_missing_target_names_the_row_that_implies_it() {
    let ModelEnv { engine, mut rt } = model_env("tagfeed", |o| o.model_file = Some(model())).await;
    put(&rt, follow("py", "u1")).await;
    put(&rt, question("q0", "py")).await;
    rt.drain().await.unwrap();
    delete(&rt, key("FEED#u1", "Q#q0")).await;
    rt.drain().await.unwrap();
    let report = rt.verify().await.unwrap();
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.contains("FEED#u1, SK=Q#q0: its facts imply it")),
        "{:#?}",
        report.problems
    );
    let env = ModelEnv { engine, rt };
    let x = crate::explain::ask_in(&env, &model(), "FEED#u1", "Q#q0").await;
    assert!(!x.present);
    crate::explain::says(
        &x,
        &[
            "a target of join set `tagfeed`",
            "row q=q0, t=py, u=u1: implies it",
            "implied by join set `tagfeed`, row q=q0, t=py, u=u1: missing; `verify --repair` brings it back",
        ],
    );
    assert!(
        !x.lines
            .iter()
            .any(|l| l.contains("no source item implies it")),
        "{:#?}",
        x.lines
    );
    // No follower of go: nothing implies u1's item of a go question.
    put(&env.rt, question("q9", "go")).await;
    let x = crate::explain::ask_in(&env, &model(), "FEED#u1", "Q#q9").await;
    crate::explain::says(
        &x,
        &[
            "a target of join set `tagfeed`",
            "no row implies it now (verify reports it as extra if it exists)",
        ],
    );
}
