use super::*;

fn header(len: u16, ty: u8) -> Vec<u8> {
    let mut h = vec![0xff; 16];
    h.extend_from_slice(&len.to_be_bytes());
    h.push(ty);
    h
}

#[test]
fn needs_more_bytes() {
    assert_eq!(frame(&[]), Ok(None));
    assert_eq!(frame(&[0xff; 10]), Ok(None));
    let mut ka = Vec::new();
    encode_keepalive(&mut ka);
    assert_eq!(frame(&ka[..18]), Ok(None));
    assert_eq!(frame(&ka), Ok(Some(19)));
    let open = header(29, msg_type::OPEN);
    assert_eq!(frame(&open), Ok(None));
}

#[test]
fn frames_back_to_back_messages() {
    let mut buf = Vec::new();
    encode_keepalive(&mut buf);
    encode_end_of_rib(Family::Ipv6Unicast, &mut buf);
    encode_keepalive(&mut buf);
    let mut at = 0;
    let mut lens = vec![];
    while let Some(n) = frame(&buf[at..]).unwrap() {
        lens.push(n);
        at += n;
    }
    assert_eq!(lens, vec![19, 29, 19]);
}

#[test]
fn bad_marker_is_1_1() {
    let mut h = header(19, 4);
    h[3] = 0;
    assert_eq!(frame(&h), Err(Notification::connection_not_synchronized()));
    // Detected before the header is complete.
    assert_eq!(
        frame(&[0xff, 0xfe]),
        Err(Notification::connection_not_synchronized())
    );
}

#[test]
fn bad_lengths_are_1_2_with_the_length() {
    for (len, ty) in [
        (18u16, 4u8),
        (0, 2),
        (4097, 2),
        (0xffff, 2),
        (20, msg_type::KEEPALIVE),
        (28, msg_type::OPEN),
        (22, msg_type::UPDATE),
        (20, msg_type::NOTIFICATION),
    ] {
        let n = frame(&header(len, ty)).unwrap_err();
        assert_eq!(
            n,
            Notification::bad_message_length(len.to_be_bytes()),
            "len {len} type {ty}"
        );
    }
    // The minimums themselves are fine.
    for (len, ty) in [(29u16, 1u8), (23, 2), (21, 3), (23, 5)] {
        assert_eq!(frame(&header(len, ty)), Ok(None), "len {len} type {ty}");
    }
    assert_eq!(frame(&header(19, 4)), Ok(Some(19)));
}

#[test]
fn bad_type_is_1_3_with_the_type() {
    for ty in [0u8, 6, 255] {
        assert_eq!(
            frame(&header(19, ty)),
            Err(Notification::bad_message_type(ty))
        );
    }
}

#[test]
fn decode_checks_the_header_too() {
    let mut ka = Vec::new();
    encode_keepalive(&mut ka);
    assert_eq!(decode(&ka, &FOUR), Ok(Message::Keepalive));
    // A buffer longer than the header says.
    ka.push(0);
    assert_eq!(
        decode(&ka, &FOUR),
        Err(Notification::bad_message_length([0, 19]))
    );
    assert!(decode(&[0xff; 5], &FOUR).is_err());
}

#[test]
fn route_refresh_round_trip_and_bad_length() {
    let mut rr = Vec::new();
    encode_route_refresh(Family::Ipv6Unicast, &mut rr);
    assert_eq!(
        decode(&rr, &FOUR),
        Ok(Message::RouteRefresh {
            family: Some(Family::Ipv6Unicast),
            afi: 2,
            safi: 1,
            subtype: 0
        })
    );
    let unknown = message(msg_type::ROUTE_REFRESH, &[0, 25, 0, 70]);
    assert!(matches!(
        decode(&unknown, &FOUR),
        Ok(Message::RouteRefresh {
            family: None,
            afi: 25,
            safi: 70,
            ..
        })
    ));
    // RFC 7313 5: 7/1 with the whole message.
    let short = message(msg_type::ROUTE_REFRESH, &[0, 1, 0]);
    assert_eq!(
        decode(&short, &FOUR),
        Err(Notification::invalid_route_refresh_length(&short))
    );
}
