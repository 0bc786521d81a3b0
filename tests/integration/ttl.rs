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

/// A derived item whose TTL is past is never written, and `verify` expects
/// it no more: no drift, so `--repair` does not write it back expired
/// (user7's V03: perpetual `derived missing`, and a repair the sweep
/// undid). One whose
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
    // The reading lives ~1 h: its alert's TTL is already past, so it is
    // never written (nothing for the sweep to take).
    put(&env.rt, reading("2026-11-27T10:00:00Z", now + 3500)).await;
    env.rt.drain().await.expect("drains");
    let alert = crate::items::key("ALERTS#d1", "A#2026-11-27T10:00:00Z");
    assert!(
        crate::items::get(&env.rt, alert).await.is_none(),
        "put expired"
    );
    assert_eq!(env.engine.sweep_ttl().await.expect("sweeps"), 0);
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

/// A live match shows a banner until three hours after its start (user14's
/// ladder, its derive as the model file has it).
const LADDER: &str = r#"
jobstream: 1
name: ladder_u14
table: { name: ladder_u14, pk: PK, sk: SK, ttl: ttl }
entities:
  match:
    key: { PK: "SEASON#${seasonId}", SK: "MATCH#${matchId}" }
    attributes:
      seasonId: string
      matchId: string
      homeTeamId: string
      awayTeamId: string
      homeScore: int
      awayScore: int
      status: [scheduled, live, final]
      startAt: iso-utc
    derive:
      - entity: banner
        when: "status == 'live'"
        with: { seasonId: seasonId, matchId: matchId, homeTeamId: homeTeamId, awayTeamId: awayTeamId, ttl: "epoch(startAt) + 10800" }
  banner:
    owner: processor
    key: { PK: "LIVE#${seasonId}", SK: "MATCH#${matchId}" }
    attributes: { homeTeamId: string, awayTeamId: string, ttl: int }
"#;

/// A live match whose start is `ago` seconds back.
fn live_match(match_id: &str, ago: i64) -> shared::item::Item {
    let start = chrono::DateTime::from_timestamp(chrono::Utc::now().timestamp() - ago, 0)
        .expect("a time")
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    crate::items::attrs(vec![
        ("PK", s("SEASON#s1")),
        ("SK", s(format!("MATCH#{match_id}"))),
        ("type", s("match")),
        ("seasonId", s("s1")),
        ("matchId", s(match_id)),
        ("homeTeamId", s("ta")),
        ("awayTeamId", s("tb")),
        ("homeScore", n(1)),
        ("awayScore", n(0)),
        ("status", s("live")),
        ("startAt", s(start)),
    ])
}

/// The stream records so far of the item at `pk`/`sk`.
fn records_of_key(records: &[serde_json::Value], pk: &str, sk: &str) -> usize {
    records
        .iter()
        .filter(|r| {
            let keys = &r["dynamodb"]["Keys"];
            keys["PK"]["S"] == pk && keys["SK"]["S"] == sk
        })
        .count()
}

/// user14's finding: a live match's banner expired (its TTL, derived from
/// the match's start, passed) and the sweep took it; a consumer then read
/// the stream from TRIM_HORIZON (`run --from-start`, no other consumer)
/// and wrote the banner back, 1452 s past its TTL, until the next sweep.
/// The match still implies it, its ledger record says so, and the item is
/// absent: a derived item whose TTL is past is expected no more, and no
/// path writes it (a replay changes nothing; the expiry is not undone). A
/// banner already past its TTL when its match is written is never written
/// either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_from_trim_horizon_never_writes_back_a_derived_item_past_its_ttl() {
    use crate::items::{assert_clean, get, key, put};
    use jobstream::local::lease::CheckpointConfig;
    let path = crate::support::temp_model("ladder_u14", LADDER);
    let mut env =
        crate::support::model_env("ladder_u14", |o| o.model_file = Some(path.clone())).await;
    // The banner lives 2 s more.
    let started = live_match("m1", 10_800 - 2);
    put(&env.rt, started).await;
    env.rt.drain().await.expect("drains");
    let banner = key("LIVE#s1", "MATCH#m1");
    let alive = get(&env.rt, banner.clone()).await.expect("the banner");
    let ttl = alive["ttl"].as_n().expect("a ttl").parse::<i64>().unwrap();
    while chrono::Utc::now().timestamp() <= ttl {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(env.engine.sweep_ttl().await.expect("sweeps"), 1, "expired");
    env.rt.drain().await.expect("drains");
    assert_clean(&env.rt).await;
    let before = records_of_key(&env.records().await, "LIVE#s1", "MATCH#m1");
    assert_eq!(before, 2, "the banner's put and its expiry");

    // A fresh consumer from TRIM_HORIZON, the banner watched throughout.
    drop(env.rt);
    let mut opts = crate::support::embedded_options(&env.engine, "ladder_u14");
    opts.model_file = Some(path.clone());
    opts.time_scale = crate::support::TIME_SCALE;
    let client = aws_sdk_dynamodb::Client::new(
        &jobstream::local::engine::sdk_config(Some(&env.engine.endpoint()), 3).await,
    );
    let mut c = CheckpointConfig::new(client.clone(), shared::models::table::ledger().name);
    c.owner = "replayer".into();
    c.from_start = true;
    opts.mapping.checkpoints = Some(c);
    let mut replay = jobstream::local::runtime::Runtime::start(opts)
        .await
        .expect("the replay starts");
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watch = {
        let (done, client, table) = (done.clone(), client.clone(), replay.config.table.clone());
        let banner = banner.clone();
        tokio::spawn(async move {
            let mut seen = Vec::new();
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let out = client
                    .get_item()
                    .table_name(&table)
                    .set_key(Some(banner.clone()))
                    .consistent_read(true)
                    .send()
                    .await
                    .expect("get");
                seen.extend(out.item);
                tokio::task::yield_now().await;
            }
            seen
        })
    };
    let read = replay.drain().await.expect("the replay drains");
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let seen = watch.await.expect("the watch");
    assert!(read > 0, "the replay read the stream");
    assert!(
        seen.is_empty(),
        "the banner came back during the replay ({} reads saw it: {:?})",
        seen.len(),
        seen.first()
    );
    assert!(get(&replay, banner.clone()).await.is_none(), "written back");
    let after = records_of_key(
        &crate::support::records_of(&env.engine, &replay).await,
        "LIVE#s1",
        "MATCH#m1",
    );
    assert_eq!(after, before, "the replay wrote the banner");
    assert_clean(&replay).await;

    // A match whose banner is past its TTL when it is written: never put.
    put(&replay, live_match("m2", 10_800 + 60)).await;
    replay.drain().await.expect("drains");
    let records = crate::support::records_of(&env.engine, &replay).await;
    assert_eq!(
        records_of_key(&records, "LIVE#s1", "MATCH#m2"),
        0,
        "put expired"
    );
    assert_clean(&replay).await;
    // A live match moved to a start whose banner's TTL is past: its banner
    // (TTL ahead) goes, not rewritten expired.
    put(&replay, live_match("m3", 3_600)).await;
    replay.drain().await.expect("drains");
    let m3 = key("LIVE#s1", "MATCH#m3");
    assert!(get(&replay, m3.clone()).await.is_some(), "a live banner");
    put(&replay, live_match("m3", 10_800 + 60)).await;
    replay.drain().await.expect("drains");
    assert!(get(&replay, m3).await.is_none(), "kept or written expired");
    let records = crate::support::records_of(&env.engine, &replay).await;
    assert_eq!(
        records_of_key(&records, "LIVE#s1", "MATCH#m3"),
        2,
        "its put, its delete"
    );
    assert_clean(&replay).await;
}
