//! Whole BGP messages out of a byte stream: framing is checked before any
//! decoding, so a peer's bytes can at worst earn it a NOTIFICATION.
use crate::wire::{self, Notification};
use std::io;
use tokio::io::{AsyncRead, AsyncReadExt};

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("connection closed by peer")]
    Closed,
    #[error("read failed: {0}")]
    Io(#[from] io::Error),
    #[error("bad message header: {0}")]
    Framing(Notification),
}

pub struct FramedReader<R> {
    inner: R,
    buf: Vec<u8>,
    /// Start of unconsumed bytes in `buf`.
    start: usize,
}

impl<R: AsyncRead + Unpin> FramedReader<R> {
    pub fn new(inner: R) -> Self {
        FramedReader {
            inner,
            buf: Vec::with_capacity(64 * 1024),
            start: 0,
        }
    }

    /// The next whole message (header included). Cancel-safe: bytes read
    /// so far stay in the buffer.
    pub async fn next(&mut self) -> Result<&[u8], ReadError> {
        loop {
            match wire::frame(&self.buf[self.start..]).map_err(ReadError::Framing)? {
                Some(len) => {
                    let at = self.start;
                    self.start += len;
                    return Ok(&self.buf[at..at + len]);
                }
                None => {
                    if self.start > 0 {
                        // Move the partial message to the front before reading more.
                        self.buf.drain(..self.start);
                        self.start = 0;
                    }
                    self.buf.reserve(64 * 1024);
                    // read_buf appends only what arrived, so a cancelled read
                    // leaves the buffer as it was.
                    match self.inner.read_buf(&mut self.buf).await? {
                        0 => return Err(ReadError::Closed),
                        _ => continue,
                    }
                }
            }
        }
    }
}
