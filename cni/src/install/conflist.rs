//! The CNI network configuration list Tartan installs on each node
//! (`/etc/cni/net.d/10-tartan.conflist`), rendered from the node's
//! settings: the `tartan` plugin with `tartan-ipam`, then `portmap` for
//! hostPort. Pure.

use serde_json::{Value, json};

/// The network's name, as kubelets and runtimes see it.
pub const NETWORK_NAME: &str = "k8s-pod-network";
pub const CNI_VERSION: &str = "1.0.0";

/// What one node's conflist says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflist {
    pub nodename: String,
    /// `kubernetes` or `etcd://HOST:PORT[,…]`.
    pub datastore: String,
    /// The kubeconfig the plugin reads (for `kubernetes`).
    pub kubeconfig: Option<String>,
    /// The pod interfaces' MTU; `None` leaves the kernel's default.
    pub mtu: Option<u32>,
}

impl Conflist {
    pub fn to_json(&self) -> Value {
        let mut tartan = json!({
            "type": "tartan",
            "datastore": self.datastore,
            "nodename": self.nodename,
            "ipam": {"type": "tartan-ipam"},
        });
        if let Some(k) = &self.kubeconfig {
            tartan["kubeconfig"] = k.as_str().into();
        }
        if let Some(m) = self.mtu {
            tartan["mtu"] = m.into();
        }
        json!({
            "cniVersion": CNI_VERSION,
            "name": NETWORK_NAME,
            "plugins": [
                tartan,
                {"type": "portmap", "capabilities": {"portMappings": true}, "snat": true},
            ],
        })
    }

    /// The file's text: pretty JSON, ending in a newline.
    pub fn render(&self) -> String {
        let mut s = serde_json::to_string_pretty(&self.to_json()).unwrap_or_default();
        s.push('\n');
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::config::NetConf;

    /// The entry as a runtime hands it to the plugin: the list's name and
    /// version filled in.
    fn plugin_entry(text: &str, i: usize) -> Value {
        let list: Value = serde_json::from_str(text).unwrap();
        let mut e = list["plugins"][i].clone();
        e["name"] = list["name"].clone();
        e["cniVersion"] = list["cniVersion"].clone();
        e
    }

    #[test]
    fn the_plugin_reads_what_is_rendered_mtu_included() {
        let c = Conflist {
            nodename: "node-a".into(),
            datastore: "kubernetes".into(),
            kubeconfig: Some("/etc/cni/net.d/tartan-kubeconfig".into()),
            mtu: Some(1450),
        };
        let text = c.render();
        assert!(text.ends_with("}\n"));
        let e = plugin_entry(&text, 0);
        let conf = NetConf::parse(e.to_string().as_bytes()).unwrap();
        assert_eq!(conf.mtu, Some(1450));
        assert_eq!(conf.nodename.as_deref(), Some("node-a"));
        assert_eq!(conf.datastore.as_deref(), Some("kubernetes"));
        assert_eq!(
            conf.kubeconfig.as_deref(),
            Some("/etc/cni/net.d/tartan-kubeconfig")
        );
        assert_eq!(conf.ipam.unwrap().plugin_type, "tartan-ipam");
        let portmap = plugin_entry(&text, 1);
        assert_eq!(portmap["type"], "portmap");
        assert_eq!(portmap["capabilities"]["portMappings"], true);
    }

    #[test]
    fn no_mtu_and_no_kubeconfig_are_left_out() {
        let c = Conflist {
            nodename: "n".into(),
            datastore: "etcd://127.0.0.1:2379".into(),
            kubeconfig: None,
            mtu: None,
        };
        let e = plugin_entry(&c.render(), 0);
        assert!(e.get("mtu").is_none() && e.get("kubeconfig").is_none());
        assert_eq!(NetConf::parse(e.to_string().as_bytes()).unwrap().mtu, None);
    }
}
