//! What the CRD schemas say beyond the types: OpenAPI constraints and CEL
//! rules (`x-kubernetes-validations`), so that the API server refuses what
//! [`crate::validate`] refuses wherever CEL can say it. Each `pub(crate)`
//! function is a schemars field transform (`#[schemars(transform = ...)]`);
//! the `*_RULES` functions give rule lists for a struct's `extend`.
//!
//! The rules use the API server's CEL libraries: `isCIDR`, `cidr`, `isIP`,
//! `ip`, `.masked()`, `.prefixLength()`, `.ip()`, `.family()`,
//! `.containsIP()`, `matches`, the strings extension (`split`,
//! `substring`, `lastIndexOf`, `lowerAscii`) and `duration`. Every list or
//! map a rule walks has `maxItems`/`maxProperties` and every string a rule
//! reads has `maxLength`, so the API server's cost estimate stays bounded.

use schemars::Schema;
use serde_json::{Value, json};

/// A DNS-1123 subdomain, as [`super::common::dns_subdomain`] accepts.
pub const DNS_SUBDOMAIN: &str =
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
/// The longest CIDR or address text (a full IPv6 address with an IPv4
/// tail and a /128 is 49 characters).
pub const ADDRESS_MAX: u64 = 64;
/// The longest selector.
pub const SELECTOR_MAX: u64 = 4096;
/// The most entries of a list that a rule walks, unless said otherwise.
pub const LIST_MAX: u64 = 256;
/// The most CIDRs or addresses in one list (policy nets, reservations).
pub const NETS_MAX: u64 = 256;
/// The most networks in one NetworkSet or GlobalNetworkSet: sets stand for
/// outside networks (a provider's published ranges run to thousands).
pub const NETWORK_SET_MAX: u64 = 10_000;
/// The most ports in one list of a policy rule.
pub const PORTS_MAX: u64 = 64;
/// The longest protocol or port written as a string.
pub const INT_OR_STRING_MAX: u64 = 32;
/// The most addresses in a block (IPv4 /20, IPv6 /116).
pub const BLOCK_MAX: u64 = super::limits::MAX_BLOCK_ADDRESSES as u64;
/// The most named communities in a BGPConfiguration, and community
/// references in one prefix advertisement.
pub const COMMUNITIES_MAX: u64 = 64;
/// The longest community value or name.
pub const COMMUNITY_MAX: u64 = 64;

pub(super) fn rule(rule: &str, message: &str) -> Value {
    json!({"rule": rule, "message": message})
}

fn add_rules(s: &mut Schema, rules: Vec<Value>) {
    let obj = s.ensure_object();
    let list = obj
        .entry("x-kubernetes-validations")
        .or_insert_with(|| Value::Array(vec![]));
    if let Value::Array(a) = list {
        a.extend(rules);
    }
}

fn set(s: &mut Schema, key: &str, v: Value) {
    s.ensure_object().insert(key.into(), v);
}

/// A field Tartan declares only to refuse it (a Calico field it does not
/// implement): any object, kept as written, so that an API server that
/// does not validate strictly stores it rather than drops it, and a CEL
/// rule beside it (`!has(self.x)`) refuses it.
pub(crate) fn opaque_object(s: &mut Schema) {
    let description = s.get("description").cloned();
    let mut o = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    if let Some(d) = description {
        o["description"] = d;
    }
    *s = Schema::try_from(o).unwrap_or_default();
}

/// Apply `f` to the schema of a list's items, and bound the list.
fn items(s: &mut Schema, max_items: u64, f: fn(&mut Schema)) {
    set(s, "maxItems", json!(max_items));
    if let Some(items) = s.ensure_object().get_mut("items") {
        let mut item = Schema::try_from(items.take()).unwrap_or_default();
        f(&mut item);
        *items = item.to_value();
    }
}

/// CEL that is true when `x` (a string) is a community value: `AA:NN`
/// (each 0 to 65535), `A:B:C` (each 0 to 4294967295) or a well-known name.
pub fn community_cel(x: &str) -> String {
    format!(
        "({x} in ['no-export', 'no-advertise', 'no-export-subconfed', 'no-peer'] \
         || ({x}.matches('^[0-9]+:[0-9]+$') && {x}.split(':').all(n, int(n) <= 65535)) \
         || ({x}.matches('^[0-9]+:[0-9]+:[0-9]+$') && {x}.split(':').all(n, int(n) <= 4294967295)))"
    )
}

/// CEL for the address family (4 or 6) of `x`, a CIDR or an address that
/// the rule has already found valid.
pub(super) fn family_cel(x: &str) -> String {
    format!("(isIP({x}) ? ip({x}).family() : cidr({x}).ip().family())")
}

/// A network: a CIDR whose host bits are zero.
pub(crate) fn network(s: &mut Schema) {
    set(s, "maxLength", json!(ADDRESS_MAX));
    add_rules(
        s,
        vec![
            rule(
                "isCIDR(self)",
                "is not a CIDR; expected e.g. 10.244.0.0/16 or fd00:10::/64",
            ),
            rule(
                "!isCIDR(self) || cidr(self) == cidr(self).masked()",
                "has host bits set; give the network address",
            ),
        ],
    );
}

/// A network or a single address.
fn network_or_address(s: &mut Schema) {
    set(s, "maxLength", json!(ADDRESS_MAX));
    add_rules(
        s,
        vec![rule(
            "isIP(self) || (isCIDR(self) && cidr(self) == cidr(self).masked())",
            "is neither a CIDR (with host bits zero) nor an address",
        )],
    );
}

/// A single IPv4 or IPv6 address.
pub(crate) fn address(s: &mut Schema) {
    set(s, "maxLength", json!(ADDRESS_MAX));
    add_rules(s, vec![rule("isIP(self)", "not an IPv4 or IPv6 address")]);
}

/// A list of networks or addresses.
pub(crate) fn network_or_address_list(s: &mut Schema) {
    items(s, NETS_MAX, network_or_address);
}

/// A network set's `nets`.
pub(crate) fn network_set_nets(s: &mut Schema) {
    items(s, NETWORK_SET_MAX, network_or_address);
}

/// A list of networks.
pub(crate) fn network_list(s: &mut Schema) {
    items(s, NETS_MAX, network);
}

/// A list of host networks (/32 or /128).
pub(crate) fn host_network_list(s: &mut Schema) {
    items(s, LIST_MAX, |item| {
        network(item);
        add_rules(
            item,
            vec![rule(
                "!isCIDR(self) || cidr(self).prefixLength() == (cidr(self).ip().family() == 4 ? 32 : 128)",
                "is not a host network; use /32 or /128",
            )],
        );
    });
}

/// An object name (DNS-1123 subdomain).
pub(crate) fn dns_name(s: &mut Schema) {
    set(s, "maxLength", json!(253));
    set(s, "pattern", json!(DNS_SUBDOMAIN));
}

/// A list of object names.
pub(crate) fn dns_name_list(s: &mut Schema) {
    items(s, LIST_MAX, dns_name);
}

/// A list of object names, each once.
pub(crate) fn dns_name_set(s: &mut Schema) {
    items(s, LIST_MAX, dns_name);
    set(s, "x-kubernetes-list-type", json!("set"));
}

/// A key of a Secret's data (as the API server's IsConfigMapKey: not `.`,
/// and not `..` or anything starting with it).
pub(crate) fn secret_key(s: &mut Schema) {
    set(s, "maxLength", json!(253));
    set(s, "pattern", json!("^[-._a-zA-Z0-9]+$"));
    add_rules(
        s,
        vec![rule(
            "self != '.' && !self.startsWith('..')",
            "is not a Secret key: '.' and keys starting with '..' are refused",
        )],
    );
}

/// A selector. Its grammar is more than CEL can parse; what is checked
/// here is sound (refuses only what the parser refuses): no control
/// characters, and a non-blank selector ends as every selector ends, with
/// `)`, `}` or a quote.
pub(crate) fn selector(s: &mut Schema) {
    set(s, "maxLength", json!(SELECTOR_MAX));
    add_rules(
        s,
        vec![
            rule(
                r"!self.matches('[\\x00-\\x1f\\x7f-\\x9f]')",
                "contains a control character; a selector is printable text",
            ),
            rule(
                r#"self.matches('^[\\s\\p{Z}]*$') || self.matches('[)}\'"][\\s\\p{Z}]*$')"#,
                "is not a selector: it stops short; a selector ends with ')', '}' or a quoted value",
            ),
        ],
    );
}

/// An AS number a network may use: 1 to 4294967295, not AS_TRANS.
pub(crate) fn as_number(s: &mut Schema) {
    set(s, "format", json!("int64"));
    set(s, "minimum", json!(1));
    set(s, "maximum", json!(u32::MAX));
    add_rules(
        s,
        vec![rule(
            &format!("self != {}", super::limits::AS_TRANS),
            "23456 is AS_TRANS, reserved for 2-octet speakers; use the real AS number",
        )],
    );
}

/// A list of AS numbers.
pub(crate) fn as_number_list(s: &mut Schema) {
    items(s, LIST_MAX, as_number);
}

/// A TCP port, 1 to 65535.
pub(crate) fn port(s: &mut Schema) {
    set(s, "minimum", json!(1));
    set(s, "maximum", json!(65535));
}

fn duration(s: &mut Schema, min: u64, max: u64) {
    set(s, "maxLength", json!(64));
    add_rules(
        s,
        vec![
            rule(
                "self.matches('^([0-9]+(h|m|s|ms))+$')",
                "is not a duration; write whole numbers with units h, m, s or ms, e.g. 120s or 2m",
            ),
            rule(
                &format!(
                    "!self.matches('^([0-9]+(h|m|s|ms))+$') || (duration(self) >= duration('{min}s') && duration(self) <= duration('{max}s'))"
                ),
                &format!("is out of range; allowed {min}s to {max}s"),
            ),
        ],
    );
}

/// A BFD interval, 10ms to 60s.
pub(crate) fn bfd_interval(s: &mut Schema) {
    set(s, "maxLength", json!(64));
    add_rules(
        s,
        vec![
            rule(
                "self.matches('^([0-9]+(h|m|s|ms))+$')",
                "is not a duration; write whole numbers with units h, m, s or ms, e.g. 300ms",
            ),
            rule(
                "!self.matches('^([0-9]+(h|m|s|ms))+$') || (duration(self) >= duration('10ms') && duration(self) <= duration('60s'))",
                "is out of range; allowed 10ms to 60s",
            ),
        ],
    );
}

/// A graceful restart time, 1s to 4095s.
pub(crate) fn restart_time(s: &mut Schema) {
    duration(s, 1, super::limits::MAX_RESTART_SECONDS);
}

/// The longest restart time kept for a peer, 0s to 4095s.
pub(crate) fn max_restart_time(s: &mut Schema) {
    duration(s, 0, super::limits::MAX_RESTART_SECONDS);
}

/// A community value.
fn community(s: &mut Schema) {
    set(s, "maxLength", json!(COMMUNITY_MAX));
    add_rules(
        s,
        vec![rule(
            &community_cel("self"),
            "is not a community; expected AA:NN (each 0 to 65535), A:B:C (each 0 to 4294967295) or one of no-export, no-advertise, no-export-subconfed, no-peer",
        )],
    );
}

/// A single community value.
pub(crate) fn community_value(s: &mut Schema) {
    community(s);
}

/// A list of community values.
pub(crate) fn community_list(s: &mut Schema) {
    items(s, COMMUNITIES_MAX, community);
}

/// A list of community names or values (checked against the names at the
/// spec's level).
pub(crate) fn community_ref_list(s: &mut Schema) {
    items(s, COMMUNITIES_MAX, |item| {
        set(item, "maxLength", json!(COMMUNITY_MAX));
    });
}

/// A community name: printable and non-empty.
pub(crate) fn community_name(s: &mut Schema) {
    set(s, "maxLength", json!(COMMUNITY_MAX));
    set(s, "minLength", json!(1));
    add_rules(
        s,
        vec![rule(
            r"!self.matches('[\\x00-\\x1f\\x7f-\\x9f]')",
            "a community needs a printable name",
        )],
    );
}

/// A list bounded at [`LIST_MAX`] entries.
pub(crate) fn bounded_list(s: &mut Schema) {
    set(s, "maxItems", json!(LIST_MAX));
}

/// A list of ports bounded at [`PORTS_MAX`] entries.
pub(crate) fn ports_list(s: &mut Schema) {
    set(s, "maxItems", json!(PORTS_MAX));
}

/// A list bounded at [`COMMUNITIES_MAX`] entries.
pub(crate) fn communities_list(s: &mut Schema) {
    set(s, "maxItems", json!(COMMUNITIES_MAX));
}

/// A list of distinct values.
pub(crate) fn distinct(s: &mut Schema) {
    set(s, "x-kubernetes-list-type", json!("set"));
}

/// An IP version: 4 or 6.
pub(crate) fn ip_version(s: &mut Schema) {
    set(s, "enum", json!([4, 6]));
}

/// Printable, non-empty text without '/' (IDs and interface names).
pub(crate) fn printable_id(s: &mut Schema) {
    set(s, "minLength", json!(1));
    set(s, "maxLength", json!(1024));
    add_rules(
        s,
        vec![rule(
            r"!self.matches('[\\x00-\\x1f\\x7f-\\x9f/]')",
            "must be non-empty printable text without '/'",
        )],
    );
}

/// A Linux interface name: also at most 15 characters.
pub(crate) fn interface_name(s: &mut Schema) {
    printable_id(s);
    set(s, "maxLength", json!(15));
}

/// A handle ID: printable and non-empty.
pub(crate) fn handle_id(s: &mut Schema) {
    set(s, "minLength", json!(1));
    set(s, "maxLength", json!(1024));
    add_rules(
        s,
        vec![rule(
            r"!self.matches('[\\x00-\\x1f\\x7f-\\x9f]')",
            "a handle needs a printable, non-empty ID",
        )],
    );
}

/// A block affinity: `host:<nodename>`.
pub(crate) fn affinity(s: &mut Schema) {
    set(s, "maxLength", json!(258));
    set(
        s,
        "pattern",
        json!(format!("^host:{}", &DNS_SUBDOMAIN[1..])),
    );
}

/// An IPAM handle's blocks: network CIDR to a count.
pub(crate) fn handle_blocks(s: &mut Schema) {
    set(s, "maxProperties", json!(LIST_MAX));
    add_rules(
        s,
        vec![rule(
            "self.all(k, size(k) <= 64 && isCIDR(k) && cidr(k) == cidr(k).masked())",
            "every key must be a block's network CIDR, with host bits zero",
        )],
    );
}

/// An IPAM block's allocations: at most a block's addresses.
pub(crate) fn block_list(s: &mut Schema) {
    set(s, "maxItems", json!(BLOCK_MAX));
}

/// An IPAM block's free ordinals: at most a block's addresses, each once.
pub(crate) fn ordinal_set(s: &mut Schema) {
    set(s, "maxItems", json!(BLOCK_MAX));
    set(s, "x-kubernetes-list-type", json!("set"));
}

/// Rules that a rule list of one address family obeys (BGPFilter):
/// `list` is the field, `v` 4 or 6, `export` whether it is an export list.
pub fn filter_list_rules(list: &str, v: u8, export: bool) -> Vec<Value> {
    let max = if v == 4 { 32 } else { 128 };
    let mut out = vec![
        rule(
            &format!(
                "!has(self.{list}) || self.{list}.all(r, !has(r.cidr) || !isCIDR(r.cidr) || cidr(r.cidr).ip().family() == {v})"
            ),
            &format!("{list}: a cidr is not IPv{v}; this list holds IPv{v} rules only"),
        ),
        rule(
            &format!(
                "!has(self.{list}) || self.{list}.all(r, !has(r.prefixLength) || ((!has(r.prefixLength.min) || r.prefixLength.min <= {max}) && (!has(r.prefixLength.max) || r.prefixLength.max <= {max})))"
            ),
            &format!("{list}: a prefixLength is out of range for IPv{v}; allowed 0 to {max}"),
        ),
    ];
    if !export {
        out.push(rule(
            &format!(
                "!has(self.{list}) || self.{list}.all(r, !has(r.asPathPrepend) || size(r.asPathPrepend) == 0)"
            ),
            &format!("{list}: only export rules can prepend to the AS path"),
        ));
    }
    out
}
