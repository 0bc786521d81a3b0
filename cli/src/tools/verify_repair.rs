//! `jobstream verify --repair`: runs a report's repairs through the live
//! path (the same reconcile, counter sync and set jobs, with their guards).

use std::collections::{BTreeSet, HashMap};

use shared::engine::counts;
use shared::engine::rules::Counter;
use shared::item::{display_key, Item, ItemExt};
use shared::lambda::Processors;
use shared::ledger::item_id;
use shared::models::Repair;

use super::Report;

/// Applies the repairs of a report through the live path. Returns how many
/// repairs ran.
pub async fn repair(p: &Processors, report: &Report) -> anyhow::Result<usize> {
    let deriver = p.derive.deriver();
    let mut keys: Vec<Item> = Vec::new();
    let mut counters: Vec<Counter> = Vec::new();
    let mut stale_totals: Vec<&Item> = Vec::new();
    let mut stale_owners: Vec<&Repair> = Vec::new();
    let mut ran = 0;
    for r in &report.repairs {
        match r {
            Repair::Reconcile(k) => keys.push(k.clone()),
            Repair::Counter { counter, sources } => {
                keys.extend(sources.iter().cloned());
                if let Some(c) = deriver.rules.counter(counter) {
                    counters.push(c);
                }
            }
            Repair::StaleTotals { totals, sources } => {
                keys.extend(sources.iter().cloned());
                stale_totals.push(totals);
            }
            Repair::StaleOwners { sources, .. } => {
                keys.extend(sources.iter().cloned());
                stale_owners.push(r);
            }
            Repair::Job { queue, body } => {
                let consumer = p
                    .consumer(queue)
                    .ok_or_else(|| anyhow::anyhow!("no consumer of queue {queue}"))?;
                match &consumer.set_job {
                    Some(job) => {
                        job.run_all(body)
                            .await
                            .map_err(|e| anyhow::anyhow!("repair job on {queue}: {e}"))?;
                    }
                    // Any other consumer takes the job as one message.
                    None => {
                        let event: aws_lambda_events::event::sqs::SqsEvent =
                            serde_json::from_value(serde_json::json!({ "Records": [{
                                "messageId": format!("repair-{}", uuid::Uuid::new_v4()),
                                "receiptHandle": "repair",
                                "body": body,
                                "attributes": {},
                                "messageAttributes": {},
                                "eventSource": "aws:sqs",
                            }]}))?;
                        let resp = consumer
                            .handler
                            .handle(event)
                            .await
                            .map_err(|e| anyhow::anyhow!("repair job on {queue}: {e}"))?;
                        anyhow::ensure!(
                            resp.batch_item_failures.is_empty(),
                            "repair job on {queue} failed"
                        );
                    }
                }
                ran += 1;
            }
            Repair::Model(r) => {
                // Its guard is read again here: one that no longer holds
                // (the processors moved on since the scan) writes nothing,
                // and says so beside what the dry run listed.
                if r.0
                    .apply(&p.store, &deriver.table, &deriver.ledger_table)
                    .await?
                {
                    ran += 1;
                } else {
                    crate::outln!(
                        "repair: not run, its guard no longer holds: {}",
                        r.0.describe()
                    );
                }
            }
            Repair::DeleteIfUnchanged(item) => {
                p.store
                    .delete_if_unchanged(&deriver.table, deriver.rules.key_names(), item)
                    .await?;
                ran += 1;
            }
        }
    }
    let mut seen = BTreeSet::new();
    keys.retain(|k| seen.insert(item_id(k)));
    if !keys.is_empty() {
        let done = deriver
            .reconcile(&keys, &HashMap::new())
            .await
            .map_err(|(_, pos, e)| anyhow::anyhow!("reconcile {}: {e}", display_key(&keys[pos])))?;
        ran += keys.len();
        let _ = done;
    }
    if !counters.is_empty() {
        counts::sync_counted(deriver, counters.clone()).await?;
        ran += counters.len();
    }
    // After the reconciles moved what their sources counted elsewhere:
    // totals still summing to something, or moved since, stay.
    for key in stale_totals {
        let ledger = &deriver.ledger_table;
        let Some(t) = p.store.get(ledger, key.clone()).await? else {
            continue;
        };
        let zero = t
            .keys()
            .filter(|k| k.starts_with("t_"))
            .all(|k| t.opt_i64(k).ok().flatten() == Some(0));
        let keys = [shared::ledger::PK, shared::ledger::SK];
        if zero
            && p.store.delete_if_unchanged(ledger, &keys, &t).await?
                == shared::store::Written::Applied
        {
            ran += 1;
        }
    }
    // After the reconciles moved their sources off the item (and deleted
    // it, as the repairs above delete one no record names).
    for r in stale_owners {
        let Repair::StaleOwners { item, records, .. } = r else {
            continue;
        };
        // An item the model still derives (an entity no longer `shared`)
        // is its one source's: its owners go whatever it holds.
        let while_absent = !deriver.rules.is_derived(item);
        if deriver
            .drop_stale_owners(item, records, while_absent)
            .await?
        {
            ran += 1;
        } else {
            crate::outln!(
                "repair: not run, its guard no longer holds: {}",
                r.describe(deriver.rules.key_names())
            );
        }
    }
    Ok(ran)
}
