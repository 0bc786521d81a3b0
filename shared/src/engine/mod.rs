//! The derivation engine: generic processors that apply what pure rules say.
//!
//! - [`derive`] - projections (processor-owned attributes such as GSI keys)
//!   and counters, from the old and new image of each change.
//! - [`fold`] - aggregates folded in stream order into a durable running state
//!   (history numbering and snapshots), with cascade deletes.
//!
//! A model is declarative code implementing [`derive::DeriveRules`] and/or
//! [`fold::FoldRules`]; it never talks to DynamoDB.

pub mod counts;
pub mod derive;
pub mod fold;
