//! Model D: the HR SaaS of seed 003 (SPEC §5.2).
//!
//! - [`keys`] - every key format of the model.
//! - [`entities`] - organisation, department, employee, job posting,
//!   application: parsed and validated (ULIDs, enums, keys).
//! - [`rules`] - GSI1 projections (the open-jobs index sparse), the
//!   DeptEmployee and job lookup items, department `headcount`.
//! - [`demo`] - `jobstream demo --model hr`: the twelve access patterns.

pub mod demo;
pub mod entities;
pub mod keys;
pub mod rules;

/// `models/hr.yaml` proven equal to these rules.
#[cfg(test)]
mod file_twin;

use std::sync::Arc;

use crate::models::table::{Gsi, TableDef};
use crate::models::Model;

/// The HR SaaS in the registry.
pub fn model() -> Model {
    Model {
        name: "hr",
        about: "HR SaaS (seed 003): DeptEmployee items, exact headcount, sparse open-jobs GSI, job lookup",
        table: table(),
        rules: Arc::new(rules::HrRules),
        fold: None,
        consumers: vec![],
        // Every record: writers' items all need validating (bad input is
        // logged and counted, an organisation's too); the processor's own
        // items are skipped by `ignores` without a read.
        derive_filter: vec![],
        checks: None,
        demo: Some(demo::run),
    }
}

/// The HR SaaS's table (seed 003).
pub fn table() -> TableDef {
    TableDef {
        name: keys::TABLE,
        pk: keys::PK,
        sk: keys::SK,
        gsis: vec![Gsi {
            name: keys::GSI1,
            pk: keys::GSI1PK,
            sk: keys::GSI1SK,
        }],
        ttl_attribute: None,
        stream: true,
    }
}
