//! For tests: the whole instance, run on a configuration text.
use super::{ControlHandle, Daemon, DaemonOptions};
use crate::config::Config;
use crate::control::Metrics;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

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
    run_with(text, restarting, Arc::new(Metrics::new())).await
}

/// [`run`], with the metrics the instance is to keep.
pub(super) async fn run_with(
    text: &str,
    restarting: bool,
    metrics: Arc<Metrics>,
) -> (ControlHandle, oneshot::Sender<()>) {
    let (control, stop, _) = run_updating(text, restarting, metrics).await;
    (control, stop)
}

/// [`run_with`], also returning where new configurations go (as from
/// the datastore).
pub(super) async fn run_updating(
    text: &str,
    restarting: bool,
    metrics: Arc<Metrics>,
) -> (ControlHandle, oneshot::Sender<()>, mpsc::Sender<Config>) {
    let config = crate::config::parse("t", text).unwrap();
    let options = DaemonOptions {
        config_path: Default::default(),
        metrics,
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
    let (updates, updates_rx) = mpsc::channel(4);
    let stopped = async {
        let _ = stopped.await;
    };
    tokio::spawn(daemon.run_with_updates(stopped, Some(updates_rx)));
    (control, stop, updates)
}
