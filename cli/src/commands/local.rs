//! The local runtime's commands: `dev` (engine, tables, queues and the
//! processors), `demo` (a scenario played and checked) and `serve` (the
//! engine alone).

use std::process::ExitCode;
use std::time::Duration;

use jobstream::local::engine::{ensure_table_in, sdk_config, LocalEngine};
use jobstream::local::esm::RecordReader;
use jobstream::local::lease::CheckpointConfig;
use jobstream::local::remedy::Via;
use jobstream::local::runtime::{Runtime, RuntimeOptions};
use shared::models::{self, Model};

use super::{announce, report_failures, sqs_for, Stop};
use crate::args::{DemoArgs, DevArgs, ModelArgs, ServeArgs};

/// The lease owner of `dev --db`'s mappings.
const DEV_OWNER: &str = "jobstream-dev";

pub(crate) async fn dev(args: DevArgs) -> anyhow::Result<ExitCode> {
    let DevArgs {
        target,
        sqs,
        listen,
        db,
    } = args;
    // Listened for from the start: a signal while the engine and the
    // processors start stops them once started, never kills the process
    // without a word (nor is ignored as PID 1).
    let stop = Stop::listen("stopping once started");
    let model = target.model()?;
    let mut engine = LocalEngine::start(&listen, db.as_deref()).await?;
    let (_local_sqs, sqs) = sqs_for(&model, sqs)?;
    let mut opts = target.options(
        Some(engine.endpoint()),
        RecordReader::Embedded(engine.database().clone()),
    );
    opts.sqs_endpoint = sqs.clone();
    opts.db_file = db.as_ref().map(std::path::PathBuf::from);
    // A file's stream outlives the process: its mappings checkpoint in the
    // file's ledger, as `run`'s do, so a restart reads on from where it
    // stopped instead of the stream's start. One owner for every `dev` on
    // the file: a restarted one (even after SIGKILL) takes its leases back
    // at once.
    if db.is_some() {
        let client = aws_sdk_dynamodb::Client::new(&sdk_config(Some(&engine.endpoint()), 3).await);
        let mut checkpoints = CheckpointConfig::new(client, &target.ledger());
        checkpoints.owner = DEV_OWNER.to_string();
        opts.mapping.checkpoints = Some(checkpoints);
    }
    let mut rt = Runtime::start(opts).await?;
    stop.bound(rt.shutdown_grace);
    engine.start_ttl_sweeper(Duration::from_secs(1));
    announce(Some(&engine), &rt, sqs.as_deref(), &target.model);
    stop.now_doing("finishing batches in flight");
    rt.run_until(stop.signalled()).await?;
    report_failures(&rt);
    engine.stop().await;
    Ok(ExitCode::SUCCESS)
}

pub(crate) async fn demo(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let DemoArgs {
        listen,
        model,
        scenario,
        sqs,
    } = args;
    // The file's scenario (given, next to it, or shipped), or
    // (without one) nothing written and a verify.
    let scenario = scenario_for(&model, scenario.as_deref())?;
    let model = played_model(model, scenario.as_ref())?;
    let m = model.load()?;
    let file = model.file()?;
    let engine = LocalEngine::start(&listen, None).await?;
    let (_local_sqs, sqs) = sqs_for(&m, sqs)?;
    let mut opts = RuntimeOptions::new(
        &model.model,
        Some(engine.endpoint()),
        RecordReader::Embedded(engine.database().clone()),
    );
    opts.model_file = model.model_file.clone();
    opts.sqs_endpoint = sqs.clone();
    let mut rt = Runtime::start(opts).await?;
    jobstream::outln!(
        "jobstream demo: {} on an embedded DynamoDB at {}{}",
        m.about,
        engine.endpoint(),
        sqs.map(|s| format!(" and SQS at {s}")).unwrap_or_default()
    );
    let diffs = match scenario {
        Some((path, s)) => {
            let steps = s.all_steps();
            jobstream::outln!(
                "scenario {path}: {} step(s), {} write(s), {} expected item(s), {} absent, {} quer{}",
                steps.len(),
                steps.iter().map(|s| s.write_count()).sum::<usize>(),
                steps.iter().map(|s| s.expect.len()).sum::<usize>(),
                steps.iter().map(|s| s.absent.len()).sum::<usize>(),
                s.query_count(),
                if s.query_count() == 1 { "y" } else { "ies" }
            );
            // Every step checked (its items, queries, bad input, verify,
            // dead letters), then the processor writes and the fixpoint.
            let mut diffs = shared::file::scenario::play_checked(&mut rt, &s, &file.model, true)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            diffs.extend(demo_verify(&mut rt).await?);
            diffs
        }
        None => {
            jobstream::outln!("no scenario file: nothing written; verify only");
            demo_verify(&mut rt).await?
        }
    };
    engine.stop().await;
    Ok(report(diffs))
}

pub(crate) async fn serve(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let ServeArgs {
        listen,
        db,
        model,
        model_file,
        table,
        ledger_table,
        sqs_port,
    } = args;
    if table.is_some() && model.is_none() && model_file.is_none() {
        anyhow::bail!("--table needs --model or --model-file");
    }
    // Listened for before the engine answers (a signal meanwhile: stopped
    // once started, never killed without a word).
    let stop = Stop::listen("stopping");
    let mut engine = LocalEngine::start(&listen, db.as_deref()).await?;
    engine.start_ttl_sweeper(Duration::from_secs(1));
    let endpoint = engine.endpoint();
    let sdk = sdk_config(Some(&endpoint), 3).await;
    let via = Via::of(Some(&endpoint), &sdk);
    let file = db.as_deref().map(std::path::Path::new);
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    let chosen: Vec<Model> = match (&model, &model_file) {
        (_, Some(file)) => {
            vec![models::load(&models::Source::File(file.clone())).map_err(anyhow::Error::msg)?]
        }
        (Some(name), None) => vec![models::find(name).map_err(anyhow::Error::msg)?],
        (None, None) => models::registry(),
    };
    let (mut tables, mut models) = (Vec::new(), Vec::new());
    for m in &chosen {
        let name = table.clone().unwrap_or_else(|| m.table.name.to_string());
        let made = ensure_table_in(&client, &m.table, &name, via, file).await?;
        if let Some(file) = file {
            for g in &made.added {
                let tool = jobstream::local::provision::tool_flags(
                    model_file.as_deref().ok_or(m.name),
                    table.as_deref(),
                    Some(&ledger_table),
                    Some(&endpoint),
                    None,
                );
                let said = jobstream::local::provision::index_added(&name, file, g, &tool);
                jobstream::errln!("{said}");
            }
        }
        tables.push(format!("{name} (stream: NEW_AND_OLD_IMAGES)"));
        models.push(format!("{name} ({})", m.name));
    }
    ensure_table_in(&client, &models::table::ledger(), &ledger_table, via, file).await?;
    let local_sqs = sqs_port
        .map(jobstream::local::sqs_server::LocalSqs::start_on)
        .transpose()?;
    jobstream::outln!("DynamoDB endpoint: {}", engine.endpoint());
    // The `tables:` line in `dev`'s and `run`'s shape (each table with what
    // it is); which model each is for, on a line of its own.
    jobstream::outln!("tables: {}, {ledger_table} (ledger)", tables.join(", "));
    jobstream::outln!("models: {}", models.join(", "));
    if let Some(sqs) = &local_sqs {
        jobstream::outln!("SQS endpoint: {}", sqs.endpoint());
    }
    stop.signalled().await;
    drop(local_sqs);
    engine.stop().await;
    Ok(ExitCode::SUCCESS)
}

/// The scenario of a model file: `--scenario`, else
/// `<stem>.scenario.yaml` next to the file when it exists, else a shipped
/// model's own (`models/NAME.scenario.yaml`, embedded); with the path it
/// came from.
fn scenario_for(
    model: &ModelArgs,
    given: Option<&std::path::Path>,
) -> anyhow::Result<Option<(String, shared::file::scenario::Scenario)>> {
    use shared::file::scenario::Scenario;
    let path = match (given, &model.model_file) {
        (Some(p), _) => p.to_path_buf(),
        (None, Some(model_file)) => {
            let stem = model_file
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let p = model_file.with_file_name(format!("{stem}.scenario.yaml"));
            if !p.exists() {
                return Ok(None);
            }
            p
        }
        (None, None) => {
            return match shared::file::shipped_scenario(&model.model) {
                Some((path, text)) => Ok(Some((
                    path.to_string(),
                    Scenario::parse(text, path).map_err(anyhow::Error::msg)?,
                ))),
                None => Ok(None),
            };
        }
    };
    let s = Scenario::read(&path).map_err(anyhow::Error::msg)?;
    Ok(Some((path.display().to_string(), s)))
}

/// The model a demo plays: the scenario's `model:` when it names one (a
/// `--model-file`, or a `--model` other than the default, must then be the
/// same model: the same text), else `--model`/`--model-file`.
fn played_model(
    given: ModelArgs,
    scenario: Option<&(String, shared::file::scenario::Scenario)>,
) -> anyhow::Result<ModelArgs> {
    let Some((path, s)) = scenario else {
        return Ok(given);
    };
    let Some(source) = s.model_source(std::path::Path::new(path)) else {
        return Ok(given);
    };
    let declared = match &source {
        models::Source::Name(n) => ModelArgs {
            model: n.clone(),
            model_file: None,
        },
        models::Source::File(p) => ModelArgs {
            model: models::DEFAULT_MODEL.to_string(),
            model_file: Some(p.clone()),
        },
    };
    let chosen = given.model_file.is_some() || given.model != models::DEFAULT_MODEL;
    if chosen {
        let (want, got) = (declared.file()?, given.file()?);
        anyhow::ensure!(
            want.sha256 == got.sha256,
            "scenario {path} plays `model: {}` ({}), not {}",
            s.model.as_deref().unwrap_or_default(),
            want.path.display(),
            given.source()
        );
    }
    Ok(declared)
}

/// `verify` of a demo run: its drift and bad input, printed.
async fn demo_verify(rt: &mut Runtime) -> anyhow::Result<Vec<String>> {
    let report = rt.verify().await?;
    jobstream::outln!("{}", report.render());
    for b in report.bad_input.iter().take(20) {
        jobstream::outln!("bad input (not drift): {b}");
    }
    Ok(report
        .problems
        .iter()
        .map(|p| format!("drift: {p}"))
        .collect())
}

fn report(diffs: Vec<String>) -> ExitCode {
    if diffs.is_empty() {
        jobstream::outln!("\nOK: every derived item is what the scenario implies.");
        ExitCode::SUCCESS
    } else {
        jobstream::outln!("\nFAILED:");
        for d in diffs {
            jobstream::outln!("- {d}");
        }
        ExitCode::FAILURE
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared::file::scenario::Scenario;

    fn args(model: &str, file: Option<&str>) -> ModelArgs {
        ModelArgs {
            model: model.to_string(),
            model_file: file.map(std::path::PathBuf::from),
        }
    }

    fn scenario(text: &str) -> (String, Scenario) {
        let path = "x/s.scenario.yaml".to_string();
        let s = Scenario::parse(text, &path).expect("parses");
        (path, s)
    }

    /// A scenario's `model:` is what a demo plays; a model chosen on the
    /// command line must be the same text.
    #[test]
    fn a_demo_plays_the_model_its_scenario_names() {
        // Two shipped models besides the default, whichever they are.
        let names: Vec<&str> = models::registry()
            .into_iter()
            .map(|m| m.name)
            .filter(|n| *n != models::DEFAULT_MODEL)
            .collect();
        let (named, other) = (names[0], names[1]);
        let sc = scenario(&format!("model: {named}\n"));
        let default = args(models::DEFAULT_MODEL, None);
        let played = played_model(default.clone(), Some(&sc)).expect("the scenario's");
        assert_eq!((played.model.as_str(), played.model_file), (named, None));
        let same_text = format!("{}/../models/{named}.yaml", env!("CARGO_MANIFEST_DIR"));
        let played = played_model(args(models::DEFAULT_MODEL, Some(&same_text)), Some(&sc));
        assert_eq!(played.expect("the same text").model, named);
        let Err(e) = played_model(args(other, None), Some(&sc)) else {
            panic!("another model is an error")
        };
        assert!(
            e.to_string().contains(&format!("plays `model: {named}`")),
            "{e}"
        );
        // No `model:`: the command line's.
        let plain = scenario("writes: []\n");
        let played = played_model(args(other, None), Some(&plain)).expect("given");
        assert_eq!(played.model, other);
        // A file relative to the scenario.
        let file = played_model(default, Some(&scenario("model: ../shop.yaml\n"))).expect("a file");
        assert_eq!(file.model_file, Some("x/../shop.yaml".into()));
    }
}
