//! How the processors ride out transient faults (throttling, 5xx, transport
//! errors, the endpoint unreachable): with the SDK's own retry machinery,
//! configured once here for the Lambdas and the local runtime alike.
//!
//! - **Standard retry mode**, full-jitter exponential backoff from
//!   [`INITIAL_BACKOFF`] up to [`MAX_BACKOFF`]. (Adaptive mode adds a
//!   client-side rate limiter shared by every call of the process: it would
//!   slow one processor for another's throttling, and a stream handler's
//!   calls are sequential anyway.)
//! - **A time budget per call** ([`Retries::call_budget`], the SDK's
//!   operation timeout): two thirds of the function's timeout, 40 s for a
//!   stream consumer (60 s), 20 s for a queue consumer (30 s). A fault
//!   shorter than that costs the call a wait, not a failure; a longer one
//!   fails the call with a retryable `Timeout` while the invocation still
//!   has a third of its time to report its partial batch response. The
//!   attempts ([`MAX_ATTEMPTS`]) are enough that the time, not their number,
//!   ends the retries (expected backoff of 60 attempts: ~58 s > 40 s).
//! - **Each attempt bounded** ([`ATTEMPT_TIMEOUT`]): a request the endpoint
//!   accepts and never answers is retried, not waited on until the function
//!   times out.
//! - **No retry quota.** The SDK's token bucket (500 tokens, 5 per retry of
//!   a throttle, 10 per retry of a transport error, shared by every client
//!   of the process for one region) stops retrying once drained, and refills
//!   one token per first-attempt success: a few concurrent calls retrying
//!   through a 15 s throttle drain it, and every later throttle fails at
//!   once. The budget above already bounds what a call retries, and the
//!   capped backoff bounds its rate (about one request a second per waiting
//!   call), so the processors' clients use a partition of their own with an
//!   unlimited bucket.
//!
//! - **An answer that cannot be read is transient.** DynamoDB and SQS answer
//!   every error with a 4xx or 5xx; a 2xx whose body the SDK cannot read was
//!   corrupted on the way (a proxy, a middlebox, a cut connection), and the
//!   SDK's own classifiers do not retry it ([`UnreadableAnswer`]; ops16's #1:
//!   a window of such answers reached the mapping, whose back-to-back
//!   retries gave records up within seconds).
//!
//! A permanent error (validation, access denied, a condition) is not retried
//! by the SDK: it fails as before, bisected and given up by the mapping.

use std::sync::OnceLock;
use std::time::Duration;

use aws_sdk_dynamodb::config::retry::{RetryConfig, RetryPartition, TokenBucket};
use aws_sdk_dynamodb::config::timeout::TimeoutConfig;
use aws_smithy_runtime_api::client::interceptors::context::InterceptorContext;
use aws_smithy_runtime_api::client::retries::classifiers::{ClassifyRetry, RetryAction};

/// Attempts per call: more than the budget can use (see the module docs).
pub const MAX_ATTEMPTS: u32 = 60;
/// The first retry waits up to this (full jitter), doubling each retry.
pub const INITIAL_BACKOFF: Duration = Duration::from_millis(25);
/// No retry waits longer: a call notices the end of a fault within this.
pub const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// One attempt (a request accepted and never answered is retried).
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// The SDK's own connect timeout (its default, kept when the timeouts are
/// set).
pub const CONNECT_TIMEOUT: Duration = Duration::from_millis(3100);

/// The share of the function timeout one call may spend retrying.
const BUDGET_SHARE: f64 = 2.0 / 3.0;

/// The retry configuration of one function's SDK clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retries {
    pub max_attempts: u32,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    /// Every attempt of one call, backoffs included (the SDK's operation
    /// timeout).
    pub call_budget: Duration,
    /// One attempt (the SDK's operation attempt timeout).
    pub attempt_timeout: Duration,
}

impl Retries {
    /// What a function whose timeout is `function_timeout` deploys with.
    pub fn within(function_timeout: Duration) -> Self {
        let call_budget = function_timeout.mul_f64(BUDGET_SHARE);
        Self {
            max_attempts: MAX_ATTEMPTS,
            initial_backoff: INITIAL_BACKOFF,
            max_backoff: MAX_BACKOFF,
            call_budget,
            attempt_timeout: ATTEMPT_TIMEOUT.min(call_budget),
        }
    }

    /// A stream consumer's (the deployed function timeout).
    pub fn stream() -> Self {
        let s = crate::models::table::StreamSettings::DEPLOYED;
        Self::within(Duration::from_secs(u64::from(s.timeout_secs)))
    }

    /// `jobstream run`'s startup checks (DescribeTable, DescribeTimeToLive,
    /// GetQueueUrl, GetQueueAttributes): a stream consumer's, so a restart
    /// during a throttle or an outage of seconds waits it out as the
    /// handlers do (each call within the stream budget, 40 s), where five
    /// attempts (0.1-0.3 s) made the process exit and a supervisor's start
    /// limit stop it for good. Permanent errors (a missing table, access
    /// denied, a validation error) are not retried: they fail at once.
    pub fn startup() -> Self {
        Self::stream()
    }

    /// A queue consumer's (its queue's deployed consumer timeout).
    pub fn queue(def: &crate::models::table::QueueDef) -> Self {
        Self::within(Duration::from_secs(u64::from(def.consumer_timeout_secs)))
    }

    /// The same with at most `n` attempts (tests of what happens when
    /// retries run out): never more than deployed.
    pub fn with_max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n.clamp(1, self.max_attempts);
        self
    }

    pub fn retry_config(&self) -> RetryConfig {
        RetryConfig::standard()
            .with_max_attempts(self.max_attempts)
            .with_initial_backoff(self.initial_backoff)
            .with_max_backoff(self.max_backoff)
    }

    pub fn timeout_config(&self) -> TimeoutConfig {
        TimeoutConfig::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .operation_timeout(self.call_budget)
            .operation_attempt_timeout(self.attempt_timeout)
            .build()
    }

    /// A DynamoDB client configuration with these retries (and no retry
    /// quota, see the module docs).
    pub fn dynamodb(
        &self,
        b: aws_sdk_dynamodb::config::Builder,
    ) -> aws_sdk_dynamodb::config::Builder {
        b.retry_config(self.retry_config())
            .timeout_config(self.timeout_config())
            .retry_partition(partition())
            .retry_classifier(UnreadableAnswer)
    }

    /// The same for SQS (the jobs a stream consumer sends).
    pub fn sqs(&self, b: aws_sdk_sqs::config::Builder) -> aws_sdk_sqs::config::Builder {
        b.retry_config(self.retry_config())
            .timeout_config(self.timeout_config())
            .retry_partition(partition())
            .retry_classifier(UnreadableAnswer)
    }

    pub fn dynamodb_client(&self, sdk: &aws_config::SdkConfig) -> aws_sdk_dynamodb::Client {
        aws_sdk_dynamodb::Client::from_conf(
            self.dynamodb(aws_sdk_dynamodb::config::Builder::from(sdk))
                .build(),
        )
    }

    pub fn sqs_client(&self, sdk: &aws_config::SdkConfig) -> aws_sdk_sqs::Client {
        aws_sdk_sqs::Client::from_conf(self.sqs(aws_sdk_sqs::config::Builder::from(sdk)).build())
    }
}

/// A 2xx answer the call failed on (its body could not be read): a
/// transient error, retried within the call's budget like a transport
/// error. Any other outcome is left to the SDK's own classifiers.
#[derive(Debug, Clone, Copy)]
pub struct UnreadableAnswer;

impl ClassifyRetry for UnreadableAnswer {
    fn classify_retry(&self, ctx: &InterceptorContext) -> RetryAction {
        let answered = ctx.response().is_some_and(|r| r.status().is_success());
        if answered && matches!(ctx.output_or_error(), Some(Err(_))) {
            RetryAction::transient_error()
        } else {
            RetryAction::NoActionIndicated
        }
    }

    fn name(&self) -> &'static str {
        "jobstream: an unreadable 2xx answer"
    }
}

/// The processors' retry partition: a token bucket that never runs out.
pub fn partition() -> RetryPartition {
    static PARTITION: OnceLock<RetryPartition> = OnceLock::new();
    PARTITION
        .get_or_init(|| {
            RetryPartition::custom("jobstream-processors")
                .token_bucket(TokenBucket::unlimited())
                .build()
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_may_retry_for_two_thirds_of_its_function_timeout() {
        let stream = Retries::stream();
        assert_eq!(stream.call_budget, Duration::from_secs(40));
        assert_eq!(stream.attempt_timeout, ATTEMPT_TIMEOUT);
        let queue = Retries::within(Duration::from_secs(30));
        assert_eq!(queue.call_budget, Duration::from_secs(20));
        let tiny = Retries::within(Duration::from_secs(3));
        assert_eq!(tiny.attempt_timeout, Duration::from_secs(2));
        let t = stream.timeout_config();
        assert_eq!(t.operation_timeout(), Some(Duration::from_secs(40)));
        assert_eq!(t.operation_attempt_timeout(), Some(ATTEMPT_TIMEOUT));
        assert_eq!(t.connect_timeout(), Some(CONNECT_TIMEOUT));
    }

    #[test]
    fn the_attempts_outlast_the_budget_so_time_ends_the_retries() {
        // Expected full-jitter backoff (half the cap of each retry) of every
        // retry the attempts allow, against the stream budget.
        let r = Retries::stream();
        let expected: f64 = (0..r.max_attempts - 1)
            .map(|n| {
                let cap = r.initial_backoff.as_secs_f64() * 2f64.powi(n as i32);
                cap.min(r.max_backoff.as_secs_f64()) / 2.0
            })
            .sum();
        assert!(
            expected > r.call_budget.as_secs_f64() * 1.3,
            "{expected} s of backoff for a {:?} budget",
            r.call_budget
        );
        let c = r.retry_config();
        assert_eq!(c.max_attempts(), MAX_ATTEMPTS);
        assert_eq!(c.max_backoff(), MAX_BACKOFF);
        assert_eq!(c.initial_backoff(), INITIAL_BACKOFF);
    }

    #[test]
    fn tests_may_only_lower_the_attempts() {
        assert_eq!(Retries::stream().with_max_attempts(1).max_attempts, 1);
        assert_eq!(Retries::stream().with_max_attempts(0).max_attempts, 1);
        let more = Retries::stream().with_max_attempts(MAX_ATTEMPTS + 5);
        assert_eq!(more.max_attempts, MAX_ATTEMPTS);
    }
}
