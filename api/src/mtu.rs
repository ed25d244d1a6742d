//! The MTU of tunnel devices and pod interfaces: the underlay's MTU less
//! what the encapsulation adds to each packet. One function, used by felix
//! (the VXLAN and IPIP devices) and the CNI installer (the pod veths).
//! Pure.

/// How a pool's traffic between nodes is carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encapsulation {
    None,
    Vxlan,
    Ipip,
}

/// The address family of the underlay (the outer header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Ipv4,
    Ipv6,
}

/// The smallest MTU an IPv4 interface may have (RFC 791).
pub const MIN_MTU: u32 = 68;
/// The smallest MTU a link carrying IPv6 may have (RFC 8200, 5).
pub const MIN_IPV6_MTU: u32 = 1280;
/// The largest MTU the CNI configuration accepts.
pub const MAX_MTU: u32 = 65535;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MtuError {
    #[error("IPIP carries IPv4 in IPv4; it cannot run over an IPv6 underlay (use VXLAN)")]
    IpipOverIpv6,
    #[error(
        "the underlay's MTU {underlay} less {overhead} bytes of encapsulation leaves {left}, below the minimum 68"
    )]
    TooSmall {
        underlay: u32,
        overhead: u32,
        left: i64,
    },
}

/// Bytes the encapsulation adds to each packet: VXLAN the outer IP header
/// (20 or 40), UDP (8), VXLAN (8) and the inner Ethernet header (14), so
/// 50 over IPv4 and 70 over IPv6; IPIP the outer IPv4 header, 20.
pub fn overhead(e: Encapsulation, underlay: Family) -> Result<u32, MtuError> {
    match (e, underlay) {
        (Encapsulation::None, _) => Ok(0),
        (Encapsulation::Vxlan, Family::Ipv4) => Ok(50),
        (Encapsulation::Vxlan, Family::Ipv6) => Ok(70),
        (Encapsulation::Ipip, Family::Ipv4) => Ok(20),
        (Encapsulation::Ipip, Family::Ipv6) => Err(MtuError::IpipOverIpv6),
    }
}

/// The MTU of an interface whose packets cross an underlay of MTU
/// `underlay` inside encapsulation `e`: a packet this size, once
/// encapsulated, still fits the underlay.
pub fn encapsulated_mtu(underlay: u32, e: Encapsulation, family: Family) -> Result<u32, MtuError> {
    let overhead = overhead(e, family)?;
    let left = i64::from(underlay) - i64::from(overhead);
    if left < i64::from(MIN_MTU) {
        return Err(MtuError::TooSmall {
            underlay,
            overhead,
            left,
        });
    }
    Ok(underlay - overhead)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overheads_per_encapsulation_and_family() {
        use Encapsulation::*;
        assert_eq!(encapsulated_mtu(1500, Vxlan, Family::Ipv4), Ok(1450));
        assert_eq!(encapsulated_mtu(1500, Vxlan, Family::Ipv6), Ok(1430));
        assert_eq!(encapsulated_mtu(1500, Ipip, Family::Ipv4), Ok(1480));
        assert_eq!(encapsulated_mtu(9001, Vxlan, Family::Ipv4), Ok(8951));
        assert_eq!(encapsulated_mtu(1500, None, Family::Ipv6), Ok(1500));
        assert_eq!(
            encapsulated_mtu(1500, Ipip, Family::Ipv6),
            Err(MtuError::IpipOverIpv6)
        );
    }

    #[test]
    fn a_tiny_underlay_is_an_error_not_an_underflow() {
        let e = encapsulated_mtu(40, Encapsulation::Vxlan, Family::Ipv4).unwrap_err();
        assert_eq!(
            e,
            MtuError::TooSmall {
                underlay: 40,
                overhead: 50,
                left: -10
            }
        );
        assert!(e.to_string().contains("below the minimum 68"), "{e}");
        assert_eq!(
            encapsulated_mtu(118, Encapsulation::Vxlan, Family::Ipv4),
            Ok(68)
        );
    }
}
