//! `jobstream run` (and the tools) configured as operators deploy them: from
//! the environment alone (a container's or a systemd unit's variables, no
//! flags, a read-only working directory), and refusing a configuration
//! that can never work (a malformed endpoint URL, two models) at once, in
//! one line naming the flag or variable, the value and why: never retried
//! as an outage, never an SDK dump.

use std::process::{Output, Stdio};
use std::time::Duration;

use jobstream::local::engine::{ensure_table, sdk_config};

use crate::deployed::args;
use crate::seed_items::hr::org;

/// An organisation of the hr model (a model without queues).
const ORG: &str = "01HXAA0000000000000000000A";

/// Variables a user's shell may hold that would change what a test
/// starts; each case sets its own.
fn clean(env: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> = [
        "MODEL",
        "MODEL_FILE",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_DYNAMODB",
    ]
    .iter()
    .map(|k| (k.to_string(), String::new()))
    .collect();
    all.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    all
}

/// `jobstream ARGS` started as [`crate::support::jobstream_command`]
/// does, then given `env` (an empty value unsets) and the working
/// directory `cwd`; its output.
async fn configured(
    argv: Vec<String>,
    env: Vec<(String, String)>,
    cwd: Option<std::path::PathBuf>,
) -> Output {
    let mut cmd = spawnable(env);
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    tokio::task::spawn_blocking(move || cmd.args(argv).output().expect("jobstream runs"))
        .await
        .unwrap()
}

fn spawnable(env: Vec<(String, String)>) -> std::process::Command {
    let mut cmd = crate::support::jobstream_command(&crate::support::jobstream_bin());
    for (k, v) in env {
        if v.is_empty() {
            cmd.env_remove(k);
        } else {
            cmd.env(k, v);
        }
    }
    cmd
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

/// `MODEL` picks the model as `--model` does, for `run` and the tools: an
/// operator configuring `run` from the environment alone (ops11 #1) got the
/// default model instead, silently where its tables also exist. Every
/// operational flag of `run` has its variable, so an env-only `run` starts
/// in a working directory where the default on-failure file cannot be
/// written, with the lease TTL, the grace and the metrics it was given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_and_verify_take_their_whole_configuration_from_the_environment() {
    let engine = crate::support::start_engine().await;
    let client = aws_sdk_dynamodb::Client::new(&sdk_config(Some(&engine.endpoint()), 3).await);
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    let (table, ledger) = (format!("hr-{suffix}"), format!("ledger-{suffix}"));
    let hr = shared::models::find("hr").expect("shipped");
    ensure_table(&client, &hr.table, &table).await.unwrap();
    ensure_table(&client, &shared::models::table::ledger(), &ledger)
        .await
        .unwrap();
    // The tracker's tables too: a run of the wrong model would start.
    let tracker = shared::models::find("tracker").expect("shipped").table;
    ensure_table(&client, &tracker, tracker.name).await.unwrap();
    client
        .put_item()
        .table_name(&table)
        .set_item(Some(org(ORG, "Acme", "pro")))
        .send()
        .await
        .unwrap();
    // The working directory: the default on-failure file cannot be
    // appended to there (a directory of that name; root writes anywhere).
    let cwd = std::env::temp_dir().join(format!("ro-{suffix}"));
    std::fs::create_dir_all(cwd.join("jobstream-failures.jsonl")).unwrap();
    let failures = std::env::temp_dir().join(format!("env-only-{suffix}.jsonl"));
    let endpoint = engine.endpoint();
    let env = clean(&[
        ("MODEL", "hr"),
        ("JOBSTREAM_ENDPOINT", &endpoint),
        ("TABLE_NAME", &table),
        ("LEDGER_TABLE_NAME", &ledger),
        ("JOBSTREAM_LEASE_OWNER", "env-only"),
        ("JOBSTREAM_ON_FAILURE_FILE", failures.to_str().unwrap()),
        ("JOBSTREAM_SHUTDOWN_GRACE", "2s"),
        ("JOBSTREAM_LEASE_TTL_SECS", "3600"),
        ("JOBSTREAM_EMIT_METRICS", "true"),
    ]);

    let run_env = env.clone();
    let mut cmd = tokio::task::spawn_blocking(move || spawnable(run_env))
        .await
        .unwrap();
    let mut child = cmd
        .current_dir(&cwd)
        .arg("run")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("jobstream run starts");
    let held =
        crate::operations::holds_leases_as(&client, &ledger, &mut child, &hr, "env-only").await;
    if !held {
        let out = child.wait_with_output().unwrap();
        panic!("run did not start: {}", stderr(&out));
    }
    // The lease runs for JOBSTREAM_LEASE_TTL_SECS, not the default 20 s.
    let leases = client.scan().table_name(&ledger).send().await.unwrap();
    let expires = leases
        .items()
        .iter()
        .filter_map(|i| i.get("leaseExpiresAt").and_then(|v| v.as_n().ok()))
        .filter_map(|n| n.parse::<i64>().ok())
        .max()
        .expect("a lease");
    let now = chrono::Utc::now().timestamp_millis();
    assert!(
        expires - now > 1_000_000,
        "a lease of an hour: {expires} - {now}"
    );
    // The post's batch is processed (its EMF line printed) before the
    // stop: every mapping has checkpointed.
    let checkpointed = || async {
        let page = client.scan().table_name(&ledger).send().await.unwrap();
        page.items()
            .iter()
            .filter(|i| i.contains_key("leaseOwner") && i.contains_key("sequenceNumber"))
            .count()
    };
    tokio::time::timeout(Duration::from_secs(60), async {
        while checkpointed().await < hr.stream_defs().len() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the post's batch is checkpointed");
    let out = crate::support::sigterm(child).await;
    let err = stderr(&out);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{err}");
    assert!(stdout.contains("model file: models/hr.yaml"), "{stdout}");
    assert!(
        err.lines()
            .last()
            .is_some_and(|l| l.contains("(--shutdown-grace 2s)")),
        "{err}"
    );
    assert!(stdout.contains("\"_aws\""), "EMF lines: {stdout}");
    // verify reads the same environment: the hr model's table, clean.
    let verify = configured(args(&["verify"]), env.clone(), Some(cwd.clone())).await;
    assert!(verify.status.success(), "verify: {}", stderr(&verify));
    let said = String::from_utf8_lossy(&verify.stdout).to_string();
    assert!(said.contains("no drift"), "{said}");
    std::fs::remove_file(&failures).ok();
    std::fs::remove_dir_all(&cwd).ok();
}

/// `MODEL` and `MODEL_FILE` both set name two models: refused as the two
/// flags are, before anything else (a usage error, exit 2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_and_model_file_in_the_environment_are_refused_as_the_flags_are() {
    let file = crate::support::shipped("social.yaml");
    let file = file.to_str().unwrap();
    let model_file = format!("MODEL_FILE={file} (as --model-file)");
    let model = "MODEL=social (as --model)";
    for (argv, env, named) in [
        (
            args(&["verify"]),
            clean(&[("MODEL", "social"), ("MODEL_FILE", file)]),
            vec![model, &model_file],
        ),
        (
            args(&["run", "--model", "social"]),
            clean(&[("MODEL_FILE", file)]),
            vec![&model_file],
        ),
        (
            args(&["serve", "--model-file", file]),
            clean(&[("MODEL", "social")]),
            vec![model],
        ),
    ] {
        let out = configured(argv.clone(), env, None).await;
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{argv:?}: {err}");
        assert!(err.contains("'--model <MODEL>'"), "{argv:?}: {err}");
        assert!(err.contains("'--model-file <PATH>'"), "{argv:?}: {err}");
        for n in named {
            assert!(err.contains(n), "{argv:?}: {n} not in {err}");
        }
    }
}

/// `--help` shows every variable a flag reads.
#[test]
fn run_help_names_each_flags_variable() {
    let out = crate::support::jobstream(&["run", "--help"]);
    let help = String::from_utf8_lossy(&out.stdout).to_string();
    for var in [
        "[env: MODEL=",
        "[env: MODEL_FILE=",
        "[env: JOBSTREAM_ON_FAILURE_FILE=",
        "[env: JOBSTREAM_SHUTDOWN_GRACE=",
        "[env: JOBSTREAM_LEASE_TTL_SECS=",
        "[env: JOBSTREAM_EMIT_METRICS=",
        "[env: JOBSTREAM_STARTING_POSITION=",
        "[env: JOBSTREAM_ON_FAILURE_QUEUE_URL=",
    ] {
        assert!(help.contains(var), "{var} not in:\n{help}");
    }
}

/// A command line, its environment, and what its stderr must name.
type Case<'a> = (Vec<String>, Vec<(&'a str, &'a str)>, Vec<&'a str>);

/// A malformed endpoint URL (ops11 #2) can never work: refused before any
/// call, in one line naming where it was given, the value and what is
/// wrong; not retried for 40 s as an outage, not the SDK's request dump.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_endpoint_url_is_refused_at_once_saying_what_is_wrong() {
    let creds = [
        ("AWS_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "x"),
        ("AWS_SECRET_ACCESS_KEY", "y"),
    ];
    let failures = std::env::temp_dir().join(format!("malformed-{}.jsonl", uuid::Uuid::new_v4()));
    let failures = failures.to_str().unwrap();
    let run = |extra: &[&str]| {
        let mut a = args(&["run", "--model", "social", "--on-failure-file", failures]);
        a.extend(args(extra));
        a
    };
    let good = "http://127.0.0.1:1";
    let cases: Vec<Case> = vec![
        (
            run(&["--endpoint", "127.0.0.1:8300"]),
            vec![],
            vec!["--endpoint", "127.0.0.1:8300", "no scheme"],
        ),
        (
            run(&["--endpoint", "http://127.0.0.1:notaport"]),
            vec![],
            vec!["--endpoint", "http://127.0.0.1:notaport", "port"],
        ),
        (
            run(&["--endpoint", "htp://127.0.0.1:8300"]),
            vec![],
            vec!["--endpoint", "htp://127.0.0.1:8300", "scheme htp"],
        ),
        (
            run(&["--endpoint", good, "--sqs-endpoint", "localhost:9324"]),
            vec![],
            vec!["--sqs-endpoint", "localhost:9324", "http:// or https://"],
        ),
        (
            run(&["--endpoint", good, "--on-failure-queue-url", "sqs/q"]),
            vec![],
            vec!["--on-failure-queue-url", "sqs/q"],
        ),
        (
            run(&[]),
            vec![("JOBSTREAM_ENDPOINT", "http://:8000")],
            vec!["--endpoint", "JOBSTREAM_ENDPOINT", "http://:8000", "host"],
        ),
        (
            run(&[]),
            vec![("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:99999")],
            vec![
                "AWS_ENDPOINT_URL_DYNAMODB",
                "http://127.0.0.1:99999",
                "port",
            ],
        ),
        (
            args(&["verify", "--model", "social"]),
            vec![("AWS_ENDPOINT_URL", "ftp://127.0.0.1:8000")],
            vec!["AWS_ENDPOINT_URL", "ftp://127.0.0.1:8000", "scheme ftp"],
        ),
        (
            args(&["run", "--model", "jobboard", "--endpoint", good]),
            vec![
                ("QUEUE_URL_SUGGESTIONS", "127.0.0.1:9324/q"),
                ("QUEUE_URL_MATCHES", "http://127.0.0.1:9324/q"),
            ],
            vec!["QUEUE_URL_SUGGESTIONS", "127.0.0.1:9324/q", "no scheme"],
        ),
        (
            args(&[
                "create",
                "--model",
                "social",
                "--endpoint",
                "http//127.0.0.1:8000",
            ]),
            vec![],
            vec!["--endpoint", "http//127.0.0.1:8000", "no scheme"],
        ),
        (
            args(&[
                "query",
                "--model",
                "social",
                "--endpoint",
                "http://127.0.0.1:8000:1",
                "x",
            ]),
            vec![],
            vec!["--endpoint", "http://127.0.0.1:8000:1", "port"],
        ),
    ];
    for (argv, env, says) in cases {
        let mut e = clean(&creds);
        e.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let out = configured(argv.clone(), e, None).await;
        let err = stderr(&out);
        assert!(!out.status.success(), "{argv:?} {env:?}: {err}");
        for s in says {
            assert!(err.contains(s), "{argv:?} {env:?}: {s:?} not in: {err}");
        }
        for dump in ["Request {", "SdkBody", "retries", "answer in"] {
            assert!(!err.contains(dump), "{argv:?} {env:?}: {err}");
        }
        let first = err.lines().next().unwrap_or_default();
        assert!(first.len() < 400, "one line, not a dump: {err}");
    }
    std::fs::remove_file(failures).ok();
}

/// A startup call that fails (nothing listening: a refused connection) is
/// one line, the transport's causes by their messages: not the SDK's
/// `Debug` dump of the error, and not a claim of 40 s of retries after a
/// fraction of a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_startup_call_is_one_line_without_the_sdks_dump() {
    let env = clean(&[
        ("AWS_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "x"),
        ("AWS_SECRET_ACCESS_KEY", "y"),
    ]);
    let verify = args(&[
        "verify",
        "--model",
        "hr",
        "--endpoint",
        "http://127.0.0.1:1",
    ]);
    let out = configured(verify, env, None).await;
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("DescribeTable"), "{err}");
    assert!(err.contains("Connection refused"), "{err}");
    for dump in ["DispatchFailure(", "ConnectorError {", "40 s"] {
        assert!(!err.contains(dump), "{dump}: {err}");
    }
}

/// The refusal of an on-failure file that cannot be appended to suggested
/// `--on-failure-queue-url` as the way out (ops11 #6), which does not help:
/// the file is required with or without the queue. It names the flag and
/// its variable instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unwritable_on_failure_file_is_refused_saying_what_helps() {
    let engine = crate::support::start_engine().await;
    let client = aws_sdk_dynamodb::Client::new(&sdk_config(Some(&engine.endpoint()), 3).await);
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    let (table, ledger) = (format!("hr-{suffix}"), format!("ledger-{suffix}"));
    let hr = shared::models::find("hr").expect("shipped");
    ensure_table(&client, &hr.table, &table).await.unwrap();
    ensure_table(&client, &shared::models::table::ledger(), &ledger)
        .await
        .unwrap();
    let cwd = std::env::temp_dir().join(format!("ro-{suffix}"));
    std::fs::create_dir_all(cwd.join("jobstream-failures.jsonl")).unwrap();
    let endpoint = engine.endpoint();
    let env = clean(&[
        ("MODEL", "hr"),
        ("JOBSTREAM_ENDPOINT", &endpoint),
        ("TABLE_NAME", &table),
        ("LEDGER_TABLE_NAME", &ledger),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "x"),
        ("AWS_SECRET_ACCESS_KEY", "y"),
    ]);
    for extra in [
        vec![],
        args(&[
            "--on-failure-queue-url",
            "http://127.0.0.1:1/000000000000/failures",
        ]),
    ] {
        let mut argv = args(&["run"]);
        argv.extend(extra);
        let out = configured(argv.clone(), env.clone(), Some(cwd.clone())).await;
        let err = stderr(&out);
        assert!(!out.status.success(), "{argv:?}: {err}");
        assert!(
            err.contains("--on-failure-file jobstream-failures.jsonl cannot be appended to"),
            "{argv:?}: {err}"
        );
        assert!(err.contains("JOBSTREAM_ON_FAILURE_FILE"), "{argv:?}: {err}");
        assert!(!err.contains("or send them to SQS"), "{argv:?}: {err}");
    }
    std::fs::remove_dir_all(&cwd).ok();
}
