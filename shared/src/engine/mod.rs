//! The derivation engine: generic processors that apply what pure rules say
//! (SPEC §7). A model never talks to DynamoDB; the engine knows no model.
//!
//! - [`rules`] - the vocabulary of stream rules: projections, derived items,
//!   contributions to counters, jobs.
//! - [`derive`](mod@derive) - applies them from the item as it is, exactly
//!   once, loop-free; shared by the stream, backfill and repair.
//! - [`counts`] - counter items set to their ledger totals.
//! - [`setjob`] - queue consumers that keep a set of items equal to what
//!   consistent reads imply, with guarded writes.
//! - [`joinset`] - join set jobs: set jobs declared as data (facts, `when`,
//!   `unless`, values), their scopes derived from key templates and paged.
//! - [`locate`] - counters found through another item (a logical key, a
//!   ledger index of the items that claim it).
//! - [`once`] - effects that happen at most once per key.
//! - [`writable`] - whether what an item implies fits DynamoDB's limits.
//! - [`body`] - versioned job bodies with a size limit.
//! - [`fold`] - aggregates folded in stream order into a durable running
//!   state (history numbering and snapshots), with cascade deletes.

pub mod body;
pub mod counts;
pub mod derive;
pub mod fold;
pub mod joinset;
pub mod locate;
pub mod once;
pub mod rules;
pub mod setjob;
pub mod writable;
