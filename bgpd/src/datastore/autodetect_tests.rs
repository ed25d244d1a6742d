//! Which annotation autodetection writes, keeps or fails on; and one
//! attempt against a store: the Node gets the annotation, a second
//! attempt writes nothing.

use super::*;
use tartan_api::store::memory::MemoryStore;

fn local() -> Vec<LocalAddress> {
    [
        ("lo", "127.0.0.1/8"),
        ("eth0", "10.0.0.5/24"),
        ("eth0", "fd00::5/64"),
    ]
    .iter()
    .map(|(i, a)| LocalAddress {
        interface: i.to_string(),
        address: a.parse().unwrap(),
    })
    .collect()
}

fn facts<'a>(
    family: Family,
    current: Option<&'a str>,
    configured: Option<&'a AddressAutodetection>,
    internal: &'a [IpAddr],
    local: &'a [LocalAddress],
) -> Facts<'a> {
    Facts {
        family,
        current,
        configured,
        internal,
        local,
        reach_source: None,
    }
}

#[test]
fn by_default_the_internal_ip_fills_an_absent_annotation_only() {
    let l = local();
    let v4: Vec<IpAddr> = vec!["10.0.0.5".parse().unwrap()];
    assert_eq!(
        decide(&facts(Family::V4, None, None, &v4, &l)),
        Action::Write("10.0.0.5/24".parse().unwrap())
    );
    // Written by hand: kept, even when it differs.
    assert_eq!(
        decide(&facts(Family::V4, Some("10.9.9.9/16"), None, &v4, &l)),
        Action::Keep
    );
    // No IPv6 InternalIP: no IPv6 address, and no complaint.
    assert_eq!(
        decide(&facts(Family::V6, None, None, &v4, &l)),
        Action::Keep
    );
    let both: Vec<IpAddr> = vec!["10.0.0.5".parse().unwrap(), "fd00::5".parse().unwrap()];
    assert_eq!(
        decide(&facts(Family::V6, None, None, &both, &l)),
        Action::Write("fd00::5/64".parse().unwrap())
    );
    // No InternalIP at all: IPv4 fails and says why.
    let Action::Fail(why) = decide(&facts(Family::V4, None, None, &[], &l)) else {
        panic!("expected a failure");
    };
    assert_eq!(why, "the Node has no IPv4 InternalIP");
}

#[test]
fn a_configured_method_overrides_the_annotation_and_keeps_an_equal_one() {
    let l = local();
    let m: AddressAutodetection = serde_json::from_str(r#"{"interface": "eth0"}"#).unwrap();
    assert_eq!(
        decide(&facts(Family::V4, Some("10.9.9.9/16"), Some(&m), &[], &l)),
        Action::Write("10.0.0.5/24".parse().unwrap())
    );
    assert_eq!(
        decide(&facts(Family::V4, Some("10.0.0.5/24"), Some(&m), &[], &l)),
        Action::Keep
    );
    let none: AddressAutodetection = serde_json::from_str(r#"{"interface": "ens.*"}"#).unwrap();
    assert!(matches!(
        decide(&facts(
            Family::V4,
            Some("10.0.0.5/24"),
            Some(&none),
            &[],
            &l
        )),
        Action::Fail(_)
    ));
}

#[tokio::test]
async fn an_attempt_writes_the_annotation_once() {
    let store = MemoryStore::new();
    let node: Node = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "n1", "annotations": {"other": "x"}},
        "status": {"addresses": [
            {"type": "Hostname", "address": "n1"},
            {"type": "InternalIP", "address": "10.0.0.5"},
            {"type": "InternalIP", "address": "fd00::5"}
        ]}
    }))
    .unwrap();
    store.create_typed(&node).await.unwrap();
    assert!(!attempt(&store, "n1", &local()).await);
    let n: Node = store.get_typed(None, "n1").await.unwrap();
    let a = n.metadata.annotations.clone().unwrap();
    assert_eq!(a[BGP_IPV4_ADDRESS], "10.0.0.5/24");
    assert_eq!(a[BGP_IPV6_ADDRESS], "fd00::5/64");
    assert_eq!(a["other"], "x");
    let rv = n.metadata.resource_version.clone();
    assert!(!attempt(&store, "n1", &local()).await);
    let again: Node = store.get_typed(None, "n1").await.unwrap();
    assert_eq!(
        again.metadata.resource_version, rv,
        "nothing to write the second time"
    );
    // A Node not there yet is retried.
    assert!(attempt(&store, "n2", &local()).await);
}
