//! jobstream: keeps the derived data of DynamoDB single-table designs correct
//! from the table's own change stream.
//!
//! - [`change`] - stream records decoded into typed changes.
//! - [`batch`] - the partial-batch-failure contract of streams, in one place.
//! - [`sqs`] - the same for SQS, and enqueueing.
//! - [`engine`] - the generic derive and fold processors, counters.
//! - [`file`] - a user's own model in a YAML file (SPEC §8).
//! - [`models`] - the declarative models (keys, schema, rules) and tables.
//! - [`store`], [`ledger`] - DynamoDB access, idempotency markers and state.
//! - [`tx`] - TransactWriteItems actions from the SDK's builders.
//! - [`limits`] - DynamoDB's key, item and transaction limits, checked before writing.
//! - [`lambda`] - wiring shared by the Lambda binaries and the local runtime.
//! - [`report`] - plain-text tables for demos and reports.
//! - [`out`] - lines on stdout and stderr that never panic (a reader that
//!   went away is logged once).
//! - [`retry`] - how the processors' SDK calls ride out transient faults.

#![cfg_attr(not(test), warn(clippy::unwrap_used))]

pub mod batch;
pub mod change;
pub mod engine;
pub mod error;
pub mod file;
pub mod item;
pub mod lambda;
pub mod ledger;
pub mod limits;
pub mod logs;
pub mod metrics;
pub mod models;
pub mod out;
pub mod report;
pub mod retry;
pub mod sqs;
pub mod store;
pub mod tx;
