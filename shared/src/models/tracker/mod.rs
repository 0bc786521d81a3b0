//! Model A: the application tracker of seed 001 (SPEC §3).
//!
//! - [`keys`] - every key format of the model, in one place.
//! - [`schema`] - the seed's attributes, types, enums and limits; validation.
//! - [`derive`](mod@derive) - GSI1/GSI2 projections and the META/COUNT counter.
//! - [`history`] - the history fold: `HIST#` entries, snapshots, cascade,
//!   adoption.
//! - [`history_check`] - verification of history and its guarded repairs.

pub mod checks;
pub mod demo;
pub mod derive;
pub mod history;
pub mod history_check;
pub mod keys;
pub mod scenario;
pub mod schema;
pub mod writer;

use std::sync::Arc;

use crate::models::table::{Gsi, TableDef};
use crate::models::{EventFilter, FoldSpec, KeyRule, Model};

/// The tracker in the registry.
pub fn model() -> Model {
    Model {
        name: "tracker",
        about: "application tracker (seed 001): history, META/COUNT, GSI1/GSI2",
        table: table(),
        rules: Arc::new(derive::TrackerDerive),
        fold: Some(FoldSpec {
            processor: "history",
            rules: Arc::new(history::TrackerHistory),
            filter: history_filter(),
        }),
        consumers: vec![],
        // Every record: META/COUNT (a writer's overwrite is repaired) and
        // unknown key shapes (bad input, counted) must reach derive, and
        // Lambda's filters cannot exclude a prefix; `HIST#` entries are
        // skipped by `ignores`, unread.
        derive_filter: vec![],
        checks: Some(checks::check),
        demo: Some(demo::demo),
    }
}

/// What the history fold needs: applications and stages, and the INSERT of
/// its own adoption entries (an adoption is pending until the fold reaches
/// its entry's stream position). Other `HIST#` records, `META/COUNT` and
/// unknown keys (counted by derive) are dropped.
pub fn history_filter() -> Vec<EventFilter> {
    vec![
        EventFilter::key(
            keys::SK,
            &[KeyRule::Prefix("APP#"), KeyRule::Prefix("STAGE#")],
        ),
        EventFilter::insert_with(keys::SK, "HIST#", "description", history::IMPORTED),
    ]
}

/// The tracker's table (seed 001).
pub fn table() -> TableDef {
    TableDef {
        name: "lambda_api_applications",
        pk: keys::PK,
        sk: keys::SK,
        gsis: vec![
            Gsi {
                name: "GSI1",
                pk: keys::GSI1PK,
                sk: keys::GSI1SK,
            },
            Gsi {
                name: "GSI2",
                pk: keys::GSI2PK,
                sk: keys::GSI2SK,
            },
        ],
        ttl_attribute: None,
        stream: true,
    }
}
