//! Pods in a lab, as a kubelet would make them: the Namespace and Pod
//! objects, a network namespace, and the CNI plugin called with the node's
//! conflist inside the node.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use serde_json::{Value, json};
use tartan_api::store::StoreError;
use tartan_api::store::typed::TypedStore;

use super::runtime::runtime;
use super::state::{self, LabState};
use super::{kubelet, services};
use crate::cni::{Call, Runtime};
use crate::netns::ip;

/// `NS/NAME` (or `NAME` in `default`).
pub fn parse_ref(s: &str) -> Result<(String, String)> {
    let (ns, name) = s.split_once('/').unwrap_or(("default", s));
    for part in [ns, name] {
        tartan_api::resources::common::dns_label(part)
            .map_err(|e| anyhow::anyhow!("pod {s:?}: {e}"))?;
    }
    Ok((ns.to_string(), name.to_string()))
}

/// `k=v,k=v`.
pub fn parse_labels(s: &str) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for kv in s.split(',').filter(|x| !x.is_empty()) {
        let (k, v) = kv
            .split_once('=')
            .with_context(|| format!("label {kv:?} is not key=value"))?;
        out.insert(k.to_string(), v.to_string());
    }
    Ok(out)
}

/// `[NAME=]PORT[/PROTOCOL],…`: the container ports of the pod's one
/// container, for Services whose targetPort names a port.
pub fn parse_ports(s: &str) -> Result<Vec<Value>> {
    let mut out = Vec::new();
    for item in s.split(',').filter(|x| !x.is_empty()) {
        let (name, rest) = match item.split_once('=') {
            Some((n, r)) => (Some(n), r),
            None => (None, item),
        };
        let (port, proto) = rest.split_once('/').unwrap_or((rest, "TCP"));
        let proto = proto.to_ascii_uppercase();
        let port: u16 = port.parse().ok().filter(|p| *p > 0).with_context(|| {
            format!("port {item:?}: give [NAME=]PORT[/PROTOCOL], e.g. http=8080/TCP")
        })?;
        if !matches!(proto.as_str(), "TCP" | "UDP" | "SCTP") {
            bail!("port {item:?}: the protocol is TCP, UDP or SCTP");
        }
        let mut p = json!({"containerPort": port, "protocol": proto});
        if let Some(n) = name {
            if n.is_empty() || n.len() > 15 {
                bail!("port {item:?}: a port name has 1 to 15 characters");
            }
            p["name"] = json!(n);
        }
        out.push(p);
    }
    Ok(out)
}

fn result_path(lab: &str, ns: &str, pod: &str) -> PathBuf {
    state::dir(lab)
        .join("pods")
        .join(format!("{ns}_{pod}.json"))
}

/// What `pod add` records, for `del`, `ip` and `status`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct PodRecord {
    pub namespace: String,
    pub name: String,
    pub node: String,
    pub netns: String,
    pub container_id: String,
    pub result: Value,
}

impl PodRecord {
    pub fn address(&self) -> Option<String> {
        self.result["ips"][0]["address"]
            .as_str()
            .map(|a| a.split('/').next().unwrap_or(a).to_string())
    }

    /// The pod's IPv6 address, when it has one.
    pub fn address6(&self) -> Option<String> {
        self.result["ips"]
            .as_array()?
            .iter()
            .filter_map(|ip| ip["address"].as_str())
            .map(|a| a.split('/').next().unwrap_or(a))
            .find(|a| a.contains(':'))
            .map(String::from)
    }

    fn call(&self) -> Call {
        Call::for_pod(&self.container_id, &self.netns, &self.namespace, &self.name)
    }
}

pub fn load(lab: &str, ns: &str, pod: &str) -> Result<PodRecord> {
    let p = result_path(lab, ns, pod);
    let text =
        std::fs::read_to_string(&p).with_context(|| format!("no pod {ns}/{pod} in lab {lab}"))?;
    Ok(serde_json::from_str(&text)?)
}

pub fn list(lab: &str) -> Vec<PodRecord> {
    let dir = state::dir(lab).join("pods");
    let mut out: Vec<PodRecord> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| serde_json::from_str(&std::fs::read_to_string(e.path()).ok()?).ok())
        .collect();
    out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    out
}

fn runtime_for(st: &LabState, node: &str) -> Result<Runtime> {
    let n = st.node(node)?;
    let conflist: Value = serde_json::from_str(&std::fs::read_to_string(&n.conflist)?)?;
    Ok(Runtime::new(conflist).in_netns(&n.netns))
}

pub fn add(lab: &str, pod_ref: &str, node: &str, labels: &str) -> Result<PodRecord> {
    add_with_ports(lab, pod_ref, node, labels, "")
}

/// A pod's own DNS name (`spec.hostname`, `spec.subdomain`), as a
/// StatefulSet sets them: with a subdomain naming a headless Service, the
/// pod is `HOSTNAME.SUBDOMAIN.NS.svc.<zone>`.
#[derive(Clone, Debug, Default)]
pub struct PodNames {
    pub hostname: Option<String>,
    pub subdomain: Option<String>,
}

/// A DNS-1123 label, as the API requires of a pod's hostname and
/// subdomain: 1 to 63 of `a-z`, `0-9`, `-`, starting and ending
/// alphanumeric.
pub fn check_label(what: &str, s: &str) -> Result<()> {
    let ok = (1..=63).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-');
    if !ok {
        bail!("{what} {s:?}: 1 to 63 of a-z, 0-9 and '-', not starting or ending with '-'");
    }
    Ok(())
}

/// [`add`], the container declaring `ports` ([`parse_ports`]). Once wired
/// the Pod reports Running and Ready with its address, as a kubelet
/// would, and the EndpointSlices follow.
pub fn add_with_ports(
    lab: &str,
    pod_ref: &str,
    node: &str,
    labels: &str,
    ports: &str,
) -> Result<PodRecord> {
    add_named(lab, pod_ref, node, labels, ports, &PodNames::default())
}

/// [`add_with_ports`] with a hostname and subdomain in the Pod's spec.
pub fn add_named(
    lab: &str,
    pod_ref: &str,
    node: &str,
    labels: &str,
    ports: &str,
    names: &PodNames,
) -> Result<PodRecord> {
    let st = LabState::load(lab)?;
    let (ns, name) = parse_ref(pod_ref)?;
    let labels = parse_labels(labels)?;
    let ports = parse_ports(ports)?;
    if let Some(h) = &names.hostname {
        check_label("hostname", h)?;
    }
    if let Some(s) = &names.subdomain {
        check_label("subdomain", s)?;
    }
    st.node(node)?;
    if result_path(lab, &ns, &name).exists() {
        bail!("pod {ns}/{name} exists in lab {lab}");
    }
    let rt = runtime()?;
    rt.block_on(async {
        let store = super::store::open(&st, std::time::Duration::from_secs(10)).await?;
        let namespace: Namespace = serde_json::from_value(json!({
            "metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}}
        }))?;
        match store.create_typed(&namespace).await {
            Ok(_) | Err(StoreError::AlreadyExists(_)) => {}
            Err(e) => return Err(anyhow::Error::from(e)),
        }
        let mut pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"nodeName": node, "containers": [{"name": "main", "image": "none", "ports": ports}]}
        }))?;
        if let Some(spec) = pod.spec.as_mut() {
            spec.hostname = names.hostname.clone();
            spec.subdomain = names.subdomain.clone();
        }
        store
            .create_typed(&pod)
            .await
            .with_context(|| format!("create Pod {ns}/{name}"))?;
        Ok(())
    })?;
    let netns = state::pod_netns(lab, &ns, &name);
    ip(&["netns", "add", &netns])?;
    ip(&["-n", &netns, "link", "set", "lo", "up"])?;
    super::dns::write_pod_resolv(&st, &netns, &ns)?;
    let mut rec = PodRecord {
        namespace: ns.clone(),
        name: name.clone(),
        node: node.to_string(),
        netns: netns.clone(),
        container_id: format!("lab_{ns}_{name}"),
        result: Value::Null,
    };
    match runtime_for(&st, node).and_then(|r| r.add(&rec.call())) {
        Ok(r) => rec.result = r,
        Err(e) => {
            let _ = ip(&["netns", "del", &netns]);
            super::dns::remove_pod_resolv(&netns);
            let _ = delete_pod_object(&st, &ns, &name);
            return Err(e.context(format!("CNI ADD of {ns}/{name} on {node}")));
        }
    }
    let p = result_path(lab, &ns, &name);
    std::fs::create_dir_all(p.parent().unwrap_or(&p))?;
    std::fs::write(&p, serde_json::to_string_pretty(&rec)?)?;
    let pod_ip = rec.address().unwrap_or_default();
    let pod_ip6 = rec.address6();
    let host_ip = st.node(node)?.address.to_string();
    edit_then_sync(&st, &ns, &name, true, |v| {
        kubelet::running_status(v, &pod_ip, pod_ip6.as_deref(), &host_ip)
    })
    .with_context(|| format!("pod {ns}/{name} is wired, but its status was not written"))?;
    Ok(rec)
}

/// Changes the Pod object, then brings the EndpointSlices in line.
fn edit_then_sync(
    st: &LabState,
    ns: &str,
    name: &str,
    status: bool,
    f: impl Fn(&mut Value),
) -> Result<()> {
    let _l = services::lock(&st.name)?;
    runtime()?.block_on(async {
        let store = super::store::open(st, std::time::Duration::from_secs(10)).await?;
        kubelet::edit_pod(&*store, ns, name, status, f).await?;
        Ok::<_, anyhow::Error>(tartan_controllers::services::sync_slices(&*store).await?)
    })?;
    Ok(())
}

/// Sets the pod's Ready condition (a failing readiness probe, or a
/// passing one again); its endpoints follow.
pub fn set_ready(lab: &str, pod_ref: &str, ready: bool) -> Result<()> {
    let st = LabState::load(lab)?;
    let (ns, name) = parse_ref(pod_ref)?;
    load(lab, &ns, &name)?;
    edit_then_sync(&st, &ns, &name, true, |v| kubelet::set_ready(v, ready))
}

/// Begins the pod's graceful deletion: it keeps running and serving the
/// connections it has, its endpoints turn terminating (no new
/// connections while others are ready); `pod del` ends it.
pub fn terminate(lab: &str, pod_ref: &str) -> Result<()> {
    let st = LabState::load(lab)?;
    let (ns, name) = parse_ref(pod_ref)?;
    load(lab, &ns, &name)?;
    let now = std::time::SystemTime::now();
    edit_then_sync(&st, &ns, &name, false, |v| kubelet::set_terminating(v, now))
}

fn delete_pod_object(st: &LabState, ns: &str, name: &str) -> Result<()> {
    runtime()?.block_on(async {
        let store = super::store::open(st, std::time::Duration::from_secs(10)).await?;
        match store.delete_typed::<Pod>(Some(ns), name, None).await {
            Ok(()) | Err(StoreError::NotFound(_)) => Ok(()),
            Err(e) => Err(anyhow::Error::from(e)),
        }
    })
}

pub fn del(lab: &str, pod_ref: &str) -> Result<()> {
    let st = LabState::load(lab)?;
    let (ns, name) = parse_ref(pod_ref)?;
    let rec = load(lab, &ns, &name)?;
    runtime_for(&st, &rec.node)?
        .del(&rec.call(), Some(&rec.result))
        .with_context(|| format!("CNI DEL of {ns}/{name}"))?;
    let _ = ip(&["netns", "del", &rec.netns]);
    super::dns::remove_pod_resolv(&rec.netns);
    delete_pod_object(&st, &ns, &name)?;
    std::fs::remove_file(result_path(lab, &ns, &name))?;
    services::sync(&st)?;
    Ok(())
}

/// Run `cmd` in the pod's network namespace; its exit code.
pub fn exec(lab: &str, pod_ref: &str, cmd: &[String]) -> Result<i32> {
    let (ns, name) = parse_ref(pod_ref)?;
    let rec = load(lab, &ns, &name)?;
    let Some((prog, args)) = cmd.split_first() else {
        bail!("no command; tartan-lab exec NS/NAME -- CMD [ARGS…]");
    };
    let status = std::process::Command::new("ip")
        .args(["netns", "exec", &rec.netns, prog])
        .args(args)
        .status()
        .with_context(|| format!("run {prog}"))?;
    Ok(status.code().unwrap_or(1))
}
