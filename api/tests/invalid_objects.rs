//! `validate` on objects as people write them (YAML): every bad one is
//! rejected with a message naming the field and what is wrong; every good
//! one passes and survives the typed round trip.

use k8s_openapi::api::core::v1::Node;
use serde_json::Value;
use tartan_api::Kind;
use tartan_api::resources::*;
use tartan_api::store::DynamicObject;
use tartan_api::store::typed::{Resource, from_dynamic, to_dynamic};
use tartan_api::validate::validate;

fn parse(text: &str) -> DynamicObject {
    let v: Value = serde_saphyr::from_str(text).unwrap_or_else(|e| panic!("{text}: {e}"));
    serde_json::from_value(v).unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// A cluster-wide Tartan object in flow-style YAML.
fn cluster(kind: &str, name: &str, spec: &str) -> String {
    format!("{{apiVersion: tartan.dev/v1, kind: {kind}, metadata: {{name: {name}}}, spec: {spec}}}")
}

/// A WorkloadEndpoint in namespace `default`.
fn wep(spec: &str) -> String {
    format!(
        "{{apiVersion: tartan.dev/v1, kind: WorkloadEndpoint, metadata: {{name: web-0.eth0, namespace: default}}, spec: {spec}}}"
    )
}

/// A namespaced Tartan NetworkPolicy in namespace `default`.
fn tnp(name: &str, spec: &str) -> String {
    format!(
        "{{apiVersion: tartan.dev/v1, kind: NetworkPolicy, metadata: {{name: {name}, namespace: default}}, spec: {spec}}}"
    )
}

/// A NetworkSet in namespace `default`.
fn netset(spec: &str) -> String {
    format!(
        "{{apiVersion: tartan.dev/v1, kind: NetworkSet, metadata: {{name: partners, namespace: default}}, spec: {spec}}}"
    )
}

/// A GlobalNetworkSet with one network more than a set may hold (the
/// same one each time: a set may repeat a network).
fn too_many_nets() -> String {
    let nets = vec!["10.0.0.0/24"; schema_rules::NETWORK_SET_MAX as usize + 1];
    cluster(
        "GlobalNetworkSet",
        "big",
        &format!("{{nets: [{}]}}", nets.join(", ")),
    )
}

fn pool(spec: &str) -> String {
    cluster("IPPool", "pool-a", spec)
}
fn bgpconfig(spec: &str) -> String {
    cluster("BGPConfiguration", "default", spec)
}
fn peer(spec: &str) -> String {
    cluster("BGPPeer", "tor", spec)
}
fn filter(spec: &str) -> String {
    cluster("BGPFilter", "f", spec)
}
fn block(spec: &str) -> String {
    cluster("IPAMBlock", "10-0-0-0-30", spec)
}
fn node(annotations: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: node-a\n  annotations:\n{annotations}\n"
    )
}

/// (object text, a substring the error must contain).
fn bad_objects() -> Vec<(String, &'static str)> {
    vec![
        // IPPool
        (
            pool("{cidr: 10.244.0.0/16, blockSize: 33}"),
            "spec.blockSize: 33 is out of range for an IPv4 pool; allowed 20 to 32",
        ),
        (
            pool("{cidr: 'fd00:10::/56', blockSize: 64}"),
            "spec.blockSize: 64 is out of range for an IPv6 pool; allowed 116 to 128",
        ),
        (
            pool("{cidr: 10.0.0.0/28}"),
            "spec.blockSize: 26 is shorter than the pool's prefix /28",
        ),
        (
            pool("{cidr: 10.244.0.0/16, ipipMode: Always, vxlanMode: CrossSubnet}"),
            "spec.vxlanMode: both ipipMode and vxlanMode are set; choose one encapsulation",
        ),
        (
            pool("{cidr: 'fd00:10::/56', ipipMode: CrossSubnet}"),
            "spec.ipipMode: IPIP carries IPv4 only",
        ),
        (
            pool("{cidr: 10.244.1.0/16}"),
            "spec.cidr: \"10.244.1.0/16\" has host bits set; the network is 10.244.0.0/16",
        ),
        (
            pool("{cidr: 10.244.0.1}"),
            "spec.cidr: \"10.244.0.1\" is an address, not a CIDR; add its prefix length, e.g. 10.244.0.1/32",
        ),
        (
            pool("{cidrr: 10.244.0.0/16}"),
            "spec.cidrr: unknown field; allowed fields: cidr, blockSize, ipipMode, vxlanMode, natOutgoing, disabled, disableBGPExport, nodeSelector",
        ),
        (
            pool("{cidr: 10.244.0.0/16, ipipMode: Sometimes}"),
            "spec.ipipMode: \"Sometimes\" is not an encapsulation mode; allowed Never, Always, CrossSubnet",
        ),
        (pool("{blockSize: 26}"), "spec.cidr: Required value"),
        (
            pool("{cidr: 169.254.0.0/16}"),
            "spec.cidr: 169.254.0.0/16 overlaps the link-local range 169.254.0.0/16",
        ),
        (
            pool("{cidr: 169.0.0.0/8, disabled: true}"),
            "spec.cidr: 169.0.0.0/8 overlaps the link-local range 169.254.0.0/16",
        ),
        (
            pool("{cidr: 'fe80::/64', blockSize: 122}"),
            "spec.cidr: fe80::/64 overlaps the link-local range fe80::/10",
        ),
        (
            pool("{cidr: 10.244.0.0/16, natOutgoing: 'yes'}"),
            "spec.natOutgoing: expected true or false, got the string \"yes\"",
        ),
        (
            pool("{cidr: 10.244.0.0/16, blockSize: 300}"),
            "spec.blockSize: 300 is out of range; allowed 0 to 255",
        ),
        (
            cluster("IPPool", "Pool_A", "{cidr: 10.244.0.0/16}"),
            "metadata.name: \"Pool_A\" is not a valid name",
        ),
        (
            "{apiVersion: tartan.dev/v1, kind: IPPool, metadata: {name: p, namespace: default}, spec: {cidr: 10.0.0.0/16}}".into(),
            "metadata.namespace: \"default\" is set but IPPool is cluster-wide",
        ),
        (
            "{apiVersion: tartan.dev/v1, kind: IPPool, metadata: {name: p}, sepc: {cidr: 10.0.0.0/16}}".into(),
            "sepc: unknown field; allowed fields: apiVersion, kind, metadata, spec",
        ),
        (
            "{apiVersion: tartan.dev/v1, kind: IPPool, metadata: {name: p}}".into(),
            "spec: missing; the object needs a spec",
        ),
        (
            "{apiVersion: tartan.dev/v1, kind: IPPools, metadata: {name: p}, spec: {}}".into(),
            "kind: \"IPPools\" in apiVersion \"tartan.dev/v1\" is not a kind Tartan knows",
        ),
        // LoadBalancerIPPool
        (
            cluster("LoadBalancerIPPool", "p", "{cidrs: []}"),
            "spec.cidrs: is empty; list at least one CIDR or address",
        ),
        (
            cluster("LoadBalancerIPPool", "p", "{cidrs: [10.0.0.0/8], nodeSelector: all()}"),
            "spec.nodeSelector: unknown field",
        ),
        // IPReservation
        (
            cluster("IPReservation", "r", "{reservedCIDRs: []}"),
            "spec.reservedCIDRs: is empty; list at least one CIDR or address",
        ),
        (
            cluster("IPReservation", "r", "{reservedCIDRs: [10.0.0.1, 10.0.0.300]}"),
            "spec.reservedCIDRs[1]: \"10.0.0.300\" is neither a CIDR nor an address",
        ),
        // BGPConfiguration
        (
            bgpconfig("{asNumber: 0}"),
            "spec.asNumber: 0 is not an AS number; allowed 1 to 4294967295",
        ),
        (
            bgpconfig("{asNumber: 23456}"),
            "spec.asNumber: 23456 is AS_TRANS",
        ),
        (
            bgpconfig("{listenPort: 0}"),
            "spec.listenPort: 0 is not a port; allowed 1 to 65535",
        ),
        (
            bgpconfig("{communities: [{name: big, value: '65536:1'}]}"),
            "spec.communities[0].value: \"65536:1\": a standard community's halves are 0 to 65535",
        ),
        (
            bgpconfig(
                "{communities: [{name: gold, value: '64512:100'}], prefixAdvertisements: [{cidr: 10.244.0.0/16, communities: [gold, silver]}]}",
            ),
            "spec.prefixAdvertisements[0].communities[1]: \"silver\" is neither a name from spec.communities nor a community value",
        ),
        (
            bgpconfig("{gracefulRestartTime: 5000s}"),
            "spec.gracefulRestartTime: 5000s is out of range; allowed 1s to 4095s",
        ),
        (
            bgpconfig("{gracefulRestartTime: 2 minutes}"),
            "spec.gracefulRestartTime: \"2 minutes\" is not a duration",
        ),
        (
            bgpconfig("{nodeMeshPassword: {secretKeyRef: {name: bgp, key: 'pass word'}}}"),
            "spec.nodeMeshPassword.secretKeyRef.key: \"pass word\" is not a Secret key",
        ),
        (
            bgpconfig("{nodeMeshPassword: {secretKeyRef: {name: bgp, key: '..data'}}}"),
            "spec.nodeMeshPassword.secretKeyRef.key: \"..data\" is not a Secret key",
        ),
        (
            bgpconfig("{nodeAddressAutodetectionV4: {interface: eth0, firstFound: true}}"),
            "spec.nodeAddressAutodetectionV4: 2 methods set; set exactly one of kubernetes, interface, skipInterface, canReach, cidrs, firstFound",
        ),
        (
            bgpconfig("{nodeAddressAutodetectionV4: {interface: 'eth('}}"),
            "spec.nodeAddressAutodetectionV4.interface: \"eth(\" is not a regular expression",
        ),
        (
            bgpconfig("{nodeAddressAutodetectionV6: {canReach: 192.0.2.1}}"),
            "spec.nodeAddressAutodetectionV6.canReach: 192.0.2.1 is not an IPv6 address",
        ),
        (
            bgpconfig("{nodeAddressAutodetectionV4: {cidrs: ['fd00::/8']}}"),
            "spec.nodeAddressAutodetectionV4.cidrs[0]: fd00::/8 is not an IPv4 network",
        ),
        (
            cluster("BGPConfiguration", "node.", "{listenPort: 1179}"),
            "metadata.name: a per-node BGPConfiguration is named node.<nodename>",
        ),
        // BGPPeer
        (
            peer("{peerIP: 192.0.2.1, asNumber: 65001, peerSelector: has(route-reflector)}"),
            "spec.peerSelector: both peerIP and peerSelector are set; choose one",
        ),
        (
            peer("{asNumber: 65001}"),
            "spec.peerIP: missing; set peerIP (a router) or peerSelector (nodes)",
        ),
        (
            peer("{peerIP: 192.0.2.1}"),
            "spec.asNumber: missing; a peer at peerIP needs its AS number",
        ),
        (
            peer("{peerIP: 192.0.2.1, asNumber: 65001, node: node-a, nodeSelector: all()}"),
            "spec.nodeSelector: both node and nodeSelector are set; choose one",
        ),
        (
            peer("{peerIP: '192.0.2.1:0', asNumber: 65001}"),
            "spec.peerIP: \"192.0.2.1:0\": port 0 is not allowed",
        ),
        (
            peer("{peerIP: router-1, asNumber: 65001}"),
            "spec.peerIP: \"router-1\" is not a peer address; expected 192.0.2.1, 2001:db8::1, 192.0.2.1:179 or [2001:db8::1]:179",
        ),
        (
            peer("{peerIP: 192.0.2.1, asNumber: 65001, nextHopMode: Myself}"),
            "spec.nextHopMode: \"Myself\" is not a next-hop mode; allowed Auto, Self, Keep",
        ),
        (
            peer("{peerIP: 192.0.2.1, asNumber: 65001, maxRestartTime: 4096s}"),
            "spec.maxRestartTime: 4096s is out of range; allowed 0s to 4095s",
        ),
        (
            peer("{peerIP: 192.0.2.1, asNumber: 65001, filters: [export-only, export-only]}"),
            "spec.filters[1]: \"export-only\" is listed twice",
        ),
        (
            peer("{peerSelector: has(route-reflector), asNumber: 65001}"),
            "spec.asNumber: must be empty when peerSelector is specified",
        ),
        // BGPFilter
        (
            filter("{exportV4: [{cidr: 'fd00::/64', matchOperator: In, action: Accept}]}"),
            "spec.exportV4[0].cidr: \"fd00::/64\" is not IPv4; this list holds IPv4 rules only",
        ),
        (
            filter("{importV4: [{cidr: 10.0.0.0/8, action: Reject}]}"),
            "spec.importV4[0].matchOperator: missing; a rule with cidr needs Equal, NotEqual, In or NotIn",
        ),
        (
            filter("{importV6: [{cidr: 'fd00::/16', matchOperator: In, prefixLength: {min: 64, max: 48}, action: Reject}]}"),
            "spec.importV6[0].prefixLength: min 64 is greater than max 48",
        ),
        (
            filter("{importV4: [{cidr: 10.0.0.0/8, matchOperator: In, prefixLength: {max: 33}, action: Reject}]}"),
            "spec.importV4[0].prefixLength.max: 33 is out of range for IPv4; allowed 0 to 32",
        ),
        (
            filter(
                "{exportV4: [{cidr: 10.244.0.0/16, matchOperator: In, prefixLength: {max: 8}, action: Accept}]}",
            ),
            "spec.exportV4[0].prefixLength.max: 8 is shorter than the cidr's prefix /16",
        ),
        // As Calico 3.32: prefixLength narrows a cidr, and alone is refused.
        (
            filter("{importV4: [{prefixLength: {min: 25}, action: Reject}]}"),
            "spec.importV4[0].prefixLength: cidr is required when prefixLength is set",
        ),
        (
            filter("{exportV4: [{action: Reject, communities: {add: ['64512:1']}}]}"),
            "spec.exportV4[0].communities: only an Accept rule can change communities",
        ),
        (
            filter("{importV4: [{action: Accept, asPathPrepend: [65000]}]}"),
            "spec.importV4[0].asPathPrepend: only export rules can prepend to the AS path",
        ),
        (
            filter("{importV4: [{action: Reject, interface: '*.calico'}]}"),
            "spec.importV4[0].interface: Tartan does not match routes by interface",
        ),
        (
            filter("{importV4: [{cidr: 10.0.0.0/8, matchOperator: In}]}"),
            "spec.importV4[0].action: Required value",
        ),
        (
            filter("{exportV6: [{action: Drop}]}"),
            "spec.exportV6[0].action: \"Drop\" is not an action; allowed Accept, Reject",
        ),
        // NetworkPolicy
        (
            tnp("allow-dns", "{ingress: [{action: Allow2}]}"),
            "spec.ingress[0].action: \"Allow2\" is not an action; allowed Allow, Deny, Pass, Log",
        ),
        (
            tnp("web", "{ingress: [{action: Allow, destination: {ports: [80]}}]}"),
            "spec.ingress[0].destination.ports: port numbers and ranges need protocol TCP, UDP or SCTP",
        ),
        // Without a protocol a list may hold names only, not a name and a
        // number.
        (
            tnp("web", "{ingress: [{action: Allow, source: {notPorts: [http, '8000:8080']}}]}"),
            "spec.ingress[0].source.notPorts: port numbers and ranges need protocol TCP, UDP or SCTP",
        ),
        // As Calico's SupportsPorts: UDPLite has no ports to match.
        (
            tnp("lite", "{ingress: [{action: Allow, protocol: UDPLite, destination: {ports: [5000]}}]}"),
            "spec.ingress[0].destination.ports: protocol UDPLite has no ports to match",
        ),
        (
            tnp("icmp-port", "{ingress: [{action: Allow, protocol: ICMP, destination: {ports: [http]}}]}"),
            "spec.ingress[0].destination.ports: protocol ICMP has no ports to match",
        ),
        (
            tnp("noted", "{ingress: [{action: Allow, metadata: {annotations: {'bad key': x}}}]}"),
            "spec.ingress[0].metadata.annotations: \"bad key\" is not a valid annotation key",
        ),
        (
            tnp("ping", "{ingress: [{action: Allow, protocol: TCP, icmp: {type: 8}}]}"),
            "spec.ingress[0].icmp: icmp needs protocol ICMP or ICMPv6",
        ),
        (
            tnp("ping", "{ingress: [{action: Allow, protocol: ICMP, icmp: {code: 0}}]}"),
            "spec.ingress[0].icmp.code: code needs type",
        ),
        (
            tnp("ping6", "{ingress: [{action: Allow, protocol: ICMPv6, ipVersion: 4, icmp: {type: 128}}]}"),
            "spec.ingress[0].ipVersion: protocol ICMPv6 is for IPv6",
        ),
        (
            tnp("gre", "{egress: [{action: Allow, protocol: GRE2}]}"),
            "spec.egress[0].protocol: \"GRE2\" is not a protocol; allowed TCP, UDP, ICMP, ICMPv6, SCTP, UDPLite or a number 1 to 255",
        ),
        (
            tnp("proto0", "{egress: [{action: Allow, protocol: 0}]}"),
            "spec.egress[0].protocol: 0 is not a protocol",
        ),
        (
            tnp("range", "{ingress: [{action: Allow, protocol: TCP, destination: {ports: ['90:80']}}]}"),
            "spec.ingress[0].destination.ports[0]: \"90:80\" is an empty range",
        ),
        (
            tnp("big-port", "{ingress: [{action: Allow, protocol: UDP, source: {notPorts: [70000]}}]}"),
            "spec.ingress[0].source.notPorts[0]: 70000 is not a port; allowed 1 to 65535",
        ),
        (
            tnp("named", "{ingress: [{action: Allow, protocol: TCP, destination: {ports: [Web_Port]}}]}"),
            "spec.ingress[0].destination.ports[0]: \"Web_Port\" is not a port",
        ),
        (
            tnp("types", "{types: [Ingress], egress: [{action: Deny}]}"),
            "spec.egress: rules are given but spec.types leaves out Egress",
        ),
        (
            tnp("types", "{types: [Ingress, Sideways]}"),
            "spec.types[1]: \"Sideways\" is not a policy type; allowed Ingress, Egress",
        ),
        (
            tnp("v5", "{ingress: [{action: Allow, ipVersion: 5}]}"),
            "spec.ingress[0].ipVersion: 5 is not an IP version; allowed 4 or 6",
        ),
        (
            tnp("mixed", "{ingress: [{action: Allow, ipVersion: 4, source: {nets: ['fd00::/64']}}]}"),
            "spec.ingress[0].source.nets[0]: \"fd00::/64\" is IPv6 but the rule's ipVersion is 4",
        ),
        (
            tnp("typo", "{ingress: [{action: Allow, protocol: TCP, destination: {port: [80]}}]}"),
            "spec.ingress[0].destination.port: unknown field; allowed fields: nets, notNets, selector, notSelector, namespaceSelector, ports, notPorts",
        ),
        (
            tnp("ctl", "{selector: \"app == 'a'\\tx\"}"),
            "spec.selector: contains the control character '\\t'",
        ),
        // Selectors are parsed when written: one no agent can read is refused.
        (
            tnp("sel", "{selector: \"role == 'db' &&\"}"),
            "spec.selector: \"role == 'db' &&\" is not a selector: column 16:",
        ),
        (
            tnp("src", "{ingress: [{action: Allow, source: {selector: \"role = 'x'\"}}]}"),
            "spec.ingress[0].source.selector: \"role = 'x'\" is not a selector: column",
        ),
        (
            tnp("ns", "{egress: [{action: Allow, destination: {namespaceSelector: \"has(\"}}]}"),
            "spec.egress[0].destination.namespaceSelector: \"has(\" is not a selector",
        ),
        (
            cluster("GlobalNetworkPolicy", "g", "{selector: \"a in {'x'\"}"),
            "spec.selector: \"a in {'x'\" is not a selector",
        ),
        (
            pool("{cidr: 10.244.0.0/16, nodeSelector: \"zone == \"}"),
            "spec.nodeSelector: \"zone == \" is not a selector",
        ),
        (
            peer("{peerSelector: \"!\"}"),
            "spec.peerSelector: \"!\" is not a selector",
        ),
        (
            peer("{peerIP: 192.0.2.1, asNumber: 65001, nodeSelector: \"rack == 'a' || \"}"),
            "spec.nodeSelector: \"rack == 'a' || \" is not a selector",
        ),
        // global() stands only in a rule's namespaceSelector.
        (
            tnp("g", "{selector: \"global()\"}"),
            "spec.selector: \"global()\": global() is only allowed in a rule's namespaceSelector",
        ),
        (
            cluster("GlobalNetworkPolicy", "g", "{namespaceSelector: \"global() || has(team)\"}"),
            "spec.namespaceSelector: \"global() || has(team)\": global() is only allowed in a rule's namespaceSelector",
        ),
        (
            tnp("g", "{ingress: [{action: Allow, source: {selector: \"app == 'a' && global()\"}}]}"),
            "spec.ingress[0].source.selector: \"app == 'a' && global()\": global() is only allowed",
        ),
        (
            cluster("GlobalNetworkPolicy", "g", "{egress: [{action: Deny, destination: {notSelector: \"!global()\"}}]}"),
            "spec.egress[0].destination.notSelector: \"!global()\": global() is only allowed",
        ),
        (
            pool("{cidr: 10.244.0.0/16, nodeSelector: \"global()\"}"),
            "spec.nodeSelector: \"global()\": global() is only allowed",
        ),
        (
            peer("{peerIP: 192.0.2.1, asNumber: 65001, nodeSelector: \"global()\"}"),
            "spec.nodeSelector: \"global()\": global() is only allowed",
        ),
        (
            peer("{peerSelector: \"(global())\"}"),
            "spec.peerSelector: \"(global())\": global() is only allowed",
        ),
        (
            cluster("LoadBalancerIPPool", "public", "{cidrs: [198.51.100.0/28], serviceSelector: \"global() || expose == 'internet'\"}"),
            "spec.serviceSelector: \"global() || expose == 'internet'\": global() is only allowed",
        ),
        (
            "{apiVersion: tartan.dev/v1, kind: NetworkPolicy, metadata: {name: np}, spec: {}}".into(),
            "metadata.namespace: missing; a NetworkPolicy lives in a namespace",
        ),
        (
            "{apiVersion: tartan.dev/v1, kind: NetworkPolicy, metadata: {name: np, namespace: Default}, spec: {}}".into(),
            "metadata.namespace: \"Default\" is not a DNS label",
        ),
        // Calico fields Tartan does not implement: declared, and refused.
        (
            tnp("web", "{ingress: [{action: Allow, http: {methods: [GET]}}]}"),
            "spec.ingress[0].http: Tartan does not support it",
        ),
        // Calico's service account matches: names as ServiceAccount names,
        // selectors as selectors, and something to match on.
        (
            tnp("web", "{egress: [{action: Allow, destination: {serviceAccounts: {names: [Api]}}}]}"),
            "spec.egress[0].destination.serviceAccounts.names[0]: \"Api\" is not a valid name",
        ),
        (
            tnp("web", "{egress: [{action: Allow, destination: {serviceAccounts: {}}}]}"),
            "spec.egress[0].destination.serviceAccounts: neither names nor selector is given",
        ),
        (
            tnp("web", "{egress: [{action: Allow, destination: {serviceAccounts: {names: [], selector: ''}}}]}"),
            "spec.egress[0].destination.serviceAccounts: neither names nor selector is given",
        ),
        (
            tnp("web", "{egress: [{action: Allow, destination: {serviceAccounts: {selector: \"team == 'db\"}}}]}"),
            "spec.egress[0].destination.serviceAccounts.selector: \"team == 'db\" is not a selector",
        ),
        (
            tnp("web", "{serviceAccountSelector: \"role == 'web\", ingress: [{action: Deny}]}"),
            "spec.serviceAccountSelector: \"role == 'web\" is not a selector",
        ),
        (
            tnp("web", "{egress: [{action: Deny, destination: {services: {name: kubernetes, namespace: default}}}]}"),
            "spec.egress[0].destination.services: Tartan does not support it",
        ),

        (
            tnp("web", "{tier: security, ingress: [{action: Deny}]}"),
            "spec.tier: \"security\": only the tier default exists",
        ),
        (
            cluster("GlobalNetworkPolicy", "g", "{preDNAT: true, applyOnForward: true, ingress: [{action: Deny}]}"),
            "spec.preDNAT: true is not supported by Tartan",
        ),
        (
            cluster("GlobalNetworkPolicy", "g", "{doNotTrack: true, applyOnForward: true, ingress: [{action: Allow}]}"),
            "spec.doNotTrack: true is not supported by Tartan",
        ),
        (
            cluster("GlobalNetworkPolicy", "g", "{applyOnForward: true, ingress: [{action: Allow}]}"),
            "spec.applyOnForward: true is not supported by Tartan",
        ),
        (
            cluster("GlobalNetworkPolicy", "g", "{tier: platform}"),
            "spec.tier: \"platform\": only the tier default exists",
        ),
        (
            cluster("GlobalNetworkPolicy", "g", "{serviceAccountSelector: \"global()\", ingress: [{action: Allow}]}"),
            "spec.serviceAccountSelector: \"global()\": global() is only allowed",
        ),
        (
            tnp("web", "{preDNAT: false}"),
            "spec.preDNAT: unknown field",
        ),
        // GlobalNetworkPolicy
        (
            cluster(
                "GlobalNetworkPolicy",
                "g",
                "{ingress: [{action: Allow, protocol: ICMP, notICMP: {type: 255}}]}",
            ),
            "spec.ingress[0].notICMP.type: 255 is out of range; allowed 0 to 254",
        ),
        (
            cluster("GlobalNetworkPolicy", "g", "{types: [Egress, Egress]}"),
            "spec.types[1]: Egress is listed twice",
        ),
        (
            cluster("GlobalNetworkPolicy", "g", "{order: high}"),
            "spec.order: expected a number, got the string \"high\"",
        ),
        // NetworkSet and GlobalNetworkSet
        (
            netset("{nets: [198.51.100.0/28, partners.example.com]}"),
            "spec.nets[1]: \"partners.example.com\" is neither a CIDR nor an address",
        ),
        (
            cluster("GlobalNetworkSet", "g", "{nets: [203.0.113.9/24]}"),
            "spec.nets[0]: \"203.0.113.9/24\" has host bits set; the network is 203.0.113.0/24",
        ),
        (
            netset("{nets: ['2001:db8::1/32']}"),
            "spec.nets[0]: \"2001:db8::1/32\" has host bits set; the network is 2001:db8::/32",
        ),
        (
            netset("{networks: [198.51.100.0/28]}"),
            "spec.networks: unknown field; allowed fields: nets",
        ),
        (
            cluster("GlobalNetworkSet", "g", "{nets: 198.51.100.0/28}"),
            "spec.nets: expected",
        ),
        (
            netset("{nets: [{cidr: 198.51.100.0/28}]}"),
            "spec.nets[0]: expected",
        ),
        (too_many_nets(), "spec.nets: has 10001 entries; at most 10000 are allowed"),
        // HostEndpoint
        (
            cluster("HostEndpoint", "h", "{node: node-a}"),
            "spec: either interfaceName or expectedIPs must be given",
        ),
        (
            cluster("HostEndpoint", "h", "{node: node-a, interfaceName: 'eth 0'}"),
            "spec.interfaceName: \"eth 0\" is not an interface name",
        ),
        (
            cluster("HostEndpoint", "h", "{node: node-a, interfaceName: 'eth0:1'}"),
            "spec.interfaceName: \"eth0:1\" is not an interface name",
        ),
        (
            cluster("HostEndpoint", "h", "{node: node-a, interfaceName: averylonginterface}"),
            "spec.interfaceName: \"averylonginterface\" is not 1 to 15 characters long",
        ),
        // 9 characters, 18 bytes: the kernel (and Tartan) count bytes;
        // interface names are printable ASCII, so the CRD agrees.
        (
            cluster("HostEndpoint", "h", "{node: node-a, interfaceName: ééééééééé}"),
            "spec.interfaceName: \"ééééééééé\" is not an interface name",
        ),
        (
            cluster("HostEndpoint", "h", "{node: node-a, interfaceName: 'eth/0'}"),
            "spec.interfaceName: \"eth/0\" is not an interface name",
        ),
        (
            cluster(
                "HostEndpoint",
                "h",
                "{node: node-a, interfaceName: eth0, ports: [{name: '', protocol: TCP, port: 22}]}",
            ),
            "spec.ports[0].name: \"\" is not a port name",
        ),
        (
            cluster(
                "HostEndpoint",
                "h",
                "{node: node-a, interfaceName: eth0, ports: [{name: 'a b', protocol: TCP, port: 22}]}",
            ),
            "spec.ports[0].name: \"a b\" is not a port name",
        ),
        (
            cluster(
                "HostEndpoint",
                "h",
                "{node: node-a, interfaceName: eth0, ports: [{name: \"a\\u00a0b\", protocol: TCP, port: 22}]}",
            ),
            "spec.ports[0].name: \"a\\u{a0}b\" is not a port name",
        ),
        (
            cluster(
                "HostEndpoint",
                "h",
                "{node: node-a, interfaceName: eth0, ports: [{name: \"a\\tb\", protocol: TCP, port: 22}]}",
            ),
            "spec.ports[0].name: \"a\\tb\" is not a port name",
        ),
        (
            cluster(
                "HostEndpoint",
                "h",
                "{node: node-a, interfaceName: eth0, ports: [{name: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa, protocol: TCP, port: 22}]}",
            ),
            "spec.ports[0].name: \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\" is not a port name",
        ),
        (
            cluster("HostEndpoint", "h", "{node: node-a, expectedIPs: [192.0.2.1, 10.0.0.0/8]}"),
            "spec.expectedIPs[1]: \"10.0.0.0/8\" is not an IPv4 or IPv6 address",
        ),
        (
            cluster(
                "HostEndpoint",
                "h",
                "{node: node-a, interfaceName: eth0, ports: [{name: ssh, protocol: TCP, port: 22}, {name: ssh, protocol: UDP, port: 2222}]}",
            ),
            "spec.ports[1].name: \"ssh\" is used by an earlier port",
        ),
        (
            cluster("HostEndpoint", "h", "{node: node-a, interfaceName: eth0, profiles: [kns.default]}"),
            "spec.profiles: profiles: Tartan has no Profile kind",
        ),
        (
            cluster("HostEndpoint", "h", "{node: Node_A, interfaceName: eth0}"),
            "spec.node:",
        ),
        (
            cluster("HostEndpoint", "h", "{node: node-a, interfaceName: eth0, selector: all()}"),
            "spec.selector: unknown field",
        ),
        // IPAMBlock
        (
            block("{cidr: 10.0.0.0/30, allocations: [null, null], unallocated: [0, 1]}"),
            "spec.allocations: has 2 entries but 10.0.0.0/30 holds 4 addresses; one entry per address",
        ),
        (
            block("{cidr: 10.0.0.0/30, allocations: [null, null, null, null], unallocated: [0, 4]}"),
            "spec.unallocated[1]: 4 is past the block's end; ordinals run 0 to 3",
        ),
        (
            block(
                "{cidr: 10.0.0.0/30, allocations: [0, null, null, null], unallocated: [0, 1, 2, 3], attributes: [{handleID: h1}]}",
            ),
            "spec.unallocated[0]: address 0 is both allocated and unallocated",
        ),
        (
            block("{cidr: 10.0.0.0/30, allocations: [1, null, null, null], unallocated: [1, 2, 3]}"),
            "spec.allocations[0]: 1 is not an index into attributes, which has 0 entries",
        ),
        (
            block(
                "{cidr: 10.0.0.0/30, affinity: node-a, allocations: [null, null, null, null], unallocated: [0, 1, 2, 3]}",
            ),
            "spec.affinity: \"node-a\" is not an affinity; expected host:<nodename>",
        ),
        (
            block("{cidr: 10.0.0.0/16, allocations: [], unallocated: []}"),
            "spec.cidr: 10.0.0.0/16 is too large for a block",
        ),
        // IPAMHandle
        (
            cluster("IPAMHandle", "h", "{handleID: h, block: {10.0.0.1/30: 1}}"),
            "spec.block[10.0.0.1/30]: \"10.0.0.1/30\" has host bits set",
        ),
        (
            cluster("IPAMHandle", "h", "{handleID: '', block: {}}"),
            "spec.handleID: a handle needs a printable, non-empty ID",
        ),
        (
            cluster("IPAMHandle", "h", "{handleID: h, block: {10.0.0.0/30: -1}}"),
            "spec.block[10.0.0.0/30]: -1 is out of range; allowed 0 to 4294967295",
        ),
        // BlockAffinity
        (
            cluster("BlockAffinity", "a", "{node: node-a, cidr: 10.0.0.0/26, state: Done}"),
            "spec.state: \"Done\" is not an affinity state; allowed Pending, Confirmed, PendingDeletion",
        ),
        (
            cluster("BlockAffinity", "a", "{node: Node_A, cidr: 10.0.0.0/26, state: Pending}"),
            "spec.node: \"Node_A\" is not a valid name",
        ),
        // WorkloadEndpoint
        (
            wep("{node: node-a, pod: web-0, containerID: c, endpoint: eth0, interfaceName: tar0123456789abcdef, ipNetworks: [10.244.0.5/32]}"),
            "spec.interfaceName: \"tar0123456789abcdef\" is longer than 15 characters",
        ),
        (
            wep("{node: node-a, pod: web-0, containerID: c, endpoint: eth0, interfaceName: tar1, ipNetworks: [10.244.0.0/24]}"),
            "spec.ipNetworks[0]: 10.244.0.0/24 is not a host network; use /32 or /128",
        ),
        // BGPNodeStatus
        (
            cluster("BGPNodeStatus", "a", "{node: Node_A, updated: 1, refreshSeconds: 30, routerID: 192.0.2.1, asn: 64512}"),
            "spec.node: \"Node_A\" is not a valid name",
        ),
        (
            cluster("BGPNodeStatus", "a", "{node: a, updated: 1, refreshSeconds: 30, routerID: 192.0.2.1, asn: 64512, sessions: [{peer: nowhere, asn: 1, state: Idle}]}"),
            "spec.sessions[0].peer: not an IPv4 or IPv6 address",
        ),
        // RangeAllocation
        (
            cluster("RangeAllocation", "service-node-ports", "{range: 30000-32767, data: xy}"),
            "spec.data: hexadecimal digits, two a byte",
        ),
        (
            cluster("RangeAllocation", "service-cluster-ips", "{range: 10.0.0.0/8, data: ''}"),
            "spec.range: \"10.0.0.0/8\": at most 1048576 members",
        ),
        (
            cluster("RangeAllocation", "r", "{range: 10.96.0.0/30, data: ff00}"),
            "spec.data: longer than the range's 4 members need",
        ),
        // Node annotations
        (
            node("    tartan.dev/bgp-ipv4-address: 10.0.0.5"),
            "metadata.annotations[tartan.dev/bgp-ipv4-address]: \"10.0.0.5\" has no prefix length",
        ),
        (
            node("    tartan.dev/bgp-ipv6-address: 10.0.0.5/24"),
            "metadata.annotations[tartan.dev/bgp-ipv6-address]: \"10.0.0.5/24\" is IPv4",
        ),
        (
            node("    tartan.dev/bgp-as-number: sixty"),
            "metadata.annotations[tartan.dev/bgp-as-number]: \"sixty\" is not an AS number",
        ),
        (
            node("    tartan.dev/bgp-as-number: '23456'"),
            "metadata.annotations[tartan.dev/bgp-as-number]: 23456 is AS_TRANS",
        ),
        (
            node("    tartan.dev/route-reflector-cluster-id: rr-1"),
            "metadata.annotations[tartan.dev/route-reflector-cluster-id]: \"rr-1\" is not a cluster ID",
        ),
    ]
}

#[test]
fn bad_objects_are_rejected_with_a_precise_message() {
    let cases = bad_objects();
    assert!(cases.len() >= 30);
    let mut kinds = std::collections::HashSet::new();
    let mut failures = Vec::new();
    for (text, want) in &cases {
        let obj = parse(text);
        if let Some(t) = &obj.types {
            kinds.insert(t.kind.clone());
        }
        match validate(&obj) {
            Ok(()) => failures.push(format!("accepted: {text}")),
            Err(e) => {
                let msg = e.to_string();
                if !msg.contains(want) {
                    failures.push(format!("{text}\n  wanted: {want}\n  got:    {msg}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    for k in Kind::tartan().chain([Kind::Node]) {
        assert!(kinds.contains(k.info().name), "no bad {k} in the table");
    }
}

#[test]
fn errors_name_the_object() {
    let e = validate(&parse(&tnp("allow-dns", "{ingress: [{action: Allow2}]}"))).unwrap_err();
    assert_eq!(e.object, "NetworkPolicy \"default/allow-dns\"");
    let e = validate(&parse(&pool("{cidr: 10.244.0.0/16, blockSize: 33}"))).unwrap_err();
    assert_eq!(e.object, "IPPool \"pool-a\"");
    assert!(
        e.to_string()
            .starts_with("IPPool \"pool-a\" is invalid: spec.blockSize: ")
    );
}

#[test]
fn semantic_problems_are_all_reported() {
    let e = validate(&parse(&peer(
        "{peerIP: '192.0.2.1:0', maxRestartTime: 5000s, node: a, nodeSelector: all(), filters: [X]}",
    )))
    .unwrap_err();
    let fields: Vec<&str> = e.problems.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(
        fields,
        [
            "spec.peerIP",
            "spec.asNumber",
            "spec.nodeSelector",
            "spec.maxRestartTime",
            "spec.filters[0]"
        ],
        "{e}"
    );
}

#[test]
fn kubernetes_kinds_are_checked_as_the_api_server_does() {
    let pod = parse(
        "{apiVersion: v1, kind: Pod, metadata: {name: Odd_Name, namespace: default}, spec: {containers: [{name: a}], whatever: 1}}",
    );
    let e = validate(&pod).unwrap_err();
    let fields: Vec<&str> = e.problems.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(fields, ["metadata.name", "spec.whatever"], "{e}");
    // A Node's other annotations are not Tartan's.
    let n = parse(&node("    example.com/anything: '!!'"));
    assert_eq!(validate(&n), Ok(()));
    // A headless Service needs no ports, whether `clusterIP` or, with it
    // left out, `clusterIPs[0]` says so; another Service does.
    for (spec, ok) in [
        ("{clusterIP: None}", true),
        ("{clusterIPs: [None]}", true),
        ("{clusterIPs: [10.96.0.9]}", false),
        ("{}", false),
    ] {
        let s = parse(&format!(
            "{{apiVersion: v1, kind: Service, metadata: {{name: h, namespace: default}}, spec: {spec}}}"
        ));
        assert_eq!(validate(&s).is_ok(), ok, "{spec}: {:?}", validate(&s));
    }
}

fn good_objects() -> Vec<String> {
    vec![
        // Defaults omitted.
        pool("{cidr: 10.244.0.0/16}"),
        pool(
            "{cidr: 'fd00:10:244::/56', blockSize: 122, vxlanMode: CrossSubnet, natOutgoing: true, disableBGPExport: true, nodeSelector: \"zone == 'a'\"}",
        ),
        cluster(
            "IPReservation",
            "routers",
            "{reservedCIDRs: [10.244.0.1, 10.244.1.0/28, 'fd00::1']}",
        ),
        cluster(
            "LoadBalancerIPPool",
            "public",
            "{cidrs: [198.51.100.0/28, 203.0.113.7, 'fd00:1b::/120'], autoAssign: false, serviceSelector: \"expose == 'internet'\"}",
        ),
        bgpconfig("{}"),
        bgpconfig(
            "{asNumber: 4200000000, nodeToNodeMeshEnabled: false, listenPort: 1179, serviceClusterIPs: [{cidr: 10.96.0.0/12}], serviceExternalIPs: [{cidr: 203.0.113.0/24}], serviceLoadBalancerIPs: [{cidr: 'fd00:1b::/112'}], communities: [{name: gold, value: '64512:100'}, {name: big, value: '4200000000:1:2'}], prefixAdvertisements: [{cidr: 10.244.0.0/16, communities: [gold, no-export, '65000:7']}], nodeMeshPassword: {secretKeyRef: {name: bgp-secrets, key: mesh.password}}, gracefulRestartTime: 2m}",
        ),
        cluster("BGPConfiguration", "node.worker-1", "{listenPort: 1179}"),
        bgpconfig(
            "{nodeAddressAutodetectionV4: {canReach: 192.0.2.1}, nodeAddressAutodetectionV6: {cidrs: ['fd00:1::/64']}}",
        ),
        cluster(
            "BGPConfiguration",
            "node.worker-2",
            "{nodeAddressAutodetectionV4: {interface: 'eth[0-9]+|ens.*'}, nodeAddressAutodetectionV6: {kubernetes: NodeInternalIP}}",
        ),
        peer("{peerIP: 192.0.2.1, asNumber: 65001}"),
        peer(
            "{nodeSelector: \"rack == 'r1'\", peerIP: '[2001:db8::1]:1179', asNumber: 65001, password: {secretKeyRef: {name: bgp, key: tor}}, ttlSecurity: 1, nextHopMode: Self, maxRestartTime: 300s, filters: [export-only], sourceAddress: None}",
        ),
        peer("{node: node-a, peerSelector: has(route-reflector)}"),
        // ttlSecurity 0 is off, as in Calico.
        peer("{peerIP: 192.0.2.1, asNumber: 65001, ttlSecurity: 0}"),
        // As Calico: a disabled pool may be smaller than a block.
        pool("{cidr: 10.0.0.0/28, disabled: true}"),
        // Calico's service account matches.
        tnp(
            "by-account",
            "{serviceAccountSelector: \"team == 'db'\", ingress: [{action: Allow, source: {serviceAccounts: {names: [frontend, api.v2]}}}, {action: Deny, source: {selector: \"app == 'x'\", serviceAccounts: {names: [a], selector: \"has(team)\"}}}]}",
        ),
        cluster(
            "GlobalNetworkPolicy",
            "by-account",
            "{serviceAccountSelector: all(), egress: [{action: Allow, destination: {namespaceSelector: all(), serviceAccounts: {selector: \"team in {'db', 'web'}\"}}}]}",
        ),
        // Calico's fields at the values that change nothing.
        tnp(
            "tiered",
            "{tier: default, serviceAccountSelector: '', ingress: [{action: Deny}]}",
        ),
        cluster(
            "GlobalNetworkPolicy",
            "calico-defaults",
            "{tier: default, preDNAT: false, doNotTrack: false, applyOnForward: false, ingress: [{action: Deny}]}",
        ),
        filter("{}"),
        // A min shorter than the cidr's prefix is taken as the cidr's, as
        // Calico takes it.
        filter(
            "{exportV4: [{cidr: 10.244.0.0/16, matchOperator: In, prefixLength: {min: 8}, action: Accept}]}",
        ),
        filter(
            "{exportV4: [{cidr: 10.244.0.0/16, matchOperator: In, prefixLength: {min: 24, max: 32}, action: Accept, communities: {add: ['64512:1', no-export], remove: ['1:2:3']}, asPathPrepend: [64512, 64512]}, {action: Reject}], importV6: [{cidr: '::/0', matchOperator: Equal, source: RemotePeers, action: Reject}]}",
        ),
        tnp("empty", "{}"),
        // Named ports alone need no protocol (as Calico): each matches
        // under the protocol the pod declares for it. Rule metadata is
        // kept and changes nothing.
        tnp(
            "named",
            "{ingress: [{action: Allow, metadata: {annotations: {team: a, Example.com/Owner: b}}, destination: {ports: [http, dns]}, source: {notPorts: [metrics]}}]}",
        ),
        tnp(
            "allow-dns",
            "{order: 10.5, selector: \"app == 'web'\", types: [Ingress, Egress], ingress: [{action: Allow, protocol: TCP, source: {selector: \"role == 'lb'\", namespaceSelector: all()}, destination: {ports: [80, '8000:8080', http]}}, {action: Log}, {action: Deny, ipVersion: 6, protocol: ICMPv6, icmp: {type: 128, code: 0}}], egress: [{action: Allow, protocol: UDP, destination: {nets: [10.96.0.10/32], notNets: ['fd00::/8'], ports: [53]}}, {action: Pass, notProtocol: 47}]}",
        ),
        cluster(
            "GlobalNetworkPolicy",
            "deny-all",
            "{order: 1000, namespaceSelector: \"name != 'kube-system'\", types: [Ingress, Egress]}",
        ),
        cluster(
            "GlobalNetworkPolicy",
            "ping",
            "{ingress: [{action: Allow, protocol: ICMP, notICMP: {type: 5}}, {action: Allow, protocol: 132, destination: {notPorts: [9]}}]}",
        ),
        // global() in a rule's namespaceSelector takes in GlobalNetworkSets;
        // a label key named global is only a key.
        tnp(
            "to-partners",
            "{selector: has(global), egress: [{action: Allow, destination: {namespaceSelector: global(), selector: \"partner == 'a'\"}}, {action: Allow, destination: {namespaceSelector: \"global() || team == 'a'\"}}], ingress: [{action: Deny, source: {namespaceSelector: \"!global()\", selector: \"global == 'x'\"}}]}",
        ),
        cluster(
            "GlobalNetworkPolicy",
            "deny-bad-nets",
            "{ingress: [{action: Deny, source: {namespaceSelector: global(), selector: \"list == 'blocked'\"}}]}",
        ),
        netset("{nets: [198.51.100.0/28, 203.0.113.7, '2001:db8:1::/48', '2001:db8::7']}"),
        netset("{}"),
        cluster("GlobalNetworkSet", "blocked", "{nets: []}"),
        cluster(
            "GlobalNetworkSet",
            "provider",
            "{nets: [0.0.0.0/0, '::/0', 192.0.2.0/24]}",
        ),
        block(
            "{cidr: 10.0.0.0/30, affinity: 'host:node-a', strictAffinity: true, allocations: [null, 0, 0, null], unallocated: [3, 0], attributes: [{handleID: tartan.c0ffee, secondary: {node: node-a, pod: web-1}}]}",
        ),
        cluster(
            "IPAMBlock",
            "fd00-0-0-0-0-0-0-0-126",
            "{cidr: 'fd00::/126', allocations: [null, null, null, null], unallocated: [0, 1, 2, 3]}",
        ),
        cluster(
            "IPAMHandle",
            "tartan.c0ffee",
            "{handleID: tartan.c0ffee, block: {10.0.0.0/30: 2}}",
        ),
        cluster(
            "BlockAffinity",
            "node-a-10-0-0-0-30",
            "{node: node-a, cidr: 10.0.0.0/30, state: Confirmed, deleted: false}",
        ),
        wep(
            "{node: node-a, pod: web-0, containerID: c0ffee, endpoint: eth0, interfaceName: tar1, ipNetworks: [10.244.0.5/32, 'fd00::5/128']}",
        ),
        cluster(
            "BGPNodeStatus",
            "node-a",
            "{node: node-a, updated: 1700000000, refreshSeconds: 30, routerID: 10.0.0.5, asn: 64512, sessions: [{peer: 10.0.0.6, asn: 64512, state: Established, since: 1699999000, prefixesReceived: 1, prefixesSent: 2}, {peer: 'fd00::7', asn: 65001, state: Active, lastError: connection refused}]}",
        ),
        cluster(
            "RangeAllocation",
            "service-node-ports",
            "{range: 30000-32767, data: ff03}",
        ),
        cluster(
            "HostEndpoint",
            "node-a-eth0",
            "{node: node-a, interfaceName: eth0, expectedIPs: [10.0.0.5, 'fd00::5'], ports: [{name: ssh, protocol: TCP, port: 22}, {name: dns, protocol: UDP, port: 53}]}",
        ),
        cluster(
            "HostEndpoint",
            "node-a-all",
            "{node: node-a, interfaceName: '*'}",
        ),
        // 128 characters, 256 bytes: the CRD counts characters, and so
        // does Tartan.
        cluster(
            "HostEndpoint",
            "node-a-long-port",
            "{node: node-a, interfaceName: eth0.100, ports: [{name: éééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééé, protocol: TCP, port: 22}]}",
        ),
        cluster(
            "HostEndpoint",
            "node-a-by-ip",
            "{node: node-a, expectedIPs: [10.0.0.5]}",
        ),
        node(
            "    tartan.dev/bgp-ipv4-address: 10.0.0.5/24\n    tartan.dev/bgp-ipv6-address: fd00::5/64\n    tartan.dev/bgp-as-number: '65010'\n    tartan.dev/route-reflector-cluster-id: 244.0.0.1",
        ),
    ]
}

/// Whether every field of `orig` is in `new` with the same meaning
/// (`new` may add defaults; protocol names may change case).
fn keeps(orig: &Value, new: &Value) -> bool {
    match (orig, new) {
        (Value::Object(a), Value::Object(b)) => a.iter().all(|(k, v)| {
            b.get(k).is_some_and(|w| keeps(v, w)) || (v.is_null() && !b.contains_key(k))
        }),
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(v, w)| keeps(v, w))
        }
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (Value::String(a), Value::String(b)) => a.eq_ignore_ascii_case(b),
        (a, b) => a == b,
    }
}

fn round_trip<T: Resource + PartialEq + std::fmt::Debug>(obj: &DynamicObject) {
    let typed: T = from_dynamic(obj.clone()).unwrap_or_else(|e| panic!("{e}"));
    let back = to_dynamic(&typed).unwrap();
    assert_eq!(validate(&back), Ok(()));
    let again: T = from_dynamic(back.clone()).unwrap();
    assert_eq!(again, typed);
    let orig = serde_json::to_value(obj).unwrap();
    let new = serde_json::to_value(&back).unwrap();
    assert!(keeps(&orig, &new), "meaning changed:\n{orig}\n{new}");
}

#[test]
fn good_objects_pass_and_round_trip() {
    let cases = good_objects();
    assert!(cases.len() >= 10);
    let mut kinds = std::collections::HashSet::new();
    for text in &cases {
        let obj = parse(text);
        assert_eq!(validate(&obj), Ok(()), "{text}");
        let kind = Kind::from_type(
            &obj.types.as_ref().unwrap().api_version,
            &obj.types.as_ref().unwrap().kind,
        )
        .unwrap();
        kinds.insert(kind);
        match kind {
            Kind::IpPool => round_trip::<IpPool>(&obj),
            Kind::IpReservation => round_trip::<IpReservation>(&obj),
            Kind::BgpConfiguration => round_trip::<BgpConfiguration>(&obj),
            Kind::BgpPeer => round_trip::<BgpPeer>(&obj),
            Kind::BgpFilter => round_trip::<BgpFilter>(&obj),
            Kind::NetworkPolicy => round_trip::<NetworkPolicy>(&obj),
            Kind::GlobalNetworkPolicy => round_trip::<GlobalNetworkPolicy>(&obj),
            Kind::NetworkSet => round_trip::<NetworkSet>(&obj),
            Kind::GlobalNetworkSet => round_trip::<GlobalNetworkSet>(&obj),
            Kind::HostEndpoint => round_trip::<HostEndpoint>(&obj),
            Kind::IpamBlock => round_trip::<IpamBlock>(&obj),
            Kind::IpamHandle => round_trip::<IpamHandle>(&obj),
            Kind::BlockAffinity => round_trip::<BlockAffinity>(&obj),
            Kind::WorkloadEndpoint => round_trip::<WorkloadEndpoint>(&obj),
            Kind::BgpNodeStatus => round_trip::<BgpNodeStatus>(&obj),
            Kind::LoadBalancerIpPool => round_trip::<LoadBalancerIpPool>(&obj),
            Kind::RangeAllocation => round_trip::<RangeAllocation>(&obj),
            Kind::Node => {
                let n: Node = from_dynamic(obj.clone()).unwrap();
                let b = NodeBgp::from_node(&n).unwrap();
                assert_eq!(b.as_number, Some(65010));
                assert!(b.is_route_reflector());
                assert_eq!(validate(&to_dynamic(&n).unwrap()), Ok(()));
            }
            other => panic!("unexpected kind {other}"),
        }
    }
    for k in Kind::tartan() {
        assert!(kinds.contains(&k), "no good {k} in the table");
    }
}

#[test]
fn a_kubernetes_network_policy_with_an_unknown_field_does_not_read() {
    use k8s_openapi::api::networking::v1::NetworkPolicy as KubeNetworkPolicy;
    let text = |rule: &str| {
        format!(
            "{{apiVersion: networking.k8s.io/v1, kind: NetworkPolicy, metadata: {{name: p, namespace: x}}, spec: {{podSelector: {{}}, ingress: [{rule}]}}}}"
        )
    };
    let good: KubeNetworkPolicy = from_dynamic(parse(&text(
        "{from: [{podSelector: {matchLabels: {role: fe}}}]}",
    )))
    .unwrap();
    assert_eq!(
        good.spec.unwrap().ingress.unwrap()[0]
            .from
            .as_ref()
            .unwrap()
            .len(),
        1
    );
    // `form` for `from`: read leniently it would be `ingress: [{}]`, a
    // rule that allows every source.
    let e = from_dynamic::<KubeNetworkPolicy>(parse(&text(
        "{form: [{podSelector: {matchLabels: {role: fe}}}]}",
    )))
    .unwrap_err()
    .to_string();
    assert!(e.contains("form"), "{e}");
}

#[test]
fn omitted_fields_take_their_documented_defaults() {
    let p: IpPool = from_dynamic(parse(&pool("{cidr: 10.244.0.0/16}"))).unwrap();
    assert_eq!(p.spec.effective_block_size(), Some(26));
    assert_eq!(p.spec.ipip_mode, ippool::EncapMode::Never);
    assert_eq!(p.spec.vxlan_mode, ippool::EncapMode::Never);
    assert_eq!(p.spec.node_selector, "all()");
    assert!(!p.spec.nat_outgoing && !p.spec.disabled && !p.spec.disable_bgp_export);

    let c: BgpConfiguration = from_dynamic(parse(&bgpconfig("{}"))).unwrap();
    assert_eq!(c.spec.effective_as_number(), 64512);
    assert_eq!(c.spec.effective_listen_port(), 179);
    assert!(c.spec.effective_node_to_node_mesh());

    let b: BgpPeer = from_dynamic(parse(&peer("{peerIP: 192.0.2.1, asNumber: 65001}"))).unwrap();
    assert_eq!(b.spec.next_hop_mode, bgppeer::NextHopMode::Auto);
    assert_eq!(b.spec.source_address, bgppeer::SourceAddress::UseNodeIp);
    assert_eq!(
        b.spec.peer_address(),
        Some(Ok("192.0.2.1:179".parse().unwrap()))
    );

    use policy::PolicyType::{Egress, Ingress};
    let n: NetworkPolicy = from_dynamic(parse(&tnp("e", "{}"))).unwrap();
    assert_eq!(n.spec.selector, "all()");
    assert_eq!(n.spec.effective_types(), [Ingress]);
    let n: NetworkPolicy = from_dynamic(parse(&tnp("e", "{egress: [{action: Allow}]}"))).unwrap();
    assert_eq!(n.spec.effective_types(), [Egress]);
    let n: NetworkPolicy = from_dynamic(parse(&tnp(
        "e",
        "{ingress: [{action: Deny}], egress: [{action: Allow}]}",
    )))
    .unwrap();
    assert_eq!(n.spec.effective_types(), [Ingress, Egress]);
}
