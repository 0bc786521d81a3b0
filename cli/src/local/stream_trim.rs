//! The embedded engine's stream trimmed after its retention, as DynamoDB
//! keeps a stream's records 24 hours.
//!
//! Dynoxide keeps every stream record forever, and has no notion of a
//! trimmed position. The engine trims through its second connection
//! (`stream_index::open_with_side`): the oldest records of each table, a
//! chunk at a time, each chunk under the engine's fair gate (no request
//! runs in Dynoxide meanwhile), in sequence order, up to the first record
//! younger than the retention. It remembers per table the highest sequence
//! number it trimmed ([`Horizons`]); the front answers a GetShardIterator
//! after or at a trimmed sequence number, and a GetRecords with an iterator
//! positioned before one, with DynamoDB's `TrimmedDataAccessException`
//! instead of silently skipping what was trimmed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long DynamoDB keeps a stream's records.
pub const RETENTION: Duration = Duration::from_secs(24 * 60 * 60);

/// The most records one trim step deletes (one step holds the gate).
const CHUNK: usize = 1_000;

/// Dynoxide's public sequence numbers are the stored ones plus 10^20 (21
/// digits, `streams::format_sequence_number`, not exported).
const SEQUENCE_NUMBER_OFFSET: u128 = 100_000_000_000_000_000_000;

/// The stored form of a public sequence number.
pub fn stored_sequence_number(public: &str) -> Option<i64> {
    let value: u128 = public.parse().ok()?;
    i64::try_from(value.checked_sub(SEQUENCE_NUMBER_OFFSET)?).ok()
}

/// Per table, the highest (stored) sequence number trimmed so far.
#[derive(Clone, Default)]
pub struct Horizons(Arc<Mutex<HashMap<String, i64>>>);

impl Horizons {
    pub fn trimmed_through(&self, table: &str) -> Option<i64> {
        self.lock().get(table).copied()
    }

    fn raise(&self, table: &str, seq: i64) {
        let mut m = self.lock();
        let e = m.entry(table.to_string()).or_insert(seq);
        *e = (*e).max(seq);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, i64>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The engine's second connection, trimming.
pub struct Trimmer {
    conn: Mutex<rusqlite::Connection>,
    pub horizons: Horizons,
}

impl Trimmer {
    pub fn new(conn: rusqlite::Connection) -> Self {
        Self {
            conn: Mutex::new(conn),
            horizons: Horizons::default(),
        }
    }

    /// Every table with stream records (by the index: one lookup a table).
    pub fn tables(&self) -> rusqlite::Result<Vec<String>> {
        let conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        let mut next = conn
            .prepare_cached("SELECT MIN(table_name) FROM _stream_records WHERE table_name > ?1")?;
        let mut tables = Vec::new();
        let mut after = String::new();
        while let Some(t) = next.query_row([&after], |r| r.get::<_, Option<String>>(0))? {
            tables.push(t.clone());
            after = t;
        }
        Ok(tables)
    }

    /// Deletes up to [`CHUNK`] of `table`'s oldest records created before
    /// `cutoff` (Unix seconds, the engine's clock). Returns how many, and
    /// whether older ones may remain.
    pub fn trim_step(&self, table: &str, cutoff: i64) -> rusqlite::Result<(usize, bool)> {
        let conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        let mut oldest = conn.prepare_cached(
            "SELECT CAST(sequence_number AS INTEGER), created_at FROM _stream_records \
             WHERE table_name = ?1 ORDER BY CAST(sequence_number AS INTEGER) LIMIT ?2",
        )?;
        let rows = oldest
            .query_map(rusqlite::params![table, CHUNK as i64], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        let old = rows.iter().take_while(|(_, at)| *at < cutoff).count();
        let Some(&(through, _)) = old.checked_sub(1).and_then(|i| rows.get(i)) else {
            return Ok((0, false));
        };
        let deleted = conn.execute(
            "DELETE FROM _stream_records WHERE table_name = ?1 \
             AND CAST(sequence_number AS INTEGER) <= ?2",
            rusqlite::params![table, through],
        )?;
        self.horizons.raise(table, through);
        Ok((deleted, old == CHUNK))
    }
}

/// Why a stream request names trimmed records, if it does: the body of a
/// GetShardIterator or GetRecords (`operation`), checked against what was
/// trimmed.
pub fn trimmed_request(horizons: &Horizons, operation: &str, body: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    match operation {
        "GetShardIterator" => {
            let arn = v.get("StreamArn")?.as_str()?;
            // arn:aws:dynamodb:<region>:<account>:table/<name>/stream/<label>
            let table = arn.split('/').nth(1)?;
            let through = horizons.trimmed_through(table)?;
            let seq = v.get("SequenceNumber")?.as_str()?;
            let stored = stored_sequence_number(seq)?;
            let trimmed = match v.get("ShardIteratorType")?.as_str()? {
                "AFTER_SEQUENCE_NUMBER" => stored < through,
                "AT_SEQUENCE_NUMBER" => stored <= through,
                _ => false,
            };
            trimmed.then(|| {
                format!("the records after sequence number {seq} of the stream of {table} were trimmed (older than the stream's retention)")
            })
        }
        "GetRecords" => {
            let it = v.get("ShardIterator")?.as_str()?;
            let (table, _, position) =
                dynoxide::actions::get_shard_iterator::decode_shard_iterator(it)?;
            let through = horizons.trimmed_through(&table)?;
            // Position 0 is TRIM_HORIZON: the oldest record still there.
            (position > 0 && position < through).then(|| {
                format!("the shard iterator points before the records of the stream of {table} still kept (older ones were trimmed)")
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_sequence_numbers_read_as_the_stored_ones() {
        assert_eq!(stored_sequence_number("100000000000000000042"), Some(42));
        assert_eq!(stored_sequence_number("42"), None);
        assert_eq!(stored_sequence_number("x"), None);
    }

    #[test]
    fn an_iterator_into_the_trimmed_range_is_refused_and_the_horizon_is_not() {
        let h = Horizons::default();
        h.raise("t", 100);
        let arn = "arn:aws:dynamodb:ddblocal:000000000000:table/t/stream/x";
        let after = |seq: i64, kind: &str| {
            serde_json::json!({
                "StreamArn": arn, "ShardId": "s", "ShardIteratorType": kind,
                "SequenceNumber": (SEQUENCE_NUMBER_OFFSET + seq as u128).to_string()
            })
            .to_string()
        };
        let check = |b: String, op: &str| trimmed_request(&h, op, b.as_bytes()).is_some();
        assert!(check(
            after(50, "AFTER_SEQUENCE_NUMBER"),
            "GetShardIterator"
        ));
        assert!(check(after(100, "AT_SEQUENCE_NUMBER"), "GetShardIterator"));
        assert!(!check(
            after(100, "AFTER_SEQUENCE_NUMBER"),
            "GetShardIterator"
        ));
        assert!(!check(after(101, "AT_SEQUENCE_NUMBER"), "GetShardIterator"));
        let it = |p: i64| {
            serde_json::json!({"ShardIterator":
                dynoxide::actions::get_shard_iterator::encode_shard_iterator("t", "s", p)})
            .to_string()
        };
        assert!(check(it(99), "GetRecords"));
        assert!(!check(it(100), "GetRecords"));
        assert!(!check(it(0), "GetRecords"), "TRIM_HORIZON");
        // Another table is untouched.
        let other = serde_json::json!({"ShardIterator":
            dynoxide::actions::get_shard_iterator::encode_shard_iterator("u", "s", 5)})
        .to_string();
        assert!(!check(other, "GetRecords"));
    }
}
