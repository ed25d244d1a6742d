//! `tartanctl node drain`: RFC 8326 graceful shutdown of this node's BGP
//! speaker over its control socket. bgpd re-advertises every route with
//! the GRACEFUL_SHUTDOWN community at once and closes every session after
//! the wait; this command waits with it (unless `--no-wait`).
use crate::bgp_client::BgpClient;
use crate::cli::{DrainArgs, GlobalArgs};
use crate::output;
use std::time::{Duration, Instant};
use tartan_api::bgp::DrainStatus;

/// How often the drain's progress is read while waiting.
const POLL: Duration = Duration::from_millis(250);

pub async fn run(global: &GlobalArgs, a: DrainArgs) -> anyhow::Result<()> {
    let client = BgpClient::new(&global.bgp_socket);
    let wait = a.wait;
    let status: DrainStatus = output::parse(&client.drain(wait.as_secs()).await?)?;
    if status.closed {
        println!("already drained: every session is closed");
        return Ok(());
    }
    println!(
        "draining: routes re-advertised with GRACEFUL_SHUTDOWN (65535:0); sessions close in {}s",
        status.close_in_seconds.unwrap_or(0)
    );
    if a.no_wait {
        return Ok(());
    }
    // bgpd closes on its own timer; allow it some slack before giving up.
    let give_up = Instant::now() + wait + Duration::from_secs(10);
    loop {
        tokio::time::sleep(POLL).await;
        let s: DrainStatus = output::parse(&client.drain_status().await?)?;
        if s.closed {
            println!("drained: every session closed (Cease, Administrative Shutdown)");
            return Ok(());
        }
        if Instant::now() > give_up {
            anyhow::bail!("tartan-bgpd has not closed its sessions after the wait");
        }
    }
}
