//! A TTL expiry reaches the rules as an expiry, not as a user delete; a
//! derived item past its TTL is expected by no one (`verify`, `explain`).

use std::sync::{Arc, Mutex};

use aws_lambda_events::event::dynamodb::Event;
use aws_lambda_events::event::streams::DynamoDbEventResponse;
use jobstream::local::engine::{ensure_table, sdk_config, LocalEngine};
use jobstream::local::esm::{
    drain, stream_arn, Handler, MappingConfig, RecordReader, StreamMapping,
};
use shared::change::{decode, ChangeKind, Origin};
use shared::item::{n, s};
use shared::models::table::TableDef;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttl_removals_decode_as_expiries_and_user_deletes_as_user() {
    ttl_removals_keep_their_origin(false).await;
}

/// `jobstream run`'s path: GetRecords over HTTP through the SDK (the engine
/// spells `userIdentity` as DynamoDB does, `type` / `principalId`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttl_removals_read_through_the_sdk_keep_their_origin() {
    ttl_removals_keep_their_origin(true).await;
}

async fn ttl_removals_keep_their_origin(through_sdk: bool) {
    let engine = LocalEngine::start("127.0.0.1:0", None).await.unwrap();
    let sdk = sdk_config(Some(&engine.endpoint()), 3).await;
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    let def = TableDef {
        name: "ttl-test",
        pk: "pk",
        sk: "sk",
        gsis: vec![],
        ttl_attribute: Some("ttl"),
        stream: true,
    };
    ensure_table(&client, &def, "ttl-test").await.unwrap();
    let past = chrono::Utc::now().timestamp() - 60;
    for (sk, ttl) in [("expired", past), ("deleted", past + 10_000_000)] {
        client
            .put_item()
            .table_name("ttl-test")
            .item("pk", s("p"))
            .item("sk", s(sk))
            .item("ttl", n(ttl))
            .send()
            .await
            .unwrap();
    }
    client
        .delete_item()
        .table_name("ttl-test")
        .key("pk", s("p"))
        .key("sk", s("deleted"))
        .send()
        .await
        .unwrap();
    assert_eq!(engine.sweep_ttl().await.unwrap(), 1);

    let seen: Arc<Mutex<Vec<Event>>> = Arc::default();
    let sink = seen.clone();
    let handler: Handler = Arc::new(move |event| {
        sink.lock().unwrap().push(event);
        Box::pin(async { Ok(DynamoDbEventResponse::default()) })
    });
    let arn = stream_arn(&client, "ttl-test").await.unwrap();
    let reader = if through_sdk {
        RecordReader::Sdk
    } else {
        RecordReader::Embedded(engine.database().clone())
    };
    let mut mappings = vec![StreamMapping::new(
        MappingConfig::new("ttl"),
        jobstream::local::stream_identity::streams_client(&sdk),
        reader,
        arn,
        handler,
    )];
    drain(&mut mappings).await.unwrap();
    let changes: Vec<_> = seen
        .lock()
        .unwrap()
        .iter()
        .flat_map(|e| e.records.iter().map(|r| decode(r.clone()).unwrap()))
        .collect();
    let removes: Vec<_> = changes
        .iter()
        .filter(|c| c.kind == ChangeKind::Remove)
        .collect();
    assert_eq!(removes.len(), 2);
    for c in removes {
        let sk = match c.keys.get("sk") {
            Some(aws_sdk_dynamodb::types::AttributeValue::S(v)) => v.as_str(),
            _ => "",
        };
        let want = if sk == "expired" {
            Origin::TtlExpiry
        } else {
            Origin::User
        };
        assert_eq!(c.origin, want, "{sk}");
    }
}

/// Alerts live an hour less than their readings (user7's V03).
const ALERTS: &str = r#"
jobstream: 1
name: alerts_v03
table: { name: alerts_v03, pk: PK, sk: SK, ttl: ttl }
entities:
  reading:
    key: { PK: "D#${deviceId}", SK: "R#${ts}" }
    attributes: { deviceId: string, ts: iso-utc, temp: int, ttl: int }
    derive:
      - entity: alert
        when: "temp > 800"
        with: { deviceId: deviceId, ts: ts, ttl: "ttl - 3600" }
  alert:
    owner: processor
    key: { PK: "ALERTS#${deviceId}", SK: "A#${ts}" }
    attributes: { ttl: int }
"#;

/// A derived item whose TTL is past is swept, and `verify` expects it no
/// more: no drift, so `--repair` does not write it back expired (user7's
/// V03: perpetual `derived missing`, and a repair the sweep undid). One whose
/// TTL is ahead is still drift when missing. An empty table lists the
/// engine's kinds at 0 (user7's G10).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_derived_item_past_its_ttl_is_no_drift_and_one_ahead_of_it_is() {
    use crate::items::{assert_clean, attrs, delete, put, repair};
    let path = crate::support::temp_model("alerts_v03", ALERTS);
    let mut env =
        crate::support::model_env("alerts_v03", |o| o.model_file = Some(path.clone())).await;
    let empty = env.rt.verify().await.expect("verify");
    for kind in ["projection", "derived", "counter", "ledger"] {
        assert_eq!(
            empty.kinds.get(kind).map(|k| k.checked),
            Some(0),
            "{kind}: {:?}",
            empty.kinds
        );
    }
    let now = chrono::Utc::now().timestamp();
    let reading = |ts: &str, ttl: i64| {
        attrs(vec![
            ("PK", s("D#d1")),
            ("SK", s(format!("R#{ts}"))),
            ("type", s("reading")),
            ("deviceId", s("d1")),
            ("ts", s(ts)),
            ("temp", n(950)),
            ("ttl", n(ttl)),
        ])
    };
    // The reading lives ~1 h: its alert's TTL is already past.
    put(&env.rt, reading("2026-11-27T10:00:00Z", now + 3500)).await;
    env.rt.drain().await.expect("drains");
    assert_eq!(
        env.engine.sweep_ttl().await.expect("sweeps"),
        1,
        "the alert expired"
    );
    env.rt.drain().await.expect("drains");
    let report = env.rt.verify().await.expect("verify");
    assert!(report.is_clean(), "{:#?}", report.problems);
    assert_eq!(report.kinds["derived"].checked, 1);
    let x = crate::explain::ask_in(&env, &path, "D#d1", "R#2026-11-27T10:00:00Z").await;
    crate::explain::says(
        &x,
        &["derives PK=ALERTS#d1, SK=A#2026-11-27T10:00:00Z (alert) (absent: expired, its ttl is past)"],
    );
    // A reading living a day: its alert, gone, is drift, repaired.
    put(&env.rt, reading("2026-11-27T11:00:00Z", now + 86_400)).await;
    env.rt.drain().await.expect("drains");
    delete(
        &env.rt,
        crate::items::key("ALERTS#d1", "A#2026-11-27T11:00:00Z"),
    )
    .await;
    let report = env.rt.verify().await.expect("verify");
    assert_eq!(report.kinds["derived"].missing, 1, "{:#?}", report.problems);
    assert_eq!(repair(&env.rt, &report).await, 1);
    env.rt.drain().await.expect("drains");
    assert_clean(&env.rt).await;
}
