//! Field checks several Kubernetes kinds share: label maps, label
//! selectors, protocols, and ports given as a number or a name.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::resources::common::Problems;
use crate::validate::names::{label_value, one_of, port_name, port_number, qualified_name};

pub(super) const PROTOCOLS: &[&str] = &["TCP", "UDP", "SCTP"];

/// Labels as a map of qualified names to label values (`labels`,
/// `matchLabels`, a Service's `selector`).
pub(crate) fn label_map(field: &str, m: &BTreeMap<String, String>, p: &mut Problems) {
    for (k, v) in m {
        if let Err(e) = qualified_name(k) {
            p.add(field, e);
        }
        if let Err(e) = label_value(v) {
            p.add(format!("{field}[{k}]"), e);
        }
    }
}

pub(super) fn selector(field: &str, s: &LabelSelector, p: &mut Problems) {
    if let Some(m) = &s.match_labels {
        label_map(&format!("{field}.matchLabels"), m, p);
    }
    for (i, r) in s.match_expressions.iter().flatten().enumerate() {
        let f = format!("{field}.matchExpressions[{i}]");
        if let Err(e) = qualified_name(&r.key) {
            p.add(format!("{f}.key"), e);
        }
        let values = r.values.as_deref().unwrap_or_default();
        match r.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => p.add(
                format!("{f}.values"),
                format!("must be specified when `operator` is '{}'", r.operator),
            ),
            "Exists" | "DoesNotExist" if !values.is_empty() => p.add(
                format!("{f}.values"),
                format!("may not be specified when `operator` is '{}'", r.operator),
            ),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => p.add(
                format!("{f}.operator"),
                one_of(other, &["In", "NotIn", "Exists", "DoesNotExist"]).unwrap_err(),
            ),
        }
        for (j, v) in values.iter().enumerate() {
            if let Err(e) = label_value(v) {
                p.add(format!("{f}.values[{j}]"), e);
            }
        }
    }
}

pub(super) fn protocol(field: String, proto: Option<&String>, p: &mut Problems) {
    if let Some(proto) = proto
        && let Err(e) = one_of(proto, PROTOCOLS)
    {
        p.add(field, e);
    }
}

pub(super) fn number_or_name(field: String, port: &IntOrString, p: &mut Problems) {
    let r = match port {
        IntOrString::Int(n) => port_number((*n).into()),
        IntOrString::String(s) => port_name(s),
    };
    if let Err(e) = r {
        p.add(field, e);
    }
}
