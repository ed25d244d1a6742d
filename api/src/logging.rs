//! How every Tartan daemon logs: one filter variable for all of them
//! (`TARTAN_LOG`, a tracing filter such as `info,tartan_bgpd=debug`), text
//! or JSON lines (`--log-format json`: one object a line, for log
//! collectors) on stderr, and ANSI colour only when stderr is a terminal,
//! so that log files and collectors never see escape codes.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// The environment variable every daemon reads its log filter from.
pub const LOG_ENV: &str = "TARTAN_LOG";

/// The shape of each log line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object a line.
    Json,
}

/// The filter from `TARTAN_LOG`, or `default` when it is unset. A filter
/// that does not parse is reported on stderr and `default` is used: a typo
/// in a log setting must not stop a node's network.
pub fn filter(default: &str) -> EnvFilter {
    match std::env::var(LOG_ENV) {
        Ok(v) if !v.trim().is_empty() => EnvFilter::try_new(&v).unwrap_or_else(|e| {
            eprintln!("{LOG_ENV}={v:?} is not a log filter ({e}); using {default:?}");
            EnvFilter::new(default)
        }),
        _ => EnvFilter::new(default),
    }
}

/// Start logging to stderr for the process; `default` is the filter used
/// when `TARTAN_LOG` is unset (usually `info`).
pub fn init(format: LogFormat, default: &str) {
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter(default))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let done = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
    if let Err(e) = done {
        eprintln!("logging already set up: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    #[test]
    fn formats_parse_by_name_and_refuse_others() {
        assert_eq!(LogFormat::from_str("json", false), Ok(LogFormat::Json));
        assert_eq!(LogFormat::from_str("text", false), Ok(LogFormat::Text));
        assert!(LogFormat::from_str("yaml", false).is_err());
    }
}
