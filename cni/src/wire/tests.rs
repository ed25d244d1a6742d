//! Root tests in namespaces: a "node" namespace plays the host (the wiring
//! runs on a thread that entered it) and a "pod" namespace per pod, so
//! nothing touches the namespace the tests run in.

use super::*;
use anyhow::{Context as _, bail, ensure};
use std::future::Future;
use std::os::unix::fs::MetadataExt;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

static COUNTER: AtomicU32 = AtomicU32::new(0);

const PROTO: u8 = 202;

fn is_root() -> bool {
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    if !root {
        eprintln!("skipped: needs root (namespaces, veth)");
    }
    root
}

/// A named namespace, deleted on drop.
struct Netns {
    name: String,
}

impl Netns {
    fn new() -> anyhow::Result<Netns> {
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let name = format!("tcw{}_{n}", std::process::id());
        run("ip", &["netns", "add", &name])?;
        let ns = Netns { name };
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// A namespace standing for the node, with addresses on lo the pods
    /// can reach through their default routes.
    fn node() -> anyhow::Result<Netns> {
        let ns = Netns::new()?;
        ns.ip(&["addr", "add", "10.99.0.1/32", "dev", "lo"])?;
        ns.ip(&["-6", "addr", "add", "fd00:99::1/128", "dev", "lo"])?;
        Ok(ns)
    }

    fn path(&self) -> PathBuf {
        PathBuf::from(format!("/run/netns/{}", self.name))
    }

    /// `ip -n <ns> args...`, its output; an error if it fails.
    fn ip(&self, args: &[&str]) -> anyhow::Result<String> {
        let mut all = vec!["-n", &self.name];
        all.extend_from_slice(args);
        run("ip", &all)
    }

    /// Whether `cmd` succeeds inside the namespace.
    fn exec_ok(&self, cmd: &[&str]) -> bool {
        let mut all = vec!["netns", "exec", &self.name];
        all.extend_from_slice(cmd);
        Command::new("ip")
            .args(&all)
            .output()
            .is_ok_and(|o| o.status.success())
    }

    fn ping(&self, args: &[&str]) -> bool {
        let mut cmd = vec!["ping", "-c1", "-W1"];
        cmd.extend_from_slice(args);
        // One retry: the first packet may race neighbour resolution.
        (0..3).any(|_| self.exec_ok(&cmd))
    }

    /// Runs `work` on a thread inside this namespace with its own runtime,
    /// as if the whole process lived there.
    fn run<T, F, Fut>(&self, work: F) -> T
    where
        T: Send + 'static,
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = T>,
    {
        let path = self.path();
        std::thread::spawn(move || {
            let f = std::fs::File::open(&path).expect("open node netns");
            nix::sched::setns(&f, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime")
                .block_on(work())
        })
        .join()
        .expect("node thread panicked")
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

fn run(cmd: &str, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .with_context(|| format!("run {cmd}"))?;
    if !out.status.success() {
        bail!(
            "{cmd} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn request(pod: &Netns, id: &str, addrs: &[&str]) -> WireRequest {
    WireRequest {
        netns: pod.path(),
        ifname: "eth0".into(),
        host_ifname: host_interface_name(id, "eth0"),
        addresses: addrs.iter().map(|a| a.parse().expect("address")).collect(),
        mtu: None,
        pod_mac: Some(pod_mac(id, "eth0")),
        route_protocol: PROTO,
    }
}

fn add_in(node: &Netns, req: &WireRequest) -> Result<Wired, WireError> {
    let req = req.clone();
    node.run(move || async move { add(&req).await })
}

fn check_in(node: &Netns, req: &WireRequest) -> Result<(), WireError> {
    let req = req.clone();
    node.run(move || async move { check(&req).await })
}

fn del_in(node: &Netns, req: &WireRequest, netns: Option<PathBuf>) -> Result<(), WireError> {
    let req = req.clone();
    node.run(move || async move {
        del(
            netns.as_deref(),
            &req.ifname,
            &req.host_ifname,
            &req.addresses,
            req.route_protocol,
        )
        .await
    })
}

/// Nothing of `req` is left in the node namespace.
fn assert_host_clean(node: &Netns, req: &WireRequest) -> anyhow::Result<()> {
    ensure!(
        node.ip(&["link", "show", &req.host_ifname]).is_err(),
        "host link {} is still there",
        req.host_ifname
    );
    for fam in ["-4", "-6"] {
        let routes = node.ip(&[fam, "route", "show", "proto", "202"])?;
        ensure!(routes.trim().is_empty(), "routes left: {routes}");
    }
    Ok(())
}

#[test]
fn add_wires_ipv4_and_pings_both_ways() -> anyhow::Result<()> {
    if !is_root() {
        return Ok(());
    }
    let (node, pod) = (Netns::node()?, Netns::new()?);
    let mut req = request(&pod, "c-v4", &["10.99.0.5/32"]);
    req.mtu = Some(1400);
    // A stale host end from a crashed ADD is replaced.
    node.ip(&[
        "link",
        "add",
        &req.host_ifname,
        "type",
        "veth",
        "peer",
        "name",
        "stale0",
    ])?;

    let wired = add_in(&node, &req)?;
    assert_eq!(wired.host_ifname, req.host_ifname);
    assert_eq!(wired.host_mac, "ee:ee:ee:ee:ee:ee");
    assert_eq!(wired.pod_mac, mac_string(&pod_mac("c-v4", "eth0")));
    assert!(wired.pod_ifindex > 0);

    let addr = pod.ip(&["addr", "show", "dev", "eth0"])?;
    assert!(
        addr.contains("inet 10.99.0.5/32 scope global eth0"),
        "{addr}"
    );
    assert!(
        addr.contains("mtu 1400") && addr.contains("state UP"),
        "{addr}"
    );
    assert!(addr.contains(&wired.pod_mac), "{addr}");
    let routes = pod.ip(&["route"])?;
    assert!(
        routes.contains("default via 169.254.1.1 dev eth0"),
        "{routes}"
    );
    assert!(
        routes
            .lines()
            .any(|l| l.starts_with("169.254.1.1 dev eth0 ") && l.contains("scope link")),
        "{routes}"
    );
    let neigh = pod.ip(&["neigh", "show", "169.254.1.1"])?;
    assert!(
        neigh.contains("lladdr ee:ee:ee:ee:ee:ee PERMANENT"),
        "{neigh}"
    );
    assert!(pod.ip(&["link", "show", "lo"])?.contains("UP"));

    let host = node.ip(&["route", "show", "proto", "202"])?;
    assert_eq!(
        host.trim(),
        format!("10.99.0.5 dev {} scope link", req.host_ifname)
    );
    let link = node.ip(&["link", "show", &req.host_ifname])?;
    assert!(link.contains("ee:ee:ee:ee:ee:ee") && link.contains("mtu 1400"));
    assert!(link.contains("state UP"), "{link}");
    ensure!(
        node.ip(&["link", "show", "stale0"]).is_err(),
        "stale pair left"
    );

    ensure!(node.ping(&["10.99.0.5"]), "node cannot ping the pod");
    ensure!(pod.ping(&["10.99.0.1"]), "pod cannot ping the node");

    // A packet from the pod with a source that is not its own is dropped
    // by the host end's reverse-path filter (the kernel counts it).
    let rp = run(
        "ip",
        &[
            "netns",
            "exec",
            &node.name,
            "cat",
            &format!("/proc/sys/net/ipv4/conf/{}/rp_filter", req.host_ifname),
        ],
    )?;
    ensure!(rp.trim() == "1", "rp_filter {rp}");
    let dropped = || -> anyhow::Result<u64> {
        let text = run(
            "ip",
            &["netns", "exec", &node.name, "cat", "/proc/net/netstat"],
        )?;
        let mut lines = text.lines().filter(|l| l.starts_with("TcpExt:"));
        let (names, values) = (lines.next().unwrap_or(""), lines.next().unwrap_or(""));
        let at = names
            .split_whitespace()
            .position(|n| n == "IPReversePathFilter")
            .context("no IPReversePathFilter counter")?;
        Ok(values.split_whitespace().nth(at).unwrap_or("0").parse()?)
    };
    let before = dropped()?;
    pod.ip(&["addr", "add", "10.99.0.77/32", "dev", "eth0"])?;
    pod.exec_ok(&["ping", "-c1", "-W1", "-I", "10.99.0.77", "10.99.0.1"]);
    ensure!(dropped()? > before, "a spoofed source was not dropped");

    check_in(&node, &req)?;
    del_in(&node, &req, Some(pod.path()))?;
    assert_host_clean(&node, &req)
}

#[test]
fn check_names_what_is_wrong() -> anyhow::Result<()> {
    if !is_root() {
        return Ok(());
    }
    let (node, pod) = (Netns::node()?, Netns::new()?);
    let req = request(&pod, "c-check", &["10.99.0.6/32"]);
    add_in(&node, &req)?;
    check_in(&node, &req)?;

    let mut other_mtu = req.clone();
    other_mtu.mtu = Some(1300);
    let e = check_in(&node, &other_mtu).expect_err("MTU differs");
    assert!(e.to_string().contains("MTU"), "{e}");

    node.ip(&["route", "del", "10.99.0.6/32"])?;
    let e = check_in(&node, &req).expect_err("host route gone");
    assert!(e.to_string().contains("no host route 10.99.0.6/32"), "{e}");

    node.ip(&["link", "set", &req.host_ifname, "down"])?;
    let e = check_in(&node, &req).expect_err("host end down");
    assert_eq!(
        e.to_string(),
        format!("host interface {} is down", req.host_ifname)
    );
    node.ip(&["link", "set", &req.host_ifname, "up"])?;

    pod.ip(&["addr", "del", "10.99.0.6/32", "dev", "eth0"])?;
    let e = check_in(&node, &req).expect_err("address gone");
    assert_eq!(
        e.to_string(),
        format!(
            "interface eth0 in {} lacks address 10.99.0.6/32",
            pod.path().display()
        )
    );

    node.ip(&["link", "del", &req.host_ifname])?;
    let e = check_in(&node, &req).expect_err("pair gone");
    assert_eq!(
        e.to_string(),
        format!("interface eth0 in {} is missing", pod.path().display())
    );
    Ok(())
}

#[test]
fn del_is_idempotent() -> anyhow::Result<()> {
    if !is_root() {
        return Ok(());
    }
    let (node, pod) = (Netns::node()?, Netns::new()?);
    let req = request(&pod, "c-del", &["10.99.0.7/32", "fd00:99::7/128"]);
    add_in(&node, &req)?;
    del_in(&node, &req, Some(pod.path()))?;
    assert_host_clean(&node, &req)?;
    ensure!(pod.ip(&["link", "show", "eth0"]).is_err(), "pod end left");
    del_in(&node, &req, Some(pod.path()))?;
    del_in(&node, &req, None)?;

    // The pod's namespace already gone: DEL still succeeds.
    add_in(&node, &req)?;
    let path = pod.path();
    drop(pod);
    del_in(&node, &req, Some(path))?;
    assert_host_clean(&node, &req)
}

#[test]
fn existing_ifname_is_refused_and_nothing_is_left() -> anyhow::Result<()> {
    if !is_root() {
        return Ok(());
    }
    let (node, pod) = (Netns::node()?, Netns::new()?);
    pod.ip(&[
        "link", "add", "eth0", "type", "veth", "peer", "name", "other0",
    ])?;
    let req = request(&pod, "c-exists", &["10.99.0.8/32"]);
    let e = add_in(&node, &req).expect_err("eth0 exists");
    assert!(matches!(e, WireError::AlreadyExists { .. }), "{e:?}");
    assert!(
        e.to_string().contains(&format!(
            "interface eth0 already exists in {}",
            pod.path().display()
        )),
        "{e}"
    );
    assert_host_clean(&node, &req)?;
    ensure!(
        pod.ip(&["link", "show", "eth0"])?.contains("eth0@other0"),
        "the pod's own eth0 was touched"
    );
    Ok(())
}

#[test]
fn a_failure_after_creation_is_rolled_back() -> anyhow::Result<()> {
    if !is_root() {
        return Ok(());
    }
    let (node, pod) = (Netns::node()?, Netns::new()?);
    // The kernel refuses a multicast address: the pod end fails to configure.
    let req = request(&pod, "c-rollback", &["10.99.0.9/32", "ff02::1/128"]);
    let e = add_in(&node, &req).expect_err("multicast address");
    assert!(e.to_string().contains("ff02::1/128"), "{e}");
    assert_host_clean(&node, &req)?;
    ensure!(pod.ip(&["link", "show", "eth0"]).is_err(), "pod end left");
    Ok(())
}

#[test]
fn a_missing_netns_is_told_apart() -> anyhow::Result<()> {
    if !is_root() {
        return Ok(());
    }
    let node = Netns::node()?;
    let mut req = request(&node, "c-missing", &["10.99.0.10/32"]);
    req.netns = PathBuf::from("/run/netns/tcw-does-not-exist");
    let e = add_in(&node, &req).expect_err("no netns");
    assert!(e.is_missing_netns(), "{e:?}");
    assert!(
        e.to_string().contains("/run/netns/tcw-does-not-exist"),
        "{e}"
    );
    let e = check_in(&node, &req).expect_err("no netns");
    assert!(e.is_missing_netns(), "{e:?}");
    del_in(&node, &req, Some(req.netns.clone()))?;
    assert_host_clean(&node, &req)
}

#[test]
fn a_file_that_is_no_pod_namespace_is_refused_and_del_still_cleans() -> anyhow::Result<()> {
    if !is_root() {
        eprintln!("skipped: needs root for network namespaces");
        return Ok(());
    }
    let node = Netns::node()?;
    // A stale file where a namespace was (not a namespace any more).
    let stale = std::env::temp_dir().join(format!("tcw-stale-{}", std::process::id()));
    std::fs::write(&stale, b"")?;
    struct Gone(PathBuf);
    impl Drop for Gone {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    let _gone = Gone(stale.clone());
    let mut req = request(&node, "c-stale", &["10.99.0.11/32"]);
    req.netns = stale.clone();
    let e = add_in(&node, &req).expect_err("not a namespace");
    assert!(matches!(e, WireError::NotNetns { .. }), "{e:?}");
    assert_host_clean(&node, &req)?;
    // DEL of an attachment whose namespace file went stale: the host end
    // and routes still go.
    let pod = Netns::new()?;
    let mut live = request(&pod, "c-stale", &["10.99.0.11/32"]);
    add_in(&node, &live)?;
    live.netns = stale;
    del_in(&node, &live, Some(live.netns.clone()))?;
    assert_host_clean(&node, &live)?;
    // The node's own namespace is never a pod's: refused, the node's
    // interfaces untouched.
    node.ip(&[
        "link", "add", "eth0", "type", "veth", "peer", "name", "eth9",
    ])?;
    let mut own = request(&node, "c-own", &["10.99.0.12/32"]);
    own.netns = node.path();
    let e = add_in(&node, &own).expect_err("own namespace");
    assert!(matches!(e, WireError::NotNetns { .. }), "{e:?}");
    assert!(e.to_string().contains("own network namespace"), "{e}");
    del_in(&node, &own, Some(own.netns.clone()))?;
    ensure!(
        node.ip(&["link", "show", "eth0"]).is_ok(),
        "DEL removed the node's own eth0"
    );
    Ok(())
}

#[test]
fn dual_stack_wires_and_pings() -> anyhow::Result<()> {
    if !is_root() {
        return Ok(());
    }
    let (node, pod) = (Netns::node()?, Netns::new()?);
    let req = request(&pod, "c-v6", &["10.99.0.11/32", "fd00:99::b/128"]);
    add_in(&node, &req)?;

    let addr = pod.ip(&["-6", "addr", "show", "dev", "eth0"])?;
    assert!(addr.contains("inet6 fd00:99::b/128 scope global"), "{addr}");
    let routes = pod.ip(&["-6", "route"])?;
    assert!(
        routes.contains("default via fe80::ecee:eeff:feee:eeee dev eth0"),
        "{routes}"
    );
    let neigh = pod.ip(&["-6", "neigh", "show", "fe80::ecee:eeff:feee:eeee"])?;
    assert!(
        neigh.contains("lladdr ee:ee:ee:ee:ee:ee PERMANENT"),
        "{neigh}"
    );
    let host = node.ip(&["-6", "route", "show", "proto", "202"])?;
    assert!(
        host.contains(&format!("fd00:99::b dev {}", req.host_ifname)),
        "{host}"
    );
    let ll = node.ip(&["-6", "addr", "show", "dev", &req.host_ifname])?;
    assert!(ll.contains("fe80::ecee:eeff:feee:eeee/64"), "{ll}");
    check_in(&node, &req)?;

    ensure!(node.ping(&["10.99.0.11"]), "node cannot ping the pod (v4)");
    ensure!(
        node.ping(&["-6", "fd00:99::b"]),
        "node cannot ping the pod (v6)"
    );
    ensure!(
        pod.ping(&["-6", "fd00:99::1"]),
        "pod cannot ping the node (v6)"
    );

    del_in(&node, &req, Some(pod.path()))?;
    assert_host_clean(&node, &req)
}
