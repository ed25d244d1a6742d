use super::*;

/// A NOTIFICATION from raw numbers, for the tests of how codes are named
/// and data is shown (bgpd itself builds them only through `codes`).
fn raw(code: u8, subcode: u8, data: Vec<u8>) -> Notification {
    Notification {
        code,
        subcode,
        data,
    }
}

#[test]
fn display_uses_rfc_names() {
    let cases = [
        ((3, 11), "UPDATE Message Error / Malformed AS_PATH (3/11)"),
        (
            (1, 1),
            "Message Header Error / Connection Not Synchronized (1/1)",
        ),
        ((2, 6), "OPEN Message Error / Unacceptable Hold Time (2/6)"),
        ((4, 0), "Hold Timer Expired / Unspecific (4/0)"),
        (
            (5, 3),
            "Finite State Machine Error / Receive Unexpected Message in Established State (5/3)",
        ),
        ((6, 1), "Cease / Maximum Number of Prefixes Reached (6/1)"),
        ((6, 2), "Cease / Administrative Shutdown (6/2)"),
        ((6, 4), "Cease / Administrative Reset (6/4)"),
        ((6, 5), "Cease / Connection Rejected (6/5)"),
        ((6, 7), "Cease / Connection Collision Resolution (6/7)"),
        (
            (7, 1),
            "ROUTE-REFRESH Message Error / Invalid Message Length (7/1)",
        ),
        ((9, 9), "Unknown Error Code / Unknown Subcode (9/9)"),
    ];
    for ((c, s), want) in cases {
        assert_eq!(raw(c, s, vec![]).to_string(), want);
    }
}

#[test]
fn shutdown_communication() {
    let n = Notification::cease_with_message(cease::ADMINISTRATIVE_SHUTDOWN, "maintenance \"now\"");
    assert_eq!(n.shutdown_message(), Some("maintenance \"now\""));
    assert_eq!(
        n.to_string(),
        "Cease / Administrative Shutdown (6/2): \"maintenance \\\"now\\\"\""
    );
    // Round trip through the wire.
    let wire = n.encode();
    assert_eq!(frame(&wire), Ok(Some(wire.len())));
    assert_eq!(decode(&wire, &FOUR), Ok(Message::Notification(n)));
    // Malformed communications are not shown, and do not panic.
    for data in [vec![10, b'a'], vec![2, 0xff, 0xfe], vec![0], vec![]] {
        let n = raw(code::CEASE, cease::ADMINISTRATIVE_RESET, data);
        assert_eq!(n.shutdown_message(), None);
        assert_eq!(n.to_string(), "Cease / Administrative Reset (6/4)");
    }
    // Long text is cut at a character boundary.
    let long = "é".repeat(200);
    let n = Notification::cease_with_message(cease::ADMINISTRATIVE_SHUTDOWN, &long);
    assert_eq!(n.shutdown_message().map(|s| s.len()), Some(254));
    // Other codes never show data as text.
    assert_eq!(
        Notification::update_error(UpdateError::MalformedAttributeList, vec![1, b'x'])
            .shutdown_message(),
        None
    );
}

#[test]
fn encode_caps_data_length() {
    let n = Notification::update_error(UpdateError::UnrecognizedWellKnown, vec![7; 5000]);
    let wire = n.encode();
    assert_eq!(wire.len(), MAX_MESSAGE_LEN);
    assert_eq!(frame(&wire), Ok(Some(MAX_MESSAGE_LEN)));
}
