//! What a kubelet writes to a Pod object, as the lab plays it: the
//! status once the pod is wired (Running, Ready, its addresses), the Ready
//! condition flipped by a probe, and the deletion mark of a graceful
//! termination.

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};
use tartan_api::store::typed::{TypedStore, to_dynamic};
use tartan_api::store::{Datastore, StoreError};

/// Reads pod `ns/name`, changes it with `f` (as JSON) and writes it back
/// (through the `status` subresource when `status`, as a kubelet writes
/// a Pod's status), retrying when it changed meanwhile.
pub async fn edit_pod(
    store: &dyn Datastore,
    ns: &str,
    name: &str,
    status: bool,
    f: impl Fn(&mut Value),
) -> Result<()> {
    for _ in 0..10 {
        let pod: Pod = store
            .get_typed(Some(ns), name)
            .await
            .with_context(|| format!("read Pod {ns}/{name}"))?;
        let mut v = serde_json::to_value(&pod)?;
        f(&mut v);
        let new: Pod = serde_json::from_value(v)?;
        let written = if status {
            store.update_status(to_dynamic(&new)?).await.map(|_| ())
        } else {
            store.update_typed(&new).await.map(|_| ())
        };
        match written {
            Ok(_) => return Ok(()),
            Err(StoreError::Conflict { .. }) => continue,
            Err(e) => return Err(e).with_context(|| format!("write Pod {ns}/{name}")),
        }
    }
    bail!("Pod {ns}/{name} kept changing; try again")
}

/// The Pod's status as a kubelet reports it once the pod is wired: its
/// addresses (a dual-stack pod's IPv6 one second in `podIPs`), its
/// node's, Running and Ready.
pub fn running_status(v: &mut Value, pod_ip: &str, pod_ip6: Option<&str>, host_ip: &str) {
    let mut ips = vec![json!({"ip": pod_ip})];
    ips.extend(pod_ip6.map(|a| json!({"ip": a})));
    v["status"] = json!({
        "phase": "Running",
        "podIP": pod_ip,
        "podIPs": ips,
        "hostIP": host_ip,
        "conditions": [{"type": "Ready", "status": "True"}],
    });
}

/// Sets the Ready condition.
pub fn set_ready(v: &mut Value, ready: bool) {
    let want = if ready { "True" } else { "False" };
    let conds = &mut v["status"]["conditions"];
    if !conds.is_array() {
        *conds = json!([]);
    }
    let list = conds.as_array_mut().expect("made an array");
    match list.iter_mut().find(|c| c["type"] == "Ready") {
        Some(c) => c["status"] = json!(want),
        None => list.push(json!({"type": "Ready", "status": want})),
    }
}

/// Marks the pod as being deleted (graceful termination has begun).
pub fn set_terminating(v: &mut Value, now: std::time::SystemTime) {
    if v["metadata"]["deletionTimestamp"].is_null() {
        v["metadata"]["deletionTimestamp"] = json!(rfc3339(now));
        v["metadata"]["deletionGracePeriodSeconds"] = json!(30);
    }
}

/// `2025-01-02T03:04:05Z`.
pub fn rfc3339(t: std::time::SystemTime) -> String {
    match k8s_openapi::jiff::Timestamp::try_from(t) {
        Ok(t) => t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        Err(_) => "1970-01-01T00:00:00Z".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};
    use tartan_controllers::services::slices::PodView;

    #[test]
    fn timestamps() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(1_709_251_199)),
            "2024-02-29T23:59:59Z"
        );
    }

    #[test]
    fn pod_status_edits() {
        let mut v = json!({"metadata": {"name": "a"}});
        running_status(&mut v, "10.0.0.1", None, "10.213.1.2");
        set_ready(&mut v, false);
        set_terminating(&mut v, UNIX_EPOCH);
        let p: Pod = serde_json::from_value(v.clone()).unwrap();
        let view = PodView::from_pod(&p);
        assert!(!view.ready && view.terminating);
        assert_eq!(view.ip.as_deref(), Some("10.0.0.1"));
        set_ready(&mut v, true);
        let p: Pod = serde_json::from_value(v).unwrap();
        assert!(PodView::from_pod(&p).ready);
    }

    #[test]
    fn a_dual_stack_pod_reports_both_addresses() {
        let mut v = json!({"metadata": {"name": "a"}});
        running_status(&mut v, "10.0.0.1", Some("fd00:10:244::1"), "10.213.1.2");
        assert_eq!(
            v["status"]["podIPs"],
            json!([{"ip": "10.0.0.1"}, {"ip": "fd00:10:244::1"}])
        );
        let p: Pod = serde_json::from_value(v).unwrap();
        let view = PodView::from_pod(&p);
        assert_eq!(view.address_of("IPv6"), Some("fd00:10:244::1"));
    }
}
