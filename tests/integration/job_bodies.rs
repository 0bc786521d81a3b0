//! The job bodies the README shows ("Job messages"): each is one the
//! processors send for a write (the rules' own message for it, compared as
//! JSON) and the model's worker accepts it (no failure).

use shared::change::Change;
use shared::item::{s, Item};

use crate::items::{attrs, deliver_jobs, item};
use crate::league::{a_match, prediction};
use crate::support::model_env;

/// The README's job bodies: the lines of the code block after its
/// "Job messages" paragraph that start with `{`.
fn documented() -> Vec<serde_json::Value> {
    let readme = std::fs::read_to_string(crate::support::shipped("../README.md")).expect("reads");
    let at = readme
        .find("**Job messages**")
        .expect("the README documents job messages");
    let block = readme[at..].split("```").nth(1).expect("a code block");
    block
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_job_bodies_the_readme_shows_are_sent_and_accepted() {
    let post = attrs(vec![
        ("PK", s("u#ann#post")),
        ("SK", s("p#01JDQ4ZK8X0000000000000000")),
        ("type", s("post")),
        ("postId", s("01JDQ4ZK8X0000000000000000")),
        ("body", s("hello")),
        ("createdAt", s("2026-11-28T06:00:00Z")),
    ]);
    let request = item(&[
        ("pk", "employer#e7"),
        ("sk", "r#j1#s1"),
        ("entityType", "request"),
        ("employerId", "e7"),
        ("jobId", "j1"),
        ("seekerId", "s1"),
        ("status", "approved"),
        ("requestedAt", "2026-11-27"),
        ("jobCity", "Springfield"),
        ("jobPostedAt", "2026-11-20"),
        ("jobZip", "12345"),
        ("approvedAt", "2026-11-28"),
    ]);
    let event = "2026-11-28-final";
    let writes: Vec<(&str, Vec<Item>)> = vec![
        ("social", vec![post]),
        (
            "pickem",
            vec![
                a_match(
                    event,
                    "m1",
                    "Main event",
                    1,
                    10,
                    false,
                    &["a", "b"],
                    Some(0),
                ),
                prediction("ann", event, &[("m1", 0)]),
            ],
        ),
        ("jobboard", vec![request]),
    ];
    let mut documented = documented();
    assert!(!documented.is_empty());
    for (model, items) in writes {
        let env = model_env(model, |_| {}).await;
        let rules = &env.rt.model.rules;
        for written in items {
            let key = shared::item::key_of(&written, rules.key_names());
            let change = Change::synthetic_insert(key, written, chrono::Utc::now());
            for sent in rules.messages(&change).expect("valid") {
                let body: serde_json::Value = serde_json::from_str(&sent.body).unwrap();
                println!("{model} {}: {}", sent.queue, sent.body);
                let Some(at) = documented.iter().position(|d| *d == body) else {
                    continue;
                };
                let shown = documented.remove(at);
                deliver_jobs(&env, sent.queue, &[shown.to_string()]).await;
            }
        }
    }
    assert!(
        documented.is_empty(),
        "shown but not what the processors send: {documented:#?}"
    );
}
