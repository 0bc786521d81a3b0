//! Model B: the job board of seed 000 (SPEC §4).
//!
//! - [`keys`] - every key format of the model.
//! - [`entities`] - job, seeker, employer, request, suggestion, match.
//! - [`derive`](mod@derive) - GSI1 projections and the jobs a change starts.
//! - [`relevance`] - the documented scoring of a (seeker, job) pair.
//! - [`messages`] - queue message schemas.
//! - [`suggestions`], [`matches`](mod@matches) - the SQS consumers.

pub mod derive;
pub mod entities;
pub mod keys;
pub mod matches;
pub mod messages;
pub mod queues;
pub mod relevance;
pub mod suggestions;

use crate::models::table::{Gsi, TableDef};

/// The job board's table (seed 000).
pub fn table() -> TableDef {
    TableDef {
        name: "job-app",
        pk: keys::PK,
        sk: keys::SK,
        gsis: vec![Gsi {
            name: "GSI1",
            pk: keys::GSI1PK,
            sk: keys::GSI1SK,
        }],
        ttl_attribute: Some(keys::TTL),
        stream: true,
    }
}
