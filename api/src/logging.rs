//! How every Tartan daemon logs: one filter variable for all of them
//! (`TARTAN_LOG`, a tracing filter such as `info,tartan_bgpd=debug`), text
//! or JSON lines (`--log-format json`: one object a line, for log
//! collectors) on stderr, and ANSI colour only when stderr is a terminal,
//! so that log files and collectors never see escape codes.

use std::io::IsTerminal;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry, reload};

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

/// Changes the filter of a process started with [`init_adjustable`], for
/// a level that comes from the datastore (bgpd's BGPConfiguration
/// `logSeverityScreen`). `TARTAN_LOG`, when set, wins over it.
pub struct LevelHandle {
    handle: reload::Handle<EnvFilter, Registry>,
    default: String,
    env_wins: bool,
}

impl LevelHandle {
    /// Log at `level` (a filter such as `debug`) from now on; `None`: the
    /// default again. False when `TARTAN_LOG` is set (nothing changes) or
    /// the level is not a filter.
    pub fn set(&self, level: Option<&str>) -> bool {
        if self.env_wins {
            return false;
        }
        let Ok(f) = EnvFilter::try_new(level.unwrap_or(&self.default)) else {
            return false;
        };
        self.handle.reload(f).is_ok()
    }
}

/// A filter layer whose level a [`LevelHandle`] changes; `env_wins`:
/// `TARTAN_LOG` is set, and the handle changes nothing.
fn adjustable(default: &str, env_wins: bool) -> (reload::Layer<EnvFilter, Registry>, LevelHandle) {
    let (layer, handle) = reload::Layer::new(filter(default));
    let h = LevelHandle {
        handle,
        default: default.to_string(),
        env_wins,
    };
    (layer, h)
}

/// [`init`], with a handle to change the level while running.
pub fn init_adjustable(format: LogFormat, default: &str) -> Option<LevelHandle> {
    let env_wins = std::env::var(LOG_ENV).is_ok_and(|v| !v.trim().is_empty());
    let (filter, handle) = adjustable(default, env_wins);
    let lines = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let lines = match format {
        LogFormat::Text => lines.boxed(),
        LogFormat::Json => lines.json().boxed(),
    };
    match tracing_subscriber::registry()
        .with(filter)
        .with(lines)
        .try_init()
    {
        Ok(()) => Some(handle),
        Err(e) => {
            eprintln!("logging already set up: {e}");
            None
        }
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

    #[test]
    fn the_handle_changes_the_level_unless_the_environment_set_it() {
        use tracing::Level;
        let (layer, h) = adjustable("info", false);
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, || {
            assert!(!tracing::enabled!(Level::DEBUG));
            assert!(h.set(Some("debug")));
            assert!(tracing::enabled!(Level::DEBUG));
            assert!(h.set(Some("error")));
            assert!(!tracing::enabled!(Level::WARN));
            assert!(!h.set(Some("no such=level=filter")), "not a filter");
            assert!(h.set(None), "back to the default");
            assert!(tracing::enabled!(Level::INFO) && !tracing::enabled!(Level::DEBUG));
        });
        let (layer, h) = adjustable("info", true);
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
            assert!(!h.set(Some("debug")));
            assert!(!tracing::enabled!(Level::DEBUG), "TARTAN_LOG wins");
        });
    }
}
