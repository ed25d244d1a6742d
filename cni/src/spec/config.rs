//! The network configuration on stdin: the standard keys, Tartan's own
//! keys, and the IPAM section.

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::error::{CniError, code};
use super::version;

/// One network configuration as a plugin receives it (a conflist entry with
/// `name` and `cniVersion` filled in by the runtime).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NetConf {
    /// Absent, null or empty: 0.1.0, as libcni and skel read it.
    #[serde(default = "implicit_version", deserialize_with = "version_or_implicit")]
    pub cni_version: String,
    pub name: String,
    #[serde(rename = "type")]
    pub plugin_type: String,
    /// Where Tartan's state lives: `etcd://HOST:PORT[,…]` or `kubernetes`.
    #[serde(default)]
    pub datastore: Option<String>,
    /// The kubeconfig for `kubernetes` (default: in-cluster or $KUBECONFIG).
    #[serde(default)]
    pub kubeconfig: Option<String>,
    /// How long a call waits for an unreachable datastore. Default 10 s.
    #[serde(default)]
    pub datastore_timeout_seconds: Option<u64>,
    /// This node's name. Default: the host name.
    #[serde(default)]
    pub nodename: Option<String>,
    /// The pod interface's MTU. Default: the kernel's (1500).
    #[serde(default)]
    pub mtu: Option<u32>,
    #[serde(default)]
    pub ipam: Option<IpamConf>,
    /// Where the plugin logs. Default `/var/log/tartan/cni.log`.
    #[serde(default)]
    pub log_file: Option<String>,
    /// `error`, `warn`, `info` (default) or `debug`.
    #[serde(default)]
    pub log_level: Option<String>,
    #[serde(default)]
    pub prev_result: Option<Value>,
    #[serde(default)]
    pub runtime_config: Option<Value>,
    /// GC: the attachments the runtime still holds.
    #[serde(default, rename = "cni.dev/valid-attachments")]
    pub valid_attachments: Option<Vec<Attachment>>,
}

fn implicit_version() -> String {
    version::IMPLICIT.to_string()
}

/// A `cniVersion` of null or `""` is the implicit version too (Go reads
/// both as the empty string, which libcni takes for 0.1.0).
fn version_or_implicit<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let v: Option<String> = Option::deserialize(d)?;
    Ok(v.filter(|v| !v.is_empty()).unwrap_or_else(implicit_version))
}

/// One attachment the runtime holds (GC).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct Attachment {
    #[serde(rename = "containerID")]
    pub container_id: String,
    pub ifname: String,
}

/// The `ipam` section.
#[derive(Debug, Clone, Deserialize, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct IpamConf {
    #[serde(rename = "type")]
    pub plugin_type: String,
    /// Pools to draw IPv4 addresses from, by name or CIDR. Default: all.
    #[serde(default)]
    pub ipv4_pools: Vec<String>,
    #[serde(default)]
    pub ipv6_pools: Vec<String>,
    /// Default: when a pool of the family applies.
    #[serde(default)]
    pub assign_ipv4: Option<bool>,
    #[serde(default)]
    pub assign_ipv6: Option<bool>,
    /// Never borrow from, or lend to, other nodes' blocks. Default false.
    #[serde(default)]
    pub strict_affinity: bool,
    /// How long a released address rests before reuse. Default 10.
    #[serde(default)]
    pub release_cooldown_seconds: Option<u64>,
    /// Tartan's keys may also be given here instead of at the top level.
    #[serde(default)]
    pub datastore: Option<String>,
    #[serde(default)]
    pub nodename: Option<String>,
}

/// The longest a call may be told to wait for the datastore, seconds.
pub const MAX_DATASTORE_TIMEOUT: u64 = 3600;
/// The longest a released address may be told to rest, seconds (a day).
pub const MAX_RELEASE_COOLDOWN: u64 = 86_400;

impl NetConf {
    /// Parse stdin. Malformed JSON is code 6; a well-formed document that
    /// is not a valid configuration is code 7; an unsupported version is
    /// code 1.
    pub fn parse(bytes: &[u8]) -> Result<NetConf, CniError> {
        let value: Value = serde_json::from_slice(bytes).map_err(|e| {
            CniError::new(code::DECODE, "the network configuration is not JSON")
                .with_details(e.to_string())
        })?;
        // serde would read a struct from a JSON array too, by position.
        if !value.is_object() {
            return Err(CniError::new(
                code::INVALID_CONFIG,
                "invalid network configuration: not a JSON object",
            ));
        }
        let conf: NetConf = serde_json::from_value(value).map_err(|e| {
            CniError::new(code::INVALID_CONFIG, "invalid network configuration")
                .with_details(e.to_string())
        })?;
        version::require_supported(&conf.cni_version)?;
        check_network_name(&conf.name)?;
        if let Some(m) = conf.mtu
            && !(68..=65535).contains(&m)
        {
            return Err(CniError::new(
                code::INVALID_CONFIG,
                format!("mtu {m} is out of range; allowed 68 to 65535"),
            ));
        }
        let ranges = [
            (
                "datastoreTimeoutSeconds",
                conf.datastore_timeout_seconds,
                1..=MAX_DATASTORE_TIMEOUT,
            ),
            (
                "ipam.releaseCooldownSeconds",
                conf.ipam.as_ref().and_then(|i| i.release_cooldown_seconds),
                0..=MAX_RELEASE_COOLDOWN,
            ),
        ];
        for (field, value, allowed) in ranges {
            if let Some(v) = value
                && !allowed.contains(&v)
            {
                return Err(CniError::new(
                    code::INVALID_CONFIG,
                    format!(
                        "{field} {v} is out of range; allowed {} to {}",
                        allowed.start(),
                        allowed.end()
                    ),
                ));
            }
        }
        Ok(conf)
    }

    /// The datastore, from the top level or the IPAM section.
    pub fn datastore(&self) -> Result<&str, CniError> {
        self.datastore
            .as_deref()
            .or(self.ipam.as_ref().and_then(|i| i.datastore.as_deref()))
            .ok_or_else(|| {
                CniError::new(
                    code::INVALID_CONFIG,
                    "the configuration names no datastore; set \"datastore\" to etcd://HOST:PORT or kubernetes",
                )
            })
    }

    pub fn datastore_timeout(&self) -> Duration {
        Duration::from_secs(self.datastore_timeout_seconds.unwrap_or(10))
    }

    /// The node name given in the configuration, if any.
    pub fn nodename(&self) -> Option<&str> {
        self.nodename
            .as_deref()
            .or(self.ipam.as_ref().and_then(|i| i.nodename.as_deref()))
    }

    /// The IPAM handle of a container's attachment to this network.
    pub fn handle(&self, container_id: &str) -> String {
        format!("{}.{container_id}", self.name)
    }
}

/// The spec's rule for network names.
fn check_network_name(name: &str) -> Result<(), CniError> {
    if super::is_cni_name(name) {
        Ok(())
    } else {
        Err(CniError::new(
            code::INVALID_CONFIG,
            format!(
                "network name {name:?} must be letters, digits, _ . - and start with a letter or digit"
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_config() {
        let c = NetConf::parse(
            br#"{"cniVersion":"1.0.0","name":"k8s-pod-network","type":"tartan",
                "datastore":"etcd://127.0.0.1:2379","mtu":1450,"nodename":"n1",
                "ipam":{"type":"tartan-ipam","ipv4Pools":["default"],"releaseCooldownSeconds":3},
                "cni.dev/valid-attachments":[{"containerID":"a","ifname":"eth0"}],
                "somethingElse": {"ignored": true}}"#,
        )
        .unwrap();
        assert_eq!(c.datastore().unwrap(), "etcd://127.0.0.1:2379");
        assert_eq!(c.mtu, Some(1450));
        assert_eq!(c.ipam.as_ref().unwrap().ipv4_pools, ["default"]);
        assert_eq!(c.handle("abc"), "k8s-pod-network.abc");
        assert_eq!(c.valid_attachments.unwrap()[0].ifname, "eth0");
    }

    #[test]
    fn error_codes() {
        assert_eq!(NetConf::parse(b"{not json").unwrap_err().code, 6);
        assert_eq!(NetConf::parse(b"").unwrap_err().code, 6);
        assert_eq!(
            NetConf::parse(br#"{"cniVersion":"1.0.0","type":"tartan"}"#)
                .unwrap_err()
                .code,
            7
        );
        assert_eq!(
            NetConf::parse(br#"{"cniVersion":"1.0.0","name":"n","type":"tartan","mtu":"x"}"#)
                .unwrap_err()
                .code,
            7
        );
        assert_eq!(
            NetConf::parse(br#"{"cniVersion":"0.2.0","name":"n","type":"tartan"}"#)
                .unwrap_err()
                .code,
            1
        );
        assert_eq!(
            NetConf::parse(br#"{"cniVersion":"1.0.0","name":"bad name","type":"tartan"}"#)
                .unwrap_err()
                .code,
            7
        );
        // No version is 0.1.0 (libcni and skel read it so), which Tartan
        // does not speak: code 1 with the versions it does.
        for text in [
            r#"{"name":"n","type":"tartan"}"#,
            r#"{"cniVersion":"","name":"n","type":"tartan"}"#,
            r#"{"cniVersion":null,"name":"n","type":"tartan"}"#,
        ] {
            let e = NetConf::parse(text.as_bytes()).unwrap_err();
            assert_eq!(e.code, 1, "{text}: {e}");
            assert!(e.msg.contains("0.1.0"), "{text}: {e}");
            assert_eq!(e.details, "supported: 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0");
        }
        let no_store =
            NetConf::parse(br#"{"cniVersion":"1.1.0","name":"n","type":"tartan"}"#).unwrap();
        assert_eq!(no_store.datastore().unwrap_err().code, 7);
        // Not an object (serde would read an array by position).
        let array =
            br#"["1.0.0","n","tartan",null,null,null,null,null,null,null,null,null,null,null]"#;
        assert_eq!(NetConf::parse(array).unwrap_err().code, 7);
        // Numbers out of range, not overflows later.
        for bad in [
            r#""datastoreTimeoutSeconds":18446744073709551615"#,
            r#""datastoreTimeoutSeconds":0"#,
            r#""ipam":{"type":"tartan-ipam","releaseCooldownSeconds":18446744073709551615}"#,
        ] {
            let text = format!(r#"{{"cniVersion":"1.0.0","name":"n","type":"tartan",{bad}}}"#);
            let e = NetConf::parse(text.as_bytes()).unwrap_err();
            assert_eq!(e.code, 7, "{bad}: {e}");
        }
        let ok =
            br#"{"cniVersion":"1.0.0","name":"n","type":"tartan","datastoreTimeoutSeconds":3600}"#;
        assert!(NetConf::parse(ok).is_ok());
    }
}
