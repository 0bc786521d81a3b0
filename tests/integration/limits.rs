//! DynamoDB's limits (SPEC §2.7): an item whose implied writes cannot exist
//! is bad input of its own, known before anything is sent: the shard moves
//! on at once (no failed batch, no retries), BadInput counted once, its key
//! in the log; every legal table key, however long, keeps its ledger
//! records within the limits.

use std::sync::Arc;

use shared::item::{s, Item, ItemExt};
use shared::metrics::names;

use crate::items::{assert_clean, get, key, metric, put};
use crate::support::{model_env, Captured, ModelEnv};

/// Notes under a section; their titles in an index; a tally per note id.
const NOTES: &str = r#"jobstream: 1
name: notes
table:
  name: notes
  pk: PK
  sk: SK
  gsis:
    - { name: GSI1, pk: GSI1PK, sk: GSI1SK }
entities:
  note:
    key: { PK: "N#${noteId}", SK: "S#${section}" }
    attributes:
      noteId: string
      section: string
      title: string
    project:
      attributes:
        GSI1PK: "T#${title}"
        GSI1SK: "${section}"
    count:
      - counter: tally
        with: { noteId: noteId }
        add: { notes: 1 }
  tally:
    owner: processor
    key: { PK: "N#${noteId}", SK: "TALLY" }
    counter:
      attributes: [notes]
      created_by: processor
"#;

async fn notes() -> ModelEnv {
    let path = crate::support::temp_model("notes", NOTES);
    model_env("notes", |o| o.model_file = Some(path)).await
}

fn note(id: &str, section: &str, title: &str) -> Item {
    crate::items::item(&[
        ("PK", &format!("N#{id}")),
        ("SK", &format!("S#{section}")),
        ("type", "note"),
        ("noteId", id),
        ("section", section),
        ("title", title),
    ])
}

#[tokio::test]
async fn a_record_whose_projection_exceeds_the_index_key_limit_moves_the_shard_on_at_once() {
    let (logs, _guard) = Captured::start();
    let mut env = notes().await;
    // GSI1PK is "T#" + the title: a title no key bounds makes it longer
    // than an index partition key may be.
    let big_title = "t".repeat(2_100);
    put(&env.rt, note("bad", "s1", &big_title)).await;
    put(&env.rt, note("good", "s1", "Hello")).await;
    env.rt.drain().await.unwrap();
    assert!(env.rt.failed_batches().is_empty(), "the shard never stalls");
    assert_eq!(
        metric(&env, names::BAD_INPUT),
        1,
        "one bad record, one BadInput"
    );
    assert_eq!(metric(&env, names::FAILED_RECORD), 0, "no retries");
    // Nothing written for it; the good record after it took effect.
    let bad = get(&env, key("N#bad", "S#s1")).await.unwrap();
    assert!(!bad.contains_key("GSI1PK") && !bad.contains_key("GSI1SK"));
    assert!(
        get(&env, key("N#bad", "TALLY")).await.is_none(),
        "nothing counted"
    );
    let good = get(&env, key("N#good", "S#s1")).await.unwrap();
    assert_eq!(good.s("GSI1PK").unwrap(), "T#Hello");
    assert_eq!(
        get(&env, key("N#good", "TALLY"))
            .await
            .unwrap()
            .i64("notes")
            .unwrap(),
        1
    );
    let logged = logs.text();
    let line = logged
        .lines()
        .find(|l| l.contains("bad input"))
        .unwrap_or_else(|| panic!("no bad input logged:\n{logged}"));
    assert!(line.contains("PK=N#bad, SK=S#s1"), "{line}");
    assert!(
        line.contains("GSI1PK") && line.contains("2048 bytes"),
        "{line}"
    );
    assert!(!line.contains("ttttt"), "never the value: {line}");
    assert_clean(&env.rt).await;
}

/// A record whose image implies writes DynamoDB cannot take is bad input
/// even when the item has changed since (one bad record, one BadInput):
/// the writer put it right again (or deleted it) before the derive read
/// it, in the same batch or in a later one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_past_the_limits_counts_though_the_item_was_put_right_before_it_was_read() {
    let mut env = notes().await;
    let big_title = "t".repeat(2_100);
    put(&env.rt, note("x", "s1", &big_title)).await;
    put(&env.rt, note("x", "s1", "Fixed")).await;
    env.rt.drain().await.unwrap();
    assert!(env.rt.failed_batches().is_empty());
    assert_eq!(metric(&env, names::BAD_INPUT), 1, "the oversized put");
    let x = get(&env, key("N#x", "S#s1")).await.unwrap();
    assert_eq!(x.s("GSI1PK").unwrap(), "T#Fixed");
    assert_clean(&env.rt).await;
    // Each record in a batch of its own, the item read as it is now.
    put(&env.rt, note("x", "s1", &big_title)).await;
    put(&env.rt, note("x", "s1", "Again")).await;
    let records: Vec<_> = env.records().await;
    let n = records.len();
    crate::items::deliver(&env, &records[n - 2..n - 1]).await;
    crate::items::deliver(&env, &records[n - 1..]).await;
    assert_eq!(
        metric(&env, names::BAD_INPUT),
        2,
        "the second oversized put"
    );
    // Put, then deleted before the derive read it.
    put(&env.rt, note("x", "s1", &big_title)).await;
    crate::items::delete(&env, key("N#x", "S#s1")).await;
    let records: Vec<_> = env.records().await;
    let n = records.len();
    crate::items::deliver(&env, &records[n - 2..n - 1]).await;
    assert_eq!(metric(&env, names::BAD_INPUT), 3, "the third oversized put");
    crate::items::deliver(&env, &records[n - 1..]).await;
    assert_eq!(metric(&env, names::BAD_INPUT), 3);
    assert_clean(&env.rt).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_longest_legal_keys_keep_their_ledger_records_within_the_limits() {
    let mut env = notes().await;
    // "N#" + 2,046 = 2,048 bytes of partition key, "S#" + 1,022 = 1,024 of
    // sort key: the longest a table key can be. Its ledger ids are longer
    // than a ledger key may be, unless hashed.
    let id = "n".repeat(2_046);
    let section = "s".repeat(1_022);
    put(&env.rt, note(&id, &section, "Long")).await;
    put(&env.rt, note(&id, "short", "Short")).await;
    env.rt.drain().await.unwrap();
    assert!(env.rt.failed_batches().is_empty());
    assert_eq!(metric(&env, names::BAD_INPUT), 0);
    let tally = get(&env, key(format!("N#{id}"), "TALLY"))
        .await
        .expect("tally");
    assert_eq!(tally.i64("notes").unwrap(), 2);
    let long = get(&env, key(format!("N#{id}"), format!("S#{section}")))
        .await
        .unwrap();
    assert_eq!(long.s("GSI1SK").unwrap(), section);
    assert_clean(&env.rt).await;
    // Every ledger key within the limit; the long ones hashed.
    let ledger = jobstream::tools::verify::scan_all(&env.rt.dynamodb, &env.rt.config.ledger_table)
        .await
        .expect("scan");
    // (DynamoDB's partition key limit: 2,048 bytes.)
    assert!(ledger.iter().all(|r| r.s("pk").unwrap().len() <= 2048));
    assert!(ledger
        .iter()
        .any(|r| r.s("pk").unwrap().starts_with("SRC#derive#~sha256:")));
}

/// Rules that derive, for an item `N#<id>`, a mirror `M#<id>`; an item
/// with `broken` set derives a mirror DynamoDB rejects (an empty string
/// set) that no limit check can know of.
struct Mirrors;

impl shared::engine::rules::Rules for Mirrors {
    fn key_names(&self) -> &'static [&'static str] {
        &["PK", "SK"]
    }

    fn derived(&self, image: &Item) -> Result<Vec<Item>, shared::error::InputError> {
        let Some(id) = image.s("PK").ok().and_then(|pk| pk.strip_prefix("N#")) else {
            return Ok(vec![]);
        };
        let mut mirror = crate::items::key(format!("M#{id}"), "mirror");
        if image.contains_key("broken") {
            mirror.insert(
                "tags".into(),
                aws_sdk_dynamodb::types::AttributeValue::Ss(vec![]),
            );
        }
        Ok(vec![mirror])
    }

    /// `seen` on every note; an `odd` one gets an empty set DynamoDB
    /// rejects in its update.
    fn projection(
        &self,
        image: &Item,
    ) -> Result<Option<shared::engine::rules::Projection>, shared::error::InputError> {
        let value = if image.contains_key("odd") {
            aws_sdk_dynamodb::types::AttributeValue::Ss(vec![])
        } else {
            s("yes")
        };
        Ok(Some(shared::engine::rules::Projection {
            attrs: vec![("seen", Some(value))],
            sources: vec![],
        }))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_dynamodb_rejects_is_split_to_find_its_source_and_the_others_commit() {
    use shared::engine::derive::{DeriveConfig, DeriveProcessor};
    let engine = crate::support::start_engine().await;
    let client = aws_sdk_dynamodb::Client::new(
        &jobstream::local::engine::sdk_config(Some(&engine.endpoint()), 3).await,
    );
    let table = shared::models::table::TableDef {
        name: "mirrors",
        pk: "PK",
        sk: "SK",
        gsis: vec![],
        ttl_attribute: None,
        stream: true,
    };
    let ledger = shared::models::table::ledger();
    jobstream::local::engine::ensure_table(&client, &table, table.name)
        .await
        .unwrap();
    jobstream::local::engine::ensure_table(&client, &ledger, ledger.name)
        .await
        .unwrap();
    let store = shared::store::Store::new(client.clone());
    let derive = DeriveProcessor::new(
        Arc::new(Mirrors),
        store.clone(),
        DeriveConfig {
            table: table.name.into(),
            ledger_table: ledger.name.into(),
            concurrency: 4,
            queues: Default::default(),
            limits: shared::limits::KeyLimits::of(&table),
        },
    );
    let item = |id: &str, flag: Option<&str>| -> Item {
        let mut i = crate::items::key(format!("N#{id}"), "note");
        if let Some(f) = flag {
            i.insert(f.into(), s("yes"));
        }
        i
    };
    let items = vec![
        item("a", None),
        item("b", Some("broken")),
        item("c", None),
        item("d", Some("odd")),
    ];
    store.put_items(table.name, items.clone()).await.unwrap();
    let keys: Vec<Item> = items
        .iter()
        .map(|i| shared::item::key_of(i, &["PK", "SK"]))
        .collect();
    // One group, one transaction: DynamoDB rejects it for b's mirror.
    let done = derive
        .deriver()
        .reconcile(&keys, &Default::default())
        .await
        .map_err(|(_, pos, e)| format!("failed at {pos}: {e}"))
        .expect("no failure: what no retry can fix is bad input");
    let mut bad = done.bad.clone();
    bad.sort_by_key(|(pos, _)| *pos);
    assert_eq!(bad.len(), 2, "{bad:?}");
    assert_eq!(bad[0].0, 1, "b, not the first of its transaction");
    let why = bad[0].1.to_string();
    assert!(
        why.contains("PK=N#b") && why.contains("Validation"),
        "{why}"
    );
    // A projection DynamoDB rejects: bad input of its item, no failure.
    assert_eq!(bad[1].0, 3);
    let why = bad[1].1.to_string();
    assert!(
        why.contains("PK=N#d") && why.contains("projection"),
        "{why}"
    );
    let note = |id: &str| {
        let store = store.clone();
        let key = crate::items::key(format!("N#{id}"), "note");
        async move { store.get("mirrors", key).await.unwrap().unwrap() }
    };
    assert!(note("a").await.contains_key("seen") && note("c").await.contains_key("seen"));
    assert!(!note("d").await.contains_key("seen"));
    let get = |pk: &str| {
        let store = store.clone();
        let key = crate::items::key(pk, "mirror");
        async move { store.get("mirrors", key).await.unwrap() }
    };
    assert!(get("M#a").await.is_some() && get("M#c").await.is_some());
    assert!(get("M#b").await.is_none(), "nothing written for b");
}

/// user9's #13: a history root whose projection cannot be written (an index
/// key past 2,048 bytes). The derive counts the put once: the history's
/// mirror write onto the item makes a record of its own, which changes only
/// what the processors write and is no new bad input. The history judges
/// the item by its own rules and writes (the item is valid and its entry
/// and mirror fit), so it folds it: entry 1 and the mirror.
#[tokio::test]
async fn a_root_whose_projection_cannot_be_written_is_one_bad_input_and_its_history_goes_on() {
    // The notes, a section an id (no `#`: the entries' keys are no note's).
    let notes = NOTES
        .replace("      section: string", "      section: id")
        .replace(
            "entities:\n",
            "formats:\n  id: { pattern: \"^[A-Za-z0-9_-]+$\" }\nentities:\n",
        );
    let model = format!(
        "{notes}  entry:
    owner: processor
    key: {{ PK: \"N#${{noteId}}\", SK: \"S#${{section:id}}#HIST#${{sequence}}\" }}
history:
  root: {{ entity: note, created: \"created\" }}
  entries: {{ entity: entry, digits: 4 }}
"
    );
    let path = crate::support::temp_model("noteshist", &model);
    let mut env = model_env("notes", |o| o.model_file = Some(path)).await;
    put(&env.rt, note("big", "s1", &"t".repeat(2_100))).await;
    env.rt.drain().await.unwrap();
    assert!(env.rt.failed_batches().is_empty());
    assert_eq!(
        metric(&env, names::BAD_INPUT),
        1,
        "one bad put, one BadInput (the mirror's write is not another)"
    );
    assert_eq!(
        crate::items::metric_of(&env, "history", names::BAD_INPUT),
        0
    );
    let item = get(&env, key("N#big", "S#s1")).await.unwrap();
    assert!(!item.contains_key("GSI1PK"), "no projection");
    assert_eq!(item.opt_i64("historySequence").unwrap(), Some(1));
    assert!(get(&env, key("N#big", "S#s1#HIST#0001")).await.is_some());
}
