//! Model E: the Pick'Em league of seed 004 (SPEC §5.3).
//!
//! - [`keys`] - every key format and padding of the model.
//! - [`entities`] - users, events, matches, predictions, standings keys;
//!   validation.
//! - [`rules`] - GSI keys, standings contributions, the scoring jobs a
//!   change starts; the score of a prediction.
//! - [`scoring`] - the scoring set job (prediction `points`/`mcorrect`).
//! - [`messages`] - the scoring queue's message schema.
//! - [`checks`] - `verify`'s checks of the scores.
//! - [`demo`] - the `jobstream demo --model pickem` scenario.
//!
//! See README.md in this folder for the rules in prose.

pub mod checks;
pub mod demo;
pub mod entities;
pub mod keys;
pub mod messages;
pub mod rules;
pub mod scoring;

use std::sync::Arc;

use crate::models::table::{Gsi, QueueDef, TableDef};
use crate::models::{Consumer, Job, Model};

/// The league in the registry.
pub fn model() -> Model {
    Model {
        name: "pickem",
        about:
            "Pick'Em league (seed 004): prediction scores by a set job, standings per user and year",
        table: table(),
        rules: Arc::new(rules::PickemRules),
        fold: None,
        consumers: vec![Consumer {
            queue: QueueDef::standard(
                rules::SCORING_QUEUE,
                "jobstream-pickem-scoring-jobs",
                "jobstream-pickem-scoring-jobs-dlq",
                "scoring",
            ),
            job: Job::Set(Arc::new(scoring::Scoring)),
        }],
        // Every record: unknown entities are bad input, logged and counted.
        derive_filter: vec![],
        checks: Some(checks::checks),
        demo: Some(demo::demo),
    }
}

/// The league's table (seed 004).
pub fn table() -> TableDef {
    TableDef {
        name: keys::TABLE,
        pk: keys::PK,
        sk: keys::SK,
        gsis: vec![Gsi {
            name: keys::GSI,
            pk: keys::GSI_PK,
            sk: keys::GSI_SK,
        }],
        ttl_attribute: None,
        stream: true,
    }
}
