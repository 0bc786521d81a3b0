//! `verify --repair`'s wait for the live processors: what a repair starts
//! (a queued job, the record of a reconciled item) lands a moment later.

use super::verify::Report;

/// `verify` after `--repair`: again until the report is clean or `wait`
/// has passed, `every` apart, telling `waiting` each report that still
/// has findings. The live processors apply what a repair starts (a queued
/// job, the record of a reconciled item) a moment later, so a report made
/// at once can show drift the repair is still settling (user finding E3).
/// Findings no repair addresses that stay as they were from one report to
/// the next (a history snapshot changed by hand: "not repairable") are
/// settled already: reported then, not after the whole wait (spec15 #5).
pub async fn settled<F, Fut>(
    wait: std::time::Duration,
    every: std::time::Duration,
    mut again: F,
    mut waiting: impl FnMut(&Report),
) -> anyhow::Result<Report>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Report>>,
{
    let deadline = std::time::Instant::now() + wait;
    let mut before: Option<Vec<String>> = None;
    loop {
        let report = again().await?;
        let stuck = report.repairs.is_empty() && before.as_ref() == Some(&report.problems);
        if report.is_clean() || stuck || std::time::Instant::now() + every > deadline {
            return Ok(report);
        }
        waiting(&report);
        before = Some(report.problems.clone());
        tokio::time::sleep(every).await;
    }
}

#[cfg(test)]
mod tests {
    use shared::item::Item;
    use shared::models::Repair;

    use super::Report;

    /// A report with drift the repair is still settling is made again
    /// until clean; drift that stays is reported once the wait is over;
    /// no wait: one report.
    #[tokio::test]
    async fn after_a_repair_verify_waits_for_the_drift_to_settle() {
        use std::time::Duration;
        let drift = || Report {
            problems: vec!["counter: PK=A, SK=B".into()],
            repairs: vec![Repair::Reconcile(Item::new())],
            ..Report::default()
        };
        let calls = std::cell::Cell::new(0);
        let mut told = 0;
        let r = super::settled(
            Duration::from_secs(60),
            Duration::from_millis(5),
            || {
                calls.set(calls.get() + 1);
                let n = calls.get();
                async move { Ok(if n < 3 { drift() } else { Report::default() }) }
            },
            |_| told += 1,
        )
        .await
        .unwrap();
        assert!(r.is_clean());
        assert_eq!((calls.get(), told), (3, 2));
        let r = super::settled(
            Duration::from_millis(50),
            Duration::from_millis(5),
            || async { Ok(drift()) },
            |_| {},
        )
        .await
        .unwrap();
        assert!(!r.is_clean(), "drift that stays is reported");
        calls.set(0);
        let r = super::settled(
            Duration::ZERO,
            Duration::from_secs(2),
            || {
                calls.set(calls.get() + 1);
                async { Ok(drift()) }
            },
            |_| panic!("no wait"),
        )
        .await
        .unwrap();
        assert!(!r.is_clean());
        assert_eq!(calls.get(), 1);
    }

    /// A finding no repair addresses that stays as it was (a history
    /// snapshot edited by hand: "not repairable") ends the wait at the
    /// next report, not after the whole `--settle` (spec15 #5); one that
    /// changes, or has a repair, is waited for.
    #[tokio::test]
    async fn a_finding_no_repair_addresses_that_stays_ends_the_wait() {
        use std::time::Duration;
        let stuck = |what: &str| Report {
            problems: vec![format!("history-snapshot: {what} (not repairable)")],
            ..Report::default()
        };
        let calls = std::cell::Cell::new(0);
        let r = super::settled(
            Duration::from_secs(60),
            Duration::from_millis(5),
            || {
                calls.set(calls.get() + 1);
                async { Ok(stuck("APP#r2")) }
            },
            |_| {},
        )
        .await
        .unwrap();
        assert!(!r.is_clean());
        assert_eq!(calls.get(), 2, "one more report, then done");
        // Findings still moving are waited for.
        calls.set(0);
        let r = super::settled(
            Duration::from_secs(60),
            Duration::from_millis(5),
            || {
                calls.set(calls.get() + 1);
                let n = calls.get();
                async move {
                    Ok(if n < 4 {
                        stuck(&format!("APP#{n}"))
                    } else {
                        Report::default()
                    })
                }
            },
            |_| {},
        )
        .await
        .unwrap();
        assert!(r.is_clean());
        assert_eq!(calls.get(), 4);
    }
}
