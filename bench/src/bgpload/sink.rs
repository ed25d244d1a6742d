//! The sink (a speaker the device sends every route to, counting them) and
//! the pass-through receiver that stands in for a device when measuring
//! the generator itself.
use super::counter::Counter;
use super::peer::Peer;
use super::speaker::{SpeakerId, establish, handshake};
use anyhow::{Context, Result, anyhow};
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tartan_lab::netns::Netns;

/// Connects a sink from `ns` to the device at `device`.
pub struct Sink;

impl Sink {
    pub fn connect(
        ns: Arc<Netns>,
        id: SpeakerId,
        device: Ipv4Addr,
        counter: Arc<Counter>,
        timeout: Duration,
    ) -> Result<Peer> {
        Peer::spawn("sink", counter, move || {
            ns.enter_current_thread()?;
            Ok((
                establish(SocketAddr::from((device, 179)), &id, timeout)?,
                Vec::new(),
            ))
        })
    }
}

/// Accepts `peers` sessions on port 179 in `ns` and counts everything
/// they send into one counter: a device that does nothing.
pub struct PassThrough {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<Vec<Peer>>>>,
}

impl PassThrough {
    pub fn start(
        ns: Arc<Netns>,
        id: SpeakerId,
        peers: usize,
        counter: Arc<Counter>,
        timeout: Duration,
    ) -> Result<PassThrough> {
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let (bound_tx, bound) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || -> Result<Vec<Peer>> {
            let l = ns
                .enter_current_thread()
                .and_then(|_| Ok(TcpListener::bind(("0.0.0.0", 179))?));
            let l = match l {
                Ok(l) => {
                    let _ = bound_tx.send(Ok(()));
                    l
                }
                Err(e) => {
                    let _ = bound_tx.send(Err(anyhow!("{e:#}")));
                    return Err(e);
                }
            };
            l.set_nonblocking(true)?;
            let deadline = Instant::now() + timeout;
            let mut sessions = Vec::new();
            while sessions.len() < peers && !st.load(Ordering::Relaxed) && Instant::now() < deadline
            {
                match l.accept() {
                    Ok((s, _)) => {
                        s.set_nonblocking(false)?;
                        let peer = Peer::spawn("passthru", counter.clone(), move || {
                            Ok((handshake(s, &id, timeout)?, Vec::new()))
                        })?;
                        sessions.push(peer);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
            Ok(sessions)
        });
        bound
            .recv_timeout(timeout)
            .map_err(|_| anyhow!("pass-through receiver did not start"))?
            .context("pass-through receiver")?;
        Ok(PassThrough {
            stop,
            thread: Some(thread),
        })
    }

    /// The accepted sessions, once all have arrived (or the time is up).
    pub fn sessions(mut self) -> Result<Vec<Peer>> {
        match self.thread.take() {
            Some(t) => t.join().map_err(|_| anyhow!("pass-through panicked"))?,
            None => Ok(Vec::new()),
        }
    }
}

impl Drop for PassThrough {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
