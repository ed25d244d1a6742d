//! The `get` table: which columns each kind shows, and how cells are read
//! from the stored object (fields are camelCase under `spec`).

use serde_json::Value;
use tartan_api::Kind;
use tartan_api::store::DynamicObject;

use crate::human::{duration, truncate};
use crate::table::Table;

/// The annotation holding a node's BGP IPv4 address (`192.0.2.10/24`).
pub const NODE_IPV4_ANNOTATION: &str = "tartan.dev/bgp-ipv4-address";
/// The annotation holding a node's BGP IPv6 address.
pub const NODE_IPV6_ANNOTATION: &str = "tartan.dev/bgp-ipv6-address";

/// How to draw the table.
#[derive(Clone, Copy, Debug)]
pub struct TableOptions {
    /// `-o wide`: the extra columns too.
    pub wide: bool,
    /// `-A`: a NAMESPACE column (namespaced kinds only).
    pub namespace: bool,
    /// Now, in Unix seconds, for AGE.
    pub now: i64,
}

type Cell = fn(&DynamicObject) -> String;

/// One kind-specific column.
struct Column {
    header: &'static str,
    cell: Cell,
    wide_only: bool,
}

const fn col(header: &'static str, cell: Cell) -> Column {
    Column {
        header,
        cell,
        wide_only: false,
    }
}

const fn wide(header: &'static str, cell: Cell) -> Column {
    Column {
        header,
        cell,
        wide_only: true,
    }
}

/// A value as a table cell: text as is, lists joined with commas, `-`
/// when absent.
pub fn cell(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "-".into(),
        Some(Value::String(s)) if s.is_empty() => "-".into(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(a)) if a.is_empty() => "-".into(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| match x {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect::<Vec<_>>()
            .join(","),
        Some(other) => other.to_string(),
    }
}

fn spec<'a>(o: &'a DynamicObject, field: &str) -> Option<&'a Value> {
    o.data.get("spec")?.get(field)
}

fn annotation(o: &DynamicObject, key: &str) -> String {
    let v = o.metadata.annotations.as_ref().and_then(|a| a.get(key));
    v.filter(|s| !s.is_empty())
        .cloned()
        .unwrap_or_else(|| "-".into())
}

/// The number of items of a list field (rules, CIDRs), `0` when absent.
fn count(o: &DynamicObject, field: &str) -> String {
    spec(o, field)
        .and_then(Value::as_array)
        .map_or(0, Vec::len)
        .to_string()
}

/// The widest NETS cell: a network set may hold thousands of networks,
/// and `-o yaml` shows them all.
const NETS_WIDTH: usize = 48;

/// The CIDRs of a list of `{cidr: …}` (BGPConfiguration's service lists).
fn cidrs(o: &DynamicObject, field: &str) -> String {
    let list: Vec<Value> = spec(o, field)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|x| x.get("cidr").cloned()).collect())
        .unwrap_or_default();
    cell(Some(&Value::Array(list)))
}

/// IPAM block usage, `used/size`, from its allocations list.
fn block_usage(o: &DynamicObject) -> String {
    match spec(o, "allocations").and_then(Value::as_array) {
        Some(a) => format!("{}/{}", a.iter().filter(|x| !x.is_null()).count(), a.len()),
        None => "-".into(),
    }
}

fn columns(kind: Kind) -> Vec<Column> {
    match kind {
        Kind::IpPool => vec![
            col("CIDR", |o| cell(spec(o, "cidr"))),
            col("BLOCKSIZE", |o| cell(spec(o, "blockSize"))),
            col("IPIP", |o| cell(spec(o, "ipipMode"))),
            col("VXLAN", |o| cell(spec(o, "vxlanMode"))),
            col("NAT", |o| cell(spec(o, "natOutgoing"))),
            col("DISABLED", |o| cell(spec(o, "disabled"))),
            wide("NODESELECTOR", |o| cell(spec(o, "nodeSelector"))),
        ],
        Kind::IpReservation => vec![col("CIDRS", |o| cell(spec(o, "reservedCIDRs")))],
        Kind::LoadBalancerIpPool => vec![
            col("CIDRS", |o| cell(spec(o, "cidrs"))),
            col("AUTOASSIGN", |o| cell(spec(o, "autoAssign"))),
            wide("SERVICESELECTOR", |o| cell(spec(o, "serviceSelector"))),
        ],
        Kind::Lease => vec![
            col("HOLDER", |o| cell(spec(o, "holderIdentity"))),
            wide("RENEWED", |o| cell(spec(o, "renewTime"))),
        ],
        Kind::BgpConfiguration => vec![
            col("ASN", |o| cell(spec(o, "asNumber"))),
            col("MESH", |o| cell(spec(o, "nodeToNodeMeshEnabled"))),
            col("PORT", |o| cell(spec(o, "listenPort"))),
            wide("CLUSTERIPS", |o| cidrs(o, "serviceClusterIPs")),
            wide("EXTERNALIPS", |o| cidrs(o, "serviceExternalIPs")),
            wide("LBIPS", |o| cidrs(o, "serviceLoadBalancerIPs")),
        ],
        Kind::BgpPeer => vec![
            col("NODE", |o| cell(spec(o, "node"))),
            col("PEERIP", |o| cell(spec(o, "peerIP"))),
            col("ASN", |o| cell(spec(o, "asNumber"))),
            wide("NODESELECTOR", |o| cell(spec(o, "nodeSelector"))),
            wide("PEERSELECTOR", |o| cell(spec(o, "peerSelector"))),
            wide("FILTERS", |o| cell(spec(o, "filters"))),
        ],
        Kind::NetworkPolicy | Kind::GlobalNetworkPolicy => vec![
            col("ORDER", |o| cell(spec(o, "order"))),
            col("SELECTOR", |o| cell(spec(o, "selector"))),
            wide("TYPES", |o| cell(spec(o, "types"))),
            wide("INGRESS", |o| count(o, "ingress")),
            wide("EGRESS", |o| count(o, "egress")),
        ],
        Kind::NetworkSet | Kind::GlobalNetworkSet => vec![
            col("NETS", |o| truncate(&cell(spec(o, "nets")), NETS_WIDTH)),
            wide("COUNT", |o| count(o, "nets")),
        ],
        Kind::HostEndpoint => vec![
            col("NODE", |o| cell(spec(o, "node"))),
            col("INTERFACE", |o| cell(spec(o, "interfaceName"))),
            col("EXPECTEDIPS", |o| cell(spec(o, "expectedIPs"))),
            wide("PORTS", |o| count(o, "ports")),
        ],
        Kind::IpamBlock => vec![
            col("CIDR", |o| cell(spec(o, "cidr"))),
            col("AFFINITY", |o| cell(spec(o, "affinity"))),
            wide("USED", block_usage),
        ],
        Kind::IpamHandle => vec![col("HANDLE", |o| cell(spec(o, "handleID")))],
        Kind::BlockAffinity => vec![
            col("NODE", |o| cell(spec(o, "node"))),
            col("CIDR", |o| cell(spec(o, "cidr"))),
            col("STATE", |o| cell(spec(o, "state"))),
            wide("DELETED", |o| cell(spec(o, "deleted"))),
        ],
        Kind::Node => vec![
            col("ADDRESS", |o| annotation(o, NODE_IPV4_ANNOTATION)),
            wide("IPV6ADDRESS", |o| annotation(o, NODE_IPV6_ANNOTATION)),
            wide("PODCIDR", |o| cell(spec(o, "podCIDR"))),
        ],
        Kind::Pod => vec![
            col("NODE", |o| cell(spec(o, "nodeName"))),
            wide("IP", |o| {
                cell(o.data.get("status").and_then(|s| s.get("podIP")))
            }),
        ],
        Kind::Service => vec![
            col("TYPE", |o| cell(spec(o, "type"))),
            col("CLUSTER-IP", |o| cell(spec(o, "clusterIP"))),
        ],
        Kind::WorkloadEndpoint => vec![
            col("NODE", |o| cell(spec(o, "node"))),
            col("POD", |o| cell(spec(o, "pod"))),
            col("NETWORKS", |o| cell(spec(o, "ipNetworks"))),
            col("INTERFACE", |o| cell(spec(o, "interfaceName"))),
            wide("MAC", |o| cell(spec(o, "mac"))),
        ],
        // Kinds with nothing worth a column beyond NAME and AGE (and any
        // kind added later until it is given some).
        _ => Vec::new(),
    }
}

/// `45s`, `3d2h`… since creation; `-` when unknown.
fn age(o: &DynamicObject, now: i64) -> String {
    match &o.metadata.creation_timestamp {
        Some(t) => duration(u64::try_from(now - t.0.as_second()).unwrap_or(0)),
        None => "-".into(),
    }
}

/// The table for `objs` (all of `kind`); empty text when there are none.
pub fn render(kind: Kind, objs: &[DynamicObject], opts: TableOptions) -> String {
    if objs.is_empty() {
        return String::new();
    }
    let show_ns = opts.namespace && kind.info().namespaced;
    let cols: Vec<Column> = columns(kind)
        .into_iter()
        .filter(|c| opts.wide || !c.wide_only)
        .collect();
    let mut headers = Vec::new();
    if show_ns {
        headers.push("NAMESPACE");
    }
    headers.push("NAME");
    headers.extend(cols.iter().map(|c| c.header));
    headers.push("AGE");
    if opts.wide {
        headers.push("LABELS");
    }
    let mut table = Table::new(headers);
    for o in objs {
        let mut row = Vec::new();
        if show_ns {
            row.push(o.metadata.namespace.clone().unwrap_or_default());
        }
        row.push(o.metadata.name.clone().unwrap_or_default());
        row.extend(cols.iter().map(|c| (c.cell)(o)));
        row.push(age(o, opts.now));
        if opts.wide {
            row.push(labels(o));
        }
        table.row(row);
    }
    table.render()
}

/// `a=b,c=d`, or `-`.
fn labels(o: &DynamicObject) -> String {
    match &o.metadata.labels {
        Some(l) if !l.is_empty() => l
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(","),
        _ => "-".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> DynamicObject {
        serde_json::from_value(v).unwrap()
    }

    const NOW: i64 = 1_700_000_000;

    fn opts(wide: bool, namespace: bool) -> TableOptions {
        TableOptions {
            wide,
            namespace,
            now: NOW,
        }
    }

    fn pool() -> DynamicObject {
        obj(json!({
            "apiVersion": "tartan.dev/v1", "kind": "IPPool",
            "metadata": {"name": "pool-a", "creationTimestamp": "2023-11-14T22:11:40Z",
                         "labels": {"env": "prod"}},
            "spec": {"cidr": "10.244.0.0/16", "blockSize": 26, "ipipMode": "CrossSubnet",
                     "natOutgoing": true, "nodeSelector": "all()"}
        }))
    }

    #[test]
    fn ip_pool_columns() {
        let text = render(Kind::IpPool, &[pool()], opts(false, false));
        let lines: Vec<&str> = text.lines().collect();
        let header: Vec<&str> = lines[0].split_whitespace().collect();
        assert_eq!(
            header,
            [
                "NAME",
                "CIDR",
                "BLOCKSIZE",
                "IPIP",
                "VXLAN",
                "NAT",
                "DISABLED",
                "AGE"
            ]
        );
        let row: Vec<&str> = lines[1].split_whitespace().collect();
        // Created 2023-11-14T22:11:40Z = NOW - 100 s.
        assert_eq!(
            row,
            [
                "pool-a",
                "10.244.0.0/16",
                "26",
                "CrossSubnet",
                "-",
                "true",
                "-",
                "1m40s"
            ]
        );
    }

    #[test]
    fn wide_adds_columns_and_labels() {
        let text = render(Kind::IpPool, &[pool()], opts(true, false));
        let header: Vec<&str> = text.lines().next().unwrap().split_whitespace().collect();
        assert!(header.contains(&"NODESELECTOR") && header.ends_with(&["AGE", "LABELS"]));
        assert!(
            text.contains("all()") && text.contains("env=prod"),
            "{text}"
        );
    }

    #[test]
    fn namespace_column_only_for_namespaced_kinds() {
        let np = obj(json!({
            "apiVersion": "tartan.dev/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "allow", "namespace": "team"},
            "spec": {"order": 10, "selector": "app == 'web'", "ingress": [{}, {}]}
        }));
        let text = render(
            Kind::NetworkPolicy,
            std::slice::from_ref(&np),
            opts(false, true),
        );
        assert!(
            text.starts_with("NAMESPACE   NAME    ORDER   SELECTOR"),
            "{text}"
        );
        assert!(
            text.lines()
                .nth(1)
                .unwrap()
                .starts_with("team        allow   10      app == 'web'")
        );
        let text = render(Kind::NetworkPolicy, &[np], opts(true, false));
        assert!(
            text.contains("INGRESS") && !text.contains("NAMESPACE"),
            "{text}"
        );
        let row: Vec<&str> = text
            .lines()
            .nth(1)
            .unwrap()
            .split("   ")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        assert_eq!(
            row,
            ["allow", "10", "app == 'web'", "-", "2", "0", "-", "-"]
        );
        let text = render(Kind::IpPool, &[pool()], opts(false, true));
        assert!(!text.contains("NAMESPACE"));
    }

    #[test]
    fn node_address_comes_from_its_annotation() {
        let n = obj(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n1", "annotations": {NODE_IPV4_ANNOTATION: "192.0.2.10/24"}}
        }));
        let text = render(Kind::Node, &[n], opts(false, false));
        assert_eq!(
            text,
            "NAME   ADDRESS         AGE\nn1     192.0.2.10/24   -\n"
        );
    }

    #[test]
    fn per_kind_headers() {
        let header = |kind: Kind| {
            let o = tartan_api::examples::example(kind, "x");
            let text = render(kind, &[o], opts(false, false));
            text.lines()
                .next()
                .unwrap()
                .split_whitespace()
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            header(Kind::BgpPeer),
            ["NAME", "NODE", "PEERIP", "ASN", "AGE"]
        );
        assert_eq!(
            header(Kind::BgpConfiguration),
            ["NAME", "ASN", "MESH", "PORT", "AGE"]
        );
        assert_eq!(header(Kind::IpamBlock), ["NAME", "CIDR", "AFFINITY", "AGE"]);
        assert_eq!(
            header(Kind::BlockAffinity),
            ["NAME", "NODE", "CIDR", "STATE", "AGE"]
        );
        assert_eq!(
            header(Kind::GlobalNetworkPolicy),
            ["NAME", "ORDER", "SELECTOR", "AGE"]
        );
        assert_eq!(header(Kind::NetworkSet), ["NAME", "NETS", "AGE"]);
        assert_eq!(header(Kind::GlobalNetworkSet), ["NAME", "NETS", "AGE"]);
        assert_eq!(header(Kind::Namespace), ["NAME", "AGE"]);
    }

    #[test]
    fn network_sets_show_their_nets_cut_to_width() {
        let set = |kind: &str, nets: Vec<String>| {
            obj(json!({
                "apiVersion": "tartan.dev/v1", "kind": kind,
                "metadata": {"name": "partners", "namespace": "web"},
                "spec": {"nets": nets}
            }))
        };
        let few = set(
            "NetworkSet",
            vec!["198.51.100.0/28".into(), "203.0.113.7".into()],
        );
        let text = render(Kind::NetworkSet, &[few], opts(false, true));
        assert_eq!(
            text,
            "NAMESPACE   NAME       NETS                          AGE\n\
             web         partners   198.51.100.0/28,203.0.113.7   -\n"
        );
        let many: Vec<String> = (0..10_000)
            .map(|i| format!("10.{}.{}.0/24", i / 256, i % 256))
            .collect();
        let text = render(
            Kind::GlobalNetworkSet,
            &[set("GlobalNetworkSet", many)],
            opts(true, false),
        );
        let lines: Vec<&str> = text.lines().collect();
        let header: Vec<&str> = lines[0].split_whitespace().collect();
        assert_eq!(header, ["NAME", "NETS", "COUNT", "AGE", "LABELS"]);
        let row: Vec<&str> = lines[1].split_whitespace().collect();
        assert_eq!(row[1].chars().count(), NETS_WIDTH, "{row:?}");
        assert!(row[1].starts_with("10.0.0.0/24,10.0.1.0/24,") && row[1].ends_with('…'));
        assert_eq!(row[2], "10000");
        let empty = set("GlobalNetworkSet", vec![]);
        let text = render(Kind::GlobalNetworkSet, &[empty], opts(false, false));
        assert_eq!(
            text,
            "NAME       NETS   AGE
partners   -      -
"
        );
    }

    #[test]
    fn cells() {
        assert_eq!(cell(None), "-");
        assert_eq!(cell(Some(&json!(""))), "-");
        assert_eq!(cell(Some(&json!(false))), "false");
        assert_eq!(cell(Some(&json!(["a", 1]))), "a,1");
        assert_eq!(cell(Some(&json!([]))), "-");
        let block = tartan_api::examples::example(Kind::IpamBlock, "b");
        assert_eq!(block_usage(&block), "1/4");
    }

    #[test]
    fn no_objects_no_table() {
        assert_eq!(render(Kind::IpPool, &[], opts(false, false)), "");
    }
}
