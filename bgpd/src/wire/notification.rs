//! The NOTIFICATION message (RFC 4271 4.5): its fields, encoding and
//! decoding. The codes it carries, by name, are in `codes`.

use std::fmt;

use super::message::{finish_message, start_message};
use super::{MAX_MESSAGE_LEN, msg_type};

/// A NOTIFICATION: the error code, subcode and data. Also the error type of
/// the decoders: an `Err(Notification)` is what the session sends before it
/// closes the connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    pub code: u8,
    pub subcode: u8,
    pub data: Vec<u8>,
}

impl Notification {
    pub fn new(code: u8, subcode: u8, data: Vec<u8>) -> Notification {
        Notification {
            code,
            subcode,
            data,
        }
    }

    /// The whole message, header included. Data that would make the
    /// message longer than 4096 bytes is cut.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(21 + self.data.len());
        let start = start_message(&mut out, msg_type::NOTIFICATION);
        out.push(self.code);
        out.push(self.subcode);
        let room = MAX_MESSAGE_LEN - 21;
        out.extend_from_slice(&self.data[..self.data.len().min(room)]);
        finish_message(&mut out, start);
        out
    }

    /// Decodes the body of a NOTIFICATION (after the header).
    pub(super) fn decode_body(body: &[u8]) -> Notification {
        match body {
            [code, subcode, data @ ..] => Notification {
                code: *code,
                subcode: *subcode,
                data: data.to_vec(),
            },
            // `frame` rejects NOTIFICATIONs shorter than 21 bytes.
            _ => Notification {
                code: 0,
                subcode: 0,
                data: body.to_vec(),
            },
        }
    }
}

impl fmt::Display for Notification {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} / {} ({}/{})",
            self.code_name(),
            self.subcode_name(),
            self.code,
            self.subcode
        )?;
        if let Some(text) = self.shutdown_message() {
            // Debug formatting escapes quotes and control characters, so
            // a peer's text cannot forge log lines.
            write!(f, ": {text:?}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Notification {}
