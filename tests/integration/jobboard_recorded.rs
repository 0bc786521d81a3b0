//! `--model jobboard` (models/jobboard.yaml: suggestions as a join set over
//! a city's seekers listed exactly from a ledger index, matches as a once
//! effect, city names normalised in keys) against what the compiled Rust
//! job board produced before it retired (tests/fixtures/recorded/jobboard-*,
//! recorded while both ran and the file equalled it): the same stack, the
//! demo's table attribute for attribute (the clock's attributes aside) and
//! `verify`, the same table after concurrent writers, faults, races and a
//! redelivery of the whole stream, the same rule outcomes on fixtures and
//! mutations.

use std::collections::BTreeMap;

use shared::item::ItemExt;
use shared::metrics::names;

use crate::recorded::{
    inject_faults, model_file, redelivered, scan, scenario, settled, Play, Table,
};
use crate::support::model_env;

#[test]
fn the_jobboard_deploys_what_the_compiled_model_deployed() {
    crate::recorded::deploys("jobboard");
}

/// A table as JSON with the clock's attributes blanked and every day of
/// the last 60 written as `D-<n>` (the recordings are of any day).
pub fn dated_json(t: &Table) -> serde_json::Value {
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

/// The shipped scenario (the compiled demo's facts; the approval and the
/// close written as whole items) ends in the table and `verify` the
/// compiled demo ended in (attribute for attribute, the clock aside).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_jobboard_scenario_gives_the_recorded_table_verify_and_writes() {
    let play = Play {
        table: Some(dated_json),
        ..Play::all("jobboard")
    };
    scenario(play).await.env.engine.stop().await;
}

/// The compiled demo's writes as its application made them (updates for
/// the approval and the close): the table the scenario ends in, each write
/// once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_jobboard_demo_gives_the_recorded_table_and_writes() {
    use crate::seed_items::jobboard::{days_ago, jobs, Writer};
    let mut env = model_env("jobboard", |o| {
        o.queue_concurrency = Some(1);
        o.drain_in_phases = true;
    })
    .await;
    let w = Writer::new(env.rt.dynamodb.clone(), &env.rt.config.table);
    let jobs = jobs();
    w.employer("e1", "Acme").await.unwrap();
    w.employer("e2", "Globex").await.unwrap();
    for j in &jobs {
        w.create_job(j).await.unwrap();
    }
    w.seeker(
        "s1",
        "Ada",
        "Montreal",
        &["aws", "rust"],
        120_000,
        &["tech"],
    )
    .await
    .unwrap();
    w.seeker("s2", "Bob", "Montreal", &["go"], 100_000, &["tech"])
        .await
        .unwrap();
    w.seeker("s3", "Cy", "Toronto", &["rust"], 140_000, &[])
        .await
        .unwrap();
    env.rt.drain().await.unwrap();
    assert_eq!(w.suggestions_of("s1").await.unwrap(), ["j1 R1"]);
    assert_eq!(w.suggestions_of("s2").await.unwrap(), ["j2 R2", "j1 R3"]);
    assert_eq!(w.suggestions_of("s3").await.unwrap(), ["j3 R1"]);
    w.request(&jobs[1], "s2", &days_ago(0)).await.unwrap();
    env.rt.drain().await.unwrap();
    assert_eq!(w.suggestions_of("s2").await.unwrap(), ["j1 R3"]);
    w.set_request_status("e1", "j2", "s2", "approved", &days_ago(0))
        .await
        .unwrap();
    w.close_job(&jobs[0]).await.unwrap();
    env.rt.drain().await.unwrap();
    let report = settled(&mut env.rt).await;
    assert!(report.bad_input.is_empty(), "{:#?}", report.bad_input);
    let table = dated_json(&scan(&env.rt).await);
    if !crate::recorded::recording() {
        let want = &crate::recorded::recorded("jobboard-scenario")["table"];
        assert_eq!(&table, want, "the table the scenario ends in");
    }
    // Every write to the table is one stream record. The demo's writes,
    // one each: 12 by the application (2 employers, 4 jobs, 3 seekers, a
    // request, its approval, a close), 8 GSI1 keys (4 jobs, 3 seekers, the
    // request), 4 suggestions, the requested pair's suggestion deleted, the
    // match, the closed job's 2 suggestions deleted. (The compiled model
    // wrote 29 or 30: it rewrote a suggestion when a job's and a seeker's
    // scopes raced in one batch.)
    let records = crate::items::metric_of(&env, "derive", names::PROCESSED);
    assert_eq!(records, 28, "each write once");
    env.engine.stop().await;
}

/// The workload below: its table, its verify findings, its bad
/// input, after faults, races and a redelivery of the whole stream.
async fn board_under_faults() -> (Table, usize, usize) {
    use crate::seed_items::jobboard::{days_ago, NewJob, Writer as JobBoardWriter};
    let (env, proxy) = crate::support::model_env_behind_proxy("jobboard", |_| {}).await;
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
    inject_faults(&proxy);
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
    assert!(proxy.injected() > 0, "faults were injected");
    proxy.clear();
    let table = scan(&rt).await;
    redelivered(&engine, &mut rt, &table).await;
    let report = settled(&mut rt).await;
    engine.stop().await;
    (table, report.problems.len(), report.bad_input.len())
}

/// Concurrent writers (seekers moving between cities typed in any case,
/// jobs closing and rescored, requests and approvals), faults and the whole
/// stream redelivered end exact, in the table the compiled model ended in
/// (attribute for attribute, the clock aside).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn races_faults_and_redelivery_end_in_the_recorded_table() {
    let (table, problems, bad_input) = board_under_faults().await;
    let suggestions = table.keys().filter(|(_, sk)| sk.starts_with("s#")).count();
    assert!(suggestions > 10, "{suggestions}");
    assert!(
        table.keys().any(|(pk, _)| pk == "job#new-york"),
        "cities normalised"
    );
    let matches = table
        .values()
        .filter(|i| i.s("entityType").ok() == Some("match"))
        .count();
    assert_eq!(matches, 3, "each approval matched once");
    crate::recorded::check(
        "jobboard-faults",
        &serde_json::json!({
            "table": dated_json(&table),
            "problems": problems,
            "badInput": bad_input,
        }),
    );
}

/// The job board's rules on every fixture and each variation (every
/// attribute removed, a number, a text; a status, date or city of every
/// kind): the GSI1 keys and bad input (a key that does not match its
/// attributes, a missing or mistyped attribute, a date that is not one, an
/// unknown status, a city keyed other than normalised) the compiled model
/// gave, as recorded (the file equalled them case by case).
#[test]
fn the_rules_on_fixtures_and_mutations_are_the_recorded_ones() {
    crate::recorded::rules("jobboard", crate::recorded::cases("jobboard"));
}

/// The expression of `name:` under the suggestions set's `values:` in
/// models/jobboard.yaml, as written.
fn board_value(name: &str) -> String {
    let text = std::fs::read_to_string(model_file("jobboard")).expect("models/jobboard.yaml");
    let prefix = format!("      {name}: \"");
    let line = text
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("`{name}:` in the suggestions' values"));
    line[prefix.len()..line.len() - 1].to_string()
}

/// The file's relevance (`values: score` and `relevance` of the
/// suggestions set) equals SPEC §4's function for every combination of
/// skills, categories and salaries, huge and negative ones included (no
/// expression overflows). (The compiled model's unit test proved the same
/// CEL equal to its Rust function before it retired.)
#[test]
fn the_files_relevance_is_the_spec_function_everywhere() {
    use crate::seed_items::jobboard::{level, score};
    use shared::file::expr::{Env, Expr, Val};
    let env = Env::new().expect("env");
    let score_e = Expr::compile(&board_value("score")).expect("score compiles");
    let level_e = Expr::compile(&board_value("relevance")).expect("relevance compiles");
    let skill_sets: &[&[&str]] = &[&[], &["rust"], &["rust", "go"], &["go", "aws", "rust"]];
    let salaries = [
        None,
        Some(0),
        Some(-5),
        Some(100),
        Some(105),
        Some(110),
        Some(111),
        Some(120),
        Some(i64::MAX),
        Some(i64::MAX - 1),
        Some(i64::MAX / 10),
        Some(i64::MIN),
    ];
    let set = |v: &[&str]| {
        let mut v: Vec<String> = v.iter().map(|s| s.to_string()).collect();
        v.sort();
        Val::Set(v)
    };
    let int = |v: Option<i64>| v.map_or(Val::Null, Val::Int);
    let (mut cases, mut suggested) = (0, 0);
    for js in skill_sets {
        for ss in skill_sets {
            for max in salaries {
                for want in salaries {
                    for (cat, cats) in [
                        (None, &[][..]),
                        (Some("tech"), &["tech"][..]),
                        (Some("tech"), &["food"][..]),
                    ] {
                        let vars = [
                            (
                                "job",
                                Val::Map(vec![
                                    ("skills".into(), set(js)),
                                    ("salaryMax".into(), int(max)),
                                    (
                                        "category".into(),
                                        cat.map_or(Val::Null, |c| Val::Str(c.into())),
                                    ),
                                ]),
                            ),
                            (
                                "seeker",
                                Val::Map(vec![
                                    ("skills".into(), set(ss)),
                                    ("desiredSalary".into(), int(want)),
                                    ("categories".into(), set(cats)),
                                ]),
                            ),
                        ];
                        let look = |n: &str| vars.iter().find(|(k, _)| *k == n).map(|(_, v)| v);
                        let points = score(js, max, cat, ss, want, cats);
                        let case =
                            format!("job {js:?} {max:?} {cat:?}, seeker {ss:?} {want:?} {cats:?}");
                        assert_eq!(env.eval(&score_e, look), Ok(Val::Int(points)), "{case}");
                        // Relevance is written for a suggested pair (R3 or better).
                        if let Some(l) = level(points) {
                            assert_eq!(
                                env.eval(&level_e, look),
                                Ok(Val::Int(i64::from(l))),
                                "{case}"
                            );
                            suggested += 1;
                        }
                        cases += 1;
                    }
                }
            }
        }
    }
    assert_eq!(cases, 4 * 4 * 12 * 12 * 3);
    assert!(suggested > 1000 && suggested < cases, "{suggested}");
}
