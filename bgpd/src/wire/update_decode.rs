//! UPDATE decoding (RFC 4271 4.3, RFC 4760, RFC 4724 EoR, RFC 7606).

use ipnet::IpNet;

use super::DecodeOptions;
use super::attr_decode::{self, type_code as tc};
use super::codes::UpdateError;
use super::nlri::decode_prefixes;
use super::notification::Notification;
use crate::model::{Family, NextHop, PathAttrs, checks};

/// A decoded UPDATE.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Update {
    /// The IPv4 Withdrawn Routes field and MP_UNREACH_NLRI prefixes.
    pub withdrawn: Vec<IpNet>,
    /// IPv4 NLRI (next hop from NEXT_HOP) and MP_REACH_NLRI (its own next
    /// hop). Never holds a Reach without prefixes.
    pub reach: Vec<Reach>,
    /// The attributes every Reach shares, with `next_hop` = `NextHop::None`.
    /// `Some` exactly when `reach` is not empty.
    pub attrs: Option<PathAttrs>,
    /// RFC 4724: an empty UPDATE is the IPv4 End-of-RIB; an UPDATE with
    /// only an empty MP_UNREACH_NLRI is that family's.
    pub end_of_rib: Option<Family>,
    /// RFC 7606 treat-as-withdraw: every announced prefix has been moved
    /// into `withdrawn`, `reach` is empty and `attrs` is `None`. Says why.
    pub treat_as_withdraw: Option<String>,
    /// Attributes dropped by "attribute discard" (RFC 7606), for logs.
    pub discarded: Vec<String>,
}

/// Prefixes of one family announced with one next hop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reach {
    pub family: Family,
    pub next_hop: NextHop,
    pub prefixes: Vec<IpNet>,
}

/// Decodes the body of an UPDATE (after the header).
pub(super) fn decode_update(body: &[u8], opts: &DecodeOptions) -> Result<Update, Notification> {
    // RFC 4271 6.3 / RFC 7606 3.b: the two length fields must fit.
    let malformed_list = || Notification::malformed_attribute_list();
    let wlen = match body {
        [h, l, ..] => usize::from(u16::from_be_bytes([*h, *l])),
        _ => return Err(malformed_list()),
    };
    let withdrawn_field = body.get(2..2 + wlen).ok_or_else(malformed_list)?;
    let alen = match body.get(2 + wlen..4 + wlen) {
        Some(&[h, l]) => usize::from(u16::from_be_bytes([h, l])),
        _ => return Err(malformed_list()),
    };
    let attr_field = body
        .get(4 + wlen..4 + wlen + alen)
        .ok_or_else(malformed_list)?;
    let nlri_field = &body[4 + wlen + alen..];

    // RFC 7606 3.i and 5.3: an unparseable Withdrawn Routes or NLRI field
    // is a reset.
    let invalid_network = || Notification::update_error(UpdateError::InvalidNetworkField, vec![]);
    let mut withdrawn = Vec::new();
    decode_prefixes(Family::Ipv4Unicast, withdrawn_field, &mut withdrawn)
        .map_err(|_| invalid_network())?;
    let mut nlri = Vec::new();
    decode_prefixes(Family::Ipv4Unicast, nlri_field, &mut nlri).map_err(|_| invalid_network())?;

    if withdrawn_field.is_empty() && attr_field.is_empty() && nlri_field.is_empty() {
        return Ok(Update {
            end_of_rib: Some(Family::Ipv4Unicast),
            ..Update::default()
        });
    }

    let mut walk = attr_decode::walk(attr_field, opts)?;

    let mut update = Update::default();
    if let Some((family, prefixes)) = walk.mp_unreach.take() {
        // RFC 4724 2: MP_UNREACH_NLRI alone and empty is an End-of-RIB.
        if prefixes.is_empty()
            && withdrawn.is_empty()
            && nlri.is_empty()
            && !walk.saw_other_than_mp_unreach()
        {
            update.end_of_rib = Some(family);
        }
        withdrawn.extend(prefixes);
    }
    update.withdrawn = withdrawn;

    if !nlri.is_empty() {
        // RFC 7606 3.d: NEXT_HOP is mandatory only with IPv4 NLRI (RFC 4760
        // makes it discretionary otherwise).
        match walk.next_hop {
            Some(nh) => update.reach.push(Reach {
                family: Family::Ipv4Unicast,
                next_hop: NextHop::V4(nh),
                prefixes: nlri,
            }),
            None => {
                if !walk.saw(tc::NEXT_HOP) {
                    missing(&mut walk, tc::NEXT_HOP);
                }
                update.reach.push(Reach {
                    family: Family::Ipv4Unicast,
                    next_hop: NextHop::None,
                    prefixes: nlri,
                });
            }
        }
    }
    if let Some(mp) = walk.mp_reach.take()
        && !mp.prefixes.is_empty()
    {
        update.reach.push(Reach {
            family: mp.family,
            next_hop: mp.next_hop,
            prefixes: mp.prefixes,
        });
    }

    // RFC 4271 6.3, RFC 7606 7.3: a next hop no one can forward to makes
    // the routes treat-as-withdraw, not a NOTIFICATION.
    let own: Vec<_> = opts.local.into_iter().collect();
    for reach in &update.reach {
        if let Some(why) = checks::unusable_next_hop(&reach.next_hop, &own) {
            walk.set_withdraw(
                why,
                Notification::update_error(UpdateError::InvalidNextHop, vec![]),
            );
        }
    }
    if !update.reach.is_empty() {
        // RFC 7606 3.d: ORIGIN and AS_PATH must come with any NLRI.
        for code in [tc::ORIGIN, tc::AS_PATH] {
            if !walk.saw(code) {
                missing(&mut walk, code);
            }
        }
    }

    update.discarded = std::mem::take(&mut walk.discarded);
    if let Some((why, notification)) = walk.withdraw.take() {
        // RFC 7606 5.2: attributes (other than MP_UNREACH_NLRI) but no
        // reachable NLRI, and an error stronger than attribute discard:
        // treat-as-withdraw means nothing here, so the session resets.
        if update.reach.is_empty() && walk.saw_other_than_mp_unreach() {
            return Err(notification);
        }
        // RFC 7606 2: handled as if every route had been withdrawn.
        for reach in update.reach.drain(..) {
            update.withdrawn.extend(reach.prefixes);
        }
        update.treat_as_withdraw = Some(why);
        return Ok(update);
    }
    if !update.reach.is_empty() {
        update.attrs = Some(walk.attrs);
    }
    Ok(update)
}

fn missing(walk: &mut attr_decode::Walk, code: u8) {
    walk.set_withdraw(
        format!("missing well-known attribute {}", attr_decode::name(code)),
        Notification::update_error(UpdateError::MissingWellKnown, vec![code]),
    );
}
