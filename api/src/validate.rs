//! Checks on objects before they are stored, with messages a person can act
//! on: which object, which field, what is wrong, what is allowed.
//!
//! Every object is checked in two steps: it is decoded strictly into its
//! typed struct (a field of the wrong type or an unknown field stops the
//! decoding, and is reported with its path), then the API server's rules
//! (and Tartan's, for its kinds) report every remaining problem at once.
//! Metadata (names, namespaces, labels, annotations) is checked alike for
//! every kind; a Node's `tartan.dev/` annotations are read as bgpd will.

pub mod kube;
pub mod names;
pub mod strict;

use std::fmt;

use ::kube::core::DynamicObject;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::kind::Kind;
use crate::resources::common::{Problem, Problems, dns_label, dns_subdomain};
use crate::resources::{
    BgpConfigurationSpec, BgpFilterSpec, BgpNodeStatusSpec, BgpPeerSpec, BlockAffinitySpec,
    GlobalNetworkPolicySpec, GlobalNetworkSetSpec, HostEndpointSpec, IpPoolSpec, IpReservationSpec,
    IpamBlockSpec, IpamHandleSpec, LoadBalancerIpPoolSpec, NetworkPolicySpec, NetworkSetSpec,
    NodeBgp, RangeAllocationSpec, WorkloadEndpointSpec,
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
    let info = kind.info();
    let object = match &obj.metadata.namespace {
        Some(ns) if info.namespaced => format!("{} \"{ns}/{name}\"", info.name),
        _ => format!("{} {name:?}", info.name),
    };
    let mut problems = metadata_problems(kind, obj);
    if info.group != crate::kind::TARTAN_GROUP {
        let whole = match serde_json::to_value(obj) {
            Ok(v) => v,
            Err(e) => {
                return Err(Invalid {
                    object,
                    problems: vec![(String::new(), e.to_string())],
                });
            }
        };
        problems.extend(kube::problems(kind, &whole));
        if kind == Kind::Node && problems.is_empty() {
            let empty = Default::default();
            let ann = obj.metadata.annotations.as_ref().unwrap_or(&empty);
            return NodeBgp::from_annotations(&name, ann).map(|_| ());
        }
        return if problems.is_empty() {
            Ok(())
        } else {
            Err(Invalid { object, problems })
        };
    }
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

/// What the API server does to an object before it stores it: its
/// defaults ([`crate::defaults`]), then, on an update of `stored`,
/// [`prepare_update`], then the checks. Every writer (Tartan's stores,
/// the API server stand-in) admits objects through this.
pub fn admit(obj: &mut DynamicObject, stored: Option<&DynamicObject>) -> Result<(), Invalid> {
    crate::defaults::apply(obj);
    if let Some(s) = stored {
        prepare_update(obj, s);
    }
    validate(obj)
}

/// What the API server does to an update before it checks it
/// (`PrepareForUpdate`): `obj`, about to replace `stored`, loses what its
/// kind's strategy drops. For a Service, the fields its new type no longer
/// allows that the update left as stored
/// ([`kube::drop_type_dependent_fields`]); other kinds are left alone.
/// Never for a create.
pub fn prepare_update(obj: &mut DynamicObject, stored: &DynamicObject) {
    let is_service = |o: &DynamicObject| {
        o.types
            .as_ref()
            .is_some_and(|t| t.api_version == "v1" && t.kind == "Service")
    };
    if is_service(obj) && is_service(stored) {
        kube::drop_type_dependent_fields(&mut obj.data, &stored.data);
    }
}

/// Whether [`prepare_update`] may change an object of `kind`: its checks
/// then wait for the stored version.
pub fn depends_on_stored(kind: Kind) -> bool {
    kind == Kind::Service
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
            let rule = match kind {
                Kind::Namespace => dns_label,
                Kind::Service => names::dns1035_label,
                _ => dns_subdomain,
            };
            if let Err(e) = rule(n) {
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
    let mut labels = Problems::default();
    if let Some(l) = &obj.metadata.labels {
        kube::label_map("metadata.labels", l, &mut labels);
    }
    p.extend(labels.0);
    if let Some(a) = &obj.metadata.annotations {
        let mut size = 0;
        for (k, v) in a {
            size += k.len() + v.len();
            if let Err(e) = names::annotation_key(k) {
                p.push(("metadata.annotations".into(), e));
            }
            if k == crate::store::placeholder::UNREADABLE_ANNOTATION {
                p.push((
                    format!("metadata.annotations[{k}]"),
                    "reserved: Tartan marks with it a stored value it cannot read; remove it"
                        .into(),
                ));
            }
        }
        if size > names::ANNOTATIONS_MAX {
            p.push((
                "metadata.annotations".into(),
                format!(
                    "Too long: {size} bytes in total; annotations may hold at most {} bytes",
                    names::ANNOTATIONS_MAX
                ),
            ));
        }
    }
    p
}

/// Problems with an object's metadata as written (before it is read into
/// [`DynamicObject`], which would drop unknown fields and could not hold a
/// boolean where a string goes): decoded strictly into `ObjectMeta`.
pub fn raw_metadata_problems(obj: &Value) -> Vec<Problem> {
    match obj.get("metadata") {
        None | Some(Value::Null) => vec![("metadata".into(), "Required value".into())],
        Some(m) => match strict::decode::<ObjectMeta>(m, "metadata") {
            Ok(_) => vec![],
            Err(p) => vec![p],
        },
    }
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
        Kind::NetworkSet => spec_problems(spec, NetworkSetSpec::check),
        Kind::GlobalNetworkSet => spec_problems(spec, GlobalNetworkSetSpec::check),
        Kind::HostEndpoint => spec_problems(spec, HostEndpointSpec::check),
        Kind::IpamBlock => spec_problems(spec, IpamBlockSpec::check),
        Kind::IpamHandle => spec_problems(spec, IpamHandleSpec::check),
        Kind::BlockAffinity => spec_problems(spec, BlockAffinitySpec::check),
        Kind::WorkloadEndpoint => spec_problems(spec, WorkloadEndpointSpec::check),
        Kind::BgpNodeStatus => spec_problems(spec, BgpNodeStatusSpec::check),
        Kind::LoadBalancerIpPool => spec_problems(spec, LoadBalancerIpPoolSpec::check),
        Kind::RangeAllocation => spec_problems(spec, RangeAllocationSpec::check),
        // Kubernetes kinds are not checked here.
        _ => vec![],
    });
    p
}

/// Parse `spec` as `T` and check it; a parse error is the only problem
/// reported, as nothing after it can be trusted.
fn spec_problems<T: DeserializeOwned + serde::Serialize>(
    spec: &Value,
    check: fn(&T) -> Vec<Problem>,
) -> Vec<Problem> {
    match serde_path_to_error::deserialize::<_, T>(spec) {
        Ok(typed) => {
            let shape = serde_json::to_value(&typed)
                .ok()
                .and_then(|back| strict::list_read_as_object(spec, &back, "spec"));
            match shape {
                Some(problem) => vec![problem],
                None => check(&typed),
            }
        }
        Err(e) => vec![strict::parse_problem(&e, "spec")],
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

    /// The API server lowercases an annotation key before it checks it
    /// (labels it does not): a policy annotated `Example.com/owner` is
    /// valid, and readable through the store.
    #[test]
    fn annotation_keys_are_checked_lowercased() {
        use crate::resources::GlobalNetworkPolicy;
        use crate::store::typed::from_dynamic;
        use k8s_openapi::api::networking::v1::NetworkPolicy as KubeNetworkPolicy;

        let annotated = |kind: Kind, key: &str| {
            let mut o = crate::examples::example(kind, "owned");
            o.metadata.annotations = Some([(key.to_string(), "team-a".to_string())].into());
            o
        };
        for kind in [
            Kind::GlobalNetworkPolicy,
            Kind::KubeNetworkPolicy,
            Kind::Service,
        ] {
            let o = annotated(kind, "Example.com/owner");
            assert_eq!(validate(&o), Ok(()), "{kind}");
            let o = annotated(kind, "Example.com/Bad Key");
            assert!(validate(&o).is_err(), "{kind}");
        }
        let g = from_dynamic::<GlobalNetworkPolicy>(annotated(
            Kind::GlobalNetworkPolicy,
            "Example.com/owner",
        ));
        assert!(g.is_ok(), "{g:?}");
        let k = from_dynamic::<KubeNetworkPolicy>(annotated(
            Kind::KubeNetworkPolicy,
            "Example.com/owner",
        ));
        assert!(k.is_ok(), "{k:?}");
        // A label key is still case-sensitive in its prefix.
        let mut o = crate::examples::example(Kind::GlobalNetworkPolicy, "owned");
        o.metadata.labels = Some([("Example.com/owner".to_string(), "a".to_string())].into());
        assert!(validate(&o).is_err());
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
