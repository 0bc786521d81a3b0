//! The embedded engine's stream, kept as fast at its end as at its start.
//!
//! Dynoxide (3.2) keeps every table's stream records in one SQLite table,
//! `_stream_records`, without an index on the sequence number. Each stream
//! write asks for the table's highest sequence number and each GetRecords
//! for the records after a sequence number, both as
//! `CAST(sequence_number AS INTEGER)`: without an index, every write and
//! every read scans (and a read sorts) the whole stream, so a stream of n
//! records costs O(n) per write and per read, and O(n^2) to write.
//!
//! SQLite uses an index on that same expression for both: the highest
//! number becomes one index lookup and a read a range scan of the batch it
//! returns. The index is created through a second connection to the
//! database (SQLite's locking, Dynoxide's schema untouched): a file's, or
//! the in-memory engine's, which is a named in-memory database in SQLite's
//! shared cache so that a second connection of the process reaches it.
//! Dynoxide's later migrations leave an index they did not create alone.
//!
//! DescribeStream still reads the shard's first and last number in one
//! query, which scans the table's records once per call; the mapping calls
//! it once a discovery interval (60 s), not per batch.
//!
//! The fix belongs upstream (README, "Notes on the embedded engine" has the
//! reproduction); this stays correct after it (`IF NOT EXISTS`, its own
//! name).

use std::time::Duration;

use anyhow::Context as _;

/// The index's name: ours, so it never collides with one Dynoxide adds.
pub const INDEX_NAME: &str = "jobstream_stream_records_by_sequence";

/// The index, on the expression Dynoxide's stream queries filter and sort
/// by (`table_name = ?` and `CAST(sequence_number AS INTEGER)`).
const CREATE_INDEX: &str = "CREATE INDEX IF NOT EXISTS jobstream_stream_records_by_sequence \
     ON _stream_records (table_name, CAST(sequence_number AS INTEGER))";

/// How long the second connection waits for the engine's own (SQLite's
/// busy timeout) when the file is in use.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// Opens the engine's database, in memory or persisted to the SQLite file
/// `path`, with its stream records indexed by sequence number.
pub fn open(path: Option<&str>) -> anyhow::Result<dynoxide::Database> {
    Ok(open_with_side(path)?.0)
}

/// [`open`], and a second connection to the same database (the engine's
/// housekeeping: the stream's trim, `stream_trim`). An in-memory engine is
/// a named in-memory database in SQLite's shared cache
/// (`file:<unique>?mode=memory&cache=shared`): in memory and unbounded as
/// before, reachable by a second connection of this process, and alive as
/// long as a connection to it is open. (SQLite's `memdb` VFS would give
/// ordinary locking, but caps a database at 1 GiB.) In the shared cache a
/// table another connection is writing is locked (`SQLITE_LOCKED`) rather
/// than waited for, so the second connection writes only while the
/// engine's fair front admits nothing else.
pub fn open_with_side(
    path: Option<&str>,
) -> anyhow::Result<(dynoxide::Database, rusqlite::Connection)> {
    let target = match path {
        Some(p) => p.to_string(),
        None => format!(
            "file:jobstream-engine-{}?mode=memory&cache=shared",
            uuid::Uuid::new_v4().simple()
        ),
    };
    let what = path.unwrap_or("the in-memory engine");
    let db = dynoxide::Database::new(&target).with_context(|| format!("opening {what}"))?;
    let side =
        side_connection(&target).with_context(|| format!("indexing the stream of {what}"))?;
    Ok((db, side))
}

/// A second connection to a database Dynoxide has initialised, with the
/// index added.
fn side_connection(target: &str) -> anyhow::Result<rusqlite::Connection> {
    let conn = rusqlite::Connection::open(target)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.execute_batch(CREATE_INDEX)?;
    Ok(conn)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Dynoxide's own GetRecords and next-sequence-number queries, as its
    /// storage layer spells them (dynoxide-rs 3.2.0, `storage.rs`).
    const GET_RECORDS: &str = "SELECT event_name, keys_json, new_image, old_image, sequence_number, created_at, user_identity, event_id
             FROM _stream_records
             WHERE table_name = ?1 AND shard_id = ?2 AND CAST(sequence_number AS INTEGER) > ?3
             ORDER BY CAST(sequence_number AS INTEGER) ASC
             LIMIT ?4";
    const NEXT_SEQUENCE: &str = "SELECT COALESCE(MAX(CAST(sequence_number AS INTEGER)), 0) + 1 FROM _stream_records WHERE table_name = ?1";

    /// SQLite's plan for `sql`, one line per step.
    fn plan(conn: &rusqlite::Connection, sql: &str, params: &[&dyn rusqlite::ToSql]) -> String {
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        stmt.query_map(params, |row| row.get::<_, String>(3))
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap()
            .join("; ")
    }

    fn temp_dir() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("jobstream-t-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir(&dir).unwrap();
        dir
    }

    fn create_streamed_table(db: &dynoxide::Database, name: &str) {
        db.create_table(req(serde_json::json!({
            "TableName": name,
            "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
            "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
            "BillingMode": "PAY_PER_REQUEST",
            "StreamSpecification": {"StreamEnabled": true, "StreamViewType": "NEW_AND_OLD_IMAGES"}
        })))
        .unwrap();
    }

    fn put(db: &dynoxide::Database, table: &str, pk: &str) {
        let item = serde_json::json!({"TableName": table, "Item": {"pk": {"S": pk}}});
        db.put_item(req(item)).unwrap();
    }

    fn req<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
        serde_json::from_value(v).unwrap()
    }

    /// JSON of a Dynoxide response.
    fn json<T: serde::Serialize>(out: T) -> serde_json::Value {
        serde_json::to_value(out).unwrap()
    }

    /// Every record of `table`'s one shard, from the trim horizon, 3 a
    /// batch.
    fn read_all(db: &dynoxide::Database, table: &str) -> Vec<String> {
        let table = json(
            db.describe_table(req(serde_json::json!({"TableName": table})))
                .unwrap(),
        );
        let arn = table["Table"]["LatestStreamArn"].clone();
        let stream = json(
            db.describe_stream(req(serde_json::json!({"StreamArn": arn})))
                .unwrap(),
        );
        let shard = stream["StreamDescription"]["Shards"][0]["ShardId"].clone();
        let it = json(
            db.get_shard_iterator(req(serde_json::json!({
                "StreamArn": arn, "ShardId": shard, "ShardIteratorType": "TRIM_HORIZON"
            })))
            .unwrap(),
        );
        let mut iterator = it["ShardIterator"].as_str().map(str::to_string);
        let mut keys = Vec::new();
        while let Some(it) = iterator {
            let out = json(
                db.get_records(dynoxide::actions::get_records::GetRecordsRequest {
                    shard_iterator: it,
                    limit: Some(3),
                })
                .unwrap(),
            );
            let records = out["Records"].as_array().unwrap();
            if records.is_empty() {
                break;
            }
            let pk = |r: &serde_json::Value| {
                r["dynamodb"]["Keys"]["pk"]["S"]
                    .as_str()
                    .unwrap()
                    .to_string()
            };
            keys.extend(records.iter().map(pk));
            iterator = out["NextShardIterator"].as_str().map(str::to_string);
        }
        keys
    }

    #[test]
    fn an_in_memory_engine_reads_and_numbers_its_stream_through_the_index() {
        // The second connection reaches the in-memory engine's database.
        let (db, side) = open_with_side(None).unwrap();
        create_streamed_table(&db, "TTT");
        put(&db, "TTT", "a");
        let get = plan(&side, GET_RECORDS, &[&"T", &"s", &0, &100]);
        let next = plan(&side, NEXT_SEQUENCE, &[&"T"]);
        assert!(
            get.contains(INDEX_NAME) && !get.contains("TEMP B-TREE"),
            "{get}"
        );
        assert!(next.contains(INDEX_NAME), "{next}");
        let n: i64 = side
            .query_row("SELECT COUNT(*) FROM _stream_records", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1, "the side connection sees the engine's records");
        assert_eq!(read_all(&db, "TTT"), ["a"]);
    }

    #[test]
    fn a_file_engine_gets_the_index_once_and_keeps_it_across_restarts() {
        let dir = temp_dir();
        let file = dir.join("engine.sqlite");
        let path = file.to_str().unwrap();
        {
            let db = open(Some(path)).unwrap();
            create_streamed_table(&db, "TTT");
            put(&db, "TTT", "a");
        }
        let db = open(Some(path)).unwrap(); // a second open: IF NOT EXISTS
        put(&db, "TTT", "b");
        let conn = rusqlite::Connection::open(&file).unwrap();
        let get = plan(&conn, GET_RECORDS, &[&"T", &"s", &0, &100]);
        assert!(get.contains(INDEX_NAME), "{get}");
        assert_eq!(read_all(&db, "TTT"), ["a", "b"]);
        drop(db);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_indexed_stream_keeps_every_record_in_order_across_tables_and_batches() {
        let db = open(None).unwrap();
        create_streamed_table(&db, "AAA");
        create_streamed_table(&db, "BBB");
        for i in 0..10 {
            put(&db, "AAA", &format!("a{i}"));
            put(&db, "BBB", &format!("b{i}"));
        }
        let want = |p: &str| (0..10).map(|i| format!("{p}{i}")).collect::<Vec<_>>();
        assert_eq!(read_all(&db, "AAA"), want("a"));
        assert_eq!(read_all(&db, "BBB"), want("b"));
    }
}
