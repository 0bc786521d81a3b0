//! Failure classification shared by every processor.
//!
//! A failure is either *retryable* (throttling, 5xx, conflicts, timeouts: the
//! record is reported in the partial batch response and redelivered) or
//! *permanent* (bad input: retrying cannot help, so the record is skipped with
//! a structured log and a metric). "Already applied" is not a failure at all:
//! the store reports it as an outcome, never as an error.

use crate::change::DecodeError;
use crate::item::AttrError;

/// A retryable failure talking to AWS.
#[derive(Debug, thiserror::Error)]
#[error("{operation} on {table} failed ({code}): {source}")]
pub struct StoreError {
    pub operation: &'static str,
    pub table: String,
    /// The service error code (`ThrottlingException`, ...) or the transport
    /// failure kind (`DispatchFailure`, `Timeout`, ...).
    pub code: String,
    pub retryable: bool,
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

/// Bad input found by a rule: what, where, why. Never carries the item.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InputError {
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error("{entity} {key}: {source}")]
    Attribute {
        entity: &'static str,
        key: String,
        #[source]
        source: AttrError,
    },
    #[error("{key}: unknown entity (no rule matches this key)")]
    UnknownEntity { key: String },
    #[error("{key}: {reason}")]
    Invalid { key: String, reason: String },
}

impl InputError {
    /// A short, stable name for metrics and log fields.
    pub fn kind(&self) -> &'static str {
        match self {
            InputError::Decode(DecodeError::MissingImage { .. }) => "MissingImage",
            InputError::Decode(DecodeError::NoSequenceNumber { .. }) => "NoSequenceNumber",
            InputError::Decode(DecodeError::UnknownEventName { .. }) => "UnknownEventName",
            InputError::Decode(DecodeError::NoKeys { .. }) => "NoKeys",
            InputError::Attribute {
                source: AttrError::Missing(_),
                ..
            } => "MissingAttribute",
            InputError::Attribute {
                source: AttrError::WrongType { .. },
                ..
            } => "WrongType",
            InputError::Attribute {
                source: AttrError::Invalid { .. },
                ..
            } => "InvalidValue",
            InputError::UnknownEntity { .. } => "UnknownEntity",
            InputError::Invalid { .. } => "Invalid",
        }
    }
}

/// Why a processor could not finish a record.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A guard the processor relies on changed under it (e.g. its running
    /// state was written by someone else): retry from this record.
    #[error("concurrent update: {0}")]
    Conflict(String),
    #[error("permanent store failure: {0}")]
    Permanent(String),
}
