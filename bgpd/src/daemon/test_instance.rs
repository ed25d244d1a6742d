//! For tests: the whole instance, run on a configuration text.
use super::{ControlHandle, Daemon, DaemonOptions};
use crate::control::Metrics;
use std::sync::Arc;
use tokio::sync::oneshot;

/// A free port on 127.0.0.1 for the instance to listen on.
pub(super) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts the instance on `text` and runs it until the sender returned is
/// used or dropped. `restarting`: as after a restart with our routes of
/// the previous run found in the kernel.
pub(super) async fn run(text: &str, restarting: bool) -> (ControlHandle, oneshot::Sender<()>) {
    let config = crate::config::parse("t", text).unwrap();
    let options = DaemonOptions {
        config_path: Default::default(),
        metrics: Arc::new(Metrics::new()),
        shutdown_drain: None,
        bfd: Default::default(),
    };
    let (daemon, control) = if restarting {
        Daemon::start_restarting(config, options).await
    } else {
        Daemon::start(config, options).await
    }
    .unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(daemon.run(async {
        let _ = stopped.await;
    }));
    (control, stop)
}
