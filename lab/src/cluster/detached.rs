//! Processes that outlive `tartan-lab up`: own process group, output to a
//! log file, found again by pid.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

use super::state::Proc;

pub fn spawn(cmd: Command, log: &Path) -> Result<Proc> {
    let _ = std::fs::remove_file(log);
    spawn_appending(cmd, log)
}

/// [`spawn`], appending to the log rather than starting it afresh.
pub fn spawn_appending(mut cmd: Command, log: &Path) -> Result<Proc> {
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("open {}", log.display()))?;
    let err = out.try_clone()?;
    use std::os::unix::process::CommandExt;
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .process_group(0)
        .spawn()
        .with_context(|| format!("start {cmd:?}"))?;
    Ok(Proc {
        pid: child.id(),
        log: log.to_path_buf(),
    })
}

pub fn alive(p: &Proc) -> bool {
    // A zombie (exited, not yet reaped by us) counts as gone.
    std::fs::read_to_string(format!("/proc/{}/stat", p.pid))
        .map(|s| !s.split(") ").nth(1).is_some_and(|r| r.starts_with('Z')))
        .unwrap_or(false)
}

/// SIGTERM to the group, up to `grace` to go, then SIGKILL.
pub fn stop(p: &Proc, grace: Duration) {
    let pid = Pid::from_raw(p.pid as i32);
    let _ = killpg(pid, Signal::SIGTERM);
    let _ = kill(pid, Signal::SIGTERM);
    let end = Instant::now() + grace;
    while alive(p) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = killpg(pid, Signal::SIGKILL);
    let _ = kill(pid, Signal::SIGKILL);
}
