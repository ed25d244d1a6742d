use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// ORIGIN (RFC 4271 5.1.1). Lower is preferred in the decision process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Origin {
    #[default]
    Igp = 0,
    Egp = 1,
    Incomplete = 2,
}

impl Origin {
    pub fn from_u8(v: u8) -> Option<Origin> {
        match v {
            0 => Some(Origin::Igp),
            1 => Some(Origin::Egp),
            2 => Some(Origin::Incomplete),
            _ => None,
        }
    }
}

/// One AS_PATH segment; AS numbers are always held as 4 octets (RFC 6793).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AsSegment {
    Set(Vec<u32>),
    Sequence(Vec<u32>),
    ConfedSequence(Vec<u32>),
    ConfedSet(Vec<u32>),
}

impl AsSegment {
    pub fn asns(&self) -> &[u32] {
        match self {
            AsSegment::Set(v)
            | AsSegment::Sequence(v)
            | AsSegment::ConfedSequence(v)
            | AsSegment::ConfedSet(v) => v,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct AsPath {
    pub segments: Vec<AsSegment>,
}

impl AsPath {
    /// Path length for the decision process (RFC 4271 9.1.2.2 a): a SET
    /// counts as one, confederation segments do not count (RFC 5065).
    pub fn len_for_decision(&self) -> usize {
        self.segments
            .iter()
            .map(|s| match s {
                AsSegment::Sequence(v) => v.len(),
                AsSegment::Set(_) => 1,
                AsSegment::ConfedSequence(_) | AsSegment::ConfedSet(_) => 0,
            })
            .sum()
    }

    pub fn contains(&self, asn: u32) -> bool {
        self.segments.iter().any(|s| s.asns().contains(&asn))
    }

    /// The neighbouring AS: the first AS of the first AS_SEQUENCE, if any.
    pub fn first_as(&self) -> Option<u32> {
        match self.segments.first() {
            Some(AsSegment::Sequence(v)) => v.first().copied(),
            _ => None,
        }
    }

    /// A copy with `asn` prepended, as an eBGP speaker does on export.
    pub fn prepended(&self, asn: u32) -> AsPath {
        let mut segments = self.segments.clone();
        match segments.first_mut() {
            Some(AsSegment::Sequence(v)) if v.len() < 255 => v.insert(0, asn),
            _ => segments.insert(0, AsSegment::Sequence(vec![asn])),
        }
        AsPath { segments }
    }
}

impl std::fmt::Display for AsPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut first = true;
        for seg in &self.segments {
            let (open, close) = match seg {
                AsSegment::Sequence(_) => ("", ""),
                AsSegment::Set(_) => ("{", "}"),
                AsSegment::ConfedSequence(_) => ("(", ")"),
                AsSegment::ConfedSet(_) => ("[", "]"),
            };
            if !first {
                f.write_str(" ")?;
            }
            first = false;
            let list: Vec<String> = seg.asns().iter().map(|a| a.to_string()).collect();
            write!(f, "{open}{}{close}", list.join(" "))?;
        }
        Ok(())
    }
}

/// Where a route points. IPv6 may carry a link-local address beside the
/// global one (RFC 2545).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum NextHop {
    #[default]
    None,
    V4(Ipv4Addr),
    V6 {
        global: Ipv6Addr,
        link_local: Option<Ipv6Addr>,
    },
}

impl NextHop {
    pub fn addr(&self) -> Option<IpAddr> {
        match *self {
            NextHop::None => None,
            NextHop::V4(a) => Some(IpAddr::V4(a)),
            NextHop::V6 { global, .. } => Some(IpAddr::V6(global)),
        }
    }

    pub fn from_addr(a: IpAddr) -> NextHop {
        match a {
            IpAddr::V4(a) => NextHop::V4(a),
            IpAddr::V6(global) => NextHop::V6 {
                global,
                link_local: None,
            },
        }
    }
}

/// What a speaker puts in NEXT_HOP of the routes it sends one peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum NextHopMode {
    /// External peers: a next hop on the subnet shared with the peer is
    /// kept (a third-party next hop, RFC 4271 5.1.3), any other becomes
    /// ours. Internal peers: unchanged. Our own routes: ours.
    #[default]
    Auto,
    /// Always our own address.
    SelfAddress,
    /// Never changed; ours only where a route has none (our own routes).
    Keep,
}

/// An attribute Tartan does not interpret, kept byte for byte so that it
/// can be passed on (optional transitive ones, with the Partial bit set).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RawAttr {
    pub flags: u8,
    pub type_code: u8,
    pub value: Vec<u8>,
}

impl RawAttr {
    pub const OPTIONAL: u8 = 0x80;
    pub const TRANSITIVE: u8 = 0x40;
    pub const PARTIAL: u8 = 0x20;
    pub const EXTENDED_LENGTH: u8 = 0x10;
}

/// The path attributes of a route. Many prefixes share one set; the RIB
/// interns them so each distinct set is stored once.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct PathAttrs {
    pub origin: Origin,
    pub as_path: AsPath,
    pub next_hop: NextHop,
    pub med: Option<u32>,
    pub local_pref: Option<u32>,
    pub atomic_aggregate: bool,
    /// AGGREGATOR: AS (4 octets) and address.
    pub aggregator: Option<(u32, Ipv4Addr)>,
    /// RFC 1997 communities, in the order received.
    pub communities: Vec<u32>,
    /// RFC 8092 large communities (global admin, local 1, local 2).
    pub large_communities: Vec<[u32; 3]>,
    /// RFC 4456.
    pub originator_id: Option<Ipv4Addr>,
    pub cluster_list: Vec<Ipv4Addr>,
    /// Attributes not interpreted here, sorted by type code.
    pub unknown: Vec<RawAttr>,
}

/// Well-known communities (RFC 1997) that change what may be exported.
pub mod well_known {
    pub const NO_EXPORT: u32 = 0xFFFF_FF01;
    pub const NO_ADVERTISE: u32 = 0xFFFF_FF02;
    pub const NO_EXPORT_SUBCONFED: u32 = 0xFFFF_FF03;
    /// RFC 8326: the path is about to go away; prefer any other (65535:0).
    pub const GRACEFUL_SHUTDOWN: u32 = 0xFFFF_0000;
}
