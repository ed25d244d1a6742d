//! A generator speaker on threads of its own: a control thread that sets
//! the session up, writes its pre-encoded UPDATEs on the go signal and
//! sends KEEPALIVEs, and a reader thread that counts what the peer sends.
use super::counter::Counter;
use super::speaker::{Established, keepalive, read_loop};
use anyhow::{Context, Result, anyhow};
use std::io::Write;
use std::net::{Shutdown, TcpStream};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

enum Ctl {
    Go,
    Stop,
}

/// What a speaker did.
#[derive(Debug, Clone, Default)]
pub struct PeerReport {
    /// Just before its first UPDATE was written.
    pub first_write: Option<Instant>,
    /// When the last byte was handed to TCP.
    pub written: Option<Instant>,
    pub bytes: usize,
    /// Why the read side ended (None: closed by us or cleanly).
    pub read_end: Option<String>,
}

/// A running speaker. Dropping it stops it and joins its threads.
#[derive(Debug)]
pub struct Peer {
    name: String,
    ctl: Sender<Ctl>,
    ready: Receiver<Result<()>>,
    thread: Option<JoinHandle<Result<PeerReport>>>,
    /// A handle on the socket, to unblock the threads when stopping.
    sock: Arc<Mutex<Option<TcpStream>>>,
    pub counter: Arc<Counter>,
}

impl Peer {
    /// Starts a speaker: `setup` (run on the new thread) connects and
    /// completes the handshake, returning the session and what to write on
    /// the go signal.
    pub fn spawn<F>(name: &str, counter: Arc<Counter>, setup: F) -> Result<Peer>
    where
        F: FnOnce() -> Result<(Established, Vec<u8>)> + Send + 'static,
    {
        let (ctl, ctl_rx) = channel();
        let (ready_tx, ready) = channel();
        let c = counter.clone();
        let sock = Arc::new(Mutex::new(None));
        let s = sock.clone();
        let thread = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || run(setup, c, s, ctl_rx, ready_tx))
            .context("spawn speaker thread")?;
        Ok(Peer {
            name: name.to_string(),
            ctl,
            ready,
            thread: Some(thread),
            sock,
            counter,
        })
    }

    /// Waits until the session is established.
    pub fn wait_ready(&self, timeout: Duration) -> Result<()> {
        match self.ready.recv_timeout(timeout) {
            Ok(r) => r.with_context(|| format!("{} failed to establish", self.name)),
            Err(_) => Err(anyhow!("{}: no session within {timeout:?}", self.name)),
        }
    }

    /// Releases the UPDATEs.
    pub fn go(&self) {
        let _ = self.ctl.send(Ctl::Go);
    }

    /// Stops the speaker (closing its session) and returns its report.
    pub fn finish(mut self) -> Result<PeerReport> {
        self.stop_join()
    }

    fn stop_join(&mut self) -> Result<PeerReport> {
        let _ = self.ctl.send(Ctl::Stop);
        if let Some(s) = self.sock.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            let _ = s.shutdown(Shutdown::Both);
        }
        match self.thread.take() {
            Some(t) => t.join().map_err(|_| anyhow!("{} panicked", self.name))?,
            None => Ok(PeerReport::default()),
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.stop_join();
    }
}

fn run<F>(
    setup: F,
    counter: Arc<Counter>,
    sock: Arc<Mutex<Option<TcpStream>>>,
    ctl: Receiver<Ctl>,
    ready: Sender<Result<()>>,
) -> Result<PeerReport>
where
    F: FnOnce() -> Result<(Established, Vec<u8>)>,
{
    let (est, payload) = match setup() {
        Ok(x) => x,
        Err(e) => {
            let msg = format!("{e:#}");
            let _ = ready.send(Err(e));
            return Err(anyhow!(msg));
        }
    };
    let every = est.keepalive_every().unwrap_or(Duration::from_secs(3600));
    let mut stream = est.stream;
    let rd = stream.try_clone()?;
    *sock.lock().unwrap_or_else(|e| e.into_inner()) = Some(stream.try_clone()?);
    let leftover = est.leftover;
    let c = counter.clone();
    let reader = std::thread::spawn(move || read_loop(rd, leftover, &c));
    let _ = ready.send(Ok(()));
    let mut report = PeerReport::default();
    let ka = keepalive();
    let mut released = false;
    loop {
        match ctl.recv_timeout(every) {
            Ok(Ctl::Go) if !released => {
                released = true;
                report.first_write = Some(Instant::now());
                let r = stream.write_all(&payload);
                report.written = Some(Instant::now());
                report.bytes = payload.len();
                if let Err(e) = r {
                    report.read_end = Some(format!("write: {e}"));
                    break;
                }
            }
            Ok(Ctl::Go) => {}
            Err(RecvTimeoutError::Timeout) => {
                if stream.write_all(&ka).is_err() {
                    break;
                }
            }
            Ok(Ctl::Stop) | Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    let _ = stream.shutdown(Shutdown::Both);
    let end = reader.join().map_err(|_| anyhow!("reader panicked"))?;
    report.read_end = report.read_end.or(end);
    Ok(report)
}
