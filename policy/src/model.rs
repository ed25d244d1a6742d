//! The policy model every source (Kubernetes NetworkPolicy, Tartan's
//! policies) is converted to, and that the dataplane compiles. Pure data.

use ipnet::IpNet;

use crate::Selector;

/// What a matching rule does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Allow,
    Deny,
    /// Skip the rest of this tier's policies.
    Pass,
    /// Record the packet and go on.
    Log,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Protocol {
    Tcp,
    Udp,
    Sctp,
}

/// Which ports of a protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortSel {
    /// Every port.
    Any,
    /// `first..=last`.
    Range(u16, u16),
    /// A container port by name, resolved per destination pod.
    Named(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortMatch {
    pub protocol: Protocol,
    pub ports: PortSel,
}

/// Which namespaces a pod peer may be in.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Namespaces {
    /// Exactly this one (the policy's own).
    Named(String),
    /// Those whose labels match.
    Selected(Selector),
}

/// The other end of a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peer {
    /// Pods whose labels match `pods`, in namespaces `namespaces`.
    Pods {
        namespaces: Namespaces,
        pods: Selector,
    },
    /// Addresses in `cidr` and in none of `except`.
    Net { cidr: IpNet, except: Vec<IpNet> },
}

/// One rule: it matches when the peer is one of `peers` (empty: any
/// peer) and the port one of `ports` (empty: any protocol and port).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub action: Action,
    pub peers: Vec<Peer>,
    pub ports: Vec<PortMatch>,
}

/// A policy: the pods it applies to, and for each direction it governs,
/// its rules in order. A governed direction is default-deny for the
/// selected pods: what no policy allows is dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// `namespace/name` for namespaced policies, `name` for global ones.
    pub name: String,
    pub applies_to: Peer,
    /// `Some`: the policy governs incoming traffic of the selected pods.
    pub ingress: Option<Vec<Rule>>,
    /// `Some`: the policy governs their outgoing traffic.
    pub egress: Option<Vec<Rule>>,
}

/// A field of a source object that cannot be converted, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyProblem {
    pub field: String,
    pub message: String,
}
