//! A LoadBalancer Service gets its address from the LoadBalancerIPPool
//! it names (not the lab's own pool of its LoadBalancer range), a BIRD top-of-rack router
//! learns it over BGP, and loses it when the Service is deleted. The two
//! controller replicas: one leads and only it writes; killed, the other
//! takes over and serves the next Service; never both lead.

use std::net::{IpAddr, Ipv4Addr};
use std::process::Command;
use std::time::{Duration, Instant};

use tartan_lab::cluster::client::LabCli;
use tartan_lab::cluster::svcprobe::poll;
use tartan_lab::cluster::{LabState, controllers, state};
use tartan_lab::peers::{Bird, parse_bird_routes};
use tartan_tests::services::*;

/// The pool: RFC 2544's benchmarking range, which no lab range uses.
const POOL: &str = "198.18.50.0/29";

/// BIRD's BGP paths for exactly `prefix`, by the node (1-based) they
/// came from.
fn announcers(lab: &LabCli, st: &LabState, prefix: &str) -> Vec<usize> {
    let out = Command::new("ip")
        .args(["netns", "exec", &state::tor_netns(&lab.name), "birdc", "-s"])
        .arg(state::dir(&lab.name).join("bird-tor.ctl"))
        .args(["show", "route", prefix, "all"])
        .output()
        .expect("birdc");
    let text = String::from_utf8_lossy(&out.stdout);
    let protos: Vec<String> = st
        .nodes
        .iter()
        .map(|n| Bird::protocol_name(IpAddr::V4(n.address)))
        .collect();
    let mut from: Vec<usize> = parse_bird_routes(&text)
        .into_iter()
        .filter(|r| r.prefix == prefix)
        .filter_map(|r| protos.iter().position(|p| *p == r.proto))
        .map(|i| i + 1)
        .collect();
    from.sort();
    from
}

#[track_caller]
fn wait_announced(lab: &LabCli, st: &LabState, prefix: &str, want: &[usize]) -> Duration {
    let t = Instant::now();
    let ok = poll(Duration::from_secs(20), || {
        (announcers(lab, st, prefix) == want).then_some(())
    });
    assert!(
        ok.is_some(),
        "BIRD has {prefix} from nodes {:?}, want {want:?}",
        announcers(lab, st, prefix)
    );
    t.elapsed()
}

/// The Service's ingress address once it lies in [`POOL`].
#[track_caller]
fn pool_address(lab: &LabCli, name: &str) -> (Ipv4Addr, Duration) {
    let pool: ipnet::Ipv4Net = POOL.parse().unwrap();
    let t = Instant::now();
    let got = poll(Duration::from_secs(15), || {
        let s = service(lab, name);
        let ip: Ipv4Addr = s["status"]["loadBalancer"]["ingress"][0]["ip"]
            .as_str()?
            .parse()
            .ok()?;
        pool.contains(&ip).then_some(ip)
    });
    let ip = got.unwrap_or_else(|| {
        panic!(
            "Service {name} has no address from {POOL}: {}",
            service(lab, name)
        )
    });
    (ip, t.elapsed())
}

/// A counter's value in `/metrics` text.
fn counter(metrics: &str, name: &str) -> Option<u64> {
    metrics
        .lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

/// Samples the replicas' leader flags for `d`: the samples where some
/// replica leads; panics if two ever lead at once.
#[track_caller]
fn sample_leaders(st: &LabState, d: Duration) -> (usize, usize) {
    let t = Instant::now();
    let (mut led, mut all) = (0, 0);
    while t.elapsed() < d {
        let l = controllers::leaders(st).unwrap();
        let n = l.iter().filter(|x| **x == Some(true)).count();
        assert!(n <= 1, "two replicas lead at once: {l:?}");
        led += usize::from(n == 1);
        all += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    (led, all)
}

fn leader(st: &LabState) -> Option<usize> {
    let l = controllers::leaders(st).unwrap();
    l.iter().position(|x| *x == Some(true))
}

#[test]
fn lb_addresses_from_a_pool_are_announced_and_withdrawn_and_one_replica_acts() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let t0 = Instant::now();
    let (lab, up) = tartan_tests::lab_up("ctl", &["--nodes", "2", "--topology", "tor"]);
    assert!(up.contains("tartan-controllers: 2 replicas"), "{up}");
    let st = lab_state(&lab);
    assert_eq!(st.controllers.len(), 2);

    // One leader, and only ever one.
    let first = poll(Duration::from_secs(15), || leader(&st)).expect("no replica leads");
    let (led, all) = sample_leaders(&st, Duration::from_secs(3));
    assert_eq!(led, all, "the leader kept its Lease");
    let lease = lab.ok(&[
        "ctl",
        "get",
        "lease",
        "tartan-controllers",
        "--namespace",
        "tartan-system",
        "-o",
        "json",
    ]);
    let lease: serde_json::Value = serde_json::from_str(&lease).unwrap();
    assert_eq!(
        lease["spec"]["holderIdentity"],
        format!("{}-controllers-{first}", lab.name),
        "{lease}"
    );
    eprintln!("lab up, replica {first} leads, at {:?}", t0.elapsed());

    let _server = server_pod(&lab, "l-1", "node-1", "app=loc");
    apply_ok(
        &lab,
        &format!(
            "apiVersion: tartan.dev/v1
kind: BGPConfiguration
metadata: {{name: default}}
spec:
  nodeToNodeMeshEnabled: false
  serviceLoadBalancerIPs: [{{cidr: {POOL}}}]
---
apiVersion: tartan.dev/v1
kind: LoadBalancerIPPool
metadata: {{name: lab-public}}
spec:
  cidrs: [{POOL}]
---
apiVersion: v1
kind: Service
metadata:
  name: loc
  annotations: {{tartan.dev/loadbalancer-ip-pool: lab-public}}
spec:
  type: LoadBalancer
  externalTrafficPolicy: Local
  selector: {{app: loc}}
  ports: [{{port: 80, targetPort: 8080}}]
"
        ),
    );
    // The named pool's lowest address (not one of the lab's pool lab-lb,
    // which every other LoadBalancer Service draws from).
    let (ip, took) = pool_address(&lab, "loc");
    assert_eq!(ip, Ipv4Addr::new(198, 18, 50, 0));
    let prefix = format!("{ip}/32");
    let seen = wait_announced(&lab, &st, &prefix, &[1]);
    eprintln!("loc got {ip} in {took:?}; BIRD learned {prefix} from node-1 in {seen:?}");

    // Only the leader wrote.
    let assigned = |r: usize| {
        let (_, addr) = controllers::placement(&st, r).unwrap();
        let (_, m) = controllers::get(addr, "/metrics").unwrap();
        counter(&m, "tartan_controllers_lb_assigned_addresses_total").unwrap()
    };
    assert_eq!(assigned(first), 1);
    assert_eq!(assigned(1 - first), 0, "the standby wrote nothing");

    // Deleted: withdrawn.
    lab.ok(&["ctl", "delete", "service", "loc"]);
    wait_announced(&lab, &st, &prefix, &[]);

    // The leader dies; the other takes over within the Lease's 4 s plus a
    // round, and serves the next Service, with the freed address.
    controllers::kill(&lab.name, first, false).unwrap();
    let t = Instant::now();
    let second = poll(Duration::from_secs(15), || leader(&st)).expect("no takeover");
    assert_eq!(second, 1 - first);
    eprintln!("replica {second} took over in {:?}", t.elapsed());
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    apply_ok(
        &lab,
        "apiVersion: v1
kind: Service
metadata:
  name: again
  annotations: {tartan.dev/loadbalancer-ip-pool: lab-public}
spec: {type: LoadBalancer, externalTrafficPolicy: Local, selector: {app: loc}, ports: [{port: 80, targetPort: 8080}]}
",
    );
    let (ip2, _) = pool_address(&lab, "again");
    assert_eq!(ip2, ip, "the deleted Service's address is free again");
    wait_announced(&lab, &st, &prefix, &[1]);
    // The killed replica comes back as a standby.
    controllers::kill(&lab.name, first, true).unwrap();
    let st = lab_state(&lab);
    let (led, all) = sample_leaders(&st, Duration::from_secs(3));
    assert_eq!(led, all);
    assert_eq!(leader(&st), Some(second));
    eprintln!("done at {:?}", t0.elapsed());
}
