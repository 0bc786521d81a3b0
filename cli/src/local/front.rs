//! A fair front for the embedded engine: every HTTP request reaches
//! Dynoxide through one admission gate that serves its callers in turn.
//!
//! Dynoxide runs each request to completion under one database lock, on
//! the server's worker thread, and its lock (a `std::sync::Mutex`) makes no
//! promise about order. A writer with 64 requests in flight then took nearly
//! every turn, and the processors' one request at a time waited behind all
//! of them (a hot shard's derive: 31-66 records/s while the writes lasted,
//! 730-1,020 once they stopped). In DynamoDB a hot partition's writes do not
//! delay requests to other partitions; an engine with one lock can only
//! approximate that by sharing its time fairly between the callers.
//!
//! The front serves the engine's public address and forwards each request,
//! verbatim, to Dynoxide's own server on a private loopback port. A request
//! waits in the queue of its caller, named by the access key id it signs
//! with (`Credential=<key>/...`); the gate admits one request at a time and
//! takes the callers' queues in turn (round robin), FIFO within one. So a
//! writer with 64 requests queued and a processor with one get every other
//! turn, and the tokio workers never block on the engine's lock while
//! others wait (only the admitted request is inside Dynoxide).
//!
//! The local runtime signs its own requests (provisioning, stream reads and
//! every processor's calls) as [`PROCESSORS_ACCESS_KEY`] when it talks to a
//! loopback endpoint (`engine::runtime_sdk_config`); an application's
//! requests come with whatever key it uses (`local` for `sdk_config`).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{Request, Response, StatusCode};
use http_body_util::BodyExt as _;
use tokio::sync::oneshot;

use super::stream_trim::{trimmed_request, Horizons};

/// The access key id the local runtime signs its requests with against a
/// loopback endpoint: its own caller at the engine's gate.
pub const PROCESSORS_ACCESS_KEY: &str = "jobstream-processors";

/// DynamoDB accepts request bodies up to 16 MB (as Dynoxide's server).
const MAX_BODY: usize = 16 * 1024 * 1024;

/// One request at a time, callers in turn.
#[derive(Default)]
pub struct FairGate {
    state: Mutex<GateState>,
}

#[derive(Default)]
struct GateState {
    /// Whether a request holds the gate.
    busy: bool,
    /// Each caller's waiting requests, oldest first.
    queues: HashMap<String, VecDeque<oneshot::Sender<Permit>>>,
    /// Callers with a request waiting, in the order their turn comes.
    turns: VecDeque<String>,
    /// Requests admitted, per caller (what a test or a benchmark reads).
    admitted: HashMap<String, u64>,
    /// How long admitted requests held the gate, in all: the engine's busy
    /// time (what a benchmark reads against its wall time).
    held: std::time::Duration,
}

/// The right to run one request in the engine; the next caller's request
/// is admitted when it is dropped.
pub struct Permit {
    gate: Option<Arc<FairGate>>,
    admitted_at: std::time::Instant,
}

impl Permit {
    fn of(gate: &Arc<FairGate>) -> Self {
        Self {
            gate: Some(gate.clone()),
            admitted_at: std::time::Instant::now(),
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some(gate) = self.gate.take() {
            gate.lock().held += self.admitted_at.elapsed();
            FairGate::release(gate);
        }
    }
}

impl FairGate {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Waits for `caller`'s turn. Cancel-safe: a waiter dropped before its
    /// turn leaves the queue without taking one.
    pub async fn acquire(self: &Arc<Self>, caller: &str) -> Permit {
        let rx = {
            let mut s = self.lock();
            if !s.busy && s.turns.is_empty() {
                s.busy = true;
                *s.admitted.entry(caller.to_string()).or_default() += 1;
                return Permit::of(self);
            }
            let (tx, rx) = oneshot::channel();
            let queue = s.queues.entry(caller.to_string()).or_default();
            queue.push_back(tx);
            if queue.len() == 1 {
                s.turns.push_back(caller.to_string());
            }
            rx
        };
        match rx.await {
            Ok(permit) => permit,
            // The gate is gone (never while a permit or a waiter holds it).
            Err(_) => Permit {
                gate: None,
                admitted_at: std::time::Instant::now(),
            },
        }
    }

    /// Requests admitted so far, per caller.
    pub fn admitted(&self) -> HashMap<String, u64> {
        self.lock().admitted.clone()
    }

    /// How long the requests admitted so far held the gate, in all.
    pub fn held(&self) -> std::time::Duration {
        self.lock().held
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, GateState> {
        // A panic while holding this lock leaves plain counters and queues,
        // still consistent: go on with them.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hands the gate to the next caller's oldest request, or frees it.
    fn release(gate: Arc<Self>) {
        loop {
            let (caller, next) = {
                let mut s = gate.lock();
                let Some(caller) = s.turns.pop_front() else {
                    s.busy = false;
                    return;
                };
                let queue = s.queues.get_mut(&caller).expect("a turn has a queue");
                let next = queue.pop_front().expect("a turn has a waiter");
                if queue.is_empty() {
                    s.queues.remove(&caller);
                } else {
                    s.turns.push_back(caller.clone());
                }
                (caller, next)
            };
            match next.send(Permit::of(&gate)) {
                Ok(()) => {
                    *gate.lock().admitted.entry(caller).or_default() += 1;
                    return;
                }
                // That waiter was dropped: its permit must not release
                // again (this loop hands the gate on instead).
                Err(mut unused) => {
                    unused.gate = None;
                }
            }
        }
    }
}

/// The caller a request is queued as: its access key id, or `anonymous`.
pub fn caller_of(headers: &axum::http::HeaderMap) -> String {
    headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split("Credential=").nth(1))
        .and_then(|v| v.split('/').next())
        .filter(|k| !k.is_empty())
        .unwrap_or("anonymous")
        .to_string()
}

type Client = hyper_util::client::legacy::Client<
    hyper_util::client::legacy::connect::HttpConnector,
    http_body_util::Full<bytes::Bytes>,
>;

/// What the front's handler needs.
#[derive(Clone)]
pub struct Front {
    gate: Arc<FairGate>,
    /// What the stream's trim removed (`stream_trim`).
    horizons: Horizons,
    client: Client,
    /// `http://127.0.0.1:<port>` of Dynoxide's own server.
    engine: String,
}

impl Front {
    pub fn new(gate: Arc<FairGate>, horizons: Horizons, engine: String) -> Self {
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build_http();
        Self {
            gate,
            horizons,
            client,
            engine,
        }
    }

    /// The front as an axum router (every path and method is forwarded).
    pub fn router(self) -> axum::Router {
        axum::Router::new().fallback(handle).with_state(self)
    }
}

async fn handle(
    axum::extract::State(front): axum::extract::State<Front>,
    req: Request<Body>,
) -> Response<Body> {
    match forward(&front, req).await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %format!("{e:#}"), "the engine's front could not forward a request");
            let why = format!("the embedded engine did not answer: {e:#}");
            error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalServerError",
                &why,
            )
        }
    }
}

/// A DynamoDB error answer of the front's own.
fn error(status: StatusCode, kind: &str, message: &str) -> Response<Body> {
    let body = serde_json::json!({
        "__type": format!("com.amazonaws.dynamodb.v20120810#{kind}"),
        "message": message,
    });
    Response::builder()
        .status(status)
        .header("content-type", "application/x-amz-json-1.0")
        .body(Body::from(body.to_string()))
        .expect("a status, a header and a body")
}

async fn forward(front: &Front, req: Request<Body>) -> anyhow::Result<Response<Body>> {
    let (parts, body) = req.into_parts();
    let body = axum::body::to_bytes(body, MAX_BODY).await?;
    let caller = caller_of(&parts.headers);
    let operation = parts
        .headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .and_then(|t| t.split('.').nth(1))
        .unwrap_or_default();
    if let Some(why) = trimmed_request(&front.horizons, operation, &body) {
        let trimmed = "TrimmedDataAccessException";
        return Ok(error(StatusCode::BAD_REQUEST, trimmed, &why));
    }
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    let mut out = Request::builder()
        .method(parts.method)
        .uri(format!("{}{path}", front.engine));
    for (name, value) in &parts.headers {
        if !is_hop_by_hop(name) {
            out = out.header(name, value);
        }
    }
    let out = out.body(http_body_util::Full::new(body))?;
    let permit = front.gate.acquire(&caller).await;
    let response = front.client.request(out).await?;
    let (parts, body) = response.into_parts();
    let body = body.collect().await?.to_bytes();
    drop(permit);
    let mut r = Response::from_parts(parts, Body::from(body));
    r.headers_mut()
        .remove(axum::http::header::TRANSFER_ENCODING);
    Ok(r)
}

fn is_hop_by_hop(name: &axum::http::HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection" | "keep-alive" | "transfer-encoding" | "upgrade" | "te" | "trailer"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Admits `n` waiters of `caller` behind the held `first`, in order of
    /// arrival; returns the order the gate admits everyone in.
    #[tokio::test]
    async fn a_caller_with_one_request_waits_one_turn_behind_a_backlog_of_64() {
        let gate = FairGate::new();
        let first = gate.acquire("local").await;
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut waiters = Vec::new();
        let spawn = |caller: &'static str, i: usize| {
            let gate = gate.clone();
            let order = order.clone();
            tokio::spawn(async move {
                let permit = gate.acquire(caller).await;
                order.lock().unwrap().push(format!("{caller}{i}"));
                tokio::task::yield_now().await;
                drop(permit);
            })
        };
        for i in 0..64 {
            waiters.push(spawn("local", i));
            tokio::task::yield_now().await;
        }
        // Let every writer's request queue before the processor's.
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        waiters.push(spawn(PROCESSORS_ACCESS_KEY, 0));
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        drop(first);
        for w in waiters {
            w.await.unwrap();
        }
        let order = order.lock().unwrap().clone();
        assert_eq!(order.len(), 65);
        let at = order
            .iter()
            .position(|c| c.starts_with(PROCESSORS_ACCESS_KEY))
            .unwrap();
        assert!(
            at <= 1,
            "the processor's request came {at}th of 65 (a FIFO or an unfair lock serves it after the backlog): {order:?}"
        );
        // Within one caller, arrival order.
        let writers: Vec<_> = order.iter().filter(|c| c.starts_with("local")).collect();
        let expected: Vec<String> = (0..64).map(|i| format!("local{i}")).collect();
        assert_eq!(writers, expected.iter().collect::<Vec<_>>());
        assert_eq!(gate.admitted()["local"], 65);
        assert_eq!(gate.admitted()[PROCESSORS_ACCESS_KEY], 1);
    }

    #[tokio::test]
    async fn a_waiter_dropped_before_its_turn_does_not_keep_the_gate() {
        let gate = FairGate::new();
        let held = gate.acquire("a").await;
        let waiting = {
            let gate = gate.clone();
            tokio::spawn(async move {
                let _p = gate.acquire("b").await;
            })
        };
        tokio::task::yield_now().await;
        tokio::task::yield_now().await;
        waiting.abort();
        let _ = waiting.await;
        drop(held);
        // The gate is free again: this would wait forever otherwise.
        let again = tokio::time::timeout(std::time::Duration::from_secs(30), gate.acquire("c"))
            .await
            .expect("the gate was handed on past the dropped waiter");
        drop(again);
    }

    #[test]
    fn the_caller_is_the_signing_access_key() {
        let mut h = axum::http::HeaderMap::new();
        assert_eq!(caller_of(&h), "anonymous");
        h.insert(
            axum::http::header::AUTHORIZATION,
            "AWS4-HMAC-SHA256 Credential=jobstream-processors/20261127/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=x"
                .parse()
                .unwrap(),
        );
        assert_eq!(caller_of(&h), PROCESSORS_ACCESS_KEY);
    }
}
