//! A Secret: the names of its data keys.

use k8s_openapi::api::core::v1::Secret;

use crate::resources::common::Problems;

/// A Secret or ConfigMap data key: letters, digits, '-', '_' and '.', at
/// most 253, not `.` or `..` and not starting with `..`.
pub(super) fn key_ok(k: &str) -> bool {
    crate::validate::names::is_config_map_key(k)
}

/// Secret data keys: letters, digits, '-', '_' and '.', at most 253.
pub(super) fn check(s: &Secret, p: &mut Problems) {
    let mut size = 0;
    for (k, v) in s.data.iter().flatten() {
        size += v.0.len();
        if !key_ok(k) {
            p.add(
                format!("data[{k}]"),
                "a key is letters, digits, '-', '_' and '.' (at most 253), not '.' and not starting with '..'",
            );
        }
    }
    for (k, v) in s.string_data.iter().flatten() {
        size += v.len();
        if !key_ok(k) {
            p.add(
                format!("stringData[{k}]"),
                "a key is letters, digits, '-', '_' and '.' (at most 253), not '.' and not starting with '..'",
            );
        }
    }
    if size > 1024 * 1024 {
        p.add(
            "data",
            format!("{size} bytes; a Secret holds at most 1048576"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::key_ok;

    #[test]
    fn keys_follow_is_config_map_key() {
        for good in [
            "password",
            ".hidden",
            "a..b",
            "tls.crt",
            "A_b-1",
            &"k".repeat(253),
        ] {
            assert!(key_ok(good), "{good:?}");
        }
        for bad in [
            "",
            ".",
            "..",
            "..x",
            "..data",
            "a b",
            "a/b",
            &"k".repeat(254),
        ] {
            assert!(!key_ok(bad), "{bad:?}");
        }
    }
}
