//! Plugins must keep stdout for their result: logs go to a file (default
//! `/var/log/tartan/cni.log`), or to stderr when the file cannot be opened.

use std::fs::OpenOptions;
use std::path::Path;
use std::sync::Mutex;

use tracing_subscriber::EnvFilter;

pub const DEFAULT_LOG_FILE: &str = "/var/log/tartan/cni.log";

/// The log file and level named in the configuration on stdin, if any.
fn from_stdin(stdin: &[u8]) -> (String, String) {
    let v: serde_json::Value = serde_json::from_slice(stdin).unwrap_or_default();
    let s = |k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_string);
    (
        s("logFile").unwrap_or_else(|| DEFAULT_LOG_FILE.to_string()),
        s("logLevel").unwrap_or_else(|| "info".to_string()),
    )
}

/// Start logging for one plugin call; `binary` names it in each line.
pub fn init(binary: &str, stdin: &[u8]) {
    let (file, level) = from_stdin(stdin);
    let filter = EnvFilter::try_new(format!(
        "{level},rtnetlink=warn,netlink_proto=warn,h2=warn,tower=warn,hyper=warn"
    ))
    .unwrap_or_else(|_| EnvFilter::new("info"));
    let path = Path::new(&file);
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_target(false);
    let pid = std::process::id();
    match OpenOptions::new().create(true).append(true).open(path) {
        Ok(f) => {
            let _ = builder.with_writer(Mutex::new(f)).try_init();
        }
        Err(_) => {
            let _ = builder.with_writer(std::io::stderr).try_init();
        }
    }
    tracing::debug!(binary, pid, "start");
}
