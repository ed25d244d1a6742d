//! RangeAllocation: which members of one range (a Service address range,
//! the NodePort range) are handed out, as one bitmap, the way the
//! Kubernetes API server records its Service ranges. Written by the
//! Service controller (`tartan-controllers`) only, with compare-and-swap
//! on its resourceVersion, so that two writers never hand out one member.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{Problem, Problems, parse_network};

/// The most members a range may have (an IPv4 /12, an IPv6 /108: the
/// API server's limit for a Service range).
pub const RANGE_MAX_MEMBERS: u64 = 1 << 20;

/// One range and which of its members are taken.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "tartan.dev",
    version = "v1",
    kind = "RangeAllocation",
    plural = "rangeallocations",
    root = "RangeAllocation",
    derive = "PartialEq",
    doc = "Which members of a Service range are handed out, as a bitmap. Written by the Service controller only."
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RangeAllocationSpec {
    /// The range: a CIDR (every address of it a member, network and
    /// broadcast included, in order) or ports `FIRST-LAST`.
    #[schemars(length(max = 64))]
    pub range: String,
    /// The bitmap in hexadecimal, two digits a byte: member `i` is taken
    /// when bit `i % 8` (least significant first) of byte `i / 8` is set.
    /// Shorter than the range: the rest is free.
    #[serde(default)]
    #[schemars(length(max = 262144), regex(pattern = r"^([0-9a-fA-F][0-9a-fA-F])*$"))]
    pub data: String,
}

/// The number of members of `range` (see [`RangeAllocationSpec::range`]).
pub fn range_members(range: &str) -> Result<u64, String> {
    if let Some((lo, hi)) = range.split_once('-') {
        let p = |s: &str| {
            s.parse::<u16>()
                .map_err(|_| format!("{range:?}: ports FIRST-LAST, each 0 to 65535"))
        };
        let (lo, hi) = (p(lo)?, p(hi)?);
        if lo > hi {
            return Err(format!("{range:?}: the first port is above the last"));
        }
        return Ok(u64::from(hi - lo) + 1);
    }
    let net = parse_network(range)?;
    let bits = u32::from(net.max_prefix_len() - net.prefix_len());
    if bits > 20 {
        return Err(format!(
            "{range:?}: at most {RANGE_MAX_MEMBERS} members (an IPv4 /12, an IPv6 /108)"
        ));
    }
    Ok(1 << bits)
}

impl RangeAllocationSpec {
    /// Every problem with this spec; fields are named from `spec`.
    pub fn check(&self) -> Vec<Problem> {
        let mut p = Problems::default();
        let members = p.take("spec.range", range_members(&self.range));
        if !self.data.bytes().all(|b| b.is_ascii_hexdigit()) || !self.data.len().is_multiple_of(2) {
            p.add("spec.data", "hexadecimal digits, two a byte");
        } else if let Some(m) = members
            && self.data.len() as u64 > m.div_ceil(8) * 2
        {
            p.add(
                "spec.data",
                format!("longer than the range's {m} members need"),
            );
        }
        p.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(range: &str, data: &str) -> RangeAllocationSpec {
        RangeAllocationSpec {
            range: range.into(),
            data: data.into(),
        }
    }

    #[test]
    fn ranges_and_bitmaps_are_checked() {
        assert_eq!(range_members("30000-32767"), Ok(2768));
        assert_eq!(range_members("10.96.0.0/16"), Ok(65536));
        assert_eq!(range_members("fd00::/108"), Ok(1 << 20));
        assert!(range_members("10.0.0.0/8").is_err());
        assert!(range_members("32767-30000").is_err());
        assert!(spec("30000-30007", "ff").check().is_empty());
        assert!(spec("10.96.0.0/30", "0f").check().is_empty());
        assert_eq!(spec("30000-30007", "ff00").check().len(), 1);
        assert_eq!(spec("30000-30007", "zz").check().len(), 1);
        assert_eq!(spec("30000-30007", "f").check().len(), 1);
        assert_eq!(spec("nonsense", "").check().len(), 1);
    }
}
