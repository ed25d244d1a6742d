//! Writing results to stdout.
use anyhow::Context;
use std::io::Write;

/// Writes `text` to stdout. A closed pipe (`| head`) is not an error.
pub fn print(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("writing to stdout"),
    }
}

/// The JSON as received, pretty-printed, so scripts get the API's shape.
pub fn pretty_json(body: &[u8]) -> anyhow::Result<String> {
    let value: serde_json::Value =
        serde_json::from_slice(body).context("tartan-bgpd answered with invalid JSON")?;
    let mut text = serde_json::to_string_pretty(&value).context("formatting JSON")?;
    text.push('\n');
    Ok(text)
}

/// Parses an API answer into its type, with a hint on version skew.
pub fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> anyhow::Result<T> {
    serde_json::from_slice(body).context(
        "cannot read tartan-bgpd's answer (is tartanctl the same version as tartan-bgpd? `-o json` shows it raw)",
    )
}
