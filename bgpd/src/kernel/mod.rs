//! Kernel route sync: installs the RIB's best routes into the kernel's main
//! routing table and removes them when they are withdrawn.
//!
//! # Ownership: route protocol 201
//!
//! Every route bgpd installs carries the route protocol number
//! [`RTPROT_TARTAN`] (201). The number is how bgpd recognises its own
//! routes, and the only routes it ever replaces or deletes are routes of
//! that protocol in the main table. iproute2 shows it by name when
//! `/etc/iproute2/rt_protos.d/tartan.conf` contains `201 tartan`;
//! `ip route show proto 201` works either way.
//!
//! - **Replace never overwrites a foreign route.** The kernel keys a route
//!   by (table, prefix, TOS, metric), not by protocol, so `NLM_F_REPLACE`
//!   would silently overwrite, say, a `proto static` route with the same
//!   key. bgpd therefore looks at what holds the key first; a route of
//!   another protocol makes it refuse ([`KernelError::Foreign`]), log a
//!   warning and skip the prefix. Routes of other protocols at a *different*
//!   metric are left alone and coexist (the kernel prefers the lower
//!   metric). bgpd installs at the kernel's default metric: 0 for IPv4,
//!   1024 for IPv6.
//! - **Delete only removes protocol 201.** The protocol is part of the
//!   delete request, which the kernel matches; an absent route is not an
//!   error.
//! - **ECMP** routes are installed as one multipath route (`RTA_MULTIPATH`).
//!   The order of next hops does not matter: they are kept sorted, and an
//!   unchanged set causes no kernel write.
//! - **Unreachable next hops.** Routes are installed as they are, with the
//!   gateway the RIB chose and never `onlink`. The kernel does not resolve
//!   gateways recursively: a gateway that is not on a connected subnet
//!   (typical for an iBGP next hop reached through another route) makes the
//!   kernel refuse the route with `ENETUNREACH`. bgpd logs that with the
//!   prefix and errno, counts it in [`KernelStats::failed`], removes any
//!   older Tartan route for the prefix (it no longer matches the RIB) and
//!   retries later; it never panics.
//! - **IPv6 link-local gateways** need the interface: [`Nexthop::ifindex`]
//!   must be set (the caller passes the ifindex of the session's
//!   interface). Other gateways may leave it `None`, which lets the kernel
//!   pick the device and makes [`diff`] accept any device for that hop.
//! - **Restart without a forwarding gap.** At start the daemon lists its
//!   routes left from the previous run ([`Kernel::list_own`]) and hands them
//!   to [`KernelSync::spawn`], which leaves them in place. Once the RIB has
//!   converged (End-of-RIB or a timeout, the caller decides),
//!   [`KernelSync::flush_stale`] deletes those that were not set again.
//!   Nothing is ever flushed blindly.
//!
//! [`Kernel`] is the direct netlink handle; [`KernelSync`] is the background
//! task the RIB feeds. Both work inside a network namespace when the socket
//! is opened on a thread that has entered it.
mod addresses;
mod diff;
mod error;
mod message;
mod netlink;
mod route;
mod sync;
mod sync_shared;
mod sync_task;

pub use diff::{Diff, diff};
pub use error::KernelError;
pub use netlink::Kernel;
pub use route::{KernelRoute, Nexthop};
pub use sync::{KernelStats, KernelSync, KernelSyncHandle};

/// The route protocol number (`rtm_protocol`) of routes installed by
/// Tartan. 201 is unassigned in the kernel's and iproute2's lists; name it
/// with `201 tartan` in `/etc/iproute2/rt_protos.d/tartan.conf`.
pub const RTPROT_TARTAN: u8 = 201;
