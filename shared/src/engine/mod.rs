//! The derivation engine: generic processors that apply what pure rules say.
//!
//! - [`derive`](mod@derive) - projections (processor-owned attributes such as GSI keys),
//!   counters and queued jobs, from the images of each change.
//! - [`counts`] - counters as a registry of per-item contributions.
//! - [`fold`] - aggregates folded in stream order into a durable running state
//!   (history numbering and snapshots), with cascade deletes.
//!
//! A model is declarative code implementing [`derive::DeriveRules`] and/or
//! [`fold::FoldRules`]; it never talks to DynamoDB.

pub mod counts;
pub mod derive;
pub mod fold;
