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
        let began = std::sync::OnceLock::new();
        let result = self
            .run_consumers_until(async {
                stop.await;
                let _ = began.set(tokio::time::Instant::now());
            })
            .await;
        let _ = served.send(true);
        if let Some(mut server) = server {
            // Requests in flight finish by the end of the release's share of
            // the grace; a connection still open then (a stalled scrape) is
            // cut, never waited for.
            let by = began.get().map_or_else(tokio::time::Instant::now, |at| {
                crate::local::stop::StopPlan::starting(*at, self.shutdown_grace).release_by
            });
            match tokio::time::timeout_at(by, &mut server).await {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(e))) => {
                    tracing::error!(error = format!("{e:#}"), "the metrics server failed")
                }
                Ok(Err(e)) => tracing::error!(error = %e, "the metrics server panicked"),
                Err(_) => {
                    tracing::warn!(
                        "shutdown grace over: metrics connections still open are closed"
                    );
                    server.abort();
                }
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
            failing_bound: None,
        }
    }

    async fn run_consumers_until(&mut self, stop: impl Future<Output = ()>) -> anyhow::Result<()> {
        use crate::local::stop::{long_poll_secs, StopPlan};
        // The queues are consumed by their own pollers (long polls, as
        // Lambda's, up to each queue's maximum concurrency), so a slow queue
        // never delays a stream consumer; at the stop they finish the
        // invocations in flight by the time the streams' batches must
        // (one grace for both), beside the streams.
        let grace = self.shutdown_grace;
        let pollers = self.start_queue_pollers(Polling::Long(long_poll_secs(grace)));
        let (stopped, mut began) = tokio::sync::watch::channel(None);
        let stop_now = || {
            stopped.send_if_modified(|at| {
                let first = at.is_none();
                at.get_or_insert_with(tokio::time::Instant::now);
                first
            });
        };
        let stop = async {
            stop.await;
            stop_now();
        };
        let streams = async {
            let result = self.consume_streams_until(stop).await;
            // Streams that ended without a stop (an error) stop the
            // pollers too.
            stop_now();
            result
        };
        let queues = async {
            let began = match began.wait_for(Option::is_some).await {
                Ok(at) => at.unwrap_or_else(tokio::time::Instant::now),
                Err(_) => tokio::time::Instant::now(),
            };
            pollers
                .stop_by(Some(StopPlan::starting(began, grace).work_by))
                .await;
        };
        let (result, ()) = tokio::join!(streams, queues);
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
    let waiting: Vec<String> = stats
        .iter()
        .flat_map(|m| {
            m.replays_waiting()
                .into_iter()
                .map(|s| format!("{} {s}", m.name))
        })
        .collect();
    if !waiting.is_empty() {
        line.push_str(&format!(
            "; --from-start replay waiting for another process's lease: {}",
            waiting.join(", ")
        ));
    }
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
