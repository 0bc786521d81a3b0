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
    // What `jobstream tables --model-file models/jobboard.yaml` prints for
    // the stack: the Rust model's definition but for its name.
    let named = |m: shared::models::Model| {
        let mut v = jobstream::tools::deploy::definitions_of(&[m]);
        v["defaultModel"] = serde_json::Value::Null;
        for m in v["models"].as_array_mut().expect("models") {
            m["name"] = serde_json::Value::Null;
            m["about"] = serde_json::Value::Null;
        }
        v
    };
    let reloaded =
        shared::models::load(&shared::models::Source::File(jobboard_file())).expect("loads");
    let rust = named(rust);
    assert_eq!(named(reloaded), rust);
    crate::recorded::check("jobboard-deploys", &rust);
}

/// A table as JSON with the clock's attributes blanked and every day of
/// the last 60 written as `D-<n>` (the recordings are of any day).
pub fn dated_json(t: &BTreeMap<(String, String), Item>) -> serde_json::Value {
    let by_key = t
        .iter()
        .map(|(k, i)| {
            let mut attrs: BTreeMap<String, aws_sdk_dynamodb::types::AttributeValue> =
                i.clone().into_iter().collect();
            for a in ["generatedAt", "ttl"] {
                if attrs.contains_key(a) {
                    attrs.insert(a.into(), shared::item::s("T"));
                }
            }
            (k.clone(), attrs)
        })
        .collect();
    dated(crate::recorded::table_json(&by_key))
}

/// `v` with every day of the last 60 written as `D-<n>`.
pub fn dated(v: serde_json::Value) -> serde_json::Value {
    let mut text = v.to_string();
    for n in 0..=60 {
        let day = (chrono::Utc::now().date_naive() - chrono::Duration::days(n)).to_string();
        text = text.replace(&day, &format!("D-{n}"));
    }
    serde_json::from_str(&text).expect("json")
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
    let recorded = serde_json::json!({
        "table": dated_json(&rust.0),
        "problems": rust.2,
        "badInput": rust.3,
    });
    crate::recorded::check("jobboard-demo", &recorded);
    // The shipped scenario through the file ends in the same table.
    let env = crate::queries::play_shipped("jobboard").await;
    let played = scan(&env.rt).await;
    assert_eq!(
        dated_json(&played),
        recorded["table"],
        "the scenario's table is the Rust demo's"
    );
    env.engine.stop().await;
}

/// One end of the workload below: its table, its verify findings, its bad
/// input, after faults, races and a redelivery of the whole stream.
async fn board_under_faults(file: bool) -> (BTreeMap<(String, String), Item>, usize, usize) {
    use jobstream::faults::Fault;
    use shared::models::jobboard::writer::{days_ago, JobBoardWriter, NewJob};
    let end = if file { "file" } else { "rust" };
    let (env, proxy) = crate::support::model_env_behind_proxy("jobboard", |o| {
        if file {
            o.model_file = Some(jobboard_file());
        }
    })
    .await;
    let crate::support::ModelEnv { engine, rt } = env;
    let w = JobBoardWriter::new(rt.dynamodb.clone(), &rt.config.table);
    let cities = ["Montreal", "New York"];
    let skills: [&[&str]; 3] = [&["aws", "rust"], &["go", "k8s"], &["rust"]];
    let jobs: std::sync::Arc<Vec<NewJob<'static>>> = (0..8)
        .map(|i| NewJob {
            job_id: ["j0", "j1", "j2", "j3", "j4", "j5", "j6", "j7"][i],
            employer_id: ["e1", "e2"][i % 2],
            city: cities[i % 2],
            posted_at: days_ago(i as i64 * 3),
            zip: ["H2X", "10001"][i % 2],
            title: "Engineer",
            skills: skills[i % 3],
            category: "tech",
            salary_max: 100_000 + 10_000 * i as i64,
        })
        .collect::<Vec<_>>()
        .into();
    let seekers: Vec<String> = (0..16).map(|i| format!("s{i:02}")).collect();
    w.employer("e1", "Acme").await.unwrap();
    w.employer("e2", "Globex").await.unwrap();
    // Faults on every kind of call the processors make, some after the
    // request took effect (its answer lost).
    proxy.inject(Fault::throttle("TransactWriteItems", 3).after(2));
    proxy.inject(Fault::server_error("TransactWriteItems", 2).after(8));
    proxy.inject(
        Fault::server_error("TransactWriteItems", 1)
            .after(5)
            .after_effect(),
    );
    proxy.inject(Fault::server_error("UpdateItem", 2).after(3));
    proxy.inject(Fault::reset("UpdateItem", 1).after(4).after_effect());
    proxy.inject(Fault::throttle("BatchGetItem", 2).after(1));
    proxy.inject(Fault::server_error("Query", 2).after(3));
    let bg = crate::support::run_in_background(rt);
    // Jobs posted, one closed, one re-posted with other skills; seekers
    // signing up in either city (written as people type them), half of
    // them moving to the other; requests and approvals; all at once.
    let job_writer = {
        let (w, jobs) = (w.clone(), jobs.clone());
        tokio::spawn(async move {
            for j in jobs.iter() {
                w.create_job(j).await.unwrap();
            }
            w.close_job(&jobs[1]).await.unwrap();
            let mut j2 = jobs[2].item();
            j2.insert(
                "skills".into(),
                aws_sdk_dynamodb::types::AttributeValue::Ss(vec!["go".into(), "rust".into()]),
            );
            w.put(j2).await.unwrap();
        })
    };
    let seeker_writer = {
        let (w, seekers) = (w.clone(), seekers.clone());
        tokio::spawn(async move {
            let typed = ["Montreal", " new  york ", "MONTREAL", "New York"];
            for (i, s) in seekers.iter().enumerate() {
                w.seeker(s, "S", typed[i % 4], skills[i % 3], 105_000, &["tech"])
                    .await
                    .unwrap();
            }
            for (i, s) in seekers.iter().enumerate().step_by(2) {
                w.seeker(s, "S", typed[(i + 1) % 4], skills[(i + 1) % 3], 95_000, &[])
                    .await
                    .unwrap();
            }
        })
    };
    let requester = {
        let (w, jobs) = (w.clone(), jobs.clone());
        tokio::spawn(async move {
            for (i, j) in jobs.iter().enumerate().take(6) {
                let s = format!("s{:02}", i + 1);
                w.request(j, &s, &days_ago(0)).await.unwrap();
                if i % 2 == 0 {
                    w.set_request_status(j.employer_id, j.job_id, &s, "approved", &days_ago(0))
                        .await
                        .unwrap();
                }
            }
        })
    };
    for t in [job_writer, seeker_writer, requester] {
        t.await.expect("writer");
    }
    let mut rt = bg.stop().await;
    rt.drain().await.expect("drain");
    assert!(proxy.injected() > 0, "{end}: faults were injected");
    proxy.clear();
    let want = scan(&rt).await;
    // The whole stream delivered again (at-least-once): nothing changes.
    let records = crate::support::records_of(&engine, &rt).await;
    let event: aws_lambda_events::event::dynamodb::Event =
        serde_json::from_value(serde_json::json!({ "Records": records })).expect("event");
    let resp = rt
        .stream_processor("derive")
        .handle(event)
        .await
        .expect("handled");
    assert!(resp.batch_item_failures.is_empty(), "{end}");
    rt.drain().await.expect("drain");
    assert_eq!(scan(&rt).await, want, "{end}: redelivery changes nothing");
    let report = rt.verify().await.expect("verify");
    assert!(report.is_clean(), "{end}: {:#?}", report.problems);
    use shared::models::Harness as _;
    let dead = rt.dead_letters().await.expect("dead letters");
    assert!(dead.is_empty(), "{end}: dead letters: {dead:?}");
    assert!(rt.failed_batches().is_empty(), "{end}");
    let out = (want, report.problems.len(), report.bad_input.len());
    engine.stop().await;
    out
}

/// `--model-file models/jobboard.yaml` behaves as `--model jobboard` under
/// concurrent writers (seekers moving between cities typed in any case,
/// jobs closing and rescored, requests and approvals), faults and the
/// whole stream redelivered: the same table, attribute for attribute (the
/// clock aside), both exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn races_faults_and_redelivery_end_alike_through_both_ends() {
    let rust = board_under_faults(false).await;
    let file = board_under_faults(true).await;
    let suggestions = |t: &BTreeMap<(String, String), Item>| {
        t.keys().filter(|(_, sk)| sk.starts_with("s#")).count()
    };
    assert!(suggestions(&rust.0) > 10, "{}", suggestions(&rust.0));
    assert!(
        rust.0.keys().any(|(pk, _)| pk == "job#new-york"),
        "cities normalised"
    );
    let matches = |t: &BTreeMap<(String, String), Item>| {
        t.values()
            .filter(|i| i.s("entityType").ok() == Some("match"))
            .count()
    };
    assert_eq!(matches(&rust.0), 3, "each approval matched once");
    assert_eq!(
        normalized(&file.0),
        normalized(&rust.0),
        "the same items, attribute for attribute (the clock aside)"
    );
    assert_eq!(file.1, rust.1, "the same verify findings");
    assert_eq!(file.2, rust.2, "the same bad input");
    crate::recorded::check(
        "jobboard-faults",
        &serde_json::json!({
            "table": dated_json(&rust.0),
            "problems": rust.1,
            "badInput": rust.2,
        }),
    );
}

/// Valid writer items of every kind, as the Rust writer writes them.
fn fixtures() -> Vec<Item> {
    use shared::item::s;
    use shared::models::jobboard::demo::jobs;
    let mut jobs = jobs();
    for (j, day) in jobs.iter_mut().zip(["2026-11-01", "2026-10-28", "2026-11-02", "2026-09-18"]) {
        j.posted_at = day.to_string();
    }
    let mut request = jobs[0].item();
    request.clear();
    for (k, v) in [
        ("pk", "employer#e1"),
        ("sk", "r#j1#s1"),
        ("entityType", "request"),
        ("employerId", "e1"),
        ("jobId", "j1"),
        ("seekerId", "s1"),
        ("status", "pending"),
        ("requestedAt", "2026-11-02"),
        ("jobCity", "Montreal"),
        ("jobPostedAt", "2026-11-01"),
        ("jobZip", "H2X"),
    ] {
        request.insert(k.into(), s(v));
    }
    let mut approved = request.clone();
    approved.insert("status".into(), s("approved"));
    approved.insert("approvedAt".into(), s("2026-11-03"));
    let seeker: Item = [
        ("pk", s("seeker#s1")),
        ("sk", s("profile")),
        ("entityType", s("seeker")),
        ("seekerId", s("s1")),
        ("name", s("Ada")),
        ("city", s(" San  Francisco ")),
        (
            "skills",
            aws_sdk_dynamodb::types::AttributeValue::Ss(vec!["rust".into()]),
        ),
        ("desiredSalary", shared::item::n(100_000)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let employer: Item = [
        ("pk", "employer#e1"),
        ("sk", "profile"),
        ("entityType", "employer"),
        ("employerId", "e1"),
        ("name", "Acme"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), s(v)))
    .collect();
    let mut out: Vec<Item> = jobs.iter().map(|j| j.item()).collect();
    out.extend([request, approved, seeker, employer]);
    out
}

/// Each fixture with one thing wrong (or different) at a time.
fn mutations(item: &Item) -> Vec<Item> {
    use shared::item::{n, s};
    let mut out = Vec::new();
    for attr in item.keys().filter(|k| !["pk", "sk"].contains(&k.as_str())) {
        let mut gone = item.clone();
        gone.remove(attr);
        out.push(gone);
        let mut wrong = item.clone();
        wrong.insert(attr.clone(), n(7));
        out.push(wrong);
        let mut text = item.clone();
        text.insert(attr.clone(), s("not-a-value"));
        out.push(text);
    }
    for (attr, v) in [
        ("status", "approved"),
        ("status", "maybe"),
        ("postedAt", "2026-13-01"),
        ("requestedAt", "2026-11-31"),
        ("approvedAt", "yesterday"),
        ("city", "montreal"),
        ("city", "MONTREAL  "),
        ("entityType", "seeker"),
        ("zip", "OTHER"),
    ] {
        let mut i = item.clone();
        i.insert(attr.into(), s(v));
        out.push(i);
    }
    out
}

/// The file's rules and the Rust job board's agree on every fixture and
/// mutation: the same GSI1 keys, bad input alike (a key that does not
/// match its attributes, a missing or mistyped attribute, a date that is
/// not one, an unknown status, a city keyed other than normalised).
#[test]
fn the_file_rules_agree_with_the_rust_job_board_rules_on_fixtures_and_mutations() {
    let rust = shared::models::find("jobboard").expect("registered");
    let file = shared::models::load(&shared::models::Source::File(jobboard_file())).expect("loads");
    let mut cases = 0;
    let mut differ = Vec::new();
    let mut outcomes: BTreeMap<&str, usize> = BTreeMap::new();
    let mut lines = Vec::new();
    for f in fixtures() {
        let mut items = vec![f.clone()];
        items.extend(mutations(&f));
        for item in items {
            cases += 1;
            let show = |p: Result<Option<shared::engine::rules::Projection>, _>| match p {
                Ok(Some(p)) => format!("{:?}", p.attrs),
                Ok(None) => "none".to_string(),
                Err(_) => "bad".to_string(),
            };
            let (a, b) = (
                show(rust.rules.projection(&item)),
                show(file.rules.projection(&item)),
            );
            let outcome = match a.as_str() {
                "bad" => "bad",
                "none" => "none",
                _ => "keys",
            };
            *outcomes.entry(outcome).or_default() += 1;
            let mut sorted: Vec<_> = item.iter().collect();
            sorted.sort_by(|x, y| x.0.cmp(y.0));
            lines.push(format!("{sorted:?} => {a}"));
            if a != b {
                differ.push(format!("{item:?}\n  rust: {a}\n  file: {b}"));
            }
        }
    }
    assert!(cases > 150, "{cases}");
    assert!(outcomes["bad"] > 50, "{outcomes:?}");
    assert!(outcomes["keys"] > 50, "{outcomes:?}");
    assert!(outcomes["none"] > 5, "{outcomes:?}");
    assert!(
        differ.is_empty(),
        "{} of {cases} differ:\n{}",
        differ.len(),
        differ.join("\n")
    );
    lines.sort();
    crate::recorded::check("jobboard-rules", &serde_json::json!(lines));
}
