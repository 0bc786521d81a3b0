//! A `compute:` job whose write DynamoDB refuses (user12's finding 4: a
//! document written with `title: ""` while the model projects
//! `GSI2PK: "${title}"`, an empty index key the job's write would carry
//! with the values) follows the stream processors' error policy: the
//! refused target is bad input (logged, counted once, the message
//! completes: never retried, never in the DLQ), the other targets of the
//! job's page are written; `verify` lists it as bad input, not drift, and
//! `--repair` starts no job for it.

use std::time::Duration;

use shared::item::{s, Item};
use shared::metrics::names;

use crate::items::{attrs, get, key, num, put_all, repair};
use crate::support::{model_env, temp_model};

/// Boards of an organisation, each counting the organisation's members
/// (one scope, several computing items: a scope job's page holds them
/// all), and listed by title on GSI2.
const BOARDS: &str = r#"
jobstream: 1
name: refused_compute
table:
  name: refused_compute
  pk: PK
  sk: SK
  gsis:
    - { name: GSI2, pk: GSI2PK, sk: GSI2SK }
entities:
  board:
    key: { PK: "ORG#${orgId}", SK: "BOARD#${boardId}" }
    attributes: { orgId: string, boardId: string, title: string }
    project:
      attributes: { GSI2PK: "${title}", GSI2SK: "BOARD#${boardId}" }
    compute:
      over: { entity: member, as: members }
      values:
        memberCount: "size(members)"
      queue: board-stats
  member:
    key: { PK: "ORG#${orgId}", SK: "MEMBER#${userId}" }
    attributes: { orgId: string, userId: string }
"#;

fn board(org: &str, id: &str, title: &str) -> Item {
    attrs(vec![
        ("PK", s(format!("ORG#{org}"))),
        ("SK", s(format!("BOARD#{id}"))),
        ("type", s("board")),
        ("orgId", s(org)),
        ("boardId", s(id)),
        ("title", s(title)),
    ])
}

fn member(org: &str, user: &str) -> Item {
    attrs(vec![
        ("PK", s(format!("ORG#{org}"))),
        ("SK", s(format!("MEMBER#{user}"))),
        ("type", s("member")),
        ("orgId", s(org)),
        ("userId", s(user)),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compute_write_dynamodb_refuses_is_bad_input_of_its_target_and_the_others_are_written() {
    let path = temp_model("refused_compute", BOARDS);
    let mut env = model_env("refused_compute", |o| o.model_file = Some(path.clone())).await;
    // b1's title is empty: its projection (GSI2PK) cannot exist, so
    // neither can the job's write of its values with that projection.
    put_all(
        &env.rt,
        vec![
            board("o1", "b1", ""),
            board("o1", "b2", "Roadmap"),
            board("o1", "b3", "Ops"),
        ],
    )
    .await;
    put_all(&env.rt, vec![member("o1", "u1"), member("o1", "u2")]).await;
    // A message retried would stay in flight for the visibility timeout
    // (180 s), then come back until its DLQ: this drain would give up.
    env.rt
        .drain_within(Duration::from_secs(60))
        .await
        .expect("drains: no job message is retried");
    for b in ["BOARD#b2", "BOARD#b3"] {
        let item = get(&env.rt, key("ORG#o1", b)).await.expect("the board");
        assert_eq!(num(&item, "memberCount"), 2, "{b} is computed");
    }
    let b1 = get(&env.rt, key("ORG#o1", "BOARD#b1")).await.expect("b1");
    assert_eq!(b1.get("memberCount"), None, "nothing written onto b1");
    assert_eq!(b1.get("GSI2PK"), None);
    use shared::models::Harness as _;
    let dead = env.rt.dead_letters().await.expect("dead letters");
    assert!(dead.is_empty(), "nothing dead-lettered: {dead:?}");
    let consumer = env.rt.consumer("board-stats");
    assert!(
        consumer.metrics().get(names::BAD_INPUT) >= 1,
        "the refused target is counted as bad input"
    );
    assert_eq!(consumer.metrics().get(names::FAILED_RECORD), 0);

    // verify: b1's value is bad input (it cannot be written), not drift.
    let report = env.rt.verify().await.expect("verify");
    let said = format!("{:#?} {:#?}", report.problems, report.bad_input);
    assert!(report.is_clean(), "not drift: {said}");
    assert!(report.repairs.is_empty(), "no repair: {said}");
    let line = report
        .bad_input
        .iter()
        .find(|l| l.contains("SK=BOARD#b1") && l.contains("memberCount"))
        .unwrap_or_else(|| panic!("b1's value listed as bad input: {said}"));
    assert!(line.contains("GSI2PK"), "says why: {line}");
    assert_eq!(repair(&env.rt, &report).await, 0, "--repair starts nothing");

    // Fixed, the board is computed as any.
    put_all(&env.rt, vec![board("o1", "b1", "Fixed")]).await;
    env.rt
        .drain_within(Duration::from_secs(60))
        .await
        .expect("drains");
    let b1 = get(&env.rt, key("ORG#o1", "BOARD#b1")).await.expect("b1");
    assert_eq!(num(&b1, "memberCount"), 2);
    assert_eq!(b1.get("GSI2PK"), Some(&s("Fixed")));
    let report = env.rt.verify().await.expect("verify");
    assert!(report.is_clean(), "{:#?}", report.problems);
    env.engine.stop().await;
}
