//! The labels felix gives namespaces and endpoints itself, as Calico does
//! (its "automatic labels"), so that selectors written for Calico match:
//!
//! - a namespace: `projectcalico.org/name` = its name, as
//!   `kubernetes.io/metadata.name` is (the API server's own);
//! - an endpoint: `projectcalico.org/namespace` = its namespace,
//!   `projectcalico.org/orchestrator` = `k8s`, and, once felix has seen
//!   its Pod, `projectcalico.org/serviceaccount` = the Pod's service
//!   account; once felix has also read that ServiceAccount, its labels
//!   under the prefix `pcsa.` (`pcsa.<key>` = value) and
//!   `pcsa.projectcalico.org/name` = its name, as Calico's profile for a
//!   service account gives them;
//! - a NetworkSet: `projectcalico.org/namespace` = its namespace (a
//!   GlobalNetworkSet has none).
//!
//! Each is forced: a label of the same key on the object is overwritten
//! (a pod cannot pass for another namespace's or another service
//! account's), and an endpoint without its Pod seen has no
//! `projectcalico.org/serviceaccount` at all (the copy of the Pod's
//! labels on a WorkloadEndpoint could only have it from the Pod's own
//! labels). Every `pcsa.` label is forced the same way: an endpoint has
//! none but its ServiceAccount's, and none while felix has not read it.
//! Pure.

use super::state::Labels;

/// On a namespace: its name.
pub const NAME: &str = "projectcalico.org/name";
/// On an endpoint: its namespace (the policy compiler's name for it).
pub const NAMESPACE: &str = tartan_policy::tartan::NAMESPACE_LABEL;
/// On an endpoint: [`KUBERNETES`].
pub const ORCHESTRATOR: &str = "projectcalico.org/orchestrator";
/// On an endpoint whose Pod felix has seen: the Pod's service account.
pub const SERVICE_ACCOUNT: &str = tartan_policy::tartan::SERVICE_ACCOUNT_LABEL;
/// Calico's name for Kubernetes as an orchestrator.
pub const KUBERNETES: &str = "k8s";

/// Namespace `name`'s labels with its automatic ones: Calico's, and
/// `kubernetes.io/metadata.name` as the API server sets it (a Namespace
/// stored without it, or claiming another's name, is read as its own).
pub fn namespace(name: &str, mut labels: Labels) -> Labels {
    labels.insert(NAME.to_string(), name.to_string());
    labels.insert(
        tartan_policy::compile::NAMESPACE_NAME_LABEL.to_string(),
        name.to_string(),
    );
    labels
}

/// The prefix of the labels an endpoint takes from its ServiceAccount.
pub const SA_PREFIX: &str = tartan_policy::tartan::SA_LABEL_PREFIX;
/// On an endpoint whose ServiceAccount felix has read: its name.
pub const SA_NAME: &str = tartan_policy::tartan::SA_NAME_LABEL;

/// The labels of an endpoint in `namespace` with its automatic ones:
/// `labels` are its Pod's (then `service_account` is the Pod's, with the
/// ServiceAccount's labels when felix has read it) or the endpoint's copy
/// of them (then `None`).
pub fn endpoint(
    namespace: &str,
    mut labels: Labels,
    service_account: Option<(&str, Option<&Labels>)>,
) -> Labels {
    labels.insert(NAMESPACE.to_string(), namespace.to_string());
    labels.insert(ORCHESTRATOR.to_string(), KUBERNETES.to_string());
    labels.retain(|k, _| !k.starts_with(SA_PREFIX));
    match service_account.filter(|(s, _)| !s.is_empty()) {
        Some((sa, sa_labels)) => {
            labels.insert(SERVICE_ACCOUNT.to_string(), sa.to_string());
            if let Some(own) = sa_labels {
                for (k, v) in own {
                    labels.insert(format!("{SA_PREFIX}{k}"), v.clone());
                }
                labels.insert(SA_NAME.to_string(), sa.to_string());
            }
        }
        None => {
            labels.remove(SERVICE_ACCOUNT);
        }
    };
    labels
}

/// The labels of a network set with its automatic one: a NetworkSet
/// (`namespace` given) carries its namespace, as an endpoint does.
pub fn network_set(namespace: Option<&str>, mut labels: Labels) -> Labels {
    match namespace {
        Some(ns) => labels.insert(NAMESPACE.to_string(), ns.to_string()),
        None => labels.remove(NAMESPACE),
    };
    labels
}
