//! The bill meter against DynamoDB's documented billing rules: items sized
//! by hand (attribute names plus values, in bytes), writes rounded up to
//! 1 KB per item, reads to 4 KB (per item for GetItem, BatchGetItem and
//! transactions, on the total for Query), eventually consistent reads at
//! half, transactional actions twice, an index's writes added (two when an
//! indexed key changes: a delete and a put), a shrinking update billed on
//! the larger image, a refused condition on the existing item.

use aws_sdk_dynamodb::types::{
    AttributeDefinition, GlobalSecondaryIndex, KeySchemaElement, KeyType, KeysAndAttributes,
    Projection, ProjectionType, Put, ScalarAttributeType, TransactGetItem,
};
use aws_sdk_dynamodb::types::{AttributeValue, BillingMode, Get};
use jobstream::local::engine::{sdk_config, LocalEngine};
use jobstream::meter::{Bill, Meter};
use shared::item::Item;

const TABLE: &str = "bill";

fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.to_string())
}

/// An item of exactly `bytes` bytes as DynamoDB sizes it: `pk` (2 + its
/// length), `sk` (2 + 1) and `v` (1 + the filler).
fn item(pk: &str, sk: &str, bytes: usize) -> Item {
    let fixed = 2 + pk.len() + 2 + sk.len() + 1;
    [
        ("pk".to_string(), s(pk)),
        ("sk".to_string(), s(sk)),
        ("v".to_string(), s(&"x".repeat(bytes - fixed))),
    ]
    .into()
}

fn key(pk: &str, sk: &str) -> Item {
    [("pk".to_string(), s(pk)), ("sk".to_string(), s(sk))].into()
}

async fn setup() -> (LocalEngine, Meter, aws_sdk_dynamodb::Client) {
    let engine = crate::support::start_engine().await;
    let meter = Meter::in_front_of(&engine.endpoint())
        .await
        .expect("meter starts");
    let client = aws_sdk_dynamodb::Client::new(&sdk_config(Some(&meter.endpoint()), 1).await);
    let attr = |n: &str| {
        AttributeDefinition::builder()
            .attribute_name(n)
            .attribute_type(ScalarAttributeType::S)
            .build()
            .unwrap()
    };
    let ks = |n: &str, t: KeyType| {
        KeySchemaElement::builder()
            .attribute_name(n)
            .key_type(t)
            .build()
            .unwrap()
    };
    client
        .create_table()
        .table_name(TABLE)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(attr("pk"))
        .attribute_definitions(attr("sk"))
        .attribute_definitions(attr("g"))
        .key_schema(ks("pk", KeyType::Hash))
        .key_schema(ks("sk", KeyType::Range))
        .global_secondary_indexes(
            GlobalSecondaryIndex::builder()
                .index_name("byG")
                .key_schema(ks("g", KeyType::Hash))
                .projection(
                    Projection::builder()
                        .projection_type(ProjectionType::All)
                        .build(),
                )
                .build()
                .unwrap(),
        )
        .send()
        .await
        .expect("table created");
    (engine, meter, client)
}

/// The bill of what `f` sends.
async fn billed<F: std::future::Future<Output = ()>>(meter: &Meter, f: F) -> Bill {
    let before = meter.bill();
    f.await;
    meter.bill().since(&before)
}

#[tokio::test]
async fn the_meter_bills_as_dynamodb_documents() {
    let (_engine, meter, c) = setup().await;
    let put = |i: Item| {
        let c = c.clone();
        async move {
            c.put_item()
                .table_name(TABLE)
                .set_item(Some(i))
                .send()
                .await
                .expect("put");
        }
    };
    // `SET <attr> = <value>` on the item at (pk, "1").
    let set = |pk: &str, attr: &str, value: &str| {
        let req = c.update_item().table_name(TABLE);
        let req = req.set_key(Some(key(pk, "1")));
        let req = req.update_expression(format!("SET {attr} = :v"));
        let req = req.expression_attribute_values(":v", s(value));
        async move {
            req.send().await.expect("update");
        }
    };
    // Writes: 1 KB per item, rounded up.
    let b = billed(&meter, put(item("a", "1", 1024))).await;
    assert_eq!((b.wru(), b.rru()), (1.0, 0.0), "a 1,024-byte put: {b:?}");
    let b = billed(&meter, put(item("b", "1", 1025))).await;
    assert_eq!(b.wru(), 2.0, "a 1,025-byte put");
    // Reads: 4 KB per item, half when eventually consistent.
    put(item("c", "1", 4096)).await;
    put(item("d", "1", 4097)).await;
    for (pk, consistent, want) in [
        ("c", true, 1.0),
        ("c", false, 0.5),
        ("d", true, 2.0),
        ("d", false, 1.0),
    ] {
        let b = billed(&meter, async {
            c.get_item()
                .table_name(TABLE)
                .set_key(Some(key(pk, "1")))
                .consistent_read(consistent)
                .send()
                .await
                .expect("get");
        })
        .await;
        assert_eq!(b.rru(), want, "GetItem {pk} consistent={consistent}");
    }
    // BatchGetItem: each item rounded on its own (4,096 -> 1, 4,097 -> 2).
    let b = billed(&meter, async {
        c.batch_get_item()
            .request_items(
                TABLE,
                KeysAndAttributes::builder()
                    .keys(key("c", "1"))
                    .keys(key("d", "1"))
                    .consistent_read(true)
                    .build()
                    .unwrap(),
            )
            .send()
            .await
            .expect("batch get");
    })
    .await;
    assert_eq!(b.rru(), 3.0, "BatchGetItem of 4,096 + 4,097 bytes");
    // Query: rounded on the total read (3 x 1,500 bytes = 4,500 -> 2, where
    // per item it would be 3).
    for sk in ["1", "2", "3"] {
        put(item("q", sk, 1500)).await;
    }
    for (consistent, want) in [(true, 2.0), (false, 1.0)] {
        let b = billed(&meter, async {
            c.query()
                .table_name(TABLE)
                .key_condition_expression("pk = :p")
                .expression_attribute_values(":p", s("q"))
                .consistent_read(consistent)
                .send()
                .await
                .expect("query");
        })
        .await;
        assert_eq!(
            b.rru(),
            want,
            "Query of 3 x 1,500 bytes consistent={consistent}"
        );
    }
    // Transactions: each action twice (1,024 -> 2, 1,025 -> 4).
    let b = billed(&meter, async {
        c.transact_write_items()
            .transact_items(shared::tx::put(TABLE, item("t", "1", 1024)))
            .transact_items(shared::tx::put(TABLE, item("t", "2", 1025)))
            .send()
            .await
            .expect("transaction");
    })
    .await;
    assert_eq!(b.wru(), 6.0, "TransactWriteItems of 1,024 + 1,025 bytes");
    let b = billed(&meter, async {
        let get = |pk: &str| {
            TransactGetItem::builder()
                .get(
                    Get::builder()
                        .table_name(TABLE)
                        .set_key(Some(key(pk, "1")))
                        .build()
                        .unwrap(),
                )
                .build()
        };
        c.transact_get_items()
            .transact_items(get("c"))
            .transact_items(get("d"))
            .send()
            .await
            .expect("transactional read");
    })
    .await;
    assert_eq!(b.rru(), 6.0, "TransactGetItems of 4,096 + 4,097 bytes");
    // A shrinking update is billed on the larger image: 1,025 bytes -> 2.
    let b = billed(&meter, set("b", "v", "y")).await;
    assert_eq!(b.wru(), 2.0, "an update shrinking 1,025 bytes to 10");
    // An index: its write is added (600 bytes + g: 1 + 1), and a changed
    // index key costs the index a delete and a put (1 + 2).
    let mut indexed = item("g", "1", 600);
    indexed.insert("g".to_string(), s("k1"));
    let b = billed(&meter, put(indexed)).await;
    assert_eq!(b.wru(), 2.0, "a put projected into one index: {b:?}");
    assert_eq!(b.ops["PutItem"].index_wru, 1.0);
    let b = billed(&meter, set("g", "g", "k2")).await;
    assert_eq!(
        b.wru(),
        3.0,
        "an update moving the item in the index: {b:?}"
    );
    // A refused condition is billed on the existing item (1,025 bytes -> 2),
    // which the engine's error does not report: the meter's correction.
    put(item("r", "1", 1025)).await;
    let b = billed(&meter, async {
        let err = c
            .put_item()
            .table_name(TABLE)
            .set_item(Some(item("r", "1", 100)))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await
            .expect_err("the condition refuses");
        assert!(
            err.as_service_error()
                .is_some_and(|e| e.is_conditional_check_failed_exception()),
            "{err:?}"
        );
    })
    .await;
    assert_eq!(b.wru(), 2.0, "a refused put against 1,025 bytes");
    assert_eq!(b.ops["PutItem"].failed_conditions, 1);
    // Nothing there: the minimum, 1.
    let b = billed(&meter, async {
        c.delete_item()
            .table_name(TABLE)
            .set_key(Some(key("none", "1")))
            .condition_expression("attribute_exists(pk)")
            .send()
            .await
            .expect_err("nothing to delete");
    })
    .await;
    assert_eq!(b.wru(), 1.0, "a refused delete of nothing");
    // A cancelled transaction is counted, not billed.
    let b = billed(&meter, async {
        let put = Put::builder()
            .table_name(TABLE)
            .set_item(Some(item("r", "1", 100)))
            .condition_expression("attribute_not_exists(pk)");
        c.transact_write_items()
            .transact_items(shared::tx::put_of(put))
            .send()
            .await
            .expect_err("cancelled");
    })
    .await;
    assert_eq!((b.wru(), b.ops["TransactWriteItems"].cancelled), (0.0, 1));
}
