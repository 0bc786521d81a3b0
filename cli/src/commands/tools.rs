//! The tools: `verify`, `backfill`, `explain`, `query`, `tables`,
//! `check-model`, `import`, `graph` and `models`.

use std::process::ExitCode;

use jobstream::local::deployed::{fail_on, queue_urls, table_findings, Finding, Kind};
use jobstream::local::engine::{
    dynamodb_endpoint, require_credentials, require_region, sdk_config,
};
use jobstream::local::remedy::Via;
use shared::lambda::{Config, Processors};
use shared::models::{self, Model};

use crate::args::{
    BackfillArgs, CheckModelArgs, ExplainArgs, GraphArgs, ImportArgs, ModelsArgs, QueryArgs,
    TablesArgs, Target, ToolSqs, VerifyArgs,
};

pub(crate) async fn verify(args: VerifyArgs) -> anyhow::Result<ExitCode> {
    let VerifyArgs {
        endpoint,
        target,
        repair,
        dry_run,
        settle,
        all,
        sqs,
    } = args;
    let model = target.model()?;
    let writes = repair && !dry_run;
    let (config, p, warnings) =
        tool_setup(&target, &model, endpoint.endpoint, &sqs, writes, true).await?;
    // What the check reports and goes on past (the model table's TTL):
    // a difference, so the exit is non-zero, but the items are checked.
    for w in &warnings {
        jobstream::outln!(
            "warning: {}",
            jobstream::local::deployed::said(std::slice::from_ref(w))
        );
    }
    let mut report = jobstream::tools::verify::verify(&model, &p, &config).await?;
    print_report(&report, all);
    if repair && !report.is_clean() {
        if dry_run {
            jobstream::outln!("dry run: {} repair(s) would run", report.repairs.len());
            let table = &model.table;
            for line in report.dry_run(&[table.pk, table.sk]) {
                jobstream::outln!("{line}");
            }
        } else {
            let ran = jobstream::tools::verify::repair(&p, &report).await?;
            jobstream::outln!("repair: {ran} repair(s) ran through the live path");
            report = jobstream::tools::verify_settle::settled(
                std::time::Duration::from_secs(settle),
                std::time::Duration::from_secs(2),
                || jobstream::tools::verify::verify(&model, &p, &config),
                |r| {
                    jobstream::outln!(
                        "waiting for the processors to settle: {} finding(s) left",
                        r.problems.len()
                    )
                },
            )
            .await?;
            print_report(&report, all);
        }
    }
    let clean = report.is_clean();
    jobstream::outln!("{}", if clean { "no drift" } else { "drift remains" });
    if !warnings.is_empty() {
        jobstream::outln!(
            "the table differs from the model's definition: {} warning(s) above",
            warnings.len()
        );
    }
    Ok(success_if(clean && warnings.is_empty()))
}

pub(crate) async fn backfill(args: BackfillArgs) -> anyhow::Result<ExitCode> {
    let BackfillArgs {
        endpoint,
        target,
        segments,
        rate,
        checkpoint,
        dry_run,
        sqs,
    } = args;
    let model = target.model()?;
    let (config, p, _) =
        tool_setup(&target, &model, endpoint.endpoint, &sqs, !dry_run, false).await?;
    let opts = jobstream::tools::backfill::ScanOptions {
        segments,
        rate,
        checkpoint,
        ..Default::default()
    };
    let client = p.store.client().clone();
    let (report, totals) =
        jobstream::tools::backfill::backfill(&client, &config, &p, &opts, dry_run).await?;
    jobstream::outln!(
        "backfill of {}: {} items scanned in {:.2?} ({:.0} items/s){}",
        config.table,
        report.scanned,
        report.elapsed,
        report.items_per_sec(),
        if dry_run { " [dry run]" } else { "" }
    );
    jobstream::outln!("{}", totals.line(dry_run));
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn tables(args: TablesArgs) -> anyhow::Result<ExitCode> {
    let TablesArgs { model_file } = args;
    let defs = match model_file {
        Some(file) => {
            jobstream::tools::deploy::definitions_of(&[
                models::load(&models::Source::File(file)).map_err(anyhow::Error::msg)?
            ])
        }
        None => jobstream::tools::deploy::definitions(),
    };
    println!("{}", serde_json::to_string_pretty(&defs)?);
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn check_model(args: CheckModelArgs) -> anyhow::Result<ExitCode> {
    let path = args.path;
    let checked = shared::file::check(&path);
    match &checked {
        Ok(notes) => {
            for note in notes {
                println!("{note}");
            }
            println!("{}: OK", path.display())
        }
        Err(e) => e.lines().iter().for_each(|line| println!("{line}")),
    }
    Ok(success_if(checked.is_ok()))
}

pub(crate) fn import(args: ImportArgs) -> anyhow::Result<ExitCode> {
    let ImportArgs {
        from,
        schema,
        name,
        table,
        out,
        force,
    } = args;
    let problems =
        jobstream::tools::import::run(from, &schema, name, table, out.as_deref(), force)?;
    for p in &problems {
        eprintln!("{p}");
    }
    Ok(success_if(problems.is_empty()))
}

pub(crate) async fn explain(args: ExplainArgs) -> anyhow::Result<ExitCode> {
    let ExplainArgs {
        endpoint,
        target,
        pk,
        sk,
    } = args;
    // Usage errors first, before any request (exit 2, as `query`'s).
    if let Some(e) = jobstream::tools::explain::key_error(&pk, &sk) {
        eprintln!("error: {e}");
        return Ok(ExitCode::from(2));
    }
    let model = target.model()?;
    let config = target.config(&model);
    let file = Some(&target.model.file()?.model);
    let client = dynamodb_client(dynamodb_endpoint(endpoint.endpoint)?.as_deref()).await?;
    let key = jobstream::tools::explain::key(&model, pk, sk);
    let tables = jobstream::tools::explain::Tables {
        client: &client,
        table: &config.table,
        ledger: &config.ledger_table,
    };
    let x = jobstream::tools::explain::explain(&model, file, &tables, &key).await?;
    for line in &x.lines {
        println!("{line}");
    }
    // The answer is printed either way (an absent derived item: what
    // should imply it); a key no item has is an error, as `grep` finds
    // nothing.
    if !x.present {
        eprintln!(
            "error: no item has the key {} in table {}",
            shared::item::display_key(&key),
            config.table
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn graph(args: GraphArgs) -> anyhow::Result<ExitCode> {
    let graph = jobstream::tools::graph::file_graph(&args.model.file()?.model);
    print!("{graph}");
    Ok(ExitCode::SUCCESS)
}

/// `jobstream models`: the shipped models, or one's file or demo (an
/// unknown name exits 2).
pub(crate) fn models(args: ModelsArgs) -> ExitCode {
    let Some(name) = args.name else {
        for m in models::registry() {
            println!("{:<10} {}", m.name, m.about);
        }
        return ExitCode::SUCCESS;
    };
    let (path, list) = if args.scenario {
        (
            format!("models/{name}.scenario.yaml"),
            shared::file::SHIPPED_SCENARIOS,
        )
    } else {
        (format!("models/{name}.yaml"), shared::file::SHIPPED)
    };
    match list.iter().find(|(p, _)| *p == path) {
        Some((_, text)) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        None => {
            eprintln!(
                "error: no shipped {path} (the shipped models: {})",
                shared::file::shipped_names().collect::<Vec<_>>().join(", ")
            );
            ExitCode::from(2)
        }
    }
}

/// `jobstream query`: list the queries, or run one (usage errors exit 2).
pub(crate) async fn query(args: QueryArgs) -> anyhow::Result<ExitCode> {
    let QueryArgs {
        endpoint,
        model,
        table,
        json,
        page_size,
        name,
        params,
    } = args;
    let file = &model.file()?.model;
    let mut stdout = std::io::stdout();
    let Some(name) = name else {
        jobstream::tools::query::list(file, &mut stdout)?;
        return Ok(ExitCode::SUCCESS);
    };
    // Usage errors first, before any request.
    let bound = match jobstream::tools::query::prepare(file, &name, &params) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let table = table.unwrap_or_else(|| file.table.name.to_string());
    let client = dynamodb_client(dynamodb_endpoint(endpoint.endpoint)?.as_deref()).await?;
    let out = shared::file::query_run::run(&client, &table, &bound, page_size).await?;
    jobstream::tools::query::print(file, &name, &out, json, &mut stdout)?;
    if json {
        if let Some(note) = jobstream::tools::query::json_note(file, &name) {
            eprintln!("{note}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A tool's configuration and the processors it runs ([`tool_config`],
/// [`tool_processors`]), through `endpoint` (or the environment's), and,
/// for a check that reports them (`reports_ttl`: `verify`), the model
/// table's TTL findings, which then do not stop it.
async fn tool_setup(
    target: &Target,
    model: &Model,
    endpoint: Option<String>,
    sqs: &ToolSqs,
    writes: bool,
    reports_ttl: bool,
) -> anyhow::Result<(Config, Processors, Vec<Finding>)> {
    let endpoint = dynamodb_endpoint(endpoint)?;
    let config = tool_config(target, model, sqs, writes).await?;
    let (p, reported) = tool_processors(
        model,
        &config,
        endpoint.as_deref(),
        sqs,
        writes,
        reports_ttl,
    )
    .await?;
    Ok((config, p, reported))
}

/// A tool's configuration. Its queues (`--stack`'s, `--sqs-endpoint`'s by
/// name, or `QUEUE_URL_<LOGICAL>`) are resolved before anything is read;
/// when the tool will enqueue (`writes`), a model queue without a URL is an
/// error then, never after half the work.
async fn tool_config(
    target: &Target,
    model: &Model,
    sqs: &ToolSqs,
    writes: bool,
) -> anyhow::Result<Config> {
    jobstream::local::deployed::require_queue_urls_valid(model, |v| std::env::var(v).ok())?;
    let mut config = target.config(model);
    if model.consumers.is_empty() {
        return Ok(config);
    }
    let naming = match jobstream::local::deployed::QueueNames::of(
        target.stack.as_deref(),
        sqs.sqs_endpoint.as_deref(),
    ) {
        jobstream::local::deployed::QueueNames::EnvOnly => None,
        naming => Some(naming),
    };
    // A tool that sends no job (verify without --repair, a dry run) needs
    // no queue and looks none up.
    if let Some(naming) = naming.filter(|_| writes) {
        let c = sdk_config(sqs.sqs_endpoint.as_deref(), 5).await;
        require_region(&c, "SQS")?;
        let asked = jobstream::local::deployed::sqs_asked(sqs.sqs_endpoint.as_deref());
        config.queues = queue_urls(&aws_sdk_sqs::Client::new(&c), &asked, model, naming, |v| {
            std::env::var(v).ok()
        })
        .await?;
    }
    let missing: Vec<String> = model
        .queues()
        .iter()
        .filter(|q| !config.queues.contains_key(q.logical))
        .map(|q| shared::lambda::queue_env(q.logical))
        .collect();
    if writes && !missing.is_empty() {
        anyhow::bail!(
            "model {} sends jobs to its queues, and {} ha{} no URL: give --stack S (the deployed \
             queues), --sqs-endpoint URL (the queues by their names, as `jobstream dev` creates \
             them: it prints `SQS endpoint:`), or {}; nothing was written",
            model.name,
            missing.join(", "),
            if missing.len() == 1 { "s" } else { "ve" },
            missing.join(" / ")
        );
    }
    Ok(config)
}

/// The processors a tool uses (verify, backfill): the live path's, through
/// the given endpoint; SQS through `AWS_ENDPOINT_URL_SQS` or the default
/// chain, only for a tool that sends jobs (`writes`). The tables must exist
/// as deployed (nothing is created), but for the model table's TTL when
/// `reports_ttl` (returned, for the caller to report).
async fn tool_processors(
    model: &Model,
    config: &Config,
    endpoint: Option<&str>,
    sqs: &ToolSqs,
    writes: bool,
    reports_ttl: bool,
) -> anyhow::Result<(Processors, Vec<Finding>)> {
    let client = dynamodb_client(endpoint).await?;
    let region = client.config().region().map(|r| r.to_string());
    let via = Via {
        endpoint,
        region: region.as_deref(),
    };
    let (table, ledger) = (&config.table, &config.ledger_table);
    let found = table_findings(&client, &model.table, table, "model table", via).await?;
    let (reported, mut stopping): (Vec<Finding>, Vec<Finding>) = found
        .into_iter()
        .partition(|f| reports_ttl && f.kind == Kind::Ttl);
    let ledger_def = shared::models::table::ledger();
    stopping.extend(table_findings(&client, &ledger_def, ledger, "ledger table", via).await?);
    fail_on(model, &stopping)?;
    let store = shared::store::Store::new(client);
    // An SQS client only for a tool that sends jobs to a queue with a URL:
    // a `verify` without --repair or a dry run needs no SQS region, even
    // with the `QUEUE_URL_<LOGICAL>` variables `create` prints set.
    let sqs = if !writes || config.queues.is_empty() {
        None
    } else {
        let c = sdk_config(sqs.sqs_endpoint.as_deref(), 5).await;
        require_region(&c, "SQS")?;
        Some(aws_sdk_sqs::Client::new(&c))
    };
    Ok((Processors::new(model, config, store, sqs), reported))
}

/// A DynamoDB client through `endpoint` (else the environment's), once
/// its region and credentials are there.
async fn dynamodb_client(endpoint: Option<&str>) -> anyhow::Result<aws_sdk_dynamodb::Client> {
    let sdk = sdk_config(endpoint, 5).await;
    require_region(&sdk, "DynamoDB")?;
    require_credentials(&sdk, "DynamoDB").await?;
    Ok(aws_sdk_dynamodb::Client::new(&sdk))
}

/// Exit 0 when `ok`, else 1.
fn success_if(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn print_report(report: &jobstream::tools::verify::Report, all: bool) {
    jobstream::outln!("{}", report.render());
    for line in report.listing(all) {
        jobstream::outln!("{line}");
    }
}
