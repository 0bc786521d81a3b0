//! Least privilege, enforced locally (SPEC §6.1): every DynamoDB and SQS
//! call a processor makes goes through an HTTP client that checks it against
//! the processor's [`Grant`] (the same definition the CDK stack deploys as
//! the function's IAM policy) and answers anything else as AWS does: HTTP
//! 400 `AccessDeniedException` in the JSON protocol (for SQS with the
//! query-compatible `x-amzn-query-error` header), so the SDK and
//! `shared::store` classify it exactly as in production.
//!
//! Each action inside a TransactWriteItems / TransactGetItems is checked
//! separately (IAM checks `PutItem`, `UpdateItem`, `DeleteItem`,
//! `ConditionCheckItem`, `GetItem` per table); BatchWriteItem and
//! BatchGetItem per table they name; Query and Scan on an index against the
//! index grant. Every call (allowed or not) is recorded in [`recorder`], so
//! a test can compare what the code used with what the grants allow.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, OnceLock};

use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_runtime_api::http::StatusCode;
use aws_smithy_types::body::SdkBody;
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::{json, Value};
use shared::models::table::{Grant, RunnerGrant};

/// What a call touched, as its grant names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Resource {
    /// The model table.
    Table,
    /// An index of the model table.
    Index,
    /// The ledger table.
    Ledger,
    /// The model table's stream.
    Stream,
    /// A queue, by logical name.
    Queue(String),
    /// A queue's dead-letter queue, by the queue's logical name.
    DeadLetters(String),
    /// A stream processor's on-failure queue (`--on-failure-queue-url`).
    OnFailure,
    /// Anything else (another table, an unknown queue URL, no resource).
    Other(String),
}

impl std::fmt::Display for Resource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Resource::Table => write!(f, "table"),
            Resource::Index => write!(f, "table/index"),
            Resource::Ledger => write!(f, "ledger"),
            Resource::Stream => write!(f, "table/stream"),
            Resource::Queue(q) => write!(f, "queue {q}"),
            Resource::DeadLetters(q) => write!(f, "dead-letter queue {q}"),
            Resource::OnFailure => write!(f, "on-failure queue"),
            Resource::Other(o) => write!(f, "{o}"),
        }
    }
}

/// One (processor, action, resource) a processor used.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Call {
    /// The runtime that made it ([`Principal::session`]).
    pub session: String,
    pub model: String,
    pub processor: String,
    /// IAM action, e.g. `dynamodb:PutItem`, `sqs:SendMessage`.
    pub action: String,
    pub resource: Resource,
    pub allowed: bool,
}

/// Every call checked in this process. With [`RECORD_ENV`] set, each new
/// (model, processor, action, resource, allowed) is also appended to that
/// file as a JSON line, so the calls of a whole test suite can be compared
/// with the grants once it has run.
#[derive(Debug, Default)]
pub struct Recorder {
    calls: Mutex<BTreeSet<Call>>,
    /// Requests (round trips) checked, per processor and operation.
    requests: Mutex<BTreeMap<String, BTreeMap<String, u64>>>,
}

/// The variable naming the file [`Recorder`] appends to.
pub const RECORD_ENV: &str = "JOBSTREAM_IAM_RECORD";

impl Recorder {
    fn record(&self, call: Call, to_file: bool) {
        let line = json!({
            "model": call.model,
            "processor": call.processor,
            "action": call.action,
            "resource": call.resource.to_string(),
            "allowed": call.allowed,
        });
        let new = match self.calls.lock() {
            Ok(mut c) => c.insert(call),
            Err(_) => false,
        };
        if let (true, true, Some(path)) = (new, to_file, std::env::var_os(RECORD_ENV)) {
            if let Err(e) = append_line(std::path::Path::new(&path), &line) {
                tracing::warn!(error = %e, "recording a checked call failed");
            }
        }
    }

    /// The calls recorded so far.
    pub fn calls(&self) -> BTreeSet<Call> {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }

    fn count_request(&self, processor: &str, operation: &str) {
        if let Ok(mut all) = self.requests.lock() {
            let ops = all.entry(processor.to_string()).or_default();
            *ops.entry(operation.to_string()).or_default() += 1;
        }
    }

    /// Requests (round trips) `processor`'s grant-checked clients sent in
    /// this process so far, per operation (`GetItem`, `SendMessageBatch`,
    /// ...), allowed or not; all runtimes of the process together.
    pub fn requests(&self, processor: &str) -> BTreeMap<String, u64> {
        self.requests
            .lock()
            .ok()
            .and_then(|r| r.get(processor).cloned())
            .unwrap_or_default()
    }
}

/// Appends `line` and a newline to `path`, which several threads and
/// processes (a test suite's runtimes, `jobstream run` children) append to
/// at once: the whole line in one `write` on a file opened for appending
/// (`writeln!` would write it in pieces, which another writer's pieces
/// could cut).
fn append_line(path: &std::path::Path, line: &Value) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    f.write_all(format!("{line}\n").as_bytes())
}

/// The process-wide recorder.
pub fn recorder() -> &'static Recorder {
    static R: OnceLock<Recorder> = OnceLock::new();
    R.get_or_init(Recorder::default)
}

/// The processor name `jobstream run`'s own calls are checked and recorded
/// under (the event source mappings' work: the stream, polling the queues,
/// leases, startup checks).
pub const RUNNER: &str = "runner";

/// One processor's grant (or `jobstream run`'s own: [`RUNNER`]) and the
/// names its resources have here.
#[derive(Debug, Clone)]
pub struct Principal {
    /// Which runtime this is (the recorder keeps it with each call).
    pub session: String,
    pub model: String,
    pub processor: String,
    pub grant: Grant,
    /// The event source mappings' own calls (the stream, polling the
    /// queues, leases, startup checks), for [`RUNNER`].
    pub mappings: Option<RunnerGrant>,
    pub table: String,
    pub ledger: String,
    /// Queue URL -> logical name.
    pub queues: BTreeMap<String, String>,
    /// (name, dead-letter queue's name, logical name) of each queue as the
    /// model defines it: GetQueueUrl names a queue by name (a stack's
    /// queue names end with the defined name).
    pub queue_names: Vec<(String, String, String)>,
    /// The on-failure queue's URL, if any.
    pub on_failure: Option<String>,
    /// Whether its calls go to the [`RECORD_ENV`] file (not for a grant a
    /// test deliberately cut down).
    pub record: bool,
}

impl Principal {
    /// `jobstream run`'s own calls, checked against the mappings' part of
    /// the model's [`RunnerGrant`] (the processors keep their own grants):
    /// `queues` maps logical names to URLs (empty before they are looked
    /// up).
    pub fn runner(
        model: &shared::models::Model,
        table: &str,
        ledger: &str,
        queues: &BTreeMap<String, String>,
        on_failure: Option<String>,
    ) -> Self {
        Self {
            session: uuid::Uuid::new_v4().simple().to_string(),
            model: model.name.to_string(),
            processor: RUNNER.to_string(),
            grant: no_grant(),
            mappings: Some(RunnerGrant::mappings(!model.consumers.is_empty())),
            table: table.to_string(),
            ledger: ledger.to_string(),
            queues: queues
                .iter()
                .map(|(logical, url)| (url.clone(), logical.clone()))
                .collect(),
            queue_names: model
                .queues()
                .iter()
                .map(|q| {
                    (
                        q.name.to_string(),
                        q.dlq_name.to_string(),
                        q.logical.to_string(),
                    )
                })
                .collect(),
            on_failure,
            record: true,
        }
    }

    /// `sdk` with every request checked against this principal (in front
    /// of the SDK's default HTTPS client).
    pub fn checked(&self, sdk: &aws_config::SdkConfig) -> aws_config::SdkConfig {
        sdk.to_builder()
            .http_client(EnforcingClient::new(self.clone()))
            .build()
    }

    /// The queue GetQueueUrl names: one of the model's (or its dead-letter
    /// queue), as defined or prefixed by a stack's name.
    fn queue_named(&self, queue_name: &str) -> Resource {
        let is =
            |defined: &str| queue_name == defined || queue_name.ends_with(&format!("-{defined}"));
        self.queue_names
            .iter()
            .find_map(|(name, dlq, logical)| {
                if is(name) {
                    Some(Resource::Queue(logical.clone()))
                } else if is(dlq) {
                    Some(Resource::DeadLetters(logical.clone()))
                } else {
                    None
                }
            })
            .unwrap_or_else(|| Resource::Other(format!("queue named {queue_name}")))
    }

    fn table_resource(&self, name: &str, index: bool) -> Resource {
        match (name == self.table, name == self.ledger, index) {
            (true, _, false) => Resource::Table,
            (true, _, true) => Resource::Index,
            (_, true, false) => Resource::Ledger,
            (_, true, true) => Resource::Other(format!("index of {name}")),
            _ => Resource::Other(format!("table {name}")),
        }
    }

    fn allows(&self, action: &str, resource: &Resource) -> bool {
        let has = |list: &[&str]| list.contains(&action);
        let mapping = |pick: fn(&RunnerGrant) -> &Vec<&'static str>| {
            self.mappings.as_ref().is_some_and(|m| has(pick(m)))
        };
        match resource {
            Resource::Table => has(&self.grant.table_actions) || mapping(|m| &m.table_actions),
            Resource::Index => has(&self.grant.index_actions),
            Resource::Ledger => has(&self.grant.ledger_actions) || mapping(|m| &m.ledger_actions),
            Resource::Stream => mapping(|m| &m.stream_actions),
            Resource::Queue(q) => {
                (action == "sqs:SendMessage" && self.grant.sends_to.iter().any(|s| s == q))
                    || mapping(|m| &m.queue_actions)
            }
            Resource::DeadLetters(_) => mapping(|m| &m.dead_letter_actions),
            Resource::OnFailure => mapping(|m| &m.on_failure_actions),
            Resource::Other(_) => false,
        }
    }

    fn arn(&self, resource: &Resource) -> String {
        let table = |t: &str| format!("arn:aws:dynamodb:local:000000000000:table/{t}");
        let queue = |q: &str| format!("arn:aws:sqs:local:000000000000:{q}");
        match resource {
            Resource::Table => table(&self.table),
            Resource::Index => format!("{}/index/*", table(&self.table)),
            Resource::Ledger => table(&self.ledger),
            Resource::Stream => format!("{}/stream/*", table(&self.table)),
            Resource::Queue(q) => queue(q),
            Resource::DeadLetters(q) => queue(&format!("{q}-dlq")),
            Resource::OnFailure => queue("on-failure"),
            Resource::Other(o) => o.clone(),
        }
    }
}

/// A grant of nothing (`jobstream run`'s own principal has the mappings'
/// actions instead).
fn no_grant() -> Grant {
    Grant {
        table_actions: vec![],
        index_actions: vec![],
        ledger_actions: vec![],
        sends_to: vec![],
    }
}

/// The fields of a request body the check reads, borrowed from it; the
/// rest (items, expressions, message bodies) is skipped without being
/// built, so a check costs a scan of the body, not a copy of it.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Body<'a> {
    #[serde(rename = "TableName", borrow)]
    table_name: Option<Cow<'a, str>>,
    #[serde(rename = "IndexName")]
    index_name: Option<IgnoredAny>,
    #[serde(rename = "TransactItems", borrow)]
    transact_items: Vec<BTreeMap<Cow<'a, str>, Named<'a>>>,
    #[serde(rename = "RequestItems", borrow)]
    request_items: BTreeMap<Cow<'a, str>, IgnoredAny>,
    #[serde(rename = "QueueUrl", borrow)]
    queue_url: Option<Cow<'a, str>>,
    #[serde(rename = "StreamArn", borrow)]
    stream_arn: Option<Cow<'a, str>>,
    #[serde(rename = "QueueName", borrow)]
    queue_name: Option<Cow<'a, str>>,
}

/// One action of a transaction: the table it names.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Named<'a> {
    #[serde(rename = "TableName", borrow)]
    table_name: Option<Cow<'a, str>>,
}

/// The (action, resource) pairs a request needs, from its `X-Amz-Target`
/// and JSON body; `Err` for a request that names no known operation.
pub fn required(
    principal: &Principal,
    target: &str,
    body: &[u8],
) -> Result<Vec<(String, Resource)>, String> {
    let (service, op) = target
        .split_once('.')
        .ok_or_else(|| format!("unrecognised X-Amz-Target {target:?}"))?;
    let body: Body = if body.is_empty() {
        Body::default()
    } else {
        serde_json::from_slice(body).map_err(|e| format!("{op}: body not understood: {e}"))?
    };
    let name = |n: &Option<Cow<str>>| n.as_deref().unwrap_or("").to_string();
    let mut out = Vec::new();
    if service.starts_with("DynamoDB_") {
        let dynamo = |a: &str| format!("dynamodb:{a}");
        match op {
            "TransactWriteItems" | "TransactGetItems" => {
                for item in &body.transact_items {
                    let Some((kind, inner)) = item.iter().next() else {
                        continue;
                    };
                    let action = match kind.as_ref() {
                        "Put" => "PutItem",
                        "Update" => "UpdateItem",
                        "Delete" => "DeleteItem",
                        "ConditionCheck" => "ConditionCheckItem",
                        "Get" => "GetItem",
                        other => other,
                    };
                    let table = name(&inner.table_name);
                    out.push((dynamo(action), principal.table_resource(&table, false)));
                }
            }
            "BatchWriteItem" | "BatchGetItem" => {
                for table in body.request_items.keys() {
                    out.push((dynamo(op), principal.table_resource(table, false)));
                }
            }
            _ => {
                let table = name(&body.table_name);
                let index = body.index_name.is_some();
                out.push((dynamo(op), principal.table_resource(&table, index)));
            }
        }
    } else if service.starts_with("DynamoDBStreams_") {
        // GetRecords names only its iterator, which names the stream it
        // came from: the stream of a GetShardIterator the check allowed.
        let resource = match body.stream_arn.as_deref() {
            Some(arn) if !arn.contains(&format!(":table/{}/stream/", principal.table)) => {
                Resource::Other(format!("stream {arn}"))
            }
            _ => Resource::Stream,
        };
        out.push((format!("dynamodb:{op}"), resource));
    } else if service == "AmazonSQS" {
        let action = match op {
            "SendMessageBatch" => "SendMessage",
            "DeleteMessageBatch" => "DeleteMessage",
            "ChangeMessageVisibilityBatch" => "ChangeMessageVisibility",
            other => other,
        };
        let resource = match body.queue_name.as_deref() {
            Some(queue_name) => principal.queue_named(queue_name),
            None => {
                let url = name(&body.queue_url);
                match principal.queues.get(&url) {
                    Some(logical) => Resource::Queue(logical.clone()),
                    None if principal.on_failure.as_deref() == Some(url.as_str()) => {
                        Resource::OnFailure
                    }
                    None => Resource::Other(format!("queue {url}")),
                }
            }
        };
        out.push((format!("sqs:{action}"), resource));
    } else {
        return Err(format!("unrecognised service {service:?}"));
    }
    Ok(out)
}

/// An HTTP client checking every request of one processor against its
/// grant before handing it to `inner`.
#[derive(Debug, Clone)]
pub struct EnforcingClient {
    inner: SharedHttpClient,
    principal: Arc<Principal>,
}

impl EnforcingClient {
    /// Enforces `principal`'s grant in front of the SDK's default HTTPS
    /// client.
    pub fn new(principal: Principal) -> Self {
        Self {
            inner: crate::local::stream_identity::default_https_client(),
            principal: Arc::new(principal),
        }
    }
}

impl HttpClient for EnforcingClient {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(EnforcingConnector {
            inner: self.inner.http_connector(settings, components),
            principal: self.principal.clone(),
        })
    }
}

#[derive(Debug)]
struct EnforcingConnector {
    inner: SharedHttpConnector,
    principal: Arc<Principal>,
}

impl HttpConnector for EnforcingConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        match denial(&self.principal, &request) {
            None => self.inner.call(request),
            Some(denied) => HttpConnectorFuture::ready(Ok(denied)),
        }
    }
}

/// `None` when every action the request needs is granted (each recorded);
/// else the response AWS gives.
fn denial(p: &Principal, request: &HttpRequest) -> Option<HttpResponse> {
    let target = request.headers().get("x-amz-target").unwrap_or("");
    let body = request.body().bytes().unwrap_or(&[]);
    recorder().count_request(
        &p.processor,
        target.split_once('.').map_or(target, |(_, op)| op),
    );
    let sqs = target.starts_with("AmazonSQS.");
    let needed = match required(p, target, body) {
        Ok(n) => n,
        Err(why) => return Some(access_denied(sqs, &why)),
    };
    let mut denied = None;
    for (action, resource) in needed {
        let allowed = p.allows(&action, &resource);
        recorder().record(
            Call {
                session: p.session.clone(),
                model: p.model.clone(),
                processor: p.processor.clone(),
                action: action.clone(),
                resource: resource.clone(),
                allowed,
            },
            p.record,
        );
        if !allowed && denied.is_none() {
            denied = Some(format!(
                "User: arn:aws:sts::000000000000:assumed-role/jobstream-{}-{}/local is not authorized to perform: {action} on resource: {} because no identity-based policy allows the {action} action",
                p.model,
                p.processor,
                p.arn(&resource)
            ));
        }
    }
    denied.map(|message| {
        tracing::warn!(processor = %p.processor, %message, "AccessDenied (local least-privilege enforcement)");
        access_denied(sqs, &message)
    })
}

/// HTTP 400 `AccessDeniedException`, JSON protocol (SQS: with the
/// query-compatible error code header).
fn access_denied(sqs: bool, message: &str) -> HttpResponse {
    let body = if sqs {
        json!({"__type": "com.amazon.coral.service#AccessDeniedException", "message": message})
    } else {
        json!({"__type": "com.amazon.coral.service#AccessDeniedException", "Message": message})
    };
    let mut resp = HttpResponse::new(
        StatusCode::try_from(400).expect("400 is a status code"),
        SdkBody::from(body.to_string()),
    );
    let h = resp.headers_mut();
    h.insert("content-type", "application/x-amz-json-1.0");
    h.insert("x-amzn-requestid", uuid::Uuid::new_v4().to_string());
    if sqs {
        h.insert("x-amzn-query-error", "AccessDenied;Sender");
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn principal() -> Principal {
        Principal {
            session: "s".into(),
            model: "m".into(),
            processor: "p".into(),
            grant: Grant {
                table_actions: vec!["dynamodb:PutItem", "dynamodb:ConditionCheckItem"],
                index_actions: vec!["dynamodb:Query"],
                ledger_actions: vec!["dynamodb:PutItem"],
                sends_to: vec!["work"],
            },
            mappings: None,
            table: "t".into(),
            ledger: "l".into(),
            queues: [("http://q/work".to_string(), "work".to_string())].into(),
            queue_names: vec![("work".into(), "work-dlq".into(), "work".into())],
            on_failure: None,
            record: false,
        }
    }

    fn needs(target: &str, body: Value) -> Vec<(String, Resource)> {
        required(&principal(), target, body.to_string().as_bytes()).unwrap()
    }

    /// CI found a line of the suite's record cut by another thread's:
    /// every line appended concurrently must read back whole.
    #[test]
    fn lines_appended_concurrently_read_back_whole() {
        let path = std::env::temp_dir().join(format!("iam-record-test-{}", std::process::id()));
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let path = path.clone();
                std::thread::spawn(move || {
                    for i in 0..300 {
                        let line = json!({
                            "model": format!("model-{t}"),
                            "processor": "processor-with-a-long-name",
                            "action": format!("dynamodb:Action{i}"),
                            "resource": "table/index",
                            "allowed": true,
                        });
                        append_line(&path, &line).expect("appends");
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("joins");
        }
        let text = std::fs::read_to_string(&path).expect("reads");
        let _ = std::fs::remove_file(&path);
        let lines: Vec<_> = text.lines().collect();
        assert_eq!(lines.len(), 8 * 300);
        for line in lines {
            let v: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("a whole JSON line, not {line:?}: {e}"));
            assert_eq!(v["resource"], "table/index", "{line}");
        }
    }

    /// `jobstream run`'s own principal: the stream of its table, its queues
    /// (by URL, or by name as a stack prefixes it), their dead-letter queues
    /// and the on-failure queue, with the mappings' actions only; a
    /// processor's principal has none of them.
    #[test]
    fn the_runner_may_do_what_the_mappings_do_and_nothing_else() {
        let mut runner = principal();
        runner.processor = RUNNER.into();
        runner.grant = no_grant();
        runner.mappings = Some(RunnerGrant::mappings(true));
        runner.on_failure = Some("http://q/failed".into());
        let check = |p: &Principal, target: &str, body: Value| -> Vec<(String, bool)> {
            required(p, target, body.to_string().as_bytes())
                .unwrap()
                .into_iter()
                .map(|(a, r)| (format!("{a} on {r}"), p.allows(&a, &r)))
                .collect()
        };
        let stream = json!({"StreamArn": "arn:aws:dynamodb:r:1:table/t/stream/2026"});
        let other = json!({"StreamArn": "arn:aws:dynamodb:r:1:table/x/stream/2026"});
        let (table, ledger) = (json!({"TableName": "t"}), json!({"TableName": "l"}));
        let work = json!({"QueueUrl": "http://q/work"});
        let failed = json!({"QueueUrl": "http://q/failed"});
        let named = |name: &str| json!({ "QueueName": name });
        let iterator = json!({"ShardIterator": "i"});
        let elsewhere = json!({"TableName": "x"});
        let (ddb, streams, sqs) = ("DynamoDB_20120810", "DynamoDBStreams_20120810", "AmazonSQS");
        // (service, operation, body, allowed)
        let cases = [
            (streams, "DescribeStream", stream.clone(), true),
            (streams, "GetShardIterator", stream, true),
            (streams, "GetRecords", iterator, true),
            (streams, "DescribeStream", other, false),
            (ddb, "DescribeTable", table.clone(), true),
            (ddb, "DescribeTable", elsewhere, false),
            (ddb, "UpdateItem", ledger.clone(), true),
            // A lease read back when a write's answer was lost.
            (ddb, "GetItem", ledger.clone(), true),
            (ddb, "PutItem", ledger, false),
            (ddb, "GetItem", table, false),
            (sqs, "ReceiveMessage", work.clone(), true),
            (sqs, "DeleteMessageBatch", work.clone(), true),
            (sqs, "SendMessage", work, false),
            (sqs, "GetQueueUrl", named("Shop-work"), true),
            (sqs, "GetQueueUrl", named("Shop-work-dlq"), true),
            (sqs, "GetQueueUrl", named("elsewhere"), false),
            (sqs, "SendMessage", failed.clone(), true),
            (sqs, "ReceiveMessage", failed, false),
        ];
        for (service, op, body, allowed) in cases {
            let target = &format!("{service}.{op}");
            let got = check(&runner, target, body.clone());
            assert!(
                got.iter().all(|(_, a)| *a == allowed),
                "{target} {body}: {got:?}, expected allowed={allowed}"
            );
            if allowed && target.starts_with("DynamoDBStreams") {
                let as_processor = check(&principal(), target, body);
                assert!(as_processor.iter().all(|(_, a)| !a), "{as_processor:?}");
            }
        }
    }

    #[test]
    fn each_action_of_a_transaction_and_a_batch_is_checked_separately() {
        let n = needs(
            "DynamoDB_20120810.TransactWriteItems",
            json!({"TransactItems": [
                {"Put": {"TableName": "t"}},
                {"ConditionCheck": {"TableName": "t"}},
                {"Update": {"TableName": "l"}},
            ]}),
        );
        let p = principal();
        let verdicts: Vec<bool> = n.iter().map(|(a, r)| p.allows(a, r)).collect();
        assert_eq!(verdicts, [true, true, false], "{n:?}");
        let n = needs(
            "DynamoDB_20120810.BatchWriteItem",
            json!({"RequestItems": {"t": [], "l": []}}),
        );
        assert_eq!(
            n,
            [
                ("dynamodb:BatchWriteItem".to_string(), Resource::Ledger),
                ("dynamodb:BatchWriteItem".to_string(), Resource::Table)
            ]
        );
        assert!(n.iter().all(|(a, r)| !p.allows(a, r)));
    }

    #[test]
    fn indexes_other_tables_and_queues() {
        let p = principal();
        let q = needs(
            "DynamoDB_20120810.Query",
            json!({"TableName": "t", "IndexName": "GSI1"}),
        );
        assert_eq!(q, [("dynamodb:Query".to_string(), Resource::Index)]);
        assert!(p.allows(&q[0].0, &q[0].1));
        let q = needs("DynamoDB_20120810.Query", json!({"TableName": "t"}));
        assert!(
            !p.allows(&q[0].0, &q[0].1),
            "Query on the table itself is not granted"
        );
        let o = needs("DynamoDB_20120810.PutItem", json!({"TableName": "x"}));
        assert!(!p.allows(&o[0].0, &o[0].1));
        let s = needs(
            "AmazonSQS.SendMessageBatch",
            json!({"QueueUrl": "http://q/work"}),
        );
        assert_eq!(
            s,
            [(
                "sqs:SendMessage".to_string(),
                Resource::Queue("work".into())
            )]
        );
        assert!(p.allows(&s[0].0, &s[0].1));
        let r = needs(
            "AmazonSQS.ReceiveMessage",
            json!({"QueueUrl": "http://q/work"}),
        );
        assert!(!p.allows(&r[0].0, &r[0].1));
        let u = needs(
            "AmazonSQS.SendMessage",
            json!({"QueueUrl": "http://q/other"}),
        );
        assert!(!p.allows(&u[0].0, &u[0].1));
        assert!(required(&p, "nonsense", b"{}").is_err());
    }

    #[test]
    fn only_the_names_are_read_whatever_else_the_body_holds() {
        let p = principal();
        // An item attribute called TableName, an escaped name, expressions:
        // only the request's own TableName counts.
        let body = br#"{"Item":{"TableName":{"S":"l"},"n":{"M":{"x":{"L":[{"S":"\""}]}}}},"ConditionExpression":"attribute_not_exists(#p)","TableName":"\u0074"}"#;
        let n = required(&p, "DynamoDB_20120810.PutItem", body).unwrap();
        assert_eq!(n, [("dynamodb:PutItem".to_string(), Resource::Table)]);
        let n = required(
            &p,
            "DynamoDB_20120810.TransactWriteItems",
            br#"{"TransactItems":[{"Update":{"Key":{"TableName":{"S":"t"}},"TableName":"l"}}],"ClientRequestToken":"x"}"#,
        )
        .unwrap();
        assert_eq!(n, [("dynamodb:UpdateItem".to_string(), Resource::Ledger)]);
        // Not JSON, or a name that is not a string: refused, never allowed.
        assert!(required(&p, "DynamoDB_20120810.PutItem", b"{\"TableName\":").is_err());
        assert!(required(&p, "DynamoDB_20120810.PutItem", br#"{"TableName":7}"#).is_err());
    }

    #[test]
    fn a_denial_is_aws_shaped() {
        let r = access_denied(true, "no");
        assert_eq!(r.status().as_u16(), 400);
        assert_eq!(
            r.headers().get("x-amzn-query-error"),
            Some("AccessDenied;Sender")
        );
        let body: Value = serde_json::from_slice(r.body().bytes().unwrap()).unwrap();
        assert_eq!(
            body["__type"],
            "com.amazon.coral.service#AccessDeniedException"
        );
        let r = access_denied(false, "no");
        assert_eq!(r.headers().get("x-amzn-query-error"), None);
    }
}
