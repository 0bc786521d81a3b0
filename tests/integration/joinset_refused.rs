//! A join set (`sets:`) job whose page holds one target DynamoDB refuses
//! (user12's finding 4: a key past its limit) follows the stream
//! processors' error policy: the refused transaction is split to find the
//! target it cannot take, that target is bad input (logged, counted once,
//! the message completes: never retried, never in the DLQ), and the
//! page's other targets are written; `verify` lists the target as bad
//! input, not as missing, and `--repair` starts no job for it.

use std::time::Duration;

use shared::item::{s, Item};
use shared::metrics::names;

use crate::items::{attrs, get, key, put_all, repair};
use crate::support::{model_env, temp_model};

/// A published document's notification to each collaborator, keyed by the
/// user and the document.
const NOTIFY: &str = r#"
jobstream: 1
name: refused_set
table: { name: refused_set, pk: PK, sk: SK }
entities:
  document:
    key: { PK: "DOC#${documentId}", SK: "DOC" }
    attributes: { documentId: string, title: string, status: [draft, published] }
  collaborator:
    key: { PK: "DOC#${documentId}", SK: "COLLAB#${userId}" }
    attributes: { documentId: string, userId: string }
  notification:
    owner: processor
    key: { PK: "USER#${userId}", SK: "NOTIF#${userId}#${documentId}" }
    attributes: { title: string }
sets:
  published:
    entity: notification
    bind: { userId: u, documentId: d }
    facts:
      doc: { entity: document, bind: { documentId: d } }
      collab: { entity: collaborator, bind: { documentId: d, userId: u } }
    when: ["doc.status == 'published'"]
    values: { title: doc.title }
"#;

fn document(id: &str, status: &str) -> Item {
    attrs(vec![
        ("PK", s(format!("DOC#{id}"))),
        ("SK", s("DOC")),
        ("type", s("document")),
        ("documentId", s(id)),
        ("title", s("Plan")),
        ("status", s(status)),
    ])
}

fn collaborator(doc: &str, user: &str) -> Item {
    attrs(vec![
        ("PK", s(format!("DOC#{doc}"))),
        ("SK", s(format!("COLLAB#{user}"))),
        ("type", s("collaborator")),
        ("documentId", s(doc)),
        ("userId", s(user)),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_set_target_dynamodb_refuses_is_bad_input_and_the_pages_other_targets_are_written() {
    let path = temp_model("refused_set", NOTIFY);
    let mut env = model_env("refused_set", |o| o.model_file = Some(path.clone())).await;
    // The long user's collaborator key fits (SK of 1,022 bytes); its
    // notification's sort key (`NOTIF#<user>#doc1`, 1,026 bytes) is past
    // DynamoDB's 1,024.
    let long = "u".repeat(1015);
    put_all(
        &env.rt,
        vec![
            document("doc1", "draft"),
            collaborator("doc1", "ann"),
            collaborator("doc1", &long),
            collaborator("doc1", "bob"),
        ],
    )
    .await;
    env.rt
        .drain_within(Duration::from_secs(60))
        .await
        .expect("drains");
    put_all(&env.rt, vec![document("doc1", "published")]).await;
    // A message retried would stay in flight for the visibility timeout
    // (180 s), then come back until its DLQ: this drain would give up.
    env.rt
        .drain_within(Duration::from_secs(60))
        .await
        .expect("drains: no job message is retried");
    for u in ["ann", "bob"] {
        let n = get(&env.rt, key(format!("USER#{u}"), format!("NOTIF#{u}#doc1"))).await;
        assert!(n.is_some(), "{u}'s notification is written");
    }
    use shared::models::Harness as _;
    let dead = env.rt.dead_letters().await.expect("dead letters");
    assert!(dead.is_empty(), "nothing dead-lettered: {dead:?}");
    let consumer = env.rt.consumer("published");
    assert_eq!(
        consumer.metrics().get(names::BAD_INPUT),
        1,
        "the refused target is counted once"
    );
    assert_eq!(consumer.metrics().get(names::FAILED_RECORD), 0);

    // verify: the long user's notification cannot exist: bad input, not
    // missing.
    let report = env.rt.verify().await.expect("verify");
    let said = format!("{:#?} {:#?}", report.problems, report.bad_input);
    assert!(report.is_clean(), "not drift: {said}");
    assert!(report.repairs.is_empty(), "no repair: {said}");
    assert!(
        report
            .bad_input
            .iter()
            .any(|l| l.contains("published") && l.contains("1024")),
        "the target listed as bad input: {said}"
    );
    assert_eq!(repair(&env.rt, &report).await, 0, "--repair starts nothing");
    env.engine.stop().await;
}
