//! The result of ADD, in the shape of the configuration's CNI version.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::{CniError, code};
use super::version;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct Interface {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mac: String,
    /// The netns path for the pod's interface; absent for the host end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct IpConfig {
    /// `10.244.0.5/32`.
    pub address: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// Index into `interfaces`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<usize>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct Route {
    pub dst: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gw: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct Dns {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nameservers: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub search: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
}

/// A result in the current shape; [`CniResult::to_json`] writes the shape
/// of the version asked for.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct CniResult {
    pub cni_version: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<Interface>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ips: Vec<IpConfig>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<Route>,
    #[serde(default)]
    pub dns: Dns,
}

impl CniResult {
    /// The result as JSON for `cni_version`: 0.4.0 adds `version` ("4" or
    /// "6") to each IP; 1.x drops it.
    pub fn to_json(&self, cni_version: &str) -> Value {
        let mut r = self.clone();
        r.cni_version = cni_version.to_string();
        let mut v = serde_json::to_value(&r).unwrap_or(Value::Null);
        if !version::at_least(cni_version, "1.0.0")
            && let Some(ips) = v.get_mut("ips").and_then(Value::as_array_mut)
        {
            for ip in ips {
                let six = ip
                    .get("address")
                    .and_then(Value::as_str)
                    .is_some_and(|a| a.contains(':'));
                if let Some(o) = ip.as_object_mut() {
                    o.insert("version".into(), Value::from(if six { "6" } else { "4" }));
                }
            }
        }
        if !version::at_least(cni_version, "1.1.0")
            && let Some(ifs) = v.get_mut("interfaces").and_then(Value::as_array_mut)
        {
            for i in ifs {
                if let Some(o) = i.as_object_mut() {
                    o.remove("mtu");
                }
            }
        }
        v
    }

    /// This result after `prev`, the prevResult of earlier plugins in the
    /// chain, passed through as the specification asks: its interfaces,
    /// addresses, routes and DNS kept as they came (fields this version
    /// does not know included), this result's appended, with its
    /// addresses' interface indexes moved past `prev`'s interfaces. DNS
    /// is `prev`'s when it gives any. `prev` not an object: this result.
    pub fn after(&self, prev: &Value, cni_version: &str) -> Value {
        let ours = self.to_json(cni_version);
        let Some(fields) = prev.as_object() else {
            return ours;
        };
        let mut out = fields.clone();
        out.insert("cniVersion".into(), Value::from(cni_version));
        let list = |v: &Value, k: &str| {
            v.get(k)
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        };
        let mut interfaces = list(prev, "interfaces");
        let offset = interfaces.len();
        interfaces.extend(list(&ours, "interfaces"));
        let mut ips = list(prev, "ips");
        for mut ip in list(&ours, "ips") {
            if let Some(i) = ip.get("interface").and_then(Value::as_u64) {
                ip["interface"] = Value::from(i + offset as u64);
            }
            ips.push(ip);
        }
        let mut routes = list(prev, "routes");
        routes.extend(list(&ours, "routes"));
        for (k, v) in [("interfaces", interfaces), ("ips", ips), ("routes", routes)] {
            if !v.is_empty() {
                out.insert(k.into(), Value::Array(v));
            }
        }
        let prev_dns = fields
            .get("dns")
            .and_then(Value::as_object)
            .is_some_and(|d| !d.is_empty());
        if !prev_dns && let Some(d) = ours.get("dns") {
            out.insert("dns".into(), d.clone());
        }
        Value::Object(out)
    }

    /// Read a prevResult (any supported version; unknown keys ignored).
    pub fn from_prev(v: &Value) -> Result<CniResult, CniError> {
        serde_json::from_value(v.clone()).map_err(|e| {
            CniError::new(code::INVALID_CONFIG, "prevResult is not a CNI result")
                .with_details(e.to_string())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prev_result_is_passed_through_and_ours_appended() {
        let prev = serde_json::json!({
            "cniVersion": "1.1.0",
            "interfaces": [{"name": "dummy0", "socketPath": "/run/x.sock"}],
            "ips": [{"address": "192.0.2.9/24", "interface": 0}],
            "routes": [{"dst": "192.0.2.0/24", "table": 7}],
            "dns": {"nameservers": ["192.0.2.53"]},
        });
        let v = sample().after(&prev, "1.1.0");
        // Theirs as they came, unknown fields too.
        assert_eq!(v["interfaces"][0]["socketPath"], "/run/x.sock");
        assert_eq!(v["routes"][0]["table"], 7);
        assert_eq!(v["ips"][0]["address"], "192.0.2.9/24");
        // Ours after, pointing at our interface at its new place.
        assert_eq!(v["interfaces"][1]["name"], "eth0");
        assert_eq!(v["ips"][1]["address"], "10.0.0.5/32");
        assert_eq!(v["ips"][1]["interface"], 1);
        assert_eq!(v["ips"][2]["interface"], 1);
        assert_eq!(v["routes"][1]["dst"], "0.0.0.0/0");
        assert_eq!(v["dns"]["nameservers"][0], "192.0.2.53");
        assert_eq!(v["cniVersion"], "1.1.0");
        // Read back as a result, ours is found by its interface.
        let r = CniResult::from_prev(&v).unwrap();
        assert_eq!(r.interfaces.len(), 2);
        // No prevResult object: ours alone.
        assert_eq!(
            sample().after(&Value::Null, "1.0.0"),
            sample().to_json("1.0.0")
        );
    }

    fn sample() -> CniResult {
        CniResult {
            cni_version: String::new(),
            interfaces: vec![Interface {
                name: "eth0".into(),
                mac: "aa:bb:cc:dd:ee:ff".into(),
                sandbox: Some("/run/netns/x".into()),
                mtu: Some(1450),
            }],
            ips: vec![
                IpConfig {
                    address: "10.0.0.5/32".into(),
                    gateway: None,
                    interface: Some(0),
                },
                IpConfig {
                    address: "fd00::5/128".into(),
                    gateway: None,
                    interface: Some(0),
                },
            ],
            routes: vec![Route {
                dst: "0.0.0.0/0".into(),
                gw: Some("169.254.1.1".into()),
            }],
            dns: Dns::default(),
        }
    }

    #[test]
    fn shapes_per_version() {
        let v1 = sample().to_json("1.1.0");
        assert_eq!(v1["cniVersion"], "1.1.0");
        assert!(v1["ips"][0].get("version").is_none());
        assert_eq!(v1["interfaces"][0]["mtu"], 1450);
        let v10 = sample().to_json("1.0.0");
        assert!(v10["interfaces"][0].get("mtu").is_none());
        let v04 = sample().to_json("0.4.0");
        assert_eq!(v04["ips"][0]["version"], "4");
        assert_eq!(v04["ips"][1]["version"], "6");
        // Read back, whatever the version.
        let back = CniResult::from_prev(&v04).unwrap();
        assert_eq!(back.ips[1].address, "fd00::5/128");
        assert!(CniResult::from_prev(&serde_json::json!({"ips": 3})).is_err());
    }
}
