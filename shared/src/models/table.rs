//! Table definitions shared by the local runtime (CreateTable) and the CDK
//! stack (`jobstream tables --json` writes them; `infra/` reads that file).

use serde::Serialize;

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Gsi {
    pub name: &'static str,
    pub pk: &'static str,
    pub sk: &'static str,
}

/// A table: string keys, GSIs projecting all attributes, optional TTL.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TableDef {
    /// Default table name (overridable by configuration).
    pub name: &'static str,
    pub pk: &'static str,
    pub sk: &'static str,
    pub gsis: Vec<Gsi>,
    pub ttl_attribute: Option<&'static str>,
    /// NEW_AND_OLD_IMAGES stream (the source table) or none (the ledger).
    pub stream: bool,
}

/// The ledger: idempotency markers and fold state. No stream, TTL `ttl`.
pub fn ledger() -> TableDef {
    TableDef {
        name: "jobstream-ledger",
        pk: crate::ledger::PK,
        sk: crate::ledger::SK,
        gsis: vec![],
        ttl_attribute: Some(crate::ledger::TTL),
        stream: false,
    }
}
