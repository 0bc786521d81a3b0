//! A TTL expiry reaches the rules as an expiry, not as a user delete.

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
