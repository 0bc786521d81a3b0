//! `models/social.yaml` (a model file with a `sets:` join set) against the
//! Rust social model: the same pure rules on fixtures and their mutations,
//! and the demo through both ends ends in the same table, the same `verify`
//! and the same processor writes.

use std::collections::BTreeMap;
use std::path::PathBuf;

use chrono::Utc;
use shared::change::{Change, ChangeKind, Origin, SequenceNumber};
use shared::engine::joinset::JoinJob;
use shared::engine::rules::{Contribution, Rules};
use shared::item::{key_of, n, s, Item, ItemExt};
use shared::models::social::demo::{follow_item, like_item, post_item, user_item};
use shared::models::social::keys;
use shared::models::social::messages::decode;
use shared::models::social::timeline::join_job;

use crate::support::model_env;

fn social_file() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../models/social.yaml"
    ))
}

const P1: &str = "01HZY3M5X7Q8R9S0T1V2W3X4Y5";
const P2: &str = "01HZY3M5X7Q8R9S0T1V2W3X4Z0";
const AT: &str = "2026-01-05T10:00:00.250Z";

/// Valid writer items and processor items of every kind.
fn fixtures() -> Vec<Item> {
    let mut counts = keys::user_counts_key("alice");
    counts.insert("followers".into(), n(2));
    counts.insert("type".into(), s("counts"));
    let mut likecount = keys::likecount_key(P1);
    likecount.insert("likes".into(), n(1));
    vec![
        user_item("alice", "Alice"),
        follow_item("bob", "alice", AT),
        post_item("alice", P1, AT, "hello"),
        post_item("carol", P2, "2026-01-05T10:00:00Z", "hi"),
        like_item(P1, "bob", AT),
        counts,
        likecount,
        keys::mirror_key("bob", "alice"),
        keys::timeline_key("bob", P1, "alice"),
    ]
}

/// Each fixture with one thing wrong (or different) at a time.
fn mutations(item: &Item) -> Vec<Item> {
    let mut out = Vec::new();
    let mut with = |k: &str, v: Option<&str>| {
        let mut i = item.clone();
        match v {
            Some(v) => i.insert(k.to_string(), s(v)),
            None => i.remove(k),
        };
        out.push(i);
    };
    for attr in ["name", "createdAt", "postId", "body"] {
        if item.contains_key(attr) {
            with(attr, None);
            with(attr, Some(""));
        }
    }
    with("createdAt", Some("2026-01-05 10:00:00Z"));
    with("createdAt", Some("2026-01-05T10:00:00"));
    with("createdAt", Some("2026-01-05T10:00:00.Z"));
    with("createdAt", Some("2026-01-05T11:30:00Z"));
    with("postId", Some(P2));
    with("postId", Some(&P1.to_lowercase()));
    let pk = item.s("PK").unwrap_or_default().to_string();
    let sk = item.s("SK").unwrap_or_default().to_string();
    for (a, b) in [
        (pk.replace("alice", "al#ice"), sk.clone()),
        (pk.replace("alice", "al ice"), sk.clone()),
        (pk.replace("bob", "alice"), sk.clone()),
        (pk.clone(), sk.replace("alice", "bob")),
        (pk.replace(P1, &P1.to_lowercase()), sk.clone()),
        (pk.clone(), sk.replace(P1, "8ZZY3M5X7Q8R9S0T1V2W3X4Y5Z")),
        (pk.clone(), sk.replace(P1, "")),
        (pk.clone(), format!("{sk}#x")),
        (format!("{pk}x"), sk.clone()),
    ] {
        let mut i = item.clone();
        i.insert("PK".into(), s(a));
        i.insert("SK".into(), s(b));
        out.push(i);
    }
    let mut num = item.clone();
    num.insert("createdAt".into(), n(1));
    out.push(num);
    out
}

fn change(kind: ChangeKind, old: Option<Item>, new: Option<Item>) -> Change {
    let image = new.as_ref().or(old.as_ref()).expect("one image");
    Change {
        event_id: "ev".into(),
        sequence_number: SequenceNumber::parse("1").expect("valid"),
        kind,
        origin: Origin::User,
        keys: key_of(image, &["PK", "SK"]),
        old,
        new,
        at: Utc::now(),
    }
}

fn sorted(i: Item) -> BTreeMap<String, aws_sdk_dynamodb::types::AttributeValue> {
    i.into_iter().collect()
}

/// A table with what differs between two runs of the demo (its clock: the
/// times, the TTLs, the time part of post ids) blanked out.
fn normalized(
    t: &BTreeMap<(String, String), Item>,
) -> BTreeMap<(String, String), BTreeMap<String, String>> {
    fn ids(v: &str) -> String {
        v.split('#')
            .map(|seg| {
                if seg.len() == 26 && seg.chars().all(|c| c.is_ascii_alphanumeric()) {
                    format!("ULID{}", &seg[10..])
                } else {
                    seg.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("#")
    }
    t.values()
        .map(|i| {
            let attrs: BTreeMap<String, String> = i
                .iter()
                .map(|(k, v)| {
                    let v = match (k.as_str(), v.as_s()) {
                        ("createdAt" | "ttl", _) => "T".to_string(),
                        (_, Ok(s)) => ids(s),
                        _ => format!("{v:?}"),
                    };
                    (k.clone(), v)
                })
                .collect();
            ((attrs["PK"].clone(), attrs["SK"].clone()), attrs)
        })
        .collect()
}

fn contribution(c: &Contribution) -> String {
    format!("{:?} {:?} {:?}", c.counter.key, c.counter.create, c.values)
}

/// What one end's rules make of an item: each aspect, errors as "bad".
fn aspects(r: &dyn Rules, item: &Item, old: Option<&Item>) -> Vec<String> {
    let mut out = vec![
        format!(
            "derived {:?}",
            r.derived(item)
                .map(|v| v.into_iter().map(sorted).collect::<Vec<_>>())
                .map_err(|_| "bad")
        ),
        format!(
            "contributions {:?}",
            r.contributions(item)
                .map(|v| v.iter().map(contribution).collect::<Vec<_>>())
                .map_err(|_| "bad")
        ),
        format!("projection {:?}", r.projection(item).map_err(|_| "bad")),
        format!(
            "counter {:?}",
            r.counter(item).map(|c| (c.key, c.attrs, c.create))
        ),
        format!("ignores {}", r.ignores(&key_of(item, &["PK", "SK"]))),
    ];
    let kinds = [
        change(ChangeKind::Insert, None, Some(item.clone())),
        change(ChangeKind::Remove, Some(item.clone()), None),
        change(
            ChangeKind::Modify,
            Some(old.unwrap_or(item).clone()),
            Some(item.clone()),
        ),
    ];
    for c in kinds {
        let jobs = r.messages(&c).map(|ms| {
            ms.iter()
                .map(|m| match (decode(&m.body), JoinJob::decode(&m.body)) {
                    (Ok(j), _) => format!("{} {:?}", m.queue, join_job(j)),
                    (_, Ok(j)) => format!("{} {j:?}", m.queue),
                    (Err(e), _) => format!("{} undecodable {e}: {}", m.queue, m.body),
                })
                .collect::<Vec<_>>()
        });
        out.push(format!(
            "messages {:?} {:?}",
            c.kind,
            jobs.map_err(|_| "bad")
        ));
    }
    out
}

#[test]
fn the_file_rules_agree_with_the_rust_social_rules_on_fixtures_and_mutations() {
    let rust = shared::models::find("social").expect("registered");
    let file = shared::models::load(&shared::models::Source::File(social_file())).expect("loads");
    let mut cases = 0;
    let mut differ = Vec::new();
    let mut known = 0;
    for f in fixtures() {
        let mut items = vec![f.clone()];
        items.extend(mutations(&f));
        for item in items {
            // A modify from the fixture to the mutation, and a plain one.
            for old in [None, Some(&f)] {
                cases += 1;
                let (a, b) = (
                    aspects(rust.rules.as_ref(), &item, old),
                    aspects(file.rules.as_ref(), &item, old),
                );
                // Known and harmless: a REMOVE of a key that is bad input
                // (an invalid id in the key): the Rust rules count it as bad
                // input, the file's start nothing (no image to validate).
                let allowed = |x: &[String], y: &[String]| {
                    x.iter().zip(y).all(|(x, y)| {
                        x == y
                            || (x.starts_with("messages Remove")
                                && y == "messages Remove Ok([])"
                                && !x.contains("JoinJob"))
                    })
                };
                // Known: a processor item's key with an invalid id (`#`, a
                // space): the Rust model calls it an unknown entity (bad
                // input), the file a processor item (implies nothing; a file
                // has no checks on processor entities).
                let processor_shape = a[0] == "derived Err(\"bad\")"
                    && b[0] == "derived Ok([])"
                    && b[1] == "contributions Ok([])";
                if processor_shape {
                    known += 1;
                } else if !allowed(&a, &b) {
                    differ.push(format!("{item:?}\n  rust: {a:?}\n  file: {b:?}"));
                }
            }
        }
    }
    assert!(cases > 200, "{cases}");
    assert_eq!(known, 12, "processor key shapes with an invalid id");
    assert!(
        differ.is_empty(),
        "{} of {cases} differ:\n{}",
        differ.len(),
        differ.join("\n")
    );
}

#[test]
fn the_social_file_declares_what_the_rust_model_deploys() {
    shared::file::check(&social_file()).expect("checks");
    let rust = shared::models::find("social").expect("registered");
    let file = shared::models::load(&shared::models::Source::File(social_file())).expect("loads");
    assert_eq!(file.table, rust.table);
    assert_eq!(file.queues(), rust.queues());
    assert_eq!(file.stream_defs(), rust.stream_defs());
    assert_eq!(file.queue_defs(), rust.queue_defs());
}

async fn scan(rt: &jobstream::local::runtime::Runtime) -> BTreeMap<(String, String), Item> {
    jobstream::tools::verify::scan_all(&rt.dynamodb, &rt.config.table)
        .await
        .expect("scan")
        .into_iter()
        .map(|i| {
            let k = (
                i.s("PK").unwrap_or_default().to_string(),
                i.s("SK").unwrap_or_default().to_string(),
            );
            (k, i)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_social_demo_through_both_ends_gives_the_same_table_verify_and_writes() {
    let demo = shared::models::find("social")
        .expect("registered")
        .demo
        .expect("social demo");
    let mut out = Vec::new();
    for file in [false, true] {
        let mut env = model_env("social", |o| {
            // Both ends with one poller per queue: concurrent pollers take
            // the fan-out's jobs in a different order each run, and the
            // number of writes a racing job spares varies with it; the
            // comparison is of the models, not of an interleaving.
            o.queue_concurrency = Some(1);
            if file {
                o.model_file = Some(social_file());
            }
        })
        .await;
        let diffs = demo(&mut env.rt).await.expect("demo runs");
        assert!(diffs.is_empty(), "file={file}: {diffs:#?}");
        let report = env.rt.verify().await.expect("verify");
        assert!(report.is_clean(), "file={file}: {:#?}", report.problems);
        out.push((
            scan(&env.rt).await,
            env.rt.processor_writes(),
            report.render(),
            report.bad_input.len(),
        ));
        env.engine.stop().await;
    }
    let (rust, file) = (&out[0], &out[1]);
    assert!(rust.0.len() > 10, "{}", rust.0.len());
    assert_eq!(
        normalized(&file.0),
        normalized(&rust.0),
        "the same items, attribute for attribute (the demo's clock aside)"
    );
    assert_eq!(file.1, rust.1, "the same processor writes");
    assert_eq!(file.2, rust.2, "the same verify report");
    assert_eq!(file.3, rust.3, "the same bad input");
}

#[test]
fn check_model_reports_each_problem_of_a_sets_block_with_its_place() {
    let text = std::fs::read_to_string(social_file()).expect("reads");
    let broken = text
        .replace("entity: post, bind", "entity: posts, bind")
        .replace("createdAt: post.createdAt", "createdAt: follow.createAt")
        .replace(
            "\"epoch(post.createdAt) + 604800\"",
            "\"epoch(post.createdAt) + x\"",
        );
    let problems = shared::file::compile(&broken, "social").expect_err("invalid");
    let lines: Vec<String> = problems
        .iter()
        .map(|p| format!("{}:{}: {}", p.line, p.col, p.message))
        .collect();
    let has = |s: &str| lines.iter().any(|l| l.contains(s));
    assert!(
        has("unknown entity `posts` (did you mean `post`?)"),
        "{lines:#?}"
    );
    assert!(
        has("`follow` has no attribute `createAt` (did you mean `createdAt`?)"),
        "{lines:#?}"
    );
    assert!(has("unknown name `x`"), "{lines:#?}");
    assert!(problems.iter().all(|p| p.line > 100), "{lines:#?}");
    // A set whose changes cannot be listed: no `via` for the followers.
    let unlisted = text.replace(", via: follower", "");
    let problems = shared::file::compile(&unlisted, "social").expect_err("invalid");
    assert!(
        problems
            .iter()
            .any(|p| p.message.contains("no fact's partition")),
        "{problems:#?}"
    );
    // `now` only in set jobs.
    let now = text.replace("\"follower != followed\"", "\"now > 0\"");
    let problems = shared::file::compile(&now, "social").expect_err("invalid");
    assert!(
        problems
            .iter()
            .any(|p| p.message.contains("unknown name `now`")),
        "{problems:#?}"
    );
}
