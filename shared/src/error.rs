//! Failure classification shared by every processor.
//!
//! A failure is either *retryable* (throttling, 5xx, conflicts, timeouts: the
//! record is reported in the partial batch response and redelivered) or
//! *permanent* (bad input: retrying cannot help, so the record is skipped with
//! a structured log and a metric). "Already applied" is not a failure at all:
//! the store reports it as an outcome, never as an error.

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};

use crate::change::DecodeError;
use crate::item::AttrError;

/// An SDK error as an operator reads it, on one line: the service's error
/// code and message (never the request, the response or its body), or the
/// transport's failure with its causes.
pub fn sdk_cause<E, R>(e: &SdkError<E, R>) -> String
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug + 'static,
{
    match e {
        SdkError::ServiceError(se) => match (se.err().code(), se.err().message()) {
            (Some(code), Some(m)) => format!("{code}: {m}"),
            (Some(code), None) => code.to_string(),
            // No error code: an answer the SDK could not read (a body
            // corrupted or cut on the way), not a refusal of the service.
            (None, _) => format!(
                "an answer that could not be read (no error code): {}",
                causes(se.err())
            ),
        },
        other => causes(other),
    }
}

/// An error and its sources, each by its `Display`, on one line
/// (`dispatch failure: io error: ...: Connection refused (os error 111)`).
/// The SDK's `DisplayErrorContext` ends with the error's `Debug` form: the
/// request (its body), the response, a kilobyte of structures. A source
/// whose text the line already holds is not repeated.
pub fn causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut line = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        let text = cause.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        next = cause.source();
    }
    line
}

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
    /// Not bad input: a rule reads a `compute:` value the item does not
    /// hold yet (a writer's put replaced the item without it, or its job
    /// has not written it first). The aspect keeps what the item's last
    /// state with its values implied, as an aspect bad input meets does,
    /// but nothing logs or counts it ([`InputError::waits`]).
    #[error("{key}: {values} not computed yet")]
    NotComputed { key: String, values: String },
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
                source: AttrError::Invalid { .. } | AttrError::KeyPart { .. },
                ..
            } => "InvalidValue",
            InputError::UnknownEntity { .. } => "UnknownEntity",
            InputError::Invalid { .. } => "Invalid",
            InputError::NotComputed { .. } => "NotComputed",
        }
    }

    /// Whether this is a state the rules keep, not bad input: an aspect
    /// that reads a `compute:` value the item does not hold yet. It keeps
    /// what the item's last state with its values implied (the same
    /// machinery as bad input) and is never logged, counted or listed as
    /// bad input.
    pub fn waits(&self) -> bool {
        matches!(self, InputError::NotComputed { .. })
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

/// What a processor does with a failure: the one error policy, decided
/// here and read by the batch contracts only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Report the record; it is delivered again (throttling, 5xx,
    /// conflicts, timeouts, and what an operator must fix first).
    Retry,
    /// No retry can fix it (DynamoDB rejected the request itself: a
    /// `ValidationException`, a transaction cancelled by a
    /// `ValidationError`): bad input of the record whose writes it was,
    /// logged with its key, counted, skipped; the shard moves on.
    Skip,
}

impl ProcessError {
    /// The service's error code, or the kind of failure.
    pub fn code(&self) -> &str {
        match self {
            ProcessError::Store(e) => &e.code,
            ProcessError::Conflict(_) => "Conflict",
            ProcessError::Permanent(_) => "Permanent",
        }
    }

    pub fn policy(&self) -> Policy {
        match self {
            ProcessError::Store(e) if !e.retryable => Policy::Skip,
            _ => Policy::Retry,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transport_failure_is_its_causes_on_one_line_without_debug_forms() {
        use aws_sdk_dynamodb::config::http::HttpResponse;
        use aws_sdk_dynamodb::operation::describe_table::DescribeTableError;
        let refused = std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "Connection refused (os error 111)",
        );
        let e: SdkError<DescribeTableError, HttpResponse> =
            SdkError::dispatch_failure(aws_sdk_dynamodb::error::ConnectorError::io(refused.into()));
        let said = sdk_cause(&e);
        assert_eq!(
            said,
            "dispatch failure: io error: Connection refused (os error 111)"
        );
        assert!(
            !said.contains('{') && !said.contains("DispatchFailure"),
            "{said}"
        );
    }

    /// An error without a code (an answer the SDK could not read, as a
    /// corrupted 200's) says so, not "unknown error code" (ops16's #1).
    #[test]
    fn an_answer_without_an_error_code_is_said_to_be_unreadable() {
        use aws_sdk_dynamodb::config::http::HttpResponse;
        use aws_sdk_dynamodb::operation::get_item::GetItemError;
        let raw = HttpResponse::new(
            200u16.try_into().unwrap(),
            aws_smithy_types::body::SdkBody::from("{\"__type\":\u{1}"),
        );
        let err = GetItemError::generic(
            aws_sdk_dynamodb::error::ErrorMetadata::builder()
                .message("failed to parse JSON")
                .build(),
        );
        let e: SdkError<GetItemError, HttpResponse> = SdkError::service_error(err, raw);
        let said = sdk_cause(&e);
        assert!(
            said.starts_with("an answer that could not be read (no error code): "),
            "{said}"
        );
        assert!(said.contains("failed to parse JSON"), "{said}");
    }

    fn store_error(code: &str, retryable: bool) -> ProcessError {
        ProcessError::Store(StoreError {
            operation: "TransactWriteItems",
            table: "t".into(),
            code: code.into(),
            retryable,
            source: "test".into(),
        })
    }

    #[test]
    fn only_what_no_retry_can_fix_is_skipped() {
        assert_eq!(
            store_error("ValidationException", false).policy(),
            Policy::Skip
        );
        assert_eq!(
            store_error("ThrottlingException", true).policy(),
            Policy::Retry
        );
        assert_eq!(ProcessError::Conflict("x".into()).policy(), Policy::Retry);
        assert_eq!(
            ProcessError::Permanent("corrupt".into()).policy(),
            Policy::Retry
        );
    }
}
