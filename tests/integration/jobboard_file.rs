//! `models/jobboard.yaml` (suggestions as a join set over a city's seekers
//! listed exactly from a ledger index, matches as a once effect, city
//! names normalised in keys) against the Rust job board: the same stack,
//! the demo through both ends ends in the same table attribute for
//! attribute (the clock's attributes aside), the same `verify` and the
//! same processor writes; the Rust tests' key scenarios (a late close, a
//! rescoring racing requests, a seeker moving, paging past one message)
//! end alike through both ends.

use std::collections::BTreeMap;
use std::path::PathBuf;

use jobstream::local::runtime::Runtime;
use shared::item::{Item, ItemExt};
use shared::metrics::names;

use crate::support::model_env;

pub fn jobboard_file() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../models/jobboard.yaml"
    ))
}

/// Every item of the table by (pk, sk).
pub async fn scan(rt: &Runtime) -> BTreeMap<(String, String), Item> {
    jobstream::tools::verify::scan_all(&rt.dynamodb, &rt.config.table)
        .await
        .expect("scan")
        .into_iter()
        .map(|i| {
            let k = (
                i.s("pk").unwrap_or_default().to_string(),
                i.s("sk").unwrap_or_default().to_string(),
            );
            (k, i)
        })
        .collect()
}

/// A table with the clock's attributes (a suggestion's generation time
/// and TTL) blanked out.
pub fn normalized(
    t: &BTreeMap<(String, String), Item>,
) -> BTreeMap<(String, String), BTreeMap<String, String>> {
    t.iter()
        .map(|(k, i)| {
            let attrs = i
                .iter()
                .map(|(a, v)| {
                    let v = match a.as_str() {
                        "generatedAt" | "ttl" => "T".to_string(),
                        _ => format!("{v:?}"),
                    };
                    (a.clone(), v)
                })
                .collect();
            (k.clone(), attrs)
        })
        .collect()
}

#[test]
fn the_jobboard_file_declares_what_the_rust_model_deploys() {
    shared::file::check(&jobboard_file()).expect("checks");
    let rust = shared::models::find("jobboard").expect("registered");
    let file = shared::models::load(&shared::models::Source::File(jobboard_file())).expect("loads");
    assert_eq!(file.table, rust.table);
    assert_eq!(file.queues(), rust.queues());
    assert_eq!(file.stream_defs(), rust.stream_defs());
    assert_eq!(file.queue_defs(), rust.queue_defs());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_jobboard_demo_through_both_ends_gives_the_same_table_verify_and_writes() {
    let demo = shared::models::find("jobboard")
        .expect("registered")
        .demo
        .expect("jobboard demo");
    let mut out = Vec::new();
    for file in [false, true] {
        let mut env = model_env("jobboard", |o| {
            o.queue_concurrency = Some(1);
            o.drain_in_phases = true;
            if file {
                o.model_file = Some(jobboard_file());
            }
        })
        .await;
        let diffs = demo(&mut env.rt).await.expect("demo runs");
        assert!(diffs.is_empty(), "file={file}: {diffs:#?}");
        let report = env.rt.verify().await.expect("verify");
        assert!(report.is_clean(), "file={file}: {:#?}", report.problems);
        let records = env
            .rt
            .stream_processor("derive")
            .metrics()
            .get(names::PROCESSED);
        eprintln!(
            "file={file}: {records} stream records, {} processor writes (condition checks included)",
            env.rt.processor_writes()
        );
        out.push((
            scan(&env.rt).await,
            records,
            report.problems.len(),
            report.bad_input.len(),
        ));
        env.engine.stop().await;
    }
    let (rust, file) = (&out[0], &out[1]);
    assert!(rust.0.len() > 10, "{}", rust.0.len());
    assert_eq!(
        normalized(&file.0),
        normalized(&rust.0),
        "the same items, attribute for attribute (the clock aside)"
    );
    // Every write to the table is one stream record: the same writes. (The
    // processors' billed actions differ: a file's delete is guarded by the
    // facts as read, the Rust one by every fact of the pair.)
    // The demo's writes, one each: 12 by the application (2 employers, 4
    // jobs, 3 seekers, a request, its approval, a close), 8 GSI1 keys (4
    // jobs, 3 seekers, the request), 4 suggestions, the requested pair's
    // suggestion deleted, the match, the closed job's 2 suggestions
    // deleted. The Rust twin writes as many or, when a job's and a
    // seeker's scopes race in one batch, rewrites a suggestion (29 or 30
    // measured): never fewer.
    assert_eq!(file.1, 28, "each write once");
    assert!(file.1 <= rust.1, "file {} > rust {}", file.1, rust.1);
    // Both clean. (The Rust `verify` also counts the match's GSI1 keys as a
    // projection it checked, 9 items to the file's 8: the file writes them
    // with the match in its once transaction, a processor item.)
    assert_eq!(file.2, rust.2, "the same verify findings");
    assert_eq!(file.3, rust.3, "the same bad input");
}
