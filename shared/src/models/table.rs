//! Table definitions shared by the local runtime (CreateTable) and the CDK
//! stack (`jobstream tables --json` writes them; `infra/` reads that file).

use serde::Serialize;

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Gsi {
    pub name: &'static str,
    pub pk: &'static str,
    /// The index's sort key; `None` for an index keyed by its partition key
    /// alone (a lookup by a unique value: OneTable's `gs3: { hash: 'gs3pk' }`,
    /// an ElectroDB index with `pk` only). Absent from `jobstream tables`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sk: Option<&'static str>,
    /// What the index's items carry besides their keys (`project:` in a
    /// model file; default every attribute).
    pub projection: GsiProjection,
}

/// What a GSI projects (DynamoDB's `Projection`): every attribute, only the
/// keys (the table's and the index's), or the keys and some attributes.
/// Printed by `jobstream tables` as CloudFormation spells it
/// (`{"projectionType": "INCLUDE", "nonKeyAttributes": [...]}`), which the
/// CDK stack reads.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum GsiProjection {
    #[default]
    All,
    KeysOnly,
    /// The non-key attributes projected besides the keys: never a key
    /// attribute of the table or of the index, never empty (that is
    /// [`GsiProjection::KeysOnly`]); sorted, each once.
    Include(Vec<&'static str>),
}

impl GsiProjection {
    /// `include`'s attributes as a projection of index `g` of a table keyed
    /// (`pk`, `sk`): the keys dropped (every index item has them), sorted,
    /// each once; nothing left is [`GsiProjection::KeysOnly`].
    pub fn include(attrs: &[&'static str], keys: [&str; 4]) -> GsiProjection {
        let mut v: Vec<&'static str> = attrs
            .iter()
            .copied()
            .filter(|a| !keys.contains(a))
            .collect();
        v.sort_unstable();
        v.dedup();
        if v.is_empty() {
            GsiProjection::KeysOnly
        } else {
            GsiProjection::Include(v)
        }
    }

    /// DynamoDB's name of the projection type (`ALL`, `KEYS_ONLY`, `INCLUDE`).
    pub fn type_name(&self) -> &'static str {
        match self {
            GsiProjection::All => "ALL",
            GsiProjection::KeysOnly => "KEYS_ONLY",
            GsiProjection::Include(_) => "INCLUDE",
        }
    }

    /// The non-key attributes projected (empty unless INCLUDE).
    pub fn non_key_attributes(&self) -> &[&'static str] {
        match self {
            GsiProjection::Include(v) => v,
            _ => &[],
        }
    }

    /// Whether the index's items carry attribute `attr`, where `keys` are
    /// the table's and the index's key attributes.
    pub fn carries(&self, attr: &str, keys: [&str; 4]) -> bool {
        match self {
            GsiProjection::All => true,
            _ => keys.contains(&attr) || self.non_key_attributes().contains(&attr),
        }
    }

    /// In the words of a model file: `all`, `keys`, `[a, b]`.
    pub fn written(&self) -> String {
        match self {
            GsiProjection::All => "all".into(),
            GsiProjection::KeysOnly => "keys".into(),
            GsiProjection::Include(v) => format!("[{}]", v.join(", ")),
        }
    }
}

impl Serialize for GsiProjection {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let include = matches!(self, GsiProjection::Include(_));
        let mut m = s.serialize_map(Some(if include { 2 } else { 1 }))?;
        m.serialize_entry("projectionType", self.type_name())?;
        if include {
            m.serialize_entry("nonKeyAttributes", self.non_key_attributes())?;
        }
        m.end()
    }
}

impl Gsi {
    /// The key attributes every item of this index carries: the table's
    /// (`pk`, `sk`) and the index's (its partition key twice when it has no
    /// sort key).
    pub fn keys(&self, table_pk: &'static str, table_sk: &'static str) -> [&'static str; 4] {
        [table_pk, table_sk, self.pk, self.sk.unwrap_or(self.pk)]
    }

    /// The index's own key attributes: its partition key, then its sort key
    /// if it has one.
    pub fn key_attributes(&self) -> impl Iterator<Item = &'static str> {
        std::iter::once(self.pk).chain(self.sk)
    }

    /// Its key attributes as a model file and DescribeTable's messages say
    /// them: `(GSI2PK, GSI2SK)`, or `(gs3pk)` for a partition key alone.
    pub fn key_list(&self) -> String {
        format!("({})", self.key_attributes().collect::<Vec<_>>().join(", "))
    }

    /// Whether this index's items carry `attr` on a table keyed (`pk`, `sk`).
    pub fn carries(&self, attr: &str, table_pk: &'static str, table_sk: &'static str) -> bool {
        self.projection.carries(attr, self.keys(table_pk, table_sk))
    }
}

/// A table: string keys, GSIs (each with its projection), optional TTL.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TableDef {
    /// Default table name (overridable by configuration).
    pub name: &'static str,
    pub pk: &'static str,
    pub sk: &'static str,
    pub gsis: Vec<Gsi>,
    pub ttl_attribute: Option<&'static str>,
    /// NEW_AND_OLD_IMAGES stream (the source table) or none (the ledger).
    pub stream: bool,
}

impl TableDef {
    /// Every key attribute of the table and its indexes, once each, in the
    /// order first named (CreateTable's AttributeDefinitions: DynamoDB
    /// refuses one named twice, as an inverted index's keys would be).
    pub fn key_attributes(&self) -> Vec<&'static str> {
        let mut attrs = vec![self.pk, self.sk];
        for g in &self.gsis {
            for a in g.key_attributes() {
                if !attrs.contains(&a) {
                    attrs.push(a);
                }
            }
        }
        attrs
    }
}

/// The ledger: idempotency markers and fold state. No stream, TTL `ttl`.
pub fn ledger() -> TableDef {
    TableDef {
        name: "jobstream-ledger",
        pk: crate::ledger::PK,
        sk: crate::ledger::SK,
        gsis: vec![],
        ttl_attribute: Some(crate::ledger::TTL),
        stream: false,
    }
}

/// The names of what a deployed stack holds, built from the stack's name
/// (`cdk deploy -c stackName=S`): the one definition the CDK stack (through
/// `jobstream tables`, key `stackNames`) and `jobstream run --stack S` read.
/// `{stack}` is the stack's name, `{name}` the definition's own name.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct StackNames {
    /// The ledger table.
    pub ledger: &'static str,
    /// A work queue and its DLQ (`{name}`: [`QueueDef::name`], [`QueueDef::dlq_name`]).
    pub queue: &'static str,
}

/// See [`StackNames`].
pub const STACK_NAMES: StackNames = StackNames {
    ledger: "{stack}-ledger",
    queue: "{stack}-{name}",
};

impl StackNames {
    fn fill(template: &str, stack: &str, name: &str) -> String {
        template.replace("{stack}", stack).replace("{name}", name)
    }

    /// The ledger table of stack `stack`.
    pub fn ledger(&self, stack: &str) -> String {
        Self::fill(self.ledger, stack, "")
    }

    /// Queue `name` (a work queue's or a DLQ's) of stack `stack`.
    pub fn queue(&self, stack: &str, name: &str) -> String {
        Self::fill(self.queue, stack, name)
    }
}

/// A work queue, its consumer and its dead-letter queue. Shared by the local
/// runtime (the local SQS) and the CDK stack (through `jobstream tables`).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct QueueDef {
    /// Logical name (the key of [`crate::engine::rules::OutMessage::queue`]).
    pub logical: &'static str,
    pub name: &'static str,
    pub dlq_name: &'static str,
    /// The consumer's name (processor name, Lambda function suffix).
    pub consumer: &'static str,
    pub consumer_timeout_secs: u32,
    /// >= 6 x the consumer's timeout (Lambda's guidance for SQS sources).
    pub visibility_timeout_secs: u32,
    /// Receives before a message moves to the DLQ (>= 5).
    pub max_receive_count: u32,
    pub retention_secs: u32,
    /// Longer than the source queue's, so nothing expires in the DLQ first.
    pub dlq_retention_secs: u32,
    pub batch_size: u32,
    /// Most concurrent invocations of the consumer for this queue: the SQS
    /// mapping's `ScalingConfig.MaximumConcurrency` when deployed, the number
    /// of concurrent pollers/invocations locally (never reserved
    /// concurrency, which would throttle messages into the DLQ).
    pub max_concurrency: u32,
}

/// The settings of a stream event source mapping and of its function
/// (SPEC §6.1): deployed by the CDK stack, and the local mapping's
/// configuration (the runtime builds its `MappingConfig` from these).
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct StreamSettings {
    pub batch_size: u32,
    /// `MaximumBatchingWindowInSeconds`.
    pub batching_window_secs: u32,
    /// `MaximumRetryAttempts`.
    pub max_retries: u32,
    /// `BisectBatchOnFunctionError`.
    pub bisect_on_error: bool,
    /// `MaximumRecordAgeInSeconds`.
    pub max_record_age_secs: u32,
    /// The function's timeout.
    pub timeout_secs: u32,
    /// `ParallelizationFactor`: one invocation per shard per mapping.
    pub parallelization_factor: u32,
    /// `StartingPosition`.
    pub starting_position: &'static str,
    /// The function's memory.
    pub memory_mb: u32,
}

impl StreamSettings {
    /// What every stream consumer deploys with (SPEC §2.9).
    pub const DEPLOYED: Self = Self {
        batch_size: 100,
        batching_window_secs: 0,
        max_retries: 10,
        bisect_on_error: true,
        max_record_age_secs: 24 * 3600,
        timeout_secs: 60,
        parallelization_factor: 1,
        starting_position: "TRIM_HORIZON",
        memory_mb: 256,
    };
}

/// What one processor's role may do (least privilege): DynamoDB actions on
/// the model table, on its indexes, on the ledger, and the logical queues
/// it sends to. Deployed as the function's IAM policy; enforced locally on
/// every call the processor makes (`cli/src/local/iam.rs`). The mapping's
/// own permissions (reading the stream, receiving from the queue, sending
/// to the on-failure destination) are the event source mapping's, added by
/// the stack.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Grant {
    pub table_actions: Vec<&'static str>,
    /// Actions on the model table's indexes (`<table arn>/index/*`).
    pub index_actions: Vec<&'static str>,
    pub ledger_actions: Vec<&'static str>,
    /// Logical queues it may send to (`sqs:SendMessage`).
    pub sends_to: Vec<&'static str>,
}

/// The grants of each kind of processor: exactly the actions the generic
/// code calls (a test records every call of the demos and fails on an
/// action missing here and on one granted here and never used).
pub mod grants {
    /// The derive stream consumer: reads items as they are, guarded
    /// projections, derived items and counters in transactions.
    pub const DERIVE_TABLE: &[&str] = &[
        "dynamodb:BatchGetItem",
        "dynamodb:UpdateItem",
        "dynamodb:PutItem",
        "dynamodb:DeleteItem",
    ];
    /// Ledger records, totals, tombstones; index entries and owner records
    /// deleted when a membership or an owner goes.
    pub const DERIVE_LEDGER: &[&str] = &[
        "dynamodb:BatchGetItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
        "dynamodb:ConditionCheckItem",
    ];
    /// Located counters ([`crate::engine::rules::Rules::locates`]): the
    /// ledger index of the items claiming a counter's identity, listed
    /// with consistent reads, and each such counter's totals read alone
    /// (counters at their own key are read 100 per BatchGetItem).
    pub const DERIVE_LEDGER_LOCATE: &[&str] = &["dynamodb:Query", "dynamodb:GetItem"];
    /// Once effects waiting for an item ([`crate::engine::once`]): the
    /// notes under an item's flag, listed when the flag is there.
    pub const DERIVE_LEDGER_WAITING: &[&str] = &["dynamodb:Query"];
    /// Shared derived items ([`crate::engine::rules::Rules::shares`]): the
    /// last-sorting owners of one, queried when its last one goes.
    pub const DERIVE_LEDGER_SHARED: &[&str] = &["dynamodb:Query"];
    /// A fold (history): entries, cascade (transactional deletes, each
    /// transaction with a check of the HEAD in the ledger, the first one
    /// with a check that the root is still absent when the batch does not
    /// hold its re-creation), sequence mirror (the roots read first, 100
    /// per call, when a batch holds only replays, so a replay writes
    /// nothing).
    pub const FOLD_TABLE: &[&str] = &[
        "dynamodb:BatchGetItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:Query",
        "dynamodb:DeleteItem",
        "dynamodb:ConditionCheckItem",
    ];
    /// The fold's state: HEAD and parts (a batch's HEADs read 100 per call,
    /// a partition queried where the parts are items; parts written in
    /// batches on an adoption, old epochs' parts deleted in batches; the
    /// HEAD checked beside a cascade's deletes).
    pub const FOLD_LEDGER: &[&str] = &[
        "dynamodb:BatchGetItem",
        "dynamodb:Query",
        "dynamodb:PutItem",
        "dynamodb:BatchWriteItem",
        "dynamodb:DeleteItem",
        "dynamodb:ConditionCheckItem",
    ];
    /// Queue consumers (set jobs, once effects, compute jobs): consistent
    /// batch reads and listings of the table (never its indexes: a
    /// listing a GSI might lag comes from the ledger), guarded writes.
    pub const CONSUMER_TABLE: &[&str] = &[
        "dynamodb:BatchGetItem",
        "dynamodb:Query",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
        "dynamodb:ConditionCheckItem",
    ];
    /// Markers, and the exact listings of ledger indexes (`IDX#`, queried
    /// with consistent reads).
    pub const CONSUMER_LEDGER: &[&str] = &[
        "dynamodb:GetItem",
        "dynamodb:Query",
        "dynamodb:BatchGetItem",
        "dynamodb:PutItem",
        "dynamodb:ConditionCheckItem",
    ];
}

/// What the event source mappings themselves call, beyond their functions'
/// grants: in AWS the Lambda service's (the stream read with the function's
/// role), under `jobstream run` the process's own. Deployed as part of the
/// stack's `RunnerPolicy`; enforced locally on `run`'s own calls
/// (`cli/src/local/iam.rs`).
pub mod mapping {
    /// The startup checks of the model table (key schema, stream, TTL).
    pub const TABLE: &[&str] = &["dynamodb:DescribeTable", "dynamodb:DescribeTimeToLive"];
    /// The table's stream: shards, iterators, records.
    pub const STREAM: &[&str] = &[
        "dynamodb:DescribeStream",
        "dynamodb:GetShardIterator",
        "dynamodb:GetRecords",
    ];
    /// The ledger's startup checks, and the shard leases and checkpoints
    /// kept in it (taken, renewed, released by conditional updates; listed
    /// by query; one lease read back, consistently, when a write's answer
    /// was lost, to learn whether it landed).
    pub const LEDGER: &[&str] = &[
        "dynamodb:DescribeTable",
        "dynamodb:DescribeTimeToLive",
        "dynamodb:UpdateItem",
        "dynamodb:Query",
        "dynamodb:GetItem",
    ];
    /// Each of the model's queues: found by name, checked, polled.
    pub const QUEUE: &[&str] = &[
        "sqs:GetQueueUrl",
        "sqs:GetQueueAttributes",
        "sqs:ReceiveMessage",
        "sqs:DeleteMessage",
        "sqs:ChangeMessageVisibility",
    ];
    /// Each queue's dead-letter queue: found (the queue's redrive policy
    /// names it).
    pub const DEAD_LETTERS: &[&str] = &["sqs:GetQueueUrl"];
    /// A stream processor's on-failure queue: checked, then sent the
    /// batches given up.
    pub const ON_FAILURE: &[&str] = &["sqs:GetQueueAttributes", "sqs:SendMessage"];
}

/// Everything one process running all of a model's processors and their
/// mappings may do (`jobstream run` outside Lambda): the union of the
/// processors' grants and the mappings' own calls ([`mapping`]). The stack
/// deploys it as the managed policy `RunnerPolicy`.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RunnerGrant {
    pub table_actions: Vec<&'static str>,
    pub index_actions: Vec<&'static str>,
    /// On the model table's stream (`<table arn>/stream/*`).
    pub stream_actions: Vec<&'static str>,
    pub ledger_actions: Vec<&'static str>,
    /// On every queue of the model.
    pub queue_actions: Vec<&'static str>,
    /// Logical queues it may send to (`sqs:SendMessage`).
    pub sends_to: Vec<&'static str>,
    /// On every queue's dead-letter queue.
    pub dead_letter_actions: Vec<&'static str>,
    /// On every stream processor's on-failure queue.
    pub on_failure_actions: Vec<&'static str>,
}

impl RunnerGrant {
    /// The mappings' own calls, for a model with queues or without.
    pub fn mappings(has_queues: bool) -> Self {
        let of_queues =
            |actions: &[&'static str]| if has_queues { actions.to_vec() } else { vec![] };
        Self {
            table_actions: mapping::TABLE.to_vec(),
            stream_actions: mapping::STREAM.to_vec(),
            ledger_actions: mapping::LEDGER.to_vec(),
            queue_actions: of_queues(mapping::QUEUE),
            dead_letter_actions: of_queues(mapping::DEAD_LETTERS),
            on_failure_actions: mapping::ON_FAILURE.to_vec(),
            ..Self::default()
        }
    }

    /// Adds `g`'s actions (each once, in first-seen order).
    pub fn with(mut self, g: &Grant) -> Self {
        let merge = |into: &mut Vec<&'static str>, from: &[&'static str]| {
            for a in from {
                if !into.contains(a) {
                    into.push(a);
                }
            }
        };
        merge(&mut self.table_actions, &g.table_actions);
        merge(&mut self.index_actions, &g.index_actions);
        merge(&mut self.ledger_actions, &g.ledger_actions);
        merge(&mut self.sends_to, &g.sends_to);
        self
    }
}

const CONSUMER_TIMEOUT: u32 = 30;

impl QueueDef {
    /// A standard queue with the contract's settings (SPEC §2.9):
    /// visibility 6 x the consumer timeout, 5 receives, DLQ kept 14 days.
    pub fn standard(
        logical: &'static str,
        name: &'static str,
        dlq_name: &'static str,
        consumer: &'static str,
    ) -> Self {
        Self {
            logical,
            name,
            dlq_name,
            consumer,
            consumer_timeout_secs: CONSUMER_TIMEOUT,
            visibility_timeout_secs: 6 * CONSUMER_TIMEOUT,
            max_receive_count: 5,
            retention_secs: 4 * 24 * 3600,
            dlq_retention_secs: 14 * 24 * 3600,
            batch_size: 10,
            max_concurrency: 5,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stacks_names_come_from_its_name() {
        assert_eq!(STACK_NAMES.ledger("Hr"), "Hr-ledger");
        assert_eq!(STACK_NAMES.queue("Hr", "hr-jobs"), "Hr-hr-jobs");
    }

    #[test]
    fn key_attributes_name_each_attribute_once_even_for_an_inverted_index() {
        let gsi = |name, pk, sk| Gsi {
            name,
            pk,
            sk: Some(sk),
            projection: GsiProjection::All,
        };
        let def = TableDef {
            name: "t",
            pk: "PK",
            sk: "SK",
            gsis: vec![gsi("inverted", "SK", "PK"), gsi("GSI1", "GSI1PK", "SK")],
            ttl_attribute: None,
            stream: true,
        };
        assert_eq!(def.key_attributes(), ["PK", "SK", "GSI1PK"]);
    }

    /// What `jobstream tables` prints of an index keyed by its partition
    /// key alone (the CDK stack reads it): no `sk`, and its keys once.
    #[test]
    fn an_index_without_a_sort_key_is_printed_without_one() {
        let g = Gsi {
            name: "byEmail",
            pk: "emailKey",
            sk: None,
            projection: GsiProjection::KeysOnly,
        };
        assert_eq!(
            serde_json::to_value(&g).unwrap(),
            serde_json::json!({"name": "byEmail", "pk": "emailKey", "projection": {"projectionType": "KEYS_ONLY"}})
        );
        assert_eq!(g.key_attributes().collect::<Vec<_>>(), ["emailKey"]);
        assert_eq!(g.key_list(), "(emailKey)");
        assert!(g.carries("emailKey", "PK", "SK") && !g.carries("email", "PK", "SK"));
    }

    #[test]
    fn an_include_projection_drops_the_keys_and_lists_each_attribute_once() {
        let keys = ["PK", "SK", "gs2pk", "gs2sk"];
        assert_eq!(
            GsiProjection::include(&["gs2pk", "stage", "name", "stage", "PK"], keys),
            GsiProjection::Include(vec!["name", "stage"])
        );
        assert_eq!(
            GsiProjection::include(&["gs2pk", "gs2sk"], keys),
            GsiProjection::KeysOnly
        );
        let p = GsiProjection::Include(vec!["name"]);
        assert!(p.carries("gs2sk", keys) && p.carries("name", keys) && !p.carries("amount", keys));
        assert!(!GsiProjection::KeysOnly.carries("name", keys));
        assert!(GsiProjection::All.carries("anything", keys));
        assert_eq!(
            serde_json::to_value(&p).unwrap(),
            serde_json::json!({"projectionType": "INCLUDE", "nonKeyAttributes": ["name"]})
        );
        assert_eq!(
            serde_json::to_value(GsiProjection::KeysOnly).unwrap(),
            serde_json::json!({"projectionType": "KEYS_ONLY"})
        );
    }

    #[test]
    fn standard_queue_settings_follow_the_contract() {
        let q = QueueDef::standard("l", "n", "d", "c");
        assert!(q.visibility_timeout_secs >= 6 * q.consumer_timeout_secs);
        assert!(q.max_receive_count >= 5);
        assert!(q.dlq_retention_secs > q.retention_secs);
    }
}
