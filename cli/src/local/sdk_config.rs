//! How jobstream's SDK clients are configured: the endpoint however it is
//! named (flag or the SDK's variables), the region and credentials a
//! loopback endpoint gets (the embedded engine, the local SQS), and the
//! one-line startup errors when a region or credentials are missing.

use super::front::PROCESSORS_ACCESS_KEY;

/// SDK configuration for an endpoint: explicit `endpoint`, else the standard
/// `AWS_ENDPOINT_URL*` variables, region and credential chains. Only a
/// loopback endpoint (the embedded engine, the local SQS) gets a default
/// region and dummy credentials; any other endpoint, and AWS itself, takes
/// its region from the SDK's provider chain (`AWS_REGION`, the profile,
/// instance metadata): see [`require_region`].
pub async fn sdk_config(endpoint: Option<&str>, max_attempts: u32) -> aws_config::SdkConfig {
    let mut loader = shared::store::sdk_loader(max_attempts);
    if let Some(url) = endpoint {
        loader = loader.endpoint_url(url);
        if is_loopback(url) {
            loader = loader.credentials_provider(local_credentials("local"));
        }
    }
    let region_set = ["AWS_REGION", "AWS_DEFAULT_REGION"]
        .iter()
        .any(|k| std::env::var_os(k).is_some());
    if let Some(region) = default_region(endpoint).filter(|_| !region_set) {
        loader = loader.region(region);
    }
    loader.load().await
}

/// [`sdk_config`] for the local runtime's own clients (provisioning, stream
/// reads, the processors): against a loopback endpoint they sign as
/// [`PROCESSORS_ACCESS_KEY`], so the embedded engine's fair front queues
/// them as a caller of their own beside the application's requests (a
/// writer's backlog does not take their turns). Elsewhere, exactly
/// [`sdk_config`].
pub async fn runtime_sdk_config(
    endpoint: Option<&str>,
    max_attempts: u32,
) -> aws_config::SdkConfig {
    let sdk = sdk_config(endpoint, max_attempts).await;
    match endpoint {
        Some(url) if is_loopback(url) => sdk
            .into_builder()
            .credentials_provider(local_credentials(PROCESSORS_ACCESS_KEY))
            .build(),
        _ => sdk,
    }
}

/// The access key id processor `name` (`derive`, `history`, a queue's
/// consumer) signs its own calls with against a loopback endpoint:
/// `jobstream-processors-<name>`. In AWS every function has a role of its
/// own, and one function's calls never wait behind another's; at the
/// embedded engine's fair front each processor is so a caller of its own,
/// so the derive's one request at a time takes turns with the queue
/// consumers' (five invocations at once) instead of queueing behind them.
pub fn processor_access_key(name: &str) -> String {
    format!("{PROCESSORS_ACCESS_KEY}-{name}")
}

/// The credentials processor `name` signs with against `endpoint`
/// ([`processor_access_key`]) when it is a loopback one; elsewhere `None`
/// (the SDK's own chain, as [`sdk_config`]).
pub fn processor_credentials(
    endpoint: Option<&str>,
    name: &str,
) -> Option<aws_sdk_dynamodb::config::SharedCredentialsProvider> {
    endpoint
        .filter(|url| is_loopback(url))
        .map(|_| local_credentials(processor_access_key(name)))
}

/// The region an endpoint gets when none is configured: `us-east-1` for a
/// loopback endpoint (the embedded engine signs nothing it checks), none
/// for anything else (requests signed for a guessed region fail, or reach
/// the wrong one).
pub fn default_region(endpoint: Option<&str>) -> Option<aws_config::Region> {
    endpoint
        .filter(|url| is_loopback(url))
        .map(|_| aws_config::Region::new("us-east-1"))
}

/// `cfg`'s region, or a startup error saying how to set one (`what`: the
/// service, e.g. `DynamoDB at https://...`).
pub fn require_region(cfg: &aws_config::SdkConfig, what: &str) -> anyhow::Result<()> {
    match cfg.region() {
        Some(_) => Ok(()),
        None => anyhow::bail!(
            "no AWS region for {what}: set AWS_REGION (or a profile's region, or run where \
             instance metadata gives one); only the embedded engine on a loopback endpoint \
             gets a default region"
        ),
    }
}

/// The DynamoDB endpoint a command connects to, however it is named:
/// `--endpoint` / `JOBSTREAM_ENDPOINT` (`flag`), else the SDK's own
/// variables `AWS_ENDPOINT_URL_DYNAMODB`, then `AWS_ENDPOINT_URL` (unless
/// `AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true`), read as the SDK reads
/// them. Resolved once, so that a loopback endpoint gets the same region
/// and credentials whichever way it was given.
pub fn dynamodb_endpoint(flag: Option<String>) -> Option<String> {
    configured_endpoint(flag, "AWS_ENDPOINT_URL_DYNAMODB", |k| std::env::var(k).ok())
}

/// [`dynamodb_endpoint`] for SQS: `--sqs-endpoint` /
/// `AWS_ENDPOINT_URL_SQS`, else `AWS_ENDPOINT_URL`.
pub fn sqs_endpoint(flag: Option<String>) -> Option<String> {
    configured_endpoint(flag, "AWS_ENDPOINT_URL_SQS", |k| std::env::var(k).ok())
}

fn configured_endpoint(
    flag: Option<String>,
    service_var: &str,
    env: impl Fn(&str) -> Option<String>,
) -> Option<String> {
    let set = |k: &str| env(k).filter(|v| !v.trim().is_empty());
    let ignored = set("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    flag.filter(|f| !f.trim().is_empty()).or_else(|| {
        (!ignored)
            .then(|| set(service_var).or_else(|| set("AWS_ENDPOINT_URL")))
            .flatten()
    })
}

/// `cfg`'s credentials, or a one-line startup error saying how to give
/// some (`what`: the service). The SDK's provider chain logs each source
/// it tried (environment, profile, web identity, ECS, instance metadata)
/// at debug level only: `JOBSTREAM_LOG=aws_config=debug` shows them.
pub async fn require_credentials(cfg: &aws_config::SdkConfig, what: &str) -> anyhow::Result<()> {
    use aws_sdk_dynamodb::config::ProvideCredentials as _;
    let found = match cfg.credentials_provider() {
        Some(p) => p.provide_credentials().await.is_ok(),
        None => false,
    };
    if found {
        return Ok(());
    }
    anyhow::bail!(
        "no AWS credentials found for {what}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, \
         AWS_PROFILE (a profile in ~/.aws), or run where a role provides them (ECS task role, \
         EKS pod identity or IRSA, EC2 instance profile); a loopback endpoint (jobstream serve, \
         DynamoDB Local, moto on 127.0.0.1) needs none"
    )
}

/// Fails at once, saying so, when `endpoint` (given as `flag`) names a
/// host that does not resolve: a misspelt endpoint is a configuration
/// error, not an outage to wait out (the SDK retries a failed resolution
/// as it retries a refused connection, for a whole call budget). A
/// malformed endpoint is left to the SDK's own error.
pub async fn require_resolvable(endpoint: Option<&str>, flag: &str) -> anyhow::Result<()> {
    let Some(url) = endpoint else {
        return Ok(());
    };
    let Ok(uri) = url.parse::<axum::http::Uri>() else {
        return Ok(());
    };
    let Some(host) = uri.host() else {
        return Ok(());
    };
    let port = uri
        .port_u16()
        .unwrap_or(if uri.scheme_str() == Some("https") {
            443
        } else {
            80
        });
    let host = host.to_string();
    match tokio::net::lookup_host(format!("{host}:{port}")).await {
        Ok(_) => Ok(()),
        Err(e) => anyhow::bail!(
            "the endpoint {url} ({flag}): its host {host} does not resolve ({e}); check the \
             name, or leave the endpoint out to reach the region's own"
        ),
    }
}

fn is_loopback(url: &str) -> bool {
    let host = url.split("://").nth(1).unwrap_or(url);
    host.starts_with("127.") || host.starts_with("localhost") || host.starts_with("[::1]")
}

/// Dummy credentials under `access_key` (the front's caller) for a
/// loopback endpoint.
pub(crate) fn local_credentials(
    access_key: impl Into<String>,
) -> aws_sdk_dynamodb::config::SharedCredentialsProvider {
    aws_sdk_dynamodb::config::SharedCredentialsProvider::new(
        aws_sdk_dynamodb::config::Credentials::new(
            access_key,
            "local",
            None,
            None,
            "jobstream-local",
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_is_the_flag_else_the_sdks_variables_as_the_sdk_reads_them() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                vars.iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        const LOCAL: &str = "http://127.0.0.1:8000";
        const BOTH: &[(&str, &str)] = &[
            ("AWS_ENDPOINT_URL", LOCAL),
            ("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:2"),
        ];
        const IGNORED: &[(&str, &str)] = &[
            ("AWS_ENDPOINT_URL", LOCAL),
            ("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true"),
        ];
        let (local, both) = (LOCAL, BOTH);
        let flag = Some("http://127.0.0.1:1".to_string());
        assert_eq!(
            configured_endpoint(flag.clone(), "AWS_ENDPOINT_URL_DYNAMODB", env(both)),
            flag,
            "the flag first"
        );
        assert_eq!(
            configured_endpoint(None, "AWS_ENDPOINT_URL_DYNAMODB", env(both)).as_deref(),
            Some("http://127.0.0.1:2"),
            "the service's variable before the global one"
        );
        assert_eq!(
            configured_endpoint(None, "AWS_ENDPOINT_URL_SQS", env(both)).as_deref(),
            Some(local)
        );
        assert_eq!(
            configured_endpoint(None, "AWS_ENDPOINT_URL_SQS", env(IGNORED)),
            None,
            "ignored as the SDK ignores them"
        );
        assert_eq!(
            configured_endpoint(None, "AWS_ENDPOINT_URL_SQS", env(&[])),
            None
        );
    }

    #[test]
    fn only_a_loopback_endpoint_gets_a_default_region() {
        for local in [
            "http://127.0.0.1:8000",
            "http://localhost:4566",
            "http://[::1]:9",
        ] {
            assert_eq!(
                default_region(Some(local)).as_ref().map(|r| r.as_ref()),
                Some("us-east-1"),
                "{local}"
            );
        }
        for remote in [
            "https://sqs.eu-west-1.amazonaws.com",
            "https://dynamodb.eu-west-1.amazonaws.com",
            "http://dynamodb-local.internal:8000",
        ] {
            assert!(default_region(Some(remote)).is_none(), "{remote}");
        }
        assert!(
            default_region(None).is_none(),
            "AWS itself: the provider chain"
        );
    }
}
