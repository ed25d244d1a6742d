//! `tartan-lab up`: the cluster, step by step, each step saved in the
//! state so that `down` removes whatever was made if a later one fails.

use std::net::{Ipv4Addr, TcpListener};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::json;
use tartan_api::resources::ippool::EncapMode;
use tartan_api::resources::{BgpPeer, BgpPeerSpec, IpPool};
use tartan_api::store::typed::TypedStore;

use super::detached;
use super::hostnets;
pub use super::runtime::runtime;
use super::state::{self, DEFAULT_POOL, DEFAULT_POOL6, LabState, NodeState};
use super::topology::*;
use super::up_options::*;
use crate::cni::tartan_bin_dir;
use crate::etcd::etcd_binary;
use crate::netns::ip;

// What `up` starts and reads, where its callers have always found it.
pub use super::daemons::{Daemon, restart, start_daemon};
pub use super::topology::{RR_CLUSTER_ID, TOR_AS, established, tor_node_as};
pub use super::up_options::{
    UpOptions, check_ranges, default_vxlan_mode, parse_mode, resolve_ranges,
};

fn free_port(host: Ipv4Addr) -> Result<u16> {
    Ok(TcpListener::bind((host, 0))?.local_addr()?.port())
}

pub fn up(o: &UpOptions, say: &mut dyn FnMut(&str)) -> Result<LabState> {
    state::check_name(&o.name)?;
    if o.nodes == 0 || o.nodes > 50 {
        bail!("--nodes {}: use 1 to 50", o.nodes);
    }
    match o.topology.as_str() {
        "mesh" => {}
        "rr" if o.nodes >= 3 => {}
        "rr" => bail!("--topology rr needs at least 3 nodes (two reflectors and a client)"),
        "tor" => {}
        "two-subnets" if o.nodes >= 2 => {}
        "two-subnets" => bail!("--topology two-subnets needs at least 2 nodes (one per subnet)"),
        other => {
            bail!("--topology {other}: use mesh, rr, tor or two-subnets")
        }
    }
    if o.dual_stack && !matches!(o.topology.as_str(), "mesh" | "rr") {
        bail!("--dual-stack is built for the mesh and rr topologies");
    }
    if o.vxlan_mode != EncapMode::Never && o.ipip_mode != EncapMode::Never {
        bail!("--vxlan-mode and --ipip-mode both set: a pool has one encapsulation");
    }
    let (service_cidr, lb_cidr) = resolve_ranges(
        o.service_cidr.as_deref(),
        o.lb_cidr.as_deref(),
        &hostnets::read()?,
    )?;
    let service_cidr6 = super::ranges6::service_range6(o.service_cidr6.as_deref(), o.dual_stack)?;
    if LabState::path(&o.name).exists() {
        bail!(
            "lab {} exists; `tartan-lab down --name {}` removes it",
            o.name,
            o.name
        );
    }
    let r = build(o, (service_cidr, service_cidr6), lb_cidr, say);
    if r.is_err() {
        say("failed; removing what was made");
        let _ = super::down::down(&o.name, &mut |_| {});
    }
    r
}

fn build(
    o: &UpOptions,
    (service_cidr, service_cidr6): (String, Option<String>),
    lb_cidr: String,
    say: &mut dyn FnMut(&str),
) -> Result<LabState> {
    let started = Instant::now();
    let dir = state::dir(&o.name);
    std::fs::create_dir_all(&dir)?;
    let subnet = crate::underlay::free_subnet()?;
    let gateway = subnet.hosts().next().context("empty subnet")?;
    let two = o.topology == "two-subnets";
    // The second subnet, behind the router: its first address is the
    // router's, the router's address on the first is its last.
    let subnet2 = if two {
        Some(crate::underlay::free_subnet()?)
    } else {
        None
    };
    let mut st = LabState {
        name: o.name.clone(),
        subnet: subnet.to_string(),
        gateway,
        bridge: state::bridge_name(&o.name),
        etcd: None,
        datastore: String::new(),
        nodes: vec![],
        topology: o.topology.clone(),
        subnet2: subnet2.map(|n| n.to_string()),
        tor: None,
        dns: None,
        controllers: vec![],
        apiserver: None,
        service_cidr,
        lb_cidr,
        lb_cidr6: service_cidr6
            .as_ref()
            .map(|_| super::ranges6::DEFAULT_LB_CIDR6.to_string()),
        service_cidr6,
    };
    st.save()?;

    say(&format!("underlay {subnet} on bridge {}", st.bridge));
    ip(&["link", "add", &st.bridge, "type", "bridge"])?;
    ip(&[
        "addr",
        "add",
        &format!("{gateway}/{}", subnet.prefix_len()),
        "dev",
        &st.bridge,
    ])?;
    ip(&["link", "set", &st.bridge, "up"])?;
    // The bridge's address holds the subnet from here on.
    crate::subnet_claims::release(&subnet);
    let router_a = subnet.hosts().last().context("empty subnet")?;
    if let Some(b) = subnet2 {
        let router_b = b.hosts().next().context("empty subnet")?;
        let br2 = state::bridge2_name(&o.name);
        let router = state::router_netns(&o.name);
        say(&format!(
            "second subnet {b} on bridge {br2}, router {router} ({router_a} and {router_b}) with no pod routes"
        ));
        ip(&["link", "add", &br2, "type", "bridge"])?;
        ip(&["link", "set", &br2, "up"])?;
        ip(&["netns", "add", &router])?;
        for (side, bridge, dev, addr, net) in [
            ("ra", st.bridge.as_str(), "eth0", router_a, subnet),
            ("rb", br2.as_str(), "eth1", router_b, b),
        ] {
            let outside = format!("{}-{side}", o.name);
            ip(&[
                "link", "add", &outside, "type", "veth", "peer", "name", dev, "netns", &router,
            ])?;
            ip(&["link", "set", &outside, "master", bridge, "up"])?;
            ip(&[
                "-n",
                &router,
                "addr",
                "add",
                &format!("{addr}/{}", net.prefix_len()),
                "dev",
                dev,
            ])?;
            ip(&["-n", &router, "link", "set", dev, "up"])?;
        }
        ip(&["-n", &router, "link", "set", "lo", "up"])?;
        enable_forwarding(&router)?;
        // etcd (here) answers nodes on the second subnet through the router.
        ip(&["route", "add", &b.to_string(), "via", &router_a.to_string()])?;
        crate::subnet_claims::release(&b);
    }

    let kube = o.datastore == LabDatastore::Kubernetes;
    if kube {
        say(&format!(
            "API server stand-in at {gateway}, enforcing the RBAC of {}",
            super::apiserver::deploy_dir().display()
        ));
        st.datastore = "kubernetes".into();
        let a =
            super::apiserver::start(gateway, &dir.join("apiserver"), &dir.join("apiserver.log"))?;
        say(&format!("API server at {}", a.url));
        st.apiserver = Some(a);
    } else {
        let client = free_port(gateway)?;
        let peer = free_port(Ipv4Addr::LOCALHOST)?;
        st.datastore = format!("etcd://{gateway}:{client}");
        say(&format!("etcd at {gateway}:{client}"));
        st.etcd = Some(start_etcd(&dir, gateway, client, peer)?);
    }
    st.save()?;

    let rt = runtime()?;
    let store = rt.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let attempt = async {
                let s = super::store::open(&st, Duration::from_secs(2)).await?;
                s.list_typed::<IpPool>(None).await?;
                Ok::<_, anyhow::Error>(s)
            };
            match attempt.await {
                Ok(s) => return Ok(s),
                Err(e) if Instant::now() > deadline => {
                    return Err(anyhow::anyhow!("the datastore did not come up: {e:#}"));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    })?;

    let bin = tartan_bin_dir();
    for name in ["tartan-bgpd", "tartan-felix", "tartan", "tartan-ipam"] {
        if !bin.join(name).is_file() {
            bail!(
                "{} is missing; build first (cargo build --release)",
                bin.join(name).display()
            );
        }
    }
    for i in 1..=o.nodes {
        let node = format!("node-{i}");
        let netns = state::node_netns(&o.name, &node);
        // two-subnets: the first half of the nodes on the first subnet,
        // the rest behind the router.
        let first_half = o.nodes.div_ceil(2);
        let (net, address, default_via) = match subnet2 {
            Some(b) if i > first_half => (
                b,
                b.hosts().nth(i - first_half).context("subnet full")?,
                b.hosts().next().context("empty subnet")?,
            ),
            _ => (
                subnet,
                subnet.hosts().nth(i).context("subnet full")?,
                gateway,
            ),
        };
        say(&format!("{node}: namespace {netns}, address {address}"));
        ip(&["netns", "add", &netns])?;
        st.nodes.push(NodeState {
            name: node.clone(),
            netns: netns.clone(),
            address,
            address6: None,
            bgpd: None,
            felix: None,
            bgp_socket: dir.join(format!("bgpd-{node}.sock")),
            conflist: dir.join(format!("{node}.conflist")),
        });
        st.save()?;
        let outside = format!("{}-v{i}", o.name);
        ip(&[
            "link", "add", &outside, "type", "veth", "peer", "name", "eth0", "netns", &netns,
        ])?;
        let bridge = if net == subnet {
            st.bridge.clone()
        } else {
            state::bridge2_name(&o.name)
        };
        ip(&["link", "set", &outside, "master", &bridge, "up"])?;
        let nip = |args: &[&str]| {
            let mut a = vec!["-n", netns.as_str()];
            a.extend_from_slice(args);
            ip(&a)
        };
        nip(&["link", "set", "lo", "up"])?;
        nip(&[
            "addr",
            "add",
            &format!("{address}/{}", net.prefix_len()),
            "dev",
            "eth0",
        ])?;
        nip(&["link", "set", "eth0", "up"])?;
        nip(&["route", "add", "default", "via", &default_via.to_string()])?;
        if let Some(b) = subnet2
            && net == subnet
        {
            nip(&["route", "add", &b.to_string(), "via", &router_a.to_string()])?;
        }
        // As a kubelet registers it: the node's addresses in its status and
        // no BGP address annotation; bgpd detects and writes those.
        let mut annotations = json!({});
        let mut addresses = vec![json!({"type": "InternalIP", "address": address.to_string()})];
        if o.dual_stack {
            // The IPv4 subnet's third octet keeps labs' IPv6 subnets apart.
            let v6 = format!("fd00:213:{}::{i}", subnet.network().octets()[2]);
            // nodad: bgpd binds the address at once.
            nip(&[
                "-6",
                "addr",
                "add",
                &format!("{v6}/64"),
                "dev",
                "eth0",
                "nodad",
            ])?;
            st.nodes[i - 1].address6 = Some(v6.parse()?);
            st.save()?;
            addresses.push(json!({"type": "InternalIP", "address": v6}));
        }
        addresses.push(json!({"type": "Hostname", "address": node}));
        if is_reflector(o, i) {
            annotations["tartan.dev/route-reflector-cluster-id"] = json!(RR_CLUSTER_ID);
        }
        if o.topology == "tor" {
            // An AS per node: each learns the others' blocks from the ToR
            // over eBGP, which a shared AS would reject as a loop.
            annotations["tartan.dev/bgp-as-number"] = json!(tor_node_as(i).to_string());
        }
        let n: k8s_openapi::api::core::v1::Node = serde_json::from_value(json!({
            "metadata": {
                "name": node,
                "labels": {"kubernetes.io/hostname": node},
                "annotations": annotations
            },
            "status": {"addresses": addresses}
        }))?;
        rt.block_on(store.create_typed(&n))
            .with_context(|| format!("create Node {node}"))?;
        let mut plugin = json!({
            "type": "tartan",
            "datastore": st.datastore,
            "nodename": node,
            "logFile": dir.join(format!("cni-{node}.log")).display().to_string(),
            "ipam": {"type": "tartan-ipam"}
        });
        let kubeconfig = super::apiserver::cni_kubeconfig(&st, &node);
        if let Some(k) = &kubeconfig {
            plugin["kubeconfig"] = json!(k.display().to_string());
        }
        if let Some(mtu) = super::pools::pod_mtu(o)? {
            plugin["mtu"] = json!(mtu);
        }
        let conflist = json!({
            "cniVersion": "1.0.0",
            "name": "tartan-lab",
            "plugins": [plugin]
        });
        // As in deploy/: on the Kubernetes datastore the conflist waits
        // beside its place until felix has the plugin's token.
        let path = &st.nodes[i - 1].conflist;
        let path = match kubeconfig {
            Some(_) => tartan_api::cni_files::pending_conflist(path),
            None => path.clone(),
        };
        std::fs::write(&path, serde_json::to_string_pretty(&conflist)?)?;
    }
    if o.topology == "tor" {
        let tor_ip = subnet.hosts().last().context("empty subnet")?;
        say(&format!(
            "node-to-node mesh off; every node peers over eBGP with a BIRD top-of-rack router at {tor_ip} (AS {TOR_AS})"
        ));
        st.tor = Some(start_tor(&st, tor_ip, o.nodes)?);
        st.save()?;
        rt.block_on(store.create_typed(&mesh_off()))?;
        rt.block_on(store.create_typed(&BgpPeer::new(
            "tor",
            BgpPeerSpec::new(&tor_ip.to_string(), TOR_AS),
        )))?;
    }
    if o.topology == "rr" {
        say("node-to-node mesh off; node-1 and node-2 are route reflectors");
        rt.block_on(store.create_typed(&mesh_off()))?;
    }
    let mut encap = encap_text(o);
    let origin = if kube {
        say(
            "ConfigMap tartan-system/tartan-config; the default pools come from tartan-controllers' first start",
        );
        rt.block_on(super::pools::write_config(
            &*store,
            o,
            super::pools::pod_mtu(o)?,
        ))?;
        super::controllers::start_all(&mut st, say)?;
        rt.block_on(super::pools::wait_pools(
            &*store,
            o,
            Duration::from_secs(60),
        ))?;
        " (from tartan-config)"
    } else {
        rt.block_on(super::pools::write_pools(&*store, o))?;
        ""
    };
    rt.block_on(super::pools::write_lb_pool(
        &*store,
        &st.lb_cidr,
        st.lb_cidr6.as_deref(),
    ))?;
    say(&format!(
        "LoadBalancerIPPool {} {}{}: tartan-controllers give LoadBalancer Services their addresses",
        super::pools::LB_POOL,
        st.lb_cidr,
        st.lb_cidr6
            .as_ref()
            .map(|n| format!(" and {n}"))
            .unwrap_or_default()
    ));
    if o.dual_stack {
        say(&format!("IPPool default-ipv6 {DEFAULT_POOL6}{origin}"));
    }
    say(&format!(
        "IPPool default-ipv4 {DEFAULT_POOL}{encap}{origin}"
    ));
    if o.dual_stack {
        encap.push_str(&format!(" and {DEFAULT_POOL6}"));
    }

    for i in 0..st.nodes.len() {
        say(&format!(
            "{}: starting tartan-bgpd and tartan-felix",
            st.nodes[i].name
        ));
        st.nodes[i].bgpd = Some(start_daemon(&st, i, Daemon::Bgpd)?);
        st.nodes[i].felix = Some(start_daemon(&st, i, Daemon::Felix)?);
        st.save()?;
    }

    super::apiserver::wait_cni_kubeconfigs(&st, Duration::from_secs(60))?;
    say("waiting for the BGP sessions");
    // Dual stack: every node-to-node session twice, over IPv4 and IPv6.
    let per_peer = if o.dual_stack { 2 } else { 1 };
    let want: Vec<usize> = (1..=st.nodes.len())
        .map(|i| expected_sessions(o, i) * per_peer)
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let counts: Vec<usize> = st
            .nodes
            .iter()
            .map(|n| established(&n.bgp_socket))
            .collect();
        if counts == want {
            break;
        }
        if Instant::now() > deadline {
            bail!(
                "BGP sessions not all up after 60 s (established per node: {counts:?}); see the logs in {}",
                dir.display()
            );
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    say(&format!(
        "lab {} is up in {:.1} s: {} nodes, {} BGP sessions ({}), pool {DEFAULT_POOL}{encap}",
        st.name,
        started.elapsed().as_secs_f64(),
        st.nodes.len(),
        // Node-to-node sessions count once for their two ends; ToR
        // sessions have one end on a node.
        if o.topology == "tor" {
            want.iter().sum::<usize>()
        } else {
            want.iter().sum::<usize>() / 2
        },
        match o.topology.as_str() {
            "rr" => "route reflectors node-1, node-2",
            "two-subnets" => "full mesh across two subnets",
            "tor" => "eBGP to the top-of-rack router",
            _ => "full mesh",
        }
    ));
    st.dns = Some(super::dns::start(&st)?);
    st.save()?;
    say(&format!(
        "cluster DNS: tartan-dns on node-1 behind kube-system/kube-dns {} (domain {})",
        super::dns::service_ip(&st.service_cidr)?,
        super::dns::DOMAIN
    ));
    if !kube {
        super::controllers::start_all(&mut st, say)?;
    }
    match super::apiserver::kubeconfig(&st, super::apiserver::Identity::Admin) {
        Some(k) => say(&format!(
            "datastore for tartanctl: --datastore kubernetes with KUBECONFIG={}",
            k.display()
        )),
        None => say(&format!(
            "datastore for tartanctl: --datastore {}",
            st.datastore
        )),
    }
    let and6 = |n: &Option<String>| n.as_ref().map(|n| format!(" and {n}")).unwrap_or_default();
    say(&format!(
        "Services: ClusterIPs from {}{}, NodePorts from 30000-32767, LoadBalancer IPs from {}{} (LoadBalancerIPPool {})",
        st.service_cidr,
        and6(&st.service_cidr6),
        st.lb_cidr,
        and6(&st.lb_cidr6),
        super::pools::LB_POOL
    ));
    Ok(st)
}

fn start_etcd(
    dir: &std::path::Path,
    gateway: Ipv4Addr,
    client: u16,
    peer: u16,
) -> Result<state::Proc> {
    let mut etcd = Command::new(etcd_binary());
    etcd.args(["--name", "lab", "--data-dir"])
        .arg(dir.join("etcd"))
        .args([
            "--listen-client-urls",
            &format!("http://{gateway}:{client}"),
        ])
        .args([
            "--advertise-client-urls",
            &format!("http://{gateway}:{client}"),
        ])
        .args(["--listen-peer-urls", &format!("http://127.0.0.1:{peer}")])
        .args([
            "--initial-advertise-peer-urls",
            &format!("http://127.0.0.1:{peer}"),
        ])
        .args(["--initial-cluster", &format!("lab=http://127.0.0.1:{peer}")])
        .args(["--log-level", "warn"]);
    detached::spawn(etcd, &dir.join("etcd.log"))
}
