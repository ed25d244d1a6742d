//! Checks on objects before they are stored, with messages a person can act
//! on: which object, which field, what is wrong, what is allowed.
//!
//! A Tartan object is checked in two steps: its `spec` is parsed into the
//! typed spec (a field of the wrong type or name stops the parse, and is
//! reported with its path), then the spec's `check()` reports every
//! remaining problem at once. Of the Kubernetes kinds only a Node's
//! `tartan.dev/` annotations are checked.

use std::fmt;

use kube::core::DynamicObject;
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_path_to_error::Segment;

use crate::kind::Kind;
use crate::resources::common::{Problem, dns_label, dns_subdomain};
use crate::resources::{
    BgpConfigurationSpec, BgpFilterSpec, BgpPeerSpec, BlockAffinitySpec, GlobalNetworkPolicySpec,
    IpPoolSpec, IpReservationSpec, IpamBlockSpec, IpamHandleSpec, NetworkPolicySpec, NodeBgp,
    WorkloadEndpointSpec,
};

/// One or more problems with one object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalid {
    /// `IPPool "pool-a"` or `NetworkPolicy "default/allow-dns"`.
    pub object: String,
    /// Each problem: (field path, what is wrong and what is allowed).
    pub problems: Vec<(String, String)>,
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} is invalid: ", self.object)?;
        for (i, (field, why)) in self.problems.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{field}: {why}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Invalid {}

/// Validate an object in its stored shape.
pub fn validate(obj: &DynamicObject) -> Result<(), Invalid> {
    let name = obj.metadata.name.clone().unwrap_or_default();
    let Some(types) = &obj.types else {
        return Err(Invalid {
            object: format!("object {name:?}"),
            problems: vec![(
                "apiVersion".into(),
                "apiVersion and kind are missing; e.g. apiVersion: tartan.dev/v1, kind: IPPool"
                    .into(),
            )],
        });
    };
    let Some(kind) = Kind::from_type(&types.api_version, &types.kind) else {
        let known: Vec<String> = Kind::all()
            .map(|k| format!("{} {}", k.api_version(), k.info().name))
            .collect();
        return Err(Invalid {
            object: format!("{} {name:?}", types.kind),
            problems: vec![(
                "kind".into(),
                format!(
                    "{:?} in apiVersion {:?} is not a kind Tartan knows; known: {}",
                    types.kind,
                    types.api_version,
                    known.join(", ")
                ),
            )],
        });
    };
    if kind == Kind::Node {
        let empty = Default::default();
        let ann = obj.metadata.annotations.as_ref().unwrap_or(&empty);
        return NodeBgp::from_annotations(&name, ann).map(|_| ());
    }
    let info = kind.info();
    if info.group != crate::kind::TARTAN_GROUP {
        return Ok(());
    }
    let object = match &obj.metadata.namespace {
        Some(ns) if info.namespaced => format!("{} \"{ns}/{name}\"", info.name),
        _ => format!("{} {name:?}", info.name),
    };
    let mut problems = metadata_problems(kind, obj);
    if kind == Kind::BgpConfiguration {
        // A bad `node.<nodename>` gets the more telling message.
        let named = BgpConfigurationSpec::check_name(&name);
        if !named.is_empty() {
            problems.retain(|(f, _)| f != "metadata.name");
            problems.splice(0..0, named);
        }
    }
    problems.extend(body_problems(kind, &obj.data));
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Invalid { object, problems })
    }
}

fn metadata_problems(kind: Kind, obj: &DynamicObject) -> Vec<Problem> {
    let mut p = Vec::new();
    let info = kind.info();
    match &obj.metadata.name {
        None => p.push((
            "metadata.name".into(),
            "missing; every object needs a name".into(),
        )),
        Some(n) => {
            if let Err(e) = dns_subdomain(n) {
                p.push(("metadata.name".into(), e));
            }
        }
    }
    match (&obj.metadata.namespace, info.namespaced) {
        (None, true) => p.push((
            "metadata.namespace".into(),
            format!("missing; a {} lives in a namespace", info.name),
        )),
        (Some(ns), true) => {
            if let Err(e) = dns_label(ns) {
                p.push(("metadata.namespace".into(), e));
            }
        }
        (Some(ns), false) => p.push((
            "metadata.namespace".into(),
            format!(
                "{ns:?} is set but {} is cluster-wide; leave the namespace out",
                info.name
            ),
        )),
        (None, false) => {}
    }
    p
}

/// Problems with everything but metadata: the fields beside `spec`, then
/// the spec itself.
fn body_problems(kind: Kind, data: &Value) -> Vec<Problem> {
    let Some(body) = data.as_object() else {
        return vec![("spec".into(), "missing; the object needs a spec".into())];
    };
    let mut p: Vec<Problem> = body
        .keys()
        .filter(|k| k.as_str() != "spec")
        .map(|k| {
            (
                k.clone(),
                "unknown field; allowed fields: apiVersion, kind, metadata, spec".into(),
            )
        })
        .collect();
    let Some(spec) = body.get("spec") else {
        p.push(("spec".into(), "missing; the object needs a spec".into()));
        return p;
    };
    p.extend(match kind {
        Kind::IpPool => spec_problems(spec, IpPoolSpec::check),
        Kind::IpReservation => spec_problems(spec, IpReservationSpec::check),
        Kind::BgpConfiguration => spec_problems(spec, BgpConfigurationSpec::check),
        Kind::BgpPeer => spec_problems(spec, BgpPeerSpec::check),
        Kind::BgpFilter => spec_problems(spec, BgpFilterSpec::check),
        Kind::NetworkPolicy => spec_problems(spec, NetworkPolicySpec::check),
        Kind::GlobalNetworkPolicy => spec_problems(spec, GlobalNetworkPolicySpec::check),
        Kind::IpamBlock => spec_problems(spec, IpamBlockSpec::check),
        Kind::IpamHandle => spec_problems(spec, IpamHandleSpec::check),
        Kind::BlockAffinity => spec_problems(spec, BlockAffinitySpec::check),
        Kind::WorkloadEndpoint => spec_problems(spec, WorkloadEndpointSpec::check),
        // Kubernetes kinds are not checked here.
        _ => vec![],
    });
    p
}

/// Parse `spec` as `T` and check it; a parse error is the only problem
/// reported, as nothing after it can be trusted.
fn spec_problems<T: DeserializeOwned>(spec: &Value, check: fn(&T) -> Vec<Problem>) -> Vec<Problem> {
    match serde_path_to_error::deserialize::<_, T>(spec) {
        Ok(typed) => check(&typed),
        Err(e) => vec![parse_problem(&e)],
    }
}

/// A serde error turned into (field path, what is wrong and what is allowed).
fn parse_problem(e: &serde_path_to_error::Error<serde_json::Error>) -> Problem {
    let mut path = String::from("spec");
    let mut last_name: Option<String> = None;
    for seg in e.path().iter() {
        match seg {
            Segment::Seq { index } => path.push_str(&format!("[{index}]")),
            Segment::Map { key } | Segment::Enum { variant: key } => {
                // Field names are identifiers; anything else is a map key
                // (a CIDR, say), written as in the semantic checks.
                if key.chars().all(|c| c.is_ascii_alphanumeric()) {
                    path.push('.');
                    path.push_str(key);
                } else {
                    path.push_str(&format!("[{key}]"));
                }
                last_name = Some(key.clone());
            }
            Segment::Unknown => path.push_str(".?"),
        }
    }
    let msg = e.inner().to_string();
    if let Some(rest) = msg.strip_prefix("unknown field `") {
        let (field, expected) = rest.split_once('`').unwrap_or((rest, ""));
        // The path may or may not already end at the unknown field.
        if last_name.as_deref() != Some(field) || !path.ends_with(field) {
            path.push('.');
            path.push_str(field);
        }
        let allowed = backquoted(expected);
        let why = if allowed.is_empty() {
            "unknown field; this object has no fields".to_string()
        } else {
            format!("unknown field; allowed fields: {}", allowed.join(", "))
        };
        return (path, why);
    }
    if let Some(rest) = msg.strip_prefix("unknown variant `") {
        let (value, expected) = rest.split_once('`').unwrap_or((rest, ""));
        let noun = enum_noun(last_name.as_deref().unwrap_or(""));
        return (
            path,
            format!(
                "{value:?} is not {noun}; allowed {}",
                backquoted(expected).join(", ")
            ),
        );
    }
    if let Some(rest) = msg.strip_prefix("missing field `") {
        let field = rest.trim_end_matches('`');
        return (format!("{path}.{field}"), "missing; it is required".into());
    }
    if let Some(rest) = msg.strip_prefix("invalid type: ") {
        let (got, expected) = rest.split_once(", expected ").unwrap_or((rest, "?"));
        return (
            path,
            format!(
                "{} is the wrong type; expected {}",
                got.replace('`', ""),
                expected_words(expected)
            ),
        );
    }
    if let Some(rest) = msg.strip_prefix("invalid value: ") {
        let (got, expected) = rest.split_once(", expected ").unwrap_or((rest, "?"));
        let got = got.rsplit(' ').next().unwrap_or(got).replace('`', "");
        let allowed = match expected {
            "u8" => "0 to 255".to_string(),
            "u16" => "0 to 65535".to_string(),
            "u32" => "0 to 4294967295".to_string(),
            other => expected_words(other),
        };
        return (path, format!("{got} is out of range; allowed {allowed}"));
    }
    (path, msg)
}

/// The names in "expected one of `a`, `b`" / "expected `a` or `b`".
fn backquoted(s: &str) -> Vec<&str> {
    s.split('`').skip(1).step_by(2).collect()
}

/// What serde's type names mean to a person writing YAML.
fn expected_words(serde_expected: &str) -> String {
    match serde_expected {
        "u8" => "a whole number 0 to 255".into(),
        "u16" => "a whole number 0 to 65535".into(),
        "u32" => "a whole number 0 to 4294967295".into(),
        "u64" => "a whole number".into(),
        "f64" => "a number".into(),
        "a boolean" => "true or false".into(),
        "a sequence" => "a list".into(),
        "a map" => "an object".into(),
        s if s.starts_with("struct ") => "an object".into(),
        s => s.into(),
    }
}

/// "an action" for the field `action`, and so on.
fn enum_noun(field: &str) -> &'static str {
    match field {
        "action" => "an action",
        "ipipMode" | "vxlanMode" => "an encapsulation mode",
        "nextHopMode" => "a next-hop mode",
        "sourceAddress" => "a source address mode",
        "matchOperator" => "a match operator",
        "source" => "a route source",
        "state" => "an affinity state",
        "types" => "a policy type",
        _ => "an allowed value",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> DynamicObject {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn every_example_is_valid() {
        for kind in Kind::all() {
            let o = crate::examples::example(kind, "example-1");
            assert_eq!(validate(&o), Ok(()), "{kind}");
        }
    }

    #[test]
    fn parse_errors_name_the_field() {
        let e = validate(&obj(json!({
            "apiVersion": "tartan.dev/v1", "kind": "IPPool",
            "metadata": {"name": "p"}, "spec": {"cidr": "10.0.0.0/16", "blockSize": "big"}
        })))
        .unwrap_err();
        assert_eq!(e.object, "IPPool \"p\"");
        assert_eq!(e.problems[0].0, "spec.blockSize");
        assert!(
            e.problems[0].1.contains("expected a whole number 0 to 255"),
            "{e}"
        );
    }

    #[test]
    fn all_semantic_problems_are_reported_together() {
        let e = validate(&obj(json!({
            "apiVersion": "tartan.dev/v1", "kind": "IPPool",
            "metadata": {"name": "Bad_Name", "namespace": "x"},
            "spec": {"cidr": "fd00::1/64", "ipipMode": "Always", "vxlanMode": "Always"}
        })))
        .unwrap_err();
        let fields: Vec<&str> = e.problems.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            fields,
            [
                "metadata.name",
                "metadata.namespace",
                "spec.cidr",
                "spec.vxlanMode"
            ],
            "{e}"
        );
    }
}
