//! The lease table's unit tests.

use super::*;

/// ops10 #1: "reading the leases failed ... error=ledger query on shard
/// *", never why; the service's answer is in the text.
#[test]
fn a_ledger_error_says_what_the_service_answered() {
    let answer = aws_sdk_dynamodb::types::error::InternalServerError::builder()
        .message("boom (injected)")
        .build();
    let e = LeaseTable::store_error(
        "query",
        "*",
        aws_sdk_dynamodb::Error::InternalServerError(answer),
    );
    let text = e.to_string();
    assert!(text.starts_with("ledger query on shard *: "), "{text}");
    assert!(text.contains("boom (injected)"), "{text}");
}

#[test]
fn keys_name_the_mapping_the_stream_and_the_shard() {
    let arn = "arn:aws:dynamodb:eu-west-1:123:table/t/stream/2024-01-01T00:00:00.000";
    assert_eq!(checkpoint_pk("history", arn), format!("CKPT#history#{arn}"));
    assert_eq!(shard_sk("shardId-0001"), "SHARD#shardId-0001");
    assert_ne!(checkpoint_pk("history", arn), checkpoint_pk("derive", arn));
}

/// `run`'s ledger client has the stream consumers' 40 s call budget;
/// its lease calls end within a renewal interval (a third of the 20 s
/// lease), so a failed renewal leaves time for another.
#[tokio::test]
async fn a_lease_call_ends_within_a_renewal_interval() {
    let sdk = crate::local::engine::sdk_config(Some("http://127.0.0.1:9"), 5).await;
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    let budget = |c: &aws_sdk_dynamodb::Client| {
        let t = c.config().timeout_config();
        t.map(|t| (t.operation_timeout(), t.operation_attempt_timeout()))
            .unwrap_or_default()
    };
    let call = shared::retry::Retries::stream().call_budget;
    assert_eq!(budget(&client).0, Some(call));
    let leases = LeaseTable::new(CheckpointConfig::new(client, "ledger"), "m", "arn");
    let ttl = leases.lease_ttl();
    assert_eq!(ttl, Duration::from_secs(20));
    let (call, attempt) = budget(&leases.config.client);
    assert_eq!(call, Some(ttl / 3));
    assert_eq!(attempt, Some(ttl / 6));
}

#[test]
fn owners_are_unique_per_call() {
    assert_ne!(default_owner(), default_owner());
}

#[test]
fn a_stored_item_reads_as_its_checkpoint() {
    let mut item = Item::new();
    item.insert(attr::SEQ.into(), s("000000000000000000042"));
    item.insert(attr::SHARD_END.into(), AttributeValue::Bool(true));
    assert_eq!(
        checkpoint_of(Some(&item)),
        Checkpoint {
            sequence_number: Some("000000000000000000042".into()),
            shard_end: true
        }
    );
    assert_eq!(checkpoint_of(None), Checkpoint::default());
}
