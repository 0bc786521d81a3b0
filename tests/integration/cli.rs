//! The `jobstream` binary as a user runs it on a model file (SPEC §8):
//! `check-model` with each problem's place and exit 1, `demo --model-file`
//! with and without a scenario file next to the model, `tables
//! --model-file`.

use std::path::PathBuf;
use std::process::Output;

use crate::support::{jobstream_bin, shipped};

fn jobstream(args: &[&str]) -> Output {
    std::process::Command::new(jobstream_bin())
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .expect("jobstream runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).to_string()
}

#[test]
fn check_model_passes_a_shipped_file_and_places_each_mistake_of_a_broken_one() {
    let library = shipped("examples/library.yaml");
    let ok = jobstream(&["check-model", library.to_str().unwrap()]);
    assert!(ok.status.success(), "{ok:?}");
    assert!(stdout(&ok).ends_with(": OK\n"), "{}", stdout(&ok));

    let text = std::fs::read_to_string(&library).expect("reads");
    let broken_text = text.replacen("days > 0 && days <= 60", "dayz > 0 && days <= 60", 1);
    assert_ne!(broken_text, text, "the mistake is seeded");
    let broken = crate::support::temp_model("broken", &broken_text);
    let line = broken_text
        .lines()
        .position(|l| l.contains("dayz"))
        .expect("seeded line")
        + 1;
    let bad = jobstream(&["check-model", broken.to_str().unwrap()]);
    let out = stdout(&bad);
    assert_eq!(bad.status.code(), Some(1), "{out}");
    let place = format!("{}:{line}:", broken.display());
    assert!(
        out.lines()
            .any(|l| l.starts_with(&place) && l.contains("`dayz`") && l.contains("`days`")),
        "a line `{place}COL: ... dayz ... (did you mean days)`: {out}"
    );
}

/// user15's #5: declaring `history:` makes the processor delete the
/// application's own items (a booking's payments, when the booking is
/// deleted or moved), and `check-model` said only OK. It names, per
/// history, what deleting its root deletes.
#[test]
fn check_model_says_what_deleting_a_history_root_deletes() {
    let tracker = shipped("tracker.yaml");
    let ok = jobstream(&["check-model", tracker.to_str().unwrap()]);
    let out = stdout(&ok);
    assert!(ok.status.success(), "{out}");
    assert!(
        out.lines().any(|l| l
            == "history application: deleting an application (or moving it: a delete and a put) \
                deletes its stage items and its entries (history_entry items) (cascade: true)"),
        "{out}"
    );
    assert!(out.ends_with(": OK\n"), "{out}");
}

#[test]
fn demo_of_a_model_file_plays_its_scenario_or_only_verifies() {
    // hr.yaml has hr.scenario.yaml next to it: played, then verified.
    let hr = jobstream(&["demo", "--model-file", shipped("hr.yaml").to_str().unwrap()]);
    assert!(hr.status.success(), "{}", stdout(&hr));
    assert!(stdout(&hr).contains("scenario "), "{}", stdout(&hr));
    // library.yaml has none: nothing written, verify only.
    let library = jobstream(&[
        "demo",
        "--model-file",
        shipped("examples/library.yaml").to_str().unwrap(),
    ]);
    assert!(library.status.success(), "{}", stdout(&library));
    assert!(
        stdout(&library).contains("no scenario file: nothing written; verify only"),
        "{}",
        stdout(&library)
    );
}

/// What the CDK app runs for `-c modelFile=PATH`: the definition the
/// parity test synthesises (`deploy::definitions_of` of the loaded file).
#[test]
fn tables_of_a_model_file_prints_the_definition_the_stack_reads() {
    let file = shipped("examples/library.yaml");
    let out = jobstream(&["tables", "--model-file", file.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let printed: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let model = shared::file::model(&file).expect("loads");
    assert_eq!(
        printed,
        jobstream::tools::deploy::definitions_of(&[model]),
        "the binary prints the definition the parity test compares"
    );
    assert_eq!(printed["models"][0]["name"], "library");
}

#[test]
fn demo_prints_only_its_report_on_stdout_even_while_installing_the_local_sqs() {
    // A fresh install directory: the first run installs the local SQS
    // (npm ci), whose own report must not reach stdout.
    let src = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/local-sqs"));
    let dir = std::env::temp_dir().join(format!("jobstream-sqs-install-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    for f in ["package.json", "package-lock.json", "server.mjs"] {
        std::fs::copy(src.join(f), dir.join(f)).expect("copies");
    }
    let out = std::process::Command::new(jobstream_bin())
        .args(["demo", "--model", "social"])
        .env("JOBSTREAM_LOCAL_SQS_DIR", &dir)
        .output()
        .expect("jobstream runs");
    let _ = std::fs::remove_dir_all(&dir);
    let text = stdout(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}\n{err}");
    assert!(
        err.contains("installing the local SQS"),
        "the install happened (on stderr): {err}"
    );
    assert!(text.starts_with("jobstream demo: "), "{text}");
    for l in text.lines() {
        assert!(
            !l.contains("added ") && !l.contains("packages") && !l.contains("npm"),
            "not a line of the demo's report: `{l}`"
        );
    }
    assert!(
        text.ends_with("OK: every derived item is what the scenario implies.\n"),
        "{text}"
    );
}

/// `jobstream tables | head -1`: the reader goes before the output is
/// written; the command ends without a panic (it printed one with a
/// backtrace: `failed printing to stdout: Broken pipe`).
#[test]
fn a_printing_command_whose_reader_is_gone_ends_quietly() {
    let mut child = std::process::Command::new(jobstream_bin())
        .args(["tables"])
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("jobstream runs");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("ends");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert!(!out.status.success(), "the write failed: {:?}", out.status);
}

/// With the binary alone a user can read a shipped model's file and its
/// demo (user finding R2: the README points at models/social.yaml); an
/// unknown name exits 2 naming the shipped ones.
#[test]
fn models_prints_a_shipped_file_and_its_demo() {
    let social = jobstream(&["models", "social"]);
    assert!(social.status.success(), "{social:?}");
    let file = std::fs::read_to_string(shipped("social.yaml")).expect("reads");
    assert_eq!(stdout(&social), file);
    let demo = jobstream(&["models", "social", "--scenario"]);
    assert!(demo.status.success(), "{demo:?}");
    let scenario = std::fs::read_to_string(shipped("social.scenario.yaml")).expect("reads");
    assert_eq!(stdout(&demo), scenario);
    let list = jobstream(&["models"]);
    assert!(stdout(&list).contains("social"), "{}", stdout(&list));
    let unknown = jobstream(&["models", "nope"]);
    assert_eq!(unknown.status.code(), Some(2));
    let err = String::from_utf8_lossy(&unknown.stderr);
    assert!(
        err.contains("models/nope.yaml") && err.contains("social"),
        "{err}"
    );
}

/// The help of `--endpoint` of each command, as `--help` prints it (the
/// option's text up to the next option).
fn endpoint_help(command: &str) -> Option<String> {
    let help = stdout(&jobstream(&[command, "--help"]));
    let mut lines = help
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("--endpoint <"));
    let first = lines
        .next()?
        .trim_start()
        .trim_start_matches("--endpoint <ENDPOINT>");
    let rest = lines.take_while(|l| {
        let t = l.trim_start();
        !(t.starts_with("--") || t.starts_with("-h,") || t.starts_with("Examples:"))
    });
    Some(
        std::iter::once(first)
            .chain(rest)
            .map(str::trim)
            .collect::<Vec<_>>()
            .join(" "),
    )
}

/// Each command's `--endpoint` says one thing: what it reaches, one
/// example, one default (user8: `query --help` ran two descriptions
/// together, "default: the SDK's own (AWS). DynamoDB and DynamoDB Streams
/// endpoint, ... (default: the region's ...)"); only `run` reads the
/// stream, so only it names DynamoDB Streams.
#[test]
fn every_commands_endpoint_help_says_one_thing() {
    let mut with = Vec::new();
    for command in [
        "dev",
        "demo",
        "serve",
        "run",
        "create",
        "verify",
        "backfill",
        "tables",
        "check-model",
        "graph",
        "import",
        "explain",
        "query",
        "models",
    ] {
        let Some(help) = endpoint_help(command) else {
            continue;
        };
        with.push(command);
        assert!(help.contains("DynamoDB"), "{command}: {help}");
        assert!(help.matches("default").count() <= 1, "{command}: {help}");
        assert!(help.matches("e.g.").count() <= 1, "{command}: {help}");
        assert!(
            help.matches("endpoint").count() <= 1,
            "{command}: one description: {help}"
        );
        assert_eq!(
            help.contains("Streams"),
            command == "run",
            "{command}: only `run` reads the stream: {help}"
        );
    }
    assert_eq!(
        with,
        ["run", "create", "verify", "backfill", "explain", "query"]
    );
}

/// `backfill --segments` takes what DynamoDB's `TotalSegments` takes,
/// 1..=1,000,000 (hostile13's #7: 0 scanned nothing and exited 0, a silent
/// no-op adoption; #8: 1,000,000 started every segment at once and grew
/// past 7 GB): anything else is a usage error naming the range, before
/// anything is read.
#[test]
fn backfill_segments_outside_what_dynamodb_takes_is_a_usage_error() {
    for bad in ["0", "1000001"] {
        let out = jobstream(&[
            "backfill",
            "--model",
            "tracker",
            "--endpoint",
            "http://127.0.0.1:9",
            "--segments",
            bad,
            "--dry-run",
        ]);
        assert_eq!(out.status.code(), Some(2), "--segments {bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("1..=1000000"), "--segments {bad}: {err}");
    }
}

/// hostile13 #4 and #5 as the process sees them: a file whose `d` and `e`
/// both derive the unshared `c` by its id (and `d` twice, with different
/// values), and whose `d` declares `type: int` beside the checked stamp
/// `type`, loaded as `OK` and then lost a derived item (`verify`: drift)
/// and made every `d` bad input. `check-model` now exits 1 with each
/// problem at its place; `c` shared and `d`'s derives one, the file is OK.
#[test]
fn check_model_refuses_derives_that_can_imply_one_item_and_an_attribute_named_like_the_stamp() {
    let text = r#"jobstream: 1
name: collide
table: { name: collide, pk: PK, sk: SK }
entities:
  c:
    owner: processor
    key: { PK: "C#${id}", SK: "C" }
    attributes: { id: string, v: string }
  d:
    key: { PK: "D#${id}", SK: "D" }
    attributes: { id: string, type: int, note: string }
    derive:
      - entity: c
        with: { id: id, v: "'one'" }
      - entity: c
        with: { id: id, v: "'two'" }
  e:
    key: { PK: "E#${id}", SK: "E" }
    attributes: { id: string }
    derive:
      - entity: c
        with: { id: id, v: "'three'" }
"#;
    let file = crate::support::temp_model("collide", text);
    let bad = jobstream(&["check-model", file.to_str().unwrap()]);
    let out = stdout(&bad);
    assert_eq!(bad.status.code(), Some(1), "{out}");
    let at = |place: &str, says: &str| {
        let place = format!("{}:{place}: ", file.display());
        assert!(
            out.lines()
                .any(|l| l.starts_with(&place) && l.contains(says)),
            "a line `{place}... {says}`: {out}"
        );
    };
    at("11:37", "`type` is the table's `entity_type`");
    at("15:17", "(`v`: `'one'` and `'two'`)");
    at(
        "21:17",
        "e: derive `c` and `d`'s derive `c` (line 13) can imply one `c` item (PK=C#x, SK=C)",
    );
    at("21:17", "mark `c` `shared: true`");
    assert_eq!(out.lines().count(), 4, "{out}");

    let fixed = text
        .replace("type: int, ", "")
        .replace("owner: processor", "owner: processor\n    shared: true")
        .replace(
            "      - entity: c\n        with: { id: id, v: \"'two'\" }\n",
            "",
        );
    let file = crate::support::temp_model("collide_fixed", &fixed);
    let ok = jobstream(&["check-model", file.to_str().unwrap()]);
    assert!(ok.status.success(), "{}", stdout(&ok));
}

/// A built-in called in a shape the evaluator does not run (user15 #1:
/// `startsWith(checkIn, checkInMonth)`, `size(code, 1)`) was `OK` for
/// `check-model` and then made every item bad input. It exits 1, each
/// call at its line and column with the call to write; written as the
/// evaluator runs them, the file is OK.
#[test]
fn check_model_refuses_a_call_of_a_shape_that_does_not_run_with_the_call_to_write() {
    let text = r#"jobstream: 1
name: shapes
table: { name: shapes, pk: PK, sk: SK }
entities:
  stay:
    key: { PK: "S#${id}", SK: "S" }
    attributes: { id: string, checkIn: string, checkInMonth: string, code: string }
    check:
      - { expr: "startsWith(checkIn, checkInMonth)", attribute: checkIn, message: "check-in outside its month" }
      - { expr: "size(code, 1) > 0 && endsWith(code, 'Z')", attribute: code, message: "bad code" }
"#;
    let file = crate::support::temp_model("shapes", text);
    let bad = jobstream(&["check-model", file.to_str().unwrap()]);
    let out = stdout(&bad);
    assert_eq!(bad.status.code(), Some(1), "{out}");
    let at = |place: &str, says: &str| {
        let place = format!("{}:{place}: ", file.display());
        assert!(
            out.lines()
                .any(|l| l.starts_with(&place) && l.contains(says)),
            "a line `{place}... {says}`: {out}"
        );
    };
    at("9:18", "write `checkIn.startsWith(checkInMonth)`");
    at("10:18", "`size` takes 1 argument");
    at("10:39", "write `code.endsWith('Z')`");
    assert_eq!(out.lines().count(), 3, "{out}");

    let fixed = text
        .replace(
            "startsWith(checkIn, checkInMonth)",
            "checkIn.startsWith(checkInMonth)",
        )
        .replace(
            "size(code, 1) > 0 && endsWith(code, 'Z')",
            "size(code) > 0 && code.endsWith('Z')",
        );
    let file = crate::support::temp_model("shapes_fixed", &fixed);
    let ok = jobstream(&["check-model", file.to_str().unwrap()]);
    assert!(ok.status.success(), "{}", stdout(&ok));
}
