//! Golden bytes and every discard rule of RFC 5880 section 6.8.6 the codec
//! enforces.

use super::*;

/// The first packet of capture-analyzer/tests/fixtures/frr-vs-frr-idle-then-l3.pcap
/// (FRR bfdd 8.4.4 in the lab): Up, mult 3, 10 ms timers,
/// Required Min Echo RX 50 ms, both discriminators 158938875.
const FRR_UP: [u8; 24] = [
    0x20, 0xc0, 0x03, 0x18, 0x09, 0x79, 0x36, 0xfb, 0x09, 0x79, 0x36, 0xfb, 0x00, 0x00, 0x27, 0x10,
    0x00, 0x00, 0x27, 0x10, 0x00, 0x00, 0xc3, 0x50,
];

fn up() -> Repr {
    Repr::parse_bytes(&FRR_UP).unwrap()
}

#[test]
fn golden_frr_packet_parses() {
    let r = up();
    assert_eq!(r.state, State::Up);
    assert_eq!(r.diag, Diagnostic::NoDiagnostic);
    assert!(!r.poll && !r.final_ && !r.demand && r.auth.is_none());
    assert_eq!(
        (r.detect_mult, r.my_discr, r.your_discr),
        (3, 158_938_875, 158_938_875)
    );
    assert_eq!(
        (
            r.desired_min_tx_us,
            r.required_min_rx_us,
            r.required_min_echo_rx_us
        ),
        (10_000, 10_000, 50_000)
    );
}

#[test]
fn emit_round_trips_golden_bytes() {
    assert_eq!(*up().to_bytes(), FRR_UP);
    let mut r = up();
    r.poll = true;
    r.diag = Diagnostic::NeighborSignaledSessionDown;
    r.state = State::Down;
    let bytes = r.to_bytes();
    assert_eq!(bytes[0], 0x23);
    assert_eq!(bytes[1], 0x60);
    assert_eq!(Repr::parse_bytes(&bytes).unwrap(), r);
}

fn with(edit: impl FnOnce(&mut [u8; 24])) -> Result<Repr, DropReason> {
    let mut bytes = FRR_UP;
    edit(&mut bytes);
    Repr::parse_bytes(&bytes)
}

#[test]
fn short_packet_is_truncated() {
    assert_eq!(Repr::parse_bytes(&FRR_UP[..23]), Err(DropReason::Truncated));
}

#[test]
fn rule_version_must_be_1() {
    assert_eq!(with(|b| b[0] = 0x40), Err(DropReason::BadVersion));
}

#[test]
fn rule_length_below_minimum_or_beyond_payload() {
    assert_eq!(with(|b| b[3] = 23), Err(DropReason::BadLength));
    assert_eq!(with(|b| b[3] = 25), Err(DropReason::BadLength));
    // A bit set: the minimum is 26.
    assert_eq!(with(|b| b[1] |= 0x04), Err(DropReason::BadLength));
}

#[test]
fn rule_detect_mult_zero() {
    assert_eq!(with(|b| b[2] = 0), Err(DropReason::ZeroMultiplier));
}

#[test]
fn rule_multipoint_set() {
    assert_eq!(with(|b| b[1] |= 0x01), Err(DropReason::Multipoint));
}

#[test]
fn rule_my_discriminator_zero() {
    assert_eq!(
        with(|b| b[4..8].fill(0)),
        Err(DropReason::ZeroMyDiscriminator)
    );
}

#[test]
fn rule_your_discriminator_zero_only_in_down_or_admin_down() {
    assert_eq!(
        with(|b| b[8..12].fill(0)),
        Err(DropReason::ZeroYourDiscriminator)
    );
    assert_eq!(
        with(|b| {
            b[8..12].fill(0);
            b[1] = 0x80
        }),
        Err(DropReason::ZeroYourDiscriminator)
    );
    assert!(
        with(|b| {
            b[8..12].fill(0);
            b[1] = 0x40
        })
        .is_ok(),
        "Down bootstrap"
    );
    assert!(
        with(|b| {
            b[8..12].fill(0);
            b[1] = 0x00
        })
        .is_ok(),
        "AdminDown"
    );
}

#[test]
fn diag_is_five_bits_and_reserved_values_survive() {
    let r = with(|b| b[0] = 0x20 | 0x1f).unwrap();
    assert_eq!(r.diag, Diagnostic::Reserved(31));
    assert_eq!(r.to_bytes()[0], 0x3f);
}

#[test]
fn authentication_sections_parse_without_verification() {
    let mut bytes = vec![0u8; 24 + 28];
    bytes[..24].copy_from_slice(&FRR_UP);
    bytes[1] |= 0x04;
    bytes[3] = 52;
    bytes[24..28].copy_from_slice(&[4, 28, 7, 0]);
    bytes[28..32].copy_from_slice(&42u32.to_be_bytes());
    let r = Repr::parse_bytes(&bytes).unwrap();
    let auth = r.auth.unwrap();
    assert_eq!(
        (auth.auth_type, auth.key_id, auth.sequence, auth.len),
        (AuthType::KeyedSha1, 7, Some(42), 20)
    );

    let mut simple = vec![0u8; 24 + 7];
    simple[..24].copy_from_slice(&FRR_UP);
    simple[1] |= 0x04;
    simple[3] = 31;
    simple[24..31].copy_from_slice(&[1, 7, 1, b's', b'e', b'c', b'r']);
    let auth = Repr::parse_bytes(&simple).unwrap().auth.unwrap();
    assert_eq!(
        (auth.auth_type, &auth.bytes[..auth.len as usize]),
        (AuthType::SimplePassword, &b"secr"[..])
    );

    // MD5 with the wrong length, unknown type, length beyond the section.
    for section in [[2u8, 20, 1, 0], [9, 24, 1, 0], [4, 60, 1, 0]] {
        let mut b = bytes.clone();
        b[24..28].copy_from_slice(&section);
        assert_eq!(
            Repr::parse_bytes(&b),
            Err(DropReason::BadAuth),
            "{section:?}"
        );
    }
}

/// An Up packet keyed with "linecard" (ID 1, sequence 0x01020304), as
/// RFC 5880 6.7.3 and 6.7.4 define the digest.
fn keyed(auth_type: AuthType) -> Repr {
    let mut key = [0u8; 20];
    key[..8].copy_from_slice(b"linecard");
    Repr {
        diag: Diagnostic::NoDiagnostic,
        state: State::Up,
        poll: false,
        final_: false,
        control_plane_independent: false,
        demand: false,
        detect_mult: 3,
        my_discr: 0x1111_1111,
        your_discr: 0x2222_2222,
        desired_min_tx_us: 10_000,
        required_min_rx_us: 10_000,
        required_min_echo_rx_us: 0,
        auth: Some(AuthSection {
            construction: crate::wire::Construction::Rfc5880,
            auth_type,
            key_id: 1,
            sequence: Some(0x0102_0304),
            bytes: key,
            len: auth_type.digest_len().unwrap_or(8) as u8,
        }),
    }
}

#[test]
fn keyed_digests_match_an_independent_implementation() {
    // Golden digests from Python's hashlib over the same bytes, the key
    // zero-padded in the digest field: the codec's MD5 and SHA1 and its
    // field layout (4.3, 4.4) are checked against someone else's.
    for (auth_type, length, digest) in [
        (AuthType::KeyedMd5, 48, "b97932e83158f92dac3dfef100aabc9a"),
        (
            AuthType::KeyedSha1,
            52,
            "f63d4bf425acaf320c616876103a27f6ad8c8232",
        ),
    ] {
        let bytes = keyed(auth_type).to_bytes();
        assert_eq!(bytes.len(), length);
        assert_eq!((bytes[1] & 0x04, usize::from(bytes[3])), (0x04, length));
        assert_eq!(
            &bytes[24..32],
            &[auth_type.code(), length as u8 - 24, 1, 0, 1, 2, 3, 4]
        );
        let hex: String = bytes[32..].iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, digest, "{auth_type:?}");
        // And back: the parse carries the digest, unverified.
        let parsed = Repr::parse_bytes(&bytes).unwrap().auth.unwrap();
        assert_eq!(parsed.sequence, Some(0x0102_0304));
        assert_eq!(&parsed.bytes[..length - 32], &bytes[32..]);
    }
}

#[test]
fn a_simple_password_is_emitted_as_configured() {
    let mut repr = keyed(AuthType::SimplePassword);
    let auth = repr.auth.as_mut().unwrap();
    auth.sequence = None;
    auth.len = 8;
    let bytes = repr.to_bytes();
    assert_eq!(bytes.len(), 24 + 3 + 8);
    assert_eq!(&bytes[24..], b"\x01\x0b\x01linecard");
    assert_eq!(Repr::parse_bytes(&bytes).unwrap(), repr);
}

#[test]
fn arbitrary_bytes_never_panic() {
    let mut seed = 0x1234_5678_9abc_def0u64;
    for len in 0..80 {
        for _ in 0..200 {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed as u8
                })
                .collect();
            let _ = Repr::parse_bytes(&bytes);
        }
    }
}
