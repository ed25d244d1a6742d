//! The service tables `ip tartan-svc` and `ip6 tartan-svc` as
//! transactions of the typed nftables model (tartan-nft). Both are
//! rendered by this code from one family's [`SvcNft`]: they differ only
//! in the address type of their sets, `ip`/`ip6` in their rules, the
//! loopback network and the ICMP type of a reject ([`crate::services::Fam`]).
//! The sketch below is the IPv4 table.
//!
//! The chain count does not grow with Services or endpoints: the map
//! `frontends` keyed by `address . protocol . port` gives a new
//! connection's picker id (into the mark), and the verdict map
//! `fe_pickers` sends it to a chain per endpoint *count* (`fe_3`: pick
//! slot `numgen random mod 3`),
//! and two maps keyed by `frontend . slot` give the endpoint's address
//! and port for the DNAT. nft 1.0.6 cannot load maps whose value is a
//! concatenation from JSON, hence two maps with scalar values. NodePorts
//! have the same shape keyed by `protocol . port`.
//!
//! ```text
//! chain prerouting { type nat hook prerouting priority dstnat
//!   iifname "tar*" iifname != "tartan*"            # from this node's pods
//!     meta mark set ip daddr . meta l4proto . th dport map @frontends_in meta mark vmap @fe_pickers
//!   meta mark set ip daddr . meta l4proto . th dport map @frontends meta mark vmap @fe_pickers
//!   iifname "tar*" iifname != "tartan*" fib daddr type local ip daddr != 127.0.0.0/8
//!     meta mark set meta l4proto . th dport map @node_ports_in meta mark vmap @np_pickers
//!   fib daddr type local ip daddr != 127.0.0.0/8
//!     meta mark set meta l4proto . th dport map @node_ports meta mark vmap @np_pickers }
//! chain output      { the same, for the node's own connections (all inside) }
//! chain fe_2        { meta mark set numgen random mod 2; goto fe_dnat }
//! chain fe_dnat     { dnat ip to <fe_addr[daddr.proto.dport.mark]> : <fe_port[…]> }
//! chain postrouting { type nat hook postrouting priority srcnat
//!   ct status dnat ip saddr . ip daddr @hairpin masquerade     # a pod reaching itself
//!   ct status dnat meta mark & 0xff000000 == 0x2000000 masquerade  # picked by a *_masq chain
//!   ct status dnat goto masq_external }   # from outside (not a pod), on to another node (not a pod)
//! chain filter_prerouting { type filter hook prerouting priority -110
//!   a LoadBalancer IP with loadBalancerSourceRanges drops other clients }
//! chain filter_output_ranges { the same in output, for the node's own }
//! chain input/forward/local { type filter …, after DNAT; new connections
//!   only: frontends without endpoints rejected (TCP reset, ICMP port
//!   unreachable); those whose traffic policy allows no endpoint here
//!   dropped; in forward and output, `ip daddr @cluster_ips` rejected
//!   (still to a ClusterIP after DNAT: a port its Service does not
//!   declare) }
//! ```
//!
//! Session affinity: dynamic sets `aff_<slot>` of `client . frontend`
//! with the Service's timeout; a chain per (count, timeout) looks the
//! client up in each slot's set before picking at random, and records
//! the pick.
//!
//! The slot is carried in the packet mark (only in the NAT chains, on a
//! connection's first packet).
//!
//! `externalTrafficPolicy: Local` governs external clients only: the maps
//! `frontends_in` and `node_ports_in` send this node's pods and the node
//! itself to the cluster-wide endpoints of such a Service (kube-proxy's
//! short-circuit). Their picking chains (`fe_3_in`) pick slots from
//! [`INSIDE_SLOTS`] up, so both endpoint lists share the slot maps.
//!
//! `externalTrafficPolicy: Cluster`: as kube-proxy, every connection
//! through an external frontend or a node port of such a Service is
//! masqueraded, whoever the client (outside, a pod, the node) and
//! wherever the endpoint. Their picking chains (`fe_3_masq`) pick slots
//! from [`MASQ_SLOTS`] up, and `postrouting` masquerades a connection
//! whose slot mark is in that range. A ClusterIP's connections are
//! masqueraded only from outside on to another node (`masq_external`).

mod chains;
mod changes;
mod objects;
mod picker;
mod table;

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use nftables::schema::{Chain, FlushObject, NfCmd, NfListObject, Set, SetFlag};
use tartan_nft::{Command, Transaction};

use crate::services::Family;
// The expression helpers the policy compiler already has.

use chains::*;
use changes::*;
pub use objects::TABLE;
use objects::*;
use picker::*;
pub use picker::{
    INSIDE_SLOTS, Kind, MASQ_SLOTS, MAX_AFFINITY_ENDPOINTS, Picker, STANDING_PICKERS,
    written_pickers,
};
pub use table::SvcNft;

/// The whole table, replaced in one transaction.
pub fn full<A: Family>(t: &SvcNft<A>) -> Transaction {
    whole(t, t, None)
}

/// What `nft` writes of a table the kernel does not have yet: [`full`]
/// without the elements [`super::elements::write`] sends over netlink
/// (it keeps the small sets of LoadBalancer source ranges).
pub fn skeleton<A: Family>(t: &SvcNft<A>) -> Transaction {
    whole(t, &limits(t), None)
}

/// What `nft` writes over the table the kernel has, in one transaction
/// that leaves the large maps' elements as they are: every set and map
/// declared (a no-op where it is), every chain made where missing and
/// its rules replaced, and the sets of LoadBalancer source ranges
/// replaced. [`super::elements::write`] then replaces the elements in one
/// netlink transaction, so Services are served throughout, by the old
/// elements and then by the new. The picking chains' verdict-map entries
/// are left to it too; chains and sets the new table lacks are removed
/// after it. `has(name)`: whether the kernel's table has set `name`
/// (an affinity set there is not declared again: the kernel keeps it
/// with the `dynamic` flag its rules gave it, which nft's JSON cannot
/// say, and refuses a declaration without it).
pub fn in_place<A: Family>(t: &SvcNft<A>, has: &dyn Fn(&str) -> bool) -> Transaction {
    whole(t, &limits(t), Some(has))
}

fn limits<A: Family>(t: &SvcNft<A>) -> SvcNft<A> {
    SvcNft {
        lb_limited: t.lb_limited.clone(),
        lb_allowed: t.lb_allowed.clone(),
        ..SvcNft::default()
    }
}

/// The whole table `t`, with the elements of `elements`; with
/// `in_place`, over the kernel's table (see [`in_place`]), else
/// replacing it.
fn whole<A: Family>(
    t: &SvcNft<A>,
    elements: &SvcNft<A>,
    in_place: Option<&dyn Fn(&str) -> bool>,
) -> Transaction {
    let f = A::FAM;
    let has = in_place.unwrap_or(&|_| false);
    let in_place = in_place.is_some();
    let mut out = if in_place {
        tx(vec![add(NfListObject::Table(table(f)))])
    } else {
        tx(vec![
            add(NfListObject::Table(table(f))),
            del(NfListObject::Table(table(f))),
            add(NfListObject::Table(table(f))),
        ])
    };
    for (name, key, value) in declarations(f) {
        out.push(declare(f, name, &key, value));
    }
    let mut objs = vec![add(NfListObject::Set(Box::new(Set {
        family: f.nf(),
        table: Cow::Borrowed(TABLE),
        name: Cow::Borrowed("lb_allowed"),
        set_type: types(&fe_client_net_type(f)),
        flags: Some([SetFlag::Interval].into()),
        ..Set::default()
    })))];
    for i in (0..t.affinity_slots).filter(|i| !has(&format!("aff_{i}"))) {
        objs.push(add(affinity_set(f, i)));
    }
    let fixed = fixed(f);
    let pickers = written_pickers(&t.pickers);
    let mut chains: Vec<Chain<'static>> = fixed.iter().map(|(c, _)| c.clone()).collect();
    chains.extend(pickers.iter().map(|p| chain(f, &p.chain())));
    for c in &chains {
        objs.push(add(NfListObject::Chain(c.clone())));
    }
    if in_place {
        for c in &chains {
            objs.push(Command::Nft(NfCmd::Flush(FlushObject::Chain(chain(
                f, &c.name,
            )))));
        }
        for set in ["lb_limited", "lb_allowed"] {
            objs.push(Command::Nft(NfCmd::Flush(FlushObject::Set(Box::new(
                Set {
                    family: f.nf(),
                    table: Cow::Borrowed(TABLE),
                    name: Cow::Borrowed(set),
                    ..Set::default()
                },
            )))));
        }
    }
    for (c, rules) in fixed {
        objs.extend(rules.into_iter().map(|r| rule(f, &c.name, r)));
    }
    for p in &pickers {
        objs.extend(
            picker_rules(f, p)
                .into_iter()
                .map(|r| rule(f, &p.chain(), r)),
        );
    }
    if !in_place {
        for p in &pickers {
            objs.push(add(picker_entry(f, p)));
        }
    }
    for (name, _, elems) in element_changes(&SvcNft::default(), elements) {
        if !elems.is_empty() {
            objs.push(add(element_cmd(f, name, elems)));
        }
    }
    out.extend(objs);
    out
}

/// The commands from `old` (applied) to `new`; `None` when equal.
pub fn diff<A: Family>(old: &SvcNft<A>, new: &SvcNft<A>) -> Option<Transaction> {
    let mut bare_old = old.clone();
    bare_old.hairpin.clear();
    let mut bare_new = new.clone();
    bare_new.hairpin.clear();
    patch(
        &[(bare_old, bare_new)],
        &(old.hairpin.clone(), new.hairpin.clone()),
        &(old.pickers.clone(), new.pickers.clone()),
        (old.affinity_slots, new.affinity_slots),
    )
}

type Before<T> = (T, T);

/// The commands for changed parts of the table: per part (old, new) the
/// elements, and for the whole table the hairpin set, the picking chains
/// and the affinity sets (each as before, after). Deletions come before
/// additions, so a frontend moving between parts is never doubled.
pub fn patch<A: Family>(
    parts: &[(SvcNft<A>, SvcNft<A>)],
    hairpin: &Before<BTreeSet<A>>,
    pickers: &Before<BTreeSet<Picker>>,
    affinity: Before<u32>,
) -> Option<Transaction> {
    let f = A::FAM;
    let mut objs = Vec::new();
    for i in affinity.0..affinity.1 {
        objs.push(add(affinity_set(f, i)));
    }
    let pickers = &(written_pickers(&pickers.0), written_pickers(&pickers.1));
    for p in pickers.1.difference(&pickers.0) {
        objs.push(add(NfListObject::Chain(chain(f, &p.chain()))));
        objs.extend(
            picker_rules(f, p)
                .into_iter()
                .map(|r| rule(f, &p.chain(), r)),
        );
        objs.push(add(picker_entry(f, p)));
    }
    let mut changes: Vec<_> = parts
        .iter()
        .flat_map(|(o, n)| element_changes(o, n))
        .collect();
    let hp = |a: &A| key_of(hairpin_elem(a));
    changes.push((
        "hairpin",
        hairpin.0.difference(&hairpin.1).map(hp).collect(),
        hairpin.1.difference(&hairpin.0).map(hp).collect(),
    ));
    for (name, gone, _) in &changes {
        if !gone.is_empty() {
            objs.push(del(element_cmd(f, name, gone.clone())));
        }
    }
    for (name, _, came) in changes {
        if !came.is_empty() {
            objs.push(add(element_cmd(f, name, came)));
        }
    }
    for p in pickers.0.difference(&pickers.1) {
        objs.push(del(picker_entry(f, p)));
        objs.push(Command::Nft(NfCmd::Flush(FlushObject::Chain(chain(
            f,
            &p.chain(),
        )))));
        objs.push(del(NfListObject::Chain(chain(f, &p.chain()))));
    }
    for i in affinity.1..affinity.0 {
        objs.push(del(affinity_set(f, i)));
    }
    if objs.is_empty() {
        return None;
    }
    Some(tx(objs))
}

/// Chains with rule counts and sets and maps (`@name`) with element
/// counts, as the kernel shows them; the affinity sets (filled by the
/// packet path) are left out.
pub fn summary<A: Family>(t: &SvcNft<A>) -> BTreeMap<String, usize> {
    let f = A::FAM;
    let mut m = BTreeMap::new();
    for (c, rules) in fixed(f) {
        m.insert(c.name.to_string(), rules.len());
    }
    let pickers = written_pickers(&t.pickers);
    for p in &pickers {
        m.insert(p.chain(), picker_rules(f, p).len());
    }
    for (map, kind) in [
        ("@fe_pickers", Kind::Frontend),
        ("@np_pickers", Kind::NodePort),
    ] {
        m.insert(
            map.to_string(),
            pickers.iter().filter(|p| p.kind == kind).count(),
        );
    }
    for (name, count) in [
        ("frontends", t.frontends.len()),
        ("node_ports", t.node_ports.len()),
        ("frontends_in", t.frontends_in.len()),
        ("node_ports_in", t.node_ports_in.len()),
        ("fe_addr", t.fe_slots.len()),
        ("fe_port", t.fe_slots.len()),
        ("np_addr", t.np_slots.len()),
        ("np_port", t.np_slots.len()),
        ("reject_fe", t.reject_fe.len()),
        ("drop_fe", t.drop_fe.len()),
        ("reject_np", t.reject_np.len()),
        ("drop_np", t.drop_np.len()),
        ("hairpin", t.hairpin.len()),
        ("lb_limited", t.lb_limited.len()),
        ("lb_allowed", t.lb_allowed.len()),
        ("cluster_ips", t.cluster_ips.len()),
    ] {
        m.insert(format!("@{name}"), count);
    }
    m
}

/// Sets left out of the drift check.
pub fn is_dynamic(set: &str) -> bool {
    set.starts_with("aff_")
}
