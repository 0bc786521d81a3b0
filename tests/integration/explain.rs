//! `jobstream explain`: for the library model file (models/examples/library.yaml),
//! after its processors ran, what a source loan implies and what the ledger
//! recorded; which loans a derived book_loan and the member's loans counter
//! come from, by which rule; and the rule that rejects a bad loan.

use jobstream::tools::explain::{explain, Explanation, Tables};
use shared::item::{n, s, Item};

use crate::apps::{application, stage};
use crate::items::{attrs, put};
use crate::support::{model_env, shipped, ModelEnv};

const BOOK: &str = "01HXAA0000000000000000000A";
const BOOK2: &str = "01HXAA0000000000000000000B";

fn loan(member: &str, book: &str, days: i64, state: &str) -> Item {
    attrs(vec![
        ("PK", s(format!("M#{member}"))),
        ("SK", s(format!("LOAN#{book}"))),
        ("type", s("loan")),
        ("memberId", s(member)),
        ("bookId", s(book)),
        ("days", n(days)),
        ("state", s(state)),
        ("since", s("2026-01-01T00:00:00Z")),
    ])
}

/// The shipped library model file's runtime, fresh.
async fn library() -> ModelEnv {
    model_env("library", |o| {
        o.model_file = Some(shipped("examples/library.yaml"))
    })
    .await
}

async fn ask(env: &ModelEnv, pk: &str, sk: &str) -> Explanation {
    ask_in(env, &shipped("examples/library.yaml"), pk, sk).await
}

/// `jobstream explain` of the item at `(pk, sk)` in `env`'s tables, the
/// model file at `path` read for its rules.
pub(crate) async fn ask_in(
    env: &ModelEnv,
    path: &std::path::Path,
    pk: &str,
    sk: &str,
) -> Explanation {
    let file = &shared::file::load(path).expect("loads").model;
    let key = crate::items::key(pk, sk);
    let t = Tables {
        client: &env.rt.dynamodb,
        table: &env.rt.config.table,
        ledger: &env.rt.config.ledger_table,
    };
    explain(&env.rt.model, Some(file), &t, &key)
        .await
        .expect("explains")
}

fn has(x: &Explanation, line: &str) -> bool {
    x.lines.iter().any(|l| l == line)
}

/// Asserts `x` says each of `lines`, word for word.
pub(crate) fn says(x: &Explanation, lines: &[&str]) {
    for line in lines {
        assert!(has(x, line), "missing `{line}` in {:#?}", x.lines);
    }
}

#[tokio::test]
async fn explain_answers_for_a_source_a_derived_item_a_counter_and_bad_input() {
    let mut env = library().await;
    put(&env.rt, loan("ann", BOOK, 14, "open")).await;
    put(&env.rt, loan("ann", BOOK2, 7, "returned")).await;
    // Bad input: 90 days fails the file's check (1..60).
    put(&env.rt, loan("bob", BOOK, 90, "open")).await;
    env.rt.drain().await.expect("drains");

    let src = ask(&env, "M#ann", &format!("LOAN#{BOOK}")).await;
    assert_eq!(src.kind, "source", "{:#?}", src.lines);
    says(
        &src,
        &[
            "projects GSI1PK = \"OPEN\"",
            "projects GSI1SK = \"2026-01-01T00:00:00Z#ann\"",
            "in index GSI1 at GSI1PK = \"OPEN\", GSI1SK = \"2026-01-01T00:00:00Z#ann\"",
            &format!("derives PK=B#{BOOK}, SK=M#ann (book_loan) (present)"),
            "counts into PK=M#ann, SK=COUNT (loans): open +1, total +1",
            "starts no job when written",
            "ledger: counted into PK=M#ann, SK=COUNT: open +1, total +1",
            "ledger: agrees with what the rules imply now",
        ],
    );
    // A returned loan is out of the sparse index.
    let returned = ask(&env, "M#ann", &format!("LOAN#{BOOK2}")).await;
    says(&returned, &["not in index GSI1"]);

    let derived = ask(&env, &format!("B#{BOOK}"), "M#ann").await;
    assert_eq!(derived.kind, "derived", "{:#?}", derived.lines);
    let line =
        format!("implied by PK=M#ann, SK=LOAN#{BOOK} (loan) through `derive: book_loan` of loan");
    says(&derived, &[&line]);

    let counter = ask(&env, "M#ann", "COUNT").await;
    assert_eq!(counter.kind, "counter", "{:#?}", counter.lines);
    says(&counter, &[
        &format!("counted by PK=M#ann, SK=LOAN#{BOOK} (loan) through `count:` of loan: open +1, total +1"),
        &format!("counted by PK=M#ann, SK=LOAN#{BOOK2} (loan) through `count:` of loan: open +0, total +1"),
        "open: the sources imply 1; the item holds 1; the ledger's total is 1",
        "total: the sources imply 2; the item holds 2; the ledger's total is 2",
    ]);

    let bad = ask(&env, "M#bob", &format!("LOAN#{BOOK}")).await;
    assert_eq!(bad.kind, "bad input", "{:#?}", bad.lines);
    says(
        &bad,
        &["rejected by: check `days > 0 && days <= 60` of loan"],
    );
    assert!(
        bad.lines
            .iter()
            .any(|l| l.starts_with("why: ") && l.contains("1..60 days")),
        "{:#?}",
        bad.lines
    );
    // The bad loan changed nothing: no counter for bob.
    let none = ask(&env, "M#bob", "COUNT").await;
    says(&none, &["total: the sources imply 0; the item holds nothing; the ledger's total is not recorded"]);

    // A counted loan that turns into bad input keeps what it counted (the
    // engine and verify agree); explain said the sources imply 0 of it.
    put(&env.rt, loan("ann", BOOK, 90, "open")).await;
    env.rt.drain().await.expect("drains");
    assert!(env.rt.verify().await.expect("verify").problems.is_empty());
    let kept = ask(&env, "M#ann", "COUNT").await;
    says(&kept, &[
        &format!("counted by PK=M#ann, SK=LOAN#{BOOK} (loan) through `count:` of loan: open +1, total +1 (bad input now: what its last valid state counted)"),
        "open: the sources imply 1; the item holds 1; the ledger's total is 1",
        "total: the sources imply 2; the item holds 2; the ledger's total is 2",
    ]);
}

/// A board is a writer's item that is a counter too (its cards count into
/// it) and a source (it projects an index key and counts into its owner's
/// counter).
const BOARDS: &str = r#"jobstream: 1
name: boards
table:
  name: boards
  pk: PK
  sk: SK
  gsis:
    - { name: GSI1, pk: GSI1PK, sk: GSI1SK }
entities:
  board:
    key: { PK: "B#${boardId}", SK: "BOARD" }
    attributes:
      boardId: string
      owner: string
      size: int
    check:
      - { expr: "size >= 0", attribute: size, message: "not negative" }
    project:
      attributes:
        GSI1PK: "OWNER#${owner}"
        GSI1SK: "${boardId}"
    counter:
      attributes: [cards]
      created_by: writer
    count:
      - counter: owner_boards
        with: { owner: owner }
        add: { boards: 1 }
  card:
    key: { PK: "B#${boardId}", SK: "CARD#${cardId}" }
    attributes:
      boardId: string
      cardId: string
    count:
      - counter: board
        with: { boardId: boardId }
        add: { cards: 1 }
  owner_boards:
    owner: processor
    key: { PK: "O#${owner}", SK: "COUNT" }
    counter:
      attributes: [boards]
      created_by: processor
"#;

fn board(size: i64) -> Item {
    attrs(vec![
        ("PK", s("B#b1")),
        ("SK", s("BOARD")),
        ("type", s("board")),
        ("boardId", s("b1")),
        ("owner", s("ann")),
        ("size", n(size)),
    ])
}

/// R08: an item that is both a counter and a source shows both roles; once
/// its rules reject it, the rule, and what its last valid state still
/// counts (never "it changes nothing" while it does).
#[tokio::test]
async fn explain_shows_every_role_of_an_item_and_what_a_rejected_source_still_counts() {
    let path = crate::support::temp_model("boards", BOARDS);
    let mut env = model_env("boards", |o| o.model_file = Some(path.clone())).await;
    put(&env.rt, board(1)).await;
    let card = crate::items::item(&[
        ("PK", "B#b1"),
        ("SK", "CARD#c1"),
        ("type", "card"),
        ("boardId", "b1"),
        ("cardId", "c1"),
    ]);
    put(&env.rt, card).await;
    env.rt.drain().await.expect("drains");
    let both = ask_in(&env, &path, "B#b1", "BOARD").await;
    says(
        &both,
        &[
            "counted by PK=B#b1, SK=CARD#c1 (card) through `count:` of card: cards +1",
            "PK=B#b1, SK=BOARD: also a source item (board)",
            "projects GSI1PK = \"OWNER#ann\"",
            "counts into PK=O#ann, SK=COUNT (owner_boards): boards +1",
            "ledger: agrees with what the rules imply now",
        ],
    );
    // Rejected now: the rule and what it still counts.
    put(&env.rt, board(-1)).await;
    env.rt.drain().await.expect("drains");
    let bad = ask_in(&env, &path, "B#b1", "BOARD").await;
    says(
        &bad,
        &[
            "counted by PK=B#b1, SK=CARD#c1 (card) through `count:` of card: cards +1",
            "rejected by: check `size >= 0` of board",
            "still counted into PK=O#ann, SK=COUNT: boards +1",
        ],
    );
    assert!(
        !bad.lines.iter().any(|l| l.contains("it changes nothing")),
        "{:#?}",
        bad.lines
    );
    // A bad source never counted says it changes nothing.
    put(&env.rt, {
        let mut b = board(-1);
        b.insert("PK".into(), s("B#b2"));
        b.insert("boardId".into(), s("b2"));
        b
    })
    .await;
    env.rt.drain().await.expect("drains");
    let never = ask_in(&env, &path, "B#b2", "BOARD").await;
    says(
        &never,
        &["it changes nothing: no earlier valid state of it is recorded"],
    );
}

/// E6: `explain` said nothing of the history: an application root, a stage
/// of it and a history entry each say where they stand in the aggregate
/// (the root: its mirror and the latest entry it names).
#[tokio::test]
async fn explain_places_an_item_in_its_history_aggregate() {
    let mut env = model_env("tracker", |_| {}).await;
    let at = "2026-01-01T00:00:00Z";
    put(
        &env.rt,
        application("a1", "Acme", "Engineer", "applied", at),
    )
    .await;
    env.rt.drain().await.expect("drains");
    put(&env.rt, stage("a1", "s1", "Phone screen", 1)).await;
    env.rt.drain().await.expect("drains");
    let tracker = shipped("tracker.yaml");
    let ask = |sk: &'static str| ask_in(&env, &tracker, "APP#a1", sk);
    says(&ask("APP#a1").await, &[
        "history: the root of the aggregate APP#a1 (application): each change of it and of its members (stage) writes a numbered history_entry; historySequence = 2",
        "history: the latest entry PK=APP#a1, SK=HIST#00000002 (present)",
    ]);
    says(&ask("STAGE#s1").await, &["history: a member (stage) of the aggregate APP#a1: its changes write entries; snapshots list it under interviewStages"]);
    says(
        &ask("HIST#00000002").await,
        &["history: an entry of the aggregate APP#a1, written by the processor history"],
    );
}

/// A derived item whose source turned bad input is kept by the source's
/// last valid state (the ledger's record), and `explain` says so, as
/// `verify` sees it: no drift (user finding U05 of the ticketing trial:
/// explain said no source implies it).
#[tokio::test]
async fn a_derived_item_kept_by_a_rejected_sources_last_valid_state_says_so() {
    let mut env = library().await;
    put(&env.rt, loan("ann", BOOK, 14, "open")).await;
    env.rt.drain().await.expect("drains");
    // 90 days fails the file's check (1..60): bad input from now on.
    put(&env.rt, loan("ann", BOOK, 90, "open")).await;
    env.rt.drain().await.expect("drains");
    let derived = ask(&env, &format!("B#{BOOK}"), "M#ann").await;
    let line = format!(
        "kept by PK=M#ann, SK=LOAN#{BOOK} (loan): bad input now, its last valid state derived it (it stays until that item is fixed or deleted)"
    );
    says(&derived, &[&line]);
    assert!(
        derived
            .lines
            .iter()
            .all(|l| !l.starts_with("no source item")),
        "{:#?}",
        derived.lines
    );
    crate::items::assert_clean(&env.rt).await;
}

/// `verify` names each bad input item's key once, then what is wrong and
/// its kind (user5's E8: `PK=.., SK=..: loan PK=.., SK=..: ...`).
#[tokio::test]
async fn verify_names_a_bad_input_items_key_once() {
    let mut env = library().await;
    put(&env.rt, loan("bob", BOOK, 90, "open")).await;
    env.rt.drain().await.expect("drains");
    let report = env.rt.verify().await.expect("verify");
    let key = format!("PK=M#bob, SK=LOAN#{BOOK}");
    assert_eq!(report.bad_input.len(), 1, "{:#?}", report.bad_input);
    let line = &report.bad_input[0];
    assert_eq!(line.matches(&key).count(), 1, "{line}");
    assert!(line.ends_with("(InvalidValue)"), "{line}");
}

/// `jobstream explain` (the binary) exits 0 on an item of the table, 1 on
/// a key no item has (saying so, on stdout as the answer and on stderr as
/// the error), whether or not the key is one the model would derive, and 2
/// on a usage error (an empty key value) before any request, as `query`'s
/// usage errors do (user8: a key not in the table exited 0).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_exits_1_on_a_key_no_item_has_and_2_on_a_usage_error() {
    let mut env = library().await;
    put(&env.rt, loan("ann", BOOK, 14, "open")).await;
    env.rt.drain().await.expect("drains");
    let file = shipped("examples/library.yaml");
    let endpoint = env.engine.endpoint();
    let explain = |pk: &str, sk: &str| {
        crate::support::jobstream(&[
            "explain",
            "--model-file",
            file.to_str().expect("utf-8"),
            "--endpoint",
            &endpoint,
            pk,
            sk,
        ])
    };
    let text = |b: &[u8]| String::from_utf8_lossy(b).to_string();
    let there = explain("M#ann", &format!("LOAN#{BOOK}"));
    assert_eq!(there.status.code(), Some(0), "{there:?}");
    assert!(
        text(&there.stdout).contains("a source item (loan)"),
        "{there:?}"
    );
    // A loan's key no item has; the key of a derived item no loan implies.
    for (pk, sk) in [
        ("M#zoe".to_string(), format!("LOAN#{BOOK}")),
        (format!("B#{BOOK2}"), "M#zoe".to_string()),
        ("NOPE".to_string(), "NOPE".to_string()),
    ] {
        let out = explain(&pk, &sk);
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(1), "{pk} {sk}: {stdout}\n{stderr}");
        assert!(
            stderr.contains(&format!(
                "error: no item has the key PK={pk}, SK={sk} in table library"
            )),
            "{pk} {sk}: {stderr}"
        );
        assert!(
            stdout.starts_with(&format!("PK={pk}, SK={sk}: ")),
            "{stdout}"
        );
    }
    let empty = explain("M#ann", "");
    assert_eq!(empty.status.code(), Some(2), "{empty:?}");
    assert!(
        text(&empty.stderr).contains("error: the sort key value is empty"),
        "{empty:?}"
    );
    env.engine.stop().await;
}

/// user10's #6: an item a `once:` effect put names the effect, its key,
/// the marker (in the ledger) and the source item, with whether `when`
/// holds now; the key of one not made yet says why there is none.
#[tokio::test]
async fn explain_of_a_once_item_names_the_effect_its_key_marker_and_source() {
    let file = crate::scenarios::model_file("hiring/hiring.yaml");
    let mut env = model_env("hiring", |o| o.model_file = Some(file.clone())).await;
    let it = |pairs: &[(&str, &str)]| -> Item {
        pairs.iter().map(|(k, v)| (k.to_string(), s(*v))).collect()
    };
    let request = |seeker: &str, status: &str| {
        let mut r = it(&[
            ("PK", "JOB#j1"),
            ("SK", &format!("REQ#{seeker}")),
            ("type", "request"),
            ("status", status),
        ]);
        if status == "approved" {
            r.insert("approvedAt".into(), s("2026-11-03T10:00:00Z"));
        }
        r
    };
    put(
        &env.rt,
        it(&[
            ("PK", "JOB#j1"),
            ("SK", "INFO"),
            ("type", "job"),
            ("title", "t"),
        ]),
    )
    .await;
    for seeker in ["a", "b"] {
        let profile = it(&[
            ("PK", &format!("S#{seeker}")),
            ("SK", "PROFILE"),
            ("type", "seeker"),
            ("name", "n"),
        ]);
        put(&env.rt, profile).await;
    }
    put(&env.rt, request("a", "approved")).await;
    put(&env.rt, request("b", "pending")).await;
    env.rt.drain().await.expect("drains");
    let ledger = env.rt.config.ledger_table.clone();
    let x = ask_in(&env, &file, "S#a", "MATCH#j1").await;
    says(&x, &[
        "PK=S#a, SK=MATCH#j1: an item the processors own (match), put by a once effect",
        "put by once `matches` (key a#j1) for PK=JOB#j1, SK=REQ#a (request), whose when `status == 'approved'` holds now",
        &format!("marker: pk=ONCE#matches#a#j1, sk=ONCE in the ledger {ledger} (present: the effect happened; it happens at most once per key)"),
    ]);
    // The request rejected since: the match stays (once per key).
    put(&env.rt, request("a", "rejected")).await;
    env.rt.drain().await.expect("drains");
    let x = ask_in(&env, &file, "S#a", "MATCH#j1").await;
    says(&x, &[
        "put by once `matches` (key a#j1) for PK=JOB#j1, SK=REQ#a (request), whose when `status == 'approved'` does not hold now (the effect stays: it happens once)",
    ]);
    // Why there is none: the request is pending.
    let x = ask_in(&env, &file, "S#b", "MATCH#j1").await;
    assert!(!x.present);
    says(&x, &[
        "PK=S#b, SK=MATCH#j1: no item (the key of a match), put by a once effect",
        "put by once `matches` (key b#j1) for PK=JOB#j1, SK=REQ#b (request), whose when `status == 'approved'` does not hold now",
        &format!("marker: pk=ONCE#matches#b#j1, sk=ONCE in the ledger {ledger} (absent: the effect has not happened)"),
    ]);
}

/// A deal and its activities, as user14's `crm.yaml` declares them: keys
/// told apart by `dealId`'s format, which has no `#`.
const CRM: &str = r#"jobstream: 1
name: crm
table: { name: crm, pk: PK, sk: SK }
formats:
  id: { pattern: "^[A-Za-z0-9_-]+$", max_bytes: 64 }
entities:
  deal:
    key: { PK: "ACCT#${accountId}", SK: "DEAL#${dealId}" }
    attributes: { accountId: id, dealId: id, stage: [lead, won] }
  activity:
    key: { PK: "ACCT#${accountId}", SK: "DEAL#${dealId}#ACT#${at}#${activityId}" }
    attributes: { accountId: id, dealId: id, activityId: id, at: iso-utc, kind: [call, email] }
"#;

/// user14's #2: an activity whose key's `at` is not a time is the
/// activity's bad input, and the rule named is the activity's key, not the
/// deal's (whose template the key matches first).
#[tokio::test]
async fn explain_names_the_key_of_the_entity_an_item_says_it_is() {
    let path = crate::support::temp_model("crm", CRM);
    let mut env = model_env("crm", |o| o.model_file = Some(path.clone())).await;
    let (pk, sk) = ("ACCT#bacct", "DEAL#bd1#ACT#yesterday#b9");
    let activity = crate::items::item(&[
        ("PK", pk),
        ("SK", sk),
        ("type", "activity"),
        ("accountId", "bacct"),
        ("dealId", "bd1"),
        ("activityId", "b9"),
        ("at", "yesterday"),
        ("kind", "call"),
    ]);
    put(&env.rt, activity).await;
    env.rt.drain().await.expect("drains");
    let x = ask_in(&env, &path, pk, sk).await;
    says(
        &x,
        &[
            "PK=ACCT#bacct, SK=DEAL#bd1#ACT#yesterday#b9: bad input (InvalidValue): the rules reject it now; nothing is written onto it",
            "rejected by: the key templates of activity: PK = ACCT#${accountId}, SK = DEAL#${dealId}#ACT#${at}#${activityId}",
            "why: activity PK=ACCT#bacct, SK=DEAL#bd1#ACT#yesterday#b9: key part `at` is `yesterday`: not an ISO-8601 UTC time (YYYY-MM-DDTHH:MM:SS[.f]Z)",
        ],
    );
}

/// user16 #4: `explain` of a derived item whose value was edited by hand
/// named its source and nothing else, where `verify` calls it wrong. It
/// says each attribute the sources imply otherwise (and each they do not
/// imply), and that a right item agrees.
#[tokio::test]
async fn explain_of_a_derived_item_edited_by_hand_names_what_differs() {
    let mut env = library().await;
    put(&env.rt, loan("ann", BOOK, 14, "open")).await;
    env.rt.drain().await.expect("drains");
    let right = ask(&env, &format!("B#{BOOK}"), "M#ann").await;
    says(&right, &["its values are what its sources imply"]);
    let key = crate::items::key(format!("B#{BOOK}"), "M#ann".to_string());
    crate::items::update(
        &env.rt,
        key,
        "SET since = :s, note = :n",
        &[(":s", s("1999-01-01T00:00:00Z")), (":n", s("mine"))],
    )
    .await;
    let edited = ask(&env, &format!("B#{BOOK}"), "M#ann").await;
    assert_eq!(edited.kind, "derived", "{:#?}", edited.lines);
    says(
        &edited,
        &[
            "since: its sources imply \"2026-01-01T00:00:00Z\", the item holds \"1999-01-01T00:00:00Z\" (drift: `verify --repair` rewrites it)",
            "note: the item holds \"mine\", which no source implies (drift: `verify --repair` rewrites it)",
        ],
    );
    assert!(!edited
        .lines
        .iter()
        .any(|l| l == "its values are what its sources imply"));
}
