//! Model A: the application tracker of seed 001 (SPEC §3).
//!
//! - [`keys`] - every key format of the model, in one place.
//! - [`schema`] - the seed's attributes, types, enums and limits; validation.
//! - [`derive`](mod@derive) - GSI1/GSI2 projections and the META/COUNT counter.
//! - [`history`] - the history fold: `HIST#` entries, snapshots, cascade.

pub mod demo;
pub mod derive;
pub mod history;
pub mod keys;
pub mod scenario;
pub mod schema;
pub mod writer;

use std::sync::Arc;

use crate::models::table::{Gsi, TableDef};
use crate::models::{FoldSpec, KeyFilter, Model};

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
            filter: vec![KeyFilter::Prefix("APP#"), KeyFilter::Prefix("STAGE#")],
        }),
        consumers: vec![],
        derive_filter: vec![KeyFilter::Prefix("APP#")],
        checks: None,
        demo: Some(demo::demo),
    }
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
