//! Application-side writes of the tracker: what an API would do. Only the
//! facts are written; every processor-owned attribute is left out. Keys come
//! from `shared::models::tracker::keys`, the same functions the processors use.

use crate::item::{n, s, Item};
use crate::models::tracker::keys;
use crate::models::{Context as _, Failed};
use aws_sdk_dynamodb::types::AttributeValue;

#[derive(Clone)]
pub struct TrackerWriter {
    pub client: aws_sdk_dynamodb::Client,
    pub table: String,
}

fn app_key(id: &str) -> Item {
    [
        (keys::PK.to_string(), s(keys::app_pk(id))),
        (keys::SK.to_string(), s(keys::app_sk(id))),
    ]
    .into()
}

fn stage_key(app_id: &str, stage_id: &str) -> Item {
    [
        (keys::PK.to_string(), s(keys::app_pk(app_id))),
        (keys::SK.to_string(), s(keys::stage_sk(stage_id))),
    ]
    .into()
}

/// A new application's user fields.
pub fn application(id: &str, company: &str, position: &str, status: &str, at: &str) -> Item {
    let mut item = app_key(id);
    for (k, v) in [
        ("id", s(id)),
        ("companyName", s(company)),
        ("positionTitle", s(position)),
        ("status", s(status)),
        ("isArchived", AttributeValue::Bool(false)),
        ("createdAt", s(at)),
        ("updatedAt", s(at)),
    ] {
        item.insert(k.to_string(), v);
    }
    item
}

/// A new interview stage.
pub fn stage(app_id: &str, stage_id: &str, name: &str, order: i64) -> Item {
    let mut item = stage_key(app_id, stage_id);
    for (k, v) in [
        ("id", s(stage_id)),
        ("applicationId", s(app_id)),
        ("name", s(name)),
        ("order", n(order)),
        ("isCompleted", AttributeValue::Bool(false)),
    ] {
        item.insert(k.to_string(), v);
    }
    item
}

impl TrackerWriter {
    pub fn new(client: aws_sdk_dynamodb::Client, table: &str) -> Self {
        Self {
            client,
            table: table.to_string(),
        }
    }

    /// PutItem of a whole item (no condition).
    pub async fn put(&self, item: Item) -> Result<(), Failed> {
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .send()
            .await
            .context("PutItem")?;
        Ok(())
    }

    pub async fn create_application(
        &self,
        id: &str,
        company: &str,
        position: &str,
        status: &str,
        at: &str,
    ) -> Result<(), Failed> {
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(application(id, company, position, status, at)))
            .condition_expression("attribute_not_exists(PK)")
            .send()
            .await
            .context("creating application")?;
        Ok(())
    }

    async fn update(&self, key: Item, set: &[(&str, AttributeValue)]) -> Result<(), Failed> {
        let mut req = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key))
            .condition_expression("attribute_exists(PK)");
        let mut parts = Vec::new();
        for (i, (k, v)) in set.iter().enumerate() {
            parts.push(format!("#a{i} = :v{i}"));
            req = req
                .expression_attribute_names(format!("#a{i}"), *k)
                .expression_attribute_values(format!(":v{i}"), v.clone());
        }
        req.update_expression(format!("SET {}", parts.join(", ")))
            .send()
            .await
            .context("UpdateItem")?;
        Ok(())
    }

    /// Updates user fields and `updatedAt`.
    pub async fn update_application(
        &self,
        id: &str,
        set: &[(&str, AttributeValue)],
        at: &str,
    ) -> Result<(), Failed> {
        let mut all = set.to_vec();
        all.push(("updatedAt", s(at)));
        self.update(app_key(id), &all).await
    }

    pub async fn set_archived(&self, id: &str, archived: bool, at: &str) -> Result<(), Failed> {
        self.update_application(id, &[("isArchived", AttributeValue::Bool(archived))], at)
            .await
    }

    pub async fn add_stage(
        &self,
        app_id: &str,
        stage_id: &str,
        name: &str,
        order: i64,
    ) -> Result<(), Failed> {
        self.put(stage(app_id, stage_id, name, order)).await
    }

    pub async fn update_stage(
        &self,
        app_id: &str,
        stage_id: &str,
        set: &[(&str, AttributeValue)],
    ) -> Result<(), Failed> {
        self.update(stage_key(app_id, stage_id), set).await
    }

    pub async fn remove_stage(&self, app_id: &str, stage_id: &str) -> Result<(), Failed> {
        self.delete(stage_key(app_id, stage_id)).await
    }

    pub async fn delete_application(&self, id: &str) -> Result<(), Failed> {
        self.delete(app_key(id)).await
    }

    async fn delete(&self, key: Item) -> Result<(), Failed> {
        self.client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(key))
            .send()
            .await
            .context("DeleteItem")?;
        Ok(())
    }
}
