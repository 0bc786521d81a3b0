//! TransactWriteItems actions from the SDK's builders, built in one place
//! (the caller sets each builder's table, and its key or item).

use aws_sdk_dynamodb::types::builders::{
    ConditionCheckBuilder, DeleteBuilder, PutBuilder, UpdateBuilder,
};
use aws_sdk_dynamodb::types::{Delete, Put, TransactWriteItem};

use crate::item::Item;

/// An unconditional put of `item` into `table`.
pub fn put(table: &str, item: Item) -> TransactWriteItem {
    put_of(Put::builder().table_name(table).set_item(Some(item)))
}

/// An unconditional delete of `key` from `table`.
pub fn delete(table: &str, key: Item) -> TransactWriteItem {
    delete_of(Delete::builder().table_name(table).set_key(Some(key)))
}

/// The put `p` builds.
pub fn put_of(p: PutBuilder) -> TransactWriteItem {
    let p = p.build().expect("table and item are set");
    TransactWriteItem::builder().put(p).build()
}

/// The delete `d` builds.
pub fn delete_of(d: DeleteBuilder) -> TransactWriteItem {
    let d = d.build().expect("table and key are set");
    TransactWriteItem::builder().delete(d).build()
}

/// The update `u` builds.
pub fn update_of(u: UpdateBuilder) -> TransactWriteItem {
    let u = u.build().expect("table, key and expression are set");
    TransactWriteItem::builder().update(u).build()
}

/// The condition check `c` builds.
pub fn check_of(c: ConditionCheckBuilder) -> TransactWriteItem {
    let c = c.build().expect("table, key and condition are set");
    TransactWriteItem::builder().condition_check(c).build()
}
