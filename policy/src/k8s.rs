//! Kubernetes `networking.k8s.io/v1` NetworkPolicy into the model, with
//! the API's semantics:
//! - the pods selected (by `podSelector`, in the policy's namespace) are
//!   default-deny in each direction the policy governs;
//! - `policyTypes` unset means Ingress, plus Egress when `egress` has rules;
//! - in a peer, `podSelector` alone means pods of the policy's namespace,
//!   `namespaceSelector` alone every pod of the selected namespaces, both
//!   together pods matching both (AND); `ipBlock` a CIDR minus `except`;
//! - a rule with no peers allows every peer, with no ports every port;
//! - a port's protocol defaults to TCP; `port` is a number or a container
//!   port's name; `endPort` makes a range and needs a numeric `port`.

use std::collections::BTreeSet;

use ipnet::IpNet;
use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyPeer, NetworkPolicyPort, NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::Selector;
use crate::model::Policy;
use crate::model::{Action, Namespaces, Peer, PolicyProblem, PortMatch, PortSel, Protocol, Rule};

/// Why a NetworkPolicy cannot be converted: every problem, each with the
/// field it is in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("NetworkPolicy {name}: {}", .problems.iter().map(|p| format!("{}: {}", p.field, p.message)).collect::<Vec<_>>().join("; "))]
pub struct PolicyError {
    pub name: String,
    pub problems: Vec<PolicyProblem>,
}

/// A Kubernetes label selector as a selector; an empty one selects all.
pub fn label_selector(s: &LabelSelector) -> Result<Selector, String> {
    let mut parts = Vec::new();
    for (k, v) in s.match_labels.iter().flatten() {
        parts.push(Selector::Eq(k.clone(), v.clone()));
    }
    for e in s.match_expressions.iter().flatten() {
        let values: BTreeSet<String> = e.values.iter().flatten().cloned().collect();
        let key = e.key.clone();
        parts.push(match e.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => {
                return Err(format!("{} {key}: needs at least one value", e.operator));
            }
            "In" => Selector::In(key, values),
            "NotIn" => Selector::NotIn(key, values),
            "Exists" | "DoesNotExist" if !values.is_empty() => {
                return Err(format!("{} {key}: takes no values", e.operator));
            }
            "Exists" => Selector::Has(key),
            "DoesNotExist" => Selector::Not(Box::new(Selector::Has(key))),
            other => {
                return Err(format!(
                    "operator {other:?}: use In, NotIn, Exists or DoesNotExist"
                ));
            }
        });
    }
    // A balanced tree: a selector with thousands of terms stays shallow
    // for the recursive walks (matching, printing, dropping).
    Ok(Selector::all_of(parts))
}

struct Problems(Vec<PolicyProblem>);

impl Problems {
    fn add(&mut self, field: String, message: impl Into<String>) {
        self.0.push(PolicyProblem {
            field,
            message: message.into(),
        });
    }
}

fn peer(p: &NetworkPolicyPeer, ns: &str, field: &str, out: &mut Problems) -> Option<Peer> {
    match (&p.pod_selector, &p.namespace_selector, &p.ip_block) {
        (None, None, Some(b)) => {
            let cidr: IpNet = match b.cidr.parse() {
                Ok(c) => c,
                Err(_) => {
                    out.add(
                        format!("{field}.ipBlock.cidr"),
                        format!("{:?} is not a CIDR", b.cidr),
                    );
                    return None;
                }
            };
            let mut except = Vec::new();
            for (i, e) in b.except.iter().flatten().enumerate() {
                match e.parse::<IpNet>() {
                    // Equal to the CIDR is allowed (it excepts everything).
                    Ok(x) if cidr.contains(&x) => except.push(x),
                    Ok(_) => out.add(
                        format!("{field}.ipBlock.except[{i}]"),
                        format!("{e} is not inside {cidr}"),
                    ),
                    Err(_) => out.add(
                        format!("{field}.ipBlock.except[{i}]"),
                        format!("{e:?} is not a CIDR"),
                    ),
                }
            }
            Some(Peer::Net { cidr, except })
        }
        (_, _, Some(_)) => {
            out.add(
                field.to_string(),
                "ipBlock cannot be combined with podSelector or namespaceSelector",
            );
            None
        }
        (None, None, None) => {
            out.add(
                field.to_string(),
                "a peer needs podSelector, namespaceSelector or ipBlock",
            );
            None
        }
        (pods, namespaces, None) => {
            let pods = match pods.as_ref().map(label_selector).transpose() {
                Ok(s) => s.unwrap_or(Selector::All),
                Err(e) => {
                    out.add(format!("{field}.podSelector"), e);
                    return None;
                }
            };
            let namespaces = match namespaces {
                None => Namespaces::Named(ns.to_string()),
                Some(s) => match label_selector(s) {
                    Ok(s) => Namespaces::Selected(s),
                    Err(e) => {
                        out.add(format!("{field}.namespaceSelector"), e);
                        return None;
                    }
                },
            };
            Some(Peer::Pods { namespaces, pods })
        }
    }
}

fn port(p: &NetworkPolicyPort, field: &str, out: &mut Problems) -> Option<PortMatch> {
    let protocol = match p.protocol.as_deref().unwrap_or("TCP") {
        "TCP" => Protocol::Tcp,
        "UDP" => Protocol::Udp,
        "SCTP" => Protocol::Sctp,
        other => {
            out.add(
                format!("{field}.protocol"),
                format!("{other:?}: use TCP, UDP or SCTP"),
            );
            return None;
        }
    };
    let ports = match (&p.port, p.end_port) {
        (None, None) => PortSel::Any,
        (None, Some(_)) => {
            out.add(format!("{field}.endPort"), "endPort needs a numeric port");
            return None;
        }
        (Some(IntOrString::String(name)), None) => PortSel::Named(name.clone()),
        (Some(IntOrString::String(_)), Some(_)) => {
            out.add(
                format!("{field}.endPort"),
                "endPort needs a numeric port, not a name",
            );
            return None;
        }
        (Some(IntOrString::Int(n)), end) => {
            let first = match u16::try_from(*n) {
                Ok(v) if v > 0 => v,
                _ => {
                    out.add(
                        format!("{field}.port"),
                        format!("{n} is not a port (1 to 65535)"),
                    );
                    return None;
                }
            };
            let last = match end.map(u16::try_from) {
                None => first,
                Some(Ok(e)) if e >= first => e,
                Some(_) => {
                    out.add(
                        format!("{field}.endPort"),
                        format!(
                            "{} is below port {first} or not a port",
                            end.unwrap_or_default()
                        ),
                    );
                    return None;
                }
            };
            PortSel::Range(first, last)
        }
    };
    Some(PortMatch { protocol, ports })
}

fn rules<'a>(
    list: impl Iterator<
        Item = (
            Option<&'a Vec<NetworkPolicyPeer>>,
            Option<&'a Vec<NetworkPolicyPort>>,
        ),
    >,
    ns: &str,
    field: &str,
    out: &mut Problems,
) -> Vec<Rule> {
    list.enumerate()
        .map(|(i, (peers, ports))| {
            let (pf, rf) = if field == "spec.ingress" {
                ("from", i)
            } else {
                ("to", i)
            };
            Rule {
                action: Action::Allow,
                peers: peers
                    .into_iter()
                    .flatten()
                    .enumerate()
                    .filter_map(|(j, p)| peer(p, ns, &format!("{field}[{rf}].{pf}[{j}]"), out))
                    .collect(),
                ports: ports
                    .into_iter()
                    .flatten()
                    .enumerate()
                    .filter_map(|(j, p)| port(p, &format!("{field}[{rf}].ports[{j}]"), out))
                    .collect(),
            }
        })
        .collect()
}

/// The policy in the model; every problem at once if it does not convert
/// (nothing half-converted: a rule that lost a peer would allow more).
pub fn from_network_policy(np: &NetworkPolicy) -> Result<Policy, PolicyError> {
    let ns = np
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let name = format!("{ns}/{}", np.metadata.name.as_deref().unwrap_or(""));
    let empty = NetworkPolicySpec::default();
    let spec = np.spec.as_ref().unwrap_or(&empty);
    let mut out = Problems(Vec::new());
    let pods = match label_selector(&spec.pod_selector.clone().unwrap_or_default()) {
        Ok(s) => s,
        Err(e) => {
            out.add("spec.podSelector".into(), e);
            Selector::All
        }
    };
    let egress_rules = spec.egress.as_ref().is_some_and(|e| !e.is_empty());
    let (mut ingress_on, mut egress_on) = (false, false);
    match &spec.policy_types {
        None => {
            ingress_on = true;
            egress_on = egress_rules;
        }
        Some(types) if types.is_empty() => {
            ingress_on = true;
            egress_on = egress_rules;
        }
        Some(types) => {
            for (i, t) in types.iter().enumerate() {
                match t.as_str() {
                    "Ingress" => ingress_on = true,
                    "Egress" => egress_on = true,
                    other => out.add(
                        format!("spec.policyTypes[{i}]"),
                        format!("{other:?}: use Ingress or Egress"),
                    ),
                }
            }
        }
    }
    let ingress = rules(
        spec.ingress
            .iter()
            .flatten()
            .map(|r| (r.from.as_ref(), r.ports.as_ref())),
        &ns,
        "spec.ingress",
        &mut out,
    );
    let egress = rules(
        spec.egress
            .iter()
            .flatten()
            .map(|r| (r.to.as_ref(), r.ports.as_ref())),
        &ns,
        "spec.egress",
        &mut out,
    );
    if !out.0.is_empty() {
        return Err(PolicyError {
            name,
            problems: out.0,
        });
    }
    Ok(Policy {
        name,
        applies_to: Peer::Pods {
            namespaces: Namespaces::Named(ns),
            pods,
        },
        // Rules for a direction the policy does not govern are ignored,
        // as the API server's defaulting leaves them.
        ingress: ingress_on.then_some(ingress),
        egress: egress_on.then_some(egress),
    })
}
