//! How a stop spends `--shutdown-grace`, the bound of the whole stop from
//! the signal on: every deadline of the stop is derived here, from the
//! grace alone, so that the process is gone within it whatever DynamoDB or
//! SQS do.
//!
//! - in-flight work (stream batches and their checkpoints, queue
//!   invocations) gets the grace less a fifth of it (at most
//!   [`RELEASE_SHARE`]);
//! - the lease release gets what is left, less a twentieth of the grace (at
//!   most [`EXIT_SHARE`]) kept for the exit: the last status line, the list
//!   of what was given up, and the process's end (which waits for nothing
//!   still running);
//! - a long poll of the queue pollers ends before in-flight work is
//!   abandoned (a poll is never cut: SQS would hand a job sent meanwhile to
//!   the dead request).

use std::time::Duration;

use tokio::time::Instant;

/// The most a stop keeps for releasing the leases: one conditional write
/// per lease, milliseconds when DynamoDB answers.
pub const RELEASE_SHARE: Duration = Duration::from_secs(2);

/// The most a stop keeps for the exit after the release.
pub const EXIT_SHARE: Duration = Duration::from_millis(250);

/// ReceiveMessage's wait of the pollers of `dev` and `run` (Lambda's).
pub const LONG_POLL_SECS: i32 = 20;

/// The deadlines of a stop that began at `began` (the signal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StopPlan {
    /// Past it, stream batches and queue invocations in flight are
    /// abandoned (no checkpoint; the messages return after their
    /// visibility timeout).
    pub work_by: Instant,
    /// Past it, leases not released are abandoned (they run out by their
    /// TTL).
    pub release_by: Instant,
    /// The end of the grace: the process is gone by then.
    pub exit_by: Instant,
}

impl StopPlan {
    pub fn starting(began: Instant, grace: Duration) -> Self {
        let exit_by = began + grace;
        Self {
            work_by: exit_by - release_share(grace),
            release_by: exit_by - (grace / 20).min(EXIT_SHARE),
            exit_by,
        }
    }
}

/// What a stop keeps of `grace` after in-flight work: a fifth, at most
/// [`RELEASE_SHARE`].
fn release_share(grace: Duration) -> Duration {
    (grace / 5).min(RELEASE_SHARE)
}

/// The pollers' wait: Lambda's, but ending a second before in-flight work
/// is abandoned (at least a second), so that a poll in flight at a stop
/// returns, and its poller gives back what it brought, before the pollers
/// still busy are abandoned.
pub fn long_poll_secs(grace: Duration) -> i32 {
    let work = grace.saturating_sub(release_share(grace));
    i32::try_from(work.as_secs().saturating_sub(1))
        .unwrap_or(LONG_POLL_SECS)
        .clamp(1, LONG_POLL_SECS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_flight_work_then_the_release_then_the_exit_end_within_the_grace() {
        let now = Instant::now();
        let p = StopPlan::starting(now, Duration::from_secs(10));
        assert_eq!(p.exit_by - now, Duration::from_secs(10), "the whole stop");
        assert_eq!(p.work_by - now, Duration::from_secs(8), "less a fifth");
        assert_eq!(p.exit_by - p.release_by, EXIT_SHARE);
        let p = StopPlan::starting(now, Duration::from_secs(2));
        assert_eq!(p.exit_by - p.work_by, Duration::from_millis(400));
        assert_eq!(p.exit_by - p.release_by, Duration::from_millis(100));
        let p = StopPlan::starting(now, Duration::from_secs(60));
        assert_eq!(p.exit_by - p.work_by, RELEASE_SHARE, "at most");
        let p = StopPlan::starting(now, Duration::ZERO);
        assert_eq!((p.work_by, p.release_by, p.exit_by), (now, now, now));
    }

    #[test]
    fn a_long_poll_ends_before_in_flight_work_is_abandoned() {
        // 10 s: work is abandoned at 8 s, a poll waits 7 s.
        assert_eq!(long_poll_secs(Duration::from_secs(10)), 7);
        assert_eq!(long_poll_secs(Duration::from_secs(60)), LONG_POLL_SECS);
        assert_eq!(long_poll_secs(Duration::from_millis(500)), 1);
    }
}
