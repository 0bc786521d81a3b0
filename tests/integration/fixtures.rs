//! The JSON fixtures under tests/fixtures (the same files
//! `cargo lambda invoke --data-file` takes) run through the real handlers.

use aws_lambda_events::event::dynamodb::Event;
use shared::item::ItemExt;

use crate::items::{invoke, partition};
use crate::support::{count, descriptions, env};

pub fn fixture(name: &str) -> Event {
    let path = format!("{}/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_batch_through_both_handlers() {
    let env = env().await;
    let event = fixture("tracker-batch.json");
    // The table holds the application as the last record left it.
    let item: shared::item::Item = event.records[2].change.new_image.clone().into();
    env.writer.put(item).await.unwrap();

    let h = invoke(&env.rt, "history", &event).await.unwrap();
    assert_eq!(
        serde_json::to_value(&h).unwrap(),
        serde_json::json!({"batchItemFailures": []})
    );
    let d = invoke(&env.rt, "derive", &event).await.unwrap();
    assert_eq!(
        serde_json::to_value(&d).unwrap(),
        serde_json::json!({"batchItemFailures": []})
    );

    assert_eq!(
        descriptions(&env, "fx-1").await,
        [
            "Created application Fixture Labs - Staff Engineer",
            "Added interview stage \"Recruiter call\"",
            "Updated Status, Notes"
        ]
    );
    let items = partition(&env, "APP#fx-1").await;
    let app = items
        .iter()
        .find(|i| i.s("SK").unwrap() == "APP#fx-1")
        .unwrap();
    assert_eq!(app.s("GSI1PK").unwrap(), "STATUS#interviewing#ARCHIVED#0");
    assert_eq!(
        app.s("GSI1SK").unwrap(),
        "UPDATED#2026-11-01T09:02:00.000Z#fx-1"
    );
    assert_eq!(app.s("GSI2PK").unwrap(), "ACTIVE");
    assert_eq!(app.i64("historySequence").unwrap(), 3);
    let first = items
        .iter()
        .find(|i| i.s("SK").unwrap() == "HIST#00000001")
        .unwrap();
    assert_eq!(first.s("createdAt").unwrap(), "2026-11-01T08:00:00.000Z");
    assert_eq!(count(&env).await, Some(1));
}
