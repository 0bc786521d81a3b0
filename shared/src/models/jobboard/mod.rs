//! Model B: the job board of seed 000 (SPEC §4).
//!
//! - [`keys`] - every key format of the model.
//! - [`entities`] - job, seeker, employer, request, suggestion, match.
//! - [`derive`](mod@derive) - GSI1 projections and the jobs a change starts.
//! - [`relevance`] - the documented scoring of a (seeker, job) pair.
//! - [`messages`] - queue message schemas.
//! - [`suggestions`] (a set job), [`matches`](mod@matches) (a once effect) -
//!   the queue consumers.

pub mod checks;
pub mod demo;
pub mod derive;
pub mod entities;
pub mod keys;
pub mod matches;
pub mod messages;
pub mod relevance;
pub mod suggestions;
pub mod writer;

use std::sync::Arc;

use crate::models::table::{Gsi, QueueDef, TableDef};
use crate::models::{Consumer, Job, Model};

/// The job board in the registry.
pub fn model() -> Model {
    Model {
        name: "jobboard",
        about: "job board (seed 000): GSI1 keys, suggestions by relevance, matches",
        table: table(),
        rules: Arc::new(derive::JobBoardDerive),
        fold: None,
        consumers: vec![
            Consumer {
                queue: QueueDef::standard(
                    derive::SUGGESTIONS_QUEUE,
                    "jobstream-suggestion-jobs",
                    "jobstream-suggestion-jobs-dlq",
                    "suggestions",
                ),
                job: Job::Set(Arc::new(suggestions::Suggestions)),
            },
            Consumer {
                queue: QueueDef::standard(
                    derive::MATCHES_QUEUE,
                    "jobstream-match-jobs",
                    "jobstream-match-jobs-dlq",
                    "matches",
                ),
                job: Job::Once(Arc::new(matches::Matches)),
            },
        ],
        // Every record: unknown key shapes are bad input (counted), and
        // Lambda's filters cannot exclude a prefix; suggestions (`s#`) are
        // skipped by `ignores`, unread.
        derive_filter: vec![],
        checks: Some(checks::check),
        demo: Some(demo::demo),
    }
}

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
