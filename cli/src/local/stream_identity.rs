//! The origin of a stream record on the SDK path (SPEC §2 rule 5).
//!
//! DynamoDB Streams' GetRecords spells a record's `userIdentity` members
//! `type` and `principalId` (as the Lambda event does), while
//! `aws-sdk-dynamodbstreams` reads `Type` and `PrincipalId`: through the SDK
//! alone the identity comes back empty, and every TTL expiry would decode
//! as a user's delete. [`IdentityClient`] sits in front of the SDK's HTTP
//! client and renames those two members in GetRecords responses before the
//! SDK deserialises them (a response already spelled the SDK's way is left
//! as it is), so the typed records keep their origin.

use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::byte_stream::ByteStream;
use serde_json::Value;

/// The `X-Amz-Target` of GetRecords.
const GET_RECORDS: &str = "DynamoDBStreams_20120810.GetRecords";

/// A Streams client that keeps each record's `userIdentity`: the SDK's
/// default HTTPS client behind [`IdentityClient`].
pub fn streams_client(sdk: &aws_config::SdkConfig) -> aws_sdk_dynamodbstreams::Client {
    streams_client_through(sdk, default_https_client())
}

/// The SDK's default HTTPS client (rustls on aws-lc), for a checking client
/// to sit in front of.
pub fn default_https_client() -> SharedHttpClient {
    use aws_smithy_http_client::{tls, Builder};
    Builder::new()
        .tls_provider(tls::Provider::Rustls(
            tls::rustls_provider::CryptoMode::AwsLc,
        ))
        .build_https()
}

/// [`streams_client`] with [`IdentityClient`] in front of `inner` instead
/// of the default HTTPS client (`jobstream run`'s grant check).
pub fn streams_client_through(
    sdk: &aws_config::SdkConfig,
    inner: SharedHttpClient,
) -> aws_sdk_dynamodbstreams::Client {
    let config = aws_sdk_dynamodbstreams::config::Builder::from(sdk)
        .http_client(IdentityClient::wrapping(inner))
        .build();
    aws_sdk_dynamodbstreams::Client::from_conf(config)
}

/// An HTTP client that renames `userIdentity.type` / `.principalId` to the
/// SDK's `Type` / `PrincipalId` in GetRecords responses.
#[derive(Debug, Clone)]
pub struct IdentityClient {
    inner: SharedHttpClient,
}

impl IdentityClient {
    /// In front of `inner`.
    pub fn wrapping(inner: SharedHttpClient) -> Self {
        Self { inner }
    }
}

impl HttpClient for IdentityClient {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(IdentityConnector {
            inner: self.inner.http_connector(settings, components),
        })
    }
}

#[derive(Debug)]
struct IdentityConnector {
    inner: SharedHttpConnector,
}

impl HttpConnector for IdentityConnector {
    fn call(
        &self,
        request: aws_smithy_runtime_api::client::orchestrator::HttpRequest,
    ) -> HttpConnectorFuture {
        let get_records = request
            .headers()
            .get("x-amz-target")
            .is_some_and(|t| t == GET_RECORDS);
        let response = self.inner.call(request);
        if !get_records {
            return response;
        }
        HttpConnectorFuture::new(async move { keep_identity(response.await?).await })
    }
}

/// `response` with its records' identities spelled the SDK's way.
async fn keep_identity(mut response: HttpResponse) -> Result<HttpResponse, ConnectorError> {
    if !response.status().is_success() {
        return Ok(response);
    }
    let body = ByteStream::new(response.take_body())
        .collect()
        .await
        .map_err(|e| ConnectorError::io(e.into()))?
        .into_bytes();
    let fixed = rename_identities(&body);
    if fixed.is_some() {
        // The body changed: its length did, and a checksum of the original
        // (DynamoDB's x-amz-crc32) no longer applies.
        let headers = response.headers_mut();
        headers.remove("x-amz-crc32");
        headers.remove("content-length");
    }
    *response.body_mut() = SdkBody::from(fixed.unwrap_or_else(|| body.to_vec()));
    Ok(response)
}

/// A GetRecords body with `userIdentity.type` / `.principalId` renamed to
/// `Type` / `PrincipalId`; `None` when nothing needed renaming (or the body
/// is not JSON: the SDK reports that itself).
pub fn rename_identities(body: &[u8]) -> Option<Vec<u8>> {
    let mut v: Value = serde_json::from_slice(body).ok()?;
    let mut changed = false;
    let records = v.get_mut("Records")?.as_array_mut()?;
    for record in records {
        let Some(identity) = record
            .get_mut("userIdentity")
            .and_then(Value::as_object_mut)
        else {
            continue;
        };
        for (theirs, sdks) in [("type", "Type"), ("principalId", "PrincipalId")] {
            if identity.contains_key(sdks) {
                continue;
            }
            if let Some(value) = identity.remove(theirs) {
                identity.insert(sdks.to_string(), value);
                changed = true;
            }
        }
    }
    if !changed {
        return None;
    }
    serde_json::to_vec(&v).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_smithy_runtime_api::http::StatusCode;
    use shared::change::Origin;

    /// Answers every request with one GetRecords body, as DynamoDB Streams
    /// sends it.
    #[derive(Debug, Clone)]
    struct Fixed(&'static str);

    impl HttpClient for Fixed {
        fn http_connector(
            &self,
            _: &HttpConnectorSettings,
            _: &RuntimeComponents,
        ) -> SharedHttpConnector {
            SharedHttpConnector::new(self.clone())
        }
    }

    impl HttpConnector for Fixed {
        fn call(
            &self,
            _: aws_smithy_runtime_api::client::orchestrator::HttpRequest,
        ) -> HttpConnectorFuture {
            let mut r = HttpResponse::new(
                StatusCode::try_from(200).expect("200"),
                SdkBody::from(self.0),
            );
            r.headers_mut()
                .insert("content-type", "application/x-amz-json-1.0");
            r.headers_mut()
                .insert("content-length", self.0.len().to_string());
            r.headers_mut().insert("x-amz-crc32", "12345");
            HttpConnectorFuture::ready(Ok(r))
        }
    }

    const GET_RECORDS_TTL: &str =
        include_str!("../../../tests/fixtures/streams-get-records-ttl.json");

    fn client(http: impl HttpClient + 'static) -> aws_sdk_dynamodbstreams::Client {
        let config = aws_sdk_dynamodbstreams::Config::builder()
            .behavior_version(aws_sdk_dynamodbstreams::config::BehaviorVersion::latest())
            .region(aws_sdk_dynamodbstreams::config::Region::new("eu-west-1"))
            .credentials_provider(aws_sdk_dynamodbstreams::config::Credentials::new(
                "a", "b", None, None, "test",
            ))
            .http_client(http)
            .build();
        aws_sdk_dynamodbstreams::Client::from_conf(config)
    }

    /// One GetRecords through `streams`, parsed.
    async fn get_records(
        streams: &aws_sdk_dynamodbstreams::Client,
    ) -> aws_sdk_dynamodbstreams::operation::get_records::GetRecordsOutput {
        let call = streams.get_records().shard_iterator("it").send();
        call.await.expect("GetRecords parses")
    }

    /// A real-shaped GetRecords response through the SDK, as `run` reads
    /// it: the TTL expiry keeps its origin, a user's delete stays one.
    #[tokio::test]
    async fn a_ttl_expiry_read_through_the_sdk_keeps_its_origin() {
        let streams = client(IdentityClient::wrapping(SharedHttpClient::new(Fixed(
            GET_RECORDS_TTL,
        ))));
        let out = get_records(&streams).await;
        let records: Vec<_> = out
            .records()
            .iter()
            .map(|r| crate::local::shards::sdk_record(r).expect("record"))
            .collect();
        assert_eq!(records.len(), 2);
        let id = records[0].user_identity.as_ref().expect("identity kept");
        assert_eq!(id.type_, "Service");
        assert_eq!(id.principal_id, "dynamodb.amazonaws.com");
        let ttl = shared::change::decode(records[0].clone()).expect("decodes");
        assert_eq!(ttl.origin, Origin::TtlExpiry);
        let user = shared::change::decode(records[1].clone()).expect("decodes");
        assert_eq!(user.origin, Origin::User);
        assert!(records[1].user_identity.is_none());
    }

    /// Why [`IdentityClient`] exists: the SDK alone reads the same body
    /// as a user's delete. (If an SDK release reads DynamoDB's spelling,
    /// this fails, and the client can go.)
    #[tokio::test]
    async fn the_sdk_alone_reads_a_ttl_expiry_as_a_users_delete() {
        let streams = client(Fixed(GET_RECORDS_TTL));
        let out = get_records(&streams).await;
        let record = crate::local::shards::sdk_record(&out.records()[0]).expect("record");
        let change = shared::change::decode(record).expect("decodes");
        assert_eq!(change.origin, Origin::User);
    }

    #[test]
    fn identities_already_spelled_the_sdks_way_are_left_alone() {
        let sdk_spelled = r#"{"Records":[{"userIdentity":{"PrincipalId":"dynamodb.amazonaws.com","Type":"Service"}}]}"#;
        assert_eq!(rename_identities(sdk_spelled.as_bytes()), None);
        assert_eq!(rename_identities(b"not json"), None);
        let fixed = rename_identities(GET_RECORDS_TTL.as_bytes()).expect("renamed");
        let v: Value = serde_json::from_slice(&fixed).unwrap();
        assert_eq!(
            v["Records"][0]["userIdentity"],
            serde_json::json!({"PrincipalId": "dynamodb.amazonaws.com", "Type": "Service"})
        );
        assert_eq!(v["Records"][1].get("userIdentity"), None);
    }
}
