//! A Secret: the names of its data keys.

use k8s_openapi::api::core::v1::Secret;

use crate::resources::common::Problems;

/// A Secret or ConfigMap data key: letters, digits, '-', '_' and '.', at
/// most 253, not `.` or `..`.
pub(super) fn key_ok(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 253
        && k != "."
        && k != ".."
        && k.bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// Secret data keys: letters, digits, '-', '_' and '.', at most 253.
pub(super) fn check(s: &Secret, p: &mut Problems) {
    let mut size = 0;
    for (k, v) in s.data.iter().flatten() {
        size += v.0.len();
        if !key_ok(k) {
            p.add(
                format!("data[{k}]"),
                "a key is letters, digits, '-', '_' and '.' (at most 253)",
            );
        }
    }
    for (k, v) in s.string_data.iter().flatten() {
        size += v.len();
        if !key_ok(k) {
            p.add(
                format!("stringData[{k}]"),
                "a key is letters, digits, '-', '_' and '.' (at most 253)",
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
