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

/// A `--db` file whose table was made by an earlier model, `tracker` minus
/// `change` to its first index (`None`: without it); the file's path.
async fn file_made_without(change: impl FnOnce(&mut shared::models::table::TableDef)) -> String {
    use jobstream::local::engine::{ensure_table, LocalEngine};
    let db = std::env::temp_dir().join(format!("dev-db-{}.sqlite", uuid::Uuid::new_v4()));
    let db = db.display().to_string();
    let engine = LocalEngine::start("127.0.0.1:0", Some(&db)).await.unwrap();
    let client = aws_sdk_dynamodb::Client::new(&sdk_config(Some(&engine.endpoint()), 3).await);
    let mut def = shared::models::find("tracker").unwrap().table;
    change(&mut def);
    ensure_table(&client, &def, def.name).await.unwrap();
    engine.stop().await;
    db
}

fn remove_db(db: &str) {
    for f in ["", "-wal", "-shm"] {
        std::fs::remove_file(format!("{db}{f}")).ok();
    }
}

/// The index's key attributes as DescribeTable shows them, `None` when the
/// table lacks it.
async fn index_keys(client: &aws_sdk_dynamodb::Client, table: &str, index: &str) -> Option<String> {
    let desc = client
        .describe_table()
        .table_name(table)
        .send()
        .await
        .ok()?;
    let i = desc
        .table()?
        .global_secondary_indexes()
        .iter()
        .find(|i| i.index_name() == Some(index))?
        .clone();
    let keys: Vec<&str> = i.key_schema().iter().map(|k| k.attribute_name()).collect();
    Some(keys.join(","))
}

/// Waits until `table` has `index`; its key attributes.
async fn index_added(client: &aws_sdk_dynamodb::Client, table: &str, index: &str) -> String {
    tokio::time::timeout(HANG_GUARD, async {
        loop {
            if let Some(k) = index_keys(client, table, index).await {
                return k;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the index is added at start")
}

/// `dev --db` (and `serve --db`) on a file whose table lacks an index the
/// model declares (user14's #1: `dev` refused to start, its step had no
/// endpoint, and a file has none once `dev` stops): the index is added in
/// place, as `cdk deploy` adds it to a stack's table, and the process says
/// so, with the `backfill` line (its endpoint filled in) for the items
/// written before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_on_a_db_lacking_a_declared_index_adds_it_and_gives_the_backfill() {
    let model = shared::models::find("tracker").unwrap();
    let (table, index) = (model.table.name, model.table.gsis[0].clone());
    let declared: Vec<&str> = index.key_attributes().collect();
    let said = |db: &str| {
        format!(
            "table {table} in {db}: index {} {} added, which the model declares and the table lacked",
            index.name,
            index.key_list()
        )
    };
    let port = free_port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let client = aws_sdk_dynamodb::Client::new(&sdk_config(Some(&endpoint), 3).await);

    let db = file_made_without(|def| def.gsis.clear()).await;
    let mut dev = dev_on(std::path::Path::new(&db), port).await;
    assert_eq!(
        index_added(&client, table, index.name).await,
        declared.join(",")
    );
    let out = crate::support::sigterm(dev.take()).await;
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{err}");
    assert!(err.contains(&said(&db)), "{err}");
    let backfill = format!("run `jobstream backfill --model tracker --endpoint {endpoint}");
    assert!(err.contains(&backfill), "{err}");
    remove_db(&db);

    let db = file_made_without(|def| def.gsis.clear()).await;
    let bin = tokio::task::spawn_blocking(crate::support::jobstream_bin)
        .await
        .unwrap();
    let mut serve = crate::support::jobstream_command(&bin)
        .args(["serve", "--model", "tracker", "--db", &db, "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map(Started::new)
        .expect("jobstream serve starts");
    assert_eq!(
        index_added(&client, table, index.name).await,
        declared.join(",")
    );
    let out = crate::support::sigterm(serve.take()).await;
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{err}");
    assert!(err.contains(&said(&db)), "{err}");
    let backfill = format!("run `jobstream backfill --model tracker --endpoint {endpoint}`");
    assert!(err.contains(&backfill), "{err}");
    remove_db(&db);
}

/// `serve --db` on a file whose index is keyed otherwise than declared: no
/// index is changed by the processes (DynamoDB, and CloudFormation, change
/// one only by deleting it); the refusal gives the steps with the endpoint
/// and the region filled in, and how to run them on the file (user14's #1:
/// the printed `update-table` had no `--endpoint-url`, and went to AWS).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_on_a_db_with_an_index_keyed_otherwise_refuses_with_steps_for_the_file() {
    let model = shared::models::find("tracker").unwrap();
    let index = model.table.gsis[0].clone();
    let db = file_made_without(|def| def.gsis[0].sk = Some("OTHERSK")).await;
    let port = free_port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let listen = format!("127.0.0.1:{port}");
    let args = [
        "serve", "--model", "tracker", "--db", &db, "--listen", &listen,
    ]
    .map(String::from);
    let out = tokio::task::spawn_blocking(move || crate::support::jobstream(&args))
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "table {}'s index {} has keys",
            model.table.name, index.name
        )),
        "{err}"
    );
    let region = ["AWS_REGION", "AWS_DEFAULT_REGION"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
        .unwrap_or_else(|| "us-east-1".to_string());
    let reached = format!(
        "aws dynamodb update-table --table-name {} --endpoint-url {endpoint} --region {region} ",
        model.table.name
    );
    // The deletion and the creation, both reaching the engine.
    assert_eq!(err.matches(&reached).count(), 2, "{err}");
    assert!(
        err.contains(&format!(
            "start `jobstream serve --db {db} --listen {listen} --model-file <the model file the \
             table was made with>`, run the step in another shell"
        )),
        "{err}"
    );
    // The file's index is as it was.
    let engine = jobstream::local::engine::LocalEngine::start("127.0.0.1:0", Some(&db))
        .await
        .unwrap();
    let client = aws_sdk_dynamodb::Client::new(&sdk_config(Some(&engine.endpoint()), 3).await);
    let keys = index_keys(&client, model.table.name, index.name).await;
    assert_eq!(keys, Some(format!("{},OTHERSK", index.pk)));
    engine.stop().await;
    remove_db(&db);
}
