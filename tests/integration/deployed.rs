//! `jobstream run` (and `verify`, `backfill`) against what an operator
//! deployed: nothing is ever created; a missing or different table, stream,
//! TTL setting or queue is a startup error naming it; the queues are the
//! ones given (`QUEUE_URL_*` or `--stack`), so two deployments of one model
//! never consume each other's jobs; an unwritable on-failure file is
//! refused at startup. A region, an endpoint or credentials configured
//! wrong: `deployed_credentials`.

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crate::seed_items::social::{follow_item, post_item};
use aws_sdk_sqs::types::QueueAttributeName;
use jobstream::local::deployed::require_queue;
use jobstream::local::engine::{ensure_table, sdk_config, LocalEngine};
use jobstream::local::esm::RecordReader;
use jobstream::local::runtime::{queue_visibility, Provision, Runtime, RuntimeOptions};
use jobstream::local::sqs_esm::create_queue;
use shared::models::table::{self, TableDef};
use shared::store::Store;

use crate::social::{iso, post_id};
use crate::support::{jobstream_bin, TIME_SCALE};

/// A guard against hanging: `run` that starts consuming instead of
/// refusing is killed after this (and the test fails on its exit status).
const HANG_GUARD: Duration = Duration::from_secs(60);

/// `cmd` with `env` set (an empty value: the variable is unset).
pub(crate) fn with_env(cmd: &mut Command, env: Vec<(String, String)>) -> &mut Command {
    for (k, v) in env {
        if v.is_empty() {
            cmd.env_remove(k);
        } else {
            cmd.env(k, v);
        }
    }
    cmd
}

/// `jobstream ARGS` with `env` (an empty value unsets), killed past
/// [`HANG_GUARD`]; its output.
pub(crate) async fn jobstream(args: Vec<String>, env: Vec<(String, String)>) -> Output {
    tokio::task::spawn_blocking(move || {
        let mut cmd = Command::new(jobstream_bin());
        let mut child = with_env(&mut cmd, env)
            .args(&args)
            .env_remove("AWS_ENDPOINT_URL_SQS")
            .env_remove("JOBSTREAM_ENDPOINT")
            .env_remove("TABLE_NAME")
            .env_remove("LEDGER_TABLE_NAME")
            .env_remove("JOBSTREAM_STACK")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("jobstream starts");
        let started = std::time::Instant::now();
        while child.try_wait().expect("wait").is_none() {
            if started.elapsed() > HANG_GUARD {
                child.kill().ok();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        child.wait_with_output().expect("output")
    })
    .await
    .expect("joins")
}

pub(crate) fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

/// `o` failed, its stderr saying each of `says`.
pub(crate) fn refused(o: &Output, says: &[&str]) {
    let err = stderr(o);
    assert!(!o.status.success(), "{err}");
    for s in says {
        assert!(err.contains(s), "{s:?} not in: {err}");
    }
}

/// `jobstream run --endpoint E --model M --on-failure-file F` and `extra`.
pub(crate) fn run_args(endpoint: &str, model: &str, file: &str, extra: &[&str]) -> Vec<String> {
    let mut a = args(&["run", "--endpoint", endpoint, "--model", model]);
    a.extend(args(&["--on-failure-file", file]));
    a.extend(args(extra));
    a
}

/// The environment of a machine without an AWS region (nor a config file
/// or instance metadata to find one in).
pub(crate) fn no_region() -> Vec<(String, String)> {
    [
        ("AWS_CONFIG_FILE", "/nonexistent/config"),
        ("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials"),
        ("AWS_EC2_METADATA_DISABLED", "true"),
        ("AWS_REGION", ""),
        ("AWS_DEFAULT_REGION", ""),
    ]
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .into()
}

/// Command line arguments.
pub(crate) fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

pub(crate) async fn engine() -> (LocalEngine, aws_sdk_dynamodb::Client) {
    let engine = crate::support::start_engine().await;
    let client = aws_sdk_dynamodb::Client::new(&sdk_config(Some(&engine.endpoint()), 3).await);
    (engine, client)
}

pub(crate) async fn table_names(client: &aws_sdk_dynamodb::Client) -> Vec<String> {
    client
        .list_tables()
        .send()
        .await
        .expect("ListTables")
        .table_names()
        .to_vec()
}

pub(crate) fn failures_file() -> String {
    std::env::temp_dir()
        .join(format!("deployed-{}.jsonl", uuid::Uuid::new_v4()))
        .display()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_verify_and_backfill_never_create_a_missing_table_and_name_it() {
    let (engine, client) = engine().await;
    let endpoint = engine.endpoint();
    let tracker = shared::models::find("tracker").expect("shipped").table.name;
    let file = failures_file();
    let missing = format!("model table {tracker} does not exist");
    let run = jobstream(run_args(&endpoint, "tracker", &file, &[]), vec![]).await;
    let ledger = "ledger table jobstream-ledger does not exist";
    refused(&run, &[&missing, ledger, "cdk deploy", "--stack"]);

    // --stack names the stack's ledger.
    let stack = run_args(&endpoint, "tracker", &file, &["--stack", "Prod"]);
    let run = jobstream(stack, vec![]).await;
    refused(&run, &["ledger table Prod-ledger does not exist"]);

    for tool in ["verify", "backfill"] {
        let tool_args = args(&[tool, "--endpoint", &endpoint, "--model", "tracker"]);
        refused(&jobstream(tool_args, vec![]).await, &[&missing]);
    }
    assert!(table_names(&client).await.is_empty(), "nothing was created");
    std::fs::remove_file(&file).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_refuses_a_table_without_its_stream_and_a_ledger_without_ttl() {
    let (engine, client) = engine().await;
    let model = shared::models::find("tracker").expect("shipped").table;
    let no_stream = TableDef {
        stream: false,
        ..model.clone()
    };
    let no_ttl = TableDef {
        ttl_attribute: None,
        ..table::ledger()
    };
    ensure_table(&client, &no_stream, model.name).await.unwrap();
    ensure_table(&client, &no_ttl, "Ops-ledger").await.unwrap();
    let file = failures_file();
    let ops = run_args(&engine.endpoint(), "tracker", &file, &["--stack", "Ops"]);
    let run = jobstream(ops, vec![]).await;
    let no_stream = format!("model table {} has no stream", model.name);
    refused(
        &run,
        &[&no_stream, "ledger table Ops-ledger has TTL DISABLED"],
    );
    std::fs::remove_file(&file).ok();
}

/// A model table streaming other images than NEW_AND_OLD_IMAGES is named
/// with the step that fixes it in place: a stream's view type does not
/// change while it is enabled, so disable it, enable it with both images,
/// then backfill what was written between (ops14 #4: no step was given).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_refuses_a_stream_of_new_images_alone_giving_the_step() {
    use aws_sdk_dynamodb::types::{StreamSpecification, StreamViewType};
    let (engine, client) = engine().await;
    let model = shared::models::find("tracker").expect("shipped").table;
    let no_stream = TableDef {
        stream: false,
        ..model.clone()
    };
    let name = format!("view-{}", uuid::Uuid::new_v4().simple());
    ensure_table(&client, &no_stream, &name).await.unwrap();
    ensure_table(&client, &table::ledger(), "View-ledger")
        .await
        .unwrap();
    let spec = StreamSpecification::builder()
        .stream_enabled(true)
        .stream_view_type(StreamViewType::NewImage)
        .build()
        .expect("spec");
    client
        .update_table()
        .table_name(&name)
        .stream_specification(spec)
        .send()
        .await
        .expect("a NEW_IMAGE stream");
    let file = failures_file();
    let extra = ["--table", name.as_str(), "--ledger-table", "View-ledger"];
    let run = jobstream(
        run_args(&engine.endpoint(), "tracker", &file, &extra),
        vec![],
    )
    .await;
    refused(
        &run,
        &[
            &format!("model table {name} streams NEW_IMAGE, not NEW_AND_OLD_IMAGES"),
            "StreamEnabled=false",
            "StreamEnabled=true,StreamViewType=NEW_AND_OLD_IMAGES",
            "jobstream backfill",
        ],
    );
    std::fs::remove_file(&file).ok();
}

/// The social model's tables, on `engine`, under `prefix`.
pub(crate) async fn social_tables(
    client: &aws_sdk_dynamodb::Client,
    prefix: &str,
) -> (String, String) {
    let (t, l) = (format!("{prefix}social"), format!("{prefix}ledger"));
    ensure_table(
        client,
        &shared::models::find("social").expect("social").table,
        &t,
    )
    .await
    .unwrap();
    ensure_table(client, &table::ledger(), &l).await.unwrap();
    (t, l)
}

async fn sqs_client() -> (String, aws_sdk_sqs::Client) {
    let endpoint = tokio::task::spawn_blocking(crate::support::sqs)
        .await
        .expect("local SQS");
    let client = aws_sdk_sqs::Client::new(&sdk_config(Some(&endpoint), 3).await);
    (endpoint, client)
}

async fn queues_named(sqs: &aws_sdk_sqs::Client, prefix: &str) -> Vec<String> {
    sqs.list_queues()
        .queue_name_prefix(prefix)
        .send()
        .await
        .expect("ListQueues")
        .queue_urls()
        .to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_never_creates_a_missing_queue_and_names_it() {
    let (engine, client) = engine().await;
    let (sqs_endpoint, sqs) = sqs_client().await;
    let id = uuid::Uuid::new_v4().simple().to_string();
    let (t, l) = social_tables(&client, &format!("q{id}-")).await;
    let var = shared::lambda::queue_env("timeline");
    let file = failures_file();
    let base = |extra: &[&str]| {
        let mut a = args(&["--table", &t, "--ledger-table", &l]);
        a.extend(args(&["--sqs-endpoint", &sqs_endpoint]));
        a.extend(args(extra));
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        run_args(&engine.endpoint(), "social", &file, &a)
    };

    // No URL, no stack and no SQS endpoint (the queues by their names
    // there): the variable the Lambdas get is named, and the flags.
    let alone = args(&["--table", &t, "--ledger-table", &l]);
    let alone: Vec<&str> = alone.iter().map(String::as_str).collect();
    let region = vec![("AWS_REGION".to_string(), "us-east-1".to_string())];
    let out = jobstream(
        run_args(&engine.endpoint(), "social", &file, &alone),
        region,
    )
    .await;
    refused(&out, &[&format!("set {var}"), "--stack", "--sqs-endpoint"]);

    // A URL of a queue that does not exist.
    let missing = format!("{sqs_endpoint}/000000000000/m{id}-timeline");
    let out = jobstream(base(&[]), vec![(var.clone(), missing.clone())]).await;
    refused(
        &out,
        &[&format!("queue timeline ({missing}) does not exist")],
    );

    // A stack without the queue.
    let stack = format!("s{id}");
    let out = jobstream(base(&["--stack", &stack]), vec![]).await;
    let no_queue = format!("stack {stack} has no queue {stack}-jobstream-timeline-jobs");
    refused(&out, &[&no_queue]);
    for prefix in [format!("m{id}"), stack] {
        assert!(
            queues_named(&sqs, &prefix).await.is_empty(),
            "no queue was created under {prefix}"
        );
    }
    std::fs::remove_file(&file).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_unlike_its_definition_is_refused_saying_what_differs() {
    let (_endpoint, sqs) = sqs_client().await;
    let model = shared::models::find("social").unwrap();
    let def = model.queues().remove(0);
    let url = sqs
        .create_queue()
        .queue_name(format!("d{}-timeline", uuid::Uuid::new_v4().simple()))
        .attributes(QueueAttributeName::VisibilityTimeout, "30")
        .send()
        .await
        .expect("CreateQueue")
        .queue_url()
        .unwrap()
        .to_string();
    let e = require_queue(&sqs, &def, &url, Duration::from_secs(180))
        .await
        .expect_err("refused");
    let msg = format!("{e:#}");
    assert!(
        msg.contains("VisibilityTimeout 30 (definition: 180)"),
        "{msg}"
    );
    assert!(
        msg.contains("maxReceiveCount none (definition: 5)"),
        "{msg}"
    );
    assert!(msg.contains("no dead-letter queue"), "{msg}");

    // As deployed: accepted, its DLQ found.
    let prefix = format!("d{}-", uuid::Uuid::new_v4().simple());
    let made = create_queue(&sqs, &def, &prefix, Duration::from_secs(180))
        .await
        .expect("created as deployed");
    let q = require_queue(&sqs, &def, &made.url, Duration::from_secs(180))
        .await
        .expect("as defined");
    assert_eq!(q.dlq_url, made.dlq_url);
    assert_eq!(q.arn, made.arn);
}

/// What the stack deploys creates queues with: `maxReceiveCount` a number
/// (SQS compares attributes on a CreateQueue of an existing queue).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn created_queues_carry_max_receive_count_as_a_number() {
    let (_endpoint, sqs) = sqs_client().await;
    let model = shared::models::find("social").unwrap();
    let def = model.queues().remove(0);
    let prefix = format!("n{}-", uuid::Uuid::new_v4().simple());
    let made = create_queue(&sqs, &def, &prefix, Duration::from_secs(180))
        .await
        .expect("created");
    let attrs = sqs
        .get_queue_attributes()
        .queue_url(&made.url)
        .attribute_names(QueueAttributeName::RedrivePolicy)
        .send()
        .await
        .expect("attributes");
    let redrive: serde_json::Value = serde_json::from_str(
        attrs
            .attributes()
            .and_then(|a| a.get(&QueueAttributeName::RedrivePolicy))
            .expect("a redrive policy"),
    )
    .expect("JSON");
    assert_eq!(redrive["maxReceiveCount"], serde_json::json!(5));
}

/// The options of `run` on one deployment of the social model (its table,
/// ledger and queues, made here under a fresh prefix starting with
/// `name`): nothing created, the queues given by URL, the stream read
/// through `reader`.
async fn deployed_options(
    engine: &LocalEngine,
    (sqs_endpoint, sqs): &(String, aws_sdk_sqs::Client),
    name: &str,
    reader: RecordReader,
) -> RuntimeOptions {
    let client = aws_sdk_dynamodb::Client::new(&sdk_config(Some(&engine.endpoint()), 3).await);
    let prefix = format!("{name}{}-", uuid::Uuid::new_v4().simple());
    let (t, l) = social_tables(&client, &prefix).await;
    let model = shared::models::find("social").unwrap();
    let mut queues = std::collections::BTreeMap::new();
    for def in model.queues() {
        let q = create_queue(sqs, &def, &prefix, queue_visibility(&def, TIME_SCALE))
            .await
            .expect("the stack's queue");
        queues.insert(def.logical.to_string(), q.url);
    }
    let mut opts = RuntimeOptions::new("social", Some(engine.endpoint()), reader);
    opts.time_scale = TIME_SCALE;
    opts.table = Some(t);
    opts.ledger_table = l;
    opts.sqs_endpoint = Some(sqs_endpoint.to_string());
    opts.provision = Provision::Existing { queues };
    opts
}

/// One deployment of the social model, run as `run` runs it (see
/// [`deployed_options`]).
async fn deployment(
    engine: &LocalEngine,
    sqs: &(String, aws_sdk_sqs::Client),
    name: &str,
) -> Runtime {
    let reader = RecordReader::Embedded(engine.database().clone());
    let opts = deployed_options(engine, sqs, name, reader).await;
    Runtime::start(opts).await.expect("runs on what exists")
}

async fn timeline_len(rt: &Runtime, user: &str) -> usize {
    let store = Store::new(rt.dynamodb.clone());
    crate::social::timeline_len(&store, &rt.config.table, user).await
}

fn invocations(rt: &Runtime) -> u64 {
    rt.queues.iter().map(|q| q.invocations()).sum()
}

/// Staging and prod of one model in one region: each `run` consumes its
/// own queues, never the other's jobs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_runs_with_different_queue_sets_never_see_each_others_jobs() {
    let (engine, _client) = engine().await;
    let sqs = sqs_client().await;
    let mut staging = deployment(&engine, &sqs, "staging").await;
    let mut prod = deployment(&engine, &sqs, "prod").await;
    assert_ne!(staging.config.queues, prod.config.queues);

    let at = iso(0);
    let post = post_id(1);
    crate::support::put(&staging, post_item("star", &post, &at, "hi")).await;
    crate::support::put(&staging, follow_item("ann", "star", &at)).await;
    // Both consume at once, as two deployments do.
    let (a, b) = tokio::join!(staging.drain(), prod.drain());
    a.expect("staging drains");
    b.expect("prod drains");
    assert_eq!(timeline_len(&staging, "ann").await, 1);
    assert!(invocations(&staging) > 0, "staging ran its job");
    assert_eq!(invocations(&prod), 0, "prod never saw staging's job");
    assert_eq!(timeline_len(&prod, "ann").await, 0);

    // And the other way round.
    let post = post_id(2);
    crate::support::put(&prod, post_item("star", &post, &at, "hi")).await;
    crate::support::put(&prod, follow_item("bob", "star", &at)).await;
    let before = invocations(&staging);
    let (a, b) = tokio::join!(staging.drain(), prod.drain());
    a.expect("staging drains");
    b.expect("prod drains");
    assert_eq!(timeline_len(&prod, "bob").await, 1);
    assert!(invocations(&prod) > 0);
    assert_eq!(
        invocations(&staging),
        before,
        "staging never saw prod's job"
    );
    assert_eq!(timeline_len(&staging, "bob").await, 0);
    crate::items::assert_clean(&staging).await;
    crate::items::assert_clean(&prod).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unwritable_on_failure_file_is_refused_at_startup() {
    let (engine, client) = engine().await;
    let tracker = shared::models::find("tracker").expect("shipped").table;
    ensure_table(&client, &tracker, tracker.name).await.unwrap();
    ensure_table(&client, &table::ledger(), "jobstream-ledger")
        .await
        .unwrap();
    let unwritable = std::env::temp_dir()
        .join(format!("no-such-dir-{}", uuid::Uuid::new_v4()))
        .join("failures.jsonl");
    let path = unwritable.to_str().unwrap();
    let run = jobstream(run_args(&engine.endpoint(), "tracker", path, &[]), vec![]).await;
    let says = format!("--on-failure-file {path} cannot be appended to");
    refused(&run, &[&says]);
}

/// `backfill` of a model with queues and no queue URL stops before it
/// reads or writes anything, saying how to give them (it used to apply half
/// the table, then fail on the first job it had to send); `verify`, which
/// sends no job, needs no SQS region.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_without_its_queues_refuses_before_writing_and_verify_needs_none() {
    let (engine, client) = engine().await;
    let social = shared::models::find("social").expect("social");
    assert!(!social.consumers.is_empty(), "a model with queues");
    ensure_table(&client, &social.table, social.table.name)
        .await
        .unwrap();
    ensure_table(&client, &table::ledger(), "jobstream-ledger")
        .await
        .unwrap();
    client
        .put_item()
        .table_name(social.table.name)
        .set_item(Some(follow_item("ann", "bob", &iso(0))))
        .send()
        .await
        .unwrap();
    let endpoint = engine.endpoint();
    let out = jobstream(
        args(&["backfill", "--endpoint", &endpoint, "--model", "social"]),
        no_region(),
    )
    .await;
    refused(&out, &["sends jobs to its queues", "--sqs-endpoint"]);
    let scan = client
        .scan()
        .table_name(social.table.name)
        .send()
        .await
        .unwrap();
    assert_eq!(scan.count(), 1, "nothing derived: only the follow");
    let ledger = client
        .scan()
        .table_name("jobstream-ledger")
        .send()
        .await
        .unwrap();
    assert_eq!(ledger.count(), 0, "nothing recorded");

    let out = jobstream(
        args(&["verify", "--endpoint", &endpoint, "--model", "social"]),
        no_region(),
    )
    .await;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        !stderr(&out).contains("no AWS region for SQS"),
        "{}",
        stderr(&out)
    );
    assert!(
        text.contains("drift"),
        "verify ran: {text} {}",
        stderr(&out)
    );

    // With --stack too: its queues are not looked up (user6's U05: verify
    // asked the region's SQS for them, and failed without a network).
    let stack = [
        "verify",
        "--endpoint",
        &endpoint,
        "--model",
        "social",
        "--stack",
        "Prod",
        "--ledger-table",
        "jobstream-ledger",
    ];
    let out = jobstream(args(&stack), no_region()).await;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let err = stderr(&out);
    assert!(
        !err.contains("SQS") && !err.contains("GetQueueUrl"),
        "{err}"
    );
    assert!(
        text.contains("| checked |") && text.contains("drift"),
        "verify ran: {text} {err}"
    );

    // With the `export QUEUE_URL_...` lines `jobstream create` prints set
    // (user11 #2: verify asked for an SQS region it never uses).
    let mut env = no_region();
    for q in social.queues() {
        let url = format!("http://sqs.us-east-1.localhost:9/000000000000/{}", q.name);
        env.push((shared::lambda::queue_env(q.logical), url));
    }
    let out = jobstream(
        args(&["verify", "--endpoint", &endpoint, "--model", "social"]),
        env,
    )
    .await;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let err = stderr(&out);
    assert!(!err.contains("SQS"), "{err}");
    assert!(
        text.contains("| checked |") && text.contains("drift"),
        "verify ran with the queue URLs set: {text} {err}"
    );
}

/// `jobstream run`'s own calls (the startup checks, the stream read through
/// the SDK, leases and checkpoints, polling the queues and finding their
/// dead-letter queues) go through the check of the stack's `RunnerPolicy`,
/// as the processors' go through their grants: none is denied, and each
/// kind the policy grants the mappings is used (`fidelity`'s grants test
/// compares the whole suite's with it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_own_calls_are_checked_against_the_runner_policy() {
    use jobstream::local::iam::{recorder, Principal, Resource, RUNNER};
    let (engine, _client) = engine().await;
    let sqs = sqs_client().await;
    let mut opts = deployed_options(&engine, &sqs, "runner", RecordReader::Sdk).await;
    let model = shared::models::find("social").unwrap();
    let (t, l) = (opts.table.clone().unwrap(), opts.ledger_table.clone());
    let runner = Principal::runner(&model, &t, &l, &Default::default(), None);
    // Leases and checkpoints in the ledger, through the runner's client.
    let sdk = runner.checked(&sdk_config(Some(&engine.endpoint()), 3).await);
    opts.mapping.checkpoints = Some(jobstream::local::lease::CheckpointConfig::new(
        aws_sdk_dynamodb::Client::new(&sdk),
        &l,
    ));
    opts.runner = Some(runner);
    let mut rt = Runtime::start(opts).await.expect("runs on what exists");
    let at = iso(0);
    let post = post_id(1);
    crate::support::put(&rt, post_item("star", &post, &at, "hi")).await;
    crate::support::put(&rt, follow_item("ann", "star", &at)).await;
    rt.drain().await.expect("drains");
    assert_eq!(timeline_len(&rt, "ann").await, 1, "the fan-out job ran");
    crate::items::assert_clean(&rt).await;

    let calls: Vec<_> = recorder()
        .calls()
        .into_iter()
        .filter(|c| c.processor == RUNNER && c.model == "social")
        .collect();
    let denied: Vec<_> = calls.iter().filter(|c| !c.allowed).collect();
    assert!(denied.is_empty(), "denied: {denied:#?}");
    let ours: Vec<_> = calls.iter().filter(|c| c.session == rt.session).collect();
    for (action, resource) in [
        ("dynamodb:DescribeTable", Resource::Table),
        ("dynamodb:DescribeStream", Resource::Stream),
        ("dynamodb:GetShardIterator", Resource::Stream),
        ("dynamodb:GetRecords", Resource::Stream),
        ("dynamodb:UpdateItem", Resource::Ledger),
        ("sqs:GetQueueAttributes", Resource::Queue("timeline".into())),
        ("sqs:ReceiveMessage", Resource::Queue("timeline".into())),
        ("sqs:DeleteMessage", Resource::Queue("timeline".into())),
        ("sqs:GetQueueUrl", Resource::DeadLetters("timeline".into())),
    ] {
        assert!(
            ours.iter()
                .any(|c| c.action == action && c.resource == resource),
            "{action} on {resource} was not checked: {ours:#?}"
        );
    }
}

/// A queue lookup that fails for want of an answer names where it asked
/// (user10: `run` without `--sqs-endpoint` failed after 40 s with
/// "GetQueueUrl ...: request has timed out", never saying it had asked the
/// region's real SQS).
#[tokio::test]
async fn a_queue_lookup_that_fails_names_the_sqs_it_asked() {
    let model = shared::models::find("social").unwrap();
    let sdk = sdk_config(Some("http://127.0.0.1:9"), 1).await;
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let at = jobstream::local::deployed::sqs_asked(Some("http://127.0.0.1:9"));
    let e = jobstream::local::deployed::queue_urls(
        &sqs,
        &at,
        &model,
        jobstream::local::deployed::QueueNames::AsDefined,
        |_| None,
    )
    .await
    .expect_err("nothing listens there");
    let text = format!("{e:#}");
    assert!(text.contains("in SQS at http://127.0.0.1:9"), "{text}");
    // No endpoint given: the region's own, said so.
    let said = jobstream::local::deployed::sqs_asked(None);
    assert!(
        said.contains("the region's own: no --sqs-endpoint given"),
        "{said}"
    );
}
