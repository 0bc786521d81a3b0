//! `models/examples/qa_tags.yaml`: a question counted on, and listed
//! under, each tag of its `tags` set (`each:`). Tags added, removed, the
//! set replaced, a question closed, deleted and re-created, in one batch
//! or many; a replay of the whole stream (each batch delivered twice)
//! never moves a count or a listing, not even for a moment; backfill of a
//! table filled first; `verify` and `--repair` of a forged tag counter;
//! `explain` of a tag counter; the bound on the elements of one item, and
//! a list element that is no string. Each ends exact.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::AttributeValue;
use shared::item::{item_size, s, Item, ItemExt};

use crate::items::{
    assert_clean, bad_input, delete, deliver, get, key, put, put_all, scan, update,
};
use crate::support::{model_env, shipped, temp_model, ModelEnv};

const ASKED: &str = "2026-11-28T10:00:00Z";

async fn qa_env() -> ModelEnv {
    model_env("qa_tags", |o| {
        o.model_file = Some(shipped("examples/qa_tags.yaml"))
    })
    .await
}

fn question_key(qid: &str) -> Item {
    key(format!("Q#{qid}"), "QUESTION")
}

/// A question as its writer puts it (no `tags` when it has none: a string
/// set cannot be empty).
fn question(qid: &str, tags: &[&str], status: &str) -> Item {
    let mut q = question_key(qid);
    q.insert("type".into(), s("question"));
    q.insert("qid".into(), s(qid));
    q.insert("title".into(), s(format!("title {qid}")));
    q.insert("status".into(), s(status));
    q.insert("askedAt".into(), s(ASKED));
    if !tags.is_empty() {
        let tags = tags.iter().map(|t| t.to_string()).collect();
        q.insert("tags".into(), AttributeValue::Ss(tags));
    }
    q
}

/// Per tag: (questions, open) of its stats item, and the questions listed
/// under it; tags with neither are absent.
async fn tags(env: &ModelEnv) -> BTreeMap<String, ((i64, i64), Vec<String>)> {
    let mut out: BTreeMap<String, ((i64, i64), Vec<String>)> = BTreeMap::new();
    for i in scan(env).await {
        let pk = i.s("PK").unwrap();
        let Some(tag) = pk.strip_prefix("TAG#") else {
            continue;
        };
        let e = out.entry(tag.to_string()).or_default();
        match i.s("type").unwrap() {
            "tag_stats" => {
                e.0 = (
                    i.opt_i64("questions").unwrap().unwrap_or(-1),
                    i.opt_i64("open").unwrap().unwrap_or(-1),
                )
            }
            "tag_question" => e.1.push(i.s("qid").unwrap().to_string()),
            other => panic!("{other}"),
        }
    }
    out
}

/// What `questions` (qid, tags, status) imply, as [`tags`] reads it.
fn implied(questions: &[(&str, &[&str], &str)]) -> BTreeMap<String, ((i64, i64), Vec<String>)> {
    let mut out: BTreeMap<String, ((i64, i64), Vec<String>)> = BTreeMap::new();
    for (qid, ts, status) in questions {
        for t in *ts {
            let e = out.entry(t.to_string()).or_default();
            e.0 .0 += 1;
            e.0 .1 += i64::from(*status == "open");
            e.1.push(qid.to_string());
            e.1.sort();
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tags_added_removed_replaced_closed_deleted_and_re_created_count_exactly() {
    let mut env = qa_env().await;
    put(&env.rt, question("q1", &["rust", "dynamodb"], "open")).await;
    put(&env.rt, question("q2", &["rust"], "open")).await;
    env.rt.drain().await.unwrap();
    let mut want: Vec<(&str, &[&str], &str)> = vec![
        ("q1", &["dynamodb", "rust"], "open"),
        ("q2", &["rust"], "open"),
    ];
    assert_eq!(tags(&env).await, implied(&want));
    // A tag added, then one removed, by UpdateItem.
    let add = |t: &str| AttributeValue::Ss(vec![t.to_string()]);
    let before = env.rt.processor_writes();
    update(
        &env.rt,
        question_key("q1"),
        "ADD tags :t",
        &[(":t", add("go"))],
    )
    .await;
    env.rt.drain().await.unwrap();
    // What a tag added costs, whatever the other tags: its listing and
    // total with the question's record in one transaction, its counter
    // item, the consumer's bookkeeping (measured: 5 item writes).
    let cost = env.rt.processor_writes() - before;
    println!("a tag added: {cost} processor writes");
    assert_eq!(cost, 5);
    want[0].1 = &["dynamodb", "go", "rust"];
    assert_eq!(tags(&env).await, implied(&want));
    update(
        &env.rt,
        question_key("q1"),
        "DELETE tags :t",
        &[(":t", add("dynamodb"))],
    )
    .await;
    env.rt.drain().await.unwrap();
    want[0].1 = &["go", "rust"];
    assert_eq!(tags(&env).await, implied(&want));
    assert!(!tags(&env).await.contains_key("dynamodb"), "gone at zero");
    // The set replaced; a question closed.
    put(&env.rt, question("q1", &["python"], "open")).await;
    put(&env.rt, question("q2", &["rust"], "closed")).await;
    env.rt.drain().await.unwrap();
    want = vec![("q1", &["python"], "open"), ("q2", &["rust"], "closed")];
    assert_eq!(tags(&env).await, implied(&want));
    // Deleted, then re-created with other tags; and, in one batch, deleted
    // and re-created with the same tags; every tag dropped.
    delete(&env.rt, question_key("q1")).await;
    env.rt.drain().await.unwrap();
    want.remove(0);
    assert_eq!(tags(&env).await, implied(&want));
    put(&env.rt, question("q1", &["rust", "go"], "open")).await;
    env.rt.drain().await.unwrap();
    want.push(("q1", &["go", "rust"], "open"));
    assert_eq!(tags(&env).await, implied(&want));
    delete(&env.rt, question_key("q2")).await;
    put(&env.rt, question("q2", &["rust"], "closed")).await;
    put(&env.rt, question("q3", &["go"], "open")).await;
    put(&env.rt, question("q3", &[], "open")).await;
    env.rt.drain().await.unwrap();
    want.push(("q3", &[], "open"));
    assert_eq!(tags(&env).await, implied(&want));
    assert_clean(&env.rt).await;
    assert_eq!(bad_input(&env), 0);
    assert!(env.rt.failed_batches().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_of_the_whole_stream_never_moves_a_tag_count_and_writes_nothing() {
    let mut env = qa_env().await;
    put(&env.rt, question("q1", &["rust", "go"], "open")).await;
    put(&env.rt, question("q2", &["rust"], "open")).await;
    env.rt.drain().await.unwrap();
    put(&env.rt, question("q1", &["go", "python"], "open")).await;
    put(&env.rt, question("q2", &["rust"], "closed")).await;
    delete(&env.rt, question_key("q1")).await;
    put(&env.rt, question("q1", &["python", "zig"], "open")).await;
    put(&env.rt, question("q3", &["rust", "zig"], "closed")).await;
    env.rt.drain().await.unwrap();
    let truth = implied(&[
        ("q1", &["python", "zig"], "open"),
        ("q2", &["rust"], "closed"),
        ("q3", &["rust", "zig"], "closed"),
    ]);
    assert_eq!(tags(&env).await, truth);
    // A restarted consumer reading from TRIM_HORIZON: every record again,
    // older images first, each batch delivered twice (a retried
    // invocation). Every tag after each batch: never an older count or
    // listing, not even for a moment.
    let records = env.records().await;
    assert!(records.len() > 8, "{}", records.len());
    let before = env.rt.processor_writes();
    for chunk in records.chunks(2) {
        for _ in 0..2 {
            deliver(&env, chunk).await;
            assert_eq!(tags(&env).await, truth, "a replayed record moved a tag");
        }
    }
    assert_eq!(env.rt.processor_writes(), before, "a replay writes nothing");
    assert_clean(&env.rt).await;
    // A tag removed and one added, not yet read from the stream, while
    // the old records are delivered again: each tag is at the state before
    // or after the change, never older, and never both at once.
    put(&env.rt, question("q1", &["python", "sql"], "open")).await;
    let after = implied(&[
        ("q1", &["python", "sql"], "open"),
        ("q2", &["rust"], "closed"),
        ("q3", &["rust", "zig"], "closed"),
    ]);
    for chunk in records.chunks(3) {
        deliver(&env, chunk).await;
        let now = tags(&env).await;
        assert!(now == truth || now == after, "{now:?}");
    }
    env.rt.drain().await.unwrap();
    assert_eq!(tags(&env).await, after);
    assert_clean(&env.rt).await;
    assert_eq!(bad_input(&env), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_filled_first_is_exact_after_backfill() {
    let mut env = qa_env().await;
    let pool = ["rust", "go", "python", "zig", "sql"];
    let mut written = Vec::new();
    let mut questions = Vec::new();
    for i in 0..12usize {
        let ts: Vec<&str> = pool
            .iter()
            .enumerate()
            .filter(|(j, _)| (i + j) % 3 != 0)
            .map(|(_, t)| *t)
            .collect();
        let status = if i % 4 == 0 { "closed" } else { "open" };
        let qid = format!("q{i:02}");
        questions.push(question(&qid, &ts, status));
        written.push((qid, ts, status));
    }
    put_all(&env, questions).await;
    let opts = jobstream::tools::backfill::ScanOptions {
        segments: 2,
        ..Default::default()
    };
    crate::items::backfill(&env, &opts).await;
    let want: Vec<(&str, &[&str], &str)> = written
        .iter()
        .map(|(q, t, st)| (q.as_str(), t.as_slice(), *st))
        .collect();
    assert_eq!(tags(&env).await, implied(&want));
    assert_clean(&env.rt).await;
    // The stream after it changes nothing; a backfill again neither.
    let before = env.rt.processor_writes();
    env.rt.drain().await.unwrap();
    crate::items::backfill(&env, &opts).await;
    assert_eq!(tags(&env).await, implied(&want));
    assert_eq!(env.rt.processor_writes(), before, "nothing written again");
    assert_clean(&env.rt).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_finds_a_forged_tag_counter_and_a_lost_listing_and_repair_fixes_them() {
    let mut env = qa_env().await;
    put(&env.rt, question("q1", &["rust", "go"], "open")).await;
    put(&env.rt, question("q2", &["rust"], "closed")).await;
    env.rt.drain().await.unwrap();
    assert_clean(&env.rt).await;
    let truth = tags(&env).await;
    // A writer forges rust's count and deletes go's listing of q1; verify
    // runs before the stream does.
    let mut forged = key("TAG#rust", "STATS");
    forged.insert("type".into(), s("tag_stats"));
    forged.insert("questions".into(), shared::item::n(99));
    forged.insert("open".into(), shared::item::n(1));
    put(&env.rt, forged).await;
    delete(&env.rt, key("TAG#go", format!("Q#{ASKED}#q1"))).await;
    let report = env.rt.verify().await.expect("verify");
    let said = format!("{:#?}", report.problems);
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.contains("PK=TAG#rust, SK=STATS")
                && p.contains("questions = 99, the sources sum to 2")),
        "{said}"
    );
    assert!(
        said.contains(&format!("PK=TAG#go, SK=Q#{ASKED}#q1")),
        "{said}"
    );
    crate::items::repair(&env.rt, &report).await;
    assert_eq!(tags(&env).await, truth);
    assert_clean(&env.rt).await;
    env.rt.drain().await.unwrap();
    assert_eq!(tags(&env).await, truth);
    assert_clean(&env.rt).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_of_a_tag_counter_names_each_question_counted_on_it() {
    let mut env = qa_env().await;
    put(&env.rt, question("q1", &["rust", "go"], "open")).await;
    put(&env.rt, question("q2", &["rust"], "closed")).await;
    put(&env.rt, question("q3", &["go"], "open")).await;
    env.rt.drain().await.unwrap();
    let file = shipped("examples/qa_tags.yaml");
    let x = crate::explain::ask_in(&env, &file, "TAG#rust", "STATS").await;
    assert_eq!(x.kind, "counter", "{:#?}", x.lines);
    crate::explain::says(
        &x,
        &[
            "counted by PK=Q#q1, SK=QUESTION (question) through `count:` of question (each of `tags`): questions +1, open +1",
            "counted by PK=Q#q2, SK=QUESTION (question) through `count:` of question (each of `tags`): questions +1, open +0",
            "questions: the sources imply 2; the item holds 2; the ledger's total is 2",
            "open: the sources imply 1; the item holds 1; the ledger's total is 1",
        ],
    );
    assert!(
        !x.lines.iter().any(|l| l.contains("PK=Q#q3")),
        "{:#?}",
        x.lines
    );
    // The question: one listing and one count per tag.
    let x = crate::explain::ask_in(&env, &file, "Q#q1", "QUESTION").await;
    crate::explain::says(
        &x,
        &[
            &format!("derives PK=TAG#go, SK=Q#{ASKED}#q1 (tag_question) (present)"),
            &format!("derives PK=TAG#rust, SK=Q#{ASKED}#q1 (tag_question) (present)"),
            "counts into PK=TAG#go, SK=STATS (tag_stats): questions +1, open +1",
            "counts into PK=TAG#rust, SK=STATS (tag_stats): questions +1, open +1",
            "ledger: 2 derived item(s), 2 counter contribution(s) recorded",
            "ledger: agrees with what the rules imply now",
        ],
    );
}

/// 24 tags (the most `qa_tags` takes: 1 + 4 x 24 = 97 actions when every
/// tag is replaced) replaced by 24 others land in one transaction; 25 are
/// bad input naming the limit, nothing of them written, the last valid
/// tags kept. 24 tags of 2,044 bytes each (their keys at DynamoDB's 2,048)
/// keep the ledger record below 400 KB (~300 KB: the transaction's 100
/// actions bound the elements before the record does).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_item_past_the_bound_is_bad_input_and_the_bound_fits_one_transaction() {
    let mut env = qa_env().await;
    let names = |from: usize, n: usize, len: usize| -> Vec<String> {
        (from..from + n)
            .map(|i| format!("{i:03}{}", "t".repeat(len.saturating_sub(3))))
            .collect()
    };
    let first = names(0, 24, 3);
    let first_refs = refs(&first);
    put(&env.rt, question("q1", &first_refs, "open")).await;
    env.rt.drain().await.unwrap();
    assert_eq!(tags(&env).await, implied(&[("q1", &first_refs, "open")]));
    let other = names(100, 24, 3);
    let other_refs = refs(&other);
    put(&env.rt, question("q1", &other_refs, "open")).await;
    env.rt.drain().await.unwrap();
    assert_eq!(tags(&env).await, implied(&[("q1", &other_refs, "open")]));
    assert_eq!(bad_input(&env), 0);
    assert!(env.rt.failed_batches().is_empty());
    // One over: bad input, the 24 before kept.
    let over = names(200, 25, 3);
    put(&env.rt, question("q1", &refs(&over), "open")).await;
    env.rt.drain().await.unwrap();
    assert_eq!(bad_input(&env), 1);
    assert_eq!(tags(&env).await, implied(&[("q1", &other_refs, "open")]));
    let report = env.rt.verify().await.expect("verify");
    let said = format!("{:#?}", report.bad_input);
    assert!(
        said.contains(
            "`tags` holds 25 distinct elements, over the 24 an item of `question` may hold"
        ),
        "{said}"
    );
    assert!(report.problems.is_empty(), "{:#?}", report.problems);
    // Long tags: 24 of 2,044 bytes (`TAG#` and the tag: DynamoDB's 2,048
    // of a partition key).
    let long = names(300, 24, 2044);
    let long_refs = refs(&long);
    put(&env.rt, question("q1", &long_refs, "open")).await;
    env.rt.drain().await.unwrap();
    assert_eq!(tags(&env).await, implied(&[("q1", &long_refs, "open")]));
    let ledger = &env.rt.config.ledger_table;
    let record = env
        .rt
        .processors
        .store
        .get(
            ledger,
            shared::engine::derive::source_key("derive", &question_key("q1")),
        )
        .await
        .unwrap()
        .expect("its record");
    let bytes = item_size(&record);
    println!("ledger record of a question with 24 tags of 2,044 bytes: {bytes} bytes");
    assert!(bytes < shared::item::MAX_ITEM_BYTES, "{bytes}");
    assert_eq!(bad_input(&env), 1);
    assert_clean(&env.rt).await;
}

fn refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// A `list` of tags: a tag twice counts once; an element that is no
/// string makes the question bad input naming its position, and what its
/// last valid state implied stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_counts_distinct_tags_and_a_non_string_element_is_bad_input() {
    let text = std::fs::read_to_string(shipped("examples/qa_tags.yaml"))
        .unwrap()
        .replace("      tags: set\n", "      tags: list\n");
    let file = temp_model("qa_tags_list", &text);
    let mut env = model_env("qa_tags", |o| o.model_file = Some(file)).await;
    let with = |tags: Vec<AttributeValue>| {
        let mut q = question("q1", &[], "open");
        q.insert("tags".into(), AttributeValue::L(tags));
        q
    };
    put(&env.rt, with(vec![s("rust"), s("go"), s("rust")])).await;
    env.rt.drain().await.unwrap();
    assert_eq!(
        tags(&env).await,
        implied(&[("q1", &["go", "rust"], "open")])
    );
    put(&env.rt, with(vec![s("zig"), AttributeValue::N("3".into())])).await;
    env.rt.drain().await.unwrap();
    assert_eq!(bad_input(&env), 1);
    assert_eq!(
        tags(&env).await,
        implied(&[("q1", &["go", "rust"], "open")])
    );
    let report = env.rt.verify().await.expect("verify");
    let said = format!("{:#?}", report.bad_input);
    assert!(said.contains("`tags`[1] is a int, not a string"), "{said}");
    put(&env.rt, with(vec![s("zig")])).await;
    env.rt.drain().await.unwrap();
    assert_eq!(tags(&env).await, implied(&[("q1", &["zig"], "open")]));
    assert_clean(&env.rt).await;
    let q = get(&env.rt, question_key("q1"))
        .await
        .expect("the question");
    assert!(q.contains_key("tags"));
}

/// With another rule beside the tags (a count per author, whose key moves
/// when the author changes), the bound leaves it its share: the author
/// and all 24 tags replaced at once (1 + 2 + 4 x 24 = 99 actions) land in
/// one transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bound_leaves_the_other_rules_their_share_of_the_transaction() {
    let text = std::fs::read_to_string(shipped("examples/qa_tags.yaml"))
        .unwrap()
        .replace("      tags: set\n", "      tags: set\n      author: string\n")
        .replace(
            "    count:\n",
            "    count:\n      - counter: author_stats\n        with: { author: author }\n        add: { questions: 1 }\n",
        )
        .replace(
            "\nqueries:",
            "  author_stats:\n    owner: processor\n    key: { PK: \"AUTHOR#${author}\", SK: \"STATS\" }\n    counter:\n      attributes: [questions]\n      created_by: processor\n      remove_at_zero: true\n\nqueries:",
        );
    let file = temp_model("qa_tags_authors", &text);
    let m = &shared::file::load(&file).expect("loads").model;
    let budget = m.entities[m.entity("question").unwrap()]
        .each
        .clone()
        .unwrap();
    assert_eq!((budget.fixed, budget.max_alone("tags")), (3, 24));
    let mut env = model_env("qa_tags", |o| o.model_file = Some(file)).await;
    let with_author = |tags: &[&str], author: &str| {
        let mut q = question("q1", tags, "open");
        q.insert("author".into(), s(author));
        q
    };
    let names =
        |from: usize| -> Vec<String> { (from..from + 24).map(|i| format!("t{i:03}")).collect() };
    let (a, b) = (names(0), names(100));
    put(&env.rt, with_author(&refs(&a), "ann")).await;
    env.rt.drain().await.unwrap();
    put(&env.rt, with_author(&refs(&b), "bob")).await;
    env.rt.drain().await.unwrap();
    assert_eq!(tags(&env).await, implied(&[("q1", &refs(&b), "open")]));
    assert!(get(&env.rt, key("AUTHOR#ann", "STATS")).await.is_none());
    assert_eq!(
        get(&env.rt, key("AUTHOR#bob", "STATS"))
            .await
            .expect("bob's count")
            .opt_i64("questions")
            .unwrap(),
        Some(1)
    );
    assert_eq!(bad_input(&env), 0);
    assert!(env.rt.failed_batches().is_empty());
    assert_clean(&env.rt).await;
}

/// A `when` that stops holding takes every element's item and count back,
/// and brings them again when it holds: listings of open questions only,
/// counted per tag while open, with a tag skipped by its own condition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_when_that_stops_holding_takes_back_every_tag_and_brings_them_again() {
    let text = std::fs::read_to_string(shipped("examples/qa_tags.yaml"))
        .unwrap()
        .replace(
            "        with: { tag: tag, askedAt: askedAt, qid: qid, title: title, status: status }\n",
            "        with: { tag: tag, askedAt: askedAt, qid: qid, title: title, status: status }\n        when: \"status == 'open'\"\n",
        )
        .replace(
            "        with: { tag: tag }\n",
            "        with: { tag: tag }\n        when: \"status == 'open' && !tag.startsWith('meta-')\"\n",
        );
    let file = temp_model("qa_tags_open", &text);
    let mut env = model_env("qa_tags", |o| o.model_file = Some(file)).await;
    put(&env.rt, question("q1", &["rust", "meta-faq"], "open")).await;
    env.rt.drain().await.unwrap();
    let open = vec![
        format!("TAG#meta-faq Q#{ASKED}#q1 0"),
        format!("TAG#rust Q#{ASKED}#q1 0"),
        "TAG#rust STATS 1".to_string(),
    ];
    assert_eq!(derived_and_counts(&env).await, open);
    put(&env.rt, question("q1", &["rust", "meta-faq"], "closed")).await;
    env.rt.drain().await.unwrap();
    assert_eq!(derived_and_counts(&env).await, Vec::<String>::new());
    put(&env.rt, question("q1", &["rust", "meta-faq"], "open")).await;
    env.rt.drain().await.unwrap();
    assert_eq!(derived_and_counts(&env).await, open);
    assert_clean(&env.rt).await;
    assert_eq!(bad_input(&env), 0);
}

/// Every item but the questions: `PK SK questions` (0 when none).
async fn derived_and_counts(env: &ModelEnv) -> Vec<String> {
    scan(env)
        .await
        .into_iter()
        .filter(|i| i.s("type").ok() != Some("question"))
        .map(|i| {
            let (pk, sk) = (i.s("PK").unwrap(), i.s("SK").unwrap());
            format!("{pk} {sk} {}", i.opt_i64("questions").unwrap().unwrap_or(0))
        })
        .collect::<std::collections::BTreeSet<String>>()
        .into_iter()
        .collect()
}
