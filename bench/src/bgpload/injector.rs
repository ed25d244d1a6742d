//! An injector: connects from its namespace to the device, completes the
//! handshake with its UPDATEs already encoded, and writes them all on the
//! go signal.
use super::counter::Counter;
use super::peer::Peer;
use super::prefixes::{PrefixPlan, encode_updates};
use super::speaker::{SpeakerId, establish};
use anyhow::Result;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tartan_lab::netns::Netns;

/// Settings of one injector.
#[derive(Debug, Clone)]
pub struct Injector {
    /// Its index: it announces the plan's prefixes for `index`.
    pub index: u32,
    pub plan: PrefixPlan,
    pub asn: u32,
    /// Its own address (router id and NEXT_HOP).
    pub address: Ipv4Addr,
    /// The device's address on the injector's link.
    pub device: Ipv4Addr,
    pub per_update: usize,
    pub hold_time: u16,
}

impl Injector {
    /// Starts the injector in `ns`. What the device sends back is counted
    /// in the returned peer's counter.
    pub fn start(&self, ns: Arc<Netns>, timeout: Duration) -> Result<Peer> {
        let me = self.clone();
        let received = Arc::new(Counter::new(self.plan, u64::MAX));
        Peer::spawn(&format!("inj{}", self.index), received, move || {
            let (payload, _) =
                encode_updates(&me.plan, me.index, me.asn, me.address, me.per_update)?;
            ns.enter_current_thread()?;
            let id = SpeakerId {
                asn: me.asn,
                router_id: me.address,
                hold_time: me.hold_time,
            };
            Ok((
                establish(SocketAddr::from((me.device, 179)), &id, timeout)?,
                payload,
            ))
        })
    }
}
