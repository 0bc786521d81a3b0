//! `number` attributes and fractions inside maps against the embedded
//! engine (user9's finding 3): what the writer wrote as `12.10`, `1E+2` or
//! with 38 significant digits is compared, rendered into keys and copied
//! into derived items and history snapshots exactly as the engine returns
//! it, never through a binary double; replays move nothing.

use aws_sdk_dynamodb::types::AttributeValue;
use shared::item::{s, Item};

use crate::items::{assert_clean, attrs, bad_input, deliver, get, key, put};
use crate::support::{model_env, ModelEnv};

fn n(v: &str) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

async fn rides() -> ModelEnv {
    let file = crate::scenarios::model_file("rides/rides.yaml");
    model_env("rides", |o| o.model_file = Some(file)).await
}

/// A trip priced `price`, rated `rating`, picked up at `lat`.
fn trip(id: &str, price: &str, rating: &str, lat: &str) -> Item {
    attrs(vec![
        ("PK", s(format!("TRIP#{id}"))),
        ("SK", s("TRIP")),
        ("type", s("trip")),
        ("tripId", s(id)),
        ("driverId", s("d1")),
        ("price", n(price)),
        ("rating", n(rating)),
        (
            "pickup",
            AttributeValue::M([("lat".into(), n(lat)), ("lng".into(), n("-0.1275"))].into()),
        ),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn numbers_are_rendered_and_copied_as_the_engine_returns_them() {
    let mut env = rides().await;
    const BIG: &str = "1234567890.1234567890123456789012345678";
    put(&env, trip("a", "12.10", "4.50", "51.5")).await;
    put(
        &env,
        trip(
            "b",
            "1E+2",
            "4.49999999999999999999999999999999999",
            "50.00000000000000000000000000000000001",
        ),
    )
    .await;
    put(&env, trip("c", BIG, "5", "-33.9")).await;
    env.rt.drain().await.unwrap();
    assert_eq!(bad_input(&env), 0);
    // The engine returns numbers as DynamoDB does: no trailing zeros, no
    // exponent; keys and copies hold that text.
    let stored = get(&env, key("TRIP#a", "TRIP")).await.expect("trip a");
    assert_eq!(
        stored["price"],
        n("12.1"),
        "the engine normalises as DynamoDB does"
    );
    assert_eq!(stored["GSI1SK"], s("4.5#a"), "4.50 >= 4.5, rendered 4.5");
    let fare = get(&env, key("DRIVER#d1", "FARE#12.1#a"))
        .await
        .expect("fare of a");
    assert_eq!(fare["price"], n("12.1"));
    let fare = get(&env, key("DRIVER#d1", "FARE#100#b"))
        .await
        .expect("fare of b, 1E+2 as 100");
    assert_eq!(fare["price"], n("100"));
    let fare = get(&env, key("DRIVER#d1", format!("FARE#{BIG}#c")))
        .await
        .expect("38 digits");
    assert_eq!(fare["price"], n(BIG));
    // 4.4999...9 (35 nines) is below 4.5, and 50.000...01 above 50: no
    // double would tell either apart.
    let b = get(&env, key("TRIP#b", "TRIP")).await.expect("trip b");
    assert!(!b.contains_key("GSI1PK"), "4.4999... < 4.5: {b:?}");
    let c = get(&env, key("TRIP#c", "TRIP")).await.expect("trip c");
    assert_eq!(c["GSI1SK"], s("5#c"));
    let counts = get(&env, key("DRIVER#d1", "TRIPS")).await.expect("counts");
    assert_eq!(
        (counts["trips"].clone(), counts["north"].clone()),
        (n("3"), n("2"))
    );
    // The history's snapshot holds the item's numbers as stored, its
    // description the price as rendered.
    let entry = get(&env, key("TRIP#c", "HIST#0001")).await.expect("entry");
    assert_eq!(entry["description"], s(format!("Trip at {BIG}")));
    let AttributeValue::M(snapshot) = &entry["snapshot"] else {
        panic!("{entry:?}")
    };
    assert_eq!(snapshot["price"], n(BIG));
    assert_eq!(snapshot["pickup"], c["pickup"]);
    let entry = get(&env, key("TRIP#b", "HIST#0001")).await.expect("entry");
    let AttributeValue::M(snapshot) = &entry["snapshot"] else {
        panic!("{entry:?}")
    };
    assert_eq!(
        snapshot["rating"],
        n("4.49999999999999999999999999999999999")
    );
    assert_eq!(entry["description"], s("Trip at 100"));
    assert_clean(&env.rt).await;
    // Every record delivered again changes nothing.
    let before = crate::items::scan(&env).await.len();
    let all = env.records().await;
    deliver(&env, &all).await;
    assert_eq!(crate::items::scan(&env).await.len(), before);
    assert_eq!(
        get(&env, key("DRIVER#d1", "TRIPS")).await.expect("counts")["trips"],
        n("3")
    );
    assert_clean(&env.rt).await;
}
