//! The seven Kubernetes kinds Tartan keeps in etcd, written through
//! `tartanctl apply` as people mistype them: each bad object is refused
//! with a message naming the field and leaves the store byte for byte as it
//! was; the same object corrected is accepted and reads back as written.

mod support;

use std::time::{Duration, Instant};

use serde_json::Value;
use support::Ctl;
use tartan_lab::etcd::EtcdCluster;

/// One mistake: the object as mistyped, the same object corrected, and the
/// field path the refusal must name.
struct Case {
    bad: String,
    good: String,
    field: &'static str,
}

fn case(bad: String, good: String, field: &'static str) -> Case {
    Case { bad, good, field }
}

fn np(name: &str, spec: &str) -> String {
    format!(
        "{{apiVersion: networking.k8s.io/v1, kind: NetworkPolicy, metadata: {{name: {name}, namespace: team}}, spec: {spec}}}"
    )
}

fn svc(name: &str, spec: &str) -> String {
    format!(
        "{{apiVersion: v1, kind: Service, metadata: {{name: {name}, namespace: team}}, spec: {spec}}}"
    )
}

/// An EndpointSlice of Service `web`; `rest` holds the slice's fields.
fn eps(name: &str, rest: &str) -> String {
    format!(
        "{{apiVersion: discovery.k8s.io/v1, kind: EndpointSlice, metadata: {{name: {name}, namespace: team, labels: {{kubernetes.io/service-name: web}}}}, {rest}}}"
    )
}

fn pod(name: &str, spec: &str) -> String {
    format!(
        "{{apiVersion: v1, kind: Pod, metadata: {{name: {name}, namespace: team}}, spec: {spec}}}"
    )
}

fn namespace(metadata: &str, rest: &str) -> String {
    format!("{{apiVersion: v1, kind: Namespace, metadata: {metadata}{rest}}}")
}

fn node(name: &str, rest: &str) -> String {
    format!("{{apiVersion: v1, kind: Node, metadata: {{name: {name}}}, {rest}}}")
}

fn secret(name: &str, rest: &str) -> String {
    format!("{{apiVersion: v1, kind: Secret, metadata: {{name: {name}, namespace: team}}, {rest}}}")
}

const C: &str = "containers: [{name: app, image: nginx}]";

fn cases() -> Vec<Case> {
    let ep =
        |extra: &str| format!("addressType: IPv4, endpoints: [{{addresses: [10.0.0.5]{extra}}}]");
    vec![
        // NetworkPolicy (networking.k8s.io)
        case(
            np("n01", "{podSelector: {matchLabels: {role: y}}}"),
            np("n01", "{podSelector: {matchLabels: {role: 'y'}}}"),
            "spec.podSelector.matchLabels[role]",
        ),
        case(
            np("n02", "{podSelector: {matchLabels: {tier: 3}}}"),
            np("n02", "{podSelector: {matchLabels: {tier: '3'}}}"),
            "spec.podSelector.matchLabels[tier]",
        ),
        case(
            np("n03", "{podSelector: {matchLabels: {tier: 'a b'}}}"),
            np("n03", "{podSelector: {matchLabels: {tier: a-b}}}"),
            "spec.podSelector.matchLabels[tier]",
        ),
        case(
            np("n04", "{podSelector: {matchLabels: {-tier: a}}}"),
            np("n04", "{podSelector: {matchLabels: {tier: a}}}"),
            "spec.podSelector.matchLabels",
        ),
        case(
            np(
                "n05",
                "{podSelector: {matchExpressions: [{key: app, operator: Like, values: [web]}]}}",
            ),
            np(
                "n05",
                "{podSelector: {matchExpressions: [{key: app, operator: In, values: [web]}]}}",
            ),
            "spec.podSelector.matchExpressions[0].operator",
        ),
        case(
            np(
                "n06",
                "{podSelector: {matchExpressions: [{key: app, operator: In, values: []}]}}",
            ),
            np(
                "n06",
                "{podSelector: {matchExpressions: [{key: app, operator: In, values: [a]}]}}",
            ),
            "spec.podSelector.matchExpressions[0].values",
        ),
        case(
            np(
                "n07",
                "{podSelector: {matchExpressions: [{key: app, operator: Exists, values: [a]}]}}",
            ),
            np(
                "n07",
                "{podSelector: {matchExpressions: [{key: app, operator: Exists}]}}",
            ),
            "spec.podSelector.matchExpressions[0].values",
        ),
        case(
            np("n08", "{podSelector: {}, policyTypes: [Ingres]}"),
            np("n08", "{podSelector: {}, policyTypes: [Ingress]}"),
            "spec.policyTypes[0]",
        ),
        case(
            np("n09", "{podSelector: {}, ingress: [{ports: [{port: 70000}]}]}"),
            np("n09", "{podSelector: {}, ingress: [{ports: [{port: 7000}]}]}"),
            "spec.ingress[0].ports[0].port",
        ),
        case(
            np(
                "n10",
                "{podSelector: {}, ingress: [{ports: [{protocol: TCPX, port: 80}]}]}",
            ),
            np(
                "n10",
                "{podSelector: {}, ingress: [{ports: [{protocol: TCP, port: 80}]}]}",
            ),
            "spec.ingress[0].ports[0].protocol",
        ),
        case(
            np(
                "n08b",
                "{podSelector: {}, policyTypes: [Ingress, Egress, Ingress]}",
            ),
            np("n08b", "{podSelector: {}, policyTypes: [Ingress, Ingress]}"),
            "spec.policyTypes",
        ),
        case(
            np(
                "n11",
                "{podSelector: {}, ingress: [{ports: [{port: 9000, endPort: 8000}]}]}",
            ),
            np(
                "n11",
                "{podSelector: {}, ingress: [{ports: [{port: 8000, endPort: 9000}]}]}",
            ),
            "spec.ingress[0].ports[0].endPort",
        ),
        case(
            np(
                "n12",
                "{podSelector: {}, ingress: [{ports: [{port: http, endPort: 9000}]}]}",
            ),
            np("n12", "{podSelector: {}, ingress: [{ports: [{port: http}]}]}"),
            "spec.ingress[0].ports[0].endPort",
        ),
        case(
            np(
                "n13",
                "{podSelector: {}, ingress: [{from: [{ipBlock: {cidr: 10.0.0.300/24}}]}]}",
            ),
            np(
                "n13",
                "{podSelector: {}, ingress: [{from: [{ipBlock: {cidr: 10.0.3.0/24}}]}]}",
            ),
            "spec.ingress[0].from[0].ipBlock.cidr",
        ),
        case(
            np(
                "n14",
                "{podSelector: {}, ingress: [{from: [{ipBlock: {cidr: 10.0.0.0/24, except: [10.1.0.0/25]}}]}]}",
            ),
            np(
                "n14",
                "{podSelector: {}, ingress: [{from: [{ipBlock: {cidr: 10.0.0.0/24, except: [10.0.0.0/25]}}]}]}",
            ),
            "spec.ingress[0].from[0].ipBlock.except[0]",
        ),
        case(
            np(
                "n15",
                "{podSelector: {}, ingress: [{from: [{ipBlock: {cidr: 10.0.0.0/24}, podSelector: {}}]}]}",
            ),
            np(
                "n15",
                "{podSelector: {}, ingress: [{from: [{ipBlock: {cidr: 10.0.0.0/24}}, {podSelector: {}}]}]}",
            ),
            "spec.ingress[0].from[0]",
        ),
        case(
            np("n16", "{podSelector: {}, ingress: [{from: [{}]}]}"),
            np("n16", "{podSelector: {}, ingress: [{from: [{podSelector: {}}]}]}"),
            "spec.ingress[0].from[0]",
        ),
        case(
            np("n17", "allow everything"),
            np("n17", "{podSelector: {}, ingress: [{}]}"),
            "spec",
        ),
        case(
            np("n18", "{podSelectr: {}}"),
            np("n18", "{podSelector: {}}"),
            "spec.podSelectr",
        ),
        case(
            np(
                "n19",
                "{podSelector: {}, egress: [{to: [{ipBlock: {cidr: banana}}]}]}",
            ),
            np(
                "n19",
                "{podSelector: {}, egress: [{to: [{ipBlock: {cidr: 192.0.2.0/24}}]}]}",
            ),
            "spec.egress[0].to[0].ipBlock.cidr",
        ),
        case(
            np("Bad_Name", "{podSelector: {}}"),
            np("bad-name", "{podSelector: {}}"),
            "metadata.name",
        ),
        case(
            "{apiVersion: networking.k8s.io/v1, kind: NetworkPolicy, metadata: {name: n21, namespace: y}, spec: {podSelector: {}}}".into(),
            np("n21", "{podSelector: {}}"),
            "metadata.namespace",
        ),
        case(
            np("n22", "{podSelector: {}, podSelector: {}}"),
            np("n22", "{podSelector: {}}"),
            "podSelector",
        ),
        case(
            "{apiVersion: networking.k8s.io/v1, kind: NetworkPolicy, metadata: {name: n23, namespace: team, labels: {app: 1}}, spec: {podSelector: {}}}".into(),
            "{apiVersion: networking.k8s.io/v1, kind: NetworkPolicy, metadata: {name: n23, namespace: team, labels: {app: '1'}}, spec: {podSelector: {}}}".into(),
            "metadata.labels[app]",
        ),
        case(
            np(
                "n24",
                "{podSelector: {}, ingress: [{from: [{namespaceSelector: {matchLabels: {team: no}}}]}]}",
            ),
            np(
                "n24",
                "{podSelector: {}, ingress: [{from: [{namespaceSelector: {matchLabels: {team: 'no'}}}]}]}",
            ),
            "spec.ingress[0].from[0].namespaceSelector.matchLabels[team]",
        ),
        case(
            np("n25", "{podSelector: {}, ingress: [{ports: [{port: 0}]}]}"),
            np("n25", "{podSelector: {}, ingress: [{ports: [{port: 1}]}]}"),
            "spec.ingress[0].ports[0].port",
        ),
        // Service
        case(
            svc("s01", "{ports: [{port: 70000}]}"),
            svc("s01", "{ports: [{port: 7000}]}"),
            "spec.ports[0].port",
        ),
        case(
            svc("s02", "{ports: [{port: 0}]}"),
            svc("s02", "{ports: [{port: 80}]}"),
            "spec.ports[0].port",
        ),
        case(
            svc("s03", "{ports: [{port: 80, targetPort: 70000}]}"),
            svc("s03", "{ports: [{port: 80, targetPort: 8080}]}"),
            "spec.ports[0].targetPort",
        ),
        case(
            svc("s04", "{ports: [{port: 80, protocol: TCPX}]}"),
            svc("s04", "{ports: [{port: 80, protocol: TCP}]}"),
            "spec.ports[0].protocol",
        ),
        case(
            svc("s05", "{type: Cluster, ports: [{port: 80}]}"),
            svc("s05", "{type: ClusterIP, ports: [{port: 80}]}"),
            "spec.type",
        ),
        case(
            svc("s06", "{clusterIP: 10.96.0.300, ports: [{port: 80}]}"),
            svc("s06", "{clusterIP: 10.96.0.30, ports: [{port: 80}]}"),
            "spec.clusterIP",
        ),
        case(
            svc("s07", "{type: NodePort, ports: [{port: 80, nodePort: 99999}]}"),
            svc("s07", "{type: NodePort, ports: [{port: 80, nodePort: 30080}]}"),
            "spec.ports[0].nodePort",
        ),
        case(
            svc("s08", "{ports: [{port: 80}, {port: 443}]}"),
            svc("s08", "{ports: [{name: http, port: 80}, {name: https, port: 443}]}"),
            "spec.ports[0].name",
        ),
        case(
            svc("s09", "{ports: [{name: web, port: 80}, {name: web, port: 443}]}"),
            svc("s09", "{ports: [{name: web, port: 80}, {name: web-tls, port: 443}]}"),
            "spec.ports[1].name",
        ),
        case(
            svc("s10", "{selector: {app: true}, ports: [{port: 80}]}"),
            svc("s10", "{selector: {app: 'true'}, ports: [{port: 80}]}"),
            "spec.selector[app]",
        ),
        case(
            svc(
                "s11",
                "{type: NodePort, externalTrafficPolicy: Locale, ports: [{port: 80}]}",
            ),
            svc(
                "s11",
                "{type: NodePort, externalTrafficPolicy: Local, ports: [{port: 80}]}",
            ),
            "spec.externalTrafficPolicy",
        ),
        case(
            svc("s12", "{sessionAffinity: Sticky, ports: [{port: 80}]}"),
            svc("s12", "{sessionAffinity: ClientIP, ports: [{port: 80}]}"),
            "spec.sessionAffinity",
        ),
        case(
            svc("s13", "{ports: '80'}"),
            svc("s13", "{ports: [{port: 80}]}"),
            "spec.ports",
        ),
        case(
            svc("s14", "{externalIPs: [not-an-ip], ports: [{port: 80}]}"),
            svc("s14", "{externalIPs: [198.51.100.7], ports: [{port: 80}]}"),
            "spec.externalIPs[0]",
        ),
        case(
            svc("s15", "{ipFamilies: [IPv5], ports: [{port: 80}]}"),
            svc("s15", "{ipFamilies: [IPv4], ports: [{port: 80}]}"),
            "spec.ipFamilies[0]",
        ),
        case(
            svc("s16", "{type: ExternalName}"),
            svc("s16", "{type: ExternalName, externalName: db.example.com}"),
            "spec.externalName",
        ),
        case(
            svc("s17", "{ports: [{name: HTTP_1, port: 80}]}"),
            svc("s17", "{ports: [{name: http-1, port: 80}]}"),
            "spec.ports[0].name",
        ),
        case(
            svc(
                "s18",
                "{internalTrafficPolicy: Node, ports: [{port: 80}]}",
            ),
            svc(
                "s18",
                "{internalTrafficPolicy: Local, ports: [{port: 80}]}",
            ),
            "spec.internalTrafficPolicy",
        ),
        case(
            svc(
                "s19",
                "{sessionAffinity: ClientIP, sessionAffinityConfig: {clientIP: {timeoutSeconds: 0}}, ports: [{port: 80}]}",
            ),
            svc(
                "s19",
                "{sessionAffinity: ClientIP, sessionAffinityConfig: {clientIP: {timeoutSeconds: 60}}, ports: [{port: 80}]}",
            ),
            "spec.sessionAffinityConfig.clientIP.timeoutSeconds",
        ),
        case(
            svc("s20", "{ports: [{port: 80, prot: TCP}]}"),
            svc("s20", "{ports: [{port: 80, protocol: TCP}]}"),
            "spec.ports[0].prot",
        ),
        // EndpointSlice
        case(
            eps("e01", "addressType: IPv5, endpoints: [{addresses: [10.0.0.5]}]"),
            eps("e01", "addressType: IPv4, endpoints: [{addresses: [10.0.0.5]}]"),
            "addressType",
        ),
        case(
            eps("e02", "addressType: IPv4, endpoints: [{addresses: [10.0.0.300]}]"),
            eps("e02", "addressType: IPv4, endpoints: [{addresses: [10.0.0.30]}]"),
            "endpoints[0].addresses[0]",
        ),
        case(
            eps("e03", "addressType: IPv4, endpoints: [{addresses: ['fd00::5']}]"),
            eps("e03", "addressType: IPv6, endpoints: [{addresses: ['fd00::5']}]"),
            "endpoints[0].addresses[0]",
        ),
        case(
            eps("e04", "addressType: IPv4, endpoints: [{addresses: []}]"),
            eps("e04", &ep("")),
            "endpoints[0]",
        ),
        case(
            eps("e05", &format!("{}, ports: [{{port: 70000}}]", ep(""))),
            eps("e05", &format!("{}, ports: [{{port: 7000}}]", ep(""))),
            "ports[0].port",
        ),
        case(
            eps("e06", &ep(", conditions: {ready: 'yes'}")),
            eps("e06", &ep(", conditions: {ready: true}")),
            "endpoints[0].conditions.ready",
        ),
        case(
            eps("e07", &ep(", nodeName: Node_A")),
            eps("e07", &ep(", nodeName: node-a")),
            "endpoints[0].nodeName",
        ),
        case(
            eps(
                "e08",
                &format!("{}, ports: [{{port: 80, protocol: TCPX}}]", ep("")),
            ),
            eps(
                "e08",
                &format!("{}, ports: [{{port: 80, protocol: TCP}}]", ep("")),
            ),
            "ports[0].protocol",
        ),
        case(
            eps("e09", &ep(", hostname: Web_0")),
            eps("e09", &ep(", hostname: web-0")),
            "endpoints[0].hostname",
        ),
        case(
            eps(
                "e10",
                &format!("{}, ports: [{{name: HTTP, port: 80}}]", ep("")),
            ),
            eps(
                "e10",
                &format!("{}, ports: [{{name: http, port: 80}}]", ep("")),
            ),
            "ports[0].name",
        ),
        // Pod
        case(
            pod("p01", "{containers: [{image: nginx}]}"),
            pod("p01", &format!("{{{C}}}")),
            "spec.containers[0].name",
        ),
        case(
            pod(
                "p02",
                "{containers: [{name: app, image: nginx, ports: [{containerPort: 70000}]}]}",
            ),
            pod(
                "p02",
                "{containers: [{name: app, image: nginx, ports: [{containerPort: 7000}]}]}",
            ),
            "spec.containers[0].ports[0].containerPort",
        ),
        case(
            pod(
                "p03",
                "{containers: [{name: app, image: nginx, ports: [{containerPort: 80, hostPort: 70000}]}]}",
            ),
            pod(
                "p03",
                "{containers: [{name: app, image: nginx, ports: [{containerPort: 80, hostPort: 8080}]}]}",
            ),
            "spec.containers[0].ports[0].hostPort",
        ),
        case(
            pod("p04", &format!("{{restartPolicy: Sometimes, {C}}}")),
            pod("p04", &format!("{{restartPolicy: OnFailure, {C}}}")),
            "spec.restartPolicy",
        ),
        case(
            pod("p05", &format!("{{nodeName: Node_A, {C}}}")),
            pod("p05", &format!("{{nodeName: node-a, {C}}}")),
            "spec.nodeName",
        ),
        case(
            format!(
                "{{apiVersion: v1, kind: Pod, metadata: {{name: p06, namespace: team}}, spec: {{{C}}}, status: {{podIP: 10.1.1.300}}}}"
            ),
            format!(
                "{{apiVersion: v1, kind: Pod, metadata: {{name: p06, namespace: team}}, spec: {{{C}}}, status: {{podIP: 10.1.1.30}}}}"
            ),
            "status.podIP",
        ),
        case(
            pod("p07", "{containers: {name: app, image: nginx}}"),
            pod("p07", "{containers: [{name: app, image: nginx}]}"),
            "spec.containers",
        ),
        case(
            pod(
                "p08",
                "{containers: [{name: app, image: nginx}, {name: app, image: busybox}]}",
            ),
            pod(
                "p08",
                "{containers: [{name: app, image: nginx}, {name: side, image: busybox}]}",
            ),
            "spec.containers[1].name",
        ),
        case(
            pod("p09", "{container: [{name: app, image: nginx}]}"),
            pod("p09", &format!("{{{C}}}")),
            "spec.container",
        ),
        case(
            pod(
                "p10",
                "{containers: [{name: app, image: nginx, ports: [{containerPort: 80, protocol: HTTP}]}]}",
            ),
            pod(
                "p10",
                "{containers: [{name: app, image: nginx, ports: [{containerPort: 80, protocol: TCP}]}]}",
            ),
            "spec.containers[0].ports[0].protocol",
        ),
        // Namespace
        case(
            namespace("{name: Team}", ""),
            namespace("{name: team-b}", ""),
            "metadata.name",
        ),
        case(
            namespace("{name: ns02, labels: {name: y}}", ""),
            namespace("{name: ns02, labels: {name: 'y'}}", ""),
            "metadata.labels[name]",
        ),
        case(
            namespace("{name: ns03}", ", spec: {finaliser: [kubernetes]}"),
            namespace("{name: ns03}", ", spec: {finalizers: [kubernetes]}"),
            "spec.finaliser",
        ),
        case(
            namespace(&format!("{{name: {}}}", "n".repeat(64)), ""),
            namespace(&format!("{{name: {}}}", "n".repeat(63)), ""),
            "metadata.name",
        ),
        case(
            namespace("{name: ns05, annotations: {owner: 7}}", ""),
            namespace("{name: ns05, annotations: {owner: '7'}}", ""),
            "metadata.annotations[owner]",
        ),
        // Node
        case(
            node("node-01", "spec: {podCIDR: banana}"),
            node("node-01", "spec: {podCIDR: 10.244.1.0/24}"),
            "spec.podCIDR",
        ),
        case(
            node("node-02", "spec: {podCIDRs: [10.244.2.0/33]}"),
            node("node-02", "spec: {podCIDRs: [10.244.2.0/24]}"),
            "spec.podCIDRs[0]",
        ),
        case(
            node(
                "node-03",
                "status: {addresses: [{type: Internal, address: 192.0.2.3}]}",
            ),
            node(
                "node-03",
                "status: {addresses: [{type: InternalIP, address: 192.0.2.3}]}",
            ),
            "status.addresses[0].type",
        ),
        case(
            node(
                "node-04",
                "status: {addresses: [{type: InternalIP, address: 192.0.2.300}]}",
            ),
            node(
                "node-04",
                "status: {addresses: [{type: InternalIP, address: 192.0.2.30}]}",
            ),
            "status.addresses[0].address",
        ),
        case(
            node("node-05", "spec: {unschedulable: yes please}"),
            node("node-05", "spec: {unschedulable: true}"),
            "spec.unschedulable",
        ),
        case(
            "{apiVersion: v1, kind: Node, metadata: {name: node-06, annotations: {tartan.dev/bgp-ipv4-address: not-an-ip}}}".into(),
            "{apiVersion: v1, kind: Node, metadata: {name: node-06, annotations: {tartan.dev/bgp-ipv4-address: 192.0.2.6/24}}}".into(),
            "tartan.dev/bgp-ipv4-address",
        ),
        // Secret
        case(
            secret("sec01", "data: {password: 'not base64!'}"),
            secret("sec01", "data: {password: aHVudGVyMg==}"),
            "data[password]: not valid base64",
        ),
        case(
            secret("sec02", "data: {'bad key': aHVudGVyMg==}"),
            secret("sec02", "data: {bad-key: aHVudGVyMg==}"),
            "data[bad key]",
        ),
        case(
            secret("sec03", "type: 5"),
            secret("sec03", "type: Opaque"),
            "type",
        ),
        case(
            secret("sec04", "stringData: {enabled: true}"),
            secret("sec04", "stringData: {enabled: 'true'}"),
            "stringData[enabled]",
        ),
        case(
            secret("sec05", "stringData: {'..': x}"),
            secret("sec05", "stringData: {x: x}"),
            "stringData[..]",
        ),
    ]
}

/// The store's revision and every key with its value.
type Dump = (i64, Vec<(Vec<u8>, Vec<u8>)>);

/// Every key and value in etcd, and the store's revision: two dumps are
/// equal exactly when nothing was written in between.
fn dump(endpoints: &[String]) -> Dump {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let mut c = etcd_client::Client::connect(endpoints, None)
            .await
            .expect("connect to etcd");
        let r = c
            .get(
                vec![0u8],
                Some(etcd_client::GetOptions::new().with_from_key()),
            )
            .await
            .expect("read etcd");
        let rev = r.header().expect("header").revision();
        let kvs = r
            .kvs()
            .iter()
            .map(|kv| (kv.key().to_vec(), kv.value().to_vec()))
            .collect();
        (rev, kvs)
    })
}

/// Every field `want` gives is in `got` with the same value (the store
/// adds metadata such as uid and resourceVersion).
fn keeps(want: &Value, got: &Value) -> bool {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => w
            .iter()
            .all(|(k, v)| g.get(k).is_some_and(|gv| keeps(v, gv))),
        (Value::Array(w), Value::Array(g)) => {
            w.len() == g.len() && w.iter().zip(g).all(|(a, b)| keeps(a, b))
        }
        _ => want == got,
    }
}

#[test]
fn kubernetes_objects_are_refused_as_the_api_server_would_and_accepted_once_corrected() {
    let etcd = EtcdCluster::single().expect("etcd");
    let ctl = Ctl::etcd(&etcd);
    let endpoints = etcd.client_endpoints();
    let ns = ctl.file(
        "ns.yaml",
        "{apiVersion: v1, kind: Namespace, metadata: {name: team}}",
    );
    ctl.run(&["apply", "-f", &ns]).out();

    let cases = cases();
    assert!(cases.len() >= 60, "only {} cases", cases.len());
    let kinds: std::collections::BTreeSet<String> = cases
        .iter()
        .map(|c| {
            let v: Value = serde_saphyr::from_str(&c.good).expect("good case parses");
            v["kind"].as_str().unwrap_or_default().to_string()
        })
        .collect();
    assert_eq!(
        kinds.len(),
        7,
        "every Kubernetes kind Tartan stores: {kinds:?}"
    );

    let mut failures = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let bad = ctl.file(&format!("bad-{i}.yaml"), &c.bad);
        let before = dump(&endpoints);
        let t = Instant::now();
        let r = ctl.run(&["apply", "-f", &bad]);
        let took = t.elapsed();
        let after = dump(&endpoints);
        if r.ok {
            failures.push(format!("accepted: {}", c.bad));
            continue;
        }
        if !r.stderr.contains(c.field) {
            failures.push(format!(
                "message does not name {:?}: {}\n  {}",
                c.field,
                c.bad,
                r.stderr.trim()
            ));
        }
        if before != after {
            failures.push(format!("store changed by a refused write: {}", c.bad));
        }
        if took > Duration::from_secs(2) {
            failures.push(format!("took {took:?}: {}", c.bad));
        }

        let good = ctl.file(&format!("good-{i}.yaml"), &c.good);
        let r = ctl.run(&["apply", "-f", &good]);
        if !r.ok {
            failures.push(format!(
                "corrected object refused: {}\n  {}",
                c.good,
                r.stderr.trim()
            ));
            continue;
        }
        let want: Value = serde_saphyr::from_str(&c.good).expect("good case parses");
        let kind = want["kind"].as_str().unwrap_or_default();
        let name = want["metadata"]["name"].as_str().unwrap_or_default();
        // `Kind.group` picks Kubernetes' NetworkPolicy over Tartan's.
        let qualified = match want["apiVersion"].as_str().and_then(|v| v.split_once('/')) {
            Some((group, _)) => format!("{kind}.{group}"),
            None => kind.to_string(),
        };
        let mut args = vec!["get", qualified.as_str(), name];
        if let Some(ns) = want["metadata"]["namespace"].as_str() {
            args.extend(["-n", ns]);
        }
        let got = ctl.json(&args);
        if !keeps(&want, &got) {
            failures.push(format!("read back differs: {}\n  got {got}", c.good));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases wrong:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// How a refused `tartanctl apply -f FILE` went: its stderr, the time it
/// took and the most memory it held.
struct Refusal {
    stderr: String,
    took: Duration,
    max_rss_kib: i64,
}

/// Runs `tartanctl apply -f path` under GNU time, which reports the peak
/// memory of tartanctl alone. (`wait4` from this process would not: a
/// child spawned from a large process keeps that process's peak as its own
/// across `exec`, and this test holds the large inputs in memory.)
fn apply_measured(ctl: &Ctl, path: &str) -> (bool, Refusal) {
    let rss_file = format!("{path}.maxrss");
    let t = Instant::now();
    let out = std::process::Command::new("/usr/bin/time")
        .args(["-f", "%M", "-o", &rss_file])
        .env_remove("TARTAN_DATASTORE")
        .env_remove("TARTAN_TIMEOUT")
        .stdin(std::process::Stdio::null())
        .arg(support::tartanctl().get_program())
        .args(["--datastore", &ctl.datastore, "apply", "-f", path])
        .stdout(std::process::Stdio::null())
        .output()
        .expect("run tartanctl under /usr/bin/time (Debian package `time`)");
    let took = t.elapsed();
    let rss = std::fs::read_to_string(&rss_file).expect("GNU time's report");
    // GNU time writes "Command exited with non-zero status N" before the
    // figure when the command fails.
    let max_rss_kib = rss
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("unreadable GNU time report: {rss:?}"));
    (
        out.status.success(),
        Refusal {
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            took,
            max_rss_kib,
        },
    )
}

/// The inputs a sweep of bad files found stored or mishandled, each with
/// what its refusal must say. Built as text, some of them large.
fn sweep() -> Vec<(&'static str, String, &'static str)> {
    let np = |spec: &str| np("sweep", spec);
    let tnp = |spec: &str| {
        format!(
            "{{apiVersion: tartan.dev/v1, kind: NetworkPolicy, metadata: {{name: sweep, namespace: team}}, spec: {spec}}}"
        )
    };
    let pool = |spec: &str| {
        format!(
            "{{apiVersion: tartan.dev/v1, kind: IPPool, metadata: {{name: sweep}}, spec: {spec}}}"
        )
    };
    let peer = |spec: &str| {
        format!(
            "{{apiVersion: tartan.dev/v1, kind: BGPPeer, metadata: {{name: sweep}}, spec: {spec}}}"
        )
    };
    // 553,000 small documents, about 50 MB.
    let many = "apiVersion: v1\nkind: Namespace\nmetadata: {name: n}\n---\n".repeat(553_000);
    // One object with a 50 MB annotation.
    let huge = format!(
        "{{apiVersion: v1, kind: Namespace, metadata: {{name: big, annotations: {{blob: '{}'}}}}}}",
        "x".repeat(50 * 1024 * 1024)
    );
    // An object over 1.5 MiB inside a request under 3 MiB.
    let big_secret = format!(
        "{{apiVersion: v1, kind: Secret, metadata: {{name: big, namespace: team}}, data: {{blob: '{}'}}}}",
        "A".repeat(2 * 1024 * 1024)
    );
    // An annotation just over the API server's 256 KiB total.
    let wide = format!(
        "{{apiVersion: v1, kind: Namespace, metadata: {{name: wide, annotations: {{blob: '{}'}}}}}}",
        "x".repeat(256 * 1024 + 1)
    );
    // Nine levels of ten aliases each: a billion strings if expanded.
    let mut laughs = String::from(
        "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
    );
    let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i"];
    for w in names.windows(2) {
        let (prev, cur) = (w[0], w[1]);
        let refs = vec![format!("*{prev}"); 10].join(",");
        laughs.push_str(&format!("{cur}: &{cur} [{refs}]\n"));
    }
    let laughs = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: lol\n  annotations: {{x: y}}\n{laughs}"
    );
    vec![
        (
            "boolean label value",
            np("{podSelector: {matchLabels: {kubernetes.io/metadata.name: y}}}"),
            "spec.podSelector.matchLabels[kubernetes.io/metadata.name]: expected a string, got the boolean true",
        ),
        (
            "namespace read as a boolean",
            "{apiVersion: networking.k8s.io/v1, kind: NetworkPolicy, metadata: {name: sweep, namespace: y}, spec: {podSelector: {}}}".into(),
            "metadata.namespace",
        ),
        (
            "number label value",
            np("{podSelector: {matchLabels: {tier: 1}}}"),
            "spec.podSelector.matchLabels[tier]",
        ),
        (
            "protocol TCPX",
            np("{podSelector: {}, ingress: [{ports: [{protocol: TCPX, port: 80}]}]}"),
            "spec.ingress[0].ports[0].protocol",
        ),
        (
            "policyTypes Ingres",
            np("{podSelector: {}, policyTypes: [Ingres]}"),
            "spec.policyTypes[0]",
        ),
        (
            "ipBlock 10.0.0.300/24",
            np("{podSelector: {}, ingress: [{from: [{ipBlock: {cidr: 10.0.0.300/24}}]}]}"),
            "spec.ingress[0].from[0].ipBlock.cidr",
        ),
        (
            "Service port 70000",
            svc("sweep", "{ports: [{port: 70000}]}"),
            "spec.ports[0].port",
        ),
        (
            "Tartan selector that does not parse",
            tnp("{selector: \"role == 'db' &&\"}"),
            "spec.selector: \"role == 'db' &&\" is not a selector: column",
        ),
        (
            "operator Like",
            np("{podSelector: {matchExpressions: [{key: a, operator: Like, values: [b]}]}}"),
            "spec.podSelector.matchExpressions[0].operator",
        ),
        (
            "NetworkPolicy port 70000",
            np("{podSelector: {}, egress: [{ports: [{port: 70000}]}]}"),
            "spec.egress[0].ports[0].port",
        ),
        ("spec a string", np("\"allow everything\""), "spec"),
        (
            "IPPool spec a list",
            pool("[10.244.0.0/16]"),
            "spec",
        ),
        (
            "!!python/object tag",
            "apiVersion: v1\nkind: Namespace\nmetadata: !!python/object:os.system {name: x}\n".into(),
            "python/object",
        ),
        (
            "custom tag",
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: !Tag x}\n".into(),
            "!Tag",
        ),
        ("553,000 documents", many, "10000"),
        ("50 MB annotation", huge, "3 MiB"),
        ("2 MiB Secret", big_secret, "Secret \"big\": the object is"),
        ("annotations over 256 KiB", wide, "metadata.annotations"),
        ("billion laughs", laughs, "alias"),
        ("pool cidr banana", pool("{cidr: banana}"), "spec.cidr"),
        ("pool host bits", pool("{cidr: 10.244.0.1/16}"), "spec.cidr"),
        (
            "IPv6 pool blockSize 26",
            pool("{cidr: 'fd00:10::/56', blockSize: 26}"),
            "spec.blockSize",
        ),
        (
            "peerIP not-an-ip",
            peer("{peerIP: not-an-ip, asNumber: 65001}"),
            "spec.peerIP",
        ),
        (
            "AS 23456",
            peer("{peerIP: 192.0.2.1, asNumber: 23456}"),
            "spec.asNumber",
        ),
    ]
}

#[test]
fn each_input_of_the_bad_input_sweep_is_refused_quickly_and_writes_nothing() {
    let etcd = EtcdCluster::single().expect("etcd");
    let ctl = Ctl::etcd(&etcd);
    let endpoints = etcd.client_endpoints();
    let ns = ctl.file(
        "ns.yaml",
        "{apiVersion: v1, kind: Namespace, metadata: {name: team}}",
    );
    ctl.run(&["apply", "-f", &ns]).out();

    let mut failures = Vec::new();
    for (i, (what, text, says)) in sweep().into_iter().enumerate() {
        let path = ctl.file(&format!("sweep-{i}.yaml"), &text);
        drop(text);
        let before = dump(&endpoints);
        let (ok, r) = apply_measured(&ctl, &path);
        let after = dump(&endpoints);
        let _ = std::fs::remove_file(&path);
        if ok {
            failures.push(format!("{what}: accepted"));
            continue;
        }
        if !r.stderr.contains(says) {
            failures.push(format!(
                "{what}: message lacks {says:?}: {}",
                r.stderr.trim()
            ));
        }
        if before != after {
            failures.push(format!("{what}: the store changed"));
        }
        if r.took > Duration::from_secs(2) {
            failures.push(format!("{what}: took {:?}", r.took));
        }
        if r.max_rss_kib > 200 * 1024 {
            failures.push(format!("{what}: used {} MiB", r.max_rss_kib / 1024));
        }
        println!(
            "{what}: refused in {:?}, {} MiB: {}",
            r.took,
            r.max_rss_kib / 1024,
            r.stderr.lines().next().unwrap_or_default()
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
