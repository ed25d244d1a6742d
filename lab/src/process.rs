//! Daemons running inside a namespace, stopped (and reaped) by a guard.
use crate::netns::Netns;
use crate::tempdir::TempDir;
use anyhow::{Context, Result};
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long `stop` waits after SIGTERM before it sends SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// A spawned program whose stdout and stderr go to a log file in its own
/// temporary directory. Dropping it stops the program, reaps it and removes
/// the directory. When a thread panics, the drop prints the log's tail.
#[derive(Debug)]
pub struct Daemon {
    name: String,
    pid: u32,
    child: Mutex<Child>,
    log: PathBuf,
    dir: TempDir,
}

impl Daemon {
    /// Starts `program ARGS…` inside `ns`.
    pub fn spawn(ns: &Netns, name: &str, program: &str, args: &[&str]) -> Result<Daemon> {
        let mut cmd = ns.command(program);
        cmd.args(args);
        Daemon::start(name, cmd)
    }

    /// Starts a prepared command (for example `ns.command(..)` with extra
    /// environment). Its stdin is null; stdout and stderr go to the log.
    pub fn start(name: &str, mut cmd: Command) -> Result<Daemon> {
        let dir = TempDir::new(&format!("{name}-log"))?;
        let log = dir.join(format!("{name}.log").as_str());
        let out = std::fs::File::create(&log).context("create log file")?;
        let err = out.try_clone()?;
        // Own process group: `stop` can then also reach the daemon's
        // children (exabgp's helper processes, for instance).
        cmd.stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .process_group(0);
        let child = cmd
            .spawn()
            .with_context(|| format!("spawn {name}: {cmd:?}"))?;
        Ok(Daemon {
            name: name.to_string(),
            pid: child.id(),
            child: Mutex::new(child),
            log,
            dir,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The log so far (stdout and stderr interleaved).
    pub fn log(&self) -> String {
        std::fs::read(&self.log)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The daemon's own temporary directory (holds the log).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Sends `signal` to the daemon (not to its group).
    pub fn kill(&self, signal: Signal) -> Result<()> {
        kill(Pid::from_raw(self.pid as i32), signal)
            .with_context(|| format!("kill {signal} {}", self.name))
    }

    /// True until the process has exited (reaps it when it has).
    pub fn is_running(&self) -> bool {
        let mut child = self.child.lock().unwrap_or_else(|e| e.into_inner());
        matches!(child.try_wait(), Ok(None))
    }

    /// SIGTERM, up to 3 s for the process to exit, then SIGKILL to its whole
    /// process group; always reaps it. Idempotent.
    pub fn stop(&self) {
        let mut child = self.child.lock().unwrap_or_else(|e| e.into_inner());
        if matches!(child.try_wait(), Ok(None)) {
            let _ = kill(Pid::from_raw(self.pid as i32), Signal::SIGTERM);
            let deadline = Instant::now() + STOP_GRACE;
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        // Leftover children in the group, and the daemon if it ignored TERM.
        let _ = killpg(Pid::from_raw(self.pid as i32), Signal::SIGKILL);
        let _ = child.wait();
    }

    /// The last `lines` lines of the log.
    pub fn log_tail(&self, lines: usize) -> String {
        let log = self.log();
        let all: Vec<&str> = log.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
        if std::thread::panicking() {
            eprintln!(
                "---- log of {} (pid {}), last 40 lines ----\n{}\n---- end of {} ----",
                self.name,
                self.pid,
                self.log_tail(40),
                self.name
            );
        }
    }
}
