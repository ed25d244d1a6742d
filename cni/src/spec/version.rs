//! Which CNI versions Tartan speaks, and comparing them.

use super::error::{CniError, code};

/// The version Tartan writes when it chooses.
pub const CURRENT: &str = "1.1.0";

/// The configuration versions accepted. 0.3.x results have 0.4.0's shape
/// (CHECK came with 0.4.0 and is refused below it).
pub const SUPPORTED: &[&str] = &["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"];

/// The version of a configuration that gives none: libcni and skel read
/// a missing (or empty) `cniVersion` as 0.1.0.
pub const IMPLICIT: &str = "0.1.0";

/// `major.minor.patch` as numbers; `None` when malformed.
pub fn parse(v: &str) -> Option<(u32, u32, u32)> {
    let mut it = v.split('.');
    let major = it.next()?.parse().ok()?;
    let minor = it.next()?.parse().ok()?;
    let patch = it.next().unwrap_or("0").parse().ok()?;
    if it.next().is_some() {
        return None;
    }
    Some((major, minor, patch))
}

/// `Ok` when `v` is a version Tartan accepts; code 1 otherwise.
pub fn require_supported(v: &str) -> Result<(), CniError> {
    if SUPPORTED.contains(&v) {
        return Ok(());
    }
    Err(CniError::new(
        code::INCOMPATIBLE_VERSION,
        format!("CNI version {v:?} is not supported"),
    )
    .with_details(format!("supported: {}", SUPPORTED.join(", "))))
}

/// `v` is at least `min` (both well-formed).
pub fn at_least(v: &str, min: &str) -> bool {
    match (parse(v), parse(min)) {
        (Some(a), Some(b)) => a >= b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert!(require_supported("1.0.0").is_ok());
        assert!(require_supported("0.4.0").is_ok());
        assert!(require_supported("0.3.1").is_ok());
        assert_eq!(require_supported("0.2.0").unwrap_err().code, 1);
        assert_eq!(require_supported("2.0.0").unwrap_err().code, 1);
        assert!(at_least("1.1.0", "1.0.0"));
        assert!(!at_least("0.4.0", "1.0.0"));
        assert!(!at_least("x", "1.0.0"));
        assert_eq!(parse("1.10.2"), Some((1, 10, 2)));
    }
}
