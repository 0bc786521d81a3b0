//! The tables `dev`, `serve`, `demo` and `create` make where they are
//! missing, and what an existing one must be: the shape its definition
//! gives it. A table that differs is left as it is and named, with the
//! step that changes it in place; only a table in the embedded engine's own
//! `--db` file gets a declared index it lacks added, as `cdk deploy` adds
//! one to a stack's table (a deployed table is never altered by the
//! processes).

use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, CreateGlobalSecondaryIndexAction, GlobalSecondaryIndex,
    GlobalSecondaryIndexUpdate, KeySchemaElement, KeyType, Projection, ProjectionType,
    ProvisionedThroughput, ScalarAttributeType, StreamSpecification, StreamViewType,
    TableDescription, TimeToLiveSpecification,
};
use shared::models::table::{Gsi, GsiProjection, TableDef};

use super::deployed::{capacity_of, said, shape_findings};
use super::remedy::Via;

/// What [`ensure_table_in`] did to the table.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Ensured {
    /// It did not exist, and was created as defined.
    pub created: bool,
    /// The declared indexes it lacked, added (a `--db` file's table only).
    pub added: Vec<Gsi>,
}

/// Creates `def` as `name` unless it exists. Returns whether it was created.
/// A table that exists is left as it is, and must have the shape `def`
/// gives it (keys, declared indexes, stream: what DescribeTable shows; see
/// [`crate::local::deployed::shape_problems`]): otherwise an error naming
/// every difference (a model that gained an index, started on a `--db`
/// made by an earlier model, would write keys for an index that is not
/// there), with the step that changes it in place, the items staying.
pub async fn ensure_table(
    client: &aws_sdk_dynamodb::Client,
    def: &TableDef,
    name: &str,
) -> anyhow::Result<bool> {
    ensure_table_at(client, def, name, Via::default()).await
}

/// [`ensure_table`] reached `via` an endpoint and a region, which the steps
/// of an error name (`--endpoint-url`, `--region`).
pub async fn ensure_table_at(
    client: &aws_sdk_dynamodb::Client,
    def: &TableDef,
    name: &str,
    via: Via<'_>,
) -> anyhow::Result<bool> {
    Ok(ensure_table_in(client, def, name, via, None).await?.created)
}

/// [`ensure_table_at`] of a table the embedded engine keeps in `file`
/// (`dev --db`, `serve --db`; `None`: elsewhere, as [`ensure_table_at`]).
/// When all that differs is declared indexes the table lacks, they are
/// added in place (the items stay: the processors write an item's keys for
/// them on its next change, `backfill` for all of them), as `cdk deploy`
/// adds them to a stack's table. Anything else that differs is an error
/// naming it, with its step and how to run the step on the file.
pub async fn ensure_table_in(
    client: &aws_sdk_dynamodb::Client,
    def: &TableDef,
    name: &str,
    via: Via<'_>,
    file: Option<&Path>,
) -> anyhow::Result<Ensured> {
    let Some(desc) = described(client, name).await? else {
        create_table(client, def, name).await?;
        return Ok(Ensured {
            created: true,
            added: Vec::new(),
        });
    };
    let at = via.at(name);
    let mut findings = shape_findings(&desc, def, at, "table");
    let mut added = Vec::new();
    let missing: Vec<&Gsi> = def
        .gsis
        .iter()
        .filter(|g| {
            !desc
                .global_secondary_indexes()
                .iter()
                .any(|i| i.index_name() == Some(g.name))
        })
        .collect();
    // Each index missing is one finding: equal counts, nothing else
    // differs (a table of other keys is another model's, left alone).
    if file.is_some() && !missing.is_empty() && findings.len() == missing.len() {
        for g in missing {
            add_index(client, name, g, capacity_of(&desc)).await?;
            added.push(g.clone());
        }
        findings = match described(client, name).await? {
            Some(desc) => shape_findings(&desc, def, at, "table"),
            None => anyhow::bail!("table {name} is gone while its indexes were added"),
        };
    }
    if !findings.is_empty() {
        let how = match file {
            Some(f) => in_file(f, via),
            None => "The table exists and is left as it is (its items too): `jobstream create` \
                     never changes an existing table, nor do `dev` and `serve` but on their own \
                     `--db` file (a declared index it lacks, added)"
                .to_string(),
        };
        anyhow::bail!("{}\n{how}", said(&findings));
    }
    Ok(Ensured {
        created: false,
        added,
    })
}

/// What `dev` and `serve` say of index `g` added to `table` in `file`:
/// what it holds until `backfill` (`tool`: the flags that reach it) runs.
pub fn index_added(table: &str, file: &Path, g: &Gsi, tool: &str) -> String {
    format!(
        "table {table} in {}: index {} {} added, which the model declares and the table lacked \
         (its items stay; the processors write an item's keys for it on the item's next \
         change): for the items written before, run `jobstream backfill {tool}` while this \
         runs, then `jobstream verify {tool}`",
        file.display(),
        g.name,
        g.key_list()
    )
}

/// The flags a tool (`backfill`, `verify`) is given to reach what `dev` or
/// `serve` runs: the model (its file, else its name), the table and the
/// ledger when not the defaults, the endpoints.
pub fn tool_flags(
    model: Result<&Path, &str>,
    table: Option<&str>,
    ledger: Option<&str>,
    endpoint: Option<&str>,
    sqs_endpoint: Option<&str>,
) -> String {
    let mut words: Vec<String> = match model {
        Ok(f) => vec!["--model-file".into(), f.display().to_string()],
        Err(name) => vec!["--model".into(), name.into()],
    };
    let ledger = ledger.filter(|l| *l != shared::models::table::ledger().name);
    for (flag, v) in [
        ("--table", table),
        ("--ledger-table", ledger),
        ("--endpoint", endpoint),
        ("--sqs-endpoint", sqs_endpoint),
    ] {
        if let Some(v) = v {
            words.extend([flag.to_string(), v.to_string()]);
        }
    }
    shlex::try_join(words.iter().map(String::as_str)).unwrap_or_else(|_| words.join(" "))
}

/// How to run a step on a table in `--db` file `file`, which only a
/// running engine serves (this one, `via`, stops with the error).
fn in_file(file: &Path, via: Via<'_>) -> String {
    let endpoint = via.endpoint.unwrap_or("http://127.0.0.1:8000");
    let listen = endpoint
        .trim_start_matches("http://")
        .trim_start_matches("https://");
    let file = shlex::try_quote(&file.to_string_lossy())
        .map(|f| f.into_owned())
        .unwrap_or_else(|_| file.display().to_string());
    format!(
        "The table is in {file}, which an engine serves only while `jobstream dev` or `serve` \
         runs on it, and is left as it is (its items too): to run the step there, start \
         `jobstream serve --db {file} --listen {listen} --model-file <the model file the table \
         was made with>`, run the step in another shell, stop that `serve` (Ctrl-C), then start \
         this again"
    )
}

/// The table's description, `None` when there is no table `name`.
async fn described(
    client: &aws_sdk_dynamodb::Client,
    name: &str,
) -> anyhow::Result<Option<TableDescription>> {
    match client.describe_table().table_name(name).send().await {
        Ok(out) => Ok(Some(
            out.table
                .unwrap_or_else(|| TableDescription::builder().build()),
        )),
        // Only "no such table" means create it; throttling, credentials or
        // an unreachable endpoint are errors, not a missing table.
        Err(e)
            if e.as_service_error()
                .is_some_and(|e| e.is_resource_not_found_exception()) =>
        {
            Ok(None)
        }
        Err(e) => Err(anyhow::Error::new(e).context(format!("DescribeTable {name}"))),
    }
}

/// A key schema element.
fn key(attr: &str, kt: KeyType) -> KeySchemaElement {
    KeySchemaElement::builder()
        .attribute_name(attr)
        .key_type(kt)
        .build()
        .expect("name and type are set")
}

/// A string attribute's definition.
fn string_attr(a: &str) -> AttributeDefinition {
    AttributeDefinition::builder()
        .attribute_name(a)
        .attribute_type(ScalarAttributeType::S)
        .build()
        .expect("name and type are set")
}

/// Adds index `g` to table `name` (its `capacity` when provisioned), as
/// the step [`super::remedy::add_index`] prints does.
async fn add_index(
    client: &aws_sdk_dynamodb::Client,
    name: &str,
    g: &Gsi,
    capacity: super::remedy::Capacity,
) -> anyhow::Result<()> {
    let mut create = CreateGlobalSecondaryIndexAction::builder()
        .index_name(g.name)
        .key_schema(key(g.pk, KeyType::Hash))
        .projection(projection_of(&g.projection));
    if let Some(sk) = g.sk {
        create = create.key_schema(key(sk, KeyType::Range));
    }
    if let Some((read, write)) = capacity {
        create = create.provisioned_throughput(
            ProvisionedThroughput::builder()
                .read_capacity_units(read)
                .write_capacity_units(write)
                .build()
                .expect("capacities are set"),
        );
    }
    let mut req = client.update_table().table_name(name);
    for a in g.key_attributes() {
        req = req.attribute_definitions(string_attr(a));
    }
    req.global_secondary_index_updates(
        GlobalSecondaryIndexUpdate::builder()
            .create(create.build().expect("index fields are set"))
            .build(),
    )
    .send()
    .await
    .with_context(|| format!("adding index {} to table {name}", g.name))?;
    Ok(())
}

/// Creates `def` as `name`: on demand, its indexes, its stream, its TTL.
async fn create_table(
    client: &aws_sdk_dynamodb::Client,
    def: &TableDef,
    name: &str,
) -> anyhow::Result<()> {
    let attrs = def.key_attributes();
    let mut req = client
        .create_table()
        .table_name(name)
        .billing_mode(BillingMode::PayPerRequest)
        .key_schema(key(def.pk, KeyType::Hash))
        .key_schema(key(def.sk, KeyType::Range));
    for a in attrs {
        req = req.attribute_definitions(string_attr(a));
    }
    for g in &def.gsis {
        let mut index = GlobalSecondaryIndex::builder()
            .index_name(g.name)
            .key_schema(key(g.pk, KeyType::Hash));
        if let Some(sk) = g.sk {
            index = index.key_schema(key(sk, KeyType::Range));
        }
        req = req.global_secondary_indexes(
            index
                .projection(projection_of(&g.projection))
                .build()
                .expect("index fields are set"),
        );
    }
    if def.stream {
        req = req.stream_specification(
            StreamSpecification::builder()
                .stream_enabled(true)
                .stream_view_type(StreamViewType::NewAndOldImages)
                .build()
                .expect("stream fields are set"),
        );
    }
    req.send()
        .await
        .with_context(|| format!("creating table {name}"))?;
    if let Some(ttl) = def.ttl_attribute {
        // DynamoDB refuses UpdateTimeToLive while the table is CREATING.
        wait_until_active(client, name).await?;
        client
            .update_time_to_live()
            .table_name(name)
            .time_to_live_specification(
                TimeToLiveSpecification::builder()
                    .enabled(true)
                    .attribute_name(ttl)
                    .build()
                    .expect("ttl fields are set"),
            )
            .send()
            .await
            .with_context(|| format!("enabling TTL on {name}"))?;
    }
    Ok(())
}

/// A GSI's declared projection as CreateTable takes it (the CDK stack
/// creates the same: `infra/lib/jobstream-stack.ts`).
fn projection_of(p: &GsiProjection) -> Projection {
    let mut b = Projection::builder().projection_type(match p {
        GsiProjection::All => ProjectionType::All,
        GsiProjection::KeysOnly => ProjectionType::KeysOnly,
        GsiProjection::Include(_) => ProjectionType::Include,
    });
    for a in p.non_key_attributes() {
        b = b.non_key_attributes(*a);
    }
    b.build()
}

/// Waits until `name` is ACTIVE (the SDK's `TableExists` waiter).
async fn wait_until_active(client: &aws_sdk_dynamodb::Client, name: &str) -> anyhow::Result<()> {
    use aws_sdk_dynamodb::client::Waiters as _;
    client
        .wait_until_table_exists()
        .table_name(name)
        .wait(TABLE_ACTIVE_WAIT)
        .await
        .with_context(|| format!("waiting for table {name} to become ACTIVE"))?;
    Ok(())
}

/// How long a created table may take to become ACTIVE.
const TABLE_ACTIVE_WAIT: Duration = Duration::from_secs(300);
