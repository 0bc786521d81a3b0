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
/// and credentials whichever way it was given. A URL that can never work
/// ([`endpoint_url_problem`]) is an error naming where it was given, before
/// any call.
pub fn dynamodb_endpoint(flag: Option<String>) -> anyhow::Result<Option<String>> {
    checked_endpoint(configured_endpoint(
        flag,
        "--endpoint",
        "AWS_ENDPOINT_URL_DYNAMODB",
        |k| std::env::var(k).ok(),
    ))
}

/// [`dynamodb_endpoint`] for SQS: `--sqs-endpoint` /
/// `AWS_ENDPOINT_URL_SQS`, else `AWS_ENDPOINT_URL`.
pub fn sqs_endpoint(flag: Option<String>) -> anyhow::Result<Option<String>> {
    checked_endpoint(configured_endpoint(
        flag,
        "--sqs-endpoint",
        "AWS_ENDPOINT_URL_SQS",
        |k| std::env::var(k).ok(),
    ))
}

fn checked_endpoint(given: Option<(String, &str)>) -> anyhow::Result<Option<String>> {
    match given {
        None => Ok(None),
        Some((url, source)) => match endpoint_url_problem(&url) {
            None => Ok(Some(url)),
            Some(why) => anyhow::bail!("{source} {url}: {why}"),
        },
    }
}

/// The endpoint and where it was given: `flag_name` or a variable's name.
fn configured_endpoint<'a>(
    flag: Option<String>,
    flag_name: &'a str,
    service_var: &'a str,
    env: impl Fn(&str) -> Option<String>,
) -> Option<(String, &'a str)> {
    let set = |k: &'a str| env(k).filter(|v| !v.trim().is_empty()).map(|v| (v, k));
    let ignored = set("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")
        .is_some_and(|(v, _)| v.trim().eq_ignore_ascii_case("true"));
    match flag.filter(|f| !f.trim().is_empty()) {
        Some(f) => Some((f, flag_name)),
        None => (!ignored)
            .then(|| set(service_var).or_else(|| set("AWS_ENDPOINT_URL")))
            .flatten(),
    }
}

/// Why `url` can never work as an endpoint or a queue URL, if it cannot:
/// no scheme (`127.0.0.1:8000`), a scheme other than `http`/`https`
/// (`htp://`), no host, or a port that is not a number up to 65535. Such a
/// URL was retried as an outage for a whole call budget, or failed with
/// the SDK's dump of the request; it is refused before any call instead.
pub fn endpoint_url_problem(url: &str) -> Option<String> {
    const SCHEMES: &str = "http:// or https://";
    let Some((scheme, _)) = url.split_once("://") else {
        return Some(format!("no scheme ({SCHEMES})"));
    };
    if !(scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https")) {
        return Some(format!("scheme {scheme} is not http or https ({SCHEMES})"));
    }
    match url::Url::parse(url) {
        Ok(u) if u.host_str().is_some_and(|h| !h.is_empty()) => None,
        Ok(_) | Err(url::ParseError::EmptyHost) => Some("no host".to_string()),
        Err(url::ParseError::InvalidPort) => {
            Some("the port is not a number from 0 to 65535".to_string())
        }
        Err(e) => Some(format!("not a URL: {e}")),
    }
}

/// The parser of a flag taking an endpoint or a queue URL: the value as
/// given, or why it can never work ([`endpoint_url_problem`]), naming
/// `var`, the variable the flag reads too (clap names the flag and the
/// value).
pub fn url_arg(var: &'static str) -> impl Fn(&str) -> Result<String, String> + Clone {
    move |s: &str| match endpoint_url_problem(s) {
        None => Ok(s.to_string()),
        Some(why) => Err(format!("{why} (from the flag or {var})")),
    }
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

/// Fails at once, saying so, when no endpoint is given for `service`
/// (`sqs`, `dynamodb`) and its host in the region of `config`
/// (`sqs.us-east-1.amazonaws.com`) does not resolve: a sandbox without
/// AWS's names, a misspelt region, or a local engine whose queues were
/// meant to be at `flag` (ops14 #2: 40 s of retries, then an error). An
/// endpoint set through the SDK's own variables is the SDK's to resolve.
pub async fn require_regional_host(
    config: &aws_config::SdkConfig,
    service: &str,
    flag: &str,
) -> anyhow::Result<()> {
    if config.endpoint_url().is_some() {
        return Ok(());
    }
    let Some(region) = config.region() else {
        return Ok(());
    };
    let region = region.as_ref();
    let domain = if region.starts_with("cn-") {
        "amazonaws.com.cn"
    } else {
        "amazonaws.com"
    };
    let host = format!("{service}.{region}.{domain}");
    match tokio::net::lookup_host(format!("{host}:443")).await {
        Ok(_) => Ok(()),
        Err(e) => anyhow::bail!(
            "the region's own endpoint {host} does not resolve ({e}), and no {flag} was \
             given: give {flag} (the local SQS, moto, `jobstream serve`'s) or run where \
             AWS's endpoints resolve"
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
        let endpoint = |flag: Option<String>, var, env| {
            configured_endpoint(flag, "--flag", var, env).map(|(url, from)| format!("{from} {url}"))
        };
        assert_eq!(
            endpoint(flag, "AWS_ENDPOINT_URL_DYNAMODB", env(both)).as_deref(),
            Some("--flag http://127.0.0.1:1"),
            "the flag first"
        );
        assert_eq!(
            endpoint(None, "AWS_ENDPOINT_URL_DYNAMODB", env(both)).as_deref(),
            Some("AWS_ENDPOINT_URL_DYNAMODB http://127.0.0.1:2"),
            "the service's variable before the global one"
        );
        assert_eq!(
            endpoint(None, "AWS_ENDPOINT_URL_SQS", env(both)),
            Some(format!("AWS_ENDPOINT_URL {local}"))
        );
        assert_eq!(
            endpoint(None, "AWS_ENDPOINT_URL_SQS", env(IGNORED)),
            None,
            "ignored as the SDK ignores them"
        );
        assert_eq!(endpoint(None, "AWS_ENDPOINT_URL_SQS", env(&[])), None);
    }

    #[test]
    fn an_endpoint_url_that_can_never_work_says_why() {
        for good in [
            "http://127.0.0.1:8000",
            "https://dynamodb.eu-west-1.amazonaws.com",
            "HTTP://localhost:4566/",
            "http://[::1]:9",
            "https://sqs.eu-west-1.amazonaws.com/123456789012/q",
        ] {
            assert_eq!(endpoint_url_problem(good), None, "{good}");
        }
        for (bad, why) in [
            ("127.0.0.1:8300", "no scheme (http:// or https://)"),
            ("localhost:8000", "no scheme"),
            ("http//127.0.0.1:8000", "no scheme"),
            ("htp://127.0.0.1:8300", "scheme htp is not http or https"),
            ("ftp://127.0.0.1:8300", "scheme ftp"),
            ("http://127.0.0.1:notaport", "the port is not a number"),
            ("http://127.0.0.1:99999", "the port is not a number"),
            ("http://127.0.0.1:8000:1", "the port is not a number"),
            ("http://:8000", "no host"),
            ("https://", "no host"),
        ] {
            let said = endpoint_url_problem(bad).unwrap_or_default();
            assert!(said.contains(why), "{bad}: {said:?}");
        }
        let from_env = checked_endpoint(Some(("127.0.0.1:1".into(), "AWS_ENDPOINT_URL")));
        assert_eq!(
            from_env.unwrap_err().to_string(),
            "AWS_ENDPOINT_URL 127.0.0.1:1: no scheme (http:// or https://)"
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
