//! BGP capabilities (RFC 5492) carried in the OPEN message.
//!
//! The TLV walk is ours and checks every length against the buffer. Each
//! capability TLV is then decoded by zettabgp's `BgpCapability::from_buffer`
//! for the codes where its decoding is exact (multiprotocol, route refresh,
//! 4-octet AS, enhanced route refresh). Graceful restart is decoded here:
//! zettabgp drops the N bit (RFC 8538). Other codes are kept raw and never
//! handed to zettabgp: its FQDN (73) decoder rejects every hostname
//! capability with a non-empty domain name, and its errors on capabilities
//! we do not use (LLGR, ADD-PATH) would fail the whole OPEN.

use zettabgp::BgpCapability;

use super::notification::Notification;
use crate::model::Family;

/// Capability codes (IANA registry).
pub mod cap_code {
    pub const MULTIPROTOCOL: u8 = 1;
    pub const ROUTE_REFRESH: u8 = 2;
    pub const GRACEFUL_RESTART: u8 = 64;
    pub const FOUR_OCTET_AS: u8 = 65;
    pub const ENHANCED_ROUTE_REFRESH: u8 = 70;
}

/// What a speaker announces in its OPEN.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Capabilities {
    /// Multiprotocol (RFC 4760) families Tartan speaks.
    pub families: Vec<Family>,
    /// Multiprotocol AFI/SAFI pairs Tartan does not speak.
    pub unknown_families: Vec<(u16, u8)>,
    /// RFC 6793.
    pub four_octet_as: Option<u32>,
    /// RFC 2918.
    pub route_refresh: bool,
    /// RFC 7313.
    pub enhanced_route_refresh: bool,
    /// RFC 4724 / RFC 8538.
    pub graceful_restart: Option<GracefulRestartCap>,
    /// Every other capability (code, value), in the order received.
    pub other: Vec<(u8, Vec<u8>)>,
}

/// The graceful restart capability (RFC 4724 3, RFC 8538).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GracefulRestartCap {
    /// R bit: the speaker has restarted.
    pub restarting: bool,
    /// N bit (RFC 8538): graceful restart also covers NOTIFICATIONs.
    pub notification: bool,
    /// Restart time in seconds, 12 bits.
    pub restart_time: u16,
    /// Families and whether their forwarding state was preserved (F bit).
    pub families: Vec<(Family, bool)>,
}

const GR_RESTARTING: u16 = 0x8000;
const GR_NOTIFICATION: u16 = 0x4000;
const GR_TIME_MASK: u16 = 0x0fff;
const GR_FORWARDING: u8 = 0x80;

fn malformed() -> Notification {
    Notification::malformed_open()
}

impl Capabilities {
    /// Decodes the capability TLVs of one Capabilities optional parameter
    /// (RFC 5492 4) into `self`. A TLV that overruns the parameter, or a
    /// known capability with a wrong length, is a 2/0.
    pub(super) fn decode_param(&mut self, mut param: &[u8]) -> Result<(), Notification> {
        while !param.is_empty() {
            let [code, len, rest @ ..] = param else {
                return Err(malformed());
            };
            let len = usize::from(*len);
            let value = rest.get(..len).ok_or_else(malformed)?;
            let tlv = &param[..2 + len];
            param = &rest[len..];
            match *code {
                // RFC 6793 9: the AS is 4 octets. Checked here so that the
                // capability can never be read as absent.
                cap_code::FOUR_OCTET_AS if len != 4 => return Err(malformed()),
                cap_code::MULTIPROTOCOL
                | cap_code::ROUTE_REFRESH
                | cap_code::FOUR_OCTET_AS
                | cap_code::ENHANCED_ROUTE_REFRESH => {
                    self.decode_with_zettabgp(tlv, *code, value)?
                }
                // RFC 4724 3: of several instances only the last counts
                // (each must still be well formed).
                cap_code::GRACEFUL_RESTART => self.graceful_restart = Some(decode_gr(value)?),
                other => self.other.push((other, value.to_vec())),
            }
        }
        Ok(())
    }

    /// `tlv` is a whole capability TLV whose length has been checked
    /// against the buffer, so zettabgp's walk stays inside it.
    fn decode_with_zettabgp(
        &mut self,
        tlv: &[u8],
        code: u8,
        value: &[u8],
    ) -> Result<(), Notification> {
        let decoded = BgpCapability::from_buffer(tlv).map_err(|_| malformed())?;
        match decoded.0 {
            Ok(BgpCapability::CapRR) => self.route_refresh = true,
            Ok(BgpCapability::CapEnhancedRR) => self.enhanced_route_refresh = true,
            Ok(BgpCapability::CapASN32(asn)) => {
                self.four_octet_as.get_or_insert(asn);
            }
            Ok(cap) => match cap.afi_safi() {
                Some((afi, safi)) => self.add_family(afi, safi),
                None => self.other.push((code, value.to_vec())),
            },
            // zettabgp does not know this AFI/SAFI (or the reserved octet
            // is not zero): read the pair ourselves.
            Err(_) if code == cap_code::MULTIPROTOCOL => match value {
                &[a0, a1, _, safi] => self.add_family(u16::from_be_bytes([a0, a1]), safi),
                _ => return Err(malformed()),
            },
            Err(_) => self.other.push((code, value.to_vec())),
        }
        Ok(())
    }

    fn add_family(&mut self, afi: u16, safi: u8) {
        match Family::from_afi_safi(afi, safi) {
            Some(f) if !self.families.contains(&f) => self.families.push(f),
            Some(_) => {}
            None => {
                if !self.unknown_families.contains(&(afi, safi)) {
                    self.unknown_families.push((afi, safi));
                }
            }
        }
    }

    /// Encodes every capability as a TLV, in a fixed order.
    pub(super) fn encode_tlvs(&self) -> Vec<Vec<u8>> {
        let mut tlvs = Vec::new();
        let mp = |(afi, safi): (u16, u8)| {
            let [a0, a1] = afi.to_be_bytes();
            vec![cap_code::MULTIPROTOCOL, 4, a0, a1, 0, safi]
        };
        tlvs.extend(self.families.iter().map(|f| mp(f.afi_safi())));
        tlvs.extend(self.unknown_families.iter().copied().map(mp));
        if self.route_refresh {
            tlvs.push(vec![cap_code::ROUTE_REFRESH, 0]);
        }
        if let Some(gr) = &self.graceful_restart {
            let mut head = gr.restart_time & GR_TIME_MASK;
            if gr.restarting {
                head |= GR_RESTARTING;
            }
            if gr.notification {
                head |= GR_NOTIFICATION;
            }
            // At most 63 families fit the one-octet length.
            let families = &gr.families[..gr.families.len().min(63)];
            let mut tlv = vec![cap_code::GRACEFUL_RESTART, (2 + 4 * families.len()) as u8];
            tlv.extend_from_slice(&head.to_be_bytes());
            for (family, forwarding) in families {
                let (afi, safi) = family.afi_safi();
                tlv.extend_from_slice(&afi.to_be_bytes());
                tlv.push(safi);
                tlv.push(if *forwarding { GR_FORWARDING } else { 0 });
            }
            tlvs.push(tlv);
        }
        if let Some(asn) = self.four_octet_as {
            let mut tlv = vec![cap_code::FOUR_OCTET_AS, 4];
            tlv.extend_from_slice(&asn.to_be_bytes());
            tlvs.push(tlv);
        }
        if self.enhanced_route_refresh {
            tlvs.push(vec![cap_code::ENHANCED_ROUTE_REFRESH, 0]);
        }
        for (code, value) in &self.other {
            let value = &value[..value.len().min(255)];
            let mut tlv = vec![*code, value.len() as u8];
            tlv.extend_from_slice(value);
            tlvs.push(tlv);
        }
        tlvs
    }
}

/// RFC 4724 3: flags and restart time, then (AFI, SAFI, flags) tuples.
/// Tuples of families Tartan does not speak are skipped.
fn decode_gr(value: &[u8]) -> Result<GracefulRestartCap, Notification> {
    let [h0, h1, tuples @ ..] = value else {
        return Err(malformed());
    };
    if tuples.len() % 4 != 0 {
        return Err(malformed());
    }
    let head = u16::from_be_bytes([*h0, *h1]);
    let families = tuples
        .chunks_exact(4)
        .filter_map(|t| {
            let family = Family::from_afi_safi(u16::from_be_bytes([t[0], t[1]]), t[2])?;
            Some((family, t[3] & GR_FORWARDING != 0))
        })
        .collect();
    Ok(GracefulRestartCap {
        restarting: head & GR_RESTARTING != 0,
        notification: head & GR_NOTIFICATION != 0,
        restart_time: head & GR_TIME_MASK,
        families,
    })
}
