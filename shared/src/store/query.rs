//! The store's queries: a partition whole or by sort key prefix, a page
//! of it, its last items (split from `store.rs` by responsibility).

use super::*;

impl Store {
    /// Every item of one partition (strongly consistent), optionally only
    /// sort keys starting with `sk_prefix`.
    pub async fn query_partition(
        &self,
        table: &str,
        pk_name: &str,
        pk: &str,
        sk: Option<(&str, &str)>,
    ) -> Result<Vec<Item>, StoreError> {
        let sk = sk.map(|(name, prefix)| SortKey::BeginsWith(name.to_string(), prefix.to_string()));
        self.query(table, None, pk_name, pk, sk).await
    }

    /// A paginated Query of the table (strongly consistent) or of an index
    /// (eventually consistent, as GSIs are).
    pub async fn query(
        &self,
        table: &str,
        index: Option<&str>,
        pk_name: &str,
        pk: &str,
        sk: Option<SortKey>,
    ) -> Result<Vec<Item>, StoreError> {
        let mut req = self
            .client
            .query()
            .table_name(table)
            .set_index_name(index.map(str::to_string))
            .consistent_read(index.is_none())
            .expression_attribute_names("#pk", pk_name)
            .expression_attribute_values(":pk", AttributeValue::S(pk.to_string()));
        req = match sk {
            Some(SortKey::BeginsWith(name, prefix)) => req
                .key_condition_expression("#pk = :pk AND begins_with(#sk, :prefix)")
                .expression_attribute_names("#sk", name)
                .expression_attribute_values(":prefix", AttributeValue::S(prefix)),
            Some(SortKey::Between(name, lo, hi)) => req
                .key_condition_expression("#pk = :pk AND #sk BETWEEN :lo AND :hi")
                .expression_attribute_names("#sk", name)
                .expression_attribute_values(":lo", AttributeValue::S(lo))
                .expression_attribute_values(":hi", AttributeValue::S(hi)),
            None => req.key_condition_expression("#pk = :pk"),
        };
        let pages = req.into_paginator().items().send();
        let items: Result<Vec<Item>, _> = pages.collect::<Vec<_>>().await.into_iter().collect();
        items.map_err(|e| classify("Query", table, e))
    }

    /// One page of a partition (strongly consistent), in sort key order:
    /// at most `limit` items whose sort key `sk_name` is after `after` (from
    /// the start when `None`). Returns the items and the sort key to pass as
    /// `after` for the next page, `None` when the partition is exhausted.
    /// For scopes too large for one job (a user's followers).
    pub async fn query_page(
        &self,
        table: &str,
        pk_name: &str,
        pk: &str,
        sk_name: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<Item>, Option<String>), StoreError> {
        let limit = limit.max(1);
        let mut items: Vec<Item> = Vec::new();
        let mut cursor = after.map(str::to_string);
        loop {
            let mut req = self
                .client
                .query()
                .table_name(table)
                .consistent_read(true)
                .limit(i32::try_from(limit - items.len()).unwrap_or(i32::MAX))
                .expression_attribute_names("#pk", pk_name)
                .expression_attribute_values(":pk", AttributeValue::S(pk.to_string()));
            req = match &cursor {
                Some(after) => req
                    .key_condition_expression("#pk = :pk AND #sk > :after")
                    .expression_attribute_names("#sk", sk_name)
                    .expression_attribute_values(":after", AttributeValue::S(after.clone())),
                None => req.key_condition_expression("#pk = :pk"),
            };
            let out = req.send().await.map_err(|e| classify("Query", table, e))?;
            items.extend(out.items().iter().cloned());
            let more = out.last_evaluated_key().is_some();
            let last = string_of(items.last(), sk_name);
            match (more, last) {
                // A full page: the next one starts after its last item.
                (true, Some(last)) if items.len() >= limit => return Ok((items, Some(last))),
                // A page cut short by the 1 MB limit: read on.
                (true, Some(last)) => cursor = Some(last),
                (true, None) => {
                    cursor = string_of(out.last_evaluated_key(), sk_name);
                    if cursor.is_none() {
                        return Ok((items, None));
                    }
                }
                (false, _) => return Ok((items, None)),
            }
        }
    }

    /// [`Store::query_page`] of the sort keys that begin with `prefix`
    /// (the whole partition without one) only (`begins_with`, the next page from `after` as the exclusive
    /// start key, which need not be an item's but must begin with `prefix`:
    /// DynamoDB refuses a start key outside the key condition, so another
    /// `after` reads from the prefix's first item): a listing of one kind of
    /// item reads nothing past its last one.
    #[allow(clippy::too_many_arguments)]
    pub async fn query_page_within(
        &self,
        table: &str,
        pk_name: &str,
        pk: &str,
        sk_name: &str,
        prefix: Option<&str>,
        after: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<Item>, Option<String>), StoreError> {
        let Some(prefix) = prefix else {
            return self
                .query_page(table, pk_name, pk, sk_name, after, limit)
                .await;
        };
        let limit = limit.max(1);
        let mut items: Vec<Item> = Vec::new();
        let mut cursor = after
            .filter(|a| a.starts_with(prefix) && *a != prefix)
            .map(str::to_string);
        loop {
            let start = cursor.as_ref().map(|c| {
                [
                    (pk_name.to_string(), AttributeValue::S(pk.to_string())),
                    (sk_name.to_string(), AttributeValue::S(c.clone())),
                ]
                .into()
            });
            let out = self
                .within(table, (pk_name, pk), (sk_name, prefix))
                .limit(i32::try_from(limit - items.len()).unwrap_or(i32::MAX))
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| classify("Query", table, e))?;
            items.extend(out.items().iter().cloned());
            let last = string_of(out.last_evaluated_key(), sk_name);
            match last {
                // A full page: the next one starts after its last item.
                Some(last) if items.len() >= limit => return Ok((items, Some(last))),
                // A page cut short by the 1 MB limit: read on.
                Some(last) => cursor = Some(last),
                None => return Ok((items, None)),
            }
        }
    }

    /// The last `limit` items of a partition whose sort key `sk_name`
    /// begins with `prefix`, in descending sort key order (strongly
    /// consistent; one request unless the 1 MB limit cuts a page short).
    pub async fn query_last(
        &self,
        table: &str,
        (pk_name, pk): (&str, &str),
        (sk_name, prefix): (&str, &str),
        limit: usize,
    ) -> Result<Vec<Item>, StoreError> {
        let limit = limit.max(1);
        let mut items: Vec<Item> = Vec::new();
        let mut start: Option<std::collections::HashMap<String, AttributeValue>> = None;
        loop {
            let out = self
                .within(table, (pk_name, pk), (sk_name, prefix))
                .scan_index_forward(false)
                .limit(i32::try_from(limit - items.len()).unwrap_or(i32::MAX))
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| classify("Query", table, e))?;
            items.extend(out.items().iter().cloned());
            match out.last_evaluated_key() {
                Some(last) if items.len() < limit => start = Some(last.clone()),
                _ => return Ok(items),
            }
        }
    }

    /// A strongly consistent Query of the items of partition `pk` whose
    /// sort key `sk_name` begins with `prefix`.
    fn within(
        &self,
        table: &str,
        (pk_name, pk): (&str, &str),
        (sk_name, prefix): (&str, &str),
    ) -> aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder {
        self.client
            .query()
            .table_name(table)
            .consistent_read(true)
            .key_condition_expression("#pk = :pk AND begins_with(#sk, :prefix)")
            .expression_attribute_names("#pk", pk_name)
            .expression_attribute_names("#sk", sk_name)
            .expression_attribute_values(":pk", AttributeValue::S(pk.to_string()))
            .expression_attribute_values(":prefix", AttributeValue::S(prefix.to_string()))
    }
}
