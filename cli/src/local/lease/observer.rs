//! Expiry as the Kinesis Client Library judges it: by what this process saw
//! of each lease's counter and holder, on its own monotonic clock (never by
//! comparing wall clocks across hosts; see the parent module).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::LeaseItem;

/// What this process saw of each lease: its holder and counter, and when,
/// on this process's monotonic clock, it first saw them so.
#[derive(Debug, Default)]
pub struct Observer {
    seen: HashMap<String, (Option<String>, i64, Instant)>,
}

impl Observer {
    /// Records a listing of the leases made at `now`.
    pub fn observe(&mut self, items: &[LeaseItem], now: Instant) {
        for item in items {
            let state = (item.owner.clone(), item.counter);
            match self.seen.get(&item.shard_id) {
                Some((owner, counter, _)) if (owner, *counter) == (&state.0, state.1) => {}
                _ => {
                    self.seen
                        .insert(item.shard_id.clone(), (state.0, state.1, now));
                }
            }
        }
    }

    /// The lease was observed as it is now (holder, counter) already
    /// before `at`: it did not change since.
    pub fn unchanged_since(&self, item: &LeaseItem, at: Instant) -> bool {
        self.seen
            .get(&item.shard_id)
            .is_some_and(|(owner, counter, since)| {
                *owner == item.owner && *counter == item.counter && *since < at
            })
    }

    /// How long the lease has been as it is now (holder, counter), as
    /// observed here (`None`: never observed so).
    pub fn unchanged_for(&self, item: &LeaseItem, now: Instant) -> Option<Duration> {
        self.seen
            .get(&item.shard_id)
            .filter(|(owner, counter, _)| *owner == item.owner && *counter == item.counter)
            .map(|(_, _, since)| now.saturating_duration_since(*since))
    }

    /// Held, and its counter moved within the last `ttl` as observed here
    /// (a lease never observed counts as just moved).
    pub fn live(&self, item: &LeaseItem, ttl: Duration, now: Instant) -> bool {
        if !item.held() {
            return false;
        }
        match self.seen.get(&item.shard_id) {
            Some((owner, counter, since)) if *owner == item.owner && *counter == item.counter => {
                now.saturating_duration_since(*since) < ttl
            }
            _ => true,
        }
    }
}
