//! What a mapping's metrics and `/readyz` say, judged when they are read:
//! the leases held, the shards by state and the iterator ages from one
//! instant (consistent in one scrape), whether the last lease read is
//! still worth anything, and since when the engine has not answered.
//!
//! A process that cannot read the lease table does not know who renews a
//! shard: once its last lease read is older than the staleness bound (half
//! a lease duration), every shard it does not hold is `stale` to it, never
//! `elsewhere`. A process reports an iterator age only for the shards whose
//! lease it holds now (not for a lease that ran out while its coordinator
//! was blocked on a call).

use std::collections::BTreeSet;

use super::*;

/// A shard whose turn has come, as the last lease read showed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Judged {
    /// Held under this process's owner (nobody reads it once this process
    /// stops holding it).
    Ours,
    /// Another holder renews it.
    Elsewhere,
    /// Its holder has not renewed it for half a lease duration.
    Stale,
    /// Released, expired or never taken.
    Unheld,
}

/// The last lease read: when it answered, and each shard whose turn had
/// come, judged then.
#[derive(Debug, Clone)]
pub(super) struct ShardView {
    pub(super) at: Instant,
    pub(super) shards: Vec<(String, Judged)>,
}

/// Whether the engine answers the mapping: when one of its calls (lease
/// reads and writes, DescribeStream, shard reads) last succeeded, and why
/// the last one failed.
#[derive(Debug, Default)]
pub(super) struct Reach {
    last_success: Mutex<Option<Instant>>,
    last_error: Mutex<Option<String>>,
}

impl Reach {
    /// Counted from now (a mapping just made has not failed yet).
    pub(super) fn new() -> Self {
        Self {
            last_success: Mutex::new(Some(Instant::now())),
            last_error: Mutex::new(None),
        }
    }

    pub(super) fn succeeded(&self) {
        if let Ok(mut t) = self.last_success.lock() {
            *t = Some(Instant::now());
        }
    }

    /// A call failed: `cause` is what `/readyz` names if none succeeds for
    /// a while.
    pub(super) fn failed(&self, cause: String) {
        if let Ok(mut e) = self.last_error.lock() {
            *e = Some(cause);
        }
    }

    /// How long since a call last succeeded (`None`: no clock started).
    pub(super) fn unanswered(&self, now: Instant) -> Option<Duration> {
        self.last_success
            .lock()
            .ok()
            .and_then(|t| *t)
            .map(|t| now.saturating_duration_since(t))
    }

    pub(super) fn last_error(&self) -> Option<String> {
        self.last_error.lock().ok().and_then(|e| e.clone())
    }
}

/// What one scrape reads of a mapping, all judged at one instant.
#[derive(Debug, Default, Clone)]
pub struct Snapshot {
    /// With leases, the shards whose lease this process holds now;
    /// without, every shard it reads.
    pub held: BTreeSet<String>,
    /// Leases held now (0 without leases): `held`'s size with leases.
    pub leases_held: u64,
    /// Iterator age (ms) of each shard held.
    pub iterator_ages: BTreeMap<String, i64>,
    /// With leases, once the lease table was read: the shards by state.
    pub shards: Option<ShardStates>,
    /// Since a call of the mapping to the engine last succeeded.
    pub unanswered: Option<Duration>,
}

impl ShardStates {
    /// As `jobstream_shards` labels them.
    pub fn by_state(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("held", self.held),
            ("elsewhere", self.elsewhere),
            ("stale", self.stale),
            ("unheld", self.unheld),
        ]
    }
}

impl MappingStats {
    /// The mapping as one scrape reports it, judged now.
    pub fn snapshot(&self) -> Snapshot {
        let now = Instant::now();
        let now_ms = now_ms();
        let oldest = self.oldest.lock().map(|o| o.clone()).unwrap_or_default();
        let held: BTreeSet<String> = match self.lease_ttl {
            Some(_) => self
                .live
                .lock()
                .map(|l| {
                    l.iter()
                        .filter(|(_, lease)| lease.held_at(now))
                        .map(|(id, _)| id.clone())
                        .collect()
                })
                .unwrap_or_default(),
            None => oldest.keys().cloned().collect(),
        };
        let iterator_ages = oldest
            .iter()
            .filter(|(id, _)| held.contains(*id))
            .map(|(id, t)| (id.clone(), t.map_or(0, |t| (now_ms - t).max(0))))
            .collect();
        let leases_held = if self.lease_ttl.is_some() {
            held.len() as u64
        } else {
            0
        };
        let view = self.shard_view.lock().ok().and_then(|v| v.clone());
        let shards = match (view, self.lease_ttl) {
            (Some(view), Some(ttl)) => Some(judge(&view, &held, ttl, now)),
            _ => None,
        };
        Snapshot {
            held,
            leases_held,
            iterator_ages,
            shards,
            unanswered: self.reach.unanswered(now),
        }
    }

    /// Leases this process holds now.
    pub fn leases_held(&self) -> u64 {
        self.snapshot().leases_held
    }

    /// How long since a call of the mapping to the engine last succeeded,
    /// and the cause of the last failure.
    pub fn unanswered(&self) -> (Option<Duration>, Option<String>) {
        (
            self.reach.unanswered(Instant::now()),
            self.reach.last_error(),
        )
    }

    /// The lease duration, with leases.
    pub fn lease_ttl(&self) -> Option<Duration> {
        self.lease_ttl
    }
}

/// The shards by state at `now`: the leases held now are `held`; the
/// others as the last lease read showed them if it is fresh (within half a
/// lease duration), `stale` otherwise (nobody is known to renew them).
fn judge(view: &ShardView, held: &BTreeSet<String>, ttl: Duration, now: Instant) -> ShardStates {
    let fresh = now.saturating_duration_since(view.at) <= ttl / 2;
    let mut states = ShardStates {
        held: held.len() as u64,
        ..ShardStates::default()
    };
    for (id, judged) in &view.shards {
        if held.contains(id) {
            continue;
        }
        match judged {
            Judged::Elsewhere if fresh => states.elsewhere += 1,
            Judged::Unheld if fresh => states.unheld += 1,
            _ => states.stale += 1,
        }
    }
    states
}

#[cfg(test)]
impl MappingStats {
    /// Stats of a mapping with leases (20 s), holding none yet (for tests
    /// of what reads them).
    pub(crate) fn leased(name: &str) -> Self {
        Self {
            lease_ttl: Some(Duration::from_secs(20)),
            ..Self::new(name)
        }
    }

    /// Holds a lease on `shard` from now on, for an hour.
    pub(crate) fn hold(&self, shard: &str) {
        let lease = Lease::new(&Taken {
            token: 1,
            acquisition: "test".into(),
            valid_until: Instant::now() + Duration::from_secs(3600),
            checkpoint: Default::default(),
            latest_from_ms: None,
        });
        if let Ok(mut live) = self.live.lock() {
            live.insert(shard.to_string(), lease);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The last lease read, as old as `age`, judged with a 20 s lease.
    fn judged(age: Duration, held: &[&str]) -> ShardStates {
        let now = Instant::now();
        let view = ShardView {
            at: now - age,
            shards: vec![
                ("mine".into(), Judged::Ours),
                ("b".into(), Judged::Elsewhere),
                ("c".into(), Judged::Stale),
                ("d".into(), Judged::Unheld),
            ],
        };
        let held = held.iter().map(|s| s.to_string()).collect();
        judge(&view, &held, Duration::from_secs(20), now)
    }

    #[test]
    fn a_lease_read_older_than_half_a_lease_says_no_shard_is_read_elsewhere() {
        let fresh = judged(Duration::from_secs(9), &["mine"]);
        assert_eq!(
            fresh.by_state(),
            [("held", 1), ("elsewhere", 1), ("stale", 1), ("unheld", 1)]
        );
        // A lease of ours no longer held: nobody renews it.
        let lost = judged(Duration::from_secs(9), &[]);
        assert_eq!(
            lost.by_state(),
            [("held", 0), ("elsewhere", 1), ("stale", 2), ("unheld", 1)]
        );
        let old = judged(Duration::from_secs(11), &[]);
        assert_eq!(
            old.by_state(),
            [("held", 0), ("elsewhere", 0), ("stale", 4), ("unheld", 0)]
        );
    }
}
