//! Processes that outlive `tartan-lab up`: own process group, output to a
//! log file, found again by pid and start time.
//!
//! A pid alone does not name a process for long: once the process is gone
//! the kernel hands the number to the next one. So a [`Proc`] also records
//! the process's start time (field 22 of `/proc/PID/stat`), and every signal
//! goes through a pidfd whose process is first shown to have that start
//! time. A process that cannot be shown to be the lab's is never signalled.

use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use nix::sys::signal::Signal;

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
    // The child is ours and unreaped (std never reaps a dropped Child), so
    // its pid cannot have been reused yet: its start time names it.
    let start = stat(child.id()).map(|s| s.start);
    Ok(Proc {
        pid: child.id(),
        start,
        log: log.to_path_buf(),
    })
}

/// What the lab reads of `/proc/PID/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// One letter: R, S, D, Z, ...
    pub state: char,
    /// The process group.
    pub pgrp: u32,
    /// Clock ticks after boot at which the process started.
    pub start: u64,
}

/// Parses `/proc/PID/stat`'s text (the command name, in parentheses, may
/// hold spaces and parentheses itself: fields are counted after the last
/// ')').
pub fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // f[0] is field 3 (state); field N is f[N - 3].
    Some(Stat {
        state: f.first()?.chars().next()?,
        pgrp: f.get(2)?.parse().ok()?,
        start: f.get(19)?.parse().ok()?,
    })
}

/// The process `pid` as `/proc` shows it now, if there is one.
pub fn stat(pid: u32) -> Option<Stat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// True while the process `p` names runs (a zombie counts as gone; so does
/// another process that was given the same pid, or a record without a
/// start time, which cannot be told from one).
pub fn alive(p: &Proc) -> bool {
    match (p.start, stat(p.pid)) {
        (Some(start), Some(s)) => s.start == start && s.state != 'Z',
        _ => false,
    }
}

fn pidfd_open(pid: u32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0u32) };
    if fd < 0 {
        return None;
    }
    // SAFETY: the kernel just returned this descriptor to us alone.
    Some(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

fn pidfd_signal(fd: &OwnedFd, signal: Signal) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: a valid pidfd, a signal number, no siginfo, no flags.
    let r = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            signal as libc::c_int,
            std::ptr::null::<libc::siginfo_t>(),
            0u32,
        )
    };
    r == 0
}

/// Sends `signal` to process `pid` only if it is the process that started
/// at `start` (and, with `pgrp`, is in that process group). The pidfd is
/// opened first and the start time read after, so the check and the signal
/// are about one process even if the pid is reused in between. Returns
/// whether the signal was sent.
pub fn signal_verified(pid: u32, start: u64, pgrp: Option<u32>, signal: Signal) -> bool {
    let Some(fd) = pidfd_open(pid) else {
        return false;
    };
    match stat(pid) {
        Some(s) if s.start == start && pgrp.is_none_or(|g| s.pgrp == g) => {
            pidfd_signal(&fd, signal)
        }
        _ => false,
    }
}

/// The other members of process group `pgrp` (pid and start time).
fn group_members(pgrp: u32) -> Vec<(u32, u64)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|&pid| pid != pgrp)
        .filter_map(|pid| stat(pid).map(|s| (pid, s)))
        .filter(|(_, s)| s.pgrp == pgrp)
        .map(|(pid, s)| (pid, s.start))
        .collect()
}

/// SIGTERM, up to `grace` to go, then SIGKILL; each only to the process
/// `p` names. The rest of its process group (children it left) is killed
/// only while the leader is shown to be the lab's and alive, so that the
/// group id cannot belong to anyone else; a group whose leader is gone is
/// left alone. A record without a start time is not acted on.
pub fn stop(p: &Proc, grace: Duration) {
    let Some(start) = p.start else {
        return;
    };
    if !signal_verified(p.pid, start, None, Signal::SIGTERM) {
        return;
    }
    let end = Instant::now() + grace;
    while alive(p) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    if alive(p) {
        for (pid, member_start) in group_members(p.pid) {
            // Still the leader's group: checked again per member.
            if alive(p) {
                signal_verified(pid, member_start, Some(p.pid), Signal::SIGKILL);
            }
        }
        signal_verified(p.pid, start, None, Signal::SIGKILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_after_the_last_parenthesis() {
        let text =
            "4242 (a) b (c)) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10";
        let s = parse_stat(text).unwrap();
        assert_eq!(s.state, 'S');
        assert_eq!(s.pgrp, 4242);
        assert_eq!(s.start, 987654);
        assert!(parse_stat("12 (x) S 1").is_none());
        assert!(parse_stat("garbage").is_none());
    }

    #[test]
    fn own_process_is_found() {
        let me = std::process::id();
        let s = stat(me).unwrap();
        let p = Proc {
            pid: me,
            start: Some(s.start),
            log: Default::default(),
        };
        assert!(alive(&p));
        let other = Proc {
            start: Some(s.start + 1),
            ..p.clone()
        };
        assert!(!alive(&other));
        let unknown = Proc { start: None, ..p };
        assert!(!alive(&unknown));
    }
}
