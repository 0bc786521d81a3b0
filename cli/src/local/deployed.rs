//! What `jobstream run`, `verify` and `backfill` deploy against: tables and
//! queues that exist. Nothing here creates anything; each check says what
//! is missing or differs from the model's definition, by name, and how to
//! deploy it. (`dev`, `demo` and `serve` create what they need on the
//! embedded engine and the local SQS instead: [`crate::local::engine::ensure_table`],
//! [`crate::local::sqs_esm::create_queue`].)

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::Context as _;
use aws_sdk_dynamodb::types::{
    KeySchemaElement, KeyType, Projection, ProjectionType, StreamViewType, TableDescription,
    TimeToLiveStatus,
};
use aws_sdk_sqs::types::QueueAttributeName;
use shared::models::table::{GsiProjection, QueueDef, TableDef, STACK_NAMES};
use shared::models::Model;

use crate::local::remedy::{self, At, Via};
use crate::local::sdk_config::endpoint_url_problem;
use crate::local::sqs_esm::Queue;

/// How to deploy what is missing (the README's "Deploy with AWS CDK").
pub const HOW_TO_DEPLOY: &str = "`jobstream run`, `verify` and `backfill` never create tables or \
     queues: deploy the model's stack (`cd infra && npx cdk deploy -c model=<model> -c \
     stackName=<stack>`, or `-c modelFile=<file>`) and point at it with `--stack <stack>`, or \
     name existing resources with --table, --ledger-table and QUEUE_URL_<QUEUE>; on an endpoint \
     no stack deploys to (`jobstream serve`, DynamoDB Local, moto), `jobstream create` makes them \
     as the stack would";

/// What a finding is, for what its message adds: a missing table (how to
/// deploy one), a shape in place (the command that changes it), or the TTL
/// (`verify` reports it and checks the items all the same).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Missing,
    Shape,
    Ttl,
}

/// One way a table differs from its definition, and the step that makes it
/// as defined in place, when there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub kind: Kind,
    pub problem: String,
    pub remedy: Option<String>,
}

impl Finding {
    fn new(kind: Kind, problem: String, remedy: Option<String>) -> Self {
        Finding {
            kind,
            problem,
            remedy,
        }
    }
}

/// The findings in one message: the problems, then each one's step on a
/// line of its own, then how to deploy what is missing (only then).
pub fn said(findings: &[Finding]) -> String {
    let problems: Vec<&str> = findings.iter().map(|f| f.problem.as_str()).collect();
    let mut out = format!("{}.", problems.join("; "));
    for r in findings.iter().filter_map(|f| f.remedy.as_deref()) {
        out.push_str(&format!("\nTo fix it: {r}."));
    }
    if findings.iter().any(|f| f.kind == Kind::Missing) {
        out.push_str(&format!("\n{HOW_TO_DEPLOY}"));
    }
    out
}

/// The findings of table `name` (`role`: "model table", "ledger") against
/// `def`, reached `via` an endpoint and a region (named in the steps): missing, other
/// keys, a declared index missing or unlike its definition, no
/// NEW_AND_OLD_IMAGES stream, TTL not enabled on the definition's
/// attribute. Empty when it is as deployed.
pub async fn table_findings(
    client: &aws_sdk_dynamodb::Client,
    def: &TableDef,
    name: &str,
    role: &str,
    via: Via<'_>,
) -> anyhow::Result<Vec<Finding>> {
    let desc = match client.describe_table().table_name(name).send().await {
        Ok(out) => out.table,
        Err(e)
            if e.as_service_error()
                .is_some_and(|e| e.is_resource_not_found_exception()) =>
        {
            let problem = format!("{role} {name} does not exist");
            return Ok(vec![Finding::new(Kind::Missing, problem, None)]);
        }
        Err(e) => return Err(call_failed(&format!("DescribeTable {name} ({role})"), e)),
    };
    let Some(desc) = desc else {
        let problem = format!("{role} {name}: DescribeTable returned no table");
        return Ok(vec![Finding::new(Kind::Missing, problem, None)]);
    };
    let at = via.at(name);
    let mut findings = shape_findings(&desc, def, at, role);
    if let Some(attr) = def.ttl_attribute {
        if let Some(f) = ttl_finding(client, at, role, attr).await? {
            findings.push(f);
        }
    }
    Ok(findings)
}

/// What DescribeTable shows of table `name` (`role`) unlike `def`: its
/// keys, each index the definition declares (missing, keyed otherwise, or
/// projecting otherwise than its `project:`), and its stream when the
/// definition has one. Indexes the definition does not declare are the
/// table's own business. Empty when the table has the definition's shape.
pub fn shape_problems(
    desc: &TableDescription,
    def: &TableDef,
    name: &str,
    role: &str,
) -> Vec<String> {
    let findings = shape_findings(desc, def, Via::default().at(name), role);
    findings.into_iter().map(|f| f.problem).collect()
}

/// [`shape_problems`] with the step that fixes each in place, where there
/// is one (the commands name `at`'s endpoint and region): an index added or made
/// anew, a stream enabled. Keys never change in place.
pub fn shape_findings(
    desc: &TableDescription,
    def: &TableDef,
    at: At<'_>,
    role: &str,
) -> Vec<Finding> {
    let name = at.table;
    let mut problems = Vec::new();
    let (pk, sk) = keys_of(desc.key_schema());
    if pk != def.pk || sk != def.sk {
        problems.push(Finding::new(
            Kind::Shape,
            format!(
                "{role} {name} has keys ({pk}, {sk}), the definition ({}, {})",
                def.pk, def.sk
            ),
            Some(format!(
                "a table's keys never change: name the table this model describes (--table), or \
                 write the model file for this table's keys ({pk}, {sk})"
            )),
        ));
    }
    let capacity = capacity_of(desc);
    for g in &def.gsis {
        let found = desc
            .global_secondary_indexes()
            .iter()
            .find(|i| i.index_name() == Some(g.name));
        let Some(index) = found else {
            problems.push(Finding::new(
                Kind::Shape,
                format!(
                    "{role} {name} lacks index {} {}, which the model declares",
                    g.name,
                    g.key_list()
                ),
                Some(remedy::index_missing(at, g, capacity)),
            ));
            continue;
        };
        let (ipk, isk) = keys_of(index.key_schema());
        if ipk != g.pk || isk != g.sk.unwrap_or_default() {
            let has = if isk.is_empty() {
                format!("({ipk})")
            } else {
                format!("({ipk}, {isk})")
            };
            problems.push(Finding::new(
                Kind::Shape,
                format!(
                    "{role} {name}'s index {} has keys {has}, the definition {}",
                    g.name,
                    g.key_list()
                ),
                Some(remedy::index_differs(at, g, capacity)),
            ));
            continue;
        }
        let keys = g.keys(def.pk, def.sk);
        let projects = projected(index.projection(), keys);
        let declared = Projected::of(&g.projection);
        if projects.as_ref() != Some(&declared) {
            problems.push(Finding::new(
                Kind::Shape,
                format!(
                    "{role} {name}'s index {} projects {}, the definition {}",
                    g.name,
                    projects.map_or("nothing".into(), |p| p.to_string()),
                    declared
                ),
                Some(remedy::index_differs(at, g, capacity)),
            ));
        }
    }
    if def.stream {
        let spec = desc.stream_specification();
        let enabled = spec.is_some_and(|s| s.stream_enabled());
        let view = spec.and_then(|s| s.stream_view_type());
        if !enabled || desc.latest_stream_arn().is_none() {
            problems.push(Finding::new(
                Kind::Shape,
                format!("{role} {name} has no stream (enable a NEW_AND_OLD_IMAGES stream on it)"),
                Some(format!("`{}`", remedy::enable_stream(at))),
            ));
        } else if view != Some(&StreamViewType::NewAndOldImages) {
            problems.push(Finding::new(
                Kind::Shape,
                format!(
                    "{role} {name} streams {}, not NEW_AND_OLD_IMAGES",
                    view.map_or("nothing", |v| v.as_str())
                ),
                Some(remedy::stream_view(at)),
            ));
        }
    }
    problems
}

/// A provisioned table's capacity (an index added to it needs its own);
/// `None` on demand.
pub(crate) fn capacity_of(desc: &TableDescription) -> remedy::Capacity {
    use aws_sdk_dynamodb::types::BillingMode;
    let on_demand = desc
        .billing_mode_summary()
        .and_then(|b| b.billing_mode())
        .is_some_and(|m| *m == BillingMode::PayPerRequest);
    let t = desc.provisioned_throughput()?;
    let (read, write) = (t.read_capacity_units()?, t.write_capacity_units()?);
    (!on_demand && read > 0 && write > 0).then_some((read, write))
}

/// What an index's items carry besides their keys, as compared: an
/// INCLUDE's attributes as a set, without the keys (OneTable's
/// `createTable()` lists the index's own keys among them), and an INCLUDE
/// of keys alone is KEYS_ONLY.
#[derive(Debug, PartialEq, Eq)]
enum Projected {
    All,
    Keys,
    Include(BTreeSet<String>),
}

impl Projected {
    fn of(p: &GsiProjection) -> Projected {
        match p {
            GsiProjection::All => Projected::All,
            GsiProjection::KeysOnly => Projected::Keys,
            GsiProjection::Include(v) => {
                Projected::Include(v.iter().map(|a| a.to_string()).collect())
            }
        }
    }
}

/// In a model file's words (`all`, `keys`, `[a, b]`), as `project:` says it.
impl std::fmt::Display for Projected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Projected::All => f.write_str("all"),
            Projected::Keys => f.write_str("keys"),
            Projected::Include(v) => {
                write!(f, "[{}]", v.iter().cloned().collect::<Vec<_>>().join(", "))
            }
        }
    }
}

/// What DescribeTable says index items carry (`keys`: the table's and the
/// index's key attributes); `None`: no projection or an unknown type.
fn projected(p: Option<&Projection>, keys: [&str; 4]) -> Option<Projected> {
    let p = p?;
    Some(match p.projection_type()? {
        ProjectionType::All => Projected::All,
        ProjectionType::KeysOnly => Projected::Keys,
        ProjectionType::Include => {
            let attrs: BTreeSet<String> = p
                .non_key_attributes()
                .iter()
                .filter(|a| !keys.contains(&a.as_str()))
                .cloned()
                .collect();
            if attrs.is_empty() {
                Projected::Keys
            } else {
                Projected::Include(attrs)
            }
        }
        _ => return None,
    })
}

/// A key schema's partition and sort key attributes ("" for one it lacks).
fn keys_of(schema: &[KeySchemaElement]) -> (String, String) {
    let key = |kt: KeyType| {
        schema
            .iter()
            .find(|k| *k.key_type() == kt)
            .map(|k| k.attribute_name().to_string())
            .unwrap_or_default()
    };
    (key(KeyType::Hash), key(KeyType::Range))
}

/// TTL must be enabled (or being enabled) on `attr`.
async fn ttl_finding(
    client: &aws_sdk_dynamodb::Client,
    at: At<'_>,
    role: &str,
    attr: &str,
) -> anyhow::Result<Option<Finding>> {
    let name = at.table;
    let out = client
        .describe_time_to_live()
        .table_name(name)
        .send()
        .await
        .map_err(|e| call_failed(&format!("DescribeTimeToLive {name} ({role})"), e))?;
    let d = out.time_to_live_description();
    let status = d.and_then(|d| d.time_to_live_status());
    let on = matches!(
        status,
        Some(TimeToLiveStatus::Enabled | TimeToLiveStatus::Enabling)
    );
    let attribute = d.and_then(|d| d.attribute_name()).unwrap_or_default();
    // `jobstream create` never enables it on an existing table: from then
    // on DynamoDB deletes the items whose attribute is past, which is the
    // table owner's decision.
    let enable = || {
        format!(
            "`{}` (DynamoDB then deletes, within days, every item whose `{attr}` is past, those \
             written before too; `jobstream create` leaves an existing table's TTL as it is)",
            remedy::enable_ttl(at, attr)
        )
    };
    Ok(if !on {
        Some(Finding::new(
            Kind::Ttl,
            format!(
                "{role} {name} has TTL {} (enable TTL on attribute `{attr}`, or it grows without bound)",
                status.map_or("DISABLED", |s| s.as_str())
            ),
            Some(enable()),
        ))
    } else if attribute != attr {
        Some(Finding::new(
            Kind::Ttl,
            format!("{role} {name} expires items by `{attribute}`, the definition by `{attr}`"),
            Some(format!(
                "DynamoDB takes one TTL attribute per table: disable TTL on `{attribute}` \
                 (`update-time-to-live ... Enabled=false,AttributeName={attribute}`), then {}",
                enable()
            )),
        ))
    } else {
        None
    })
}

/// The codes of a throttle, as the SDK's retry classifier knows them (the
/// ones DynamoDB and SQS answer).
const THROTTLED: [&str; 5] = [
    "ThrottlingException",
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "TooManyRequestsException",
    "Throttling",
];

/// A startup call that failed, in the operator's words: the service's code
/// and message (`ThrottlingException: ...`, not the SDK's "unhandled
/// error"), and, for a transient fault, that it lasted past the retries
/// (`run`'s calls ride out throttles and outages within
/// [`shared::retry::Retries::startup`]'s budget: past it, a timeout, said
/// so; a tool's client makes its attempts in a second or two, so no
/// duration is claimed for the rest). A transport failure is its causes'
/// messages on one line ([`shared::error::causes`]), never the SDK's
/// `Debug` dump of the request.
pub fn call_failed<E>(
    call: &str,
    e: aws_sdk_dynamodb::error::SdkError<E, aws_sdk_dynamodb::config::http::HttpResponse>,
) -> anyhow::Error
where
    E: aws_sdk_dynamodb::error::ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    use aws_sdk_dynamodb::error::SdkError;
    let budget = shared::retry::Retries::startup().call_budget.as_secs();
    let transient = "still failing after retries";
    let what = match &e {
        SdkError::ServiceError(se) => {
            let err = se.err();
            let code = err.code().unwrap_or("an error without a code");
            let message = err.message().unwrap_or_default();
            let status = se.raw().status().as_u16();
            let retried = status >= 500 || THROTTLED.contains(&code);
            if retried {
                format!("{code} (HTTP {status}): {message}; {transient}")
            } else {
                format!("{code}: {message}")
            }
        }
        SdkError::TimeoutError(_) => match last_attempt() {
            Some(cause) => format!(
                "no successful answer in {budget} s (the last failed attempt: {cause})"
            ),
            None => format!(
                "no successful answer in {budget} s (throttled, unavailable, refused or unreachable \
                 the whole time; the log of JOBSTREAM_LOG=aws_smithy_runtime=debug names each attempt's error)"
            ),
        },
        SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            format!("{}; {transient}", shared::error::causes(&e))
        }
        _ => shared::error::causes(&e),
    };
    anyhow::anyhow!("{call}: {what}")
}

/// The cause of the last attempt that failed of a call made through a
/// client with [`LastAttempt`] (`run`'s startup checks): a call that runs
/// out of its budget ends in a timeout that names none (ops16 #6: a port
/// where nothing listens was reported after 40 s without "Connection
/// refused").
static LAST_ATTEMPT: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

fn last_attempt() -> Option<String> {
    LAST_ATTEMPT.lock().ok().and_then(|mut l| l.take())
}

/// Records each failed attempt's causes (see [`LAST_ATTEMPT`]).
#[derive(Debug, Clone, Copy)]
pub struct LastAttempt;

impl aws_smithy_runtime_api::client::interceptors::Intercept for LastAttempt {
    fn name(&self) -> &'static str {
        "jobstream: the last failed attempt of a startup call"
    }

    fn read_after_attempt(
        &self,
        context: &aws_smithy_runtime_api::client::interceptors::context::FinalizerInterceptorContextRef<'_>,
        _: &aws_smithy_runtime_api::client::runtime_components::RuntimeComponents,
        _: &mut aws_smithy_types::config_bag::ConfigBag,
    ) -> Result<(), aws_smithy_runtime_api::box_error::BoxError> {
        if let Some(Err(e)) = context.output_or_error() {
            if let Ok(mut l) = LAST_ATTEMPT.lock() {
                *l = Some(shared::error::causes(e));
            }
        }
        Ok(())
    }
}

/// `run`'s startup DynamoDB client: `retries`', recording its failed
/// attempts' causes for [`call_failed`].
pub fn startup_client(
    retries: &shared::retry::Retries,
    sdk: &aws_config::SdkConfig,
) -> aws_sdk_dynamodb::Client {
    aws_sdk_dynamodb::Client::from_conf(
        retries
            .dynamodb(aws_sdk_dynamodb::config::Builder::from(sdk))
            .interceptor(LastAttempt)
            .build(),
    )
}

/// Fails naming every problem and its step, unless the model table
/// (`table`) and the ledger (`ledger`), reached `via` an endpoint and a
/// region, exist as the model defines them.
pub async fn require_tables(
    client: &aws_sdk_dynamodb::Client,
    model: &Model,
    table: &str,
    ledger: &str,
    via: Via<'_>,
) -> anyhow::Result<()> {
    let findings = tables_findings(client, model, table, ledger, via).await?;
    fail_on(model, &findings)
}

/// The findings of the model table (`table`) and the ledger (`ledger`).
pub async fn tables_findings(
    client: &aws_sdk_dynamodb::Client,
    model: &Model,
    table: &str,
    ledger: &str,
    via: Via<'_>,
) -> anyhow::Result<Vec<Finding>> {
    let mut findings = table_findings(client, &model.table, table, "model table", via).await?;
    let ledger_def = shared::models::table::ledger();
    findings.extend(table_findings(client, &ledger_def, ledger, "ledger table", via).await?);
    Ok(findings)
}

/// Fails saying `findings` ([`said`]) unless there is none.
pub fn fail_on(model: &Model, findings: &[Finding]) -> anyhow::Result<()> {
    anyhow::ensure!(
        findings.is_empty(),
        "model {}: {}",
        model.name,
        said(findings)
    );
    Ok(())
}

/// Fails naming every problem of `model`'s resources, and how to deploy
/// them, unless there is none.
fn none_of(model: &Model, problems: &[String]) -> anyhow::Result<()> {
    anyhow::ensure!(
        problems.is_empty(),
        "model {}: {}.\n{HOW_TO_DEPLOY}",
        model.name,
        problems.join("; ")
    );
    Ok(())
}

/// Fails naming each `QUEUE_URL_<LOGICAL>` of `model` set (in `env`) to a
/// URL that can never work ([`endpoint_url_problem`]): before any call,
/// instead of a queue call retried as an outage.
pub fn require_queue_urls_valid(
    model: &Model,
    env: impl Fn(&str) -> Option<String>,
) -> anyhow::Result<()> {
    let problems: Vec<String> = model
        .queues()
        .iter()
        .filter_map(|q| {
            let var = shared::lambda::queue_env(q.logical);
            let url = env(&var).filter(|u| !u.is_empty())?;
            endpoint_url_problem(&url).map(|why| format!("{var} {url}: {why}"))
        })
        .collect();
    anyhow::ensure!(problems.is_empty(), "{}", problems.join("; "));
    Ok(())
}

/// How a model's queues are named where [`queue_urls`] looks them up.
#[derive(Debug, Clone, Copy)]
pub enum QueueNames<'a> {
    /// `QUEUE_URL_<LOGICAL>` only.
    EnvOnly,
    /// A deployed stack's, named by [`STACK_NAMES`].
    Stack(&'a str),
    /// The definition's own names, as `jobstream dev` creates them.
    AsDefined,
}

impl<'a> QueueNames<'a> {
    /// `--stack`'s queues; else, with `--sqs-endpoint`, the queues by the
    /// definition's names there (as `jobstream dev` and `jobstream create`
    /// make them); else `QUEUE_URL_<LOGICAL>` only.
    pub fn of(stack: Option<&'a str>, sqs_endpoint: Option<&str>) -> Self {
        match (stack, sqs_endpoint) {
            (Some(stack), _) => QueueNames::Stack(stack),
            (None, Some(_)) => QueueNames::AsDefined,
            (None, None) => QueueNames::EnvOnly,
        }
    }
}

/// Where each of a model's queues is: `QUEUE_URL_<LOGICAL>` (what the
/// Lambdas get; `env` looks a variable up), else the queue `naming` names
/// (resolved with GetQueueUrl). A queue with neither is an error naming its
/// variable; a lookup that fails names the SQS it `asked` ([`sqs_asked`]).
pub async fn queue_urls(
    sqs: &aws_sdk_sqs::Client,
    asked: &str,
    model: &Model,
    naming: QueueNames<'_>,
    env: impl Fn(&str) -> Option<String>,
) -> anyhow::Result<BTreeMap<String, String>> {
    let mut urls = BTreeMap::new();
    let mut problems = Vec::new();
    for def in model.queues() {
        let var = shared::lambda::queue_env(def.logical);
        if let Some(url) = env(&var).filter(|u| !u.is_empty()) {
            urls.insert(def.logical.to_string(), url);
            continue;
        }
        let (name, at) = match naming {
            QueueNames::EnvOnly => {
                problems.push(format!(
                    "queue {} (consumer {}): no URL; set {var} (as the stack's functions get it), --stack, or --sqs-endpoint (the queues by their own names there)",
                    def.logical, def.consumer
                ));
                continue;
            }
            QueueNames::Stack(stack) => {
                (STACK_NAMES.queue(stack, def.name), format!("stack {stack}"))
            }
            QueueNames::AsDefined => (def.name.to_string(), "the SQS endpoint".to_string()),
        };
        match sqs.get_queue_url().queue_name(&name).send().await {
            Ok(out) => {
                let url = out.queue_url().context("GetQueueUrl without a URL")?;
                urls.insert(def.logical.to_string(), url.to_string());
            }
            Err(e)
                if e.as_service_error()
                    .is_some_and(|e| e.is_queue_does_not_exist()) =>
            {
                problems.push(format!(
                    "queue {} (consumer {}): {at} has no queue {name}",
                    def.logical, def.consumer
                ));
            }
            Err(e) => return Err(call_failed(&format!("GetQueueUrl {name} in {asked}"), e)),
        }
    }
    none_of(model, &problems)?;
    Ok(urls)
}

/// Which SQS a process asks, for its messages: the endpoint given, or the
/// region's own when none was (the mistake of a local DynamoDB endpoint
/// without `--sqs-endpoint`).
pub fn sqs_asked(endpoint: Option<&str>) -> String {
    match endpoint {
        Some(e) => format!("SQS at {e}"),
        None => "SQS (the region's own: no --sqs-endpoint given)".to_string(),
    }
}

/// The queue at `url` as `def` defines it (visibility `visibility`, a
/// redrive policy to a DLQ after `maxReceiveCount` receives), or an error
/// naming the queue and every attribute that differs.
pub async fn require_queue(
    sqs: &aws_sdk_sqs::Client,
    def: &QueueDef,
    url: &str,
    visibility: Duration,
) -> anyhow::Result<Queue> {
    let what = format!("queue {} ({url})", def.logical);
    let attrs = sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::All)
        .send()
        .await;
    let attrs = match attrs {
        Ok(out) => out.attributes.unwrap_or_default(),
        Err(e)
            if e.as_service_error()
                .is_some_and(|e| e.is_queue_does_not_exist()) =>
        {
            anyhow::bail!("{what} does not exist.\n{HOW_TO_DEPLOY}")
        }
        Err(e) => return Err(anyhow::Error::new(e).context(format!("GetQueueAttributes {what}"))),
    };
    let get = |k: QueueAttributeName| attrs.get(&k).cloned().unwrap_or_default();
    let mut differs = Vec::new();
    let want_visibility = visibility.as_secs().max(1);
    let have_visibility = get(QueueAttributeName::VisibilityTimeout);
    if have_visibility.parse::<u64>().ok() != Some(want_visibility) {
        differs.push(format!(
            "VisibilityTimeout {have_visibility} (definition: {want_visibility})"
        ));
    }
    let redrive = get(QueueAttributeName::RedrivePolicy);
    let (receives, dlq_arn) = redrive_policy(&redrive);
    if receives != Some(u64::from(def.max_receive_count)) {
        differs.push(format!(
            "maxReceiveCount {} (definition: {})",
            receives.map_or("none".to_string(), |n| n.to_string()),
            def.max_receive_count
        ));
    }
    let dlq_url = match &dlq_arn {
        None => {
            differs.push("no dead-letter queue (RedrivePolicy)".to_string());
            None
        }
        Some(arn) => match dlq_url_of(sqs, arn).await? {
            Some(u) => Some(u),
            None => {
                differs.push(format!("its dead-letter queue {arn} does not exist"));
                None
            }
        },
    };
    if !differs.is_empty() {
        anyhow::bail!(
            "{what} differs from the model's definition: {}",
            differs.join("; ")
        );
    }
    Ok(Queue {
        url: url.to_string(),
        arn: get(QueueAttributeName::QueueArn),
        dlq_url: dlq_url.unwrap_or_default(),
        visibility: Duration::from_secs(want_visibility),
    })
}

/// `maxReceiveCount` (a number, or a string as some clients send it) and
/// `deadLetterTargetArn` of a RedrivePolicy.
pub fn redrive_policy(json: &str) -> (Option<u64>, Option<String>) {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(json) else {
        return (None, None);
    };
    let receives = match &v["maxReceiveCount"] {
        serde_json::Value::Number(n) => n.as_u64(),
        serde_json::Value::String(s) => s.parse().ok(),
        _ => None,
    };
    let arn = v["deadLetterTargetArn"].as_str().map(str::to_string);
    (receives, arn)
}

/// The URL of the queue with ARN `arn` (`arn:aws:sqs:<region>:<account>:<name>`), if it exists.
async fn dlq_url_of(sqs: &aws_sdk_sqs::Client, arn: &str) -> anyhow::Result<Option<String>> {
    let mut parts = arn.rsplitn(3, ':');
    let (Some(name), Some(account)) = (parts.next(), parts.next()) else {
        return Ok(None);
    };
    let mut req = sqs.get_queue_url().queue_name(name);
    if account.chars().all(|c| c.is_ascii_digit()) && !account.is_empty() {
        req = req.queue_owner_aws_account_id(account);
    }
    match req.send().await {
        Ok(out) => Ok(out.queue_url().map(str::to_string)),
        Err(e)
            if e.as_service_error()
                .is_some_and(|e| e.is_queue_does_not_exist()) =>
        {
            Ok(None)
        }
        Err(e) => Err(anyhow::Error::new(e).context(format!("GetQueueUrl of the DLQ {arn}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_redrive_policy_reads_with_the_count_as_a_number_or_a_string() {
        let arn = "arn:aws:sqs:eu-west-1:123456789012:Shop-orders-jobs-dlq";
        assert_eq!(
            redrive_policy(&format!(
                r#"{{"deadLetterTargetArn":"{arn}","maxReceiveCount":5}}"#
            )),
            (Some(5), Some(arn.to_string()))
        );
        assert_eq!(
            redrive_policy(&format!(
                r#"{{"deadLetterTargetArn":"{arn}","maxReceiveCount":"5"}}"#
            )),
            (Some(5), Some(arn.to_string()))
        );
        assert_eq!(redrive_policy(""), (None, None));
        assert_eq!(redrive_policy("{}"), (None, None));
    }
}

#[cfg(test)]
mod last_attempt_tests {
    use super::*;

    /// ops16 #6: a startup call to a port where nothing listens ran out of
    /// its budget and said only that no answer came; the startup client
    /// records each failed attempt, and the timeout names the last cause.
    #[tokio::test]
    async fn a_startup_call_that_times_out_names_its_last_failed_attempt() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let endpoint = format!("http://127.0.0.1:{port}");
        let sdk =
            crate::local::engine::sdk_config(Some(&endpoint), shared::retry::MAX_ATTEMPTS).await;
        let retries = shared::retry::Retries::within(Duration::from_secs(3));
        let client = startup_client(&retries, &sdk);
        let e = client
            .describe_table()
            .table_name("t")
            .send()
            .await
            .expect_err("nothing listens");
        assert!(
            matches!(e, aws_sdk_dynamodb::error::SdkError::TimeoutError(_)),
            "{e:?}"
        );
        let said = call_failed("DescribeTable t", e).to_string();
        assert!(
            said.contains("no successful answer in")
                && said.contains("the last failed attempt: ")
                && said.to_lowercase().contains("connection refused"),
            "{said}"
        );
    }
}
