//! HTTP over tartan-bgpd's Unix socket.
use anyhow::{Context, anyhow, bail};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tartan_api::bgp::{DrainRequest, ErrorBody, PATH_DRAIN, PATH_PEERS, PATH_ROUTES, PATH_STATUS};
use tokio::net::UnixStream;

/// A daemon that accepted but does not answer should not hang a script.
const TIMEOUT: Duration = Duration::from_secs(30);

/// A client of one tartan-bgpd control socket. Each call is one connection.
#[derive(Debug, Clone)]
pub struct BgpClient {
    socket: PathBuf,
}

impl BgpClient {
    pub fn new(socket: impl Into<PathBuf>) -> BgpClient {
        BgpClient {
            socket: socket.into(),
        }
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// `GET /v1/peers`, the body as received.
    pub async fn peers(&self) -> anyhow::Result<Bytes> {
        self.get(PATH_PEERS).await
    }

    /// `GET /v1/status`, the body as received.
    pub async fn status(&self) -> anyhow::Result<Bytes> {
        self.get(PATH_STATUS).await
    }

    /// `GET /v1/routes` with optional filters, the body as received.
    pub async fn routes(
        &self,
        family: Option<&str>,
        prefix: Option<&str>,
    ) -> anyhow::Result<Bytes> {
        self.get(&routes_uri(family, prefix)).await
    }

    /// `POST /v1/drain`: start a graceful shutdown that closes the sessions
    /// after `wait_seconds`; the body as received.
    pub async fn drain(&self, wait_seconds: u64) -> anyhow::Result<Bytes> {
        let body = serde_json::to_vec(&DrainRequest { wait_seconds })?;
        self.call(PATH_DRAIN, Some(body)).await
    }

    /// `GET /v1/drain`, the body as received.
    pub async fn drain_status(&self) -> anyhow::Result<Bytes> {
        self.get(PATH_DRAIN).await
    }

    /// One GET; a non-2xx answer becomes an error carrying the server's
    /// message.
    pub async fn get(&self, uri: &str) -> anyhow::Result<Bytes> {
        self.call(uri, None).await
    }

    /// A GET, or a POST of a JSON `body`.
    async fn call(&self, uri: &str, body: Option<Vec<u8>>) -> anyhow::Result<Bytes> {
        let path = self.socket.display();
        match tokio::time::timeout(TIMEOUT, self.exchange(uri, body)).await {
            Ok(result) => result,
            Err(_) => bail!(
                "tartan-bgpd at {path} did not answer within {}s",
                TIMEOUT.as_secs()
            ),
        }
    }

    async fn exchange(&self, uri: &str, body: Option<Vec<u8>>) -> anyhow::Result<Bytes> {
        let stream = UnixStream::connect(&self.socket)
            .await
            .map_err(|e| unreachable_error(&self.socket, &e))?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .context("HTTP handshake with tartan-bgpd failed")?;
        tokio::spawn(conn);
        let builder = match &body {
            Some(_) => {
                hyper::Request::post(uri).header(hyper::header::CONTENT_TYPE, "application/json")
            }
            None => hyper::Request::get(uri),
        };
        let request = builder
            .header(hyper::header::HOST, "localhost")
            .header(hyper::header::ACCEPT, "application/json")
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .context("building the request")?;
        let response = sender
            .send_request(request)
            .await
            .context("request to tartan-bgpd failed")?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .context("reading tartan-bgpd's answer")?
            .to_bytes();
        if status.is_success() {
            return Ok(body);
        }
        let message = match serde_json::from_slice::<ErrorBody>(&body) {
            Ok(e) => e.error,
            Err(_) => String::from_utf8_lossy(&body).chars().take(200).collect(),
        };
        Err(anyhow!("tartan-bgpd answered {status}: {message}"))
    }
}

fn unreachable_error(socket: &Path, e: &std::io::Error) -> anyhow::Error {
    anyhow!(
        "cannot reach tartan-bgpd at {}: {} (is tartan-bgpd running? set --bgp-socket or TARTAN_BGP_SOCKET)",
        socket.display(),
        io_message(e)
    )
}

/// The OS's text for an error, without Rust's " (os error N)" suffix.
fn io_message(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.rfind(" (os error ") {
        Some(i) if text.ends_with(')') => text[..i].to_string(),
        _ => text,
    }
}

pub fn routes_uri(family: Option<&str>, prefix: Option<&str>) -> String {
    let params: Vec<String> = [("family", family), ("prefix", prefix)]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| format!("{k}={}", encode_query_value(v))))
        .collect();
    if params.is_empty() {
        PATH_ROUTES.to_string()
    } else {
        format!("{PATH_ROUTES}?{}", params.join("&"))
    }
}

/// Percent-encodes everything but unreserved characters and the `:` and
/// `/` of addresses (both are legal in a query, RFC 3986 3.4).
fn encode_query_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~:/".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_uri_encodes_filters() {
        assert_eq!(routes_uri(None, None), "/v1/routes");
        assert_eq!(
            routes_uri(Some("ipv6-unicast"), Some("2001:db8::/64")),
            "/v1/routes?family=ipv6-unicast&prefix=2001:db8::/64"
        );
        assert_eq!(
            routes_uri(None, Some("a&b c")),
            "/v1/routes?prefix=a%26b%20c"
        );
    }

    #[test]
    fn io_messages_lose_the_os_error_suffix() {
        let e = std::io::Error::from_raw_os_error(2);
        assert_eq!(io_message(&e), "No such file or directory");
        let e = std::io::Error::other("plain");
        assert_eq!(io_message(&e), "plain");
    }
}
