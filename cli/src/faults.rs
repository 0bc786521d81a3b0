//! A fault-injecting HTTP proxy for the AWS JSON protocols (DynamoDB, SQS):
//! forwards requests to a server, except that it answers chosen operations
//! with chosen errors (throttling, 5xx) a given number of times, or fails
//! every entry of a batch request (as SQS reports per-entry failures), or
//! holds chosen requests for a while before forwarding them (latency), or
//! answers a batch or a transaction as DynamoDB does when it processes none
//! of it (UnprocessedItems, UnprocessedKeys, a transaction cancelled by the
//! throttling of an action), which the SDK does not retry.
//! Tests put it between the processors and the engine (or the local SQS) to
//! prove that throttling is retried and that nothing is lost or doubled
//! when retries run out.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

use crate::meter::{forward, header, read_message, split};

/// One kind of injected failure.
#[derive(Debug, Clone)]
pub struct Fault {
    /// Operation name as in `X-Amz-Target` (`TransactWriteItems`, `UpdateItem`...).
    pub operation: String,
    /// How many matching requests to let through first.
    pub after: u32,
    /// How many matching requests to fail then.
    pub times: u32,
    /// HTTP status (400 for throttling, 500/503 for server errors).
    pub status: u16,
    /// The `__type` of the error body (`ThrottlingException`, ...).
    pub error_type: String,
    /// Answer 200 with every entry of the request's `Entries` failed with
    /// `error_type` (`SenderFault: false`) instead of an error; the request
    /// does not reach the server.
    pub fail_entries: bool,
    /// Answer as DynamoDB does when it processes none of the request
    /// ([`Fault::unprocessed`]); the request does not reach the server.
    pub unprocessed: bool,
    /// Forward the request first and fail only its answer: the request
    /// took effect, the client is told it failed (a response lost after a
    /// commit).
    pub after_effect: bool,
    /// Close the connection instead of answering (a reset); with
    /// `after_effect`, after the request took effect.
    pub reset: bool,
    /// Answer 200 with a body that is no JSON (an answer corrupted on the
    /// way); with `after_effect`, after the request took effect.
    pub garbled: bool,
    /// Hold the request this long, then forward it and answer as the
    /// server did (a slow request, not a failed one).
    pub delay: Option<std::time::Duration>,
    /// Hold the request until the gate gives a permit (one per request),
    /// then forward it: a caller paused mid-call, for as long as the test
    /// needs (another consumer's work, say), without a clock.
    pub gate: Option<Arc<tokio::sync::Semaphore>>,
    /// Active only until then (a throttle or outage window): matching
    /// requests are failed until the window ends, however many; `None`:
    /// `times` counts them.
    pub until: Option<std::time::Instant>,
    /// Only requests whose body holds this text (a key, a table name):
    /// the calls about one item fail, those about the others go through.
    pub matching: Option<String>,
}

impl Fault {
    /// `times` matching requests answered with HTTP `status` and an error
    /// of type `error_type`.
    fn answer(operation: &str, times: u32, status: u16, error_type: &str) -> Self {
        Self {
            operation: operation.into(),
            after: 0,
            times,
            status,
            error_type: error_type.into(),
            fail_entries: false,
            unprocessed: false,
            after_effect: false,
            reset: false,
            garbled: false,
            delay: None,
            gate: None,
            until: None,
            matching: None,
        }
    }

    pub fn throttle(operation: &str, times: u32) -> Self {
        let throttled = "ProvisionedThroughputExceededException";
        Self::answer(operation, times, 400, throttled)
    }

    /// Fails every entry of `times` batch requests (`DeleteMessageBatch`,
    /// `SendMessageBatch`) with the service's `InternalError`, in a 200
    /// answer, as SQS reports per-entry failures.
    pub fn fail_entries(operation: &str, times: u32) -> Self {
        Self {
            fail_entries: true,
            ..Self::answer(operation, times, 200, "InternalError")
        }
    }

    /// `times` requests answered as DynamoDB answers under throttling it
    /// reports inside a successful answer, which the SDK does not retry:
    /// a `BatchWriteItem` with every item back in `UnprocessedItems`, a
    /// `BatchGetItem` with every key back in `UnprocessedKeys` (and no
    /// item), a `TransactWriteItems` cancelled with `ThrottlingError` on
    /// its first action (`None` on the others). The request does not reach
    /// the server.
    pub fn unprocessed(operation: &str, times: u32) -> Self {
        Self {
            unprocessed: true,
            ..Self::answer(operation, times, 200, "")
        }
    }

    /// The request takes effect and then its answer fails (see
    /// [`Fault::after_effect`]).
    pub fn after_effect(mut self) -> Self {
        self.after_effect = true;
        self
    }

    /// A connection reset instead of an answer, before the request reaches
    /// the server (`.after_effect()`: after it took effect).
    pub fn reset(operation: &str, times: u32) -> Self {
        Self {
            reset: true,
            ..Self::server_error(operation, times)
        }
    }

    /// A 200 whose body is no JSON instead of an answer (a middlebox or a
    /// cut connection corrupting it), before the request reaches the server
    /// (`.after_effect()`: after it took effect).
    pub fn garbled(operation: &str, times: u32) -> Self {
        Self {
            garbled: true,
            ..Self::answer(operation, times, 200, "")
        }
    }

    /// Holds `times` matching requests for `delay` each, then forwards them
    /// and passes the server's answer on: latency, not an error.
    pub fn slow(operation: &str, times: u32, delay: std::time::Duration) -> Self {
        Self {
            status: 200,
            error_type: String::new(),
            delay: Some(delay),
            ..Self::server_error(operation, times)
        }
    }

    /// Holds `times` matching requests until `gate` gives a permit each
    /// (`gate.add_permits(1)`), then forwards them and passes the server's
    /// answer on. [`FaultProxy::injected`] counts a request once held.
    pub fn held(operation: &str, times: u32, gate: Arc<tokio::sync::Semaphore>) -> Self {
        Self {
            gate: Some(gate),
            ..Self::slow(operation, times, std::time::Duration::ZERO)
        }
    }

    /// Every matching request from now on for `window` (however many),
    /// none after it: a throttle or an outage that lasts a while, not a
    /// count of failures. `Fault::throttle("BatchGetItem", 0).for_window(d)`.
    pub fn for_window(mut self, window: std::time::Duration) -> Self {
        self.times = u32::MAX;
        self.until = Some(std::time::Instant::now() + window);
        self
    }

    /// Only the requests whose body holds `text` (a key such as
    /// `APP#a1`): one item's calls fail, the rest of a batch's go through.
    pub fn matching(mut self, text: &str) -> Self {
        self.matching = Some(text.to_string());
        self
    }

    /// Lets `n` matching requests through before failing.
    pub fn after(mut self, n: u32) -> Self {
        self.after = n;
        self
    }

    pub fn server_error(operation: &str, times: u32) -> Self {
        Self::answer(operation, times, 500, "InternalServerError")
    }

    /// HTTP 503 `ServiceUnavailableException` (an outage, as DynamoDB
    /// answers one).
    pub fn unavailable(operation: &str, times: u32) -> Self {
        Self::answer(operation, times, 503, "ServiceUnavailableException")
    }

    /// HTTP 400 `ValidationException`: DynamoDB refusing the request
    /// itself (an item past its limits, say), which no retry fixes.
    pub fn validation(operation: &str, times: u32) -> Self {
        Self::answer(operation, times, 400, "ValidationException")
    }

    /// HTTP 400 `ThrottlingException` (the control plane's throttle:
    /// DescribeTable and the like), where [`Self::throttle`] answers the
    /// data plane's `ProvisionedThroughputExceededException`.
    pub fn throttling(operation: &str, times: u32) -> Self {
        Self::answer(operation, times, 400, "ThrottlingException")
    }
}

#[derive(Debug, Default)]
struct State {
    faults: Vec<Fault>,
    injected: u64,
    after_effect: u64,
}

/// A running proxy.
#[derive(Clone)]
pub struct FaultProxy {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
}

impl FaultProxy {
    /// A proxy in front of the endpoint `http://host:port`.
    pub async fn in_front_of(endpoint: &str) -> anyhow::Result<Self> {
        Self::start(crate::meter::upstream_of(endpoint)?).await
    }

    /// Starts a proxy on an ephemeral loopback port in front of `upstream`
    /// (`host:port`).
    pub async fn start(upstream: SocketAddr) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(Mutex::new(State::default()));
        let st = state.clone();
        tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                let st = st.clone();
                tokio::spawn(async move {
                    if let Err(e) = serve(conn, upstream, st).await {
                        tracing::debug!(error = %e, "proxy connection closed");
                    }
                });
            }
        });
        Ok(Self { addr, state })
    }

    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Adds a fault.
    pub fn inject(&self, fault: Fault) {
        if let Ok(mut s) = self.state.lock() {
            s.faults.push(fault);
        }
    }

    /// Drops the faults not injected yet (the faults of one operation are
    /// injected one after the other, in the order added).
    pub fn clear(&self) {
        if let Ok(mut s) = self.state.lock() {
            s.faults.clear();
        }
    }

    /// Of [`Self::injected`], the requests that took effect before their
    /// answer was lost.
    pub fn injected_after_effect(&self) -> u64 {
        self.state.lock().map(|s| s.after_effect).unwrap_or(0)
    }

    /// Number of responses the proxy has faked so far.
    pub fn injected(&self) -> u64 {
        self.state.lock().map(|s| s.injected).unwrap_or(0)
    }
}

async fn serve(
    mut client: TcpStream,
    upstream: SocketAddr,
    state: Arc<Mutex<State>>,
) -> anyhow::Result<()> {
    let mut upstream_conn: Option<TcpStream> = None;
    let mut cbuf = Vec::new();
    let mut ubuf = Vec::new();
    while let Some((head, request)) = read_message(&mut client, &mut cbuf).await? {
        let target = header(&head, "x-amz-target").unwrap_or_default();
        let fault = {
            let mut s = state.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
            let hit = s
                .faults
                .iter_mut()
                .find(|f| {
                    f.times > 0
                        && f.until.is_none_or(|u| std::time::Instant::now() < u)
                        && target.ends_with(&format!(".{}", f.operation))
                        && f.matching.as_deref().is_none_or(|t| holds(&request, t))
                })
                .and_then(|f| {
                    if f.after > 0 {
                        f.after -= 1;
                        return None;
                    }
                    f.times -= 1;
                    Some(f.clone())
                });
            if let Some(f) = &hit {
                s.injected += 1;
                s.after_effect += u64::from(f.after_effect);
            }
            hit
        };
        if let Some(gate) = fault.as_ref().and_then(|f| f.gate.clone()) {
            gate.acquire().await?.forget();
        }
        if let Some(delay) = fault.as_ref().and_then(|f| f.delay) {
            tokio::time::sleep(delay).await;
            let response = forward(&mut upstream_conn, upstream, &mut ubuf, &request).await?;
            client.write_all(&response).await?;
            continue;
        }
        if let Some(f) = fault.as_ref().filter(|f| f.fail_entries) {
            let body = failed_entries(&request, &f.error_type);
            client.write_all(&answer("200 OK", &body)).await?;
            continue;
        }
        if let Some(f) = fault.as_ref().filter(|f| f.unprocessed) {
            let (status, body) = unprocessed(&f.operation, &request);
            client.write_all(&answer(status, &body)).await?;
            continue;
        }
        if let Some(f) = fault.as_ref().filter(|f| f.after_effect) {
            // The request reaches the server; its answer is lost.
            forward(&mut upstream_conn, upstream, &mut ubuf, &request).await?;
            if f.reset {
                return Ok(());
            }
        } else if fault.as_ref().is_some_and(|f| f.reset) {
            return Ok(());
        }
        if fault.as_ref().is_some_and(|f| f.garbled) {
            client
                .write_all(&answer(
                    "200 OK",
                    "{\"__type\":\u{1}\u{7f}garbled by jobstream fault proxy",
                ))
                .await?;
            continue;
        }
        if let Some(f) = fault {
            let body = format!(
                r#"{{"__type":"com.amazonaws.dynamodb.v20120810#{}","message":"injected by jobstream fault proxy"}}"#,
                f.error_type
            );
            let status = format!("{} Injected", f.status);
            client.write_all(&answer(&status, &body)).await?;
            continue;
        }
        let response = forward(&mut upstream_conn, upstream, &mut ubuf, &request).await?;
        client.write_all(&response).await?;
    }
    Ok(())
}

/// Whether the body of `request` holds `text`.
fn holds(request: &[u8], text: &str) -> bool {
    String::from_utf8_lossy(split(request).1).contains(text)
}

/// An HTTP/1.1 answer of the proxy's own: `status` (code and reason),
/// a JSON `body`.
fn answer(status: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/x-amz-json-1.0\r\nx-amzn-RequestId: injected\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// DynamoDB's answer to `request` (of `operation`) when it processed none
/// of it: HTTP status and JSON body (see [`Fault::unprocessed`]).
fn unprocessed(operation: &str, request: &[u8]) -> (&'static str, String) {
    let (_, body) = split(request);
    let body: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let requested = || body.get("RequestItems").cloned().unwrap_or_default();
    match operation {
        "BatchWriteItem" => (
            "200 OK",
            serde_json::json!({ "UnprocessedItems": requested() }).to_string(),
        ),
        "BatchGetItem" => {
            let tables = requested();
            let none: serde_json::Map<String, serde_json::Value> = tables
                .as_object()
                .map(|t| {
                    t.keys()
                        .map(|k| (k.clone(), serde_json::json!([])))
                        .collect()
                })
                .unwrap_or_default();
            (
                "200 OK",
                serde_json::json!({ "Responses": none, "UnprocessedKeys": tables }).to_string(),
            )
        }
        _ => {
            let actions = body
                .get("TransactItems")
                .and_then(|a| a.as_array())
                .map_or(1, Vec::len);
            let reasons: Vec<serde_json::Value> = (0..actions)
                .map(|i| match i {
                    0 => serde_json::json!({
                        "Code": "ThrottlingError",
                        "Message": "Throughput exceeds the current capacity of your table or index (injected by jobstream fault proxy)",
                    }),
                    _ => serde_json::json!({ "Code": "None" }),
                })
                .collect();
            let codes = (0..actions)
                .map(|i| if i == 0 { "ThrottlingError" } else { "None" })
                .collect::<Vec<_>>()
                .join(", ");
            (
                "400 Injected",
                serde_json::json!({
                    "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
                    "Message": format!("Transaction cancelled, please refer cancellation reasons for specific reasons [{codes}]"),
                    "CancellationReasons": reasons,
                })
                .to_string(),
            )
        }
    }
}

/// A batch answer failing every entry of `request` (head + JSON body).
fn failed_entries(request: &[u8], code: &str) -> String {
    let (_, body) = split(request);
    let ids: Vec<String> = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| {
            v.get("Entries")?.as_array().map(|entries| {
                entries
                    .iter()
                    .filter_map(|e| e.get("Id")?.as_str().map(str::to_string))
                    .collect()
            })
        })
        .unwrap_or_default();
    let failed: Vec<serde_json::Value> = ids
        .iter()
        .map(|id| {
            serde_json::json!({
                "Id": id,
                "SenderFault": false,
                "Code": code,
                "Message": "injected by jobstream fault proxy",
            })
        })
        .collect();
    serde_json::json!({ "Successful": [], "Failed": failed }).to_string()
}
