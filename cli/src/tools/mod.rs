//! The tools: `verify`, `backfill`, what the CDK stack deploys, and the
//! durable consumer flags of `run`.
//!
//! - [`verify`] - drift report per kind and repairs through the live path.
//! - [`backfill`] - adoption of existing items through the same rules.
//! - [`deploy`] - the stack's definitions, from the registry.
//! - [`consumer`] - `jobstream run`'s flags -> a durable mapping config.
//! - [`explain`] - what one item means to the model, and what the ledger recorded.
//! - [`graph`] - a model as a Mermaid flowchart.
//! - [`import`] - a model file from a OneTable or ElectroDB schema.
//! - [`query`] - a model file's declared access patterns, run.

pub mod backfill;
pub mod consumer;
pub mod deploy;
pub mod explain;
mod explain_counter;
mod explain_derived;
mod explain_once;
mod explain_shared;
pub mod graph;
pub mod import;
pub mod query;
pub mod verify;
pub mod verify_settle;
