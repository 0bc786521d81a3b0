//! `jobstream create`: with the binary alone, an operator makes on any
//! DynamoDB + SQS endpoint what `jobstream run` checks for (the stack's
//! tables and queues, named as the stack names them), and the `run` line it
//! prints starts consuming. What exists is left as it is, and an existing
//! table unlike its definition is an error naming the difference. And
//! `dev --sqs-port`, the local SQS at a fixed address.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use jobstream::local::engine::{ensure_table, sdk_config, LocalEngine};
use shared::models::table;

use crate::deployed::args;
use crate::support::jobstream_bin;

/// `jobstream create ARGS`, none of its settings from the environment.
async fn create(args: Vec<String>) -> Output {
    let args = std::iter::once("create".to_string()).chain(args).collect();
    crate::deployed::jobstream(args, vec![]).await
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).to_string()
}

/// The `# then: jobstream run ...` line's arguments.
fn run_line(out: &Output) -> Vec<String> {
    let stdout = text(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("# then: jobstream "))
        .unwrap_or_else(|| panic!("no run line in {stdout}"));
    line.split_whitespace().map(str::to_string).collect()
}

/// Runs `args` until it prints `processors:` (it consumes), then kills it;
/// its stderr and stdout so far when it exits first or takes past a minute.
fn starts_consuming(args: &[String], env: &[(String, String)]) -> Result<(), String> {
    let mut args = args.to_vec();
    args.extend(["--on-failure-file", "/dev/null"].map(String::from));
    until_line(&args, env, "processors:").map(drop)
}

/// Runs `jobstream ARGS` until it prints a line starting with `prefix`,
/// then kills it; that line, or (when it exits first or takes past a
/// minute) why, with its output so far.
fn until_line(args: &[String], env: &[(String, String)], prefix: &str) -> Result<String, String> {
    until_line_logged(args, env, prefix).map(|(line, _)| line)
}

/// [`until_line`], and what the process wrote to stderr until then.
fn until_line_logged(
    args: &[String],
    env: &[(String, String)],
    prefix: &str,
) -> Result<(String, String), String> {
    let mut child = Command::new(jobstream_bin())
        .args(args)
        .envs(env.iter().cloned())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("jobstream run starts");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let started = Instant::now();
    let mut seen = Vec::new();
    let outcome = loop {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(line) if line.starts_with(prefix) => break Ok(line),
            Ok(line) => seen.push(line),
            Err(_) if started.elapsed() > Duration::from_secs(60) => {
                break Err(format!("no `{prefix}` line within 60 s"))
            }
            Err(_) if child.try_wait().ok().flatten().is_some() => {
                break Err("run exited".to_string())
            }
            Err(_) => {}
        }
    };
    child.kill().ok();
    // Reaped before its stderr is read: a local SQS it started shares that
    // pipe and exits only once its parent is gone, not a zombie.
    child.wait().expect("it ends");
    let mut stderr = String::new();
    let read = child
        .stderr
        .take()
        .map(|mut e| e.read_to_string(&mut stderr));
    read.transpose().expect("its stderr");
    match outcome {
        Ok(line) => Ok((line, stderr)),
        Err(why) => Err(format!("{why}: {}\n{stderr}", seen.join("\n"))),
    }
}

/// ops16's #2: `run`, `serve` and `dev` logged text only, so a log
/// pipeline had to parse `key=value` lines. `JOBSTREAM_LOG_FORMAT=json`
/// makes every log line one JSON object (the startup lines stay on stdout,
/// as scripts read them).
#[test]
fn with_jobstream_log_format_json_every_log_line_is_a_json_object() {
    let args: Vec<String> = ["serve", "--listen", "127.0.0.1:0", "--model", "pickem"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let env = |format: &str| {
        vec![
            ("JOBSTREAM_LOG".to_string(), "info".to_string()),
            ("JOBSTREAM_LOG_FORMAT".to_string(), format.to_string()),
        ]
    };
    let (line, logs) = until_line_logged(&args, &env("json"), "models:").expect("serve starts");
    assert_eq!(line, "models: pickem (pickem)");
    let lines: Vec<&str> = logs.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!lines.is_empty(), "serve logged nothing at info");
    for l in &lines {
        let v: serde_json::Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
        assert!(v["level"].is_string() && v["fields"].is_object(), "{l}");
    }
    let (_, text) = until_line_logged(&args, &env("text"), "models:").expect("serve starts");
    assert!(
        text.lines().any(|l| !l.trim_start().starts_with('{')),
        "{text}"
    );
}

/// A fresh engine, and the suite's local SQS endpoint.
async fn engine_and_sqs() -> (LocalEngine, String) {
    let engine = crate::support::start_engine().await;
    let sqs = tokio::task::spawn_blocking(crate::support::sqs)
        .await
        .expect("local SQS");
    (engine, sqs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_makes_what_run_checks_for_and_its_run_line_consumes() {
    let (engine, sqs) = engine_and_sqs().await;
    let endpoint = engine.endpoint();
    let stack = format!("c{}", uuid::Uuid::new_v4().simple());
    let flags = args(&[
        "--model",
        "social",
        "--stack",
        &stack,
        "--endpoint",
        &endpoint,
        "--sqs-endpoint",
        &sqs,
    ]);

    let out = create(flags.clone()).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!("ledger: {stack}-ledger created")),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "queue: {stack}-jobstream-timeline-jobs (DLQ {stack}-"
        )),
        "{err}"
    );
    // The run line takes the same flags, in the same order.
    let run = run_line(&out);
    assert_eq!(run, [vec!["run".to_string()], flags.clone()].concat());
    let run2 = run.clone();
    let consumed = tokio::task::spawn_blocking(move || starts_consuming(&run2, &[])).await;
    consumed.unwrap().expect("the printed run line consumes");

    // Again: nothing is created twice, everything is checked and kept.
    let again = create(flags).await;
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert!(text(&again.stderr).contains(&format!("ledger: {stack}-ledger exists")));
    assert_eq!(run_line(&again), run);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_stack_create_prints_the_queue_urls_and_refuses_a_table_unlike_its_definition() {
    let (engine, sqs) = engine_and_sqs().await;
    let endpoint = engine.endpoint();
    let id = uuid::Uuid::new_v4().simple().to_string();
    let (t, l) = (format!("t{id}"), format!("l{id}"));
    let flags = |ledger: &str| -> Vec<String> {
        args(&[
            "--model",
            "social",
            "--table",
            &t,
            "--ledger-table",
            ledger,
            "--endpoint",
            &endpoint,
            "--sqs-endpoint",
            &sqs,
        ])
    };
    let out = create(flags(&l)).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let var = shared::lambda::queue_env("timeline");
    let export = stdout
        .lines()
        .find_map(|l| l.strip_prefix(&format!("export {var}=")))
        .unwrap_or_else(|| panic!("no {var} export in {stdout}"))
        .to_string();
    assert!(export.ends_with("/jobstream-timeline-jobs"), "{export}");
    let run = run_line(&out);
    assert!(
        run.windows(2).any(|w| w == ["--table", t.as_str()]),
        "{run:?}"
    );
    assert!(
        run.windows(2).any(|w| w == ["--ledger-table", l.as_str()]),
        "{run:?}"
    );
    // The printed line consumes on its own: `run --sqs-endpoint` finds the
    // queues by the names create gave them (user7's G9: it asked for the
    // export).
    let consumed = tokio::task::spawn_blocking(move || starts_consuming(&run, &[])).await;
    consumed.unwrap().expect("the printed run line consumes");

    // A ledger made by hand without TTL: create leaves it and says why
    // `run` would refuse it.
    let client = aws_sdk_dynamodb::Client::new(&sdk_config(Some(&endpoint), 3).await);
    let mut no_ttl = table::ledger();
    no_ttl.ttl_attribute = None;
    let bare = format!("b{id}");
    ensure_table(&client, &no_ttl, &bare).await.unwrap();
    let out = create(flags(&bare)).await;
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains(&format!("ledger: {bare} exists")), "{err}");
    assert!(
        err.contains(&format!("ledger table {bare} has TTL DISABLED")),
        "{err}"
    );
}

/// `dev --sqs-port P` (and `serve --sqs-port P`): the local SQS on that port (scripts and a second
/// process can be pointed at a fixed address), printed as `SQS endpoint:`;
/// a port in use is an error naming it.
#[test]
fn dev_and_serve_start_their_local_sqs_on_the_port_given_and_name_a_port_in_use() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let dev = |port: u16| -> Vec<String> {
        [
            "dev",
            "--model",
            "social",
            "--listen",
            "127.0.0.1:0",
            "--sqs-port",
        ]
        .map(String::from)
        .into_iter()
        .chain([port.to_string()])
        .collect()
    };
    let line = until_line(&dev(port), &[], "SQS endpoint:").expect("dev starts");
    assert_eq!(line, format!("SQS endpoint: http://127.0.0.1:{port}"));
    // The killed dev's local SQS exits within a second of its parent (it
    // checks every second); its stderr is dev's own pipe since the
    // non-blocking output, so nothing above waited for it.
    let free = Instant::now();
    while std::net::TcpListener::bind(("127.0.0.1", port)).is_err() {
        assert!(
            free.elapsed() < Duration::from_secs(10),
            "the port is freed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // `serve --sqs-port`: the engine and an SQS for `create` and `run`,
    // from the binary alone (user7's G8).
    let serve: Vec<String> = [
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--model",
        "social",
        "--sqs-port",
    ]
    .map(String::from)
    .into_iter()
    .chain([port.to_string()])
    .collect();
    let line = until_line(&serve, &[], "SQS endpoint:").expect("serve starts");
    assert_eq!(line, format!("SQS endpoint: http://127.0.0.1:{port}"));

    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let port = taken.local_addr().expect("addr").port();
    let out = crate::support::jobstream(&dev(port));
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!(
            "the local SQS did not start on port {port} (is it in use?)"
        )),
        "{err}"
    );
}

/// The `tables:` line scripts read has one shape, whichever command prints
/// it: each table named once, with what it is (seed12: `serve --model
/// pickem` printed `tables: pickem (pickem) (stream: ...)` where `dev`
/// printed `tables: pickem (stream: ...)`). `serve` says which model each
/// table is for on a `models:` line of its own.
#[test]
fn serve_and_dev_print_the_tables_line_in_one_shape() {
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let shape = "tables: pickem (stream: NEW_AND_OLD_IMAGES), jobstream-ledger (ledger)";
    let dev = until_line(
        &args(&["dev", "--listen", "127.0.0.1:0", "--model", "pickem"]),
        &[],
        "tables:",
    );
    assert_eq!(dev.as_deref(), Ok(shape));
    let serve = args(&["serve", "--listen", "127.0.0.1:0", "--model", "pickem"]);
    assert_eq!(until_line(&serve, &[], "tables:").as_deref(), Ok(shape));
    assert_eq!(
        until_line(&serve, &[], "models:").as_deref(),
        Ok("models: pickem (pickem)")
    );
    let all = until_line(&args(&["serve", "--listen", "127.0.0.1:0"]), &[], "tables:")
        .expect("serve starts");
    assert!(
        all.contains(" lambda_api_applications (stream: NEW_AND_OLD_IMAGES), "),
        "{all}"
    );
    assert!(all.ends_with(", jobstream-ledger (ledger)"), "{all}");
    assert!(!all.contains("(tracker)"), "{all}");
}

/// The region a process signs for on the local engine: the environment's,
/// else the loopback default.
fn local_region() -> String {
    ["AWS_REGION", "AWS_DEFAULT_REGION"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
        .unwrap_or_else(|| "us-east-1".to_string())
}

/// A model that declares an index the existing table lacks (user9's #18:
/// the model gained an index, the table predates it): `create`, `run` and
/// `dev`'s table check (an existing `--db`) name the index instead of
/// writing its keys for an index that is not there, and each gives the step
/// that adds it in place (user13's #2: `run` pointed at `create`, which
/// cannot add it, and `create` at deleting the table): the `update-table`
/// command with the index's keys, then `backfill` and `verify`; `query` on
/// it says the service's error in one line, not the SDK's dump of the
/// response.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_index_the_existing_table_lacks_is_named_and_query_fails_in_one_line() {
    let (engine, sqs) = engine_and_sqs().await;
    let endpoint = engine.endpoint();
    let client = aws_sdk_dynamodb::Client::new(&sdk_config(Some(&endpoint), 3).await);
    let model = shared::models::find("hr").expect("hr");
    let index = model.table.gsis[0].clone();
    let id = uuid::Uuid::new_v4().simple().to_string();
    let (t, l) = (format!("t{id}"), format!("l{id}"));
    let mut without = model.table.clone();
    without.gsis.clear();
    ensure_table(&client, &without, &t).await.unwrap();
    let sk = index.sk.expect("hr's index has a sort key");
    let lacks = format!(
        "{t} lacks index {} ({}, {sk}), which the model declares",
        index.name, index.pk
    );
    // The step, with the table, the endpoint and the index's keys filled in.
    let step = |endpoint: Option<&str>| {
        // The endpoint and the region the process reached it in.
        let at = endpoint.map_or(String::new(), |e| {
            format!(" --endpoint-url {e} --region {}", local_region())
        });
        format!(
            "`aws dynamodb update-table --table-name {t}{at} --attribute-definitions \
             'AttributeName={pk},AttributeType=S' 'AttributeName={sk},AttributeType=S' \
             --global-secondary-index-updates '[{{\"Create\":{{\"IndexName\":\"{name}\",\
             \"KeySchema\":[{{\"AttributeName\":\"{pk}\",\"KeyType\":\"HASH\"}},\
             {{\"AttributeName\":\"{sk}\",\"KeyType\":\"RANGE\"}}],\
             \"Projection\":{{\"ProjectionType\":\"ALL\"}}}}}}]'`",
            pk = index.pk,
            name = index.name
        )
    };
    let then = "then run `jobstream backfill` (it writes every item's keys for the index) and `jobstream verify`";
    let gives_the_step = |err: &str, endpoint: Option<&str>| {
        assert!(err.contains(&step(endpoint)), "{err}");
        assert!(err.contains(then), "{err}");
        assert!(!err.contains("delete the table"), "{err}");
        assert!(!err.contains("`jobstream create` makes them"), "{err}");
    };

    // dev and serve on an existing table (`--db`): its shape is checked.
    let err = ensure_table(&client, &model.table, &t).await.unwrap_err();
    assert!(format!("{err:#}").contains(&lacks), "{err:#}");
    gives_the_step(&format!("{err:#}"), None);

    let flags = args(&[
        "--model",
        "hr",
        "--table",
        &t,
        "--ledger-table",
        &l,
        "--endpoint",
        &endpoint,
        "--sqs-endpoint",
        &sqs,
    ]);
    let out = create(flags.clone()).await;
    assert!(!out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains(&lacks), "{}", text(&out.stderr));
    gives_the_step(&text(&out.stderr), Some(&endpoint));

    // `run` against it (the ledger made as create would).
    ensure_table(&client, &table::ledger(), &l).await.unwrap();
    let run = [vec!["run".to_string()], flags].concat();
    let refused = tokio::task::spawn_blocking(move || starts_consuming(&run, &[])).await;
    let why = refused.unwrap().expect_err("run refuses the table");
    assert!(why.contains(&format!("model table {lacks}")), "{why}");
    gives_the_step(&why, Some(&endpoint));

    // `query` on the missing index: one line, the service's code and message.
    let args = args(&[
        "query",
        "--model",
        "hr",
        "--table",
        &t,
        "--endpoint",
        &endpoint,
        "employees_by_email",
        "email=a@example.com",
    ]);
    let out = tokio::task::spawn_blocking(move || crate::support::jobstream(&args))
        .await
        .unwrap();
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("ValidationException: "), "{err}");
    assert!(!err.contains("Response"), "{err}");
}

/// A model table made without TTL (OneTable's `createTable()` never enables
/// it; import13's #2): `create` leaves it so (enabling TTL deletes the
/// items whose attribute is past: the owner's decision) and gives the
/// command that enables it, never `jobstream create` itself; `verify`
/// reports it as a warning, checks the items all the same, and exits
/// non-zero (a difference from the definition).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_table_without_ttl_gets_the_command_and_verify_still_checks_the_items() {
    let (engine, sqs) = engine_and_sqs().await;
    let endpoint = engine.endpoint();
    let client = aws_sdk_dynamodb::Client::new(&sdk_config(Some(&endpoint), 3).await);
    let model = shared::models::find("social").expect("social");
    let attr = model.table.ttl_attribute.expect("social's table has a TTL");
    let id = uuid::Uuid::new_v4().simple().to_string();
    let (t, l) = (format!("t{id}"), format!("l{id}"));
    let mut no_ttl = model.table.clone();
    no_ttl.ttl_attribute = None;
    ensure_table(&client, &no_ttl, &t).await.unwrap();
    ensure_table(&client, &table::ledger(), &l).await.unwrap();
    // A follow written while nothing ran: its follower item and counts are
    // missing, drift `verify` must find.
    let s = |v: &str| aws_sdk_dynamodb::types::AttributeValue::S(v.into());
    client
        .put_item()
        .table_name(&t)
        .item("PK", s("u#ann#following"))
        .item("SK", s("u#bob"))
        .item("createdAt", s("2026-11-28T09:00:00Z"))
        .send()
        .await
        .unwrap();
    let command = format!(
        "`aws dynamodb update-time-to-live --table-name {t} --endpoint-url {endpoint} \
         --region {} --time-to-live-specification 'Enabled=true,AttributeName={attr}'`",
        local_region()
    );
    let problem = format!("model table {t} has TTL DISABLED");
    let flags = |extra: &[&str]| {
        let mut a = args(&[
            "--model",
            "social",
            "--table",
            &t,
            "--ledger-table",
            &l,
            "--endpoint",
            &endpoint,
        ]);
        a.extend(args(extra));
        a
    };

    let out = create(flags(&["--sqs-endpoint", &sqs])).await;
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains(&problem), "{err}");
    assert!(err.contains(&command), "{err}");
    assert!(!err.contains("`jobstream create` makes them"), "{err}");
    let ttl = client.describe_time_to_live().table_name(&t).send().await;
    let status = ttl
        .unwrap()
        .time_to_live_description
        .and_then(|d| d.time_to_live_status);
    assert_ne!(
        status,
        Some(aws_sdk_dynamodb::types::TimeToLiveStatus::Enabled),
        "create left the table's TTL as it is"
    );

    let out =
        crate::deployed::jobstream([vec!["verify".to_string()], flags(&[])].concat(), vec![]).await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(!out.status.success(), "{stdout}{stderr}");
    let warning = stdout
        .lines()
        .find(|l| l.starts_with("warning: "))
        .unwrap_or_else(|| panic!("no warning line: {stdout}{stderr}"));
    assert!(warning.contains(&problem), "{warning}");
    assert!(stdout.contains(&command), "{stdout}");
    // The items are checked all the same: the follow's drift is found.
    let derived = stdout
        .lines()
        .find(|l| l.starts_with("derived "))
        .unwrap_or_else(|| panic!("no derived row: {stdout}"));
    let cells: Vec<&str> = derived.split('|').map(str::trim).collect();
    assert_eq!(cells[1..4], ["1", "0", "1"], "{stdout}");
    assert!(stdout.contains("drift remains"), "{stdout}");
}
