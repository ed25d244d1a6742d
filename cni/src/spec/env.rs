//! The command and its environment variables, checked as the spec says.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::error::{CniError, code};

/// The six CNI operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Add,
    Del,
    Check,
    Status,
    Gc,
    Version,
}

impl Command {
    fn parse(s: &str) -> Option<Command> {
        Some(match s {
            "ADD" => Command::Add,
            "DEL" => Command::Del,
            "CHECK" => Command::Check,
            "STATUS" => Command::Status,
            "GC" => Command::Gc,
            "VERSION" => Command::Version,
            _ => return None,
        })
    }
}

/// One call, as read from the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    pub command: Command,
    /// CNI_CONTAINERID (empty for STATUS, GC, VERSION).
    pub container_id: String,
    /// CNI_NETNS: required by ADD and CHECK, optional for DEL.
    pub netns: Option<PathBuf>,
    /// CNI_IFNAME (empty for STATUS, GC, VERSION).
    pub ifname: String,
    /// CNI_ARGS, `K=V;K=V`.
    pub args: BTreeMap<String, String>,
    /// CNI_PATH, split on ':'.
    pub path: Vec<PathBuf>,
}

impl Invocation {
    /// Read the call from environment variables (`std::env::vars()` in a
    /// plugin). Errors carry code 4 and name the variable.
    pub fn from_env(vars: impl IntoIterator<Item = (String, String)>) -> Result<Self, CniError> {
        let vars: BTreeMap<String, String> = vars
            .into_iter()
            .filter(|(k, _)| k.starts_with("CNI_"))
            .collect();
        let get = |k: &str| vars.get(k).map(String::as_str).filter(|v| !v.is_empty());
        let bad = |msg: String| CniError::new(code::INVALID_ENV, msg);
        let command = match get("CNI_COMMAND") {
            None => return Err(bad("CNI_COMMAND is not set".into())),
            Some(c) => Command::parse(c).ok_or_else(|| {
                bad(format!(
                    "CNI_COMMAND {c:?} is not one of ADD, DEL, CHECK, STATUS, GC, VERSION"
                ))
            })?,
        };
        // CNI_PATH is optional for every command (the specification's
        // lists); Tartan calls no other plugin.
        let (needs_container, needs_netns) = match command {
            Command::Add | Command::Check => (true, true),
            Command::Del => (true, false),
            Command::Status | Command::Gc | Command::Version => (false, false),
        };
        let verb = format!("{command:?}").to_uppercase();
        let required = |k: &str, needed: bool| -> Result<String, CniError> {
            match get(k) {
                Some(v) => Ok(v.to_string()),
                None if needed => Err(bad(format!("{k} is not set; {verb} needs it"))),
                None => Ok(String::new()),
            }
        };
        let container_id = required("CNI_CONTAINERID", needs_container)?;
        if !container_id.is_empty() {
            check_container_id(&container_id)?;
        }
        let ifname = required("CNI_IFNAME", needs_container)?;
        if !ifname.is_empty() {
            check_ifname(&ifname)?;
        }
        let netns = required("CNI_NETNS", needs_netns)?;
        let path = required("CNI_PATH", false)?;
        Ok(Invocation {
            command,
            container_id,
            netns: (!netns.is_empty()).then(|| PathBuf::from(netns)),
            ifname,
            args: parse_args(get("CNI_ARGS").unwrap_or(""))?,
            path: path
                .split(':')
                .filter(|p| !p.is_empty())
                .map(PathBuf::from)
                .collect(),
        })
    }

    /// The pod's namespace and name from CNI_ARGS, as a kubelet passes them.
    pub fn pod(&self) -> Option<(&str, &str)> {
        let ns = self.args.get("K8S_POD_NAMESPACE")?;
        let name = self.args.get("K8S_POD_NAME")?;
        Some((ns.as_str(), name.as_str()))
    }
}

/// The spec: a container ID is non-empty and made of letters, digits,
/// `_`, `.` and `-`, starting with a letter or digit.
fn check_container_id(id: &str) -> Result<(), CniError> {
    if super::is_cni_name(id) {
        Ok(())
    } else {
        Err(CniError::new(
            code::INVALID_ENV,
            format!("CNI_CONTAINERID {id:?} has characters other than letters, digits, _ . -"),
        ))
    }
}

/// The kernel's rules for an interface name.
fn check_ifname(name: &str) -> Result<(), CniError> {
    let why = if name.len() > 15 {
        Some("is longer than 15 bytes")
    } else if name == "." || name == ".." {
        Some("is . or ..")
    } else if name
        .chars()
        .any(|c| c == '/' || c == ':' || c.is_whitespace())
    {
        Some("contains '/', ':' or whitespace")
    } else {
        None
    };
    match why {
        Some(w) => Err(CniError::new(
            code::INVALID_ENV,
            format!("CNI_IFNAME {name:?} {w}"),
        )),
        None => Ok(()),
    }
}

/// `K=V;K=V`; an entry without `=` is an error (code 4).
fn parse_args(s: &str) -> Result<BTreeMap<String, String>, CniError> {
    let mut out = BTreeMap::new();
    for pair in s.split(';').filter(|p| !p.is_empty()) {
        let Some((k, v)) = pair.split_once('=') else {
            return Err(CniError::new(
                code::INVALID_ENV,
                format!("CNI_ARGS entry {pair:?} is not KEY=VALUE"),
            ));
        };
        out.insert(k.to_string(), v.to_string());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    const ADD: &[(&str, &str)] = &[
        ("CNI_COMMAND", "ADD"),
        ("CNI_CONTAINERID", "abc123"),
        ("CNI_NETNS", "/run/netns/x"),
        ("CNI_IFNAME", "eth0"),
        ("CNI_PATH", "/opt/cni/bin:/usr/lib/cni"),
        (
            "CNI_ARGS",
            "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p",
        ),
        ("HOME", "/root"),
    ];

    #[test]
    fn a_full_add() {
        let i = Invocation::from_env(env(ADD)).unwrap();
        assert_eq!(i.command, Command::Add);
        assert_eq!(
            i.netns.as_deref(),
            Some(std::path::Path::new("/run/netns/x"))
        );
        assert_eq!(i.path.len(), 2);
        assert_eq!(i.pod(), Some(("ns", "p")));
    }

    #[test]
    fn each_missing_variable_is_named() {
        for missing in ["CNI_COMMAND", "CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME"] {
            let vars: Vec<_> = env(ADD).into_iter().filter(|(k, _)| k != missing).collect();
            let e = Invocation::from_env(vars).unwrap_err();
            assert_eq!(e.code, 4, "{missing}");
            assert!(e.msg.starts_with(missing), "{missing}: {}", e.msg);
        }
        // CNI_PATH is optional (Tartan calls no other plugin).
        let vars: Vec<_> = env(ADD)
            .into_iter()
            .filter(|(k, _)| k != "CNI_PATH")
            .collect();
        assert!(Invocation::from_env(vars).unwrap().path.is_empty());
    }

    #[test]
    fn del_without_netns_and_version_alone() {
        let vars: Vec<_> = env(ADD)
            .into_iter()
            .filter(|(k, _)| k != "CNI_NETNS")
            .map(|(k, v)| {
                if k == "CNI_COMMAND" {
                    (k, "DEL".into())
                } else {
                    (k, v)
                }
            })
            .collect();
        let i = Invocation::from_env(vars).unwrap();
        assert_eq!(i.netns, None);
        let v = Invocation::from_env(env(&[("CNI_COMMAND", "VERSION")])).unwrap();
        assert_eq!(v.command, Command::Version);
    }

    #[test]
    fn bad_values() {
        let with = |k: &str, v: &str| {
            let vars: Vec<_> = env(ADD)
                .into_iter()
                .map(|(a, b)| if a == k { (a, v.to_string()) } else { (a, b) })
                .collect();
            Invocation::from_env(vars)
        };
        assert_eq!(with("CNI_COMMAND", "ATTACH").unwrap_err().code, 4);
        assert_eq!(with("CNI_CONTAINERID", "a/b").unwrap_err().code, 4);
        assert_eq!(with("CNI_IFNAME", "a-very-long-name0").unwrap_err().code, 4);
        assert_eq!(with("CNI_IFNAME", "et h0").unwrap_err().code, 4);
        assert_eq!(with("CNI_ARGS", "K8S_POD_NAME").unwrap_err().code, 4);
    }
}
