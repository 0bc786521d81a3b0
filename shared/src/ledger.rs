//! The ledger table: idempotency markers and processor state.
//!
//! No stream, TTL attribute `ttl`, keys `pk`/`sk`. A marker is written in the
//! same TransactWriteItems as the effect it guards, with
//! `attribute_not_exists(pk)`, so a redelivered record fails the marker's
//! condition instead of applying its effect twice. Markers outlive the
//! stream's 24 h retention.

use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};
use chrono::{DateTime, Utc};

use crate::item::{n, s, Item};

pub const PK: &str = "pk";
pub const SK: &str = "sk";
pub const TTL: &str = "ttl";

/// How long a marker is kept: past the stream's 24 h retention and Lambda's
/// longest retry window for a record.
pub const MARKER_TTL_SECS: i64 = 48 * 3600;

/// Key of the marker of `event_id` for `processor`.
pub fn marker_key(processor: &str, event_id: &str) -> Item {
    [
        (PK.to_string(), s(format!("MARK#{processor}#{event_id}"))),
        (SK.to_string(), s("MARK")),
    ]
    .into()
}

/// The transaction action that puts a marker, failing if it already exists.
pub fn marker_put(
    ledger_table: &str,
    processor: &str,
    event_id: &str,
    now: DateTime<Utc>,
) -> TransactWriteItem {
    let mut item = marker_key(processor, event_id);
    item.insert(TTL.to_string(), n(now.timestamp() + MARKER_TTL_SECS));
    TransactWriteItem::builder()
        .put(
            Put::builder()
                .table_name(ledger_table)
                .set_item(Some(item))
                .condition_expression("attribute_not_exists(pk)")
                .build()
                .expect("table and item are set"),
        )
        .build()
}

/// `pk` of a fold processor's state for one aggregate.
pub fn state_pk(processor: &str, aggregate: &str) -> String {
    format!("STATE#{processor}#{aggregate}")
}

pub fn key(pk: impl Into<String>, sk: impl Into<String>) -> Item {
    [(PK.to_string(), s(pk)), (SK.to_string(), s(sk))].into()
}

pub fn as_s(v: Option<&AttributeValue>) -> Option<&str> {
    match v {
        Some(AttributeValue::S(s)) => Some(s),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_has_ttl_past_stream_retention_and_a_not_exists_guard() {
        let now = DateTime::from_timestamp(1_000_000, 0).unwrap();
        let put = marker_put("ledger", "derive", "ev-1", now);
        let p = put.put().unwrap();
        assert_eq!(p.condition_expression(), Some("attribute_not_exists(pk)"));
        let item = p.item();
        assert_eq!(item.len(), 3);
        assert_eq!(item["pk"], s("MARK#derive#ev-1"));
        assert_eq!(item["ttl"], n(1_000_000 + 48 * 3600));
    }
}
