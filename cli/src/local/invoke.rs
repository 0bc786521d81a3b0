//! One invocation of a handler, as Lambda makes it: a panic in the handler
//! (a bug in a rule, an `unwrap` on bad data) is a failed invocation of that
//! batch, reported as a function error, never the end of the process. The
//! stream mapping then counts, bisects, retries and gives it up as it does
//! any function error, while the other shards and queues go on; the queue
//! mapping leaves the batch to come back and reach its DLQ. (Deployed,
//! `lambda_runtime` catches the panic the same way and reports an
//! `Unhandled` error; the binaries are built with `panic = "unwind"` for
//! both.)

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures::FutureExt as _;

/// Calls `make` and awaits its future; a panic in either is an `Err`
/// naming the panic's message.
pub async fn unwound<T, F>(make: impl FnOnce() -> F) -> Result<T, lambda_runtime::Error>
where
    F: Future<Output = Result<T, lambda_runtime::Error>>,
{
    let fut = match std::panic::catch_unwind(AssertUnwindSafe(make)) {
        Ok(fut) => fut,
        Err(payload) => return Err(panicked(&*payload)),
    };
    match AssertUnwindSafe(fut).catch_unwind().await {
        Ok(r) => r,
        Err(payload) => Err(panicked(&*payload)),
    }
}

fn panicked(payload: &(dyn Any + Send)) -> lambda_runtime::Error {
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_string());
    tracing::error!(reason = %message, "the handler panicked: a failed invocation");
    format!("function panicked: {message}").into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_before_or_inside_the_future_is_an_error_and_a_result_passes_through() {
        let inside = unwound(|| async { panic!("inside {}", 42) as Result<(), _> }).await;
        assert_eq!(
            inside.unwrap_err().to_string(),
            "function panicked: inside 42"
        );
        let before = unwound::<(), std::future::Ready<_>>(|| panic!("before")).await;
        assert_eq!(before.unwrap_err().to_string(), "function panicked: before");
        let ok = unwound(|| async { Ok::<_, lambda_runtime::Error>(7) }).await;
        assert_eq!(ok.unwrap(), 7);
        let err = unwound(|| async { Err::<(), lambda_runtime::Error>("no".into()) }).await;
        assert_eq!(err.unwrap_err().to_string(), "no");
    }
}
