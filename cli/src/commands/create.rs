//! `jobstream create`: what `jobstream run` needs, on an endpoint that no
//! CDK stack deploys to (`jobstream serve`, DynamoDB Local, moto, a second
//! engine): the model's table, the ledger and each queue with its DLQ, as
//! the stack defines and names them. `run` itself never creates anything.

use std::process::ExitCode;

use jobstream::local::deployed::{require_queue, require_tables};
use jobstream::local::engine::{ensure_table_at, require_credentials, require_region, sdk_config};
use jobstream::local::remedy::Via;
use jobstream::local::runtime::queue_visibility;
use jobstream::local::sqs_esm::create_queue;
use shared::models::table::{self, STACK_NAMES};

use crate::args::CreateArgs;

/// Creates what is missing, then checks everything as `run` checks it (an
/// existing table or queue that differs from the definition is an error
/// naming the difference), and prints the `run` command line to use.
pub(crate) async fn create(args: CreateArgs) -> anyhow::Result<ExitCode> {
    let CreateArgs {
        endpoint,
        target,
        sqs_endpoint,
    } = args;
    let model = target.model()?;
    let sdk = sdk_config(Some(&endpoint), 5).await;
    require_region(&sdk, "DynamoDB")?;
    require_credentials(&sdk, "DynamoDB").await?;
    let sqs_at = sqs_endpoint.as_deref().unwrap_or(&endpoint);
    // SQS's region and credentials too, before anything is created.
    let sqs_sdk = if model.consumers.is_empty() {
        None
    } else {
        let sdk = sdk_config(Some(sqs_at), 5).await;
        let what = format!("SQS at {sqs_at}");
        require_region(&sdk, &what)?;
        require_credentials(&sdk, &what).await?;
        Some(sdk)
    };
    let ddb = aws_sdk_dynamodb::Client::new(&sdk);
    let via = Via::of(Some(&endpoint), &sdk);
    let (name, ledger) = (target.table_name(&model), target.ledger());
    for (def, name, role) in [
        (model.table.clone(), &name, "model table"),
        (table::ledger(), &ledger, "ledger"),
    ] {
        let created = ensure_table_at(&ddb, &def, name, via).await?;
        let said = if created { "created" } else { "exists" };
        jobstream::errln!("{role}: {name} {said}");
    }
    require_tables(&ddb, &model, &name, &ledger, via).await?;

    let mut exports = Vec::new();
    if let Some(sdk) = &sqs_sdk {
        let sqs = aws_sdk_sqs::Client::new(sdk);
        let prefix = target
            .stack
            .as_deref()
            .map_or(String::new(), |s| STACK_NAMES.queue(s, ""));
        for def in &model.queues() {
            let visibility = queue_visibility(def, 1.0);
            // CreateQueue of an existing queue with other attributes fails
            // (QueueAlreadyExists); the check below names what differs.
            let queue = create_queue(&sqs, def, &prefix, visibility).await;
            let url = match queue {
                Ok(q) => q.url,
                Err(e) => {
                    let name = format!("{prefix}{}", def.name);
                    let url = sqs.get_queue_url().queue_name(&name).send().await;
                    match url.ok().and_then(|u| u.queue_url) {
                        Some(url) => url,
                        None => {
                            let given = if sqs_endpoint.is_some() {
                                "--sqs-endpoint"
                            } else {
                                "no --sqs-endpoint given, so --endpoint"
                            };
                            return Err(e.context(format!(
                                "creating queue {name} at {sqs_at} ({given}): is it an SQS endpoint?"
                            )));
                        }
                    }
                }
            };
            require_queue(&sqs, def, &url, visibility).await?;
            jobstream::errln!(
                "queue: {prefix}{} (DLQ {prefix}{}, visibility {} s, maxReceiveCount {})",
                def.name,
                def.dlq_name,
                def.visibility_timeout_secs,
                def.max_receive_count
            );
            exports.push(format!(
                "export {}={url}",
                shared::lambda::queue_env(def.logical)
            ));
        }
    }

    // Without a stack, `run` finds the queues by their variables.
    let mut line = format!("jobstream run {}", target.model.flag());
    match &target.stack {
        Some(stack) => line.push_str(&format!(" --stack {stack}")),
        None => exports.iter().for_each(|e| jobstream::outln!("{e}")),
    }
    if target.stack.is_none() || target.ledger_table.is_some() {
        line.push_str(&format!(" --ledger-table {ledger}"));
    }
    if let Some(table) = &target.table {
        line.push_str(&format!(" --table {table}"));
    }
    line.push_str(&format!(" --endpoint {endpoint}"));
    if !exports.is_empty() {
        line.push_str(&format!(" --sqs-endpoint {sqs_at}"));
    }
    jobstream::outln!("# then: {line}");
    Ok(ExitCode::SUCCESS)
}
