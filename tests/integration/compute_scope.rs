//! A `compute:` scope holds at most 98 rows (a job pins every row it read
//! in the transaction that writes the values): a larger one is bad input
//! (`ScopeTooLarge`), its values left as they are. `verify` lists it as
//! such (the scope's key, its row count, the limit, what to do), not as
//! drift a repair could fix, and `--repair` starts no job that cannot land
//! (user8's W07: "2 repair(s) ran through the live path", then "drift
//! remains", with no sign a repair cannot help).

use shared::item::{n, s};

use crate::items::{attrs, delete, get, key, num, put_all, repair};
use crate::support::{model_env, temp_model};

/// An account's posting count and largest posting, over its postings.
const LEDGER: &str = r#"
jobstream: 1
name: scope_w07
table: { name: scope_w07, pk: PK, sk: SK }
entities:
  account:
    key: { PK: "ACCT#${accountId}", SK: "ACCOUNT" }
    attributes: { accountId: string, name: string }
    compute:
      over: { entity: posting, as: postings }
      values:
        postingCount: "size(postings)"
        largest: "max(postings.map(p, p.amount) + [0])"
      queue: stats
  posting:
    key: { PK: "ACCT#${accountId}", SK: "POST#${postingId}" }
    attributes: { accountId: string, postingId: string, amount: int }
"#;

fn account(id: &str) -> shared::item::Item {
    attrs(vec![
        ("PK", s(format!("ACCT#{id}"))),
        ("SK", s("ACCOUNT")),
        ("type", s("account")),
        ("accountId", s(id)),
        ("name", s("Cash")),
    ])
}

fn postings(id: &str, count: i64) -> Vec<shared::item::Item> {
    (1..=count)
        .map(|i| {
            attrs(vec![
                ("PK", s(format!("ACCT#{id}"))),
                ("SK", s(format!("POST#{i:04}"))),
                ("type", s("posting")),
                ("accountId", s(id)),
                ("postingId", s(format!("{i:04}"))),
                ("amount", n(i)),
            ])
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scope_past_98_rows_is_reported_as_bad_input_and_no_repair_is_started() {
    let path = temp_model("scope_w07", LEDGER);
    let mut env = model_env("scope_w07", |o| o.model_file = Some(path.clone())).await;
    // a1: 99 rows, one past the limit; a2: 98 rows, the limit.
    let mut items = vec![account("a1"), account("a2")];
    items.extend(postings("a1", 99));
    items.extend(postings("a2", 98));
    put_all(&env.rt, items).await;
    env.rt.drain().await.expect("drains");
    let a1 = get(&env.rt, key("ACCT#a1", "ACCOUNT")).await.expect("a1");
    assert_eq!(
        a1.get("postingCount"),
        None,
        "a1's values are left as they are"
    );
    let a2 = get(&env.rt, key("ACCT#a2", "ACCOUNT")).await.expect("a2");
    assert_eq!((num(&a2, "postingCount"), num(&a2, "largest")), (98, 98));

    let report = env.rt.verify().await.expect("verify");
    assert!(report.is_clean(), "not drift: {:#?}", report.problems);
    assert!(
        report.repairs.is_empty(),
        "no repair: {:#?}",
        report.repairs
    );
    assert_eq!(report.bad_input.len(), 1, "{:#?}", report.bad_input);
    let line = &report.bad_input[0];
    for says in [
        "PK=ACCT#a1",
        "99 rows",
        "at most 98",
        "postingCount",
        "`count:`",
        "(ScopeTooLarge)",
    ] {
        assert!(line.contains(says), "{line} should say {says}");
    }
    assert_eq!(repair(&env.rt, &report).await, 0, "--repair starts nothing");
    // `explain` of the item says so too, not "a job pending, or drift".
    let x = crate::explain::ask_in(&env, &path, "ACCT#a1", "ACCOUNT").await;
    let line = x
        .lines
        .iter()
        .find(|l| l.starts_with("computes"))
        .unwrap_or_else(|| panic!("{:#?}", x.lines));
    assert!(
        line.contains("not judged now, the scope holds 99 rows")
            && line.contains("(ScopeTooLarge)"),
        "{line}"
    );

    // Back within the limit, the scope is computed and verify is clean.
    delete(&env.rt, key("ACCT#a1", "POST#0099")).await;
    env.rt.drain().await.expect("drains");
    let a1 = get(&env.rt, key("ACCT#a1", "ACCOUNT")).await.expect("a1");
    assert_eq!((num(&a1, "postingCount"), num(&a1, "largest")), (98, 98));
    let report = env.rt.verify().await.expect("verify");
    assert!(report.is_clean(), "{:#?}", report.problems);
    assert!(report.bad_input.is_empty(), "{:#?}", report.bad_input);
}

fn catalog_item(
    pk: &str,
    sk: &str,
    pairs: Vec<(&str, aws_sdk_dynamodb::types::AttributeValue)>,
) -> shared::item::Item {
    let mut all = vec![("PK", s(pk)), ("SK", s(sk))];
    all.extend(pairs);
    attrs(all)
}

/// user10's finding 4, `verify`'s side: a table loaded without processors
/// (no computed value written yet). `verify` judges every value that can
/// be computed (both categories' `productCount`, the books' average: 2
/// items checked, 2 drifts) and lists the value that cannot (the empty
/// category's average, a division by zero) as bad input, never a silent
/// pass (it said "computed value | 0 checked"); `explain` says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_judges_the_values_that_compute_and_lists_one_that_cannot_as_bad_input() {
    let path = crate::scenarios::model_file("catalog/catalog.yaml");
    let env = model_env("catalog", |o| o.model_file = Some(path.clone())).await;
    let category = |id: &str| {
        catalog_item(
            &format!("CAT#{id}"),
            "CATEGORY",
            vec![
                ("type", s("category")),
                ("category", s(id)),
                ("title", s(id)),
            ],
        )
    };
    put_all(
        &env.rt,
        vec![
            category("empty"),
            category("books"),
            catalog_item(
                "CAT#books",
                "PRODUCT#p1",
                vec![
                    ("type", s("product")),
                    ("category", s("books")),
                    ("productId", s("p1")),
                    ("price", n(1500)),
                ],
            ),
        ],
    )
    .await;
    // Not drained: verify reads the table as loaded.
    let report = env.rt.verify().await.expect("verify");
    let said = format!("{:#?} {:#?}", report.problems, report.bad_input);
    assert_eq!(report.kinds["computed value"].checked, 2, "{said}");
    // (The ledger indexes the job lists a scope from are drift too.)
    let computed: Vec<&String> = report
        .problems
        .iter()
        .filter(|p| p.starts_with("computed value:"))
        .collect();
    assert_eq!(computed.len(), 2, "{said}");
    for (k, says) in [
        ("PK=CAT#empty", "productCount is absent, the rows imply 0"),
        (
            "PK=CAT#books",
            "productCount is absent, the rows imply 1, averagePrice is absent, the rows imply 1500",
        ),
    ] {
        assert!(
            computed.iter().any(|p| p.contains(k) && p.contains(says)),
            "{k}: {said}"
        );
    }
    assert_eq!(report.bad_input.len(), 1, "{said}");
    for says in [
        "PK=CAT#empty, SK=CATEGORY: averagePrice not computed over `product` rows of PK=CAT#empty",
        "division by zero",
        "(Invalid)",
    ] {
        assert!(report.bad_input[0].contains(says), "{says}: {said}");
    }
    let x = crate::explain::ask_in(&env, &path, "CAT#empty", "CATEGORY").await;
    let lines = x.lines.join("\n");
    assert!(lines.contains("computes productCount = 0"), "{lines}");
    assert!(
        lines.contains("computes averagePrice from") && lines.contains("bad input, not judged now"),
        "{lines}"
    );
}
