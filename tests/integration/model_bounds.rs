//! A model file is bounded when it loads, so that nothing done with it
//! later can take the process down (hostile13 #1-#3): an expression past
//! the operator or depth limit is refused by `check-model` with its place
//! (exit 1, never a stack overflow), the deepest expression allowed runs
//! in a handler on half a tokio worker's stack, and YAML nested past its
//! limit is refused before any typed reading, whatever its depth.

use std::process::Output;

use shared::file::expr::MAX_DEPTH;
use shared::item::{n, ItemExt};
use shared::metrics::names;

use crate::items::{assert_clean, get, key, metric, put};
use crate::support::{jobstream_bin, model_env, temp_model};

fn check_model(text: &str) -> (std::path::PathBuf, Output) {
    let path = temp_model("bounded", text);
    let out = std::process::Command::new(jobstream_bin())
        .args(["check-model", path.to_str().expect("a UTF-8 path")])
        .env("RUST_LOG", "warn")
        .output()
        .expect("jobstream runs");
    (path, out)
}

/// An entity whose one check is `expr`, and a tally of its items.
fn model(expr: &str) -> String {
    format!(
        r#"jobstream: 1
name: bounded
table: {{ name: bounded, pk: PK, sk: SK }}
entities:
  e:
    key: {{ PK: "E#${{id}}", SK: "E" }}
    attributes: {{ id: string, n: int }}
    check:
      - expr: "{expr}"
        message: positive
    count:
      - counter: tally
        add: {{ items: 1 }}
  tally:
    owner: processor
    key: {{ PK: "TALLY", SK: "TALLY" }}
    counter:
      attributes: [items]
      created_by: processor
"#
    )
}

/// `n + n + ... + n > 0` with `terms` terms: a tree `terms + 1` deep.
fn chain(terms: usize) -> String {
    format!("{} > 0", vec!["n"; terms].join(" + "))
}

/// hostile13 #1 and #2: a 1,500-term chain passed `check-model` and then
/// aborted `dev` on its first item; a 15,000-term one aborted
/// `check-model` itself (SIGABRT, exit 134). Both are refused at their
/// place, exit 1.
#[test]
fn check_model_refuses_a_long_operator_chain_at_its_place_and_never_crashes() {
    for terms in [1_500, 15_000] {
        let (path, out) = check_model(&model(&chain(terms)));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{terms} terms: {out:?}");
        let place = format!("{}:9:", path.display());
        assert!(
            stdout.lines().any(|l| l.starts_with(&place)
                && l.contains("expression too large")
                && l.contains("more than 500 operators")
                && l.contains("split the expression")),
            "{terms} terms: a line `{place}COL: ...`: {stdout}"
        );
        assert!(
            stdout.len() < 1_000,
            "the message does not repeat the expression: {stdout}"
        );
    }
}

/// A chain within the operator limit but deeper than the depth limit is
/// refused at its place, naming the limit.
#[test]
fn check_model_refuses_an_expression_nested_past_the_depth_limit() {
    let (path, out) = check_model(&model(&chain(MAX_DEPTH)));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let place = format!("{}:9:", path.display());
    assert!(
        stdout.lines().any(|l| l.starts_with(&place)
            && l.contains(&format!("more than {MAX_DEPTH}"))
            && l.contains("split the expression")),
        "{stdout}"
    );
    let (_, ok) = check_model(&model(&chain(MAX_DEPTH - 1)));
    assert!(ok.status.success(), "the deepest allowed loads: {ok:?}");
}

/// The deepest expression allowed is evaluated by the derive handler for
/// every item, on workers with half the stack tokio gives (1 MiB): the
/// item that passes is counted, the one that fails is bad input.
#[test]
fn the_deepest_expression_allowed_runs_in_a_handler_on_half_a_workers_stack() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_stack_size(1024 * 1024)
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        let path = temp_model("deepest", &model(&chain(MAX_DEPTH - 1)));
        let env = tokio::spawn(async move {
            let mut env = model_env("bounded", |o| o.model_file = Some(path)).await;
            let item = |id: &str, value: i64| {
                let mut i = crate::items::item(&[
                    ("PK", &format!("E#{id}")),
                    ("SK", "E"),
                    ("type", "e"),
                    ("id", id),
                ]);
                i.insert("n".to_string(), n(value));
                i
            };
            put(&env.rt, item("a", 1)).await;
            put(&env.rt, item("b", 0)).await;
            env.rt.drain().await.expect("drains");
            env
        })
        .await
        .expect("the handler's task ends");
        assert!(env.rt.failed_batches().is_empty());
        assert_eq!(metric(&env, names::BAD_INPUT), 1, "b fails the check");
        let tally = get(&env, key("TALLY", "TALLY")).await.expect("a tally");
        assert_eq!(tally.i64("items").expect("items"), 1, "a is counted");
        assert_clean(&env.rt).await;
    });
}

/// hostile13 #3: YAML nested 300,000 deep took minutes before it was
/// refused (a quadratic scan of the file); any nesting past the limit is
/// refused now with the limit named, wherever it is.
#[test]
fn check_model_refuses_yaml_nested_past_its_limit_naming_the_limit() {
    let depth = 20_000;
    for (field, value) in [
        (
            "about",
            format!("{}{}", "[".repeat(depth), "]".repeat(depth)),
        ),
        (
            "x",
            format!("{}1{}", "{a: ".repeat(depth), "}".repeat(depth)),
        ),
    ] {
        let text = format!("jobstream: 1\nname: deep\n{field}: {value}\n");
        let (path, out) = check_model(&text);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let place = format!("{}:3:", path.display());
        assert!(
            stdout.lines().any(|l| l.starts_with(&place)
                && l.contains(&format!(
                    "nests deeper than {} levels",
                    shared::file::yaml::MAX_DEPTH
                ))),
            "{field}: {stdout}"
        );
    }
}
