//! Running a runtime as a long-lived consumer (`dev`, `run`): every stream
//! mapping's shards beside the queue pollers until a stop, the status
//! line, and what the metrics server reads.

use super::*;

impl Runtime {
    /// Runs until `stop` resolves (Ctrl-C in `jobstream dev`; SIGTERM or
    /// SIGINT in `run`): every stream mapping as a long-lived consumer (a
    /// task per shard, mappings concurrent) beside the queue pollers. On
    /// stop no new batch starts, batches in flight get
    /// [`Self::shutdown_grace`], and the leases are released.
    pub async fn run_until(&mut self, stop: impl Future<Output = ()>) -> anyhow::Result<()> {
        if self.emit_metrics {
            // Every processor's counters (BadInput first) as EMF lines, as
            // in Lambda.
            for p in self.processors.streams() {
                p.metrics().emit_emf(true);
            }
            for c in &self.processors.consumers {
                c.handler.metrics().emit_emf(true);
            }
        }
        let (served, serving) = tokio::sync::watch::channel(false);
        let server = self.metrics_listener.take().map(|listener| {
            tokio::spawn(crate::local::metrics::serve(
                listener,
                self.probe(),
                serving,
            ))
        });
        let result = self.run_consumers_until(stop).await;
        let _ = served.send(true);
        if let Some(server) = server {
            match server.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::error!(error = format!("{e:#}"), "the metrics server failed")
                }
                Err(e) => tracing::error!(error = %e, "the metrics server panicked"),
            }
        }
        result
    }

    /// What the metrics server reads: every mapping's and queue's counters
    /// and every processor's bad-input count, shared.
    pub fn probe(&self) -> crate::local::metrics::Probe {
        use shared::metrics::names::BAD_INPUT;
        let mut bad_input: Vec<(String, crate::local::metrics::Reader)> = Vec::new();
        for p in self.processors.streams() {
            let name = p.name().to_string();
            bad_input.push((name, Arc::new(move || p.metrics().get(BAD_INPUT))));
        }
        for c in &self.processors.consumers {
            let h = c.handler.clone();
            bad_input.push((
                h.name().to_string(),
                Arc::new(move || h.metrics().get(BAD_INPUT)),
            ));
        }
        crate::local::metrics::Probe {
            streams: self.mappings.iter().map(|m| m.stats()).collect(),
            queues: self
                .queues
                .iter()
                .map(|q| (q.name.clone(), q.stats_handle()))
                .collect(),
            bad_input,
            queue_failing_bound: None,
        }
    }

    async fn run_consumers_until(&mut self, stop: impl Future<Output = ()>) -> anyhow::Result<()> {
        // The queues are consumed by their own pollers (long polls, as
        // Lambda's, up to each queue's maximum concurrency), so a slow queue
        // never delays a stream consumer; at the stop they finish the
        // invocations in flight.
        let pollers = self.start_queue_pollers(Polling::Long(long_poll_secs(self.shutdown_grace)));
        let stopped_at = std::sync::OnceLock::new();
        let stop = async {
            stop.await;
            // The pollers stop with the streams: one grace for both.
            let _ = pollers.stop.send(true);
            let _ = stopped_at.set(tokio::time::Instant::now());
        };
        let result = self.consume_streams_until(stop).await;
        let deadline = stopped_at
            .get()
            .copied()
            .unwrap_or_else(tokio::time::Instant::now)
            + self.shutdown_grace;
        pollers.stop_by(Some(deadline)).await;
        result
    }

    async fn consume_streams_until(
        &mut self,
        stop: impl Future<Output = ()>,
    ) -> anyhow::Result<()> {
        let (tx, rx) = tokio::sync::watch::channel(false);
        let grace = self.shutdown_grace;
        let stats: Vec<_> = self.mappings.iter().map(|m| m.stats()).collect();
        let (status_every, emit_metrics) = (self.status_every, self.emit_metrics);
        let Self {
            mappings, queues, ..
        } = self;
        let streams =
            futures::future::join_all(mappings.iter_mut().map(|m| m.consume(rx.clone(), grace)));
        let mut stopped = rx.clone();
        let others = async {
            let mut last_status = Instant::now();
            let mut said = String::new();
            loop {
                if *stopped.borrow() {
                    return;
                }
                if let Some(every) = status_every {
                    if last_status.elapsed() >= every {
                        last_status = Instant::now();
                        let line = status_line(&stats, queues);
                        if line != said {
                            crate::outln!("{line}");
                            said = line;
                        }
                        if emit_metrics {
                            let now = chrono::Utc::now().timestamp_millis();
                            for line in stats.iter().flat_map(|s| s.emf_lines(now)) {
                                crate::outln!("{line}");
                            }
                        }
                    }
                }
                let idle = status_every.unwrap_or(Duration::from_secs(3600));
                tokio::select! {
                    _ = stopped.changed() => {}
                    () = tokio::time::sleep(idle) => {}
                }
            }
        };
        let signal = async {
            stop.await;
            tx.send_replace(true);
        };
        let (results, (), ()) = tokio::join!(streams, others, signal);
        for r in results {
            r?;
        }
        Ok(())
    }

    /// One status line: invocations per processor, iterator age per
    /// mapping, and the records sent to the on-failure destinations so far.
    pub fn status(&self) -> String {
        let stats: Vec<_> = self.mappings.iter().map(|m| m.stats()).collect();
        status_line(&stats, &self.queues)
    }
}

fn status_line(stats: &[Arc<MappingStats>], queues: &[QueueMapping]) -> String {
    let invocations: Vec<String> = stats
        .iter()
        .map(|m| format!("{} {}", m.name, m.invocations()))
        .chain(
            queues
                .iter()
                .map(|q| format!("{} {}", q.name, q.invocations())),
        )
        .collect();
    let ages: Vec<String> = stats
        .iter()
        .map(|m| {
            let per_shard: Vec<String> = m
                .iterator_ages()
                .iter()
                .map(|(shard, age)| format!("{shard} {age} ms"))
                .collect();
            format!("{} [{}]", m.name, per_shard.join(", "))
        })
        .collect();
    let failed: usize = stats.iter().map(|m| m.on_failure.len()).sum();
    let losses: u64 = stats.iter().map(|m| m.on_failure.losses()).sum();
    let mut line = format!(
        "status: invocations {}; iterator age {}; on-failure: {failed} batch(es)",
        invocations.join(", "),
        ages.join(", ")
    );
    let undeleted: u64 = queues
        .iter()
        .map(|q| {
            q.stats()
                .delete_failures
                .load(std::sync::atomic::Ordering::Relaxed)
        })
        .sum();
    if undeleted > 0 {
        line.push_str(&format!(
            "; processed messages not deleted (processed again): {undeleted}"
        ));
    }
    let undelivered: u64 = stats.iter().map(|m| m.on_failure.undelivered()).sum();
    if undelivered > 0 {
        line.push_str(&format!(
            "; ON-FAILURE DESTINATION FAILING: {undelivered} batch(es) not delivered (kept in memory, listed at exit; see the log)"
        ));
    }
    if losses > 0 {
        line.push_str(&format!(
            "; LOST: {losses} range(s) of records trimmed or in vanished shards (see the on-failure destination)"
        ));
    }
    line
}

/// ReceiveMessage's wait of the pollers of `dev` and `run` (Lambda's).
const LONG_POLL_SECS: i32 = 20;

/// The pollers' wait: Lambda's, but ending within the shutdown grace, so
/// that a poll in flight at a stop returns (and its poller gives back what
/// it brought) before the pollers still busy are abandoned.
fn long_poll_secs(grace: Duration) -> i32 {
    i32::try_from(grace.as_secs().saturating_sub(1))
        .unwrap_or(LONG_POLL_SECS)
        .clamp(1, LONG_POLL_SECS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_poll_ends_within_the_shutdown_grace() {
        assert_eq!(long_poll_secs(Duration::from_secs(10)), 9);
        assert_eq!(long_poll_secs(Duration::from_secs(60)), LONG_POLL_SECS);
        assert_eq!(long_poll_secs(Duration::from_millis(500)), 1);
    }
}
