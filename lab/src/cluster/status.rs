//! `tartan-lab status`: nodes, their daemons and BGP sessions, the pods.

use serde_json::{Value, json};

use super::detached;
use super::pod;
use super::state::LabState;
use super::up::established;

pub fn status(st: &LabState) -> Value {
    let nodes: Vec<Value> = st
        .nodes
        .iter()
        .map(|n| {
            json!({
                "name": n.name,
                "address": n.address.to_string(),
                "netns": n.netns,
                "bgpd": n.bgpd.as_ref().is_some_and(detached::alive),
                "felix": n.felix.as_ref().is_some_and(detached::alive),
                "bgpSessionsEstablished": established(&n.bgp_socket),
            })
        })
        .collect();
    let pods: Vec<Value> = pod::list(&st.name)
        .iter()
        .map(|p| {
            json!({
                "namespace": p.namespace,
                "name": p.name,
                "node": p.node,
                "address": p.address(),
            })
        })
        .collect();
    let mut v = json!({
        "name": st.name,
        "datastore": st.datastore,
        "underlay": st.subnet,
        "etcd": st.etcd.as_ref().is_some_and(detached::alive),
        "nodes": nodes,
        "pods": pods,
    });
    if let Some(a) = &st.apiserver {
        v["apiServer"] = json!({"url": a.url, "up": detached::alive(&a.proc)});
    }
    v
}

pub fn render(v: &Value) -> String {
    let up = |b: &Value| {
        if b.as_bool() == Some(true) {
            "up"
        } else {
            "DOWN"
        }
    };
    let store = match v.get("apiServer") {
        Some(a) => format!(
            "api server {} {}",
            a["url"].as_str().unwrap_or(""),
            up(&a["up"])
        ),
        None => format!("etcd {}", up(&v["etcd"])),
    };
    let mut out = format!(
        "lab {}  datastore {}  underlay {}  {store}\n",
        v["name"].as_str().unwrap_or(""),
        v["datastore"].as_str().unwrap_or(""),
        v["underlay"].as_str().unwrap_or(""),
    );
    out.push_str("NODE       ADDRESS          BGPD   FELIX  SESSIONS\n");
    for n in v["nodes"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "{:<10} {:<16} {:<6} {:<6} {}\n",
            n["name"].as_str().unwrap_or(""),
            n["address"].as_str().unwrap_or(""),
            up(&n["bgpd"]),
            up(&n["felix"]),
            n["bgpSessionsEstablished"]
        ));
    }
    let pods = v["pods"].as_array().cloned().unwrap_or_default();
    if !pods.is_empty() {
        out.push_str("POD                  NODE       ADDRESS\n");
        for p in pods {
            out.push_str(&format!(
                "{:<20} {:<10} {}\n",
                format!(
                    "{}/{}",
                    p["namespace"].as_str().unwrap_or(""),
                    p["name"].as_str().unwrap_or("")
                ),
                p["node"].as_str().unwrap_or(""),
                p["address"].as_str().unwrap_or("-")
            ));
        }
    }
    out
}
