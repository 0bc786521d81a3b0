//! The bill meter: an HTTP proxy for the DynamoDB JSON protocol that adds
//! `"ReturnConsumedCapacity":"INDEXES"` to every request that takes it and
//! sums the capacity each answer reports, per operation, as DynamoDB bills
//! it on demand: read request units (RRU) and write request units (WRU),
//! transactional actions twice, strongly consistent reads in full, the
//! writes of global secondary indexes included.
//!
//! The units are the engine's own (Dynoxide sizes items and rounds per
//! item, 1 KB for writes and 4 KB for reads, the way DynamoDB documents
//! it; `tests/integration/meter.rs` checks hand-computed cases). Where the
//! engine reports nothing, the meter corrects:
//! - a write whose condition fails (`ConditionalCheckFailedException`) is
//!   billed by DynamoDB on the existing item's size (1 WRU when there is
//!   none), which the engine's error answer does not carry: the meter asks
//!   for the old item (`ReturnValuesOnConditionCheckFailure: ALL_OLD`, when
//!   the request did not ask itself) and bills it;
//! - a cancelled transaction (`TransactionCanceledException`) reports no
//!   capacity here; it is counted ([`OpBill::cancelled`]), not billed.
//!
//! Changing the body breaks a SigV4 signature, which the embedded engine
//! does not check: the meter is for local measurement only.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Operations whose requests take `ReturnConsumedCapacity`, and whether
/// they read (`false`) or write (`true`).
const METERED: &[(&str, bool)] = &[
    ("GetItem", false),
    ("BatchGetItem", false),
    ("Query", false),
    ("Scan", false),
    ("TransactGetItems", false),
    ("PutItem", true),
    ("UpdateItem", true),
    ("DeleteItem", true),
    ("BatchWriteItem", true),
    ("TransactWriteItems", true),
];

/// Single-item writes that take `ReturnValuesOnConditionCheckFailure`.
const CONDITIONAL: &[&str] = &["PutItem", "UpdateItem", "DeleteItem"];

/// What one operation cost.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OpBill {
    /// Requests answered (successes and errors).
    pub requests: u64,
    /// Read request units.
    pub rru: f64,
    /// Write request units (table and indexes).
    pub wru: f64,
    /// Of `wru`, the units of global and local secondary indexes.
    pub index_wru: f64,
    /// Writes refused by their condition (billed on the old item's size).
    pub failed_conditions: u64,
    /// Transactions cancelled (not billed: the engine reports nothing).
    pub cancelled: u64,
    /// Other errors (throttling, validation): not billed.
    pub errors: u64,
}

/// The capacity of the requests that went through a meter, per operation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Bill {
    pub ops: BTreeMap<String, OpBill>,
}

impl Bill {
    pub fn rru(&self) -> f64 {
        self.ops.values().map(|o| o.rru).sum()
    }

    pub fn wru(&self) -> f64 {
        self.ops.values().map(|o| o.wru).sum()
    }

    pub fn requests(&self) -> u64 {
        self.ops.values().map(|o| o.requests).sum()
    }

    /// What was billed since `earlier` (a [`Meter::bill`] taken before).
    pub fn since(&self, earlier: &Bill) -> Bill {
        let ops = self
            .ops
            .iter()
            .map(|(op, now)| {
                let was = earlier.ops.get(op).cloned().unwrap_or_default();
                let diff = OpBill {
                    requests: now.requests - was.requests,
                    rru: now.rru - was.rru,
                    wru: now.wru - was.wru,
                    index_wru: now.index_wru - was.index_wru,
                    failed_conditions: now.failed_conditions - was.failed_conditions,
                    cancelled: now.cancelled - was.cancelled,
                    errors: now.errors - was.errors,
                };
                (op.clone(), diff)
            })
            .filter(|(_, d)| d.requests > 0)
            .collect();
        Bill { ops }
    }

    /// `RRU x.xx + WRU y.yy per change (...)` for `changes` changes, with
    /// the operations that billed.
    pub fn per_change(&self, changes: usize) -> String {
        let per = |u: f64| u / changes.max(1) as f64;
        let ops: Vec<String> = self
            .ops
            .iter()
            .map(|(op, b)| {
                let mut s = format!("{op} {}", b.requests);
                if b.rru > 0.0 {
                    s.push_str(&format!(" {:.0} RRU", b.rru));
                }
                if b.wru > 0.0 {
                    s.push_str(&format!(" {:.0} WRU", b.wru));
                }
                if b.index_wru > 0.0 {
                    s.push_str(&format!(" (indexes {:.0})", b.index_wru));
                }
                if b.failed_conditions > 0 {
                    s.push_str(&format!(", {} failed conditions", b.failed_conditions));
                }
                if b.cancelled > 0 {
                    s.push_str(&format!(", {} cancelled (unbilled)", b.cancelled));
                }
                s
            })
            .collect();
        format!(
            "RRU {:.2} + WRU {:.2} per change ({})",
            per(self.rru()),
            per(self.wru()),
            ops.join("; ")
        )
    }
}

/// A running meter.
#[derive(Clone)]
pub struct Meter {
    addr: SocketAddr,
    bill: Arc<Mutex<Bill>>,
}

impl Meter {
    /// Starts a meter on an ephemeral loopback port in front of `upstream`
    /// (`host:port`).
    pub async fn start(upstream: SocketAddr) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let bill = Arc::new(Mutex::new(Bill::default()));
        let b = bill.clone();
        tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                let b = b.clone();
                tokio::spawn(async move {
                    if let Err(e) = serve(conn, upstream, b).await {
                        tracing::debug!(error = %e, "meter connection closed");
                    }
                });
            }
        });
        Ok(Self { addr, bill })
    }

    /// A meter in front of the endpoint `http://host:port`.
    pub async fn in_front_of(endpoint: &str) -> anyhow::Result<Self> {
        Self::start(upstream_of(endpoint)?).await
    }

    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bill so far.
    pub fn bill(&self) -> Bill {
        self.bill.lock().map(|b| b.clone()).unwrap_or_default()
    }
}

/// Reads one HTTP/1.1 message (head + Content-Length body) from `conn`.
pub(crate) async fn read_message(
    conn: &mut TcpStream,
    buf: &mut Vec<u8>,
) -> anyhow::Result<Option<(String, Vec<u8>)>> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            let len = header(&head, "content-length")
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0);
            let total = end + 4 + len;
            while buf.len() < total {
                let n = conn.read_buf(buf).await?;
                anyhow::ensure!(n > 0, "connection closed mid-body");
            }
            let message: Vec<u8> = buf.drain(..total).collect();
            return Ok(Some((head, message)));
        }
        if conn.read_buf(buf).await? == 0 {
            return Ok(None);
        }
    }
}

/// The value of header `name` (any case) in an HTTP head.
pub(crate) fn header(head: &str, name: &str) -> Option<String> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case(name)
            .then(|| v.trim().to_string())
    })
}

/// The operation of a DynamoDB request (`DynamoDB_20120810.PutItem` ->
/// `PutItem`).
fn operation(head: &str) -> String {
    header(head, "x-amz-target")
        .and_then(|t| t.rsplit_once('.').map(|(_, op)| op.to_string()))
        .unwrap_or_default()
}

/// Splits an HTTP message into its head and body.
pub(crate) fn split(message: &[u8]) -> (&[u8], &[u8]) {
    match message.windows(4).position(|w| w == b"\r\n\r\n") {
        Some(end) => (&message[..end], &message[end + 4..]),
        None => (message, &message[..0]),
    }
}

/// `request` with the body asking for the capacity (and, for a
/// conditional single-item write, the old item on a failed condition), its
/// Content-Length set to the new body's.
fn metered_request(op: &str, request: &[u8]) -> Vec<u8> {
    let (head, body) = split(request);
    let Ok(Value::Object(mut json)) = serde_json::from_slice::<Value>(body) else {
        return request.to_vec();
    };
    let asks = json
        .get("ReturnConsumedCapacity")
        .and_then(Value::as_str)
        .is_some_and(|m| m != "NONE");
    if !asks {
        json.insert("ReturnConsumedCapacity".into(), "INDEXES".into());
    }
    if CONDITIONAL.contains(&op) && json.contains_key("ConditionExpression") {
        json.entry("ReturnValuesOnConditionCheckFailure")
            .or_insert_with(|| "ALL_OLD".into());
    }
    let body = Value::Object(json).to_string();
    let head = String::from_utf8_lossy(head);
    let mut out = String::new();
    for line in head.split("\r\n") {
        if line
            .split_once(':')
            .is_some_and(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        {
            out.push_str(&format!("Content-Length: {}", body.len()));
        } else {
            out.push_str(line);
        }
        out.push_str("\r\n");
    }
    out.push_str("\r\n");
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(body.as_bytes());
    bytes
}

/// Adds the capacity `response` reports for `op` to `bill`.
fn add(bill: &mut Bill, op: &str, writes: bool, response: &[u8]) {
    let (head, body) = split(response);
    let status_ok = head.starts_with(b"HTTP/1.1 200") || head.starts_with(b"HTTP/1.0 200");
    let json: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let entry = bill.ops.entry(op.to_string()).or_default();
    entry.requests += 1;
    if !status_ok {
        let kind = json
            .get("__type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if kind.ends_with("ConditionalCheckFailedException") {
            // DynamoDB bills a refused write on the existing item's size,
            // 1 WRU when there is none.
            let size = json
                .get("Item")
                .and_then(|i| serde_json::from_value::<dynoxide::types::Item>(i.clone()).ok())
                .map_or(0, |i| dynoxide::types::item_size(&i));
            entry.failed_conditions += 1;
            entry.wru += dynoxide::types::write_capacity_units(size);
        } else if kind.ends_with("TransactionCanceledException") {
            entry.cancelled += 1;
        } else {
            entry.errors += 1;
        }
        return;
    }
    let capacities: Vec<&Value> = match json.get("ConsumedCapacity") {
        Some(Value::Array(a)) => a.iter().collect(),
        Some(c @ Value::Object(_)) => vec![c],
        _ => Vec::new(),
    };
    for c in capacities {
        let units = c
            .get("CapacityUnits")
            .and_then(Value::as_f64)
            .unwrap_or(0.0);
        let indexes: f64 = ["GlobalSecondaryIndexes", "LocalSecondaryIndexes"]
            .iter()
            .filter_map(|k| c.get(*k).and_then(Value::as_object))
            .flat_map(|m| m.values())
            .filter_map(|d| d.get("CapacityUnits").and_then(Value::as_f64))
            .sum();
        if writes {
            entry.wru += units;
            entry.index_wru += indexes;
        } else {
            entry.rru += units;
        }
    }
}

async fn serve(
    mut client: TcpStream,
    upstream: SocketAddr,
    bill: Arc<Mutex<Bill>>,
) -> anyhow::Result<()> {
    let mut upstream_conn: Option<TcpStream> = None;
    let mut cbuf = Vec::new();
    let mut ubuf = Vec::new();
    while let Some((head, request)) = read_message(&mut client, &mut cbuf).await? {
        let op = operation(&head);
        let metered = METERED.iter().find(|(o, _)| *o == op).map(|(_, w)| *w);
        let request = match metered {
            Some(_) => metered_request(&op, &request),
            None => request,
        };
        let response = forward(&mut upstream_conn, upstream, &mut ubuf, &request).await?;
        if let Some(writes) = metered {
            let mut b = bill.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
            add(&mut b, &op, writes, &response);
        }
        client.write_all(&response).await?;
    }
    Ok(())
}

/// Sends `request` upstream (connecting on first use) and returns the
/// whole response.
pub(crate) async fn forward(
    conn: &mut Option<TcpStream>,
    upstream: SocketAddr,
    buf: &mut Vec<u8>,
    request: &[u8],
) -> anyhow::Result<Vec<u8>> {
    if conn.is_none() {
        *conn = Some(
            TcpStream::connect(upstream)
                .await
                .context("connecting upstream")?,
        );
        buf.clear();
    }
    let up = conn.as_mut().expect("connected above");
    up.write_all(request).await?;
    match read_message(up, buf).await? {
        Some((_, response)) => Ok(response),
        None => anyhow::bail!("upstream closed"),
    }
}

/// The address of an endpoint `http://host:port`, for a proxy in front of
/// it.
pub(crate) fn upstream_of(endpoint: &str) -> anyhow::Result<SocketAddr> {
    endpoint
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .parse()
        .with_context(|| format!("{endpoint}: not http://host:port"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_asks_for_indexes_and_the_old_item_with_its_length_updated() {
        let body = r#"{"TableName":"t","Item":{"pk":{"S":"a"}},"ConditionExpression":"attribute_not_exists(pk)"}"#;
        let req = format!(
            "POST / HTTP/1.1\r\nX-Amz-Target: DynamoDB_20120810.PutItem\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let out = metered_request("PutItem", req.as_bytes());
        let (head, body) = split(&out);
        let json: Value = serde_json::from_slice(body).unwrap();
        assert_eq!(json["ReturnConsumedCapacity"], "INDEXES");
        assert_eq!(json["ReturnValuesOnConditionCheckFailure"], "ALL_OLD");
        let head = String::from_utf8_lossy(head);
        assert_eq!(
            header(&head, "content-length").unwrap(),
            body.len().to_string()
        );
        assert_eq!(operation(&head), "PutItem");
    }

    #[test]
    fn a_request_that_asks_itself_keeps_its_mode_and_a_non_json_body_passes() {
        let body = r#"{"TableName":"t","ReturnConsumedCapacity":"TOTAL"}"#;
        let req = format!(
            "POST / HTTP/1.1\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let out = metered_request("GetItem", req.as_bytes());
        let json: Value = serde_json::from_slice(split(&out).1).unwrap();
        assert_eq!(json["ReturnConsumedCapacity"], "TOTAL");
        assert!(json.get("ReturnValuesOnConditionCheckFailure").is_none());
        let junk = b"POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc";
        assert_eq!(metered_request("GetItem", junk), junk.to_vec());
    }

    #[test]
    fn answers_add_their_units_per_operation_and_errors_are_classified() {
        let mut bill = Bill::default();
        let answer = |status: &str, body: &str| {
            let answer = format!(
                "HTTP/1.1 {status}\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            answer + body
        };
        let ok = |body: &str| answer("200 OK", body);
        let err = |body: &str| answer("400 Bad", body);
        add(
            &mut bill,
            "GetItem",
            false,
            ok(r#"{"ConsumedCapacity":{"TableName":"t","CapacityUnits":0.5}}"#).as_bytes(),
        );
        add(&mut bill, "TransactWriteItems", true, ok(r#"{"ConsumedCapacity":[{"TableName":"a","CapacityUnits":4.0},{"TableName":"b","CapacityUnits":3.0,"GlobalSecondaryIndexes":{"GSI1":{"CapacityUnits":1.0}}}]}"#).as_bytes());
        // A refused write: billed on the old item's size (1,500 bytes: 2 WRU).
        let old = format!(
            r#"{{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","Item":{{"pk":{{"S":"a"}},"v":{{"S":"{}"}}}}}}"#,
            "x".repeat(1500)
        );
        add(&mut bill, "PutItem", true, err(&old).as_bytes());
        // Refused with nothing there: 1 WRU.
        add(
            &mut bill,
            "PutItem",
            true,
            err(r#"{"__type":"x#ConditionalCheckFailedException"}"#).as_bytes(),
        );
        add(
            &mut bill,
            "TransactWriteItems",
            true,
            err(r#"{"__type":"x#TransactionCanceledException"}"#).as_bytes(),
        );
        add(
            &mut bill,
            "UpdateItem",
            true,
            err(r#"{"__type":"x#ProvisionedThroughputExceededException"}"#).as_bytes(),
        );
        assert_eq!(bill.rru(), 0.5);
        assert_eq!(bill.wru(), 7.0 + 2.0 + 1.0);
        let tx = &bill.ops["TransactWriteItems"];
        assert_eq!((tx.requests, tx.index_wru, tx.cancelled), (2, 1.0, 1));
        assert_eq!(bill.ops["PutItem"].failed_conditions, 2);
        assert_eq!(bill.ops["UpdateItem"].errors, 1);
        let before = bill.clone();
        add(
            &mut bill,
            "GetItem",
            false,
            ok(r#"{"ConsumedCapacity":{"CapacityUnits":1.0}}"#).as_bytes(),
        );
        let since = bill.since(&before);
        assert_eq!(since.ops.keys().collect::<Vec<_>>(), vec!["GetItem"]);
        assert_eq!((since.rru(), since.wru()), (1.0, 0.0));
        assert!(since
            .per_change(2)
            .starts_with("RRU 0.50 + WRU 0.00 per change (GetItem 1 1 RRU)"));
    }
}
