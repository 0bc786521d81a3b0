//! The local Lambda emulation: the embedded engine, the stream and SQS event
//! source mappings, the local SQS server, and a model's runtime.
//!
//! - [`engine`] - embedded Dynoxide served on loopback.
//! - [`provision`] - the tables the local commands create, and the shape an
//!   existing one must have (a `--db` file's table gets a declared index
//!   it lacks), re-exported by [`engine`].
//! - [`sdk_config`] - the SDK clients' endpoint, region and credentials
//!   (a loopback endpoint however it is named), re-exported by [`engine`].
//! - [`front`] - the engine's fair front: one request at a time, callers in
//!   turn (a writer's backlog does not starve the processors).
//! - [`deployed`] - the tables and queues `run` requires as deployed (never
//!   created), checked against the model's definition.
//! - [`remedy`] - the `aws dynamodb ...` command that makes an existing
//!   table as its definition says, in place (its items stay).
//! - [`esm`] - the stream event source mapping (shard lineage, partial batch
//!   responses, retries, bisect, on-failure destination).
//! - [`shards`] - the Streams API the mapping reads through (SDK, embedded
//!   engine, an in-process fake in tests).
//! - [`lease`] - durable checkpoints and shard leases in the ledger table.
//! - [`metrics`] - `run`'s Prometheus metrics and health probes over HTTP.
//! - [`on_failure`] - on-failure destinations: JSON-lines file, SQS.
//! - [`sqs_esm`], [`sqs_server`] - the SQS event source mapping, and the
//!   local SQS server (fauxqs on Node, from npm).
//! - [`stream_index`] - the engine's stream records indexed by sequence
//!   number (Dynoxide scans them otherwise).
//! - [`stream_trim`] - the engine's stream trimmed after 24 h, as DynamoDB's.
//! - [`iam`] - each processor's calls checked against its grant.
//! - [`stream_identity`] - GetRecords through the SDK keeps each record's
//!   `userIdentity` (a TTL expiry stays one).
//! - [`invoke`] - a panicking handler is a failed invocation, as in Lambda.
//! - [`runtime`] - a model's tables, queues, processors and mappings, built
//!   from the model's one definition of each processor.
//! - [`stop`] - how a stop spends `--shutdown-grace`: every deadline of it.

pub mod deployed;
pub mod engine;
pub mod esm;
pub mod front;
pub mod iam;
pub mod invoke;
pub mod lease;
pub mod metrics;
pub mod on_failure;
pub mod provision;
pub mod remedy;
pub mod runtime;
pub mod sdk_config;
pub mod shards;
pub mod sqs_esm;
pub mod sqs_server;
pub mod stop;
pub mod stream_identity;
pub mod stream_index;
pub mod stream_trim;
