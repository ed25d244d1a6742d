//! Another node's endpoint as felix keeps it: 32 bytes beside its key, for
//! the 150,000 endpoints of a 5,000-node cluster. What selection reads of
//! it (its labels, its endpoint's own copy of them, its named ports) is
//! one shared [`Look`], the same for every pod of a workload; its node's
//! name is shared by that node's endpoints; one IPv4 address, the usual
//! case, is kept in place. Pure.

use std::hash::{Hash, Hasher};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use tartan_policy::compile::NamedPort;

use super::state::Labels;

/// What selects an endpoint. Its parts are interned, so looks are equal
/// when their parts are the same values (compared by address).
#[derive(Debug)]
pub struct Look {
    /// Its Pod's labels when the Pod is seen, else `own`.
    pub labels: Arc<Labels>,
    /// The labels the CNI plugin copied onto the endpoint at ADD.
    pub own: Arc<Labels>,
    pub ports: Arc<[NamedPort]>,
}

impl Look {
    fn parts(&self) -> [*const (); 3] {
        [
            Arc::as_ptr(&self.labels) as *const (),
            Arc::as_ptr(&self.own) as *const (),
            Arc::as_ptr(&self.ports) as *const (),
        ]
    }
}

impl PartialEq for Look {
    fn eq(&self, o: &Self) -> bool {
        self.parts() == o.parts()
    }
}

impl Eq for Look {}

impl Hash for Look {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.parts().hash(h)
    }
}

/// An endpoint's addresses: one IPv4 address in place, anything else (none,
/// IPv6, several) behind one thin pointer.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Addrs {
    V4(Ipv4Addr),
    // Boxed for a thin pointer: a bare Vec would make every endpoint 40
    // bytes for the rare one that needs it.
    #[allow(clippy::box_collection)]
    Other(Box<Vec<IpAddr>>),
}

/// An endpoint on another node.
#[derive(Debug, Clone)]
pub struct Remote {
    look: Arc<Look>,
    /// Its node's name (a thin pointer: `Arc<str>` would take two words).
    node: Arc<Box<str>>,
    addrs: Addrs,
}

impl PartialEq for Remote {
    fn eq(&self, o: &Self) -> bool {
        Arc::ptr_eq(&self.look, &o.look)
            && Arc::ptr_eq(&self.node, &o.node)
            && self.addrs == o.addrs
    }
}

impl Eq for Remote {}

impl Remote {
    pub(super) fn new(look: Arc<Look>, node: Arc<Box<str>>, addrs: Vec<IpAddr>) -> Remote {
        let addrs = match addrs[..] {
            [IpAddr::V4(a)] => Addrs::V4(a),
            _ => Addrs::Other(Box::new(addrs)),
        };
        Remote { look, node, addrs }
    }

    pub fn node(&self) -> &str {
        &self.node
    }

    /// Its addresses, in the order the endpoint lists them.
    pub fn addrs(&self) -> impl Iterator<Item = IpAddr> + '_ {
        let (one, rest) = match &self.addrs {
            Addrs::V4(a) => (Some(IpAddr::V4(*a)), &[][..]),
            Addrs::Other(v) => (None, &v[..]),
        };
        one.into_iter().chain(rest.iter().copied())
    }

    pub fn has_addrs(&self) -> bool {
        match &self.addrs {
            Addrs::V4(_) => true,
            Addrs::Other(v) => !v.is_empty(),
        }
    }

    pub fn look(&self) -> &Arc<Look> {
        &self.look
    }

    /// The labels it is selected by.
    pub fn labels(&self) -> &Arc<Labels> {
        &self.look.labels
    }

    /// Its parts, to hand back to their interners.
    pub(super) fn into_parts(self) -> (Arc<Look>, Arc<Box<str>>) {
        (self.look, self.node)
    }

    /// The same endpoint with another look.
    pub(super) fn with_look(&self, look: Arc<Look>) -> Remote {
        Remote {
            look,
            node: self.node.clone(),
            addrs: self.addrs.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote(addrs: &[&str]) -> Remote {
        let look = Arc::new(Look {
            labels: Arc::default(),
            own: Arc::default(),
            ports: Arc::from(Vec::new()),
        });
        let addrs = addrs.iter().map(|a| a.parse().unwrap()).collect();
        Remote::new(look, Arc::new("n1".into()), addrs)
    }

    #[test]
    fn an_endpoint_is_four_words_and_gives_its_addresses_back_in_order() {
        assert_eq!(std::mem::size_of::<Remote>(), 32);
        for addrs in [
            &["10.0.0.1"][..],
            &[],
            &["fd00::1"],
            &["10.0.0.1", "fd00::1"],
            &["fd00::1", "10.0.0.1"],
        ] {
            let r = remote(addrs);
            let back: Vec<String> = r.addrs().map(|a| a.to_string()).collect();
            assert_eq!(back, addrs, "{addrs:?}");
            assert_eq!(r.has_addrs(), !addrs.is_empty());
        }
        let r = remote(&["10.0.0.1"]);
        assert_eq!(r, r.clone());
        assert_ne!(r, remote(&["10.0.0.1"]), "another look is another endpoint");
        assert_eq!(remote(&["10.0.0.1"]).node(), "n1");
    }
}
