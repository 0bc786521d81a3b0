//! Lambda's payload limit: an event source mapping passes "all of the
//! records in the batch to the function in a single call, up to the payload
//! limit for synchronous invocation (6 MB)" (CreateEventSourceMapping,
//! `BatchSize`). A batch ends before the record that would take its event
//! JSON past it; a record alone always goes (a stream record of a 400 KB
//! item with both images is under 1 MB).
//!
//! Each record's size in the event is counted once, as it is read from the
//! shard (serialized into a byte counter, no text built); a batch's size is
//! then a sum, however often it is retried or bisected.

use std::io;

use aws_lambda_events::event::dynamodb::EventRecord;

/// Lambda's payload limit for a synchronous invocation: 6 MB (6,291,456
/// bytes).
pub const MAX_EVENT_BYTES: usize = 6 * 1024 * 1024;

/// The event around its records: `{"Records":[` and `]}`.
const ENVELOPE_BYTES: usize = r#"{"Records":[]}"#.len();

/// A record read from a shard, with the bytes it takes in the event JSON.
#[derive(Debug, Clone)]
pub(super) struct Buffered {
    pub(super) record: EventRecord,
    pub(super) json_bytes: usize,
}

impl Buffered {
    pub(super) fn new(record: EventRecord) -> Self {
        let json_bytes = record_json_bytes(&record);
        Self { record, json_bytes }
    }
}

/// Counts what is written to it.
struct ByteCount(usize);

impl io::Write for ByteCount {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The bytes `record` takes in the Lambda event JSON (compact, as the
/// handler receives it). A record that cannot be serialized (none can: its
/// images are typed) counts as the whole payload, so it goes alone.
pub(super) fn record_json_bytes(record: &EventRecord) -> usize {
    let mut count = ByteCount(0);
    match serde_json::to_writer(&mut count, record) {
        Ok(()) => count.0,
        Err(e) => {
            tracing::warn!(sequence_number = record.change.sequence_number.as_deref().unwrap_or_default(), error = %e, "a stream record's size in the event is unknown: it goes in a batch of its own");
            MAX_EVENT_BYTES
        }
    }
}

/// How many of the leading records (their [`record_json_bytes`]) one event
/// takes: as many as keep its JSON within [`MAX_EVENT_BYTES`], and always
/// the first.
pub(super) fn records_within_payload(json_bytes: impl IntoIterator<Item = usize>) -> usize {
    let mut total = ENVELOPE_BYTES;
    let mut n = 0;
    for bytes in json_bytes {
        // A comma between two records.
        let next = total + bytes + usize::from(n > 0);
        if n > 0 && next > MAX_EVENT_BYTES {
            break;
        }
        total = next;
        n += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lambda_events::event::dynamodb::Event;

    fn record(seq: u64, blob: usize) -> EventRecord {
        let mut r = EventRecord::default();
        r.event_id = format!("e{seq}");
        r.event_name = "MODIFY".into();
        r.change.sequence_number = Some(format!("{seq:021}"));
        let image: std::collections::HashMap<String, serde_dynamo::AttributeValue> = [
            (
                "pk".to_string(),
                serde_dynamo::AttributeValue::S(format!("k{seq}")),
            ),
            (
                "blob".to_string(),
                serde_dynamo::AttributeValue::S("é\"x".repeat(blob)),
            ),
            (
                "n".to_string(),
                serde_dynamo::AttributeValue::N("12.5".into()),
            ),
        ]
        .into();
        r.change.new_image = image.clone().into();
        r.change.old_image = image.into();
        r
    }

    #[test]
    fn a_batchs_size_is_its_event_json_as_serialized() {
        for n in [0, 1, 2, 7] {
            let mut event = Event::default();
            event.records = (0..n).map(|i| record(i, 100 * i as usize)).collect();
            let counted = ENVELOPE_BYTES
                + event.records.iter().map(record_json_bytes).sum::<usize>()
                + n.saturating_sub(1) as usize;
            assert_eq!(
                counted,
                serde_json::to_vec(&event).unwrap().len(),
                "{n} records"
            );
        }
    }

    #[test]
    fn the_cut_falls_before_the_record_that_would_pass_6_mb_and_never_before_the_first() {
        let mb = 1024 * 1024;
        assert_eq!(
            records_within_payload([mb; 10]),
            5,
            "6 x 1 MiB + 14 bytes is over"
        );
        assert_eq!(
            records_within_payload([3 * mb, 3 * mb - ENVELOPE_BYTES - 1]),
            2,
            "exactly 6 MiB fits"
        );
        assert_eq!(records_within_payload([3 * mb, 3 * mb - ENVELOPE_BYTES]), 1);
        assert_eq!(
            records_within_payload([7 * mb, 10]),
            1,
            "a record alone always goes"
        );
        assert_eq!(records_within_payload([10, 7 * mb]), 1);
        assert_eq!(records_within_payload([]), 0);
    }
}
