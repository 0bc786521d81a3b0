//! Decoding of DynamoDB Stream records into typed changes.
//!
//! `eventName` and the TTL `userIdentity` are mapped once, here, at the edge;
//! everything downstream works on [`Change`].

use std::cmp::Ordering;
use std::fmt;

use aws_lambda_events::event::dynamodb::EventRecord;
use chrono::{DateTime, SecondsFormat, Utc};

use crate::item::{display_key, Item};

/// A stream sequence number. Sequence numbers are 21-40 digit decimal
/// strings; they compare as numbers, never as plain strings.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SequenceNumber(String);

impl SequenceNumber {
    /// Parses a sequence number, rejecting anything that is not 1-40 ASCII digits.
    pub fn parse(raw: &str) -> Option<Self> {
        let ok = !raw.is_empty() && raw.len() <= 40 && raw.bytes().all(|b| b.is_ascii_digit());
        ok.then(|| Self(raw.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Left-padded to 40 digits: string order of padded values is numeric order.
    pub fn padded(&self) -> String {
        format!("{:0>40}", self.0.trim_start_matches('0'))
    }
}

impl Ord for SequenceNumber {
    /// Numeric order without allocating: leading zeros dropped, the longer
    /// number is the larger, numbers of one length compare digit by digit
    /// (the order of [`SequenceNumber::padded`]).
    fn cmp(&self, other: &Self) -> Ordering {
        let (a, b) = (
            self.0.trim_start_matches('0'),
            other.0.trim_start_matches('0'),
        );
        a.len().cmp(&b.len()).then_with(|| a.cmp(b))
    }
}

impl PartialOrd for SequenceNumber {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for SequenceNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What happened to the item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    Insert,
    Modify,
    Remove,
}

/// Who made the change: a user (any writer) or DynamoDB's TTL expiry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    User,
    /// A REMOVE written by the TTL sweeper (`userIdentity.type == "Service"`,
    /// `principalId == "dynamodb.amazonaws.com"`). Not a user delete.
    TtlExpiry,
}

/// One decoded stream record.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub event_id: String,
    pub sequence_number: SequenceNumber,
    pub kind: ChangeKind,
    pub origin: Origin,
    pub keys: Item,
    /// Image before the change (MODIFY, REMOVE).
    pub old: Option<Item>,
    /// Image after the change (INSERT, MODIFY).
    pub new: Option<Item>,
    /// ApproximateCreationDateTime of the change.
    pub at: DateTime<Utc>,
}

impl Change {
    /// The image that describes the item's state after this change, or before
    /// it for a REMOVE.
    pub fn latest_image(&self) -> Option<&Item> {
        self.new.as_ref().or(self.old.as_ref())
    }

    /// The change's time, ISO-8601 with milliseconds (`2026-01-02T03:04:05.678Z`).
    pub fn at_iso(&self) -> String {
        self.at.to_rfc3339_opts(SecondsFormat::Millis, true)
    }

    /// An INSERT of an existing item, as backfill feeds it to the rules.
    pub fn synthetic_insert(keys: Item, item: Item, at: DateTime<Utc>) -> Self {
        Self {
            event_id: format!("backfill:{}", crate::ledger::item_id(&keys)),
            sequence_number: SequenceNumber("0".to_string()),
            kind: ChangeKind::Insert,
            origin: Origin::User,
            keys,
            old: None,
            new: Some(item),
            at,
        }
    }

    /// Key of the item for logs.
    pub fn key_display(&self) -> String {
        display_key(&self.keys)
    }
}

/// Why a stream record could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Without a sequence number the record cannot be named in a partial
    /// batch response: the whole batch must fail, deliberately.
    #[error("record {event_id} has no valid SequenceNumber")]
    NoSequenceNumber { event_id: String },
    #[error("record {event_id}: unknown eventName `{event_name}`")]
    UnknownEventName {
        event_id: String,
        event_name: String,
    },
    #[error("record {event_id} ({kind:?}) lacks its {image} image; the stream must use NEW_AND_OLD_IMAGES")]
    MissingImage {
        event_id: String,
        kind: ChangeKind,
        image: &'static str,
    },
    #[error("record {event_id} has no Keys")]
    NoKeys { event_id: String },
}

const TTL_PRINCIPAL: &str = "dynamodb.amazonaws.com";

impl DecodeError {
    /// The record's `eventID`.
    pub fn event_id(&self) -> &str {
        match self {
            Self::NoSequenceNumber { event_id }
            | Self::UnknownEventName { event_id, .. }
            | Self::MissingImage { event_id, .. }
            | Self::NoKeys { event_id } => event_id,
        }
    }
}

/// Decodes one Lambda stream record, taking its images and keys as they
/// are (each converted once, never copied).
pub fn decode(record: EventRecord) -> Result<Change, DecodeError> {
    let EventRecord {
        event_id,
        event_name,
        change,
        user_identity,
        ..
    } = record;
    let sequence_number = change
        .sequence_number
        .as_deref()
        .and_then(SequenceNumber::parse)
        .ok_or_else(|| DecodeError::NoSequenceNumber {
            event_id: event_id.clone(),
        })?;
    let kind = match event_name.as_str() {
        "INSERT" => ChangeKind::Insert,
        "MODIFY" => ChangeKind::Modify,
        "REMOVE" => ChangeKind::Remove,
        other => {
            return Err(DecodeError::UnknownEventName {
                event_id,
                event_name: other.to_owned(),
            })
        }
    };
    let image =
        |item: serde_dynamo::Item| -> Option<Item> { (!item.is_empty()).then(|| Item::from(item)) };
    let old = image(change.old_image);
    let new = image(change.new_image);
    let missing = |image: &'static str| DecodeError::MissingImage {
        event_id: event_id.clone(),
        kind,
        image,
    };
    match kind {
        ChangeKind::Insert if new.is_none() => return Err(missing("new")),
        ChangeKind::Modify if new.is_none() => return Err(missing("new")),
        ChangeKind::Modify | ChangeKind::Remove if old.is_none() => return Err(missing("old")),
        _ => {}
    }
    if change.keys.is_empty() {
        return Err(DecodeError::NoKeys { event_id });
    }
    let origin = match &user_identity {
        Some(id)
            if kind == ChangeKind::Remove
                && id.type_ == "Service"
                && id.principal_id == TTL_PRINCIPAL =>
        {
            Origin::TtlExpiry
        }
        _ => Origin::User,
    };
    Ok(Change {
        event_id,
        sequence_number,
        kind,
        origin,
        keys: Item::from(change.keys),
        old,
        new,
        at: change.approximate_creation_date_time,
    })
}

/// A user change for unit tests of rules: keys taken from `pk`/`PK` and
/// `sk`/`SK` of whichever image is present.
#[cfg(test)]
pub(crate) fn test_change(kind: ChangeKind, old: Option<Item>, new: Option<Item>) -> Change {
    let image = new.as_ref().or(old.as_ref()).expect("one image");
    let keys = crate::item::key_of(image, &["PK", "SK", "pk", "sk"]);
    Change {
        event_id: "ev".into(),
        sequence_number: SequenceNumber::parse("1").expect("valid"),
        kind,
        origin: Origin::User,
        keys,
        old,
        new,
        at: DateTime::from_timestamp(1_700_000_000, 0).expect("valid"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(v: serde_json::Value) -> EventRecord {
        serde_json::from_value(v).expect("fixture is a valid record")
    }

    fn base(event_name: &str) -> serde_json::Value {
        json!({
            "eventID": "e1", "eventName": event_name, "awsRegion": "us-east-1",
            "eventSource": "aws:dynamodb",
            "dynamodb": {
                "ApproximateCreationDateTime": 1700000000,
                "Keys": {"PK": {"S": "APP#1"}, "SK": {"S": "APP#1"}},
                "NewImage": {"PK": {"S": "APP#1"}, "SK": {"S": "APP#1"}},
                "OldImage": {"PK": {"S": "APP#1"}, "SK": {"S": "APP#1"}},
                "SequenceNumber": "000000000000000000123", "SizeBytes": 10,
                "StreamViewType": "NEW_AND_OLD_IMAGES"
            }
        })
    }

    #[test]
    fn sequence_numbers_compare_numerically() {
        let a = SequenceNumber::parse("9").unwrap();
        let b = SequenceNumber::parse("10").unwrap();
        let c = SequenceNumber::parse("0000000000000000000010").unwrap();
        assert!(a < b, "9 < 10 although \"9\" > \"10\" as strings");
        assert_eq!(b.cmp(&c), Ordering::Equal);
        // The same order as the padded strings the HEAD stores, zeros and
        // lengths mixed.
        let raw = [
            "0",
            "000",
            "1",
            "09",
            "10",
            "99",
            "100",
            "0101",
            &"9".repeat(40),
        ];
        for x in raw {
            for y in raw {
                let (x, y) = (
                    SequenceNumber::parse(x).unwrap(),
                    SequenceNumber::parse(y).unwrap(),
                );
                assert_eq!(x.cmp(&y), x.padded().cmp(&y.padded()), "{x} vs {y}");
            }
        }
        assert!(SequenceNumber::parse("").is_none());
        assert!(SequenceNumber::parse("12a").is_none());
        assert!(SequenceNumber::parse(&"1".repeat(41)).is_none());
    }

    #[test]
    fn decodes_modify_with_both_images() {
        let c = decode(record(base("MODIFY"))).unwrap();
        assert_eq!(c.kind, ChangeKind::Modify);
        assert_eq!(c.origin, Origin::User);
        assert_eq!(c.sequence_number.as_str(), "000000000000000000123");
        assert!(c.old.is_some() && c.new.is_some());
        assert_eq!(c.at_iso(), "2023-11-14T22:13:20.000Z");
        assert_eq!(c.key_display(), "PK=APP#1, SK=APP#1");
    }

    #[test]
    fn ttl_identity_marks_an_expiry() {
        let mut v = base("REMOVE");
        v["dynamodb"].as_object_mut().unwrap().remove("NewImage");
        v["userIdentity"] = json!({"type": "Service", "principalId": "dynamodb.amazonaws.com"});
        let c = decode(record(v.clone())).unwrap();
        assert_eq!(c.origin, Origin::TtlExpiry);
        v["userIdentity"] = json!({"type": "Service", "principalId": "someone-else"});
        assert_eq!(decode(record(v)).unwrap().origin, Origin::User);
    }

    #[test]
    fn missing_images_and_sequence_numbers_are_errors() {
        let mut v = base("MODIFY");
        v["dynamodb"].as_object_mut().unwrap().remove("OldImage");
        assert!(matches!(
            decode(record(v)),
            Err(DecodeError::MissingImage { image: "old", .. })
        ));
        let mut v = base("INSERT");
        v["dynamodb"]
            .as_object_mut()
            .unwrap()
            .remove("SequenceNumber");
        assert!(matches!(
            decode(record(v)),
            Err(DecodeError::NoSequenceNumber { .. })
        ));
        let v = base("UPSERT");
        assert!(matches!(
            decode(record(v)),
            Err(DecodeError::UnknownEventName { .. })
        ));
    }
}
