//! HostEndpoint events into the state. One felix cannot read is kept as
//! its reason with the node it names, when that field still reads, so
//! that the felix of another node can leave it alone (see
//! [`crate::calc::hosts`]).

use std::collections::BTreeMap;

use tartan_api::Kind;
use tartan_api::resources::HostEndpoint;
use tartan_api::store::DynamicObject;
use tartan_api::store::typed::from_dynamic;
use tartan_api::store::watch::WatchEvent;

use super::fold::Folded;
use crate::calc::hosts::{HostEndpointInfo, UnreadableHostEndpoint, WatchedHostEndpoint};
use crate::unreadable::Unreadable;

fn key(o: &DynamicObject) -> String {
    format!("/{}", o.metadata.name.as_deref().unwrap_or(""))
}

/// What felix keeps of `o`: what it reads, or why it cannot (with its
/// `spec.node` if that alone is a string).
fn read(o: DynamicObject) -> WatchedHostEndpoint {
    let node = o
        .data
        .get("spec")
        .and_then(|s| s.get("node"))
        .and_then(|n| n.as_str())
        .map(String::from);
    match from_dynamic::<HostEndpoint>(o) {
        Ok(h) => Ok(HostEndpointInfo::from_object(&h)),
        Err(e) => Err(UnreadableHostEndpoint {
            node,
            why: e.to_string(),
        }),
    }
}

pub(super) fn fold_host_endpoint(
    map: &mut BTreeMap<String, WatchedHostEndpoint>,
    ev: WatchEvent,
    bad: &mut Unreadable,
) -> Folded {
    let changed = match ev {
        WatchEvent::Added(o) | WatchEvent::Modified(o) => {
            let k = key(&o);
            let got = read(o);
            bad.note(
                Kind::HostEndpoint,
                &k,
                got.as_ref().map(|_| ()).map_err(|u| u.why.as_str()),
            );
            if map.get(&k) == Some(&got) {
                false
            } else {
                map.insert(k, got);
                true
            }
        }
        WatchEvent::Deleted(o) => {
            let k = key(&o);
            bad.note(Kind::HostEndpoint, &k, Ok(()));
            map.remove(&k).is_some()
        }
        WatchEvent::Synced { .. } => {
            return Folded {
                synced: true,
                changed: true,
            };
        }
        WatchEvent::Relisting => false,
    };
    Folded {
        synced: false,
        changed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hep(spec: serde_json::Value) -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "tartan.dev/v1", "kind": "HostEndpoint",
            "metadata": {"name": "h", "labels": {"role": "edge"}}, "spec": spec
        }))
        .unwrap()
    }

    #[test]
    fn readable_unreadable_and_deleted() {
        let mut map = BTreeMap::new();
        let mut bad = Unreadable::new(None);
        let ok = hep(serde_json::json!({"node": "n1", "interfaceName": "eth0"}));
        assert!(fold_host_endpoint(&mut map, WatchEvent::Added(ok.clone()), &mut bad).changed);
        assert!(!fold_host_endpoint(&mut map, WatchEvent::Modified(ok), &mut bad).changed);
        assert_eq!(map["/h"].as_ref().unwrap().labels["role"], "edge");
        let broken = hep(serde_json::json!({"node": "n2", "interfaceName": 7}));
        fold_host_endpoint(&mut map, WatchEvent::Modified(broken), &mut bad);
        assert_eq!(map["/h"].as_ref().unwrap_err().node.as_deref(), Some("n2"));
        assert_eq!(bad.count(Kind::HostEndpoint), 1);
        let no_node = hep(serde_json::json!({"node": 1}));
        fold_host_endpoint(&mut map, WatchEvent::Modified(no_node.clone()), &mut bad);
        assert_eq!(map["/h"].as_ref().unwrap_err().node, None);
        assert!(fold_host_endpoint(&mut map, WatchEvent::Deleted(no_node), &mut bad).changed);
        assert!(map.is_empty());
        assert_eq!(bad.count(Kind::HostEndpoint), 0);
    }
}
