//! Benchmark (not a test): the suggestions Lambda's handler on the embedded
//! engine, called in-process (never through SQS). One city with JOBS open
//! jobs and SEEKERS seekers; one SQS batch of seeker jobs (the join set's `seeker` scope), each
//! scoring the seeker against every job. Prints time per scored pair and
//! DynamoDB item writes per suggestion, against a plain PutItem measured in
//! the same run. `cargo bench -p jobstream --bench suggestions`.

mod common;

use std::time::Instant;

use aws_lambda_events::event::sqs::SqsEvent;
use jobstream::local::engine::LocalEngine;
use jobstream::local::runtime::Runtime;
use jobstream::local::sqs_server::LocalSqs;
use lambda_runtime::{Context, LambdaEvent};

#[path = "common/seed_items.rs"]
mod seed_items;
use seed_items::jobboard::{self as keys, days_ago, seeker_changed, NewJob, Writer};
use shared::store::SortKey;

const SKILLS: [&str; 6] = ["rust", "aws", "go", "k8s", "sql", "python"];

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let jobs = common::env_usize("JOBS", 200);
    let seekers = common::env_usize("SEEKERS", 50);
    let engine = LocalEngine::start("127.0.0.1:0", None).await?;
    // The local SQS only hosts the (unused here) queues the runtime creates.
    let sqs = LocalSqs::start()?;
    let mut opts = common::options("jobboard", &engine);
    opts.sqs_endpoint = Some(sqs.endpoint());
    let meter = common::meter_processors(&mut opts, &engine.endpoint()).await?;
    let rt = Runtime::start(opts).await?;
    let consumer = rt.consumer("suggestions");
    let w = Writer::new(rt.dynamodb.clone(), &rt.config.table);
    for j in 0..jobs {
        let skills = [SKILLS[j % 6], SKILLS[(j + 1) % 6]];
        let id = format!("job{j:04}");
        let job = NewJob {
            job_id: &id,
            employer_id: "e1",
            city: "Montreal",
            posted_at: days_ago((j % 20) as i64),
            zip: "H2X",
            title: "Engineer",
            skills: &skills,
            category: "tech",
            salary_max: 100_000 + (j as i64 % 5) * 10_000,
        };
        w.create_job(&job).await.map_err(anyhow::Error::msg)?;
    }
    for k in 0..seekers {
        let skills = [SKILLS[k % 6], SKILLS[(k + 2) % 6]];
        w.seeker(
            &format!("s{k:04}"),
            "S",
            "Montreal",
            &skills,
            90_000 + (k as i64 % 7) * 10_000,
            &["tech"],
        )
        .await
        .map_err(anyhow::Error::msg)?;
    }
    let records: Vec<serde_json::Value> = (0..seekers)
        .map(|k| serde_json::json!({"messageId": format!("m{k}"), "receiptHandle": "h", "body": seeker_changed(&format!("s{k:04}"), "montreal"), "attributes": {}, "messageAttributes": {}}))
        .collect();
    let event: SqsEvent = common::event(&records)?;
    let bill_before = meter.bill();

    let started = Instant::now();
    let resp = shared::lambda::sqs_handler(
        &*consumer,
        LambdaEvent::new(event.clone(), Context::default()),
    )
    .await
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let elapsed = started.elapsed();
    let bill = meter.bill().since(&bill_before);
    anyhow::ensure!(
        resp.batch_item_failures.is_empty(),
        "failures: {:?}",
        resp.batch_item_failures
    );
    let written = rt.processor_writes();
    let mut suggestions = 0;
    for k in 0..seekers {
        suggestions += rt
            .processors
            .store
            .query(
                &rt.config.table,
                Some("GSI1"),
                "GSI1PK",
                &keys::seeker_pk(&format!("s{k:04}")),
                Some(SortKey::BeginsWith("GSI1SK".into(), "j#R".into())),
            )
            .await?
            .len();
    }
    let pairs = jobs * seekers;

    let again = Instant::now();
    shared::lambda::sqs_handler(&*consumer, LambdaEvent::new(event, Context::default()))
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let rescore = again.elapsed();

    let baseline =
        common::baseline_put(&rt.dynamodb, &rt.config.table, [keys::PK, keys::SK], 500).await?;
    let per_pair = elapsed / pairs as u32;
    println!("{jobs} jobs x {seekers} seekers = {pairs} scored pairs in {elapsed:.2?}; {suggestions} suggestions written");
    println!("baseline: one PutItem into the same table = {baseline:.1?}");
    println!(
        "time per scored pair: {per_pair:.1?} = {:.3}x one PutItem",
        per_pair.as_secs_f64() / baseline.as_secs_f64()
    );
    println!(
        "item writes per suggestion: {:.2} ({written} writes)",
        written as f64 / suggestions.max(1) as f64
    );
    println!(
        "bill of the consumer per seeker job (each scores {jobs} jobs): {}",
        bill.per_change(seekers)
    );
    println!(
        "redelivered batch (same jobs again): {rescore:.2?} = {:.3}x the first",
        rescore.as_secs_f64() / elapsed.as_secs_f64()
    );
    engine.stop().await;
    Ok(())
}
