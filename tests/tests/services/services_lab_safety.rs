//! The lab signals only processes it can prove are its own, and keeps its
//! ranges clear of the host's addresses and routes.

use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use tartan_lab::cluster::state::{self, LabState};
use tartan_lab::cluster::{detached, down, hostnets};
use tartan_lab::netns::{ip, unique_name};
use tartan_lab::process::Daemon;

/// A stand-in: `sleep` in its own process group, killed and reaped when
/// dropped (it is this test's unreaped child, so its pid is still its own).
struct StandIn(Child);

impl StandIn {
    fn new() -> StandIn {
        StandIn(
            Command::new("sleep")
                .arg("300")
                .process_group(0)
                .spawn()
                .expect("spawn sleep"),
        )
    }
    fn pid(&self) -> u32 {
        self.0.id()
    }
    fn start(&self) -> u64 {
        detached::stat(self.pid()).expect("stand-in's stat").start
    }
    fn alive(&mut self) -> bool {
        matches!(self.0.try_wait(), Ok(None))
    }
    fn exited_within(&mut self, t: Duration) -> bool {
        let end = Instant::now() + t;
        while Instant::now() < end {
            if !self.alive() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Removes a state directory written by hand (when `down` did not).
struct StateDir(String);

impl Drop for StateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(state::dir(&self.0));
    }
}

fn proc_json(pid: u32, start: u64) -> serde_json::Value {
    serde_json::json!({"pid": pid, "start": start, "log": "/dev/null"})
}

/// `down` reads pids from state.json: a process there whose start time is
/// not the recorded one (its pid recycled, or the record altered) is left
/// alone; one whose start time matches is stopped.
#[test]
fn down_spares_a_process_that_is_not_the_labs() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let name = format!("sf{}", std::process::id() % 10_000_000);
    let _dir = StateDir(name.clone());
    let mut recycled = StandIn::new();
    let mut altered = StandIn::new();
    let mut ours = StandIn::new();
    let st: LabState = serde_json::from_value(serde_json::json!({
        "name": name,
        "subnet": "10.213.250.0/24",
        "gateway": "10.213.250.1",
        "bridge": state::bridge_name(&name),
        // What a recycled pid looks like: the pid of a live process, the
        // start time of the one the lab started long before.
        "etcd": proc_json(recycled.pid(), 1),
        "datastore": "etcd:http://127.0.0.1:1",
        "nodes": [{
            "name": "node-1",
            "netns": state::node_netns(&name, "node-1"),
            "address": "10.213.250.2",
            "felix": proc_json(altered.pid(), altered.start() + 1),
            "bgpd": proc_json(ours.pid(), ours.start()),
            "bgp_socket": "/nonexistent",
            "conflist": "/nonexistent",
        }],
        "topology": "mesh",
    }))
    .expect("a state");
    st.save().unwrap();
    down::down(&name, &mut |_| {}).expect("down");
    assert!(recycled.alive(), "down signalled a recycled pid (etcd's)");
    assert!(
        altered.alive(),
        "down signalled a pid whose start time differs"
    );
    assert!(
        ours.exited_within(Duration::from_secs(5)),
        "down left the lab's own process running"
    );
    assert!(!state::dir(&name).exists(), "down left the state");
}

/// A daemon that has exited keeps its pid (a zombie) until `stop` reaps it,
/// so no stand-in can be given that pid while the lab still might signal
/// it, and `stop` signals no stand-in.
#[test]
fn daemon_stop_spares_a_process_given_its_pid() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let d = Daemon::start("safety-true", Command::new("true")).expect("spawn true");
    let end = Instant::now() + Duration::from_secs(5);
    while d.is_running() {
        assert!(Instant::now() < end, "`true` did not exit");
        std::thread::sleep(Duration::from_millis(10));
    }
    // Try to have the kernel hand the daemon's pid to a stand-in (the next
    // pid after ns_last_pid), as happens by chance on a busy machine.
    let mut stand_ins = Vec::new();
    let mut recycled = false;
    for _ in 0..50 {
        if std::fs::write("/proc/sys/kernel/ns_last_pid", (d.pid() - 1).to_string()).is_err() {
            break;
        }
        let s = StandIn::new();
        recycled = s.pid() == d.pid();
        stand_ins.push(s);
        if recycled {
            break;
        }
    }
    // Still the daemon's zombie: the pid is not free for anyone else.
    assert!(
        !recycled,
        "the exited daemon's pid was handed to another process before `stop`"
    );
    assert_eq!(detached::stat(d.pid()).map(|s| s.state), Some('Z'));
    d.stop();
    for s in &mut stand_ins {
        assert!(s.alive(), "stop signalled stand-in {}", s.pid());
    }
    // Stopped and reaped: signalling it again is refused.
    assert!(d.kill(nix::sys::signal::Signal::SIGTERM).is_err());
    d.stop();
    for s in &mut stand_ins {
        assert!(s.alive(), "a second stop signalled stand-in {}", s.pid());
    }
}

/// A bridge in the host's namespace with one address, removed on drop.
struct HostAddr(String);

impl HostAddr {
    fn new(addr: &str) -> HostAddr {
        let dev = unique_name("tsb");
        ip(&["link", "add", &dev, "type", "bridge"]).expect("add bridge");
        let h = HostAddr(dev);
        ip(&["addr", "add", addr, "dev", &h.0]).expect("add address");
        h
    }
}

impl Drop for HostAddr {
    fn drop(&mut self) {
        let _ = ip(&["link", "del", &self.0]);
    }
}

/// An explicit range overlapping a host address is refused, naming it.
#[test]
fn up_refuses_ranges_overlapping_the_host() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    // 198.18.0.0/15 (RFC 2544, benchmarking): not a network this host uses.
    let third = std::process::id() % 200 + 20;
    let host = HostAddr::new(&format!("198.18.{third}.1/24"));
    let lab = tartan_tests::lab("sfr");
    for flag in ["--lb-cidr", "--service-cidr"] {
        let range = format!("198.18.{third}.0/24");
        let (code, out, err) = lab.run(&["up", "--nodes", "1", flag, &range]);
        assert_ne!(code, 0, "{flag} {range} accepted:\n{out}{err}");
        let wanted = format!("address 198.18.{third}.1/24 on {}", host.0);
        assert!(
            err.contains(&wanted),
            "{flag}: {err:?} does not name {wanted}"
        );
        assert!(!state::dir(&lab.name).exists(), "a refused up left state");
    }
}

/// With the default LoadBalancer range used by the host, `up` picks
/// another one that overlaps nothing of the host's.
#[test]
fn up_picks_ranges_clear_of_the_host() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let default_lb: ipnet::Ipv4Net = hostnets::LB_CANDIDATES[0].parse().unwrap();
    let nets = hostnets::read().unwrap();
    // Make sure the host uses the default range (some hosts do already).
    let _host = hostnets::overlap(&default_lb, &nets)
        .is_none()
        .then(|| HostAddr::new("192.0.2.77/32"));
    let lab = tartan_tests::services::up("sfp", 1);
    let st = tartan_tests::services::lab_state(&lab);
    let nets = hostnets::read().unwrap();
    let lb: ipnet::Ipv4Net = st.lb_cidr.parse().unwrap();
    let svc: ipnet::Ipv4Net = st.service_cidr.parse().unwrap();
    assert_ne!(
        lb, default_lb,
        "the default LB range was taken though the host uses it"
    );
    for n in [lb, svc] {
        assert!(
            hostnets::overlap(&n, &nets).is_none(),
            "{n} overlaps the host"
        );
    }
}
