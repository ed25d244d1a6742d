//! The typed model of a ruleset change: the `nftables` crate's schema
//! types (tables, chains, rules as statements and expressions, sets and
//! maps with their key types, elements), re-exported, and [`Command`],
//! which adds what that crate cannot say: maps to verdicts.

use nftables::schema::{NfCmd, NfObject, SetType};
use nftables::types::NfFamily;
use serde_json::{Value, json};

pub use nftables::{expr, schema, stmt, types};

use crate::Error;

/// One command of a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// A command the `nftables` crate's types express.
    Nft(NfCmd<'static>),
    /// `add map` of a map whose values are verdicts.
    AddVerdictMap(VerdictMap),
}

/// A map from keys of `key` (one type, or a concatenation) to verdicts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerdictMap {
    pub family: NfFamily,
    pub table: String,
    pub name: String,
    pub key: Vec<SetType>,
}

/// A family as nft names it.
pub fn family_name(f: NfFamily) -> &'static str {
    match f {
        NfFamily::IP => "ip",
        NfFamily::IP6 => "ip6",
        NfFamily::INet => "inet",
        NfFamily::ARP => "arp",
        NfFamily::Bridge => "bridge",
        NfFamily::NetDev => "netdev",
    }
}

/// The family nft names `name`.
pub fn family_of(name: &str) -> Option<NfFamily> {
    Some(match name {
        "ip" => NfFamily::IP,
        "ip6" => NfFamily::IP6,
        "inet" => NfFamily::INet,
        "arp" => NfFamily::ARP,
        "bridge" => NfFamily::Bridge,
        "netdev" => NfFamily::NetDev,
        _ => return None,
    })
}

/// A family's NFPROTO_* number.
pub fn family_number(f: NfFamily) -> u8 {
    match f {
        NfFamily::INet => 1,
        NfFamily::IP => 2,
        NfFamily::ARP => 3,
        NfFamily::NetDev => 5,
        NfFamily::Bridge => 7,
        NfFamily::IP6 => 10,
    }
}

/// A type as nft names it (`ipv4_addr`).
pub fn type_name(t: SetType) -> &'static str {
    match t {
        SetType::Ipv4Addr => "ipv4_addr",
        SetType::Ipv6Addr => "ipv6_addr",
        SetType::EtherAddr => "ether_addr",
        SetType::InetProto => "inet_proto",
        SetType::InetService => "inet_service",
        SetType::Mark => "mark",
        SetType::Ifname => "ifname",
    }
}

/// The `nftables` crate writes a map element's verdict without a target
/// as a bare word (`"accept"`), which nft reads as a symbol and refuses;
/// nft wants `{"accept": null}`. Rewrites the values of `[key, value]`
/// elements of an element, set or map command.
fn verdict_values(cmd: &mut Value) {
    let Some(body) = cmd.as_object_mut().and_then(|m| m.values_mut().next()) else {
        return;
    };
    let Some(obj) = body.as_object_mut().and_then(|m| m.values_mut().next()) else {
        return;
    };
    let Some(elems) = obj.get_mut("elem").and_then(Value::as_array_mut) else {
        return;
    };
    for e in elems {
        if let Some([_, value]) = e.as_array_mut().map(Vec::as_mut_slice)
            && let Some(word @ ("accept" | "drop" | "continue" | "return")) = value.as_str()
        {
            *value = json!({ word: null });
        }
    }
}

impl From<NfCmd<'static>> for Command {
    fn from(c: NfCmd<'static>) -> Command {
        Command::Nft(c)
    }
}

impl Command {
    /// The command in nft's JSON, as the `nft` program reads it.
    pub fn to_json(&self) -> Value {
        match self {
            // Serialising the crate's plain data types cannot fail.
            Command::Nft(c) => {
                let mut v =
                    serde_json::to_value(NfObject::CmdObject(c.clone())).unwrap_or(Value::Null);
                verdict_values(&mut v);
                v
            }
            Command::AddVerdictMap(m) => {
                let key = match m.key.as_slice() {
                    [one] => json!(type_name(*one)),
                    parts => json!(parts.iter().map(|t| type_name(*t)).collect::<Vec<_>>()),
                };
                json!({"add": {"map": {
                    "family": family_name(m.family), "table": m.table, "name": m.name,
                    "type": key, "map": "verdict"
                }}})
            }
        }
    }

    /// A command from nft's JSON (`{"add": {"set": {…}}}`): for tests and
    /// tools that write commands by hand; Tartan builds the model itself.
    pub fn from_json(v: &Value) -> Result<Command, Error> {
        if let Some(m) = v.get("add").and_then(|a| a.get("map"))
            && m.get("map").and_then(Value::as_str) == Some("verdict")
        {
            let bad = || Error::Json(v.to_string());
            let family = serde_json::from_value(m.get("family").cloned().ok_or_else(bad)?)
                .map_err(|_| bad())?;
            let key = match m.get("type").ok_or_else(bad)? {
                Value::Array(a) => a
                    .iter()
                    .map(|t| serde_json::from_value(t.clone()))
                    .collect::<Result<Vec<SetType>, _>>()
                    .map_err(|_| bad())?,
                t => vec![serde_json::from_value(t.clone()).map_err(|_| bad())?],
            };
            let text = |k: &str| Some(m.get(k)?.as_str()?.to_string());
            let known = ["family", "table", "name", "type", "map"];
            if m.as_object()
                .is_some_and(|o| o.keys().any(|k| !known.contains(&k.as_str())))
            {
                return Err(bad());
            }
            return Ok(Command::AddVerdictMap(VerdictMap {
                family,
                table: text("table").ok_or_else(bad)?,
                name: text("name").ok_or_else(bad)?,
                key,
            }));
        }
        match serde_json::from_value::<NfObject<'static>>(v.clone()) {
            Ok(NfObject::CmdObject(c)) => Ok(Command::Nft(c)),
            _ => Err(Error::Json(v.to_string())),
        }
    }
}
