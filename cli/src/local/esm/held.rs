//! The leases this process holds: their fencing token, why one was lost
//! (for the log and `jobstream_leases_lost_total`), and their renewal
//! beside the work.

use super::*;

/// A lease this process holds: the fencing token its writes carry.
#[derive(Debug)]
pub(super) struct Lease {
    /// The counter as this process last wrote it. Every write under the
    /// lease (renewal, checkpoint, completion, release) holds this lock, so
    /// a renewal and a checkpoint never race on the token.
    pub(super) token: tokio::sync::Mutex<i64>,
    /// The acquisition's id: the writes under this lease keep it in the
    /// item, so an answer lost is resolved by reading the item back.
    pub(super) acquisition: String,
    /// Ours until then, on this process's monotonic clock: a lease duration
    /// after the last successful renewal was sent.
    pub(super) valid_until: Mutex<Instant>,
    pub(super) lost: watch::Sender<bool>,
    /// Why it was lost, as far as this process knows (the first reason).
    why: Mutex<Option<Loss>>,
}

/// Why this process stopped holding a lease: what it knows, for the log
/// (a lease that ran out is not one another process took).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Loss {
    /// The ledger shows another acquisition of it: `by` its owner, when the
    /// listing showed it (`None`: a write under the lease was refused).
    Taken { by: Option<String> },
    /// No renewal or checkpoint of it succeeded for a lease duration.
    RanOut,
    /// The shard left the stream's listing: the lease was let go.
    Vanished,
    /// Let go at a stop.
    Released,
}

/// The reasons [`Loss::reason`] counts (`jobstream_leases_lost_total`).
pub(super) const LOSS_REASONS: [&str; 3] = ["taken", "ran_out", "vanished"];

impl Loss {
    /// Its label in `jobstream_leases_lost_total` (`None`: a stop's
    /// release, not a loss).
    pub(super) fn reason(&self) -> Option<&'static str> {
        match self {
            Loss::Taken { .. } => Some(LOSS_REASONS[0]),
            Loss::RanOut => Some(LOSS_REASONS[1]),
            Loss::Vanished => Some(LOSS_REASONS[2]),
            Loss::Released => None,
        }
    }
}

impl std::fmt::Display for Loss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Loss::Taken { by: Some(by) } => write!(
                f,
                "lease lost: the ledger shows it taken by {by} (another acquisition), which reads this shard now"
            ),
            Loss::Taken { by: None } => write!(
                f,
                "lease lost: a write under it was refused and the ledger shows another acquisition of it, which reads this shard now"
            ),
            Loss::RanOut => write!(
                f,
                "lease ran out: no renewal or checkpoint of it succeeded within the lease duration (a renewal or checkpoint that failed is logged before this; none logged: none ended in time, the calls hung or the process was stalled); the shard is unread until a process, this one included, takes it again"
            ),
            Loss::Vanished => write!(f, "the shard left the stream: its lease is let go"),
            Loss::Released => write!(f, "lease released"),
        }
    }
}

impl Lease {
    pub(super) fn new(t: &Taken) -> Arc<Self> {
        Arc::new(Self {
            token: tokio::sync::Mutex::new(t.token),
            acquisition: t.acquisition.clone(),
            valid_until: Mutex::new(t.valid_until),
            lost: watch::channel(false).0,
            why: Mutex::new(None),
        })
    }
    pub(super) fn valid_until(&self) -> Instant {
        self.valid_until
            .lock()
            .map(|v| *v)
            .unwrap_or_else(|_| Instant::now())
    }
    /// The lease as a fenced write is made under it, with `token`.
    pub(super) fn held(&self, token: i64) -> Held<'_> {
        Held {
            token,
            acquisition: &self.acquisition,
        }
    }
    pub(super) fn renewed(&self, token: &mut i64, r: Renewed) {
        *token = r.token;
        if let Ok(mut v) = self.valid_until.lock() {
            *v = (*v).max(r.valid_until);
        }
    }
    /// Still ours: not lost, not run out. A lease found run out (its
    /// renewals and checkpoints kept failing) is lost from then on, for
    /// [`Loss::RanOut`]: whoever notices it (the renewer, a checkpoint, the
    /// coordinator, the clock in [`Self::lost`]), the invocation in flight
    /// under it is cancelled, and a renewal whose answer comes later does
    /// not bring it back.
    pub(super) fn holds(&self) -> bool {
        if *self.lost.borrow() {
            return false;
        }
        if self.valid_until() > Instant::now() {
            return true;
        }
        self.lose(Loss::RanOut);
        false
    }
    /// Held at `now` (not lost, not run out), without noting anything:
    /// what a scrape reads.
    pub(super) fn held_at(&self, now: Instant) -> bool {
        !*self.lost.borrow() && self.valid_until() > now
    }
    /// Stops holding it, for `why` (the first reason given is kept).
    pub(super) fn lose(&self, why: Loss) {
        if let Ok(mut w) = self.why.lock() {
            w.get_or_insert(why);
        }
        self.lost.send_replace(true);
    }
    /// Why it is no longer held (`None`: it still is).
    pub(super) fn loss(&self) -> Option<Loss> {
        if *self.lost.borrow() {
            let why = self.why.lock().ok().and_then(|w| w.clone());
            Some(why.unwrap_or(Loss::Taken { by: None }))
        } else if self.valid_until() <= Instant::now() {
            Some(Loss::RanOut)
        } else {
            None
        }
    }
    /// Resolves when the lease is lost: taken, let go, or run out (at the
    /// end of its validity, unless a renewal moved it on meanwhile).
    pub(super) async fn lost(&self) {
        let mut rx = self.lost.subscribe();
        loop {
            let until = self.valid_until();
            tokio::select! {
                _ = rx.wait_for(|l| *l) => return,
                () = tokio::time::sleep_until(until.into()) => {
                    if !self.holds() {
                        return;
                    }
                }
            }
        }
    }
}

/// The leases of `live` that `keep` chooses, with their shards (a
/// snapshot: the lock is not held while they are used).
pub(super) fn leases_where(
    live: &Mutex<BTreeMap<String, Arc<Lease>>>,
    keep: impl Fn(&str, &Lease) -> bool,
) -> Vec<(String, Arc<Lease>)> {
    live.lock()
        .map(|l| {
            l.iter()
                .filter(|(id, lease)| keep(id, lease))
                .map(|(id, lease)| (id.clone(), lease.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// Renews every lease in `live` (only those past a third of their time
/// with `only_due`); a lease another owner took is marked lost. Each
/// answer (or failure) is noted in `reach`.
pub(super) async fn renew_all(
    leases: &LeaseTable,
    live: &Mutex<BTreeMap<String, Arc<Lease>>>,
    only_due: bool,
    reach: &Reach,
) {
    let third = leases.lease_ttl() / 3;
    let now = Instant::now();
    let due = leases_where(live, |_, lease| {
        !only_due || lease.valid_until().saturating_duration_since(now) < 2 * third
    });
    for (id, lease) in due {
        if *lease.lost.borrow() {
            continue;
        }
        let mut token = lease.token.lock().await;
        match leases.renew(&id, &lease.held(*token)).await {
            Ok(r) => {
                reach.succeeded();
                lease.renewed(&mut token, r);
            }
            Err(LeaseError::Lost { .. }) => {
                reach.succeeded();
                tracing::warn!(shard = %id, owner = leases.owner(), "renewal refused: the ledger shows another acquisition of the lease; stopping the shard");
                lease.lose(Loss::Taken { by: None });
            }
            Err(e) => {
                reach.failed(e.to_string());
                tracing::warn!(shard = %id, error = %e, "renewing a lease failed; retried (the shard stops if the lease runs out)");
                // Run out now: the shard stops (its invocation cancelled).
                lease.holds();
            }
        }
    }
}
