//! The job board scenario: employers post jobs in two cities, seekers sign
//! up, suggestions appear by relevance, a seeker requests, the employer
//! approves, the match appears, a job closes and its suggestions vanish.
//! Printed as the seed's six access patterns; checked against what the
//! scenario implies.

use super::keys;
use super::writer::{days_ago, query, today, JobBoardWriter, NewJob};
use crate::engine::setjob::BoxFut;
use crate::item::{Item, ItemExt};
use crate::models::{BoxError, Harness};
use crate::report::print_items;
use crate::store::SortKey;

pub fn jobs() -> Vec<NewJob<'static>> {
    vec![
        NewJob {
            job_id: "j1",
            employer_id: "e1",
            city: "Montreal",
            posted_at: days_ago(2),
            zip: "H2X",
            title: "Rust engineer",
            skills: &["aws", "rust"],
            category: "tech",
            salary_max: 130_000,
        },
        NewJob {
            job_id: "j2",
            employer_id: "e1",
            city: "Montreal",
            posted_at: days_ago(5),
            zip: "H3B",
            title: "Go engineer",
            skills: &["go", "k8s"],
            category: "tech",
            salary_max: 110_000,
        },
        NewJob {
            job_id: "j3",
            employer_id: "e2",
            city: "Toronto",
            posted_at: days_ago(1),
            zip: "M5V",
            title: "Systems engineer",
            skills: &["rust"],
            category: "tech",
            salary_max: 150_000,
        },
        NewJob {
            job_id: "j4",
            employer_id: "e1",
            city: "Montreal",
            posted_at: days_ago(45),
            zip: "H2X",
            title: "Old Rust role",
            skills: &["rust"],
            category: "tech",
            salary_max: 130_000,
        },
    ]
}

/// Suggestion GSI1SKs of a seeker, best first.
pub async fn suggestions_of(rt: &dyn Harness, seeker: &str) -> Result<Vec<String>, BoxError> {
    let items = query(
        rt.dynamodb(),
        rt.table(),
        Some("GSI1"),
        keys::GSI1PK,
        &keys::seeker_pk(seeker),
        Some(SortKey::BeginsWith(keys::GSI1SK.into(), "j#R".into())),
    )
    .await?;
    Ok(items
        .iter()
        .map(|i| {
            format!(
                "{} R{}",
                i.s("jobId").unwrap_or_default(),
                i.s("GSI1SK")
                    .unwrap_or_default()
                    .chars()
                    .nth(3)
                    .unwrap_or('?')
            )
        })
        .collect())
}

/// Access pattern 3 for the scenario's seekers.
async fn print_suggestions(rt: &dyn Harness, title: &str, attrs: &[&str]) -> Result<(), BoxError> {
    for s in ["s1", "s2", "s3"] {
        let items = query(
            rt.dynamodb(),
            rt.table(),
            Some("GSI1"),
            keys::GSI1PK,
            &keys::seeker_pk(s),
            Some(SortKey::BeginsWith(keys::GSI1SK.into(), "j#R".into())),
        )
        .await?;
        print_items(&format!("{title}{s}"), &items, attrs);
    }
    Ok(())
}

fn expect(diffs: &mut Vec<String>, what: &str, got: Vec<String>, want: &[&str]) {
    if got != want {
        diffs.push(format!("{what}: got {got:?}, expected {want:?}"));
    }
}

pub fn demo(h: &mut dyn Harness) -> BoxFut<'_, Result<Vec<String>, BoxError>> {
    Box::pin(run(h))
}

async fn run(rt: &mut dyn Harness) -> Result<Vec<String>, BoxError> {
    let w = JobBoardWriter::new(rt.dynamodb().clone(), rt.table());
    let jobs = jobs();
    let mut diffs = Vec::new();
    w.employer("e1", "Acme").await?;
    w.employer("e2", "Globex").await?;
    for j in &jobs {
        w.create_job(j).await?;
    }
    w.seeker(
        "s1",
        "Ada",
        "Montreal",
        &["aws", "rust"],
        120_000,
        &["tech"],
    )
    .await?;
    w.seeker("s2", "Bob", "Montreal", &["go"], 100_000, &["tech"])
        .await?;
    w.seeker("s3", "Cy", "Toronto", &["rust"], 140_000, &[])
        .await?;
    rt.drain().await?;

    println!("\n== after sign-up: a seeker's suggestions by relevance (GSI1, begins_with(GSI1SK, 'j#R'))");
    print_suggestions(
        &*rt,
        "3. suggestions of seeker#",
        &["GSI1SK", "jobId", "score", "ttl"],
    )
    .await?;
    expect(
        &mut diffs,
        "s1 suggestions",
        suggestions_of(&*rt, "s1").await?,
        &["j1 R1"],
    );
    expect(
        &mut diffs,
        "s2 suggestions",
        suggestions_of(&*rt, "s2").await?,
        &["j2 R2", "j1 R3"],
    );
    expect(
        &mut diffs,
        "s3 suggestions",
        suggestions_of(&*rt, "s3").await?,
        &["j3 R1"],
    );

    // Bob swipes right on j2; Acme approves; then Acme closes j1.
    w.request(&jobs[1], "s2", &days_ago(0)).await?;
    rt.drain().await?;
    expect(
        &mut diffs,
        "s2 suggestions after requesting j2",
        suggestions_of(&*rt, "s2").await?,
        &["j1 R3"],
    );
    w.set_request_status("e1", "j2", "s2", "approved", &days_ago(0))
        .await?;
    w.close_job(&jobs[0]).await?;
    rt.drain().await?;

    println!("\n== after request, approval and closing j1");
    let montreal = keys::job_pk("Montreal");
    let all = query(
        rt.dynamodb(),
        rt.table(),
        None,
        keys::PK,
        &montreal,
        Some(SortKey::BeginsWith(keys::SK.into(), "j#".into())),
    )
    .await?;
    print_items(
        &format!("1. jobs by city, by date (pk = '{montreal}', begins_with(sk, 'j#'))"),
        &all,
        &["sk", "title", "status"],
    );
    expect(
        &mut diffs,
        "jobs in Montreal by date",
        ids(&all, "jobId"),
        &["j4", "j2", "j1"],
    );
    let from = format!("j#{}", days_ago(30));
    let until = format!("j#{}#\u{10FFFF}", today());
    let recent = query(
        rt.dynamodb(),
        rt.table(),
        None,
        keys::PK,
        &montreal,
        Some(SortKey::Between(keys::SK.into(), from.clone(), until)),
    )
    .await?;
    print_items(
        &format!(
            "2. jobs posted in the last month (sk BETWEEN '{from}' AND 'j#{}~')",
            today()
        ),
        &recent,
        &["sk", "title", "status"],
    );
    expect(
        &mut diffs,
        "jobs of the last month",
        ids(&recent, "jobId"),
        &["j2", "j1"],
    );
    print_suggestions(
        &*rt,
        "3. suggestions by relevance of seeker#",
        &["GSI1SK", "jobId", "score"],
    )
    .await?;
    expect(
        &mut diffs,
        "s1 suggestions after j1 closed",
        suggestions_of(&*rt, "s1").await?,
        &[],
    );
    expect(
        &mut diffs,
        "s2 suggestions after j1 closed",
        suggestions_of(&*rt, "s2").await?,
        &[],
    );
    expect(
        &mut diffs,
        "s3 suggestions",
        suggestions_of(&*rt, "s3").await?,
        &["j3 R1"],
    );
    let matches = query(
        rt.dynamodb(),
        rt.table(),
        None,
        keys::PK,
        &keys::seeker_pk("s2"),
        Some(SortKey::BeginsWith(
            keys::SK.into(),
            format!("j#{}", today().format("%Y")),
        )),
    )
    .await?;
    print_items(
        "4. matches of seeker#s2 by date (begins_with(sk, 'j#<year>'))",
        &matches,
        &["sk", "jobId", "matchedAt", "GSI1SK"],
    );
    expect(&mut diffs, "matches of s2", ids(&matches, "jobId"), &["j2"]);
    let postings = query(
        rt.dynamodb(),
        rt.table(),
        Some("GSI1"),
        keys::GSI1PK,
        &keys::employer_pk("e1"),
        Some(SortKey::BeginsWith(keys::GSI1SK.into(), "j#".into())),
    )
    .await?;
    print_items(
        "5. postings of employer#e1 (GSI1, begins_with(GSI1SK, 'j#'))",
        &postings,
        &["GSI1SK", "title", "status"],
    );
    expect(
        &mut diffs,
        "postings of e1",
        ids(&postings, "jobId"),
        &["j4", "j2", "j1"],
    );
    let again = w.create_job(&jobs[2]).await;
    println!(
        "\n6. create job j3 again with attribute_not_exists(pk) AND attribute_not_exists(sk): {}",
        if again.is_err() {
            "refused (exists)"
        } else {
            "ACCEPTED"
        }
    );
    if again.is_ok() {
        diffs.push("creating an existing job was accepted".into());
    }
    diffs.extend(rt.verify().await?);
    diffs.extend(rt.dead_letters().await?);
    Ok(diffs)
}

fn ids(items: &[Item], attr: &str) -> Vec<String> {
    items
        .iter()
        .map(|i| i.s(attr).unwrap_or_default().to_string())
        .collect()
}
