//! A ServiceAccount felix cannot read, under a policy that applies by its
//! labels: its pods carry none of them meanwhile, so the policy enforced
//! in its place ([`deny_in_place_for_accounts`]) also takes in the pods
//! running as that account, and what it would have denied them stays
//! denied, whatever later policies allow.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;

use super::global;
use super::interp::Cluster;
use crate::compile::Endpoint;
use crate::ir::Policy;
use crate::isolate::{deny_in_place, deny_in_place_for_accounts};
use crate::tartan::{NAMESPACE_LABEL, SERVICE_ACCOUNT_LABEL};

/// Whether x's pod 10.0.0.1, running as `account` with the account's
/// labels `team` (None: the account unread), may send TCP to port 80 of
/// 192.0.2.5 under `policies`, by the compiled table (the reference
/// agrees).
fn allowed(policies: &[&Policy], account: &str, team: Option<&str>) -> bool {
    let mut labels: BTreeMap<String, String> = [
        (NAMESPACE_LABEL.to_string(), "x".to_string()),
        (SERVICE_ACCOUNT_LABEL.to_string(), account.to_string()),
    ]
    .into();
    if let Some(t) = team {
        labels.insert("pcsa.team".into(), t.into());
    }
    let cl = Cluster {
        namespaces: [("x".to_string(), Default::default())].into(),
        endpoints: vec![Endpoint {
            namespace: "x".into(),
            labels: Arc::new(labels),
            addrs: vec!["10.0.0.1".parse().unwrap()],
            ports: Arc::new([]),
            interface: Some("tarxa".into()),
        }],
        net_sets: vec![],
    };
    super::tcp_80_allowed(policies, &cl, "10.0.0.1", "192.0.2.5")
}

#[test]
fn an_unreadable_account_keeps_its_pods_under_the_deny_that_applied_by_its_labels() {
    let restrict = global(
        "restrict",
        json!({"order": 10, "selector": "all()", "serviceAccountSelector": "team == 'restricted'",
               "types": ["Egress"], "egress": [{"action": "Deny"}]}),
    );
    let open = global(
        "open",
        json!({"order": 20, "selector": "all()", "types": ["Egress"],
               "egress": [{"action": "Allow"}]}),
    );
    // Readable: the restricted account's pod is denied, another allowed.
    assert!(!allowed(&[&restrict, &open], "locked", Some("restricted")));
    assert!(allowed(&[&restrict, &open], "free", Some("other")));
    // `locked` unreadable: its pod has no `pcsa.` labels. The policy
    // merely denying in place no longer applies to it, and the later
    // Allow would let it out: the reason for widening.
    let plain = deny_in_place(&restrict);
    assert!(allowed(&[&plain, &open], "locked", None));
    let ns = [("x".to_string(), Default::default())].into();
    let widened = deny_in_place_for_accounts(&restrict, &[("x", "locked")], &ns);
    assert!(!allowed(&[&widened, &open], "locked", None));
    // Pods of other accounts are not taken in by the widening (the
    // policy itself denies all it reaches meanwhile: fail closed).
    assert!(allowed(&[&widened, &open], "free", Some("other")));
    // An account of another namespace takes in none of x's pods.
    let elsewhere = deny_in_place_for_accounts(&restrict, &[("y", "locked")], &ns);
    assert!(allowed(&[&elsewhere, &open], "locked", None));
}
