//! The Kubernetes CEL libraries for IP addresses and CIDRs, as the API
//! server has them (`k8s.io/apiserver/pkg/cel/library`): `isIP`, `ip`,
//! `isCIDR`, `cidr`, `.family()`, `.isUnspecified()`, `.ip()`,
//! `.prefixLength()`, `.masked()`, `.containsIP()`. As there, an address
//! with a zone or an IPv4-mapped IPv6 address is not an IP, and a prefix
//! length is written without leading zeros.

use std::net::IpAddr;
use std::sync::Arc;

use cel::extractors::This;
use cel::objects::Opaque;
use cel::{Context, ExecutionError, Value};
use ipnet::IpNet;

/// A CEL `net.IP`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ip(pub IpAddr);

impl Opaque for Ip {
    fn runtime_type_name(&self) -> &str {
        "net.IP"
    }
}

/// A CEL `net.CIDR`: an address and a prefix length (not masked).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cidr(pub IpNet);

impl Opaque for Cidr {
    fn runtime_type_name(&self) -> &str {
        "net.CIDR"
    }
}

fn parse_ip(s: &str) -> Option<IpAddr> {
    let ip: IpAddr = s.parse().ok()?;
    match ip {
        IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some() => None,
        ip => Some(ip),
    }
}

fn parse_cidr(s: &str) -> Option<IpNet> {
    let (addr, len) = s.split_once('/')?;
    let leading_zero = len.len() > 1 && len.starts_with('0');
    if len.is_empty() || leading_zero || !len.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    IpNet::new(parse_ip(addr)?, len.parse().ok()?).ok()
}

fn err(function: &str, message: String) -> ExecutionError {
    ExecutionError::function_error(function, message)
}

fn opaque<T: Opaque + Clone>(v: &Value, function: &str) -> Result<T, ExecutionError> {
    match v {
        Value::Opaque(o) => o
            .downcast_ref::<T>()
            .cloned()
            .ok_or_else(|| err(function, format!("no overload for {v:?}"))),
        other => Err(err(function, format!("no overload for {other:?}"))),
    }
}

fn ip_of(v: &Value, function: &str) -> Result<IpAddr, ExecutionError> {
    match v {
        Value::String(s) => {
            parse_ip(s).ok_or_else(|| err(function, format!("IP Address {s:?} parse error")))
        }
        other => opaque::<Ip>(other, function).map(|ip| ip.0),
    }
}

fn ip_value(ip: IpAddr) -> Value {
    Value::Opaque(Arc::new(Ip(ip)))
}

fn cidr_value(net: IpNet) -> Value {
    Value::Opaque(Arc::new(Cidr(net)))
}

/// Adds the library's functions to `ctx`.
pub fn install(ctx: &mut Context) {
    ctx.add_function("isIP", |s: Arc<String>| parse_ip(&s).is_some())
        .unwrap();
    ctx.add_function("isCIDR", |s: Arc<String>| parse_cidr(&s).is_some())
        .unwrap();
    // `ip('10.0.0.1')`, and `cidr(...).ip()`.
    ctx.add_function(
        "ip",
        |This(v): This<Value>| -> Result<Value, ExecutionError> {
            if let Value::Opaque(o) = &v
                && let Some(c) = o.downcast_ref::<Cidr>()
            {
                return Ok(ip_value(c.0.addr()));
            }
            ip_of(&v, "ip").map(ip_value)
        },
    )
    .unwrap();
    ctx.add_function("cidr", |s: Arc<String>| -> Result<Value, ExecutionError> {
        parse_cidr(&s)
            .map(cidr_value)
            .ok_or_else(|| err("cidr", format!("network address {s:?} parse error")))
    })
    .unwrap();
    ctx.add_function(
        "family",
        |This(v): This<Value>| -> Result<Value, ExecutionError> {
            Ok(Value::Int(match opaque::<Ip>(&v, "family")?.0 {
                IpAddr::V4(_) => 4,
                IpAddr::V6(_) => 6,
            }))
        },
    )
    .unwrap();
    ctx.add_function(
        "isUnspecified",
        |This(v): This<Value>| -> Result<Value, ExecutionError> {
            Ok(Value::Bool(
                opaque::<Ip>(&v, "isUnspecified")?.0.is_unspecified(),
            ))
        },
    )
    .unwrap();
    ctx.add_function(
        "prefixLength",
        |This(v): This<Value>| -> Result<Value, ExecutionError> {
            Ok(Value::Int(
                opaque::<Cidr>(&v, "prefixLength")?.0.prefix_len().into(),
            ))
        },
    )
    .unwrap();
    ctx.add_function(
        "masked",
        |This(v): This<Value>| -> Result<Value, ExecutionError> {
            Ok(cidr_value(opaque::<Cidr>(&v, "masked")?.0.trunc()))
        },
    )
    .unwrap();
    ctx.add_function(
        "containsIP",
        |This(v): This<Value>, arg: Value| -> Result<Value, ExecutionError> {
            let net = opaque::<Cidr>(&v, "containsIP")?.0;
            Ok(Value::Bool(net.contains(&ip_of(&arg, "containsIP")?)))
        },
    )
    .unwrap();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsing_follows_the_api_server() {
        assert!(parse_ip("10.0.0.1").is_some());
        assert!(parse_ip("fd00::1").is_some());
        for bad in [
            "::ffff:10.0.0.1",
            "fe80::1%eth0",
            "010.0.0.1",
            "10.0.0.1/32",
            "",
        ] {
            assert!(parse_ip(bad).is_none(), "{bad}");
        }
        assert!(parse_cidr("10.0.0.0/8").is_some());
        assert!(parse_cidr("10.0.0.1/8").is_some());
        for bad in ["10.0.0.0/08", "10.0.0.0/33", "10.0.0.0", "10.0.0.0/", "x/8"] {
            assert!(parse_cidr(bad).is_none(), "{bad}");
        }
    }
}
