//! What the fault tests share: traffic between pods (a TCP sink, a
//! stream into it, a run of pings), daemons restarted in turn while it
//! runs, the output of a probe that ran through it, and a check that a
//! long-lived connection is still up.

use std::io::Read;
use std::process::Child;
use std::time::Duration;

use tartan_lab::cluster::client::LabCli;

/// `tartan-lab exec POD -- COMMAND…` started, its output piped.
#[track_caller]
pub fn spawn_in(lab: &LabCli, pod: &str, command: &[&str]) -> Child {
    let mut args = vec!["exec", pod, "--"];
    args.extend_from_slice(command);
    lab.spawn(&args).expect("tartan-lab exec")
}

/// A TCP server in `pod` on `port` that reads everything and keeps nothing.
#[track_caller]
pub fn tcp_sink(lab: &LabCli, pod: &str, port: u16) -> Child {
    let listen = format!("TCP-LISTEN:{port},reuseaddr");
    spawn_in(lab, pod, &["socat", "-u", &listen, "OPEN:/dev/null"])
}

/// A TCP connection from `pod` to `to:port` sending zeros until killed.
#[track_caller]
pub fn tcp_stream(lab: &LabCli, pod: &str, to: &str, port: u16) -> Child {
    let target = format!("TCP:{to}:{port}");
    spawn_in(lab, pod, &["socat", "-u", "/dev/zero", &target])
}

/// `count` pings from `pod` to `to`, one every `interval` seconds, each
/// waited for 1 s; its summary is in the output (`stdout_of`).
#[track_caller]
pub fn pings(lab: &LabCli, pod: &str, to: &str, interval: &str, count: u32) -> Child {
    let count = count.to_string();
    spawn_in(
        lab,
        pod,
        &["ping", "-q", "-i", interval, "-c", &count, "-W", "1", to],
    )
}

/// `tartan-lab restart <args>` for each step, each after waiting its
/// milliseconds.
#[track_caller]
pub fn restart_in_turn(lab: &LabCli, steps: &[(u64, &[&str])]) {
    for (wait_ms, args) in steps {
        std::thread::sleep(Duration::from_millis(*wait_ms));
        let mut call = vec!["restart"];
        call.extend_from_slice(args);
        lab.ok(&call);
    }
}

/// What a finished probe (a `tartan-lab exec` with piped output) printed.
pub fn stdout_of(probe: Child) -> String {
    let out = probe.wait_with_output().expect("the probe's output");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Fails with `what` and the process's stderr when `stream` has exited;
/// kills it otherwise.
#[track_caller]
pub fn assert_running_then_stop(mut stream: Child, what: &str) {
    if stream.try_wait().expect("the stream's state").is_some() {
        let mut err = String::new();
        if let Some(mut e) = stream.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        panic!("{what}: {err}");
    }
    let _ = stream.kill();
    let _ = stream.wait();
}

/// Kills and reaps every process of `children`.
pub fn stop_all(children: &mut [Child]) {
    for c in children {
        let _ = c.kill();
        let _ = c.wait();
    }
}
