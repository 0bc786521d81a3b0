//! Counters for what processors did (bad input, duplicates, writes...).
//!
//! In Lambda they are emitted once per batch as CloudWatch Embedded Metric
//! Format lines on stdout (no API call); locally they are read by the CLI
//! summary and by tests.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Names of the metrics processors emit.
pub mod names {
    /// A record skipped because of bad input (see the log for key and reason).
    pub const BAD_INPUT: &str = "BadInput";
    /// A record whose effects were already applied (redelivery).
    pub const DUPLICATE: &str = "Duplicate";
    /// A history entry written without its snapshot (over 400 KB).
    pub const SNAPSHOT_TOO_LARGE: &str = "SnapshotTooLarge";
    /// A record reported as failed in the partial batch response.
    pub const FAILED_RECORD: &str = "FailedRecord";
    /// A message with nothing to do, for a logged reason.
    pub const SKIPPED: &str = "Skipped";
    /// A record fully processed.
    pub const PROCESSED: &str = "Processed";
    /// A number clamped to fit the padded width of a sort key (the item
    /// keeps its true value; only the key's order among clamped values is
    /// lost).
    pub const SCORE_OVERFLOW: &str = "ScoreOverflow";
}

/// How many records a processor remembers having reported as bad input:
/// more than a batch holds (Lambda's largest stream batch is 10,000
/// records), so that every retry and bisection of a batch finds its bad
/// records remembered; the oldest are forgotten first.
pub const REPORTED_RECORDS: usize = 16_384;

/// Cumulative counters of one processor instance.
#[derive(Debug, Default)]
pub struct Metrics {
    totals: Mutex<BTreeMap<&'static str, u64>>,
    /// Print each batch's counters as an EMF line outside Lambda too
    /// (`jobstream run --emit-metrics`).
    emf: AtomicBool,
    /// The stream records (event ids) whose bad input was reported,
    /// at most [`REPORTED_RECORDS`].
    reported: Mutex<hashlink::LinkedHashSet<String>>,
}

/// Counters of one batch, merged into [`Metrics`] at the end of the batch.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct BatchMetrics(pub BTreeMap<&'static str, u64>);

impl BatchMetrics {
    pub fn incr(&mut self, name: &'static str) {
        *self.0.entry(name).or_default() += 1;
    }

    pub fn get(&self, name: &str) -> u64 {
        self.0.get(name).copied().unwrap_or(0)
    }
}

impl Metrics {
    pub fn get(&self, name: &str) -> u64 {
        self.totals
            .lock()
            .map(|t| t.get(name).copied().unwrap_or(0))
            .unwrap_or(0)
    }

    /// Whether the bad input of `record` (a stream record's event id, a
    /// queue message's id) is reported for the first time by this processor
    /// instance, remembering it: a bad record is one fact, counted and
    /// logged once however often its batch is retried or bisected (each
    /// attempt meets it again). Another record (the same item put bad
    /// again) has another id. An empty id is always new.
    pub fn first_report(&self, record: &str) -> bool {
        if record.is_empty() {
            return true;
        }
        let Ok(mut reported) = self.reported.lock() else {
            return true;
        };
        if reported.contains(record) {
            return false;
        }
        if reported.len() >= REPORTED_RECORDS {
            reported.pop_front();
        }
        reported.insert(record.to_string());
        true
    }

    /// Prints every batch's counters as an EMF line from now on (`run`
    /// does so with `--emit-metrics`; in Lambda they always are).
    pub fn emit_emf(&self, on: bool) {
        self.emf.store(on, Ordering::Relaxed);
    }

    /// Whether [`Self::record`] prints EMF lines: in Lambda, or when asked.
    pub fn emits_emf(&self) -> bool {
        self.emf.load(Ordering::Relaxed) || std::env::var_os("AWS_LAMBDA_FUNCTION_NAME").is_some()
    }

    /// Adds a batch's counters to the totals and, in Lambda (or when
    /// [`Self::emit_emf`] asked), prints them as one EMF line.
    pub fn record(&self, processor: &str, batch: &BatchMetrics) {
        if let Ok(mut totals) = self.totals.lock() {
            for (k, v) in &batch.0 {
                *totals.entry(k).or_default() += v;
            }
        }
        if self.emits_emf() && !batch.0.is_empty() {
            crate::out::line(format_args!(
                "{}",
                emf_line(processor, batch, chrono::Utc::now().timestamp_millis())
            ));
        }
    }
}

/// The CloudWatch namespace of the processors' metrics.
pub const NAMESPACE: &str = "jobstream";
/// Their one dimension: the processor's name.
pub const DIMENSION: &str = "Processor";

/// One CloudWatch Embedded Metric Format document.
pub fn emf_line(processor: &str, batch: &BatchMetrics, timestamp_ms: i64) -> String {
    let metrics: Vec<serde_json::Value> = batch
        .0
        .keys()
        .map(|k| serde_json::json!({"Name": k, "Unit": "Count"}))
        .collect();
    let mut doc = serde_json::json!({
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": NAMESPACE,
                "Dimensions": [[DIMENSION]],
                "Metrics": metrics,
            }]
        },
        DIMENSION: processor,
    });
    for (k, v) in &batch.0 {
        doc[*k] = serde_json::json!(v);
    }
    doc.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emf_document_names_each_metric_and_value() {
        let mut b = BatchMetrics::default();
        b.incr(names::BAD_INPUT);
        b.incr(names::BAD_INPUT);
        let v: serde_json::Value = serde_json::from_str(&emf_line("history", &b, 5)).unwrap();
        assert_eq!(v["BadInput"], 2);
        assert_eq!(v["Processor"], "history");
        assert_eq!(
            v["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Name"],
            "BadInput"
        );
        assert_eq!(v["_aws"]["Timestamp"], 5);
    }

    #[test]
    fn emf_lines_are_asked_for_outside_lambda() {
        let m = Metrics::default();
        if std::env::var_os("AWS_LAMBDA_FUNCTION_NAME").is_none() {
            assert!(!m.emits_emf());
        }
        m.emit_emf(true);
        assert!(m.emits_emf());
    }

    #[test]
    fn totals_accumulate_batches() {
        let m = Metrics::default();
        let mut b = BatchMetrics::default();
        b.incr(names::DUPLICATE);
        m.record("derive", &b);
        m.record("derive", &b);
        assert_eq!(m.get(names::DUPLICATE), 2);
        assert_eq!(m.get(names::BAD_INPUT), 0);
    }

    #[test]
    fn a_record_is_reported_once_and_the_oldest_are_forgotten_first() {
        let m = Metrics::default();
        assert!(m.first_report("e-1"));
        assert!(!m.first_report("e-1"), "a retry of its batch");
        assert!(m.first_report("e-2"), "another record");
        assert!(
            m.first_report("") && m.first_report(""),
            "no id: always new"
        );
        for i in 0..REPORTED_RECORDS {
            m.first_report(&format!("x-{i}"));
        }
        assert!(m.first_report("e-1"), "forgotten past the bound");
        assert!(!m.first_report(&format!("x-{}", REPORTED_RECORDS - 1)));
    }
}
