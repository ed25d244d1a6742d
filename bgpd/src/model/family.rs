use ipnet::IpNet;
use serde::{Deserialize, Serialize};
use std::fmt;

/// An (AFI, SAFI) pair Tartan speaks. Only unicast for now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Family {
    #[serde(rename = "ipv4-unicast")]
    Ipv4Unicast,
    #[serde(rename = "ipv6-unicast")]
    Ipv6Unicast,
}

impl Family {
    pub const ALL: [Family; 2] = [Family::Ipv4Unicast, Family::Ipv6Unicast];

    /// The wire AFI and SAFI numbers (RFC 4760).
    pub fn afi_safi(self) -> (u16, u8) {
        match self {
            Family::Ipv4Unicast => (1, 1),
            Family::Ipv6Unicast => (2, 1),
        }
    }

    pub fn from_afi_safi(afi: u16, safi: u8) -> Option<Family> {
        match (afi, safi) {
            (1, 1) => Some(Family::Ipv4Unicast),
            (2, 1) => Some(Family::Ipv6Unicast),
            _ => None,
        }
    }

    pub fn of(prefix: &IpNet) -> Family {
        match prefix {
            IpNet::V4(_) => Family::Ipv4Unicast,
            IpNet::V6(_) => Family::Ipv6Unicast,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Family::Ipv4Unicast => "ipv4-unicast",
            Family::Ipv6Unicast => "ipv6-unicast",
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Family {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "ipv4-unicast" => Ok(Family::Ipv4Unicast),
            "ipv6-unicast" => Ok(Family::Ipv6Unicast),
            other => Err(format!(
                "unknown address family {other:?} (expected ipv4-unicast or ipv6-unicast)"
            )),
        }
    }
}
