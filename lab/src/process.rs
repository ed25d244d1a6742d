//! Daemons running inside a namespace, stopped (and reaped) by a guard.
//!
//! A daemon is reaped only by `stop`: until then its pid (and so its
//! process group id) stays taken by it, alive or a zombie, and cannot be
//! handed to another process. Every signal is sent before the reaping,
//! none after.
use crate::netns::Netns;
use crate::tempdir::TempDir;
use anyhow::{Context, Result};
use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
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
    /// The child, and whether it has been reaped (after which its pid is
    /// no longer its own and nothing is signalled).
    child: Mutex<(Child, bool)>,
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
            child: Mutex::new((child, false)),
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

    /// Sends `signal` to the daemon (not to its group); refused once the
    /// daemon has been reaped.
    pub fn kill(&self, signal: Signal) -> Result<()> {
        let guard = self.child.lock().unwrap_or_else(|e| e.into_inner());
        if guard.1 {
            anyhow::bail!("kill {signal} {}: it has exited and been reaped", self.name);
        }
        kill(Pid::from_raw(self.pid as i32), signal)
            .with_context(|| format!("kill {signal} {}", self.name))
    }

    /// True until the process has exited. Does not reap it: its pid stays
    /// its own until `stop`.
    pub fn is_running(&self) -> bool {
        let guard = self.child.lock().unwrap_or_else(|e| e.into_inner());
        !guard.1 && !self.exited()
    }

    /// Whether the (unreaped) child has exited, leaving it a zombie.
    fn exited(&self) -> bool {
        let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
        match waitid(Id::Pid(Pid::from_raw(self.pid as i32)), flags) {
            Ok(WaitStatus::StillAlive) => false,
            Ok(_) => true,
            // ECHILD: reaped by someone else; nothing of it is ours now.
            Err(_) => true,
        }
    }

    /// SIGTERM, up to 3 s for the process to exit, then SIGKILL to its whole
    /// process group, all while the daemon is not yet reaped (alive or a
    /// zombie, its pid is the group's id and no one else's); then reaps it.
    /// Idempotent: once reaped, nothing is signalled again.
    pub fn stop(&self) {
        let mut guard = self.child.lock().unwrap_or_else(|e| e.into_inner());
        let (child, reaped) = &mut *guard;
        if *reaped {
            return;
        }
        let pid = Pid::from_raw(self.pid as i32);
        let gone = waitid(
            Id::Pid(pid),
            WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT,
        );
        if gone.is_err() {
            // Reaped by someone else: the pid may be another's already.
            *reaped = true;
            let _ = child.try_wait();
            return;
        }
        if !self.exited() {
            let _ = kill(pid, Signal::SIGTERM);
            let deadline = Instant::now() + STOP_GRACE;
            while !self.exited() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        // Leftover children in the group, and the daemon if it ignored
        // TERM. The leader is unreaped here, so the group is its own.
        let _ = killpg(pid, Signal::SIGKILL);
        let _ = child.wait();
        *reaped = true;
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
