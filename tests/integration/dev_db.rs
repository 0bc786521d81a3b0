//! `jobstream dev --db FILE` restarted on its file resumes where it stopped
//! (user11 #8: every restart replayed the whole stream from its start, so
//! old bad input was logged and counted again and new writes waited for
//! the replay). Its mappings keep durable checkpoints in the file's ledger,
//! under an owner a restarted `dev` takes back at once.

use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use jobstream::local::engine::sdk_config;
use shared::item::Item;

use crate::apps::{app_key, application};
use crate::support::Started;

/// A guard against hanging: what the test waits for arrives long before.
const HANG_GUARD: Duration = Duration::from_secs(90);

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn dev_on(db: &std::path::Path, port: u16) -> Started {
    let bin = tokio::task::spawn_blocking(crate::support::jobstream_bin)
        .await
        .unwrap();
    crate::support::jobstream_command(&bin)
        .args(["dev", "--model", "tracker", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--db")
        .arg(db)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map(Started::new)
        .expect("jobstream dev starts")
}

/// Waits until the application `id` carries its derived `GSI1PK`.
async fn derived(client: &aws_sdk_dynamodb::Client, table: &str, id: &str) {
    tokio::time::timeout(HANG_GUARD, async {
        loop {
            let got = client
                .get_item()
                .table_name(table)
                .set_key(Some(app_key(id)))
                .send()
                .await;
            if let Ok(got) = got {
                if got.item().is_some_and(|i| i.contains_key("GSI1PK")) {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{id} derived"));
}

async fn put(client: &aws_sdk_dynamodb::Client, table: &str, item: Item) {
    tokio::time::timeout(HANG_GUARD, async {
        while client
            .put_item()
            .table_name(table)
            .set_item(Some(item.clone()))
            .send()
            .await
            .is_err()
        {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the engine answers");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_restarted_on_its_db_resumes_where_it_stopped() {
    let db = std::env::temp_dir().join(format!("dev-db-{}.sqlite", uuid::Uuid::new_v4()));
    let table = shared::models::find("tracker").unwrap().table.name;
    let port = free_port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let client = aws_sdk_dynamodb::Client::new(&sdk_config(Some(&endpoint), 3).await);
    let at = "2026-01-01T00:00:00.000Z";

    let [bad_id, one, two] = [(); 3].map(|_| ulid::Ulid::new().to_string());
    let mut first = dev_on(&db, port).await;
    let mut bad = application(&bad_id, "Acme", "Dev", "applied", at);
    bad.insert("status".into(), AttributeValue::S("bogus".into()));
    put(&client, table, bad).await;
    put(
        &client,
        table,
        application(&one, "Acme", "Dev", "applied", at),
    )
    .await;
    derived(&client, table, &one).await;
    let out = crate::support::sigterm(first.take()).await;
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("bad input") && err.contains(&bad_id),
        "the first run logs the bad item: {err}"
    );

    let mut second = dev_on(&db, port).await;
    put(
        &client,
        table,
        application(&two, "Acme", "Dev", "applied", at),
    )
    .await;
    derived(&client, table, &two).await;
    let out = crate::support::sigterm(second.take()).await;
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{err}");
    assert!(
        !err.contains("bad input"),
        "the restart read on from its checkpoint, not the stream's start: {err}"
    );
    for f in ["", "-wal", "-shm"] {
        std::fs::remove_file(format!("{}{f}", db.display())).ok();
    }
}
