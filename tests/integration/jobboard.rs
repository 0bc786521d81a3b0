//! The job board against the embedded engine and the local SQS where Rust
//! must look: concurrent approvals and redelivered matches, bad messages
//! and the DLQ, TTL expiry, the fixtures through the handlers, verify and
//! repair, paged scopes, a week of TTL. What its writes imply (relevance,
//! requests and matches, bad input) is proved by the scenario files of
//! tests/scenarios/jobboard/ (scenarios.rs).

use crate::seed_items::jobboard::{
    self as keys, days_ago, job_opened, jobs, match_job, seeker_changed, Writer as JobBoardWriter,
};
use aws_lambda_events::event::sqs::SqsEvent;
use aws_sdk_dynamodb::types::AttributeValue;
use jobstream::local::engine::LocalEngine;
use jobstream::local::runtime::Runtime;
use lambda_runtime::{Context, LambdaEvent};
use shared::item::{n, s, Item, ItemExt};
use shared::metrics::names;

use crate::items::{assert_exact, begins, delete, get, set_job, sqs_event, update, HasRt};

struct Board {
    _engine: LocalEngine,
    rt: Runtime,
    w: JobBoardWriter,
}

impl HasRt for Board {
    fn rt(&self) -> &Runtime {
        &self.rt
    }
}

/// The key `{pk, sk}` (the job board's key names).
fn key(pk: impl Into<String>, sk: impl Into<String>) -> Item {
    [
        (keys::PK.to_string(), s(pk.into())),
        (keys::SK.to_string(), s(sk.into())),
    ]
    .into()
}

impl From<crate::support::ModelEnv> for Board {
    fn from(crate::support::ModelEnv { engine, rt }: crate::support::ModelEnv) -> Self {
        let w = JobBoardWriter::new(rt.dynamodb.clone(), &rt.config.table);
        Board {
            _engine: engine,
            rt,
            w,
        }
    }
}

/// `--model jobboard` (models/jobboard.yaml).
async fn board() -> Board {
    crate::support::model_env("jobboard", |_| {}).await.into()
}

/// What `consumer`'s Lambda handler answers to the SQS event of the
/// fixture `file` (under tests/fixtures/), as JSON.
async fn fixture_through(b: &Board, consumer: &str, file: &str) -> serde_json::Value {
    let path = format!("{}/fixtures/{file}", env!("CARGO_MANIFEST_DIR"));
    let event: SqsEvent = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let event = LambdaEvent::new(event, Context::default());
    let resp = shared::lambda::sqs_handler(&*b.rt.consumer(consumer), event).await;
    serde_json::to_value(resp.unwrap()).unwrap()
}

/// `jobstream demo --model jobboard`, the binary as a user runs it (with
/// the local SQS): the shipped scenario through the shipped file, each
/// access pattern printed and compared, the processors' writes printed,
/// nothing dead-lettered, OK.
#[test]
fn the_demo_plays_the_shipped_scenario_through_the_binary() {
    let text = crate::support::demo_through_the_binary("jobboard");
    assert!(text.contains(": 3 step(s)"), "{text}");
    assert!(!text.contains("bad input (not drift)"), "{text}");
}

/// A suggestion lives a week from its generation: the relevance scenario
/// (a scenario file) played, each suggestion's `ttl` is seven days after
/// the time the processors made it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suggestions_follow_the_relevance_function_with_a_week_of_ttl_and_move_when_rescored() {
    let file = "jobboard/suggestions_follow_the_relevance_function_and_move_when_rescored.yaml";
    let before = chrono::Utc::now().timestamp();
    let env = crate::items::play_scenario(file, |_| {}).await;
    let sug = get(
        &env,
        key(keys::job_pk("Montreal"), keys::suggestion_sk("j1", "s9")),
    )
    .await
    .expect("suggestion exists");
    let ttl = sug.i64("ttl").unwrap();
    let week = 7 * 86400;
    let after = chrono::Utc::now().timestamp();
    assert!((before + week..=after + week).contains(&ttl), "ttl {ttl}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_one_match_per_pair_under_duplicates_redelivery_and_concurrent_approvals() {
    let mut b = board().await;
    let jobs = jobs();
    b.w.employer("e1", "Acme").await.unwrap();
    b.w.create_job(&jobs[0]).await.unwrap();
    b.w.seeker("a", "A", "Montreal", &["aws", "rust"], 100_000, &["tech"])
        .await
        .unwrap();
    b.rt.drain().await.unwrap();
    b.w.request(&jobs[0], "a", &days_ago(1)).await.unwrap();
    b.w.set_request_status("e1", "j1", "a", "approved", &days_ago(1))
        .await
        .unwrap();
    b.rt.drain().await.unwrap();
    // Approved again on another day (pending -> approved): a second match job
    // with another date. Plus the first job redelivered, concurrently.
    b.w.set_request_status("e1", "j1", "a", "pending", &days_ago(0))
        .await
        .unwrap();
    b.w.set_request_status("e1", "j1", "a", "approved", &days_ago(0))
        .await
        .unwrap();
    let body = match_job(&[
        ("employerId", "e1"),
        ("jobId", "j1"),
        ("seekerId", "a"),
        ("jobCity", "Montreal"),
        ("jobPostedAt", &jobs[0].posted_at),
        ("jobZip", "H2X"),
        ("approvedAt", &days_ago(1)),
    ]);
    let event = sqs_event(&[body.clone(), body.clone(), body]);
    let matches = b.rt.consumer("matches");
    let (r1, r2) = tokio::join!(
        shared::lambda::sqs_handler(
            &*matches,
            LambdaEvent::new(event.clone(), Context::default())
        ),
        shared::lambda::sqs_handler(&*matches, LambdaEvent::new(event, Context::default())),
    );
    assert!(
        r1.unwrap().batch_item_failures.is_empty() && r2.unwrap().batch_item_failures.is_empty()
    );
    b.rt.drain().await.unwrap();
    let matches: Vec<Item> = begins(&b, &keys::seeker_pk("a"), "j#").await;
    assert_eq!(matches.len(), 1, "exactly one match: {matches:?}");
    assert_eq!(matches[0].s("matchedAt").unwrap(), days_ago(1));
    assert!(b.rt.consumer("matches").metrics().get(names::DUPLICATE) >= 6);
    assert!(
        get(
            &b,
            key(keys::job_pk("Montreal"), keys::suggestion_sk("j1", "a"))
        )
        .await
        .is_none(),
        "suggestion gone"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_match_for_a_job_that_no_longer_exists_ends_with_a_logged_outcome() {
    let mut b = board().await;
    let job = match_job(&[
        ("employerId", "e1"),
        ("jobId", "gone"),
        ("seekerId", "a"),
        ("jobCity", "Montreal"),
        ("jobPostedAt", &days_ago(1)),
        ("jobZip", "H2X"),
        ("approvedAt", &days_ago(0)),
    ]);
    let resp = shared::lambda::sqs_handler(
        &*b.rt.consumer("matches"),
        LambdaEvent::new(sqs_event(&[job]), Context::default()),
    )
    .await
    .unwrap();
    assert!(resp.batch_item_failures.is_empty(), "not retried forever");
    assert_eq!(b.rt.consumer("matches").metrics().get(names::SKIPPED), 1);
    assert!(begins(&b, &keys::seeker_pk("a"), "j#").await.is_empty());
    b.rt.drain().await.unwrap();
    assert_eq!(b.rt.dlq_depth("matches").await.unwrap(), 0);
}

/// SPEC §2.7: an unparsable body is bad input whose path is skip-with-log,
/// as retrying cannot help: logged and counted once, deleted, never
/// dead-lettered after 5 receives. A body of another version is the one
/// a retry can help (another deployment of the consumer, during a rollout,
/// reads it): reported failed, dead-lettered after `maxReceiveCount`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_messages_are_skipped_with_a_log_and_another_versions_reach_the_dlq() {
    let mut b = board().await;
    let url = b.rt.queue_url("suggestions").unwrap();
    // The join set's job of a seeker that does not exist (nothing to do),
    // a body of another version and four bodies no build of this version
    // can read.
    let good = seeker_changed("s", "montreal");
    let body: serde_json::Value = serde_json::from_str(&good).unwrap();
    let with = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut b = body.clone();
        f(&mut b);
        b.to_string()
    };
    let bodies = [
        with(&|b| b["version"] = 2.into()),
        with(&|b| {
            b.as_object_mut().unwrap().remove("version");
        }),
        with(&|b| b["bogus"] = 1.into()),
        with(&|b| b["bind"]["seekerId"] = "x".repeat(8 * 1024).into()),
        "not json".to_string(),
        good,
    ];
    for body in &bodies {
        b.rt.sqs
            .as_ref()
            .expect("the job board has queues")
            .send_message()
            .queue_url(&url)
            .message_body(body)
            .send()
            .await
            .unwrap();
    }
    b.rt.drain().await.unwrap();
    assert_eq!(
        b.rt.dlq_depth("suggestions").await.unwrap(),
        1,
        "only the body of another version"
    );
    let consumer = b.rt.consumer("suggestions");
    let m = consumer.metrics();
    // The good message completes (nothing to write: no such job).
    assert_eq!(
        m.get(names::PROCESSED) + m.get(names::DUPLICATE),
        1,
        "the good message"
    );
    // Each bad message is one fact, counted (and logged) once: the one of
    // another version though it is received maxReceiveCount (5) times.
    assert_eq!(m.get(names::BAD_INPUT), 5, "each bad message once");
    assert_eq!(
        m.get(names::FAILED_RECORD),
        5,
        "only the receives of the body of another version reported failed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_suggestion_is_no_user_action() {
    let mut b = board().await;
    let jobs = jobs();
    b.w.create_job(&jobs[0]).await.unwrap();
    b.w.seeker("a", "A", "Montreal", &["aws", "rust"], 100_000, &["tech"])
        .await
        .unwrap();
    b.w.seeker("z", "Z", "Montreal", &["aws", "rust"], 100_000, &["tech"])
        .await
        .unwrap();
    b.rt.drain().await.unwrap();
    // a's suggestion expires.
    let sug = key(keys::job_pk("Montreal"), keys::suggestion_sk("j1", "a"));
    update(&b, sug, "SET #ttl = :past", &[(":past", n(1))]).await;
    b.rt.drain().await.unwrap();
    let writes =
        b.rt.processors
            .store
            .stats()
            .writes
            .load(std::sync::atomic::Ordering::Relaxed);
    let sent = b.rt.consumer("suggestions").metrics().get(names::PROCESSED)
        + b.rt.consumer("suggestions").metrics().get(names::DUPLICATE);
    assert_eq!(b._engine.sweep_ttl().await.unwrap(), 1);
    b.rt.drain().await.unwrap();
    assert!(b.w.suggestions_of("a").await.unwrap().is_empty());
    assert_eq!(
        b.w.suggestions_of("z").await.unwrap(),
        ["j1 R1"],
        "others untouched"
    );
    assert_eq!(
        b.rt.processors
            .store
            .stats()
            .writes
            .load(std::sync::atomic::Ordering::Relaxed),
        writes,
        "no derived write"
    );
    let after = b.rt.consumer("suggestions").metrics().get(names::PROCESSED)
        + b.rt.consumer("suggestions").metrics().get(names::DUPLICATE);
    assert_eq!(after, sent, "no job enqueued");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqs_fixture_through_the_matches_handler() {
    let b = board().await;
    assert_eq!(
        fixture_through(&b, "matches", "sqs-match-job.json").await,
        serde_json::json!({"batchItemFailures": [{"itemIdentifier": "5f3c1c1e-0a52-4d4e-9a49-0c2f1f0d6a02"}]}),
        "the unknown version fails, the other is a logged skip (no such request)"
    );
    assert_eq!(b.rt.consumer("matches").metrics().get(names::SKIPPED), 1);
    assert_eq!(b.rt.consumer("matches").metrics().get(names::BAD_INPUT), 1);
}

/// The board after the shipped scenario (models/jobboard.scenario.yaml):
/// s2 matched with j2, j1 closed, s3's suggestion of j3.
async fn board_after_the_scenario() -> Board {
    crate::queries::play_shipped("jobboard").await.into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_finds_extra_and_wrong_suggestions_and_repairs_them() {
    let b = board_after_the_scenario().await;
    let now = chrono::Utc::now();
    let clean = b.rt.verify().await.unwrap();
    assert!(clean.is_clean(), "{:#?}", clean.problems);
    // An extra suggestion for the matched pair (s2, j2), a wrong level on
    // s3's, a stale GSI1 key on a job.
    let jobs = jobs();
    let j2 = &jobs[1];
    let extra = crate::items::attrs(vec![
        (keys::PK, s(keys::job_pk("Montreal"))),
        (keys::SK, s(keys::suggestion_sk("j2", "s2"))),
        ("entityType", s("suggestion")),
        ("jobId", s("j2")),
        ("seekerId", s("s2")),
        ("GSI1PK", s(keys::seeker_pk("s2"))),
        (
            "GSI1SK",
            s(keys::suggestion_gsi1sk(1, &j2.posted_at, j2.zip, "j2")),
        ),
        ("employerId", s("e1")),
        ("city", s("montreal")),
        ("postedAt", s(&j2.posted_at)),
        ("zip", s(j2.zip)),
        ("title", s(j2.title)),
        ("relevance", n(1)),
        ("score", n(9999)),
        (
            "generatedAt",
            s(now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
        ),
        ("ttl", n(now.timestamp() + 7 * 86400)),
    ]);
    b.w.put(extra).await.unwrap();
    let mut s3 = get(
        &b,
        key(keys::job_pk("Toronto"), keys::suggestion_sk("j3", "s3")),
    )
    .await
    .unwrap();
    s3.insert("relevance".into(), n(3));
    b.w.put(s3).await.unwrap();
    let j3 = key(keys::job_pk("Toronto"), jobs[2].sk());
    update(&b, j3, "SET GSI1PK = :x", &[(":x", s("employer#nobody"))]).await;
    let report = b.rt.verify().await.unwrap();
    assert_eq!(
        report.kinds["suggestions"].extra, 1,
        "{:#?}",
        report.problems
    );
    assert_eq!(report.kinds["suggestions"].wrong, 1);
    assert_eq!(report.kinds["projection"].wrong, 1);
    crate::items::repair(&b.rt, &report).await;
    let after = b.rt.verify().await.unwrap();
    assert!(after.is_clean(), "{:#?}", after.problems);
    assert_eq!(begins(&b, &keys::seeker_pk("s2"), "j#").await.len(), 1);
    // A lost suggestion is found missing and put back.
    delete(
        &b,
        key(keys::job_pk("Toronto"), keys::suggestion_sk("j3", "s3")),
    )
    .await;
    let lost = b.rt.verify().await.unwrap();
    assert_eq!(lost.kinds["suggestions"].missing, 1, "{:#?}", lost.problems);
    crate::items::repair(&b.rt, &lost).await;
    assert_eq!(b.w.suggestions_of("s3").await.unwrap(), ["j3 R1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_match_that_fails_is_redelivered_and_created_exactly_once() {
    let (env, proxy) = crate::support::model_env_behind_proxy("jobboard", |_| {}).await;
    let crate::support::ModelEnv {
        engine: _engine,
        mut rt,
    } = env;
    let w = JobBoardWriter::new(rt.dynamodb.clone(), &rt.config.table);
    let jobs = jobs();
    w.employer("e1", "Acme").await.unwrap();
    w.create_job(&jobs[0]).await.unwrap();
    w.seeker("a", "A", "Montreal", &["aws", "rust"], 100_000, &["tech"])
        .await
        .unwrap();
    w.request(&jobs[0], "a", &days_ago(1)).await.unwrap();
    rt.drain().await.unwrap();
    // The match transaction fails twice (5xx, no retry inside the Lambda):
    // the message comes back after the visibility timeout and succeeds.
    proxy.inject(jobstream::faults::Fault::server_error(
        "TransactWriteItems",
        2,
    ));
    w.set_request_status("e1", "j1", "a", "approved", &days_ago(0))
        .await
        .unwrap();
    rt.drain().await.unwrap();
    assert_eq!(proxy.injected(), 2);
    assert!(rt.consumer("matches").metrics().get(names::FAILED_RECORD) >= 1);
    let matches = begins(&rt, &keys::seeker_pk("a"), "j#").await;
    assert_eq!(matches.len(), 1);
    assert_eq!(rt.dlq_depth("matches").await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqs_fixture_through_the_suggestions_handler() {
    let b = board().await;
    assert_eq!(
        fixture_through(&b, "suggestions", "sqs-suggestion-jobs.json").await,
        serde_json::json!({"batchItemFailures": []}),
        "the message without seekerId is bad input, skipped (SPEC §2.7); the others have nothing to do"
    );
    assert_eq!(
        b.rt.consumer("suggestions").metrics().get(names::BAD_INPUT),
        1
    );
}

/// The triggers' scenario (a scenario file) played, its match lost
/// (deleted by hand, with the pair's marker, as a restore from an older
/// backup would): `verify` finds the approved request without its match,
/// `--repair` makes it (issue 17, defect 3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_match_is_found_by_verify_and_made_by_repair() {
    let file =
        "jobboard/job_board_triggers_follow_their_guards_from_bad_input_and_title_changes.yaml";
    let mut env = crate::items::play_scenario(file, |_| {}).await;
    let matches = begins(&env, &keys::seeker_pk("a"), "j#").await;
    let (pk, sk) = (
        matches[0].s(keys::PK).unwrap(),
        matches[0].s(keys::SK).unwrap(),
    );
    delete(&env, key(pk, sk)).await;
    let marker = shared::engine::once::marker_key("matches", "a#j1");
    let ledger = &env.rt.config.ledger_table;
    env.rt
        .processors
        .store
        .delete_keys(ledger, vec![marker])
        .await
        .unwrap();
    let report = env.rt.verify().await.unwrap();
    let lost = "asks for once `matches`";
    assert!(
        report.problems.iter().any(|p| p.contains(lost)),
        "{:#?}",
        report.problems
    );
    crate::items::repair(&env.rt, &report).await;
    assert_eq!(begins(&env, &keys::seeker_pk("a"), "j#").await.len(), 1);
    env.rt.drain().await.unwrap();
    assert_exact(&mut env.rt).await;
}

/// The jobs of the bad items themselves (after the scenario file where j1
/// and a's profile turn bad), run directly: each completes, counts the bad
/// fact, and a keeps the suggestions its earlier valid state implied
/// (issue 17, defect 7).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_jobs_of_bad_items_complete_and_keep_their_suggestions() {
    let file = "jobboard/a_bad_job_or_profile_keeps_its_suggestions_and_fails_no_job.yaml";
    let mut env = crate::items::play_scenario(file, |_| {}).await;
    let bad = || {
        env.rt
            .consumer("suggestions")
            .metrics()
            .get(names::BAD_INPUT)
    };
    let before = bad();
    let consumer = env.rt.processors.consumer("suggestions").unwrap();
    let job = consumer.set_job.as_ref().unwrap();
    for body in [job_opened(&jobs()[0]), seeker_changed("a", "montreal")] {
        job.run(&body).await.expect("the job completes");
    }
    assert!(bad() >= before + 2, "counted");
    let w = JobBoardWriter::new(env.rt.dynamodb.clone(), &env.rt.config.table);
    assert_eq!(
        w.suggestions_of("a").await.unwrap(),
        ["j1 R1", "j2 R3"],
        "what the earlier valid states implied"
    );
    assert!(env.rt.failed_batches().is_empty());
    assert_exact(&mut env.rt).await;
}

/// A job's and a seeker's suggestion scopes are paged: each message does a
/// bounded amount of work and starts the next page; the pages together
/// make exactly the set (issue 17, defect 5). The city's seekers come from
/// the ledger's exact index, not from GSI1 (defect 6).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_suggestion_scopes_are_paged_and_end_exact() {
    // The file's `page: 100`.
    const SEEKERS_PER_PAGE: usize = 100;
    let mut b = board().await;
    let jobs = jobs();
    b.w.employer("e1", "Acme").await.unwrap();
    let n_seekers = SEEKERS_PER_PAGE * 2 + 7;
    let seekers: Vec<Item> = (0..n_seekers)
        .map(|i| {
            [
                (
                    keys::PK.to_string(),
                    s(keys::seeker_pk(&format!("s{i:03}"))),
                ),
                (keys::SK.to_string(), s(keys::PROFILE_SK)),
                ("entityType".to_string(), s("seeker")),
                ("seekerId".to_string(), s(format!("s{i:03}"))),
                ("name".to_string(), s("S")),
                ("city".to_string(), s("Montreal")),
                (
                    "skills".to_string(),
                    AttributeValue::Ss(vec!["aws".into(), "rust".into()]),
                ),
                ("desiredSalary".to_string(), n(100_000)),
            ]
            .into()
        })
        .collect();
    b.rt.processors
        .store
        .put_items(&b.rt.config.table, seekers)
        .await
        .unwrap();
    b.rt.drain().await.unwrap();
    b.w.create_job(&jobs[0]).await.unwrap();
    // The job's first page: bounded, and the next page is a follow-up.
    let reads = crate::items::reads(&b.rt);
    let suggestions = set_job(&b.rt.model, "suggestions");
    let first = suggestions
        .plan(&job_opened(&jobs[0]), &reads)
        .await
        .unwrap();
    assert_eq!(first.desired.len(), SEEKERS_PER_PAGE);
    assert_eq!(first.then.len() + first.ahead.len(), 1, "the next page");
    b.rt.drain().await.unwrap();
    let all = begins(&b, &keys::job_pk("Montreal"), "s#j1#").await;
    assert_eq!(all.len(), n_seekers, "every page done");
    assert!(b.rt.failed_batches().is_empty());
    assert_exact(&mut b.rt).await;
    // Closing the job removes its suggestions page by page.
    b.w.close_job(&jobs[0]).await.unwrap();
    b.rt.drain().await.unwrap();
    assert!(begins(&b, &keys::job_pk("Montreal"), "s#j1#")
        .await
        .is_empty());
    assert_exact(&mut b.rt).await;
}

/// A job's and a seeker's scopes share their pair's suggestion: run at
/// once (a batch's jobs run concurrently, and so do Lambda's), both read
/// it before either writes. The one that writes second finds it written
/// and writes nothing (each write once: `jobboard_recorded` counts them);
/// a concurrent writer's different item is still overwritten with what the
/// facts imply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_scopes_racing_write_their_shared_suggestion_once() {
    let mut b = board().await;
    let j1 = &jobs()[0];
    b.w.employer("e1", "Acme").await.unwrap();
    b.w.create_job(j1).await.unwrap();
    b.w.seeker(
        "s1",
        "Ada",
        "Montreal",
        &["aws", "rust"],
        120_000,
        &["tech"],
    )
    .await
    .unwrap();
    b.rt.drain().await.unwrap();
    let pair = key(keys::job_pk("Montreal"), keys::suggestion_sk("j1", "s1"));
    assert!(get(&b, pair.clone()).await.is_some(), "suggested");
    // As before either scope ran (the stream is not drained again).
    delete(&b, pair.clone()).await;
    let reads = crate::items::reads(&b.rt);
    let job = set_job(&b.rt.model, "suggestions");
    let writes = || b.rt.processor_writes();
    let plan = |body: String| {
        let (job, reads) = (job.clone(), reads.clone());
        async move { job.plan(&body, &reads).await.expect("plan") }
    };
    let (by_job, by_seeker) = (
        plan(job_opened(j1)).await,
        plan(seeker_changed("s1", "montreal")).await,
    );
    for p in [&by_job, &by_seeker] {
        assert!(p.existing.is_empty() && p.desired.len() == 1, "{p:?}");
    }
    let a = crate::items::apply_plan(job.as_ref(), &reads, &by_job).await;
    assert_eq!(a.puts, 1);
    let first = get(&b, pair.clone()).await.expect("written");
    let before = writes();
    let a = crate::items::apply_plan(job.as_ref(), &reads, &by_seeker).await;
    assert_eq!((a.puts, a.superseded, a.raced), (0, 0, 1), "{a:?}");
    assert_eq!(writes(), before, "nothing written a second time");
    assert_eq!(
        get(&b, pair.clone()).await,
        Some(first),
        "the first one kept"
    );

    // The job closes: both scopes delete the pair's suggestion, once.
    b.w.close_job(j1).await.unwrap();
    let (by_job, by_seeker) = (
        plan(job_opened(j1)).await,
        plan(seeker_changed("s1", "montreal")).await,
    );
    for p in [&by_job, &by_seeker] {
        assert!(p.existing.len() == 1 && p.desired.is_empty(), "{p:?}");
    }
    let a = crate::items::apply_plan(job.as_ref(), &reads, &by_job).await;
    assert_eq!(a.deletes, 1);
    assert!(get(&b, pair.clone()).await.is_none());
    let before = writes();
    let a = crate::items::apply_plan(job.as_ref(), &reads, &by_seeker).await;
    assert_eq!((a.deletes, a.superseded, a.raced), (0, 0, 1), "{a:?}");
    assert_eq!(writes(), before, "nothing deleted a second time");

    // Re-opened: a plan reads the pair absent, then another writer puts
    // something else there: the plan's put still writes what the facts
    // imply (its facts' guards decide, as for any existing item).
    b.w.put(j1.item()).await.unwrap();
    let by_seeker = plan(seeker_changed("s1", "montreal")).await;
    assert_eq!(by_seeker.desired.len(), 1);
    let mut forged = by_seeker.desired[0].item.clone();
    forged.insert("relevance".into(), n(3));
    crate::items::put(&b, forged).await;
    let a = crate::items::apply_plan(job.as_ref(), &reads, &by_seeker).await;
    assert_eq!((a.puts, a.raced), (1, 0), "{a:?}");
    let got = get(&b, pair.clone()).await.expect("written");
    assert_eq!(got["relevance"], n(1));

    // The seeker asks for more (over the job's maximum by under 10 %):
    // both scopes rescore the pair (a lower score, the same level), once.
    b.w.seeker(
        "s1",
        "Ada",
        "Montreal",
        &["aws", "rust"],
        140_000,
        &["tech"],
    )
    .await
    .unwrap();
    let (by_job, by_seeker) = (
        plan(job_opened(j1)).await,
        plan(seeker_changed("s1", "montreal")).await,
    );
    let a = crate::items::apply_plan(job.as_ref(), &reads, &by_job).await;
    assert_eq!(a.puts, 1, "{a:?}");
    let rescored = get(&b, pair.clone()).await.expect("rescored");
    assert_eq!(rescored["score"], n(8750));
    let before = writes();
    let a = crate::items::apply_plan(job.as_ref(), &reads, &by_seeker).await;
    assert_eq!((a.puts, a.superseded, a.raced), (0, 0, 1), "{a:?}");
    assert_eq!(writes(), before, "nothing rescored a second time");
    assert_eq!(get(&b, pair.clone()).await, Some(rescored));
    b.rt.drain().await.unwrap();
    assert_exact(&mut b.rt).await;
}
