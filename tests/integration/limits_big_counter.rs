//! user13's #1: a writer's counter item grown near DynamoDB's 400 KB item
//! limit, with no projection of its own that would make it bad input to
//! the derive already: a course found through its identity (`unique:`,
//! the totals kept under `@course`) and an enrollment counted by its key.
//! DynamoDB refuses the sync's write of the sums (the derive notes it as
//! bad input); `verify` must list each as bad input naming the table item,
//! not as drift a repair could never land.

use shared::item::{item_size, n, s, Item, MAX_ITEM_BYTES};

use crate::items::{attrs, get, key, put, repair};
use crate::support::{model_env, temp_model, Captured, ModelEnv};

/// Courses keyed by their instructor, found by their id; enrollments
/// counted into the course and counting the lessons done into themselves.
const LEARN: &str = r#"jobstream: 1
name: biglearn
table:
  name: biglearn
  pk: PK
  sk: SK
formats:
  id: { pattern: "^[A-Za-z0-9_-]+$", max_bytes: 64 }
entities:
  course:
    key: { PK: "INST#${instructorId}", SK: "COURSE#${courseId}" }
    attributes:
      instructorId: id
      courseId: id
    unique: [courseId]
    counter:
      attributes: [enrolled]
      created_by: writer
  enrollment:
    key: { PK: "COURSE#${courseId}", SK: "ENR#${studentId}" }
    attributes:
      courseId: id
      studentId: id
    counter:
      attributes: [done]
      created_by: writer
    count:
      - counter: course
        with: { courseId: courseId }
        add: { enrolled: 1 }
  progress:
    key: { PK: "STU#${studentId}", SK: "PROG#${courseId}#${lesson}" }
    attributes:
      studentId: id
      courseId: id
      lesson: int
    count:
      - counter: enrollment
        with: { courseId: courseId, studentId: studentId }
        add: { done: 1 }
"#;

async fn learn() -> ModelEnv {
    let path = temp_model("biglearn", LEARN);
    model_env("biglearn", |o| o.model_file = Some(path)).await
}

/// `item` with a `notes` attribute that takes it to 4 bytes under the item
/// limit: DynamoDB takes it, but not with a sum beside it.
fn grown(mut item: Item) -> Item {
    let base = item_size(&item) + "notes".len();
    item.insert("notes".into(), s("x".repeat(MAX_ITEM_BYTES - 4 - base)));
    assert_eq!(item_size(&item), MAX_ITEM_BYTES - 4);
    item
}

fn course(id: &str) -> Item {
    attrs(vec![
        ("PK", s("INST#i1")),
        ("SK", s(format!("COURSE#{id}"))),
        ("type", s("course")),
        ("instructorId", s("i1")),
        ("courseId", s(id)),
    ])
}

fn enrollment(course: &str, student: &str) -> Item {
    attrs(vec![
        ("PK", s(format!("COURSE#{course}"))),
        ("SK", s(format!("ENR#{student}"))),
        ("type", s("enrollment")),
        ("courseId", s(course)),
        ("studentId", s(student)),
    ])
}

fn progress(course: &str, student: &str, lesson: i64) -> Item {
    attrs(vec![
        ("PK", s(format!("STU#{student}"))),
        ("SK", s(format!("PROG#{course}#{lesson}"))),
        ("type", s("progress")),
        ("studentId", s(student)),
        ("courseId", s(course)),
        ("lesson", n(lesson)),
    ])
}

/// The located course and the enrollment by key, each grown to 4 bytes
/// under the limit and counted into once: the derive writes no sum onto
/// either (DynamoDB refuses it), and `verify` lists both as bad input by
/// their table keys, with no drift and nothing to repair; the small course
/// beside them is counted exactly. Before: `drift: counter: PK=@course,
/// SK=["huge"]: enrolled is absent, the sources sum to 1` (the ledger
/// identity, not the item) and `counter: PK=COURSE#small, SK=ENR#huge:
/// done is absent, ...`, and `--repair` ran repairs that could never land.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_counter_too_large_for_its_sums_is_bad_input_to_verify_by_its_table_key() {
    let (logs, _guard) = Captured::start();
    let mut env = learn().await;
    put(&env.rt, grown(course("huge"))).await;
    put(&env.rt, enrollment("huge", "s1")).await;
    put(&env.rt, course("small")).await;
    put(&env.rt, grown(enrollment("small", "huge"))).await;
    put(&env.rt, progress("small", "huge", 1)).await;
    env.rt.drain().await.unwrap();
    assert!(env.rt.failed_batches().is_empty());
    // The derive notes each refused write as bad input of the table item
    // (not of the ledger identity `@course`).
    let logged = logs.text();
    for table_key in ["PK=INST#i1, SK=COURSE#huge", "PK=COURSE#small, SK=ENR#huge"] {
        assert!(
            logged
                .lines()
                .any(|l| l.contains("BadInput") && l.contains(table_key)),
            "{table_key} noted:\n{logged}"
        );
    }
    assert!(!logged.contains("@course"), "{logged}");
    let huge = get(&env, key("INST#i1", "COURSE#huge")).await.unwrap();
    assert!(!huge.contains_key("enrolled"), "no sum written onto it");
    let small = get(&env, key("INST#i1", "COURSE#small")).await.unwrap();
    assert_eq!(
        small.get("enrolled"),
        Some(&n(1)),
        "the other course counted"
    );
    let report = env.rt.verify().await.expect("verify");
    assert!(
        report.is_clean(),
        "drift: {:#?}, bad input: {:#?}",
        report.problems,
        report.bad_input
    );
    for table_key in ["PK=INST#i1, SK=COURSE#huge", "PK=COURSE#small, SK=ENR#huge"] {
        assert!(
            report
                .bad_input
                .iter()
                .any(|b| b.contains(table_key) && b.contains("sums")),
            "{table_key} listed as bad input: {:?}",
            report.bad_input
        );
    }
    assert!(
        !report.bad_input.iter().any(|b| b.contains("@course")),
        "the table item, not the ledger identity: {:?}",
        report.bad_input
    );
    assert_eq!(repair(&env, &report).await, 0, "nothing to repair");
}
