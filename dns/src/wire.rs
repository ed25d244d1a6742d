//! A response's bytes, compressed however many records it holds.
//!
//! hickory-proto compresses only the first 120 names of a message and
//! writes every later one whole. A headless Service of a few thousand
//! endpoints then took about 44 bytes per address instead of 16, and its
//! answer did not fit even a TCP message (65,535 bytes): the client got
//! half the addresses and TC. Here a record whose owner is the question's
//! name is written with a pointer to the question (RFC 1035 4.1.4), at any
//! position; everything else is encoded by hickory as before.

use hickory_proto::ProtoError;
use hickory_proto::op::{Message, emit_message_parts};
use hickory_proto::rr::{Name, Record, RecordData};
use hickory_proto::serialize::binary::{BinEncodable, BinEncoder};

/// Where the first question's name starts: right after the 12-byte header.
const QUESTION_NAME: u16 = 12;

/// `msg` in wire format, as `Message::to_vec` writes it but with every
/// record owned by the question's name compressed. Records that do not fit
/// 65,535 bytes are left out and TC is set, as hickory does.
pub fn encode(msg: &Message) -> Result<Vec<u8>, ProtoError> {
    let question = msg.queries.first().map(|q| q.name());
    let (answers, authorities, additionals) = (
        owned(&msg.answers, question),
        owned(&msg.authorities, question),
        owned(&msg.additionals, question),
    );
    let mut buffer = Vec::with_capacity(512);
    let mut encoder = BinEncoder::new(&mut buffer);
    emit_message_parts(
        &msg.metadata,
        &mut msg.queries.iter(),
        &mut answers.iter(),
        &mut authorities.iter(),
        &mut additionals.iter(),
        msg.edns.as_ref(),
        msg.signature.as_deref(),
        &mut encoder,
    )?;
    Ok(buffer)
}

fn owned<'a>(records: &'a [Record], question: Option<&Name>) -> Vec<Owned<'a>> {
    records
        .iter()
        .map(|record| Owned {
            record,
            at_question: question.is_some_and(|q| points_to(q, &record.name)),
        })
        .collect()
}

/// Whether `owner` may be written as a pointer to the question `q`: the
/// same name (DNS compares names without regard to case; the pointer gives
/// the question's spelling, which is what a client that varies case in its
/// question checks for), and not the root (one byte, shorter than a pointer).
fn points_to(q: &Name, owner: &Name) -> bool {
    !q.is_root() && q == owner && q.is_fqdn() == owner.is_fqdn()
}

/// A record, with its owner name written as a pointer to the question when
/// `at_question`.
struct Owned<'a> {
    record: &'a Record,
    at_question: bool,
}

impl BinEncodable for Owned<'_> {
    fn emit(&self, encoder: &mut BinEncoder<'_>) -> Result<(), ProtoError> {
        if !self.at_question {
            return self.record.emit(encoder);
        }
        let r = self.record;
        encoder.emit_u16(0xC000 | QUESTION_NAME)?;
        r.record_type().emit(encoder)?;
        r.dns_class.emit(encoder)?;
        encoder.emit_u32(r.ttl)?;
        let place = encoder.place::<u16>()?;
        // As hickory writes a record: an update's empty data has no bytes.
        if !r.data.is_update() {
            r.data.emit(encoder)?;
        }
        let len = encoder.len_since_place(&place);
        let len = u16::try_from(len).map_err(|_| ProtoError::Message("record data too long"))?;
        place.replace(encoder, len)
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use hickory_proto::op::{Edns, Message, Query};
    use hickory_proto::rr::{Name, RData, Record, RecordType, rdata::A, rdata::CNAME};

    use super::encode;

    fn answer(question: &str, records: impl IntoIterator<Item = Record>) -> Message {
        let mut m = Message::query();
        m.metadata.message_type = hickory_proto::op::MessageType::Response;
        m.add_query(Query::query(
            Name::from_ascii(question).unwrap(),
            RecordType::A,
        ));
        m.add_answers(records);
        m.set_edns(Edns::new());
        m
    }

    fn a(owner: &str, i: u32) -> Record {
        Record::from_rdata(
            Name::from_ascii(owner).unwrap(),
            30,
            RData::A(A(Ipv4Addr::from(0x0afa_0000 + i))),
        )
    }

    #[test]
    fn every_record_of_the_question_s_name_is_sixteen_bytes() {
        let q = "big.ns.svc.cluster.local.";
        for n in [1, 200, 3000] {
            let m = answer(q, (0..n).map(|i| a(q, i)));
            let bytes = encode(&m).unwrap();
            let fixed = encode(&answer(q, [])).unwrap().len();
            assert_eq!(bytes.len(), fixed + 16 * n as usize, "{n} records");
            let back = Message::from_vec(&bytes).unwrap();
            assert!(!back.metadata.truncation);
            assert_eq!(back.answers, m.answers, "{n} records");
            assert!(back.edns.is_some());
        }
    }

    #[test]
    fn other_names_are_written_as_hickory_writes_them() {
        let q = "www.example.com.";
        let records = [
            Record::from_rdata(
                Name::from_ascii(q).unwrap(),
                30,
                RData::CNAME(CNAME(Name::from_ascii("web.example.com.").unwrap())),
            ),
            a("web.example.com.", 1),
            a("WWW.example.com.", 2),
        ];
        let m = answer(q, records);
        let bytes = encode(&m).unwrap();
        assert!(bytes.len() <= m.to_vec().unwrap().len());
        let back = Message::from_vec(&bytes).unwrap();
        assert_eq!(back.answers, m.answers);
        // The owner that differs from the question only in case is written
        // as the question's spelling.
        assert_eq!(back.answers[2].name.to_ascii(), q);
    }

    #[test]
    fn what_does_not_fit_a_message_is_left_out_with_tc() {
        let q = "big.ns.svc.cluster.local.";
        let m = answer(q, (0..5000).map(|i| a(q, i)));
        let bytes = encode(&m).unwrap();
        assert!(bytes.len() <= usize::from(u16::MAX));
        let back = Message::from_vec(&bytes).unwrap();
        assert!(back.metadata.truncation);
        assert!(back.answers.len() > 4000 && back.answers.len() < 5000);
    }
}
