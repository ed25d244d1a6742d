//! Arbitrary documents for every kind, built from the words objects are made
//! of (field names, enum values, addresses, ports, selectors, booleans where
//! strings go): the write path either refuses one with a message that names
//! a field, or accepts it, and then the typed object keeps every field as
//! written and decodes again to itself. Nothing panics.

use proptest::prelude::*;
use proptest::test_runner::RngSeed;
use serde_json::{Map, Value, json};
use tartan_api::Kind;
use tartan_api::resources::*;
use tartan_api::store::DynamicObject;
use tartan_api::store::typed::{Resource, from_dynamic, to_dynamic};
use tartan_api::validate::validate;

const FIELDS: &[&str] = &[
    "cidr",
    "blockSize",
    "ipipMode",
    "vxlanMode",
    "natOutgoing",
    "disabled",
    "nodeSelector",
    "selector",
    "podSelector",
    "namespaceSelector",
    "matchLabels",
    "matchExpressions",
    "key",
    "operator",
    "values",
    "policyTypes",
    "types",
    "ingress",
    "egress",
    "from",
    "to",
    "ipBlock",
    "except",
    "ports",
    "port",
    "endPort",
    "protocol",
    "action",
    "source",
    "destination",
    "nets",
    "order",
    "asNumber",
    "peerIP",
    "node",
    "peerSelector",
    "nodeToNodeMeshEnabled",
    "listenPort",
    "type",
    "clusterIP",
    "clusterIPs",
    "targetPort",
    "nodePort",
    "name",
    "externalIPs",
    "addressType",
    "endpoints",
    "addresses",
    "conditions",
    "ready",
    "containers",
    "image",
    "containerPort",
    "hostPort",
    "nodeName",
    "podCIDR",
    "data",
    "stringData",
    "spec",
    "status",
    "podIP",
    "export",
    "import",
    "V4",
    "V6",
    "cidrs",
    "matchOperator",
    "prefixLength",
    "ipVersion",
    "icmp",
    "code",
    "hostname",
    "sessionAffinity",
    "finalizers",
    "unknownField",
];

const WORDS: &[&str] = &[
    "10.0.0.0/24",
    "10.0.0.1/24",
    "10.0.0.300/24",
    "fd00::/64",
    "192.0.2.1",
    "not-an-ip",
    "banana",
    "TCP",
    "UDP",
    "SCTP",
    "TCPX",
    "Ingress",
    "Egress",
    "Ingres",
    "Allow",
    "Deny",
    "Pass",
    "Log",
    "In",
    "NotIn",
    "Exists",
    "Like",
    "Equal",
    "all()",
    "role == 'db'",
    "role == 'db' &&",
    "has(x)",
    "http",
    "HTTP_1",
    "80",
    "70000",
    "Always",
    "Never",
    "CrossSubnet",
    "ClusterIP",
    "NodePort",
    "IPv4",
    "IPv6",
    "None",
    "y",
    "",
    "web",
    "Web_0",
    "a b",
    "node-a",
    "aGVsbG8=",
    "!!",
    "\u{7}",
];

/// A JSON value made of the words above, nested a few levels.
fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        prop_oneof![
            Just(0i64),
            Just(1),
            Just(26),
            Just(80),
            Just(65535),
            Just(65536),
            Just(23456),
            Just(-1),
            any::<i64>()
        ]
        .prop_map(Value::from),
        Just(json!(1.5)),
        prop::sample::select(WORDS).prop_map(|s| Value::String(s.to_string())),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(prop::sample::select(FIELDS), inner, 0..5).prop_map(|m| {
                Value::Object(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
            }),
        ]
    })
}

/// A document of `kind`: its type, a metadata block (sometimes bad) and
/// a body of arbitrary fields.
fn document() -> impl Strategy<Value = (Kind, Value)> {
    let kinds: Vec<Kind> = Kind::all().collect();
    let names = prop::sample::select(vec!["a", "web-0", "Bad_Name", "y", "", "n.n"]);
    let labels = prop::option::of(prop::collection::btree_map(
        prop::sample::select(vec!["app", "tier", "-x", "kubernetes.io/metadata.name"]),
        value(),
        0..3,
    ));
    (
        prop::sample::select(kinds),
        names,
        prop::option::of(prop::sample::select(vec!["default", "team", "Team"])),
        labels,
        prop::collection::btree_map(prop::sample::select(FIELDS), value(), 0..4),
    )
        .prop_map(|(kind, name, ns, labels, body)| {
            let mut meta = Map::new();
            meta.insert("name".into(), name.into());
            if let Some(ns) = ns {
                meta.insert("namespace".into(), ns.into());
            }
            if let Some(l) = labels {
                meta.insert(
                    "labels".into(),
                    Value::Object(l.into_iter().map(|(k, v)| (k.to_string(), v)).collect()),
                );
            }
            let mut doc = Map::new();
            doc.insert("apiVersion".into(), kind.api_version().into());
            doc.insert("kind".into(), kind.info().name.into());
            doc.insert("metadata".into(), Value::Object(meta));
            for (k, v) in body {
                doc.insert(k.to_string(), v);
            }
            (kind, Value::Object(doc))
        })
}

/// An explicit null, an empty list or an object of such read as the field
/// left out (the typed object does not write out empty defaults).
fn as_left_out(v: &Value) -> bool {
    v.is_null()
        || v.as_array().is_some_and(Vec::is_empty)
        || v.as_object().is_some_and(|m| m.values().all(as_left_out))
}

/// Every field `want` gives is in `got` with the same value.
fn keeps(want: &Value, got: &Value) -> bool {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => w.iter().all(|(k, v)| match g.get(k) {
            Some(gv) => keeps(v, gv),
            None => as_left_out(v),
        }),
        (Value::Array(w), Value::Array(g)) => {
            w.len() == g.len() && w.iter().zip(g).all(|(a, b)| keeps(a, b))
        }
        // A null or empty value read as the type's default: an empty list
        // or object, or a scalar default.
        (w, g) if as_left_out(w) && (as_left_out(g) || (!g.is_array() && !g.is_object())) => true,
        // 100 and 100.0 are one number (a field may be a float).
        (Value::Number(w), Value::Number(g)) => w.as_f64() == g.as_f64(),
        _ => want == got,
    }
}

/// The typed round trip of an accepted object: it decodes, keeps every
/// field as written, and its encoding decodes to the same value.
fn round_trip<T: Resource + PartialEq + std::fmt::Debug>(
    obj: &DynamicObject,
    written: &Value,
) -> Result<(), String> {
    let typed: T = from_dynamic(obj.clone()).map_err(|e| format!("accepted but {e}"))?;
    let again = to_dynamic(&typed).map_err(|e| e.to_string())?;
    let encoded = serde_json::to_value(&again).map_err(|e| e.to_string())?;
    if !keeps(written, &encoded) {
        return Err(format!("accepted {written}\nbut stored as {encoded}"));
    }
    let twice: T = from_dynamic(again).map_err(|e| e.to_string())?;
    if twice != typed {
        return Err(format!("{written}: a second decoding differs"));
    }
    Ok(())
}

fn round_trip_kind(kind: Kind, obj: &DynamicObject, written: &Value) -> Result<(), String> {
    use k8s_openapi::api::core::v1 as core;
    match kind {
        Kind::IpPool => round_trip::<IpPool>(obj, written),
        Kind::IpReservation => round_trip::<IpReservation>(obj, written),
        Kind::BgpConfiguration => round_trip::<BgpConfiguration>(obj, written),
        Kind::BgpPeer => round_trip::<BgpPeer>(obj, written),
        Kind::BgpFilter => round_trip::<BgpFilter>(obj, written),
        Kind::NetworkPolicy => round_trip::<NetworkPolicy>(obj, written),
        Kind::GlobalNetworkPolicy => round_trip::<GlobalNetworkPolicy>(obj, written),
        Kind::NetworkSet => round_trip::<NetworkSet>(obj, written),
        Kind::GlobalNetworkSet => round_trip::<GlobalNetworkSet>(obj, written),
        Kind::HostEndpoint => round_trip::<HostEndpoint>(obj, written),
        Kind::IpamBlock => round_trip::<IpamBlock>(obj, written),
        Kind::IpamHandle => round_trip::<IpamHandle>(obj, written),
        Kind::BlockAffinity => round_trip::<BlockAffinity>(obj, written),
        Kind::WorkloadEndpoint => round_trip::<WorkloadEndpoint>(obj, written),
        Kind::BgpNodeStatus => round_trip::<BgpNodeStatus>(obj, written),
        Kind::LoadBalancerIpPool => round_trip::<LoadBalancerIpPool>(obj, written),
        Kind::Lease => round_trip::<k8s_openapi::api::coordination::v1::Lease>(obj, written),
        Kind::RangeAllocation => round_trip::<RangeAllocation>(obj, written),
        Kind::Node => round_trip::<core::Node>(obj, written),
        Kind::Namespace => round_trip::<core::Namespace>(obj, written),
        Kind::Pod => round_trip::<core::Pod>(obj, written),
        Kind::Service => round_trip::<core::Service>(obj, written),
        Kind::Secret => round_trip::<core::Secret>(obj, written),
        Kind::ConfigMap => round_trip::<core::ConfigMap>(obj, written),
        Kind::ServiceAccount => round_trip::<core::ServiceAccount>(obj, written),
        Kind::EndpointSlice => {
            round_trip::<k8s_openapi::api::discovery::v1::EndpointSlice>(obj, written)
        }
        Kind::KubeNetworkPolicy => {
            round_trip::<k8s_openapi::api::networking::v1::NetworkPolicy>(obj, written)
        }
    }
}

/// Checks one document; `Ok(true)` when it was accepted.
fn check(kind: Kind, doc: &Value) -> Result<bool, String> {
    // Metadata is checked as written first (tartanctl does the same), so an
    // unknown or mistyped metadata field is refused, not dropped.
    let meta = tartan_api::validate::raw_metadata_problems(doc);
    if !meta.is_empty() {
        return match meta
            .iter()
            .all(|(f, why)| f.starts_with("metadata") && !why.is_empty())
        {
            true => Ok(false),
            false => Err(format!("metadata refused without a field: {meta:?}")),
        };
    }
    let Ok(obj) = serde_json::from_value::<DynamicObject>(doc.clone()) else {
        // Not even an object with metadata: the reader refuses it before
        // validation (tartanctl reports the document).
        return Ok(false);
    };
    match validate(&obj) {
        Ok(()) => round_trip_kind(kind, &obj, doc).map(|()| true),
        Err(e) => {
            if e.problems.is_empty() {
                return Err(format!("refused without a reason: {doc}"));
            }
            for (field, why) in &e.problems {
                if why.trim().is_empty() {
                    return Err(format!("{field}: an empty reason for {doc}"));
                }
            }
            Ok(false)
        }
    }
}

/// The objects inside `v` (itself included), depth first.
fn objects_mut(v: &mut Value) -> Vec<&mut Map<String, Value>> {
    let mut out = Vec::new();
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(m) => {
                // Children first onto the stack, then the map itself.
                let ptr: *mut Map<String, Value> = m;
                for child in m.values_mut() {
                    stack.push(child);
                }
                // SAFETY: the map and its children are disjoint borrows
                // handed out once each; nothing is inserted or removed
                // while the list lives.
                out.push(unsafe { &mut *ptr });
            }
            Value::Array(a) => stack.extend(a.iter_mut()),
            _ => {}
        }
    }
    out
}

/// A valid example of a kind with one change: a field of one of its
/// objects set to an arbitrary value, or removed.
fn mutated() -> impl Strategy<Value = (Kind, Value)> {
    let kinds: Vec<Kind> = Kind::all().collect();
    (
        prop::sample::select(kinds),
        any::<prop::sample::Index>(),
        any::<prop::sample::Index>(),
        prop::sample::select(FIELDS),
        prop::option::of(value()),
    )
        .prop_map(|(kind, at, field, new_key, new_value)| {
            let mut doc = serde_json::to_value(tartan_api::examples::example(kind, "ex"))
                .expect("example encodes");
            {
                let mut objs = objects_mut(&mut doc);
                let m = objs.remove(at.index(objs.len()));
                let keys: Vec<String> = m.keys().cloned().collect();
                match new_value {
                    // Replace an existing field, or add a new one.
                    Some(v) if !keys.is_empty() && field.index(2) == 0 => {
                        m.insert(keys[field.index(keys.len())].clone(), v);
                    }
                    Some(v) => {
                        m.insert(new_key.to_string(), v);
                    }
                    None if !keys.is_empty() => {
                        m.remove(&keys[field.index(keys.len())]);
                    }
                    None => {}
                }
            }
            (kind, doc)
        })
}

fn seed() -> RngSeed {
    let fixed = std::env::var("PROPTEST_RNG_SEED")
        .ok()
        .and_then(|s| s.parse().ok());
    RngSeed::Fixed(fixed.unwrap_or(0x7a27a9))
}

proptest! {
    // A fixed seed: the same 4,000 cases on every run, so CI's verdict does
    // not depend on luck (set PROPTEST_RNG_SEED to explore others).
    #![proptest_config(ProptestConfig {
        cases: 4000,
        rng_seed: seed(),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn arbitrary_documents_are_refused_with_a_reason_or_round_trip((kind, doc) in document()) {
        if let Err(e) = check(kind, &doc) {
            prop_assert!(false, "{}", e);
        }
    }

    #[test]
    fn changed_examples_are_refused_with_a_reason_or_round_trip((kind, doc) in mutated()) {
        if let Err(e) = check(kind, &doc) {
            prop_assert!(false, "{}", e);
        }
    }
}

/// The generator reaches acceptance for every kind, so the round trip is
/// exercised and not only refusals: a minimal valid body per kind, with
/// arbitrary labels, must be accepted.
#[test]
fn minimal_objects_of_every_kind_are_accepted_and_round_trip() {
    for kind in Kind::all() {
        let example = tartan_api::examples::example(kind, "ex");
        let doc = serde_json::to_value(&example).expect("example encodes");
        assert_eq!(check(kind, &doc), Ok(true), "{kind}: {doc}");
    }
}
