//! The store's own retries ([`Backoff`]): what the SDK does not retry,
//! retried with jittered exponential backoff within the call budget.

use std::time::{Duration, Instant};

use backon::{BackoffBuilder, ExponentialBuilder};

/// Retry policy for what the SDK does not retry itself (UnprocessedItems,
/// UnprocessedKeys, a transaction cancelled by a conflict or the throttling
/// of one action, SendMessageBatch entries failed by the service):
/// exponential backoff from the SDK's first wait to its longest
/// ([`crate::retry`]), each wait with up to as much again at random
/// (`backon`'s jitter), and bounded like
/// the SDK's retries, by the call budget of the function (two thirds of its
/// timeout), not by a count: a throttle window shorter than the budget costs
/// the call a wait, not a failed record.
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    pub min_delay: Duration,
    pub max_delay: Duration,
    /// At most this many retries: unbounded as deployed (`usize::MAX`, the
    /// budget ends them); tests of retries running out lower it.
    pub max_times: usize,
    /// No retry starts later than this after the call's first attempt, and
    /// its waits add up to no more (the SDK's operation timeout, see
    /// [`crate::retry::Retries::call_budget`]).
    pub budget: Duration,
}

impl Default for Backoff {
    /// A stream consumer's, as deployed.
    fn default() -> Self {
        Self::within(&crate::retry::Retries::stream())
    }
}

impl Backoff {
    /// The backoff of a function whose SDK clients retry with `retries`:
    /// the same first and longest wait, the same time budget.
    pub fn within(retries: &crate::retry::Retries) -> Self {
        Self {
            min_delay: retries.initial_backoff,
            max_delay: retries.max_backoff,
            max_times: usize::MAX,
            budget: retries.call_budget,
        }
    }

    fn builder(&self) -> ExponentialBuilder {
        ExponentialBuilder::default()
            .with_min_delay(self.min_delay)
            .with_max_delay(self.max_delay)
            .with_max_times(self.max_times)
            .with_total_delay(Some(self.budget))
            .with_jitter()
    }

    /// The waits of one call started now: none once the budget is spent
    /// (waits and attempts alike).
    pub fn delays(&self) -> Delays {
        Delays {
            inner: self.builder().build(),
            deadline: Instant::now() + self.budget,
        }
    }
}

/// The waits between the attempts of one call ([`Backoff::delays`]).
#[derive(Debug)]
pub struct Delays {
    inner: backon::ExponentialBackoff,
    deadline: Instant,
}

impl Iterator for Delays {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let delay = self.inner.next()?;
        (Instant::now() + delay <= self.deadline).then_some(delay)
    }
}

/// [`Backoff::delays`] for `backon`'s `Retryable`.
impl BackoffBuilder for Backoff {
    type Backoff = Delays;

    fn build(self) -> Delays {
        self.delays()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retry::Retries;

    /// The waits of one call add up to its function's call budget (less
    /// than one wait), however many retries that takes: not 8 retries,
    /// about 5 s, which a throttle window of 10 s outlasted.
    #[test]
    fn our_retries_last_the_call_budget_not_a_count() {
        for retries in [Retries::stream(), Retries::within(Duration::from_secs(30))] {
            let backoff = Backoff::within(&retries);
            assert_eq!(backoff.budget, retries.call_budget);
            let waits: Vec<Duration> = backoff.delays().collect();
            let total: Duration = waits.iter().sum();
            // The wait refused was at most the longest with its jitter.
            let longest = backoff.max_delay * 2;
            assert!(total <= retries.call_budget, "{total:?}");
            assert!(
                total + longest >= retries.call_budget,
                "{total:?} of {:?}",
                retries.call_budget
            );
            assert!(waits.len() > 8, "{} retries", waits.len());
        }
        assert_eq!(Backoff::default().budget, Retries::stream().call_budget);
    }

    #[test]
    fn tests_may_still_bound_the_retries_by_count() {
        let none = Backoff {
            max_times: 0,
            ..Backoff::default()
        };
        assert_eq!(none.delays().count(), 0);
        let three = Backoff {
            max_times: 3,
            ..Backoff::default()
        };
        assert_eq!(three.delays().count(), 3);
    }
}
