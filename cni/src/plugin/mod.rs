//! The plugins' commands: `tartan` (wiring and IPAM) and `tartan-ipam`
//! (IPAM alone, for other main plugins). [`run`] takes the environment and
//! stdin and returns what to print and the exit code; the binaries only
//! read, call and print.

mod add;
mod check;
mod context;
mod del;
mod gc;
pub mod lock;
mod status;
pub mod workload;

use serde_json::json;

use crate::spec::{CniError, Command, Invocation, NetConf, error::code, version};

pub use context::Context;

/// Which binary is running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `tartan`: the main plugin.
    Plugin,
    /// `tartan-ipam`: addresses only.
    Ipam,
}

/// What the binary prints on stdout, and its exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub stdout: String,
    pub exit_code: i32,
}

impl Outcome {
    fn ok(stdout: String) -> Self {
        Outcome {
            stdout,
            exit_code: 0,
        }
    }

    fn error(e: &CniError, cni_version: &str) -> Self {
        Outcome {
            stdout: e.to_json(cni_version),
            exit_code: 1,
        }
    }
}

/// The `cniVersion` stdin gives, when it is JSON with one.
fn stdin_version(stdin: &[u8]) -> Option<String> {
    serde_json::from_slice::<serde_json::Value>(stdin)
        .ok()?
        .get("cniVersion")?
        .as_str()
        .map(str::to_string)
}

/// The `cniVersion` of stdin, if it has one, for error messages written
/// before the configuration is fully read.
fn version_hint(stdin: &[u8]) -> String {
    stdin_version(stdin)
        .filter(|v| version::SUPPORTED.contains(&v.as_str()))
        .unwrap_or_else(|| version::CURRENT.to_string())
}

/// What VERSION answers as its `cniVersion`: the spec's "value of
/// cniVersion specified on input" (supported or not: the runtime compares
/// it with `supportedVersions`), when stdin gives a version; else the
/// newest version spoken.
fn asked_version(stdin: &[u8]) -> String {
    stdin_version(stdin)
        .filter(|v| version::parse(v).is_some())
        .unwrap_or_else(|| version::CURRENT.to_string())
}

/// Carry out one call.
pub async fn run(mode: Mode, env: Vec<(String, String)>, stdin: &[u8]) -> Outcome {
    let hint = version_hint(stdin);
    let inv = match Invocation::from_env(env) {
        Ok(i) => i,
        Err(e) => return Outcome::error(&e, &hint),
    };
    if inv.command == Command::Version {
        return Outcome::ok(
            json!({"cniVersion": asked_version(stdin), "supportedVersions": version::SUPPORTED})
                .to_string(),
        );
    }
    let conf = match NetConf::parse(stdin) {
        Ok(c) => c,
        Err(e) => return Outcome::error(&e, &hint),
    };
    let v = conf.cni_version.clone();
    match dispatch(mode, inv, conf).await {
        Ok(stdout) => Outcome::ok(stdout),
        Err(e) => {
            tracing::error!(code = e.code, error = %e, "call failed");
            Outcome::error(&e, &v)
        }
    }
}

async fn dispatch(mode: Mode, inv: Invocation, conf: NetConf) -> Result<String, CniError> {
    if matches!(inv.command, Command::Status | Command::Gc)
        && !version::at_least(&conf.cni_version, "1.1.0")
    {
        return Err(CniError::new(
            code::INCOMPATIBLE_VERSION,
            format!(
                "{:?} needs cniVersion 1.1.0; the configuration says {}",
                inv.command, conf.cni_version
            ),
        ));
    }
    if inv.command == Command::Check && !version::at_least(&conf.cni_version, "0.4.0") {
        return Err(CniError::new(
            code::INCOMPATIBLE_VERSION,
            "CHECK needs cniVersion 0.4.0 or later",
        ));
    }
    let status = inv.command == Command::Status;
    let cx = match Context::open(inv, conf).await {
        Ok(cx) => cx,
        // STATUS: a datastore that cannot be reached or opened (a missing
        // kubeconfig, say) is the plugin not being available; a
        // configuration that is wrong stays what it is.
        Err(e) if status && ![code::INVALID_CONFIG, code::DECODE].contains(&e.code) => {
            return Err(CniError::new(
                code::NOT_AVAILABLE,
                format!("tartan cannot add pods now: {}", e.msg),
            ));
        }
        Err(e) => return Err(e),
    };
    tracing::info!(command = ?cx.inv.command, container = %cx.inv.container_id, ifname = %cx.inv.ifname, node = %cx.node, "call");
    match (cx.inv.command, mode) {
        (Command::Add, Mode::Plugin) => add::plugin(&cx).await,
        (Command::Add, Mode::Ipam) => add::ipam_only(&cx).await,
        (Command::Del, Mode::Plugin) => del::plugin(&cx).await.map(|()| String::new()),
        (Command::Del, Mode::Ipam) => del::ipam_only(&cx).await.map(|()| String::new()),
        (Command::Check, Mode::Plugin) => check::plugin(&cx).await.map(|()| String::new()),
        (Command::Check, Mode::Ipam) => check::ipam_only(&cx).await.map(|()| String::new()),
        (Command::Status, _) => status::status(&cx).await.map(|()| String::new()),
        (Command::Gc, _) => gc::gc(&cx, mode).await.map(|()| String::new()),
        (Command::Version, _) => Ok(String::new()),
    }
}

/// A binary's whole life: read stdin and the environment, run, print.
pub fn main_with(mode: Mode) -> i32 {
    use std::io::{Read, Write};
    let mut stdin = Vec::new();
    if let Err(e) = std::io::stdin().read_to_end(&mut stdin) {
        let err = CniError::new(code::IO_FAILURE, format!("cannot read stdin: {e}"));
        println!("{}", err.to_json(version::CURRENT));
        return 1;
    }
    let binary = match mode {
        Mode::Plugin => "tartan",
        Mode::Ipam => "tartan-ipam",
    };
    crate::logging::init(binary, &stdin);
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let err = CniError::new(code::IO_FAILURE, format!("cannot start: {e}"));
            println!("{}", err.to_json(version::CURRENT));
            return 1;
        }
    };
    // `vars()` would panic on a variable that is not UTF-8; such a value
    // reaches the checks as text with replacement characters instead.
    let env = std::env::vars_os()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .collect();
    let out = rt.block_on(run(mode, env, &stdin));
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(out.stdout.as_bytes());
    if !out.stdout.is_empty() {
        let _ = o.write_all(b"\n");
    }
    let _ = o.flush();
    out.exit_code
}
