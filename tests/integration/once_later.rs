//! A `once:` effect whose `require`d item is written after its source
//! (children before parents, an ordinary order for an application): the
//! approval of a request written before its job and seeker exist (seed12,
//! finding 1). The skipped job waits for them in the ledger and the derive
//! sends it again when they appear: the match is made, once. Should the
//! wait be gone (its TTL), `verify` calls the effect missing once every
//! `require` holds, whatever the ledger says its job did before (a skip is
//! not "done"), and `--repair` makes it; a `require` that fails now is no
//! drift.

use shared::item::{key_of, s, Item, ItemExt};
use shared::metrics::names;

use crate::items::{assert_exact, begins, HasRt};
use crate::seed_items::jobboard::{self as keys, days_ago, jobs, Writer};

/// `--model jobboard`, its writer, and a job of it written nowhere yet.
async fn board() -> (crate::support::ModelEnv, Writer) {
    let env = crate::support::model_env("jobboard", |_| {}).await;
    let w = Writer::new(env.rt.dynamodb.clone(), &env.rt.config.table);
    (env, w)
}

async fn matches_of(t: &impl HasRt, seeker: &str) -> Vec<Item> {
    begins(t, &keys::seeker_pk(seeker), "j#").await
}

/// What `verify` says of the matches (its findings of them).
async fn match_findings(t: &impl HasRt) -> (jobstream::tools::verify::Report, Vec<String>) {
    let report = t.rt().verify().await.expect("verify");
    let found = report
        .problems
        .iter()
        .filter(|p| p.contains("once `matches`"))
        .cloned()
        .collect();
    (report, found)
}

/// The approval first; the job and the seeker after a drain: the match
/// is made when they appear (the skipped job waited for them, its notes
/// TTL-bound), once, and a job re-created later makes no second one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_before_its_job_and_seeker_becomes_their_match_when_they_appear() {
    let (mut env, w) = board().await;
    let job = &jobs()[0];
    approve_before_the_job(&mut env, &w).await;
    let notes = waiting_notes(&env).await;
    assert!(!notes.is_empty(), "the skipped job waits");
    let week = chrono::Utc::now().timestamp() + 7 * 24 * 3600;
    for n in &notes {
        let ttl = n.i64("ttl").expect("a waiting note expires");
        assert!(ttl <= week + 5 && ttl > week - 3600, "ttl {ttl}");
    }
    w.create_job(job).await.unwrap();
    w.seeker("a", "A", "Montreal", &["aws", "rust"], 100_000, &["tech"])
        .await
        .unwrap();
    env.rt.drain().await.unwrap();
    let m = matches_of(&env, "a").await;
    assert_eq!(
        m.len(),
        1,
        "the match made when its job and seeker appeared"
    );
    assert_eq!(m[0].s("matchedAt").unwrap(), days_ago(0));
    assert_exact(&mut env.rt).await;
    // The job deleted and written again: its waiting job is sent again, a
    // duplicate of the pair's marker.
    let duplicates = env.rt.consumer("matches").metrics().get(names::DUPLICATE);
    crate::items::delete(&env, job_key(job)).await;
    env.rt.drain().await.unwrap();
    w.create_job(job).await.unwrap();
    env.rt.drain().await.unwrap();
    assert_eq!(matches_of(&env, "a").await.len(), 1, "exactly one match");
    assert!(env.rt.consumer("matches").metrics().get(names::DUPLICATE) > duplicates);
    assert_exact(&mut env.rt).await;
    env.engine.stop().await;
}

/// The same, the wait forgotten (as its TTL would) before the job and the
/// seeker appear: the match the facts imply is missing (verify says so,
/// whatever the ledger's skipped marker says) and `--repair` makes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_whose_wait_expired_is_missing_until_repaired() {
    let (mut env, w) = board().await;
    let job = &jobs()[0];
    approve_before_the_job(&mut env, &w).await;
    // The job is not there: no match, and none is missing.
    let (_, found) = match_findings(&env).await;
    assert!(found.is_empty(), "{found:#?}");
    let notes = waiting_notes(&env).await;
    let keys = notes.iter().map(|n| key_of(n, &["pk", "sk"])).collect();
    let ledger = &env.rt.config.ledger_table;
    env.rt
        .processors
        .store
        .delete_keys(ledger, keys)
        .await
        .unwrap();
    w.create_job(job).await.unwrap();
    w.seeker("a", "A", "Montreal", &["aws", "rust"], 100_000, &["tech"])
        .await
        .unwrap();
    env.rt.drain().await.unwrap();
    assert!(matches_of(&env, "a").await.is_empty(), "nothing waited");
    let (report, found) = match_findings(&env).await;
    assert_eq!(found.len(), 1, "{:#?}", report.problems);
    assert_eq!(report.kinds["matches"].missing, 1, "{found:#?}");
    crate::items::repair(&env, &report).await;
    env.rt.drain().await.unwrap();
    let m = matches_of(&env, "a").await;
    assert_eq!(m.len(), 1, "{m:?}");
    assert_eq!(m[0].s("matchedAt").unwrap(), days_ago(0));
    assert_exact(&mut env.rt).await;
    env.engine.stop().await;
}

/// An employer and its request approved today, for the first job of the
/// seed data, which does not exist yet, nor does its seeker `a`.
async fn approve_before_the_job(env: &mut crate::support::ModelEnv, w: &Writer) {
    let job = &jobs()[0];
    w.employer("e1", "Acme").await.unwrap();
    w.request(job, "a", &days_ago(0)).await.unwrap();
    w.set_request_status("e1", job.job_id, "a", "approved", &days_ago(0))
        .await
        .unwrap();
    env.rt.drain().await.unwrap();
    assert_eq!(env.rt.consumer("matches").metrics().get(names::SKIPPED), 1);
    assert!(matches_of(env, "a").await.is_empty());
}

fn job_key(job: &keys::NewJob<'_>) -> Item {
    [
        (keys::PK.to_string(), s(keys::job_pk(job.city))),
        (keys::SK.to_string(), s(job.sk())),
    ]
    .into()
}

/// The ledger's notes of effects waiting for an item (flags and entries).
async fn waiting_notes(t: &impl HasRt) -> Vec<Item> {
    let rt = t.rt();
    let mut all = jobstream::tools::verify::scan_all(&rt.dynamodb, &rt.config.ledger_table)
        .await
        .expect("scan");
    all.retain(|i| i.s("pk").is_ok_and(|pk| pk.starts_with("WAIT#")));
    all
}
