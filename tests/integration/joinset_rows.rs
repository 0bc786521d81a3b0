//! A join set target several rows imply (tests/scenarios/tickets/: a
//! cancellation notice keyed by holder, event and ticket that carries the
//! order, where ticket ids are per order): `verify` judges the item by the
//! rule the job applies (it exists while any row implies it, and carries
//! the row it carries while that row implies it, else the least), never
//! calls an implied item extra, and `--repair` never deletes it; `explain`
//! says which rows imply it and which one it carries.

use shared::item::{s, Item, ItemExt};

use crate::items::{attrs, put};
use crate::support::{model_env, ModelEnv};

fn model() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/tickets/tickets.yaml")
}

fn ticket(order: &str, status: &str) -> Item {
    attrs(vec![
        ("PK", s(format!("ORDER#{order}"))),
        ("SK", s("TICKET#k0")),
        ("type", s("ticket")),
        ("orderId", s(order)),
        ("ticketId", s("k0")),
        ("eventId", s("e1")),
        ("holderId", s("u1")),
        ("status", s(status)),
    ])
}

fn event(status: &str) -> Item {
    attrs(vec![
        ("PK", s("EVENT#e1")),
        ("SK", s("META")),
        ("type", s("event")),
        ("eventId", s("e1")),
        ("name", s("Gig")),
        ("status", s(status)),
    ])
}

/// Two orders' tickets `k0`, oA's refunded and oB's valid: the notice
/// carries oB, `verify` is clean, and `explain` lists both rows, says
/// which implies it and which row it carries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_names_the_rows_of_a_notice_and_the_row_it_carries() {
    let ModelEnv { engine: _e, mut rt } =
        model_env("tickets", |o| o.model_file = Some(model())).await;
    put(&rt, ticket("oA", "refunded")).await;
    put(&rt, ticket("oB", "valid")).await;
    put(&rt, event("cancelled")).await;
    rt.drain().await.unwrap();
    let notice = crate::items::key("USER#u1", "CANCEL#e1#k0");
    let made = crate::items::get(&rt, notice.clone())
        .await
        .expect("a notice");
    assert_eq!(made.s("orderId").unwrap(), "oB");
    crate::items::assert_clean(&rt).await;

    let explained = crate::explain::ask_in(
        &ModelEnv { engine: _e, rt },
        &model(),
        "USER#u1",
        "CANCEL#e1#k0",
    )
    .await;
    let text = explained.lines.join("\n");
    assert!(
        text.contains("a target of join set `cancellations`"),
        "{text}"
    );
    assert!(text.contains("o=oA, t=k0: does not imply it"), "{text}");
    assert!(text.contains("o=oB, t=k0: implies it"), "{text}");
    assert!(
        text.contains("carries the values of row e=e1, h=u1, o=oB, t=k0"),
        "{text}"
    );
}

/// The notice carrying the refunded order (as a replayed or forged write
/// would leave it) while the valid order implies it: `verify` says wrong,
/// not extra, and `--repair` rewrites it with the valid order's values
/// instead of deleting it (before: "extra: its facts no longer imply it",
/// and the repair deleted the notice the valid ticket implies).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repair_rewrites_a_notice_carrying_a_refunded_order_and_never_deletes_it() {
    let ModelEnv { engine: _e, mut rt } =
        model_env("tickets", |o| o.model_file = Some(model())).await;
    put(&rt, ticket("oA", "refunded")).await;
    put(&rt, ticket("oB", "valid")).await;
    put(&rt, event("cancelled")).await;
    rt.drain().await.unwrap();
    let notice = crate::items::key("USER#u1", "CANCEL#e1#k0");
    let mut forged = crate::items::get(&rt, notice.clone())
        .await
        .expect("a notice");
    forged.insert("orderId".into(), s("oA"));
    put(&rt, forged).await;
    rt.drain().await.unwrap();

    let report = rt.verify().await.unwrap();
    assert_eq!(report.problems.len(), 1, "{:#?}", report.problems);
    let p = &report.problems[0];
    assert!(
        p.contains("CANCEL#e1#k0") && p.contains("differ") && !p.contains("no longer imply"),
        "wrong, never extra: {p}"
    );
    crate::items::repair(&rt, &report).await;
    rt.drain().await.unwrap();
    let kept = crate::items::get(&rt, notice).await.expect("never deleted");
    assert_eq!(kept.s("orderId").unwrap(), "oB");
    crate::items::assert_clean(&rt).await;
}
