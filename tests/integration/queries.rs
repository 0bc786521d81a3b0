//! Declared access patterns (`queries:`, SPEC §8) run through `jobstream
//! query`'s library function against what the processors maintained: the
//! seeds' scenarios (every query's items, in order), a filter (the Pick'Em
//! `attribute_not_exists(belongsto) OR belongsto = :u`), a limit, results
//! over many pages, and the structured errors; the binary as a user runs it.

use jobstream::local::runtime::Runtime;
use jobstream::tools::query::{prepare, query};
use shared::file::query_run::{Outcome, QueryError};
use shared::file::scenario::{play_model, Scenario};
use shared::file::FileModel;
use shared::item::{Item, ItemExt};

use crate::items::{assert_clean, sks};
use crate::support::{jobstream as run, model_env, shipped};

const ORG: &str = "01HXAA0000000000000000000A";

/// Query `name` of `m` with `args` (`param=value`) on `rt`'s table, `page`
/// items per request.
async fn ask(
    rt: &Runtime,
    m: &FileModel,
    name: &str,
    args: &[impl AsRef<str>],
    page: Option<i32>,
) -> Result<Outcome, QueryError> {
    let args: Vec<String> = args.iter().map(|a| a.as_ref().to_string()).collect();
    query(&rt.dynamodb, &rt.config.table, m, name, &args, page).await
}

/// Plays a shipped model's scenario file through the file's runtime, then
/// every query the scenario names against what the processors made.
pub(crate) async fn play_shipped(model: &str) -> crate::support::ModelEnv {
    let file = shipped(&format!("{model}.yaml"));
    let loaded = shared::file::load(&file).expect("the model file loads");
    let scenario =
        Scenario::read(&shipped(&format!("{model}.scenario.yaml"))).expect("the scenario reads");
    assert!(scenario.query_count() >= 3, "the scenario runs queries");
    let mut env = model_env(model, |o| o.model_file = Some(file.clone())).await;
    let diffs = play_model(&mut env.rt, &scenario, &loaded.model, false)
        .await
        .expect("plays");
    assert!(diffs.is_empty(), "{model}: {diffs:#?}");
    assert_clean(&env.rt).await;
    env
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hr_access_patterns_return_what_the_scenario_implies() {
    let env = play_shipped("hr").await;
    let m = &shared::file::load(&shipped("hr.yaml"))
        .expect("loads")
        .model;
    assert_eq!(m.queries.len(), 13, "AP1-AP12, AP9 in two steps");
    let client = &env.rt.dynamodb;
    // AP3 one item per page: the same items, in the same order, over
    // more than one page.
    let whole = ask(&env.rt, m, "employees", &[&format!("org={ORG}")], None)
        .await
        .expect("runs");
    let paged = ask(&env.rt, m, "employees", &[&format!("org={ORG}")], Some(1))
        .await
        .expect("runs");
    assert_eq!(whole.items.len(), 6);
    assert!(paged.pages >= 6, "one item per page: {} pages", paged.pages);
    assert_eq!(sks(&paged.items), sks(&whole.items));
    assert_eq!(
        whole.items[1].s("firstName").ok(),
        Some("Gina"),
        "latest hire first"
    );
    // The email index lower-cases any parameter's case.
    let by_email = ask(
        &env.rt,
        m,
        "employees_by_email",
        &["email=BOB@Acme.Co"],
        None,
    )
    .await
    .expect("runs");
    let names: Vec<&str> = by_email
        .items
        .iter()
        .map(|i| i.s("firstName").unwrap_or_default())
        .collect();
    assert_eq!(names, ["Bob", "Alex"]);
    // Usage errors name what is wrong, before any request.
    let e = ask(&env.rt, m, "open_job", &[&format!("org={ORG}")], None)
        .await
        .expect_err("unknown");
    assert!(e.is_usage());
    assert!(e.to_string().contains("did you mean `open_jobs`"), "{e}");
    let e = ask(&env.rt, m, "employee", &[&format!("org={ORG}")], None)
        .await
        .expect_err("missing");
    assert!(
        matches!(e, QueryError::Missing { ref param, .. } if param == "emp"),
        "{e}"
    );
    let e = ask(&env.rt, m, "employees", &["org=not-a-ulid"], None)
        .await
        .expect_err("invalid");
    assert!(e.to_string().contains("not a ULID"), "{e}");
    // DynamoDB's own refusal is not a usage error.
    let e = query(
        client,
        "no-such-table",
        m,
        "employees",
        &[format!("org={ORG}")],
        None,
    )
    .await
    .expect_err("no table");
    assert!(!e.is_usage(), "{e}");
    assert!(e.to_string().contains("no-such-table"), "{e}");

    // The binary: every access pattern by the model's name, the listing,
    // a run against the engine as JSON, exit 2.
    every_access_pattern_through_the_binary("hr", &env).await;
    let hr = shipped("hr.yaml");
    let hr = hr.to_str().expect("utf-8 path");
    let list = run(&["query", "--model", "hr"]);
    assert!(list.status.success(), "{list:?}");
    let text = String::from_utf8_lossy(&list.stdout).to_string();
    assert!(
        text.lines()
            .any(|l| l.starts_with("employee org=ulid emp=ulid  [table]")),
        "{text}"
    );
    let endpoint = env.engine.endpoint();
    let org = format!("org={ORG}");
    let on_the_engine = |rest: &[&str]| {
        let mut all = vec!["query", "--model-file", hr, "--endpoint", &endpoint];
        all.extend_from_slice(rest);
        run(&all)
    };
    let out = on_the_engine(&["--json", "--page-size", "2", "open_jobs", &org]);
    assert!(out.status.success(), "{out:?}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(json, serde_json::json!([]), "the closed posting left AP8");
    let out = on_the_engine(&["departments", &org]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(text.contains("People Ops"), "{text}");
    assert!(text.ends_with("(3 items, 1 page)\n"), "{text}");
    let out = on_the_engine(&["employee", &org]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(err.contains("missing parameter `emp`"), "{err}");
    let out = run(&["query", "--model-file", hr, "departmens"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("did you mean `departments`"),
        "{out:?}"
    );
    env.engine.stop().await;
}

/// `jobstream query --model NAME QUERY param=value... --json` (the binary,
/// the shipped model by its name) for every access pattern the model
/// declares, with the parameters its scenario last runs it with: each
/// answers (exit 0) with exactly what the library returns on the table the
/// scenario left. Every declared query is in the scenario.
async fn every_access_pattern_through_the_binary(model: &str, env: &crate::support::ModelEnv) {
    let m = &shared::file::load(&shipped(&format!("{model}.yaml")))
        .expect("loads")
        .model;
    let scenario =
        Scenario::read(&shipped(&format!("{model}.scenario.yaml"))).expect("the scenario reads");
    let mut params = std::collections::BTreeMap::new();
    for step in scenario.all_steps() {
        for q in step.queries {
            let args: Vec<String> = q.args().iter().map(|(k, v)| format!("{k}={v}")).collect();
            params.insert(q.query.clone(), args);
        }
    }
    let endpoint = env.engine.endpoint();
    for decl in &m.queries {
        let args = params
            .get(&decl.name)
            .unwrap_or_else(|| panic!("{model}: the scenario runs `{}`", decl.name));
        let mut argv = vec!["query", "--model", model, "--endpoint", &endpoint, "--json"];
        argv.push(&decl.name);
        argv.extend(args.iter().map(String::as_str));
        let out = run(&argv);
        assert!(out.status.success(), "{argv:?}: {out:?}");
        let got: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let want = ask(&env.rt, m, &decl.name, args, None).await.expect("runs");
        assert_eq!(
            got,
            shared::file::query_run::to_json(&want.items),
            "{argv:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_social_access_patterns_return_what_the_scenario_implies() {
    let env = play_shipped("social").await;
    let m = &shared::file::load(&shipped("social.yaml"))
        .expect("loads")
        .model;
    assert_eq!(m.queries.len(), 7, "the seed's seven");
    let followers = ask(&env.rt, m, "followers", &["user=star"], Some(2))
        .await
        .expect("runs");
    assert_eq!(followers.items.len(), 153, "three users and 150 fans");
    assert!(followers.pages >= 77, "{} pages", followers.pages);
    // The binary: every access pattern by the model's name.
    every_access_pattern_through_the_binary("social", &env).await;
    env.engine.stop().await;
}

/// The league's event listing (tests/scenarios/league/; what each query
/// returns: that scenario file, played here) over pages: the same items
/// in the same order two a page, a limited query that stops reading once
/// the limit is reached; parameter errors named before any request; a
/// scenario's expectations the items do not meet, each named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_listing_over_pages_and_its_errors() {
    let scenario = "league/a_filter_a_limit_and_pages_answer_an_event_listing.yaml";
    let mut env = crate::items::play_scenario(scenario, |_| {}).await;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/league");
    let m = &shared::file::load(&dir.join("league.yaml"))
        .expect("loads")
        .model;
    // The scenario's answers, two items a page.
    let args = ["event=e1".to_string(), "user=u3".to_string()];
    let paged = ask(&env.rt, m, "event", &args, Some(2))
        .await
        .expect("runs");
    let want = ["MATCH#m1", "MATCH#m2", "MATCH#m3", "EVENT#e1"];
    assert_eq!(sks(&paged.items), want, "the same items over pages");
    assert!(paged.pages >= 4, "8 items 2 a page: {} pages", paged.pages);
    let top = ask(&env.rt, m, "top", &["event=e1"], Some(2))
        .await
        .expect("runs");
    let users: Vec<&str> = top.items.iter().filter_map(|i| i.s("PK").ok()).collect();
    assert_eq!(users, ["USER#u2", "USER#u5", "USER#u3"]);
    assert_eq!(top.pages, 2, "stops once the limit is reached");
    let e = prepare(
        m,
        "scores_between",
        &["event=e1".into(), "low=x".into(), "high=1".into()],
    )
    .expect_err("an int");
    assert!(e.to_string().contains("`low`"), "{e}");
    let e = prepare(
        m,
        "event",
        &["event=e1".into(), "user=u1".into(), "usr=u2".into()],
    )
    .expect_err("unknown parameter");
    assert!(e.to_string().contains("did you mean `user`"), "{e}");
    let e = prepare(m, "event", &["event=e1".into(), "user".into()]).expect_err("syntax");
    assert!(e.to_string().contains("is not `param=value`"), "{e}");

    // A scenario's expectations that the items do not meet: each named.
    let wrong = Scenario::parse(
        "queries:\n  - query: top\n    params: { event: e1 }\n    expect:\n      - { PK: \"USER#u5\" }\n      - { PK: \"USER#u2\" }\n  - query: event\n    params: { event: e1, user: u9 }\n    expect: []\n  - query: nope\n",
        "wrong.scenario.yaml",
    )
    .expect("reads");
    let diffs = play_model(&mut env.rt, &wrong, m, false)
        .await
        .expect("plays");
    assert_eq!(diffs.len(), 5, "{diffs:#?}");
    assert!(
        diffs[0].starts_with("query top(event=e1): 3 item(s), expected 2"),
        "{}",
        diffs[0]
    );
    assert!(
        diffs[1].contains("item 1: `PK` is USER#u2, expected USER#u5"),
        "{}",
        diffs[1]
    );
    assert!(
        diffs[2].contains("item 2: `PK` is USER#u5, expected USER#u2"),
        "{}",
        diffs[2]
    );
    assert!(
        diffs[3].starts_with("query event(event=e1, user=u9): 3 item(s), expected 0"),
        "{}",
        diffs[3]
    );
    assert!(diffs[4].contains("unknown query `nope`"), "{}", diffs[4]);
    env.engine.stop().await;
}

/// The library's queries (models/examples/library.yaml; what they return:
/// a scenario file) refuse a time that is no ISO-8601 time and a state
/// outside their enum, naming the parameter.
#[test]
fn the_library_queries_refuse_bad_parameters() {
    let m = &shared::file::load(&shipped("examples/library.yaml"))
        .expect("loads")
        .model;
    let e = prepare(m, "open_loans_since", &["since=yesterday".into()]).expect_err("not a time");
    assert!(e.to_string().contains("ISO-8601"), "{e}");
    let args = ["member=ann".into(), "state=lost".into()];
    let e = prepare(m, "member_loans", &args).expect_err("enum");
    assert!(e.to_string().contains("`state`"), "{e}");
}

#[test]
fn check_model_places_a_query_mistake() {
    let text = std::fs::read_to_string(shipped("hr.yaml")).expect("reads");
    let broken = text.replacen(
        "index: GSI1\n    params: { org: ulid }",
        "index: GSI2\n    params: { org: ulid }",
        1,
    );
    assert_ne!(broken, text, "the mistake is seeded");
    let line = broken
        .lines()
        .position(|l| l.contains("GSI2"))
        .expect("line")
        + 1;
    let path = crate::support::temp_model("hr", &broken);
    let out = run(&["check-model", path.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let place = format!(
        "{}:{line}:12: query `open_jobs`: unknown index `GSI2` (did you mean `GSI1`?)",
        path.display()
    );
    assert!(
        text.lines().any(|l| l.starts_with(&place)),
        "{place}\n{text}"
    );
}

/// The tracker's access patterns (`models/tracker.yaml`) after its
/// scenario: the sparse GSI2, GSI1 by status, a history newest first, the
/// stages, META/COUNT and a deleted application's empty partition, each
/// compared by the scenario file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tracker_access_patterns_return_what_the_scenario_implies() {
    let env = play_shipped("tracker").await;
    // The binary, by the model's name, each access pattern as JSON.
    let endpoint = env.engine.endpoint();
    let ask = |args: &[&str]| -> Vec<serde_json::Value> {
        let mut all = vec![
            "query",
            "--model",
            "tracker",
            "--endpoint",
            &endpoint,
            "--json",
        ];
        all.extend_from_slice(args);
        let out = run(&all);
        assert!(out.status.success(), "{args:?}: {out:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        v.as_array().expect("a list").clone()
    };
    let field = |items: &[serde_json::Value], a: &str| -> Vec<serde_json::Value> {
        items.iter().map(|i| i[a].clone()).collect()
    };
    let app = ask(&["application", "id=acme"]);
    assert_eq!(field(&app, "SK")[0], "APP#acme", "the application first");
    assert_eq!(
        app.len(),
        1 + 1 + 8,
        "the application, its stage, 8 entries"
    );
    assert_eq!(
        field(&ask(&["stages", "id=acme"]), "name"),
        ["Phone screen"]
    );
    let history = ask(&["history", "id=initech"]);
    assert_eq!(field(&history, "sequence"), [3, 2, 1], "newest first");
    assert_eq!(
        field(
            &ask(&["by_status", "status=unsubmitted", "archived=1"]),
            "companyName"
        ),
        ["Globex"]
    );
    assert_eq!(
        field(&ask(&["active"]), "companyName"),
        ["Acme", "Initech"],
        "latest update first"
    );
    assert_eq!(field(&ask(&["count"]), "count"), [2]);
    env.engine.stop().await;
}

/// The Pick'Em access patterns (`models/pickem.yaml`, the seed's five)
/// after the Pick'Em scenario (the compiled demo's): events newest first,
/// standings highest first, an event listing with one user's predictions
/// only (the seed's `attribute_not_exists(belongsto) OR belongsto = :u`
/// filter), the event's scores highest first, and a user's partition; each
/// through the binary (`jobstream query --model pickem NAME ...`) as well.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pickem_access_patterns_answer_the_seeds_screens() {
    let file = shipped("pickem.yaml");
    let m = &shared::file::load(&file).expect("loads").model;
    assert_eq!(m.queries.len(), 5, "the seed's five access patterns");
    let env = play_shipped("pickem").await;
    every_access_pattern_through_the_binary("pickem", &env).await;
    let run = |name: &'static str, args: Vec<String>| {
        let rt = &env.rt;
        async move {
            ask(rt, m, name, &args, Some(7))
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}"))
                .items
        }
    };
    let events = run("events", vec![]).await;
    assert!(events.len() >= 2, "{} events", events.len());
    let event_sks = sks(&events);
    let mut newest_first = event_sks.clone();
    newest_first.sort();
    newest_first.reverse();
    assert_eq!(event_sks, newest_first, "events newest first");
    // The newest event: its id from its sort key EVENT#<date>#<slug>.
    let sk = &event_sks[0];
    let rest = sk.strip_prefix("EVENT#").expect("an event's sort key");
    let (date, slug) = rest.split_once('#').expect("date#slug");
    let event = format!("{date}-{slug}");
    let year = &date[..4];
    let points = |items: &[Item]| -> Vec<i64> {
        items.iter().filter_map(|i| i.i64("points").ok()).collect()
    };
    let standings = run("standings", vec![format!("year={year}")]).await;
    assert!(!standings.is_empty(), "standings of {year}");
    let pts = points(&standings);
    assert!(
        pts.windows(2).all(|w| w[0] >= w[1]),
        "highest first: {pts:?}"
    );
    let scores = run("event_scores", vec![format!("event={event}")]).await;
    let predictions: Vec<Item> = scores
        .iter()
        .filter(|i| i.s("type").ok() == Some("prediction"))
        .cloned()
        .collect();
    assert!(predictions.len() >= 2, "several predictions of {event}");
    let pts = points(&predictions);
    assert!(
        pts.windows(2).all(|w| w[0] >= w[1]),
        "highest first: {pts:?}"
    );
    let user = predictions[0]
        .s("belongsto")
        .expect("a prediction belongs to a user")
        .strip_prefix("USER#")
        .expect("USER#<user>")
        .to_string();
    let listing = run(
        "event_predictions",
        vec![format!("event={event}"), format!("user={user}")],
    )
    .await;
    let mine: Vec<&Item> = listing
        .iter()
        .filter(|i| i.contains_key("belongsto"))
        .collect();
    assert_eq!(mine.len(), 1, "that user's prediction only");
    assert_eq!(
        mine[0].s("belongsto").ok(),
        Some(format!("USER#{user}").as_str())
    );
    assert!(
        listing.iter().any(|i| i.s("type").ok() == Some("event"))
            && listing.iter().any(|i| i.s("type").ok() == Some("match")),
        "the event and its matches pass the filter"
    );
    assert_eq!(
        listing.len(),
        scores.len() - predictions.len() + 1,
        "everything but the other users' predictions"
    );
    let details = run("user", vec![format!("user={user}")]).await;
    assert!(details
        .iter()
        .all(|i| i.s("PK").ok() == Some(format!("USER#{user}").as_str())));
    assert!(details
        .iter()
        .any(|i| i.s("type").ok() == Some("standings")));
    env.engine.stop().await;
}

/// The job board's scenario (models/jobboard.scenario.yaml, the compiled
/// demo's) through `models/jobboard.yaml`: every access pattern returns
/// what it implies (cities written in any case read by their normalised
/// key), by the library and by `jobstream query --model jobboard`; the
/// sixth, creating a job that exists, refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_jobboard_access_patterns_return_what_the_scenario_implies() {
    let env = play_shipped("jobboard").await;
    let m = &shared::file::load(&shipped("jobboard.yaml"))
        .expect("loads")
        .model;
    assert_eq!(
        m.queries.len(),
        6,
        "the seed's five queries and an employer's matches"
    );
    for city in ["Montreal", " montreal ", "MONTREAL"] {
        let jobs = ask(&env.rt, m, "jobs_by_city", &[format!("city={city}")], None)
            .await
            .expect("runs");
        assert_eq!(jobs.items.len(), 3, "{city:?}");
    }
    // The binary: every access pattern by the model's name.
    every_access_pattern_through_the_binary("jobboard", &env).await;
    // The sixth access pattern, creating a job that exists, is refused by
    // its condition.
    assert!(env.rt.failed_batches().is_empty());
    let w = crate::seed_items::jobboard::Writer::new(env.rt.dynamodb.clone(), &env.rt.config.table);
    let again = w.create_job(&crate::seed_items::jobboard::jobs()[2]).await;
    let refused = again
        .as_ref()
        .is_err_and(|e| e.contains("ConditionalCheckFailed"));
    assert!(refused, "creating j3 again: {again:?}");
    env.engine.stop().await;
}
