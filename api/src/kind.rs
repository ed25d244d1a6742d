//! The kinds Tartan stores and reads, and what each is called in every place
//! it appears: the Kubernetes API (group, version, plural), etcd keys and the
//! command line.

use std::fmt;

use kube::core::ApiResource;

/// Every kind of object the datastore holds. Tartan's own kinds live in the
/// `tartan.dev/v1` group; the rest are Kubernetes kinds Tartan reads (and,
/// on an etcd-backed fleet, stores in the same shape).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    IpPool,
    IpReservation,
    BgpConfiguration,
    BgpPeer,
    BgpFilter,
    /// Tartan's namespaced policy (`tartan.dev/v1` NetworkPolicy).
    NetworkPolicy,
    GlobalNetworkPolicy,
    /// Labelled networks that policy rules of one namespace select.
    NetworkSet,
    /// Labelled networks that policy rules of any namespace select.
    GlobalNetworkSet,
    /// A node's interface that GlobalNetworkPolicies protect.
    HostEndpoint,
    IpamBlock,
    IpamHandle,
    BlockAffinity,
    WorkloadEndpoint,
    /// One node's BGP sessions as its bgpd reports them.
    BgpNodeStatus,
    /// Addresses for LoadBalancer Services (tartan-controllers).
    LoadBalancerIpPool,
    /// Which members of a Service range are handed out (a bitmap).
    RangeAllocation,
    Node,
    Namespace,
    Pod,
    Service,
    EndpointSlice,
    /// Kubernetes Secrets: BGP passwords (in Tartan's namespace).
    Secret,
    /// Kubernetes' own `networking.k8s.io/v1` NetworkPolicy.
    KubeNetworkPolicy,
    /// `coordination.k8s.io/v1` Lease: tartan-controllers' leader election.
    Lease,
    /// Kubernetes ConfigMaps: the install's settings (`tartan-system/tartan-config`).
    ConfigMap,
    /// Kubernetes ServiceAccounts: their labels, which policies select
    /// with Calico's `serviceAccountSelector` and `serviceAccounts`.
    ServiceAccount,
}

/// The fixed facts about one kind.
#[derive(Debug)]
pub struct KindInfo {
    pub kind: Kind,
    /// The `kind:` field, e.g. `IPPool`.
    pub name: &'static str,
    /// API group; empty for the Kubernetes core group.
    pub group: &'static str,
    pub version: &'static str,
    /// Lower-case plural used in API paths, e.g. `ippools`.
    pub plural: &'static str,
    pub namespaced: bool,
    /// The segment of etcd keys: `/tartan/<key_segment>/[<namespace>/]<name>`.
    pub key_segment: &'static str,
    /// Extra names accepted on the command line besides kind and plural.
    pub short_names: &'static [&'static str],
}

pub const TARTAN_GROUP: &str = "tartan.dev";
pub const TARTAN_VERSION: &str = "v1";

macro_rules! tartan_kind {
    ($kind:ident, $name:literal, $plural:literal, $namespaced:literal, $segment:literal, [$($short:literal),*]) => {
        KindInfo {
            kind: Kind::$kind,
            name: $name,
            group: TARTAN_GROUP,
            version: TARTAN_VERSION,
            plural: $plural,
            namespaced: $namespaced,
            key_segment: $segment,
            short_names: &[$($short),*],
        }
    };
}

static KINDS: [KindInfo; 27] = [
    tartan_kind!(
        IpPool,
        "IPPool",
        "ippools",
        false,
        "ippools",
        ["pool", "pools"]
    ),
    tartan_kind!(
        IpReservation,
        "IPReservation",
        "ipreservations",
        false,
        "ipreservations",
        []
    ),
    tartan_kind!(
        BgpConfiguration,
        "BGPConfiguration",
        "bgpconfigurations",
        false,
        "bgpconfigurations",
        ["bgpconfig"]
    ),
    tartan_kind!(BgpPeer, "BGPPeer", "bgppeers", false, "bgppeers", []),
    tartan_kind!(
        BgpFilter,
        "BGPFilter",
        "bgpfilters",
        false,
        "bgpfilters",
        []
    ),
    tartan_kind!(
        NetworkPolicy,
        "NetworkPolicy",
        "networkpolicies",
        true,
        "networkpolicies",
        ["tnp"]
    ),
    tartan_kind!(
        GlobalNetworkPolicy,
        "GlobalNetworkPolicy",
        "globalnetworkpolicies",
        false,
        "globalnetworkpolicies",
        ["gnp"]
    ),
    tartan_kind!(
        NetworkSet,
        "NetworkSet",
        "networksets",
        true,
        "networksets",
        ["netset", "netsets"]
    ),
    tartan_kind!(
        GlobalNetworkSet,
        "GlobalNetworkSet",
        "globalnetworksets",
        false,
        "globalnetworksets",
        ["gns"]
    ),
    tartan_kind!(
        HostEndpoint,
        "HostEndpoint",
        "hostendpoints",
        false,
        "hostendpoints",
        ["hep", "heps"]
    ),
    tartan_kind!(
        IpamBlock,
        "IPAMBlock",
        "ipamblocks",
        false,
        "ipamblocks",
        ["block", "blocks"]
    ),
    tartan_kind!(
        IpamHandle,
        "IPAMHandle",
        "ipamhandles",
        false,
        "ipamhandles",
        ["handle", "handles"]
    ),
    tartan_kind!(
        BlockAffinity,
        "BlockAffinity",
        "blockaffinities",
        false,
        "blockaffinities",
        ["affinity", "affinities"]
    ),
    tartan_kind!(
        WorkloadEndpoint,
        "WorkloadEndpoint",
        "workloadendpoints",
        true,
        "workloadendpoints",
        ["wep", "weps"]
    ),
    tartan_kind!(
        BgpNodeStatus,
        "BGPNodeStatus",
        "bgpnodestatuses",
        false,
        "bgpnodestatuses",
        ["nodestatus"]
    ),
    tartan_kind!(
        LoadBalancerIpPool,
        "LoadBalancerIPPool",
        "loadbalancerippools",
        false,
        "loadbalancerippools",
        ["lbpool", "lbpools"]
    ),
    tartan_kind!(
        RangeAllocation,
        "RangeAllocation",
        "rangeallocations",
        false,
        "rangeallocations",
        []
    ),
    KindInfo {
        kind: Kind::Node,
        name: "Node",
        group: "",
        version: "v1",
        plural: "nodes",
        namespaced: false,
        key_segment: "k8s/nodes",
        short_names: &["no"],
    },
    KindInfo {
        kind: Kind::Namespace,
        name: "Namespace",
        group: "",
        version: "v1",
        plural: "namespaces",
        namespaced: false,
        key_segment: "k8s/namespaces",
        short_names: &["ns"],
    },
    KindInfo {
        kind: Kind::Pod,
        name: "Pod",
        group: "",
        version: "v1",
        plural: "pods",
        namespaced: true,
        key_segment: "k8s/pods",
        short_names: &["po"],
    },
    KindInfo {
        kind: Kind::Service,
        name: "Service",
        group: "",
        version: "v1",
        plural: "services",
        namespaced: true,
        key_segment: "k8s/services",
        short_names: &["svc"],
    },
    KindInfo {
        kind: Kind::EndpointSlice,
        name: "EndpointSlice",
        group: "discovery.k8s.io",
        version: "v1",
        plural: "endpointslices",
        namespaced: true,
        key_segment: "k8s/endpointslices",
        short_names: &[],
    },
    KindInfo {
        kind: Kind::Secret,
        name: "Secret",
        group: "",
        version: "v1",
        plural: "secrets",
        namespaced: true,
        key_segment: "k8s/secrets",
        short_names: &[],
    },
    KindInfo {
        kind: Kind::KubeNetworkPolicy,
        name: "NetworkPolicy",
        group: "networking.k8s.io",
        version: "v1",
        plural: "networkpolicies",
        namespaced: true,
        key_segment: "k8s/networkpolicies",
        short_names: &["netpol"],
    },
    KindInfo {
        kind: Kind::Lease,
        name: "Lease",
        group: "coordination.k8s.io",
        version: "v1",
        plural: "leases",
        namespaced: true,
        key_segment: "k8s/leases",
        short_names: &[],
    },
    KindInfo {
        kind: Kind::ConfigMap,
        name: "ConfigMap",
        group: "",
        version: "v1",
        plural: "configmaps",
        namespaced: true,
        key_segment: "k8s/configmaps",
        short_names: &["cm"],
    },
    KindInfo {
        kind: Kind::ServiceAccount,
        name: "ServiceAccount",
        group: "",
        version: "v1",
        plural: "serviceaccounts",
        namespaced: true,
        key_segment: "k8s/serviceaccounts",
        short_names: &["sa"],
    },
];

impl Kind {
    pub fn all() -> impl Iterator<Item = Kind> {
        KINDS.iter().map(|k| k.kind)
    }

    /// Tartan's own kinds (group `tartan.dev`), the ones with CRDs.
    pub fn tartan() -> impl Iterator<Item = Kind> {
        KINDS
            .iter()
            .filter(|k| k.group == TARTAN_GROUP)
            .map(|k| k.kind)
    }

    pub fn info(self) -> &'static KindInfo {
        // The table is in enum order; the test below keeps it so.
        &KINDS[self as usize]
    }

    /// `apiVersion` as written in objects: `tartan.dev/v1`, `v1`, ...
    pub fn api_version(self) -> String {
        let i = self.info();
        if i.group.is_empty() {
            i.version.to_string()
        } else {
            format!("{}/{}", i.group, i.version)
        }
    }

    /// The kind named by an object's `apiVersion` and `kind`.
    pub fn from_type(api_version: &str, kind: &str) -> Option<Kind> {
        KINDS
            .iter()
            .find(|k| k.name == kind && k.kind.api_version() == api_version)
            .map(|k| k.kind)
    }

    /// The kind a person means on the command line: the kind (`IPPool`,
    /// `ippool`), its plural (`ippools`), a short name, or `plural.group`
    /// (`networkpolicies.networking.k8s.io`) where a name is ambiguous.
    /// A bare `networkpolicy` means Tartan's.
    pub fn from_cli(word: &str) -> Option<Kind> {
        let w = word.to_ascii_lowercase();
        if let Some((plural, group)) = w.split_once('.') {
            return KINDS
                .iter()
                .find(|k| {
                    k.group == group && (k.plural == plural || k.name.eq_ignore_ascii_case(plural))
                })
                .map(|k| k.kind);
        }
        KINDS
            .iter()
            .find(|k| {
                k.name.eq_ignore_ascii_case(&w)
                    || k.plural == w
                    || k.short_names.contains(&w.as_str())
            })
            .map(|k| k.kind)
    }

    /// The kube-rs description used by the Kubernetes backend.
    pub fn api_resource(self) -> ApiResource {
        let i = self.info();
        ApiResource {
            group: i.group.to_string(),
            version: i.version.to_string(),
            api_version: self.api_version(),
            kind: i.name.to_string(),
            plural: i.plural.to_string(),
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = self.info();
        if i.group.is_empty() || i.group == TARTAN_GROUP {
            f.write_str(i.name)
        } else {
            write!(f, "{}.{}", i.name, i.group)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_in_enum_order() {
        for (i, k) in KINDS.iter().enumerate() {
            assert_eq!(k.kind as usize, i, "{} out of order", k.name);
        }
    }

    #[test]
    fn names_resolve() {
        assert_eq!(Kind::from_cli("IPPool"), Some(Kind::IpPool));
        assert_eq!(Kind::from_cli("ippools"), Some(Kind::IpPool));
        assert_eq!(Kind::from_cli("gnp"), Some(Kind::GlobalNetworkPolicy));
        assert_eq!(Kind::from_cli("networkpolicy"), Some(Kind::NetworkPolicy));
        assert_eq!(
            Kind::from_cli("networkpolicies.networking.k8s.io"),
            Some(Kind::KubeNetworkPolicy)
        );
        assert_eq!(Kind::from_cli("nosuchkind"), None);
        assert_eq!(
            Kind::from_type("networking.k8s.io/v1", "NetworkPolicy"),
            Some(Kind::KubeNetworkPolicy)
        );
        assert_eq!(
            Kind::from_type("tartan.dev/v1", "NetworkPolicy"),
            Some(Kind::NetworkPolicy)
        );
        assert_eq!(Kind::from_type("v1", "IPPool"), None);
    }

    #[test]
    fn key_segments_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for k in &KINDS {
            assert!(seen.insert(k.key_segment), "{}", k.key_segment);
        }
    }
}
