//! A ConfigMap: the names of its keys, none in both `data` and
//! `binaryData`, at most 1 MiB in all (the API server's rules).

use k8s_openapi::api::core::v1::ConfigMap;

use super::secret::key_ok;
use crate::resources::common::Problems;

const KEY_RULE: &str =
    "a key is letters, digits, '-', '_' and '.' (at most 253), not '.' and not starting with '..'";

pub(super) fn check(c: &ConfigMap, p: &mut Problems) {
    let mut size = 0;
    for (k, v) in c.data.iter().flatten() {
        size += k.len() + v.len();
        if !key_ok(k) {
            p.add(format!("data[{k}]"), KEY_RULE);
        }
    }
    for (k, v) in c.binary_data.iter().flatten() {
        size += k.len() + v.0.len();
        if !key_ok(k) {
            p.add(format!("binaryData[{k}]"), KEY_RULE);
        }
        if c.data.as_ref().is_some_and(|d| d.contains_key(k)) {
            p.add(
                format!("binaryData[{k}]"),
                "the key is in data too; a key is in one of them only",
            );
        }
    }
    if size > 1024 * 1024 {
        p.add(
            "data",
            format!("{size} bytes; a ConfigMap holds at most 1048576"),
        );
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;

    use super::*;

    fn problems(c: &ConfigMap) -> Vec<(String, String)> {
        let mut p = Problems::default();
        check(c, &mut p);
        p.0
    }

    #[test]
    fn keys_follow_the_api_servers_rules() {
        let mut c = ConfigMap {
            data: Some(BTreeMap::from([
                ("ipv4-pool-cidr".to_string(), "10.244.0.0/16".to_string()),
                ("mtu".to_string(), String::new()),
            ])),
            ..ConfigMap::default()
        };
        assert!(problems(&c).is_empty());
        c.data
            .as_mut()
            .unwrap()
            .insert("pool cidr".into(), "x".into());
        c.binary_data = Some(BTreeMap::from([("mtu".to_string(), ByteString(vec![1]))]));
        let p = problems(&c);
        assert_eq!(p.len(), 2, "{p:?}");
        assert_eq!(p[0].0, "data[pool cidr]");
        assert!(p[1].1.contains("in data too"), "{p:?}");
    }

    #[test]
    fn at_most_one_mebibyte() {
        let c = ConfigMap {
            data: Some(BTreeMap::from([("big".to_string(), "x".repeat(1 << 20))])),
            ..ConfigMap::default()
        };
        assert!(problems(&c)[0].1.contains("at most 1048576"));
    }
}
