//! What the API server and a load-balancer controller (MetalLB) give a
//! Service: a ClusterIP from the service range, NodePorts from
//! 30000–32767, LoadBalancer ingress IPs from the LB range. Pure: the
//! Services already stored and those being written in, the written ones
//! with their addresses and ports filled in, or every problem found (and
//! then nothing is written).
//!
//! - A value the Service gives is kept: a ClusterIP outside the service
//!   range as given (only one inside it must be free), a NodePort if it
//!   is in range and free, `spec.loadBalancerIP` if it is in the LB range
//!   and free.
//! - A Service written again without them keeps what it holds (as `kubectl
//!   apply` does, the file never named them); a changed ClusterIP is
//!   refused (it is immutable).
//! - Lowest free first: the service range's first address is left for the
//!   `kubernetes` Service, as the API server does.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::ops::RangeInclusive;

use ipnet::Ipv4Net;
use k8s_openapi::api::core::v1::{
    LoadBalancerIngress, LoadBalancerStatus, Service, ServicePort, ServiceStatus,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// The NodePort range of a default API server.
pub const NODE_PORTS: RangeInclusive<u16> = 30000..=32767;

/// Where addresses and ports come from.
#[derive(Debug, Clone)]
pub struct Ranges {
    pub service: Ipv4Net,
    pub lb: Ipv4Net,
    pub node_ports: RangeInclusive<u16>,
}

impl Ranges {
    pub fn new(service: Ipv4Net, lb: Ipv4Net) -> Ranges {
        Ranges {
            service,
            lb,
            node_ports: NODE_PORTS,
        }
    }
}

/// `namespace/name`.
pub fn key(s: &Service) -> String {
    format!(
        "{}/{}",
        s.metadata.namespace.as_deref().unwrap_or("default"),
        s.metadata.name.as_deref().unwrap_or("")
    )
}

fn type_of(s: &Service) -> &str {
    s.spec
        .as_ref()
        .and_then(|sp| sp.type_.as_deref())
        .unwrap_or("ClusterIP")
}

fn wants_node_ports(s: &Service) -> bool {
    match type_of(s) {
        "NodePort" => true,
        "LoadBalancer" => s
            .spec
            .as_ref()
            .and_then(|sp| sp.allocate_load_balancer_node_ports)
            .unwrap_or(true),
        _ => false,
    }
}

/// A LoadBalancer Service with `externalTrafficPolicy: Local` has a
/// `healthCheckNodePort` (where load balancers ask a node whether it has
/// local endpoints), from the NodePort range.
fn wants_health_port(s: &Service) -> bool {
    type_of(s) == "LoadBalancer"
        && s.spec
            .as_ref()
            .and_then(|sp| sp.external_traffic_policy.as_deref())
            == Some("Local")
}

fn health_port(s: &Service) -> Option<i32> {
    s.spec
        .as_ref()
        .and_then(|sp| sp.health_check_node_port)
        .filter(|n| *n != 0)
}

/// The ClusterIP a Service gives (`clusterIP`, else `clusterIPs[0]`);
/// `None` when it gives none (or "").
fn given_cluster_ip(s: &Service) -> Option<String> {
    let sp = s.spec.as_ref()?;
    sp.cluster_ip
        .clone()
        .filter(|ip| !ip.is_empty())
        .or_else(|| sp.cluster_ips.as_ref()?.first().cloned())
        .filter(|ip| !ip.is_empty())
}

fn ingress_ips(s: &Service) -> Vec<String> {
    s.status
        .as_ref()
        .and_then(|st| st.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|i| i.ip.clone())
        .collect()
}

/// What other Services hold, with who holds it.
#[derive(Default)]
struct Held {
    cluster_ips: BTreeMap<Ipv4Addr, String>,
    node_ports: BTreeMap<u16, String>,
    lb_ips: BTreeMap<Ipv4Addr, String>,
}

impl Held {
    fn add(&mut self, s: &Service) {
        let k = key(s);
        if let Some(ip) = given_cluster_ip(s).and_then(|ip| ip.parse().ok()) {
            self.cluster_ips.insert(ip, k.clone());
        }
        for p in s.spec.iter().flat_map(|sp| sp.ports.iter().flatten()) {
            if let Some(np) = p.node_port.and_then(|n| u16::try_from(n).ok()) {
                self.node_ports.insert(np, k.clone());
            }
        }
        if let Some(np) = health_port(s).and_then(|n| u16::try_from(n).ok()) {
            self.node_ports.insert(np, k.clone());
        }
        if type_of(s) == "LoadBalancer" {
            for ip in ingress_ips(s).iter().filter_map(|ip| ip.parse().ok()) {
                self.lb_ips.insert(ip, k.clone());
            }
        }
    }
}

/// Checks of the Service's own fields that the lab relies on.
fn own_problems(s: &Service, out: &mut Vec<String>) {
    let k = key(s);
    let mut bad = |field: String, why: String| out.push(format!("Service {k}: {field}: {why}"));
    let Some(sp) = &s.spec else {
        bad("spec".into(), "missing".into());
        return;
    };
    let t = type_of(s);
    if !matches!(
        t,
        "ClusterIP" | "NodePort" | "LoadBalancer" | "ExternalName"
    ) {
        bad(
            "spec.type".into(),
            format!("{t:?}: use ClusterIP, NodePort, LoadBalancer or ExternalName"),
        );
    }
    let ports = sp.ports.as_deref().unwrap_or_default();
    let mut names = BTreeSet::new();
    for (i, p) in ports.iter().enumerate() {
        let f = |x: &str| format!("spec.ports[{i}].{x}");
        if !(1..=65535).contains(&p.port) {
            bad(f("port"), format!("{} is not in 1-65535", p.port));
        }
        let proto = p.protocol.as_deref().unwrap_or("TCP");
        if !matches!(proto, "TCP" | "UDP" | "SCTP") {
            bad(f("protocol"), format!("{proto:?}: use TCP, UDP or SCTP"));
        }
        let name = p.name.clone().unwrap_or_default();
        if ports.len() > 1 && name.is_empty() {
            bad(
                f("name"),
                "required when the Service has more than one port".into(),
            );
        }
        if !names.insert(name.clone()) && !name.is_empty() {
            bad(f("name"), format!("{name:?} is used by another port"));
        }
        match &p.target_port {
            Some(IntOrString::Int(n)) if !(1..=65535).contains(n) => {
                bad(f("targetPort"), format!("{n} is not in 1-65535"))
            }
            Some(IntOrString::String(n)) if n.is_empty() || n.len() > 15 => bad(
                f("targetPort"),
                format!("{n:?}: a port name has 1 to 15 characters"),
            ),
            _ => {}
        }
        if let Some(np) = p.node_port
            && np != 0
            && !wants_node_ports(s)
        {
            bad(
                f("nodePort"),
                format!("{np}: only for NodePort and LoadBalancer Services"),
            );
        }
    }
    if let Some(np) = health_port(s)
        && !wants_health_port(s)
    {
        bad(
            "spec.healthCheckNodePort".into(),
            format!("{np}: only for LoadBalancer Services with externalTrafficPolicy: Local"),
        );
    }
    if let Some(ip) = given_cluster_ip(s)
        && ip != "None"
        && ip.parse::<Ipv4Addr>().is_err()
    {
        bad(
            "spec.clusterIP".into(),
            format!("{ip:?} is not an IPv4 address"),
        );
    }
    if t == "ExternalName" && sp.external_name.as_deref().unwrap_or("").is_empty() {
        bad(
            "spec.externalName".into(),
            "required for type ExternalName".into(),
        );
    }
}

/// Carries what `stored` (the same Service, as stored) holds into
/// `s`, where `s` does not give it; a changed ClusterIP is a problem.
fn carry_over(s: &mut Service, stored: &Service, out: &mut Vec<String>) {
    let k = key(s);
    let old_ip = given_cluster_ip(stored);
    let node_ports = wants_node_ports(s);
    let is_lb = type_of(s) == "LoadBalancer";
    let health = wants_health_port(s) && health_port(s).is_none();
    let old_health = health_port(stored);
    let external_name = type_of(s) == "ExternalName";
    let Some(sp) = s.spec.as_mut() else { return };
    match (given_cluster_ip_spec(sp), old_ip) {
        (None, Some(old)) if !external_name => {
            sp.cluster_ip = Some(old.clone());
            sp.cluster_ips = Some(vec![old]);
        }
        (Some(new), Some(old)) if new != old => out.push(format!(
            "Service {k}: spec.clusterIP: may not change ({old} -> {new}); delete the Service and create it again"
        )),
        _ => {}
    }
    if node_ports {
        let old_ports = stored
            .spec
            .as_ref()
            .and_then(|o| o.ports.clone())
            .unwrap_or_default();
        for p in sp.ports.iter_mut().flatten() {
            if p.node_port.unwrap_or(0) != 0 {
                continue;
            }
            let same = |o: &&ServicePort| {
                o.port == p.port
                    && o.protocol.as_deref().unwrap_or("TCP")
                        == p.protocol.as_deref().unwrap_or("TCP")
            };
            if let Some(np) = old_ports.iter().find(same).and_then(|o| o.node_port) {
                p.node_port = Some(np);
            }
        }
    }
    if health && let Some(np) = old_health {
        sp.health_check_node_port = Some(np);
    }
    if is_lb && ingress_ips(s).is_empty() && !ingress_ips(stored).is_empty() {
        let wanted = s.spec.as_ref().and_then(|sp| sp.load_balancer_ip.clone());
        // A changed loadBalancerIP asks for a new address.
        if wanted.is_none_or(|w| ingress_ips(stored).contains(&w)) {
            s.status = stored.status.clone();
        }
    }
}

fn given_cluster_ip_spec(sp: &k8s_openapi::api::core::v1::ServiceSpec) -> Option<String> {
    sp.cluster_ip
        .clone()
        .filter(|ip| !ip.is_empty())
        .or_else(|| sp.cluster_ips.as_ref()?.first().cloned())
        .filter(|ip| !ip.is_empty())
}

/// The first host of `net` not in `taken` (skipping the first when
/// `skip_first`).
fn lowest_free(
    net: &Ipv4Net,
    skip_first: bool,
    taken: &BTreeMap<Ipv4Addr, String>,
) -> Option<Ipv4Addr> {
    net.hosts()
        .skip(usize::from(skip_first))
        .find(|a| !taken.contains_key(a))
}

/// `incoming` with ClusterIPs, NodePorts and LoadBalancer ingress IPs
/// filled in, given the Services `stored`; or every problem.
pub fn allocate(
    ranges: &Ranges,
    stored: &[Service],
    incoming: &[Service],
) -> Result<Vec<Service>, Vec<String>> {
    let mut problems = Vec::new();
    let incoming_keys: BTreeSet<String> = incoming.iter().map(key).collect();
    if incoming_keys.len() != incoming.len() {
        problems.push("the same Service is given twice".to_string());
    }
    let stored_by_key: BTreeMap<String, &Service> = stored.iter().map(|s| (key(s), s)).collect();
    let mut held = Held::default();
    for s in stored.iter().filter(|s| !incoming_keys.contains(&key(s))) {
        held.add(s);
    }
    let mut out: Vec<Service> = incoming.to_vec();
    for s in &mut out {
        own_problems(s, &mut problems);
        if let Some(old) = stored_by_key.get(&key(s)) {
            carry_over(s, old, &mut problems);
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    // What the incoming Services give themselves, checked against the
    // others and each other.
    for s in &out {
        let k = key(s);
        if let Some(ip) = given_cluster_ip(s).and_then(|ip| ip.parse::<Ipv4Addr>().ok()) {
            if ranges.service.contains(&ip)
                && (ip == ranges.service.network() || ip == ranges.service.broadcast())
            {
                problems.push(format!(
                    "Service {k}: spec.clusterIP: {ip} is the service range's network or broadcast address"
                ));
            }
            if let Some(other) = held.cluster_ips.insert(ip, k.clone()) {
                problems.push(format!(
                    "Service {k}: spec.clusterIP: {ip} is already allocated to Service {other}"
                ));
            }
        }
        let mut own_ports: BTreeSet<u16> = BTreeSet::new();
        for (i, p) in s
            .spec
            .iter()
            .flat_map(|sp| sp.ports.iter().flatten())
            .enumerate()
        {
            let Some(np) = p.node_port.filter(|n| *n != 0) else {
                continue;
            };
            let in_range = u16::try_from(np)
                .ok()
                .filter(|n| ranges.node_ports.contains(n));
            let Some(np) = in_range else {
                problems.push(format!(
                    "Service {k}: spec.ports[{i}].nodePort: {np} is not in the NodePort range {}-{}",
                    ranges.node_ports.start(),
                    ranges.node_ports.end()
                ));
                continue;
            };
            // One Service may use a port number for TCP and UDP alike.
            if !own_ports.insert(np) {
                continue;
            }
            if let Some(other) = held.node_ports.insert(np, k.clone()) {
                problems.push(format!(
                    "Service {k}: spec.ports[{i}].nodePort: {np} is already allocated to Service {other}"
                ));
            }
        }
        if let Some(np) = health_port(s) {
            match u16::try_from(np)
                .ok()
                .filter(|n| ranges.node_ports.contains(n))
            {
                None => problems.push(format!(
                    "Service {k}: spec.healthCheckNodePort: {np} is not in the NodePort range {}-{}",
                    ranges.node_ports.start(),
                    ranges.node_ports.end()
                )),
                Some(n) => {
                    if let Some(other) = held.node_ports.insert(n, k.clone()) {
                        problems.push(format!(
                            "Service {k}: spec.healthCheckNodePort: {np} is already allocated to {}",
                            if other == k {
                                "one of its ports".to_string()
                            } else {
                                format!("Service {other}")
                            }
                        ));
                    }
                }
            }
        }
        if type_of(s) == "LoadBalancer" {
            let mut mine = ingress_ips(s);
            let wanted = s.spec.as_ref().and_then(|sp| sp.load_balancer_ip.clone());
            if mine.is_empty()
                && let Some(w) = wanted.filter(|w| !w.is_empty())
            {
                match w.parse::<Ipv4Addr>() {
                    Ok(a) if ranges.lb.contains(&a) => mine.push(w),
                    _ => problems.push(format!(
                        "Service {k}: spec.loadBalancerIP: {w} is not an address of the lab's LoadBalancer range {}",
                        ranges.lb
                    )),
                }
            }
            for ip in mine.iter().filter_map(|ip| ip.parse::<Ipv4Addr>().ok()) {
                if let Some(other) = held.lb_ips.insert(ip, k.clone())
                    && other != k
                {
                    problems.push(format!(
                        "Service {k}: LoadBalancer IP {ip} is already given to Service {other}"
                    ));
                }
            }
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    // Fill in what is missing, lowest free first.
    for s in &mut out {
        let k = key(s);
        let t = type_of(s).to_string();
        let node_ports = wants_node_ports(s);
        let lb_given = !ingress_ips(s).is_empty();
        let health = wants_health_port(s) && health_port(s).is_none();
        let Some(sp) = s.spec.as_mut() else { continue };
        if t != "ExternalName" && given_cluster_ip_spec(sp).is_none() {
            match lowest_free(&ranges.service, true, &held.cluster_ips) {
                Some(ip) => {
                    held.cluster_ips.insert(ip, k.clone());
                    sp.cluster_ip = Some(ip.to_string());
                    sp.cluster_ips = Some(vec![ip.to_string()]);
                }
                None => problems.push(format!(
                    "Service {k}: no free ClusterIP left in the service range {}",
                    ranges.service
                )),
            }
        } else if let Some(ip) = given_cluster_ip_spec(sp)
            && sp.cluster_ips.as_ref().is_none_or(Vec::is_empty)
        {
            sp.cluster_ip = Some(ip.clone());
            sp.cluster_ips = Some(vec![ip]);
        }
        if node_ports {
            for p in sp.ports.iter_mut().flatten() {
                if p.node_port.unwrap_or(0) != 0 {
                    continue;
                }
                match ranges
                    .node_ports
                    .clone()
                    .find(|n| !held.node_ports.contains_key(n))
                {
                    Some(n) => {
                        held.node_ports.insert(n, k.clone());
                        p.node_port = Some(i32::from(n));
                    }
                    None => problems.push(format!(
                        "Service {k}: no free NodePort left in {}-{}",
                        ranges.node_ports.start(),
                        ranges.node_ports.end()
                    )),
                }
            }
        }
        if health {
            match ranges
                .node_ports
                .clone()
                .find(|n| !held.node_ports.contains_key(n))
            {
                Some(n) => {
                    held.node_ports.insert(n, k.clone());
                    sp.health_check_node_port = Some(i32::from(n));
                }
                None => problems.push(format!(
                    "Service {k}: no free NodePort left in {}-{} for the healthCheckNodePort",
                    ranges.node_ports.start(),
                    ranges.node_ports.end()
                )),
            }
        }
        if t == "LoadBalancer" && !lb_given {
            let wanted = sp
                .load_balancer_ip
                .as_deref()
                .and_then(|w| w.parse::<Ipv4Addr>().ok());
            let ip = wanted.or_else(|| lowest_free(&ranges.lb, false, &held.lb_ips));
            match ip {
                Some(ip) => {
                    held.lb_ips.insert(ip, k.clone());
                    s.status = Some(ServiceStatus {
                        load_balancer: Some(LoadBalancerStatus {
                            ingress: Some(vec![LoadBalancerIngress {
                                ip: Some(ip.to_string()),
                                ..Default::default()
                            }]),
                        }),
                        ..s.status.clone().unwrap_or_default()
                    });
                }
                None => problems.push(format!(
                    "Service {k}: no free address left in the LoadBalancer range {}",
                    ranges.lb
                )),
            }
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn svc(name: &str, spec: Value) -> Service {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default"},
            "spec": spec,
        }))
        .unwrap()
    }

    fn ranges() -> Ranges {
        Ranges::new(
            "10.96.0.0/16".parse().unwrap(),
            "192.0.2.0/30".parse().unwrap(),
        )
    }

    fn ip(s: &Service) -> &str {
        s.spec.as_ref().unwrap().cluster_ip.as_deref().unwrap()
    }

    fn node_ports(s: &Service) -> Vec<i32> {
        s.spec
            .as_ref()
            .unwrap()
            .ports
            .iter()
            .flatten()
            .filter_map(|p| p.node_port)
            .collect()
    }

    fn web() -> Value {
        json!({"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]})
    }

    #[test]
    fn cluster_ips_lowest_free_after_the_reserved_first() {
        let a = allocate(&ranges(), &[], &[svc("a", web()), svc("b", web())]).unwrap();
        assert_eq!(ip(&a[0]), "10.96.0.2");
        assert_eq!(ip(&a[1]), "10.96.0.3");
        assert_eq!(
            a[0].spec.as_ref().unwrap().cluster_ips,
            Some(vec!["10.96.0.2".to_string()])
        );
        // Stored ones are skipped; a ClusterIP Service gets no NodePort.
        let b = allocate(&ranges(), &a, &[svc("c", web())]).unwrap();
        assert_eq!(ip(&b[0]), "10.96.0.4");
        assert!(node_ports(&b[0]).is_empty());
    }

    #[test]
    fn a_given_cluster_ip_is_kept_even_outside_the_range() {
        let mut s = web();
        s["clusterIP"] = json!("172.30.0.9");
        let a = allocate(&ranges(), &[], &[svc("a", s)]).unwrap();
        assert_eq!(ip(&a[0]), "172.30.0.9");
        let mut s = web();
        s["clusterIP"] = json!("10.96.0.2");
        let a = allocate(&ranges(), &[], &[svc("a", s), svc("b", web())]).unwrap();
        assert_eq!(ip(&a[0]), "10.96.0.2");
        assert_eq!(ip(&a[1]), "10.96.0.3", "the given one is not handed out");
    }

    #[test]
    fn headless_and_external_name_get_no_cluster_ip() {
        let mut s = web();
        s["clusterIP"] = json!("None");
        let ext = json!({"type": "ExternalName", "externalName": "example.org"});
        let a = allocate(&ranges(), &[], &[svc("h", s), svc("e", ext)]).unwrap();
        assert_eq!(ip(&a[0]), "None");
        assert_eq!(a[1].spec.as_ref().unwrap().cluster_ip, None);
    }

    #[test]
    fn a_taken_cluster_ip_is_refused() {
        let stored = allocate(&ranges(), &[], &[svc("a", web())]).unwrap();
        let mut s = web();
        s["clusterIP"] = json!("10.96.0.2");
        let e = allocate(&ranges(), &stored, &[svc("b", s)]).unwrap_err();
        assert_eq!(
            e,
            vec![
                "Service default/b: spec.clusterIP: 10.96.0.2 is already allocated to Service default/a"
            ]
        );
    }

    #[test]
    fn node_ports_for_node_port_and_load_balancer() {
        let np = json!({"type": "NodePort", "selector": {"app": "web"},
            "ports": [{"name": "http", "port": 80}, {"name": "dns", "port": 53, "protocol": "UDP"}]});
        let lb = json!({"type": "LoadBalancer", "ports": [{"port": 443}]});
        let a = allocate(&ranges(), &[], &[svc("n", np), svc("l", lb)]).unwrap();
        assert_eq!(node_ports(&a[0]), vec![30000, 30001]);
        assert_eq!(node_ports(&a[1]), vec![30002]);
        assert_eq!(ingress_ips(&a[1]), vec!["192.0.2.1"]);
        assert!(ingress_ips(&a[0]).is_empty());
    }

    #[test]
    fn a_taken_or_out_of_range_node_port_is_refused_and_nothing_is_given() {
        let np = |n: i32| json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": n}]});
        let stored = allocate(&ranges(), &[], &[svc("a", np(30080))]).unwrap();
        let e = allocate(&ranges(), &stored, &[svc("ok", web()), svc("b", np(30080))]).unwrap_err();
        assert_eq!(
            e,
            vec![
                "Service default/b: spec.ports[0].nodePort: 30080 is already allocated to Service default/a"
            ]
        );
        let e = allocate(&ranges(), &[], &[svc("c", np(8080))]).unwrap_err();
        assert!(
            e[0].contains("8080 is not in the NodePort range 30000-32767"),
            "{e:?}"
        );
        // Two incoming Services asking for one port.
        let e = allocate(&ranges(), &[], &[svc("x", np(30001)), svc("y", np(30001))]).unwrap_err();
        assert!(
            e[0].contains("already allocated to Service default/x"),
            "{e:?}"
        );
        // A ClusterIP Service may not name one.
        let mut s = web();
        s["ports"][0]["nodePort"] = json!(30005);
        let e = allocate(&ranges(), &[], &[svc("z", s)]).unwrap_err();
        assert!(e[0].contains("only for NodePort and LoadBalancer"), "{e:?}");
    }

    #[test]
    fn a_local_load_balancer_gets_a_health_check_node_port() {
        let lb = |extra: Value| {
            let mut s = json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local",
                "ports": [{"port": 80}]});
            for (k, v) in extra.as_object().unwrap() {
                s[k] = v.clone();
            }
            s
        };
        let hc = |s: &Service| s.spec.as_ref().and_then(|sp| sp.health_check_node_port);
        let a = allocate(&ranges(), &[], &[svc("a", lb(json!({})))]).unwrap();
        // After the Service's own nodePort, from the same range.
        assert_eq!(hc(&a[0]), Some(30001));
        assert_eq!(node_ports(&a[0]), vec![30000]);
        // Kept when applied again; the next Service gets other ports.
        let again = allocate(&ranges(), &a, &[svc("a", lb(json!({})))]).unwrap();
        assert_eq!(hc(&again[0]), Some(30001));
        let b = allocate(&ranges(), &a, &[svc("b", lb(json!({})))]).unwrap();
        assert_eq!((node_ports(&b[0]), hc(&b[0])), (vec![30002], Some(30003)));
        // Cluster policy: none.
        let c = allocate(
            &ranges(),
            &[],
            &[svc("c", lb(json!({"externalTrafficPolicy": "Cluster"})))],
        )
        .unwrap();
        assert_eq!(hc(&c[0]), None);
        // A given one is kept, checked against the range and the holders.
        let d = allocate(
            &ranges(),
            &a,
            &[svc("d", lb(json!({"healthCheckNodePort": 31000})))],
        )
        .unwrap();
        assert_eq!(hc(&d[0]), Some(31000));
        let e = allocate(
            &ranges(),
            &a,
            &[svc("e", lb(json!({"healthCheckNodePort": 30001})))],
        )
        .unwrap_err();
        assert!(
            e[0].contains("already allocated to Service default/a"),
            "{e:?}"
        );
        let e = allocate(
            &ranges(),
            &[],
            &[svc("f", lb(json!({"healthCheckNodePort": 80})))],
        )
        .unwrap_err();
        assert!(e[0].contains("not in the NodePort range"), "{e:?}");
        let e = allocate(
            &ranges(),
            &[],
            &[svc(
                "g",
                lb(json!({"externalTrafficPolicy": "Cluster", "healthCheckNodePort": 31001})),
            )],
        )
        .unwrap_err();
        assert!(
            e[0].contains("only for LoadBalancer Services with externalTrafficPolicy: Local"),
            "{e:?}"
        );
    }

    #[test]
    fn one_service_may_use_a_node_port_for_tcp_and_udp() {
        let s = json!({"type": "NodePort", "ports": [
            {"name": "t", "port": 53, "nodePort": 30053},
            {"name": "u", "port": 53, "protocol": "UDP", "nodePort": 30053}]});
        assert!(allocate(&ranges(), &[], &[svc("dns", s)]).is_ok());
    }

    #[test]
    fn applied_again_keeps_what_it_holds() {
        let np = json!({"type": "LoadBalancer", "ports": [{"port": 80}]});
        let first = allocate(&ranges(), &[], &[svc("a", np.clone())]).unwrap();
        let other = allocate(&ranges(), &first, &[svc("b", np.clone())]).unwrap();
        let stored = [first[0].clone(), other[0].clone()];
        let again = allocate(&ranges(), &stored, &[svc("a", np)]).unwrap();
        assert_eq!(ip(&again[0]), ip(&first[0]));
        assert_eq!(node_ports(&again[0]), node_ports(&first[0]));
        assert_eq!(ingress_ips(&again[0]), ingress_ips(&first[0]));
        // A changed ClusterIP is refused.
        let mut s = web();
        s["clusterIP"] = json!("10.96.0.99");
        let e = allocate(&ranges(), &stored, &[svc("a", s)]).unwrap_err();
        assert!(e[0].contains("may not change"), "{e:?}");
        // Turned into a ClusterIP Service: its NodePort is not carried.
        let back = allocate(&ranges(), &stored, &[svc("a", web())]).unwrap();
        assert!(node_ports(&back[0]).is_empty());
        assert!(ingress_ips(&back[0]).is_empty());
    }

    #[test]
    fn load_balancer_ips_requested_and_exhausted() {
        let lb = |ip: Option<&str>| {
            let mut v = json!({"type": "LoadBalancer", "ports": [{"port": 80}]});
            if let Some(ip) = ip {
                v["loadBalancerIP"] = json!(ip);
            }
            v
        };
        let a = allocate(&ranges(), &[], &[svc("a", lb(Some("192.0.2.2")))]).unwrap();
        assert_eq!(ingress_ips(&a[0]), vec!["192.0.2.2"]);
        let e = allocate(&ranges(), &a, &[svc("b", lb(Some("192.0.2.2")))]).unwrap_err();
        assert!(e[0].contains("already given to Service default/a"), "{e:?}");
        let e = allocate(&ranges(), &[], &[svc("b", lb(Some("10.1.1.1")))]).unwrap_err();
        assert!(
            e[0].contains("not an address of the lab's LoadBalancer range"),
            "{e:?}"
        );
        // A /30 has two hosts.
        let e = allocate(&ranges(), &a, &[svc("c", lb(None)), svc("d", lb(None))]).unwrap_err();
        assert_eq!(
            e,
            vec!["Service default/d: no free address left in the LoadBalancer range 192.0.2.0/30"]
        );
    }

    #[test]
    fn bad_services_are_reported_whole() {
        let s = json!({"type": "Fancy", "ports": [
            {"port": 0}, {"name": "b", "port": 80, "protocol": "ICMP", "targetPort": 70000}]});
        let e = allocate(&ranges(), &[], &[svc("bad", s)]).unwrap_err();
        assert_eq!(e.len(), 5, "{e:#?}");
        assert!(
            e.iter().all(|m| m.starts_with("Service default/bad: ")),
            "{e:?}"
        );
        let e = allocate(&ranges(), &[], &[svc("x", web()), svc("x", web())]).unwrap_err();
        assert!(e[0].contains("twice"), "{e:?}");
    }
}
