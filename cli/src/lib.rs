//! The `jobstream` CLI's library: the local runtime and the tools, generic
//! over the model registry (`shared::models::registry`).
//!
//! Local Lambda emulation:
//! - [`engine`] - embedded Dynoxide served on loopback, table creation.
//! - [`esm`] - the local stream event source mapping (shard lineage,
//!   partial batch responses, retries, bisect, on-failure destination).
//! - [`shards`] - the Streams API the mapping reads through (SDK, embedded
//!   engine, an in-process fake in tests): discovery, iterators, records.
//! - [`lease`] - durable checkpoints and shard leases in the ledger table.
//! - [`on_failure`] - on-failure destinations: JSON-lines file, SQS.
//! - [`sqs_esm`], [`moto`] - the local SQS event source mapping, and moto.
//! - [`runtime`] - a model's tables, queues, processors and mappings.
//!
//! Tools:
//! - [`consumer`] - `jobstream run`'s consumer flags -> a durable mapping.
//! - [`verify`], [`backfill`] - drift report and repair; adoption.
//! - [`deploy`] - what the CDK stack deploys, from the registry.
//! - `faults` (feature `faults`) - a fault-injecting proxy for tests.

#![cfg_attr(not(test), warn(clippy::unwrap_used))]

pub mod backfill;
pub mod consumer;
pub mod deploy;
pub mod engine;
pub mod esm;
#[cfg(feature = "faults")]
pub mod faults;
pub mod lease;
pub mod moto;
pub mod on_failure;
pub mod runtime;
pub mod shards;
pub mod sqs_esm;
pub mod verify;
