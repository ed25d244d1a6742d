//! The columns the API server's tables give each kind, and each
//! object's cells: NAME and AGE for Tartan's kinds (their CRDs declare no
//! printer columns), NAME and CREATED AT for CRDs, and for the built-in
//! kinds the columns of Kubernetes' own printers (Node, Pod, Service,
//! ConfigMap, Secret, Namespace, Lease, NetworkPolicy, EndpointSlice),
//! their cells reduced to what the stand-in's objects carry. Pure.

use serde_json::{Value, json};
use tartan_api::kind::Kind;

use crate::clock::{human_duration, parse_rfc3339};
use crate::resources::Served;

const NAME_DOC: &str = "Name must be unique within a namespace.";
const AGE_DOC: &str =
    "CreationTimestamp is a timestamp representing the server time when this object was created.";

fn column(name: &str, format: &str, description: &str) -> Value {
    let kind = if name == "Created At" {
        "date"
    } else {
        "string"
    };
    json!({"name": name, "type": kind, "format": format, "description": description, "priority": 0})
}

/// The column names (between Name and Age) of a built-in kind.
fn middle(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::Node => &["Status", "Roles"],
        Kind::Pod => &["Ready", "Status", "Restarts"],
        Kind::Service => &["Type", "Cluster-IP", "External-IP", "Port(s)"],
        Kind::ConfigMap => &["Data"],
        Kind::Secret => &["Type", "Data"],
        Kind::Namespace => &["Status"],
        Kind::Lease => &["Holder"],
        Kind::KubeNetworkPolicy => &["Pod-Selector"],
        Kind::EndpointSlice => &["AddressType", "Ports", "Endpoints"],
        _ => &[],
    }
}

/// Columns after Age.
fn last(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::Node => &["Version"],
        _ => &[],
    }
}

pub fn columns(served: &Served) -> Vec<Value> {
    let Some(kind) = served.kind else {
        return vec![
            column("Name", "name", NAME_DOC),
            column("Created At", "", AGE_DOC),
        ];
    };
    let mut cols = vec![column("Name", "name", NAME_DOC)];
    cols.extend(middle(kind).iter().map(|c| column(c, "", "")));
    cols.push(column("Age", "", AGE_DOC));
    cols.extend(last(kind).iter().map(|c| column(c, "", "")));
    cols
}

fn s<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn or_none(v: String) -> String {
    if v.is_empty() { "<none>".into() } else { v }
}

fn count(obj: &Value, keys: &[&str]) -> usize {
    keys.iter()
        .map(|k| obj.get(k).and_then(Value::as_object).map_or(0, |m| m.len()))
        .sum()
}

fn list<'a>(obj: &'a Value, pointer: &str) -> &'a [Value] {
    obj.pointer(pointer)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn node_status(obj: &Value) -> String {
    let ready = list(obj, "/status/conditions")
        .iter()
        .find(|c| c["type"] == "Ready")
        .map(|c| match c["status"].as_str() {
            Some("True") => "Ready",
            Some("False") => "NotReady",
            _ => "Unknown",
        })
        .unwrap_or("Unknown");
    if obj.pointer("/spec/unschedulable") == Some(&Value::Bool(true)) {
        format!("{ready},SchedulingDisabled")
    } else {
        ready.to_string()
    }
}

fn node_roles(obj: &Value) -> String {
    let mut roles: Vec<&str> = obj
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|l| {
            l.iter()
                .filter_map(|(k, v)| {
                    k.strip_prefix("node-role.kubernetes.io/")
                        .or_else(|| (k == "kubernetes.io/role").then(|| v.as_str().unwrap_or("")))
                })
                .filter(|r| !r.is_empty())
                .collect()
        })
        .unwrap_or_default();
    roles.sort();
    roles.dedup();
    or_none(roles.join(","))
}

fn service_ports(obj: &Value) -> String {
    let ports: Vec<String> = list(obj, "/spec/ports")
        .iter()
        .map(|p| {
            let proto = p["protocol"].as_str().unwrap_or("TCP");
            match p["nodePort"].as_i64() {
                Some(np) => format!("{}:{np}/{proto}", p["port"]),
                None => format!("{}/{proto}", p["port"]),
            }
        })
        .collect();
    or_none(ports.join(","))
}

fn external_ips(obj: &Value) -> String {
    let strings = |p: &str| -> Vec<String> {
        list(obj, p)
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect()
    };
    match s(obj, "/spec/type") {
        "ExternalName" => s(obj, "/spec/externalName").to_string(),
        "LoadBalancer" => {
            let mut ips = strings("/spec/externalIPs");
            ips.extend(
                list(obj, "/status/loadBalancer/ingress")
                    .iter()
                    .filter_map(|i| {
                        i["ip"]
                            .as_str()
                            .or(i["hostname"].as_str())
                            .map(str::to_string)
                    }),
            );
            if ips.is_empty() {
                "<pending>".into()
            } else {
                ips.join(",")
            }
        }
        _ => or_none(strings("/spec/externalIPs").join(",")),
    }
}

/// A label selector as Kubernetes prints it: `app=web,tier in (a,b)`,
/// requirements sorted by key; `<none>` when it selects everything.
fn selector(obj: &Value, pointer: &str) -> String {
    let mut parts: Vec<(String, String)> = obj
        .pointer(&format!("{pointer}/matchLabels"))
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), format!("{k}={}", v.as_str().unwrap_or_default())))
                .collect()
        })
        .unwrap_or_default();
    for e in list(obj, &format!("{pointer}/matchExpressions")) {
        let key = e["key"].as_str().unwrap_or_default();
        let values: Vec<&str> = list(e, "/values")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let text = match e["operator"].as_str().unwrap_or_default() {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            other => format!("{key} {other}"),
        };
        parts.push((key.to_string(), text));
    }
    parts.sort();
    or_none(
        parts
            .into_iter()
            .map(|(_, t)| t)
            .collect::<Vec<_>>()
            .join(","),
    )
}

fn pod_cells(obj: &Value) -> Vec<Value> {
    let statuses = list(obj, "/status/containerStatuses");
    let ready = statuses.iter().filter(|c| c["ready"] == true).count();
    let total = list(obj, "/spec/containers").len();
    let restarts: i64 = statuses
        .iter()
        .filter_map(|c| c["restartCount"].as_i64())
        .sum();
    let status = if obj.pointer("/metadata/deletionTimestamp").is_some() {
        "Terminating"
    } else if !s(obj, "/status/reason").is_empty() {
        s(obj, "/status/reason")
    } else {
        s(obj, "/status/phase")
    };
    vec![
        format!("{ready}/{total}").into(),
        status.into(),
        restarts.into(),
    ]
}

fn middle_cells(kind: Kind, obj: &Value) -> Vec<Value> {
    match kind {
        Kind::Node => vec![node_status(obj).into(), node_roles(obj).into()],
        Kind::Pod => pod_cells(obj),
        Kind::Service => {
            let t = s(obj, "/spec/type");
            vec![
                if t.is_empty() { "ClusterIP" } else { t }.into(),
                or_none(s(obj, "/spec/clusterIP").to_string()).into(),
                external_ips(obj).into(),
                service_ports(obj).into(),
            ]
        }
        Kind::ConfigMap => vec![count(obj, &["data", "binaryData"]).into()],
        Kind::Secret => vec![
            s(obj, "/type").into(),
            count(obj, &["data", "stringData"]).into(),
        ],
        Kind::Namespace => {
            let phase = s(obj, "/status/phase");
            vec![if phase.is_empty() { "Active" } else { phase }.into()]
        }
        Kind::Lease => vec![s(obj, "/spec/holderIdentity").into()],
        Kind::KubeNetworkPolicy => vec![selector(obj, "/spec/podSelector").into()],
        Kind::EndpointSlice => {
            let ports: Vec<String> = list(obj, "/ports")
                .iter()
                .filter_map(|p| p["port"].as_i64().map(|n| n.to_string()))
                .collect();
            let addrs: Vec<&str> = list(obj, "/endpoints")
                .iter()
                .flat_map(|e| list(e, "/addresses"))
                .filter_map(Value::as_str)
                .collect();
            vec![
                s(obj, "/addressType").into(),
                or_none(ports.join(",")).into(),
                or_none(addrs.join(",")).into(),
            ]
        }
        _ => Vec::new(),
    }
}

/// The cells of `obj` under [`columns`], at `now` (seconds).
pub fn cells(served: &Served, obj: &Value, now: i64) -> Vec<Value> {
    let name = obj.pointer("/metadata/name").cloned().unwrap_or_default();
    let created = obj
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str);
    let Some(kind) = served.kind else {
        return vec![name, created.unwrap_or_default().into()];
    };
    let age = created
        .and_then(parse_rfc3339)
        .map_or_else(|| "<unknown>".to_string(), |t| human_duration(now - t));
    let mut out = vec![name];
    out.extend(middle_cells(kind, obj));
    out.push(age.into());
    if kind == Kind::Node {
        out.push(s(obj, "/status/nodeInfo/kubeletVersion").into());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::by_type;

    fn names(served: &Served) -> Vec<String> {
        columns(served)
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn built_in_kinds_print_kubernetes_columns() {
        let node = by_type("v1", "Node").unwrap();
        assert_eq!(names(&node), ["Name", "Status", "Roles", "Age", "Version"]);
        let n = json!({"metadata":{"name":"n1","labels":{"node-role.kubernetes.io/control-plane":""}},
            "spec":{"unschedulable":true},
            "status":{"conditions":[{"type":"Ready","status":"True"}],"nodeInfo":{"kubeletVersion":"v1.32.0"}}});
        assert_eq!(
            cells(&node, &n, 0),
            [
                json!("n1"),
                json!("Ready,SchedulingDisabled"),
                json!("control-plane"),
                json!("<unknown>"),
                json!("v1.32.0")
            ]
        );
        let svc = by_type("v1", "Service").unwrap();
        let s = json!({"metadata":{"name":"web"},"spec":{"type":"LoadBalancer","clusterIP":"10.96.0.10",
            "ports":[{"port":80,"nodePort":30080,"protocol":"TCP"},{"port":53,"protocol":"UDP"}]}});
        assert_eq!(
            cells(&svc, &s, 0)[1..5],
            [
                json!("LoadBalancer"),
                json!("10.96.0.10"),
                json!("<pending>"),
                json!("80:30080/TCP,53/UDP")
            ]
        );
        let pod = by_type("v1", "Pod").unwrap();
        let p = json!({"metadata":{"name":"p"},"spec":{"containers":[{"name":"a"},{"name":"b"}]},
            "status":{"phase":"Running","containerStatuses":[{"ready":true,"restartCount":2},{"ready":false,"restartCount":1}]}});
        assert_eq!(
            cells(&pod, &p, 0)[1..4],
            [json!("1/2"), json!("Running"), json!(3)]
        );
        let np = by_type("networking.k8s.io/v1", "NetworkPolicy").unwrap();
        let sel = json!({"metadata":{"name":"np"},"spec":{"podSelector":{"matchLabels":{"app":"web"},
            "matchExpressions":[{"key":"tier","operator":"In","values":["a","b"]},{"key":"x","operator":"DoesNotExist"}]}}});
        assert_eq!(cells(&np, &sel, 0)[1], json!("app=web,tier in (a,b),!x"));
        let all = json!({"metadata":{"name":"np"},"spec":{"podSelector":{}}});
        assert_eq!(cells(&np, &all, 0)[1], json!("<none>"));
        let pool = by_type("tartan.dev/v1", "IPPool").unwrap();
        assert_eq!(names(&pool), ["Name", "Age"]);
    }
}
