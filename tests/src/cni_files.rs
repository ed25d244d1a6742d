//! The files the CNI plugins keep per node on the host (the IPAM lock and
//! the kept block names, `/run/tartan/ipam-<node>-<tag>.*`), removed when
//! a runtime built without a lab is done with. The labs remove their
//! nodes' own (`tartan_lab::cnilab::CniLab`, `tartan-lab down`); a test
//! that builds its own `Runtime` (on the API server stand-in, whose
//! kubeconfig path is new every run) holds a [`PluginFiles`] for it.

use serde_json::Value;
use tartan_cni::plugin::lock::{forget, store_identity};
use tartan_cni::spec::NetConf;
use tartan_lab::cni::Runtime;

/// The node files of a runtime's plugins, removed when dropped (also when
/// the test fails).
#[must_use = "the files are removed when this is dropped"]
pub struct PluginFiles(Vec<(String, String)>);

impl PluginFiles {
    /// The files `rt`'s plugins write: for each entry that runs Tartan's
    /// IPAM (`tartan`, or another plugin with `tartan-ipam` as its IPAM),
    /// its node and its datastore as the plugin names them (the datastore
    /// with the configuration's kubeconfig, see
    /// `tartan_cni::plugin::Context::open`), read from the configuration
    /// the plugin is given. An entry naming no node (the plugin then takes
    /// the host name; the host's files are no test's to remove) or that
    /// the plugin would refuse (it then writes nothing) is passed over.
    pub fn of(rt: &Runtime) -> PluginFiles {
        let plugins = rt.conflist["plugins"].as_array().cloned();
        let files = plugins
            .into_iter()
            .flatten()
            .filter(|p| p["type"] == "tartan" || p["ipam"]["type"] == "tartan-ipam")
            .filter_map(|mut p| {
                // The runtime gives each plugin the list's name and version.
                for k in ["name", "cniVersion"] {
                    p[k] = rt.conflist.get(k).cloned().unwrap_or(Value::Null);
                }
                let conf: NetConf = serde_json::from_value(p).ok()?;
                let store = store_identity(conf.datastore().ok()?, conf.kubeconfig.as_deref());
                Some((conf.nodename()?.to_string(), store))
            })
            .collect();
        PluginFiles(files)
    }
}

impl Drop for PluginFiles {
    fn drop(&mut self) {
        for (node, store) in &self.0 {
            forget(node, store);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_files_are_named_as_the_plugin_names_them() {
        let rt = Runtime::new(json!({"cniVersion": "1.1.0", "name": "t", "plugins": [
            {"type": "tartan", "datastore": "kubernetes", "kubeconfig": "/tmp/k",
             "nodename": "node-1", "ipam": {"type": "tartan-ipam"}},
            {"type": "macvlan", "ipam": {"type": "tartan-ipam",
             "datastore": "etcd://10.0.0.1:2379", "nodename": "node-2"}},
            {"type": "tartan", "datastore": "kubernetes"},
            {"type": "portmap"}
        ]}));
        let files = PluginFiles::of(&rt);
        assert_eq!(
            files.0,
            [
                ("node-1".to_string(), "kubernetes /tmp/k".to_string()),
                ("node-2".to_string(), "etcd://10.0.0.1:2379".to_string()),
            ]
        );
        // Nothing was written: nothing to remove.
        std::mem::forget(files);
    }
}
