//! `jobstream run` (and the tools) configured wrong by an operator: a
//! remote endpoint without a region, an endpoint host that does not
//! resolve, no credentials (for DynamoDB or for SQS): each refused at
//! startup in one line naming what is missing and how to give it, before
//! anything is created; a loopback endpoint needs neither, however it is
//! named.

use std::process::Command;

use crate::deployed::{
    args, engine, failures_file, jobstream, no_region, refused, run_args, social_tables, stderr,
    table_names, with_env,
};
use crate::support::jobstream_bin;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_endpoint_without_a_region_is_a_startup_error() {
    let remote = "https://dynamodb.jobstream.invalid";
    let verify = args(&["verify", "--endpoint", remote, "--model", "tracker"]);
    let out = jobstream(verify, no_region()).await;
    refused(&out, &["no AWS region for DynamoDB"]);
}

/// A misspelt endpoint host is a configuration error, refused at once
/// naming the host: not an outage that the startup checks' retries wait
/// out for a whole call budget (their retries ride out throttles and
/// outages, `operations::run_started_during_a_throttle_or_an_outage_waits_it_out`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_whose_host_does_not_resolve_is_refused_at_once() {
    let file = failures_file();
    for flag in ["--endpoint", "--sqs-endpoint"] {
        let mut a = run_args("http://127.0.0.1:1", "tracker", &file, &[]);
        let at = a.iter().position(|x| x == "--endpoint").unwrap();
        a.drain(at..at + 2);
        a.extend(args(&[flag, "http://nosuchhost.invalid:8000"]));
        let env = vec![
            ("AWS_REGION".to_string(), "us-east-1".to_string()),
            ("AWS_ACCESS_KEY_ID".to_string(), "x".to_string()),
            ("AWS_SECRET_ACCESS_KEY".to_string(), "y".to_string()),
        ];
        let out = jobstream(a, env).await;
        refused(
            &out,
            &[
                flag,
                "nosuchhost.invalid does not resolve",
                "check the name",
            ],
        );
    }
    std::fs::remove_file(&file).ok();
}

/// A model with queues run against a local engine without `--sqs-endpoint`
/// asks the region's own SQS; where its host does not resolve (a sandbox,
/// a misspelt region), that is refused at once naming `--sqs-endpoint`,
/// not after the startup checks' 40 s of retries (ops14 #2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_regions_own_sqs_host_that_does_not_resolve_is_refused_at_once() {
    let (engine, client) = engine().await;
    let (t, l) = social_tables(&client, "nosqs-").await;
    let file = failures_file();
    let extra = ["--table", &t, "--ledger-table", &l, "--stack", "NoSqs"];
    let run = run_args(&engine.endpoint(), "social", &file, &extra);
    // A region no DNS knows: its SQS host resolves nowhere.
    let env = vec![
        ("AWS_REGION".to_string(), "xx-nowhere-9".to_string()),
        ("AWS_ACCESS_KEY_ID".to_string(), "x".to_string()),
        ("AWS_SECRET_ACCESS_KEY".to_string(), "y".to_string()),
        ("AWS_ENDPOINT_URL".to_string(), String::new()),
    ];
    let out = jobstream(run, env).await;
    refused(
        &out,
        &[
            "sqs.xx-nowhere-9.amazonaws.com does not resolve",
            "--sqs-endpoint",
        ],
    );
    // At once: not after the startup checks' retries (their first line).
    assert!(
        !stderr(&out).contains("have not finished after"),
        "{}",
        stderr(&out)
    );
    std::fs::remove_file(&file).ok();
}

/// The environment of a machine with no AWS region and no credentials
/// anywhere (variables, files, instance metadata, containers).
fn no_region_nor_credentials() -> Vec<(String, String)> {
    let mut env = no_region();
    for k in [
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_DYNAMODB",
    ] {
        env.push((k.to_string(), String::new()));
    }
    // Empty configuration files (missing ones are warned about).
    for k in ["AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"] {
        env.push((k.to_string(), "/dev/null".to_string()));
    }
    env
}

/// Missing credentials for SQS (a queue model's queues at a non-loopback
/// address) are the same one line as for DynamoDB, before anything is
/// created: `create` used to create the ledger and then fail with an
/// instance-metadata error suggesting the endpoint was not SQS (ops9's
/// finding 6).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_sqs_credentials_are_one_line_before_anything_is_created() {
    let (engine, client) = engine().await;
    let env = no_region_nor_credentials_but_a_region();
    let create = args(&[
        "create",
        "--endpoint",
        &engine.endpoint(),
        "--sqs-endpoint",
        "http://10.255.255.1:9324",
        "--model",
        "social",
        "--stack",
        "Creds",
    ]);
    let out = jobstream(create, env).await;
    refused(
        &out,
        &["no AWS credentials found for SQS at http://10.255.255.1:9324"],
    );
    assert!(table_names(&client).await.is_empty(), "nothing was created");
    // `run` on tables that exist: the same line before its first SQS call
    // (it was an instance-metadata error from GetQueueUrl).
    let (t, l) = social_tables(&client, "creds-").await;
    let file = failures_file();
    let extra = ["--table", &t, "--ledger-table", &l];
    let mut run = run_args(&engine.endpoint(), "social", &file, &extra);
    run.extend(args(&["--sqs-endpoint", "http://10.255.255.1:9324"]));
    let out = jobstream(run, no_region_nor_credentials_but_a_region()).await;
    refused(
        &out,
        &["no AWS credentials found for SQS at http://10.255.255.1:9324"],
    );
    std::fs::remove_file(&file).ok();
}

fn no_region_nor_credentials_but_a_region() -> Vec<(String, String)> {
    let mut env = no_region_nor_credentials();
    env.push(("AWS_REGION".to_string(), "us-east-1".to_string()));
    env.push(("AWS_EC2_METADATA_DISABLED".to_string(), "true".to_string()));
    env
}

/// A loopback endpoint behaves the same whether it is given as
/// `--endpoint`, `JOBSTREAM_ENDPOINT`, `AWS_ENDPOINT_URL` or
/// `AWS_ENDPOINT_URL_DYNAMODB`: no credentials nor region needed, so each
/// gets as far as the engine's answer (here: the tables are missing). The
/// SDK variables used to take the provider chain (IMDS) and exit on
/// credentials.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loopback_endpoint_needs_no_credentials_however_it_is_named() {
    let (engine, _client) = engine().await;
    let endpoint = engine.endpoint();
    let file = failures_file();
    let base = args(&["run", "--model", "tracker", "--on-failure-file", &file]);
    let named = [
        ("--endpoint", None),
        ("JOBSTREAM_ENDPOINT", Some("JOBSTREAM_ENDPOINT")),
        ("AWS_ENDPOINT_URL", Some("AWS_ENDPOINT_URL")),
        (
            "AWS_ENDPOINT_URL_DYNAMODB",
            Some("AWS_ENDPOINT_URL_DYNAMODB"),
        ),
    ];
    for (how, var) in named {
        let mut env = no_region_nor_credentials();
        let mut a = base.clone();
        match var {
            Some(v) => env.push((v.to_string(), endpoint.clone())),
            None => a.extend(args(&["--endpoint", &endpoint])),
        }
        let out = if var == Some("JOBSTREAM_ENDPOINT") {
            // The helper unsets it: set it on the command itself.
            let out = tokio::task::spawn_blocking({
                let a = a.clone();
                move || {
                    let mut cmd = Command::new(jobstream_bin());
                    with_env(&mut cmd, env)
                        .args(&a)
                        .env_remove("TABLE_NAME")
                        .env_remove("LEDGER_TABLE_NAME")
                        .env_remove("JOBSTREAM_STACK")
                        .output()
                        .expect("runs")
                }
            })
            .await
            .expect("joins");
            out
        } else {
            jobstream(a, env).await
        };
        let err = stderr(&out);
        refused(&out, &["model table", "does not exist"]);
        for absent in ["no AWS credentials", "no AWS region", "IMDS", "WARN"] {
            assert!(!err.contains(absent), "{how}: {absent:?} in {err}");
        }
    }
    std::fs::remove_file(&file).ok();
}

/// Without credentials, a remote endpoint (or AWS) is refused in one
/// line saying how to give them, without the SDK's provider internals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_credentials_are_one_line_saying_how_to_give_them() {
    let remote = "https://dynamodb.jobstream.invalid";
    let mut env = no_region_nor_credentials();
    env.push(("AWS_REGION".into(), "eu-west-1".into()));
    for tool in ["run", "verify"] {
        let a = args(&[tool, "--endpoint", remote, "--model", "tracker"]);
        let out = jobstream(a, env.clone()).await;
        refused(
            &out,
            &["no AWS credentials found for DynamoDB: set AWS_ACCESS_KEY_ID"],
        );
        let err = stderr(&out);
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
        assert!(!err.contains("IMDS"), "{err}");
    }
}

/// `run` of a model with queues against a local `serve` (a loopback
/// endpoint), without `--sqs-endpoint` and without a region, said only
/// `no AWS region for SQS ...`, the flag in a parenthesis (user15): it
/// names `--sqs-endpoint` and `serve`'s `SQS endpoint:` line first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_of_a_model_with_queues_without_sqs_endpoint_names_the_flag_first() {
    let (engine, client) = engine().await;
    let (t, l) = social_tables(&client, "noq-").await;
    let file = failures_file();
    let extra = ["--table", t.as_str(), "--ledger-table", l.as_str()];
    let out = jobstream(
        run_args(&engine.endpoint(), "social", &file, &extra),
        no_region(),
    )
    .await;
    refused(&out, &["--sqs-endpoint", "SQS endpoint:", "AWS_REGION"]);
    let err = stderr(&out);
    assert!(
        err.find("--sqs-endpoint") < err.find("AWS_REGION"),
        "the flag first: {err}"
    );
}
