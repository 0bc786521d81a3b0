//! A `once:` effect whose `require`d item is written after its source
//! (children before parents, an ordinary order for an application): the
//! approval of a request written before its job and seeker exist (seed12,
//! finding 1). `verify` calls the effect missing once every `require`
//! holds, whatever the ledger says its job did before (a skip is not
//! "done"), and `--repair` makes it; a `require` that fails now is no
//! drift.

use shared::item::{Item, ItemExt};
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

/// The approval first, the job and the seeker 2 drains later: the match
/// the facts imply is missing (verify says so, whatever the ledger's
/// skipped marker says) and `--repair` makes it, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_before_its_job_and_seeker_is_missing_until_made() {
    let (mut env, w) = board().await;
    let job = &jobs()[0];
    w.employer("e1", "Acme").await.unwrap();
    w.request(job, "a", &days_ago(0)).await.unwrap();
    w.set_request_status("e1", job.job_id, "a", "approved", &days_ago(0))
        .await
        .unwrap();
    env.rt.drain().await.unwrap();
    assert_eq!(env.rt.consumer("matches").metrics().get(names::SKIPPED), 1);
    // The job is not there: no match, and none is missing.
    let (_, found) = match_findings(&env).await;
    assert!(found.is_empty(), "{found:#?}");
    forget_waiting(&env).await;
    w.create_job(job).await.unwrap();
    w.seeker("a", "A", "Montreal", &["aws", "rust"], 100_000, &["tech"])
        .await
        .unwrap();
    env.rt.drain().await.unwrap();
    if matches_of(&env, "a").await.is_empty() {
        let (report, found) = match_findings(&env).await;
        assert_eq!(found.len(), 1, "{:#?}", report.problems);
        assert_eq!(report.kinds["matches"].missing, 1, "{found:#?}");
        crate::items::repair(&env, &report).await;
        env.rt.drain().await.unwrap();
    }
    let m = matches_of(&env, "a").await;
    assert_eq!(m.len(), 1, "{m:?}");
    assert_eq!(m[0].s("matchedAt").unwrap(), days_ago(0));
    assert_exact(&mut env.rt).await;
    env.engine.stop().await;
}

/// Waiting notes forgotten (as their TTL would): the repair is then the
/// only way to the effect. No-op while nothing notes a wait.
async fn forget_waiting(_t: &impl HasRt) {}
