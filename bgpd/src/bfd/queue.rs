//! A command queue towards a thread that sleeps in poll(2): a channel, and
//! a socket pair whose read end the thread polls. Every send rings the bell
//! (one byte); once every sender is gone the read end reports end of file,
//! so the thread learns that too without a timer.

use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::mpsc::{self, TryRecvError};

/// The sending side; cheap to clone.
pub struct QueueSender<T> {
    tx: mpsc::Sender<T>,
    bell: Option<Arc<UnixStream>>,
}

impl<T> Clone for QueueSender<T> {
    fn clone(&self) -> Self {
        QueueSender {
            tx: self.tx.clone(),
            bell: self.bell.clone(),
        }
    }
}

impl<T> QueueSender<T> {
    /// A sender whose messages nobody receives.
    pub fn detached() -> Self {
        let (tx, _) = mpsc::channel();
        QueueSender { tx, bell: None }
    }

    /// Queue `t` and wake the receiving thread. A full bell means a wakeup
    /// is already pending, so its write may fail without loss.
    pub fn send(&self, t: T) {
        if self.tx.send(t).is_ok()
            && let Some(bell) = &self.bell
        {
            let _ = (&**bell).write(&[1]);
        }
    }
}

/// The receiving side, for one thread.
pub struct QueueReceiver<T> {
    rx: mpsc::Receiver<T>,
    bell: UnixStream,
}

impl<T> QueueReceiver<T> {
    /// What to poll for readability.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.bell.as_fd()
    }

    /// Hand every queued message to `f`; false once every sender is gone
    /// (and nothing is left).
    pub fn drain(&self, mut f: impl FnMut(T)) -> bool {
        let mut b = [0u8; 64];
        while let Ok(n) = (&self.bell).read(&mut b) {
            if n == 0 {
                break;
            }
        }
        loop {
            match self.rx.try_recv() {
                Ok(t) => f(t),
                Err(TryRecvError::Empty) => return true,
                Err(TryRecvError::Disconnected) => return false,
            }
        }
    }
}

/// A new queue.
pub fn queue<T>() -> io::Result<(QueueSender<T>, QueueReceiver<T>)> {
    let (ring, bell) = UnixStream::pair()?;
    ring.set_nonblocking(true)?;
    bell.set_nonblocking(true)?;
    let (tx, rx) = mpsc::channel();
    Ok((
        QueueSender {
            tx,
            bell: Some(Arc::new(ring)),
        },
        QueueReceiver { rx, bell },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_arrive_in_order_and_the_end_is_seen() {
        let (tx, rx) = queue::<u32>().unwrap();
        let tx2 = tx.clone();
        tx.send(1);
        tx2.send(2);
        let mut got = Vec::new();
        assert!(rx.drain(|m| got.push(m)));
        assert_eq!(got, [1, 2]);
        // Nothing queued: the bell is quiet again.
        let mut b = [0u8; 1];
        assert_eq!(
            (&rx.bell).read(&mut b).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
        tx.send(3);
        drop((tx, tx2));
        let mut got = Vec::new();
        assert!(!rx.drain(|m| got.push(m)));
        assert_eq!(got, [3]);
    }

    #[test]
    fn a_detached_sender_sends_into_nothing() {
        QueueSender::<u32>::detached().send(7);
    }
}
