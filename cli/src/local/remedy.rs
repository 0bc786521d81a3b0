//! What to run to make an existing table as its definition says, in place:
//! the `aws dynamodb ...` command of each step, with the table, the index's
//! key attributes and the endpoint filled in. Every step leaves the table's
//! items where they are; none deletes or re-creates the table (README:
//! "Adding, renaming or removing an index").

use serde_json::json;
use shared::models::table::Gsi;

/// How a process reaches DynamoDB, for the commands it prints: the
/// endpoint (`--endpoint-url`; `None`: the region's own DynamoDB) and the
/// region, when the process knows it (`--region`: the AWS CLI's default
/// profile may name another, or none).
#[derive(Debug, Clone, Copy, Default)]
pub struct Via<'a> {
    pub endpoint: Option<&'a str>,
    pub region: Option<&'a str>,
}

impl<'a> Via<'a> {
    /// Through `endpoint`, in `sdk`'s region.
    pub fn of(endpoint: Option<&'a str>, sdk: &'a aws_config::SdkConfig) -> Self {
        Via {
            endpoint,
            region: sdk.region().map(|r| r.as_ref()),
        }
    }

    /// Table `table`, reached so.
    pub fn at(self, table: &'a str) -> At<'a> {
        At { table, via: self }
    }
}

/// The table a command is for, and how it is reached.
#[derive(Debug, Clone, Copy)]
pub struct At<'a> {
    pub table: &'a str,
    pub via: Via<'a>,
}

impl At<'_> {
    /// `aws dynamodb SUBCOMMAND --table-name T [--endpoint-url E] [--region R] ARGS...`,
    /// each word quoted for a POSIX shell where it needs it.
    fn aws(&self, subcommand: &str, args: &[String]) -> String {
        let mut words = vec![
            "aws".to_string(),
            "dynamodb".to_string(),
            subcommand.to_string(),
            "--table-name".to_string(),
            self.table.to_string(),
        ];
        if let Some(e) = self.via.endpoint {
            words.extend(["--endpoint-url".to_string(), e.to_string()]);
        }
        if let Some(r) = self.via.region {
            words.extend(["--region".to_string(), r.to_string()]);
        }
        words.extend(args.iter().cloned());
        // Quoting fails only on a NUL byte, which no table, attribute or
        // URL holds: then the words as they are.
        shlex::try_join(words.iter().map(String::as_str)).unwrap_or_else(|_| words.join(" "))
    }
}

/// A provisioned table's read and write capacity: a GSI added to it needs
/// its own (the table's are a starting point). `None`: on demand.
pub type Capacity = Option<(i64, i64)>;

/// The command that adds index `g` to the table, as the stack
/// and `jobstream create` make it (string keys, its projection).
pub fn add_index(at: At<'_>, g: &Gsi, capacity: Capacity) -> String {
    let defs: Vec<String> = g
        .key_attributes()
        .map(|a| format!("AttributeName={a},AttributeType=S"))
        .collect();
    let mut schema = vec![json!({"AttributeName": g.pk, "KeyType": "HASH"})];
    if let Some(sk) = g.sk {
        schema.push(json!({"AttributeName": sk, "KeyType": "RANGE"}));
    }
    let mut projection = json!({"ProjectionType": g.projection.type_name()});
    if !g.projection.non_key_attributes().is_empty() {
        projection["NonKeyAttributes"] = json!(g.projection.non_key_attributes());
    }
    let mut create = json!({
        "IndexName": g.name,
        "KeySchema": schema,
        "Projection": projection,
    });
    if let Some((read, write)) = capacity {
        create["ProvisionedThroughput"] =
            json!({"ReadCapacityUnits": read, "WriteCapacityUnits": write});
    }
    let mut args = vec!["--attribute-definitions".to_string()];
    args.extend(defs);
    args.push("--global-secondary-index-updates".to_string());
    args.push(json!([{ "Create": create }]).to_string());
    at.aws("update-table", &args)
}

/// The command that deletes index `name` (the table's items stay).
pub fn delete_index(at: At<'_>, name: &str) -> String {
    let args = [
        "--global-secondary-index-updates".to_string(),
        json!([{ "Delete": { "IndexName": name } }]).to_string(),
    ];
    at.aws("update-table", &args)
}

/// The command that prints index `name`'s status (`CREATING`, then `ACTIVE`).
pub fn index_status(at: At<'_>, name: &str) -> String {
    let args = [
        "--query".to_string(),
        format!("Table.GlobalSecondaryIndexes[?IndexName=='{name}'].IndexStatus"),
    ];
    at.aws("describe-table", &args)
}

/// The command that enables a NEW_AND_OLD_IMAGES stream.
pub fn enable_stream(at: At<'_>) -> String {
    let args = [
        "--stream-specification".to_string(),
        "StreamEnabled=true,StreamViewType=NEW_AND_OLD_IMAGES".to_string(),
    ];
    at.aws("update-table", &args)
}

/// The step for a stream of other images: a stream's view type does not
/// change while it is enabled, so it is disabled, then enabled with both
/// images (a new stream: the processors read it from its start), then
/// what was written between the two is fed through the rules.
pub fn stream_view(at: At<'_>) -> String {
    let off = [
        "--stream-specification".to_string(),
        "StreamEnabled=false".to_string(),
    ];
    format!(
        "disable the stream: `{}`; then enable it with both images: `{}` (the items stay; a \
         new stream, read from its start); then run `jobstream backfill` (what was written \
         between the two) and `jobstream verify` (a stack's table: `cdk deploy` sets it)",
        at.aws("update-table", &off),
        enable_stream(at)
    )
}

/// The command that enables TTL on attribute `attr`.
pub fn enable_ttl(at: At<'_>, attr: &str) -> String {
    let args = [
        "--time-to-live-specification".to_string(),
        format!("Enabled=true,AttributeName={attr}"),
    ];
    at.aws("update-time-to-live", &args)
}

/// The whole step for an index the table lacks: add it, wait for it, then
/// the processes on the file, `backfill` and `verify`.
pub fn index_missing(at: At<'_>, g: &Gsi, capacity: Capacity) -> String {
    format!(
        "add index {} in place (the items stay): `{}`; wait until `{}` prints ACTIVE, start the \
         processes on this file, then run `jobstream backfill` (it writes every item's keys for \
         the index) and `jobstream verify` (a stack's table: `cdk deploy` adds it)",
        g.name,
        add_index(at, g, capacity),
        index_status(at, g.name)
    )
}

/// The step for an index keyed or projected otherwise than its definition:
/// DynamoDB changes neither in place, so the index is deleted and added
/// anew (the items stay), then `backfill` and `verify`.
pub fn index_differs(at: At<'_>, g: &Gsi, capacity: Capacity) -> String {
    format!(
        "DynamoDB changes an index's keys and projection only by deleting it and adding it anew \
         (the items stay): `{}`, then, once `{}` prints nothing, `{}`; wait until it prints \
         ACTIVE, then run `jobstream backfill` and `jobstream verify`",
        delete_index(at, g.name),
        index_status(at, g.name),
        add_index(at, g, capacity)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared::models::table::GsiProjection;

    #[test]
    fn adding_an_index_names_its_keys_and_projection_and_the_endpoint() {
        let g = Gsi {
            name: "GSI2",
            pk: "GSI2PK",
            sk: Some("GSI2SK"),
            projection: GsiProjection::Include(vec!["total"]),
        };
        let at = Via {
            endpoint: Some("http://127.0.0.1:18320"),
            region: None,
        }
        .at("food");
        assert_eq!(
            add_index(at, &g, None),
            "aws dynamodb update-table --table-name food --endpoint-url http://127.0.0.1:18320 \
             --attribute-definitions 'AttributeName=GSI2PK,AttributeType=S' \
             'AttributeName=GSI2SK,AttributeType=S' --global-secondary-index-updates \
             '[{\"Create\":{\"IndexName\":\"GSI2\",\"KeySchema\":[{\"AttributeName\":\"GSI2PK\",\"KeyType\":\"HASH\"},\
             {\"AttributeName\":\"GSI2SK\",\"KeyType\":\"RANGE\"}],\"Projection\":{\"NonKeyAttributes\":[\"total\"],\
             \"ProjectionType\":\"INCLUDE\"}}}]'"
        );
    }

    #[test]
    fn an_index_without_a_sort_key_is_added_by_its_partition_key_alone() {
        let g = Gsi {
            name: "gs3",
            pk: "gs3pk",
            sk: None,
            projection: GsiProjection::KeysOnly,
        };
        let at = Via::default().at("shop");
        let cmd = add_index(at, &g, Some((5, 5)));
        assert!(
            cmd.contains(" --attribute-definitions 'AttributeName=gs3pk,AttributeType=S' --global"),
            "{cmd}"
        );
        assert!(!cmd.contains("RANGE"), "{cmd}");
        assert!(
            cmd.contains(
                "\"ProvisionedThroughput\":{\"ReadCapacityUnits\":5,\"WriteCapacityUnits\":5}"
            ),
            "{cmd}"
        );
        assert!(!cmd.contains("--endpoint-url"), "{cmd}");
    }

    #[test]
    fn enabling_ttl_names_the_table_and_the_attribute() {
        let at = Via {
            endpoint: Some("http://127.0.0.1:8416"),
            region: Some("eu-west-1"),
        }
        .at("shopreal");
        assert_eq!(
            enable_ttl(at, "expires"),
            "aws dynamodb update-time-to-live --table-name shopreal --endpoint-url \
             http://127.0.0.1:8416 --region eu-west-1 --time-to-live-specification \
             'Enabled=true,AttributeName=expires'"
        );
    }
}
