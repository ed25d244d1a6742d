//! Connection collisions (RFC 4271 6.8) between the connections to one
//! neighbor that run the OPEN exchange at the same time. Each connection
//! takes a seat on the neighbor's board; when its OPEN is accepted it looks
//! for a connection the other way round that is in OpenConfirm, and one of
//! the two loses at once (Cease / Connection Collision Resolution, RFC
//! 4486). Once a connection is handed on as the session, every other one
//! loses.
//!
//! A board can also stand behind an Established session, for the peer's new
//! connections that may replace it (RFC 4724 4.2): it tells when one of
//! them has had the peer's OPEN accepted, and until it is brought forward
//! its connections leave the neighbor's state alone.
//!
//! When the neighbor is stopped, the board tells every connection still in
//! its OPEN exchange to close with the stop's NOTIFICATION (RFC 4271
//! 8.2.2, ManualStop in OpenSent and OpenConfirm).
use super::fsm::{LocalParams, keep_incoming};
use crate::wire::Notification;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::{Notify, watch};

/// The board of one neighbor's attempts (cheap to clone, shared).
#[derive(Clone, Default)]
pub struct Collisions(Arc<Shared>);

struct Shared {
    board: Mutex<Board>,
    /// Told each time a connection's OPEN is accepted.
    opened: Notify,
    /// The neighbor was stopped: the NOTIFICATION for every connection.
    stop: watch::Sender<Option<Notification>>,
}

impl Default for Shared {
    fn default() -> Self {
        Shared {
            board: Mutex::default(),
            opened: Notify::new(),
            stop: watch::Sender::new(None),
        }
    }
}

#[derive(Default)]
struct Board {
    next_key: u64,
    /// A connection was handed on: any other loses, also one seated later.
    settled: bool,
    /// An Established session runs in front of these connections.
    behind_session: bool,
    seats: Vec<Slot>,
}

struct Slot {
    key: u64,
    incoming: bool,
    /// Its OPEN was accepted (OpenConfirm or later).
    confirmed: bool,
    lost: watch::Sender<bool>,
}

/// One connection's seat; it leaves the board when dropped.
pub struct Seat {
    board: Collisions,
    key: u64,
    incoming: bool,
    lost: watch::Receiver<bool>,
    stop: watch::Receiver<Option<Notification>>,
}

impl Collisions {
    fn lock(&self) -> MutexGuard<'_, Board> {
        self.0.board.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A board for connections that run behind an Established session.
    pub fn behind_session() -> Collisions {
        let c = Collisions::default();
        c.lock().behind_session = true;
        c
    }

    /// The session in front is gone: these connections are the neighbor's.
    pub fn bring_forward(&self) {
        self.lock().behind_session = false;
    }

    /// Resolves when a connection's OPEN has been accepted (at once if one
    /// was since the last call).
    pub async fn opened(&self) {
        self.0.opened.notified().await
    }

    /// A seat for a new connection; `incoming`: the peer opened it.
    pub fn join(&self, incoming: bool) -> Seat {
        let mut b = self.lock();
        let key = b.next_key;
        b.next_key += 1;
        let (tx, rx) = watch::channel(b.settled);
        b.seats.push(Slot {
            key,
            incoming,
            confirmed: false,
            lost: tx,
        });
        Seat {
            board: self.clone(),
            key,
            incoming,
            lost: rx,
            stop: self.0.stop.subscribe(),
        }
    }

    /// The neighbor is stopped: every connection on the board, also one
    /// seated later, closes with `n` (after its OPEN went out; before, it
    /// just closes).
    pub fn stop(&self, n: Notification) {
        self.0.stop.send_replace(Some(n));
    }

    /// A connection is the session now: every other one loses.
    pub fn settle(&self) {
        let mut b = self.lock();
        b.settled = true;
        for s in &b.seats {
            s.lost.send_replace(true);
        }
    }
}

impl Seat {
    /// This connection lost and is to be closed.
    pub fn is_lost(&self) -> bool {
        *self.lost.borrow()
    }

    /// Whether this connection's state is the neighbor's: it has not lost,
    /// and no Established session runs in front of it.
    pub fn shows_state(&self) -> bool {
        !self.is_lost() && !self.board.lock().behind_session
    }

    /// This connection becomes the session, unless it lost or another one
    /// already did: decided under the board's lock, so that two
    /// connections never both become it. Every other connection loses.
    pub fn claim(&self) -> bool {
        let mut b = self.board.lock();
        if b.settled || self.is_lost() {
            return false;
        }
        b.settled = true;
        for s in b.seats.iter().filter(|s| s.key != self.key) {
            s.lost.send_replace(true);
        }
        true
    }

    /// The NOTIFICATION to close with, once the neighbor is stopped.
    pub fn stopped_with(&self) -> Option<Notification> {
        self.stop.borrow().clone()
    }

    /// Resolves, with the NOTIFICATION to close with, when the neighbor is
    /// stopped.
    pub async fn stopped(&self) -> Notification {
        let mut rx = self.stop.clone();
        let n = rx.wait_for(|s| s.is_some()).await.map(|n| n.clone());
        match n {
            Ok(n) => n.unwrap_or_else(Notification::administrative_shutdown),
            Err(_) => std::future::pending().await,
        }
    }

    /// Resolves when this connection loses.
    pub async fn lost(&self) {
        let mut rx = self.lost.clone();
        let failed = rx.wait_for(|l| *l).await.is_err();
        if failed {
            std::future::pending::<()>().await;
        }
    }

    /// This connection accepted the peer's OPEN (RFC 4271 6.8): against a
    /// connection the other way round that is in OpenConfirm, the BGP
    /// identifiers decide which one stays. True: this one lost; else the
    /// other one (if any) has been told it lost.
    pub fn open_accepted(&self, local: &LocalParams, peer_id: Ipv4Addr, peer_asn: u32) -> bool {
        let mut b = self.board.lock();
        if b.settled {
            return true;
        }
        let rival = |s: &Slot| s.confirmed && s.incoming != self.incoming;
        if b.seats.iter().any(rival) {
            let keep_in = keep_incoming(local.router_id, local.asn, peer_id, peer_asn);
            if keep_in != self.incoming {
                return true;
            }
            for s in b.seats.iter_mut().filter(|s| rival(s)) {
                s.confirmed = false;
                s.lost.send_replace(true);
            }
        }
        if let Some(s) = b.seats.iter_mut().find(|s| s.key == self.key) {
            s.confirmed = true;
        }
        drop(b);
        self.board.0.opened.notify_one();
        false
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        self.board.lock().seats.retain(|s| s.key != self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Family;

    fn local(router_id: [u8; 4]) -> LocalParams {
        LocalParams {
            asn: 65000,
            router_id: router_id.into(),
            hold_time: 90,
            families: vec![Family::Ipv4Unicast],
            peer_asn: 65001,
            graceful_restart: None,
            restarting: Default::default(),
            forwarding_preserved: false,
            installs_routes: false,
        }
    }

    const PEER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    #[test]
    fn the_higher_identifiers_connection_stays_when_the_second_open_arrives() {
        // The peer's identifier is higher: its connection (ours incoming) stays.
        let l = local([10, 0, 0, 1]);
        let board = Collisions::default();
        let (out, inc) = (board.join(false), board.join(true));
        assert!(!out.open_accepted(&l, PEER, 65001));
        assert!(!out.is_lost());
        assert!(!inc.open_accepted(&l, PEER, 65001));
        assert!(out.is_lost() && !inc.is_lost());
        // The other way round, the connection whose OPEN came second loses.
        let l = local([10, 0, 0, 9]);
        let board = Collisions::default();
        let (out, inc) = (board.join(false), board.join(true));
        assert!(!out.open_accepted(&l, PEER, 65001));
        assert!(inc.open_accepted(&l, PEER, 65001));
        assert!(!out.is_lost());
    }

    #[test]
    fn no_collision_before_the_other_open_or_the_same_way_round() {
        let l = local([10, 0, 0, 1]);
        let board = Collisions::default();
        let (a, b, _c) = (board.join(true), board.join(true), board.join(false));
        assert!(!a.open_accepted(&l, PEER, 65001));
        assert!(!b.open_accepted(&l, PEER, 65001));
        assert!(!a.is_lost() && !b.is_lost());
    }

    #[test]
    fn only_one_connection_claims_the_session() {
        let board = Collisions::default();
        let (a, b) = (board.join(true), board.join(false));
        assert!(a.claim());
        assert!(b.is_lost() && !b.claim());
        // A connection marked lost cannot claim it either.
        let board = Collisions::default();
        let (out, inc) = (board.join(false), board.join(true));
        let l = local([10, 0, 0, 1]);
        assert!(!out.open_accepted(&l, PEER, 65001));
        assert!(!inc.open_accepted(&l, PEER, 65001));
        assert!(!out.claim(), "lost to the incoming connection");
        assert!(inc.claim());
    }

    #[tokio::test]
    async fn a_board_behind_a_session_tells_when_an_open_is_accepted() {
        let board = Collisions::behind_session();
        let seat = board.join(true);
        assert!(!seat.shows_state(), "the session's state is shown");
        assert!(!seat.open_accepted(&local([10, 0, 0, 1]), PEER, 65001));
        let told = tokio::time::timeout(std::time::Duration::from_secs(1), board.opened());
        told.await.expect("the accepted OPEN is told");
        board.bring_forward();
        assert!(seat.shows_state());
    }

    #[test]
    fn a_settled_board_turns_every_other_connection_away() {
        let board = Collisions::default();
        let waiting = board.join(true);
        board.settle();
        assert!(waiting.is_lost());
        assert!(board.join(false).is_lost());
        assert!(
            board
                .join(true)
                .open_accepted(&local([10, 0, 0, 1]), PEER, 65001)
        );
    }
}
