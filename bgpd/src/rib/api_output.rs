//! The RIB's output side for the session writers: a peer's next batch of
//! pending output (drained from the current best paths), and dropping a
//! peer's output state when its session goes.
use super::Rib;
use super::output::Drain;
use super::peers::{FamilyOut, LOCAL_IDX, fam_index};
use super::table::{Addr, PeerIdx, Table};
use super::types::{Changes, OutBatch, PeerId};
use crate::model::Family;
use ipnet::IpNet;

impl Rib {
    /// Takes the peer's next batch of pending output: up to `max_prefixes`
    /// prefixes sharing one outgoing attribute set (or one withdraw list).
    /// None when nothing is pending.
    pub fn take_output(&mut self, peer: PeerId, max_prefixes: usize) -> Option<OutBatch> {
        self.take_output_of(peer, max_prefixes, &Family::ALL)
    }

    /// [`Rib::take_output`] in `families` only; what is pending in the
    /// others stays pending.
    pub fn take_output_of(
        &mut self,
        peer: PeerId,
        max_prefixes: usize,
        families: &[Family],
    ) -> Option<OutBatch> {
        let x = self.peers.idx(peer).filter(|&x| x != LOCAL_IDX)?;
        for f in Family::ALL.into_iter().filter(|f| families.contains(f)) {
            let fi = fam_index(f);
            let Some(mut out) = self.peers.outs[x as usize].fams[fi].take() else {
                continue;
            };
            let mut emptied = Vec::new();
            let (batch, delta) = match f {
                Family::Ipv4Unicast => {
                    drain(self, &self.v4, x, &mut out, max_prefixes, &mut emptied)
                }
                Family::Ipv6Unicast => {
                    drain(self, &self.v6, x, &mut out, max_prefixes, &mut emptied)
                }
            };
            self.peers.outs[x as usize].fams[fi] = Some(out);
            if let Some(info) = self.peers.info_mut(x) {
                info.counts.advertised = info.counts.advertised.saturating_add_signed(delta);
            }
            let mut changes = Changes::default();
            let mut p = self.parts(&mut changes);
            for i in emptied {
                match f {
                    Family::Ipv4Unicast => p.ctx.try_free(p.v4, i),
                    Family::Ipv6Unicast => p.ctx.try_free(p.v6, i),
                }
            }
            if batch.is_some() {
                return batch;
            }
        }
        None
    }

    /// The session could not encode an announcement of these prefixes
    /// and sent a withdraw instead (RFC 4271 9.2): the peer holds none of
    /// them now. A later change of their best path tries again.
    pub fn not_advertised(&mut self, peer: PeerId, family: Family, prefixes: &[IpNet]) {
        let Some(x) = self.peers.idx(peer).filter(|&x| x != LOCAL_IDX) else {
            return;
        };
        let Some(out) = self.peers.outs[x as usize].fams[fam_index(family)].as_mut() else {
            return;
        };
        let mut cleared = 0;
        for net in prefixes {
            let slot = match net.trunc() {
                IpNet::V4(n) => self.v4.find(n.network(), n.prefix_len()),
                IpNet::V6(n) => self.v6.find(n.network(), n.prefix_len()),
            };
            if slot.is_some_and(|i| out.adv.clear(i)) {
                cleared += 1;
            }
        }
        if let Some(info) = self.peers.info_mut(x) {
            info.counts.advertised = info.counts.advertised.saturating_sub(cleared);
        }
    }

    /// Drops a peer's output state; slots it alone kept alive are freed.
    pub(super) fn drop_output(&mut self, x: PeerIdx) {
        let mut held: [Vec<u32>; 2] = Default::default();
        for (f, h) in held.iter_mut().enumerate() {
            if let Some(out) = self.peers.outs[x as usize].fams[f].as_ref() {
                h.extend(out.dirty.iter());
                h.extend(out.adv.iter());
            }
        }
        self.peers.set_output(x, [false, false]);
        if let Some(info) = self.peers.info_mut(x) {
            info.counts.advertised = 0;
        }
        let mut changes = Changes::default();
        let mut p = self.parts(&mut changes);
        for i in held[0].drain(..) {
            p.ctx.try_free(p.v4, i);
        }
        for i in held[1].drain(..) {
            p.ctx.try_free(p.v6, i);
        }
    }
}

fn drain<A: Addr>(
    rib: &Rib,
    table: &Table<A>,
    x: PeerIdx,
    out: &mut FamilyOut,
    max: usize,
    emptied: &mut Vec<u32>,
) -> (Option<OutBatch>, i64) {
    let mut scratch = Vec::new();
    let mut d = Drain {
        local: &rib.local,
        draining: rib.draining,
        attrs: &rib.attrs,
        peers: &rib.peers,
        table,
        target: x,
        scratch: &mut scratch,
        emptied,
        adv_delta: 0,
    };
    let b = d.next(out, max);
    (b, d.adv_delta)
}
