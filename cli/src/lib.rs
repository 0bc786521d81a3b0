//! The `jobstream` CLI's library: the local runtime.
//!
//! - [`engine`] - embedded Dynoxide served on loopback, table creation.
//! - [`esm`] - the local event source mapping (stream polling, Lambda events,
//!   partial batch responses, retries, bisect, on-failure destination).
//! - [`shards`] - the Streams API the mapping reads through (SDK, embedded
//!   engine, an in-process fake in tests): discovery, iterators, records.
//! - [`consumer`] - `jobstream run`'s consumer flags -> a durable mapping config.
//! - [`lease`] - durable checkpoints and shard leases in the ledger table.
//! - [`on_failure`] - on-failure destinations: JSON-lines file, SQS.
//! - [`runtime`] - the tracker's two stream consumers wired together.
//! - [`writer`], [`scenario`], [`demo`], [`verify`]: application-side
//!   writes, the demo script, its printout, and the derived-data check.
//! - [`faults`] - a fault-injecting proxy (throttling, 5xx) for tests.

#![cfg_attr(not(test), warn(clippy::unwrap_used))]

pub mod backfill;
pub mod consumer;
pub mod demo;
pub mod engine;
pub mod esm;
pub mod faults;
pub mod jobboard;
pub mod jobboard_demo;
pub mod lease;
pub mod moto;
pub mod on_failure;
pub mod runtime;
pub mod scenario;
pub mod shards;
pub mod sqs_esm;
pub mod verify;
pub mod writer;
