//! A network set felix cannot read, in the place of a deny list: the
//! policies that could pick it are enforced as [`deny_in_place`], so
//! nothing the readable set would have dropped gets through, whatever
//! later policies allow.

use std::sync::Arc;

use serde_json::json;

use super::global;
use super::interp::Cluster;
use crate::compile::{Endpoint, NetSet};
use crate::ir::Policy;
use crate::isolate::{deny_in_place, isolation, reaching_unreadable_sets};

/// Whether the packet from x/a (10.0.0.1, on this node) to `dst` TCP 80
/// is allowed under `policies`, by the compiled table (and the reference
/// agrees).
fn allowed(policies: &[&Policy], sets: Vec<NetSet>, dst: &str) -> bool {
    let cl = Cluster {
        namespaces: [("x".to_string(), Default::default())].into(),
        endpoints: vec![Endpoint {
            namespace: "x".into(),
            labels: Arc::new(Default::default()),
            addrs: vec!["10.0.0.1".parse().unwrap()],
            ports: Arc::new([]),
            interface: Some("tarxa".into()),
        }],
        net_sets: sets,
    };
    super::tcp_80_allowed(policies, &cl, "10.0.0.1", dst)
}

#[test]
fn an_unreadable_deny_list_set_still_denies_what_it_held() {
    let block = global(
        "block",
        json!({"order": 10, "selector": "all()", "types": ["Egress"],
               "egress": [{"action": "Deny", "destination": {"selector": "list == 'blocked'"}}]}),
    );
    let open = global(
        "open",
        json!({"order": 20, "selector": "all()", "types": ["Egress"],
               "egress": [{"action": "Allow"}]}),
    );
    let blocked = NetSet {
        namespace: None,
        labels: Arc::new([("list".to_string(), "blocked".to_string())].into()),
        nets: ["192.0.2.0/24".parse().unwrap()].into(),
    };
    // Readable: the list's network is dropped, the rest allowed.
    assert!(!allowed(
        &[&block, &open],
        vec![blocked.clone()],
        "192.0.2.5"
    ));
    assert!(allowed(&[&block, &open], vec![blocked], "198.51.100.1"));
    // Unreadable (its networks unknown): the policy that could pick it
    // denies in its place; what reaches it goes no further.
    let ns = [("x".to_string(), Default::default())].into();
    let reaching = reaching_unreadable_sets([&block, &open], &[None], &ns);
    assert_eq!(reaching.len(), 1);
    assert!(reaching.contains(&block.source));
    let denied = deny_in_place(&block);
    assert!(!allowed(&[&denied, &open], vec![], "192.0.2.5"));
    assert!(!allowed(&[&denied, &open], vec![], "198.51.100.1"));
    // An isolation at order 1000 in its place would have let the later
    // Allow through: the reason for denying in place.
    let iso = isolation("GlobalNetworkPolicy", None, "block");
    assert!(allowed(&[&open, &iso], vec![], "192.0.2.5"));
}
