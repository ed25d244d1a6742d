//! The benchmark's namespaces: the device in the middle, each injector and
//! the sink in one of their own, each joined to the device by its own veth
//! (injector i on 10.1.i.0/24, the sink on 10.2.0.0/24; the device is .1,
//! the peer .2).
use anyhow::{Result, bail};
use std::net::Ipv4Addr;
use std::sync::Arc;
use tartan_lab::netns::{Netns, veth};

/// The device's AS, the sink's, and the first injector's (the next ones
/// count up).
pub const DEVICE_AS: u32 = 64512;
pub const SINK_AS: u32 = 64999;
pub const FIRST_INJECTOR_AS: u32 = 65001;

/// The namespaces; dropping the last handle on each removes it.
#[derive(Debug)]
pub struct Topology {
    pub device: Arc<Netns>,
    pub injectors: Vec<Arc<Netns>>,
    pub sink: Arc<Netns>,
}

impl Topology {
    pub fn new(peers: u32) -> Result<Topology> {
        if peers == 0 || peers > 250 {
            bail!("between 1 and 250 injectors, not {peers}");
        }
        let device = Arc::new(Netns::new("bgd")?);
        let sink = Arc::new(Netns::new("bgs")?);
        let cidr = |a: Ipv4Addr| format!("{a}/24");
        veth(
            &device,
            &[&cidr(Topology::device_sink_side())],
            &sink,
            &[&cidr(Topology::sink_addr())],
        )?;
        let mut injectors = Vec::new();
        for i in 0..peers {
            let ns = Arc::new(Netns::new("bgi")?);
            veth(
                &device,
                &[&cidr(Topology::device_injector_side(i))],
                &ns,
                &[&cidr(Topology::injector_addr(i))],
            )?;
            injectors.push(ns);
        }
        Ok(Topology {
            device,
            injectors,
            sink,
        })
    }

    pub fn peers(&self) -> u32 {
        self.injectors.len() as u32
    }

    pub fn injector_addr(i: u32) -> Ipv4Addr {
        Ipv4Addr::new(10, 1, i as u8, 2)
    }

    pub fn device_injector_side(i: u32) -> Ipv4Addr {
        Ipv4Addr::new(10, 1, i as u8, 1)
    }

    pub fn injector_as(i: u32) -> u32 {
        FIRST_INJECTOR_AS + i
    }

    pub fn sink_addr() -> Ipv4Addr {
        Ipv4Addr::new(10, 2, 0, 2)
    }

    /// The device's address towards the sink, also its router id.
    pub fn device_sink_side() -> Ipv4Addr {
        Ipv4Addr::new(10, 2, 0, 1)
    }
}
