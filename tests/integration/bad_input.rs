//! Bad input: structured error, a defined path, never a panic, never
//! silent loss; good records in the same batch still take effect.

use shared::item::{s, ItemExt};
use shared::metrics::names;

use crate::fixtures::fixture;
use crate::items::{invoke, partition};
use crate::support::{count, descriptions, env, env_behind_proxy};
use jobstream::faults::Fault;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_records_are_skipped_with_a_metric_and_good_ones_processed() {
    let env = env().await;
    let event = fixture("tracker-bad-input.json");
    // The table holds what the records' new images say (derive follows the
    // items as they are; the records' images are validated too).
    for r in &event.records {
        if r.event_name != "REMOVE" && !r.change.new_image.is_empty() {
            let item: shared::item::Item = r.change.new_image.clone().into();
            env.writer.put(item).await.unwrap();
        }
    }
    for handler in [
        invoke(&env.rt, "history", &event).await.unwrap(),
        invoke(&env.rt, "derive", &event).await.unwrap(),
    ] {
        assert!(
            handler.batch_item_failures.is_empty(),
            "retrying cannot help: skip with log"
        );
    }
    // missing image, wrong type, invalid enum; the unknown entity is
    // derive's to count (the history reads only its aggregates' keys, and
    // its deployed filter drops every other key before it runs).
    assert_eq!(
        crate::items::metric_of(&env, "history", names::BAD_INPUT),
        3
    );
    assert_eq!(crate::items::metric_of(&env, "derive", names::BAD_INPUT), 4);
    assert_eq!(
        descriptions(&env, "fx-4").await,
        ["Created application Fixture Labs - Staff Engineer"]
    );
    assert!(descriptions(&env, "fx-2").await.is_empty());
    assert!(descriptions(&env, "fx-3").await.is_empty());
    let unknown = partition(&env, "USER#u-1").await;
    assert_eq!(unknown.len(), 1, "only the writer's item");
    assert!(!unknown[0].contains_key("GSI1PK"));
    assert_eq!(
        count(&env).await,
        Some(1),
        "the good application only: one whose status is invalid is bad input whole (SPEC §2.7)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_without_sequence_number_fails_the_whole_batch_deliberately() {
    let env = env().await;
    let event = fixture("tracker-no-sequence-number.json");
    let err = invoke(&env.rt, "history", &event).await.unwrap_err();
    assert!(err.to_string().contains("SequenceNumber"), "{err}");
    assert!(invoke(&env.rt, "derive", &event).await.is_err());
    assert!(
        descriptions(&env, "fx-1").await.is_empty(),
        "nothing applied"
    );
    assert_eq!(count(&env).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_items_written_to_the_table_get_no_derived_data() {
    let mut env = env().await;
    let w = env.writer.clone();
    let mut bad_enum =
        crate::apps::application("e", "Co", "Role", "ghosted", "2026-11-01T09:00:00.000Z");
    bad_enum.insert("notes".into(), s("kept private"));
    w.put(bad_enum).await.unwrap();
    let mut wrong_type =
        crate::apps::application("t", "Co", "Role", "applied", "2026-11-01T09:00:00.000Z");
    wrong_type.insert("isArchived".into(), s("no"));
    w.put(wrong_type).await.unwrap();
    w.create("ok", "Co", "Role", "2026-11-01T09:00:00.000Z")
        .await;
    env.rt.drain().await.unwrap();
    for id in ["e", "t"] {
        let items = partition(&env, &format!("APP#{id}")).await;
        assert_eq!(items.len(), 1, "no history for {id}");
        assert!(!items[0].contains_key("GSI1PK"), "no GSI keys for {id}");
    }
    // An invalid status is bad input whole (SPEC §2.7): no GSI keys, no
    // history, not counted ("ok" alone counts; the compiled tracker counted
    // "e" too, as models/tracker.md says).
    assert_eq!(count(&env).await, Some(1));
    assert!(env.rt.failed_batches().is_empty());
    assert_eq!(
        crate::items::metric_of(&env, "history", names::BAD_INPUT),
        2
    );
}

/// The entry is written (numbering goes on) without its snapshot: bad
/// input logged at WARN, never ERROR, which is kept for what needs an
/// operator (seed13's #7: one ERROR line per entry of a large application).
/// (A current-thread runtime: the processors log on the captured thread.)
#[tokio::test]
async fn a_snapshot_over_400_kb_is_omitted_from_its_entry_and_numbering_continues() {
    let (logs, _guard) = crate::support::Captured::start();
    let mut env = env().await;
    let w = env.writer.clone();
    w.create("huge", "Co", "Role", "2026-11-01T09:00:00.000Z")
        .await;
    for i in 0..210 {
        let mut st = crate::apps::stage("huge", &format!("s{i:03}"), "Round", i);
        st.insert("notes".into(), s("n".repeat(2000)));
        w.put(st).await.unwrap();
    }
    env.rt.drain().await.unwrap();
    let entries: Vec<_> = partition(&env, "APP#huge")
        .await
        .into_iter()
        .filter(|i| i.s("SK").unwrap().starts_with("HIST#"))
        .collect();
    assert_eq!(entries.len(), 211);
    for (i, e) in entries.iter().enumerate() {
        assert_eq!(e.i64("sequence").unwrap(), i as i64 + 1);
        assert!(e.contains_key("snapshot") != e.contains_key("snapshotOmitted"));
    }
    let omitted = entries
        .iter()
        .filter(|e| e.contains_key("snapshotOmitted"))
        .count();
    assert!(omitted > 0 && omitted < 211, "{omitted}");
    assert!(entries[0].contains_key("snapshot"));
    assert!(entries[210]
        .s("snapshotOmitted")
        .unwrap()
        .contains("400 KB"));
    assert_eq!(
        crate::items::metric_of(&env, "history", names::SNAPSHOT_TOO_LARGE),
        omitted as u64
    );
    assert!(env.rt.failed_batches().is_empty());
    let logged = logs.text();
    let said: Vec<&str> = logged
        .lines()
        .filter(|l| l.contains("entry written without part of its content"))
        .collect();
    assert_eq!(said.len(), omitted, "{logged}");
    assert!(said.iter().all(|l| l.contains(" WARN ")), "{said:?}");
}

/// Refuses every message as a bad body.
struct Refuses(shared::metrics::Metrics);

impl shared::sqs::MessageProcessor for Refuses {
    fn name(&self) -> &'static str {
        "scoring"
    }
    fn metrics(&self) -> &shared::metrics::Metrics {
        &self.0
    }
    async fn process(
        &self,
        _body: &str,
    ) -> Result<shared::sqs::Outcome, shared::sqs::MessageError> {
        Err(shared::sqs::MessageError::Permanent {
            kind: "InvalidBody",
            reason: "not JSON".into(),
        })
    }
}

/// Refused input is expected (a writer's bug, not the operator's): it is
/// logged at WARN with what, where and why, counted (`BadInput`, which the
/// stack's alarms watch), never at ERROR, which is kept for what needs an
/// operator (user8: each bad record showed as one ERROR per processor).
#[tokio::test]
async fn refused_input_is_logged_at_warn_with_its_key_and_reason_never_at_error() {
    let (logs, _guard) = crate::support::Captured::start();
    let env = env().await;
    let event = fixture("tracker-bad-input.json");
    for processor in ["history", "derive"] {
        let r = invoke(&env.rt, processor, &event).await.expect("handled");
        assert!(r.batch_item_failures.is_empty());
    }
    let mut m = aws_lambda_events::event::sqs::SqsMessage::default();
    m.message_id = Some("m-bad".into());
    m.body = Some("{".into());
    let mut jobs = aws_lambda_events::event::sqs::SqsEvent::default();
    jobs.records.push(m);
    let refuses = Refuses(Default::default());
    let r = shared::sqs::handle_sqs_batch(&refuses, jobs)
        .await
        .expect("handled");
    assert!(
        r.batch_item_failures.is_empty(),
        "skipped with its log (SPEC §2.7), never retried to the DLQ"
    );
    assert_eq!(refuses.0.get(names::BAD_INPUT), 1);

    let logged = logs.text();
    let refused: Vec<&str> = logged
        .lines()
        .filter(|l| l.contains("bad input") || l.contains("bad message"))
        .collect();
    // 3 for the history, 4 for the derive, 1 message.
    assert_eq!(refused.len(), 8, "{logged}");
    for line in &refused {
        assert!(line.contains(" WARN "), "{line}");
        assert!(
            line.contains("processor=") && line.contains("kind="),
            "{line}"
        );
        assert!(line.contains("reason="), "{line}");
    }
    assert!(
        refused.iter().any(|l| l.contains("message_id=m-bad")),
        "{logged}"
    );
    assert!(!logged.contains(" ERROR "), "{logged}");
}

/// Items that match no entity are bad input (`UnknownEntity`, listed by
/// `verify`); another service's items in the same table are declared as a
/// key space of their own (`owner: other`, its key only): read and left
/// alone, never bad input, though they carry no type of this model's
/// (`writer_type: checked`, the default). user9's #16.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_of_no_entity_are_bad_input_and_a_key_space_declared_as_foreign_is_left_alone() {
    const TASKS: &str = r#"jobstream: 1
name: mine
table: { name: mine, pk: PK, sk: SK }
entities:
  task:
    key: { PK: "P#${projectId}", SK: "TASK#${taskId}" }
    attributes: { projectId: string, taskId: string, title: string }
FOREIGN"#;
    let foreign =
        "  others:\n    owner: other\n    key: { PK: \"OTHER#${otherPk}\", SK: \"${otherSk}\" }\n";
    for (declared, bad) in [("", 1), (foreign, 0)] {
        let path = crate::support::temp_model("mine", &TASKS.replace("FOREIGN", declared));
        let mut env = crate::support::model_env("mine", |o| o.model_file = Some(path)).await;
        let other = crate::items::item(&[("PK", "OTHER#1"), ("SK", "X"), ("type", "theirs")]);
        crate::items::put(&env, other).await;
        env.rt.drain().await.unwrap();
        assert_eq!(
            crate::items::metric_of(&env, "derive", names::BAD_INPUT),
            bad,
            "declared: {declared:?}"
        );
        let report = env.rt.verify().await.unwrap();
        assert_eq!(
            report.bad_input.len(),
            bad as usize,
            "{:?}",
            report.bad_input
        );
        if bad > 0 {
            assert!(
                report.bad_input[0].contains("unknown entity"),
                "{:?}",
                report.bad_input
            );
        }
        assert!(report.problems.is_empty(), "{:?}", report.problems);
    }
}

/// `owner: other` declares a key only: anything that would read or check
/// its items is refused when the file loads.
#[test]
fn a_foreign_key_space_declares_its_key_only() {
    let text = r#"jobstream: 1
name: mine
table: { name: mine, pk: PK, sk: SK }
entities:
  others:
    owner: other
    key: { PK: "OTHER#${otherPk}", SK: "${otherSk}" }
    attributes: { otherPk: string }
"#;
    let problems = shared::file::compile(text, "mine").expect_err("refused");
    let err: Vec<&str> = problems.iter().map(|p| p.message.as_str()).collect();
    let err = err.join("\n");
    assert!(
        err.contains("others: `owner: other` is a key space another writer owns, read and left alone: it declares its key only, not `attributes`"),
        "{err}"
    );
}

/// One bad record in a batch whose other record keeps failing (ops9's
/// finding 4): the mapping retries and bisects the batch, every attempt
/// meets the bad record again, and it is one fact: counted (`BadInput`)
/// and logged once per processor. The same item put bad again is a new
/// record, a new fact: counted again.
#[tokio::test]
async fn a_bad_record_is_counted_and_logged_once_however_often_its_batch_is_retried() {
    let (logs, _guard) = crate::support::Captured::start();
    let (mut env, proxy) = env_behind_proxy(1, 0).await;
    let at = "2026-11-01T09:00:00.000Z";
    let w = env.writer.clone();
    // The good record first, the bad one after it in the same batch: each
    // failure of the good one sends the bad one back too.
    w.create("good1", "Co", "Role", at).await;
    let bad = crate::apps::application("bad1", "Co", "Role", "ghosted", at);
    w.put(bad.clone()).await.unwrap();
    for op in [
        "TransactWriteItems",
        "UpdateItem",
        "PutItem",
        "BatchWriteItem",
    ] {
        proxy.inject(Fault::server_error(op, 3).matching("APP#good1"));
    }
    env.rt.drain().await.unwrap();
    assert!(proxy.injected() >= 3, "{}", proxy.injected());
    let failed: u64 = ["history", "derive"]
        .iter()
        .map(|p| crate::items::metric_of(&env, p, names::FAILED_RECORD))
        .sum();
    assert!(
        failed >= 3,
        "the batch was retried: {failed} failed records"
    );
    let refused = |logs: &crate::support::Captured, p: &str| {
        logs.text()
            .lines()
            .filter(|l| l.contains("skipping record: bad input"))
            .filter(|l| {
                l.contains(&format!("processor=\"{p}\"")) || l.contains(&format!("processor={p} "))
            })
            .count()
    };
    for p in ["history", "derive"] {
        assert_eq!(
            crate::items::metric_of(&env, p, names::BAD_INPUT),
            1,
            "{p}: one bad record, counted once"
        );
        assert_eq!(refused(&logs, p), 1, "{p}: logged once\n{}", logs.text());
    }
    // The same item put bad again: another record, counted.
    let mut again = bad;
    again.insert("updatedAt".into(), s("2026-11-02T09:00:00.000Z"));
    w.put(again).await.unwrap();
    env.rt.drain().await.unwrap();
    for p in ["history", "derive"] {
        assert_eq!(
            crate::items::metric_of(&env, p, names::BAD_INPUT),
            2,
            "{p}: a new bad record, counted"
        );
        assert_eq!(refused(&logs, p), 2, "{p}\n{}", logs.text());
    }
    assert!(env.rt.failed_batches().is_empty(), "nothing given up");
}
