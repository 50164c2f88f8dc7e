//! RFC 5880 section 6.7, through the bytes a peer sends.
use super::tests::{config as base_config, MS, S};
use super::*;
use crate::session::auth::{Auth, AuthConfig, AuthKey, SequenceJudge};
use linecard_api::AuthType;

const TYPES: [AuthType; 5] = [
    AuthType::SimplePassword,
    AuthType::KeyedMd5,
    AuthType::MeticulousKeyedMd5,
    AuthType::KeyedSha1,
    AuthType::MeticulousKeyedSha1,
];

fn key(id: u8, secret: &str) -> AuthKey {
    AuthKey {
        id,
        secret: secret.as_bytes().to_vec(),
    }
}

fn session(discr: u32, auth_type: AuthType, keys: Vec<AuthKey>, send_key: u8, seq: u32) -> Session {
    let config = AuthConfig {
        auth_type,
        keys,
        send_key,
        construction: Default::default(),
    };
    config.check().unwrap();
    Session::new(
        SessionConfig {
            local_discr: discr,
            ..base_config()
        },
        0,
        u64::from(discr),
    )
    .with_auth(Auth::new(config, seq))
}

/// `packet` as a peer sends it (signed) and we parse it.
fn hear(to: &mut Session, now: Nanos, packet: &Repr) -> Result<(), DropReason> {
    let wire = packet.to_bytes();
    to.receive(now, &Repr::parse_bytes(&wire).unwrap(), &wire)
        .map(|_| ())
}

/// Delivers everything `from` sends at `now` to `to`, as bytes.
fn deliver(from: &mut Session, to: &mut Session, now: Nanos) -> Vec<Result<(), DropReason>> {
    let mut results = Vec::new();
    while let Some(packet) = from.poll_transmit(now) {
        let wire = packet.to_bytes();
        results.push(
            to.receive(now, &Repr::parse_bytes(&wire).unwrap(), &wire)
                .map(|_| ()),
        );
    }
    results
}

/// Two sessions of `auth_type` brought Up and steady by exchanging
/// packets every 5 ms.
fn up_pair(auth_type: AuthType) -> (Session, Session, Nanos) {
    let mut a = session(0x1111, auth_type, vec![key(1, "linecard")], 1, 100);
    let mut b = session(0x2222, auth_type, vec![key(1, "linecard")], 1, u32::MAX - 2);
    let mut now = 0;
    while now < 100 * MS {
        for result in deliver(&mut a, &mut b, now)
            .into_iter()
            .chain(deliver(&mut b, &mut a, now))
        {
            assert_eq!(result, Ok(()), "{auth_type:?} at {now}");
        }
        a.on_timer(now);
        b.on_timer(now);
        now += 5 * MS;
    }
    assert_eq!(
        (a.state(), b.state()),
        (State::Up, State::Up),
        "{auth_type:?}"
    );
    (a, b, now)
}

#[test]
fn an_authenticated_steady_session_is_offloaded_with_a_template_that_counts_its_section() {
    // The kernel signs (6.7): the template's A bit and Length announce
    // the section it writes.
    use crate::daemon::offload::{placement, Allowed, KernelView, Placement, SessionView};
    let allowed = Allowed {
        offload: true,
        sign: true,
        own_clock: true,
    };
    for auth_type in TYPES {
        let (a, _, _) = up_pair(auth_type);
        assert!(a.is_steady(), "{auth_type:?}");
        let view = SessionView::of(&a, allowed);
        let emitted = a.steady_packet().to_bytes();
        assert_eq!(view.steady_reply[..], emitted[..24], "{auth_type:?}");
        assert_eq!(usize::from(view.steady_reply[3]), emitted.len());
        assert_ne!(view.steady_reply[1] & 0x04, 0, "{auth_type:?}: the A bit");
        assert_eq!(
            placement(&view, &KernelView::default()),
            Some(Placement::Offload(FastPathRole::Steady)),
            "{auth_type:?}"
        );
        // Signing off (the negative control): registered, never offloaded.
        let unsigned = SessionView::of(
            &a,
            Allowed {
                sign: false,
                ..allowed
            },
        );
        assert_eq!(
            placement(&unsigned, &KernelView::default()),
            Some(Placement::Reregister),
            "{auth_type:?}"
        );
    }
}

/// A bfd.XmitAuthSeq another plane adds to, as `LC_XMIT_SEQ` is.
struct Counter(std::sync::atomic::AtomicU64);

impl crate::session::auth::SequenceCounter for Counter {
    fn take(&self) -> u32 {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed) as u32
    }
    fn peek(&self) -> u32 {
        self.0.load(std::sync::atomic::Ordering::Relaxed) as u32
    }
}

#[test]
fn a_shared_sequence_advances_by_one_whichever_plane_sends() {
    // 6.7.3: the meticulous types advance by exactly one per packet; the
    // kernel's replies, the responder and the loop take turns here.
    for auth_type in [AuthType::MeticulousKeyedMd5, AuthType::MeticulousKeyedSha1] {
        let (mut a, mut b, mut now) = up_pair(auth_type);
        let next = a.auth().unwrap().next_sequence();
        let counter = std::sync::Arc::new(Counter(u64::from(next).into()));
        a.auth_mut().unwrap().share(counter.clone());
        let mut signer = a.auth().unwrap().signer();
        let mut seen = Vec::new();
        for round in 0..6 {
            now += 10 * MS;
            let wire = if round % 2 == 0 {
                // The kernel or the responder: a prepared packet, signed
                // as it leaves.
                let mut prepared = a.steady_packet().to_bytes().to_vec();
                signer.sign(&mut prepared);
                prepared
            } else {
                // The loop.
                a.poll_transmit(now)
                    .or_else(|| {
                        now += 10 * MS;
                        a.poll_transmit(now)
                    })
                    .expect("a periodic packet")
                    .to_bytes()
                    .to_vec()
            };
            let repr = Repr::parse_bytes(&wire).unwrap();
            seen.push(repr.auth.unwrap().sequence.unwrap());
            // Genuine at the peer, in its window.
            assert_eq!(
                b.receive(now, &repr, &wire).map(|_| ()),
                Ok(()),
                "{auth_type:?}"
            );
        }
        let expected: Vec<u32> = (0..6).map(|i| next.wrapping_add(i)).collect();
        assert_eq!(seen, expected, "{auth_type:?}");
        assert_eq!(
            counter.0.load(std::sync::atomic::Ordering::Relaxed) as u32,
            next.wrapping_add(6)
        );
        // A rehearsed Down takes no number.
        let _ = a.down_on_detection();
        assert_eq!(
            counter.0.load(std::sync::atomic::Ordering::Relaxed) as u32,
            next.wrapping_add(6),
            "{auth_type:?}"
        );
    }
}

#[test]
fn the_signer_signs_a_password_packet_unchanged() {
    let (a, mut b, now) = up_pair(AuthType::SimplePassword);
    let mut signer = a.auth().unwrap().signer();
    let mut prepared = a.steady_packet().to_bytes().to_vec();
    let before = prepared.clone();
    signer.sign(&mut prepared);
    assert_eq!(prepared, before);
    let repr = Repr::parse_bytes(&prepared).unwrap();
    assert_eq!(b.receive(now, &repr, &prepared).map(|_| ()), Ok(()));
}

#[test]
fn every_type_brings_a_session_up_and_keyed_sequences_advance() {
    for auth_type in TYPES {
        let (a, b, _) = up_pair(auth_type);
        let status = a.auth().unwrap().status();
        if auth_type.digest_len().is_some() {
            // b started 2 below the wrap: its sequence crossed zero.
            let heard = status.receive_sequence.expect("keyed: sequence known");
            assert!(heard < 1000, "{auth_type:?}: {heard}");
            assert_eq!(
                b.auth().unwrap().status().transmit_sequence,
                heard.wrapping_add(1)
            );
        } else {
            assert_eq!(status.receive_sequence, None);
        }
    }
}

#[test]
fn a_forged_or_mismatched_packet_changes_nothing() {
    for auth_type in TYPES {
        let (mut a, b, now) = up_pair(auth_type);
        let packet = b.steady_packet();
        let before = (
            a.state(),
            a.detection_deadline(),
            a.auth().unwrap().status(),
        );
        let mut refuse = |wire: &[u8], why: DropReason, what: &str| {
            let repr = Repr::parse_bytes(wire).unwrap();
            assert_eq!(
                a.receive(now, &repr, wire),
                Err(why),
                "{auth_type:?}: {what}"
            );
            assert_eq!(
                (
                    a.state(),
                    a.detection_deadline(),
                    a.auth().unwrap().status()
                ),
                before,
                "{auth_type:?}: {what} changed the session"
            );
        };
        // No authentication at all (6.8.6).
        let mut bare = packet;
        bare.auth = None;
        refuse(&bare.to_bytes(), DropReason::AuthMismatch, "no A bit");
        // Signed with the wrong secret, or an unknown Key ID.
        let mut forged = packet;
        forged.auth.as_mut().unwrap().bytes[..8].copy_from_slice(b"linecarD");
        refuse(&forged.to_bytes(), DropReason::AuthFailed, "wrong secret");
        let mut unknown = packet;
        unknown.auth.as_mut().unwrap().key_id = 9;
        refuse(&unknown.to_bytes(), DropReason::AuthFailed, "unknown key");
        // Another type than configured.
        let mut other = packet;
        let section = other.auth.as_mut().unwrap();
        section.auth_type = if auth_type == AuthType::KeyedSha1 {
            AuthType::MeticulousKeyedSha1
        } else {
            AuthType::KeyedSha1
        };
        section.sequence = Some(0);
        section.len = 20;
        refuse(&other.to_bytes(), DropReason::AuthMismatch, "other type");
        if auth_type.digest_len().is_some() {
            // One byte changed after signing: Your Discriminator.
            let mut tampered = packet.to_bytes().to_vec();
            tampered[11] ^= 1;
            refuse(&tampered, DropReason::AuthFailed, "tampered");
        }
    }
}

#[test]
fn sequence_numbers_refuse_replays_and_leaps() {
    for auth_type in TYPES.into_iter().filter(|t| t.digest_len().is_some()) {
        let (mut a, mut b, now) = up_pair(auth_type);
        let last = a.auth().unwrap().status().receive_sequence.unwrap();
        // The packet b sends next carries last + 1; its predecessor
        // is a replay.
        let next = b.poll_transmit(now + S).or_else(|| {
            b.on_timer(now);
            b.poll_transmit(now + 10 * MS)
        });
        let next = next.expect("b transmits");
        assert_eq!(next.auth.unwrap().sequence, Some(last.wrapping_add(1)));
        let mut replay = next;
        replay.auth.as_mut().unwrap().sequence = Some(last);
        let verdict = hear(&mut a, now, &replay);
        if auth_type.meticulous() {
            assert_eq!(
                verdict,
                Err(DropReason::AuthSequence),
                "{auth_type:?}: replay"
            );
        } else {
            // Keyed: the same number is within bfd.RcvAuthSeq .. +3M.
            assert_eq!(verdict, Ok(()), "{auth_type:?}: same number");
        }
        // 3 x Detect Mult ahead is the edge; one more is refused.
        for (ahead, accepted) in [(3 * 3 + 1, false), (3 * 3, true)] {
            let mut leap = next;
            leap.auth.as_mut().unwrap().sequence = Some(last.wrapping_add(ahead));
            let verdict = hear(&mut a, now, &leap);
            let expected = if accepted {
                Ok(())
            } else {
                Err(DropReason::AuthSequence)
            };
            assert_eq!(verdict, expected, "{auth_type:?}: {ahead} ahead");
        }
        // Silent for twice the detection time (6.8.1): the number is
        // forgotten and any is accepted once.
        let mut late = next;
        late.auth.as_mut().unwrap().sequence = Some(last.wrapping_add(1000));
        assert_eq!(
            hear(&mut a, now + 59 * MS, &late),
            Err(DropReason::AuthSequence)
        );
        assert_eq!(hear(&mut a, now + 61 * MS, &late), Ok(()), "{auth_type:?}");
    }
}

#[test]
fn a_window_the_kernel_judged_is_recorded_not_judged_again() {
    // The fast path saw the packet first and let it through (its window
    // had lapsed, so the number restarts the window, 6.8.1); a second
    // verdict here by a later clock must not refuse it. The digest is
    // still checked.
    for auth_type in TYPES.into_iter().filter(|t| t.meticulous()) {
        let (mut a, mut b, now) = up_pair(auth_type);
        let last = a.auth().unwrap().status().receive_sequence.unwrap();
        let next = b.poll_transmit(now + S).or_else(|| {
            b.on_timer(now);
            b.poll_transmit(now + 10 * MS)
        });
        let mut replay = next.expect("b transmits");
        replay.auth.as_mut().unwrap().sequence = Some(last);
        let wire = replay.to_bytes();
        let repr = Repr::parse_bytes(&wire).unwrap();
        assert_eq!(
            a.receive_judged(now, &repr, &wire, SequenceJudge::Here)
                .map(|_| ()),
            Err(DropReason::AuthSequence),
            "{auth_type:?}: judged here, a replay"
        );
        assert!(
            a.receive_judged(now, &repr, &wire, SequenceJudge::Kernel)
                .is_ok(),
            "{auth_type:?}: judged by the kernel"
        );
        assert_eq!(a.auth().unwrap().status().receive_sequence, Some(last));
        let mut forged = replay;
        forged.auth.as_mut().unwrap().bytes[..8].copy_from_slice(b"linecarD");
        let wire = forged.to_bytes();
        assert_eq!(
            a.receive_judged(
                now,
                &Repr::parse_bytes(&wire).unwrap(),
                &wire,
                SequenceJudge::Kernel
            )
            .map(|_| ()),
            Err(DropReason::AuthFailed),
            "{auth_type:?}: a digest the kernel passed is still checked"
        );
    }
}

#[test]
fn key_rollover_accepts_both_keys_while_the_sender_switches() {
    for auth_type in TYPES {
        let keys = || vec![key(1, "old-secret"), key(2, "new-secret")];
        let mut a = session(0x1111, auth_type, keys(), 1, 5);
        let mut b = session(0x2222, auth_type, keys(), 1, 5);
        let mut only_new = session(0x3333, auth_type, vec![key(2, "new-secret")], 2, 5);
        assert_eq!(deliver(&mut a, &mut b, 0), vec![Ok(())]);
        assert_eq!(
            deliver(&mut a, &mut only_new, 2 * S),
            vec![Err(DropReason::AuthFailed)],
            "{auth_type:?}: key 1 where only 2 is known"
        );
        a.auth_mut().unwrap().set_send_key(2).unwrap();
        assert_eq!(
            deliver(&mut a, &mut b, 4 * S),
            vec![Ok(())],
            "{auth_type:?}"
        );
        assert_eq!(
            deliver(&mut a, &mut only_new, 6 * S),
            vec![Ok(())],
            "{auth_type:?}"
        );
        assert!(a.auth_mut().unwrap().set_send_key(3).is_err());
    }
}

#[test]
fn keys_are_checked_against_their_type() {
    let check = |auth_type, secret: &str| {
        AuthConfig {
            auth_type,
            keys: vec![key(1, secret)],
            send_key: 1,
            construction: Default::default(),
        }
        .check()
    };
    assert!(check(AuthType::SimplePassword, "").is_err());
    assert!(check(AuthType::SimplePassword, &"x".repeat(16)).is_ok());
    assert!(check(AuthType::SimplePassword, &"x".repeat(17)).is_err());
    assert!(check(AuthType::KeyedMd5, &"x".repeat(17)).is_err());
    assert!(check(AuthType::KeyedSha1, &"x".repeat(20)).is_ok());
    assert!(check(AuthType::KeyedSha1, &"x".repeat(21)).is_err());
    let twice = AuthConfig {
        auth_type: AuthType::KeyedSha1,
        keys: vec![key(1, "a"), key(1, "b")],
        send_key: 1,
        construction: Default::default(),
    };
    assert!(twice.check().is_err());
    // Secrets never reach a log line: not the configuration's, not an
    // outgoing packet's (whose section holds the password or key).
    assert!(!format!("{twice:?}").contains("\"a\"") && !format!("{twice:?}").contains("[97]"));
    let s = session(1, AuthType::SimplePassword, vec![key(1, "hunter2")], 1, 0);
    let shown = format!("{:?}", s.steady_packet());
    assert!(
        shown.contains("SimplePassword") && !shown.contains("104, 117, 110"),
        "{shown}"
    );
}

/// FRR bfdd's keyed SHA1 (FRR issue 23274): `ptm_bfd_snd` in
/// bfdd/bfd_packet.c (FRR 10.x) writes Auth Type 4, Auth Len 28, the Key
/// ID, a zero byte and the Sequence Number it has just incremented, zeroes
/// the 20-byte field, takes HMAC-SHA1 keyed with the key string over the
/// whole 52-byte packet and writes the result into the field;
/// `bfd_check_auth` recomputes it the same way. The digest below was
/// computed by Python's `hmac` module over those 52 bytes (key
/// "frr-secret"), not by this crate.
const FRR_VECTOR_DIGEST: &str = "faf793d19ae0def3edde382c4d3e05e2e7fa5fe2";

fn frr_config(auth_type: AuthType, secret: &str) -> AuthConfig {
    AuthConfig {
        auth_type,
        keys: vec![key(1, secret)],
        send_key: 1,
        construction: crate::wire::Construction::FrrHmacSha1,
    }
}

fn frr_session(discr: u32, secret: &str, seq: u32) -> Session {
    let config = frr_config(AuthType::KeyedSha1, secret);
    config.check().unwrap();
    Session::new(
        SessionConfig {
            local_discr: discr,
            ..base_config()
        },
        0,
        u64::from(discr),
    )
    .with_auth(Auth::new(config, seq))
}

#[test]
fn frrs_hmac_sha1_is_emitted_and_verified_byte_for_byte() {
    let mut key_bytes = [0u8; 20];
    key_bytes[..10].copy_from_slice(b"frr-secret");
    let packet = Repr {
        diag: linecard_api::control::Diagnostic::NoDiagnostic,
        state: State::Up,
        poll: false,
        final_: false,
        control_plane_independent: false,
        demand: false,
        detect_mult: 3,
        my_discr: 1,
        your_discr: 2,
        desired_min_tx_us: 10_000,
        required_min_rx_us: 10_000,
        required_min_echo_rx_us: 0,
        auth: Some(crate::wire::AuthSection {
            auth_type: AuthType::KeyedSha1,
            construction: crate::wire::Construction::FrrHmacSha1,
            key_id: 1,
            sequence: Some(7),
            bytes: key_bytes,
            len: 20,
        }),
    };
    let wire = packet.to_bytes();
    let mut expected = vec![0x20, 0xc4, 3, 52, 0, 0, 0, 1, 0, 0, 0, 2];
    expected.extend_from_slice(&10_000u32.to_be_bytes());
    expected.extend_from_slice(&10_000u32.to_be_bytes());
    expected.extend_from_slice(&[0, 0, 0, 0, 4, 28, 1, 0, 0, 0, 0, 7]);
    expected.extend(
        (0..20).map(|i| u8::from_str_radix(&FRR_VECTOR_DIGEST[2 * i..2 * i + 2], 16).unwrap()),
    );
    assert_eq!(&wire[..], expected.as_slice());
    // A session of FRR's construction takes it; one of RFC 5880's refuses
    // it (the construction is configured, never guessed from the wire).
    let mut frr = frr_session(2, "frr-secret", 100);
    let mut rfc = session(2, AuthType::KeyedSha1, vec![key(1, "frr-secret")], 1, 100);
    let parsed = Repr::parse_bytes(&wire).unwrap();
    assert_eq!(frr.receive(0, &parsed, &wire).map(|_| ()), Ok(()));
    assert_eq!(
        rfc.receive(0, &parsed, &wire).map(|_| ()),
        Err(DropReason::AuthFailed)
    );
}

#[test]
fn frr_construction_sessions_come_up_and_stay_in_userspace() {
    use crate::daemon::offload::{placement, Allowed, KernelView, Placement, SessionView};
    let mut a = frr_session(0x1111, "frr-secret", 5);
    let mut b = frr_session(0x2222, "frr-secret", u32::MAX - 1);
    let mut rfc = session(
        0x3333,
        AuthType::KeyedSha1,
        vec![key(1, "frr-secret")],
        1,
        9,
    );
    let mut now = 0;
    while now < 100 * MS {
        for r in deliver(&mut a, &mut b, now)
            .into_iter()
            .chain(deliver(&mut b, &mut a, now))
        {
            assert_eq!(r, Ok(()), "at {now}");
        }
        // An RFC 5880 peer refuses every one of ours.
        for r in deliver(&mut a, &mut rfc, now) {
            assert_eq!(r, Err(DropReason::AuthFailed), "at {now}");
        }
        a.on_timer(now);
        b.on_timer(now);
        now += 5 * MS;
    }
    assert_eq!((a.state(), b.state()), (State::Up, State::Up));
    assert_ne!(rfc.state(), State::Up);
    // The kernel computes RFC 5880's digests only: verified and answered
    // in userspace, never offloaded.
    let allowed = Allowed {
        offload: true,
        sign: true,
        own_clock: true,
    };
    assert_eq!(
        placement(&SessionView::of(&a, allowed), &KernelView::default()),
        Some(Placement::Reregister)
    );
}

#[test]
fn frrs_construction_is_keyed_sha1_only() {
    for auth_type in [
        AuthType::SimplePassword,
        AuthType::KeyedMd5,
        AuthType::MeticulousKeyedMd5,
    ] {
        assert!(
            frr_config(auth_type, "frr-secret").check().is_err(),
            "{auth_type:?}"
        );
    }
    for auth_type in [AuthType::KeyedSha1, AuthType::MeticulousKeyedSha1] {
        assert_eq!(frr_config(auth_type, "frr-secret").check(), Ok(()));
    }
}

/// The kernel's bounds on digest work, kept by the session too
/// (`linecard_common::verify`): in-window forgeries under another header
/// spend a budget of `BUDGET_BURST` digests and are then refused
/// uncomputed, while copies of the peer's next packet are compared with a
/// digest computed once, spend nothing, and the peer's own packet is
/// accepted throughout.
#[test]
fn forgeries_spend_a_digest_budget_the_peers_own_packets_never_need() {
    use linecard_common::verify::BUDGET_BURST;
    for auth_type in [AuthType::KeyedSha1, AuthType::MeticulousKeyedMd5] {
        let (mut a, mut b, mut now) = up_pair(auth_type);
        let genuine = loop {
            now += MS;
            b.on_timer(now);
            if let Some(p) = b.poll_transmit(now) {
                break p;
            }
        };
        let mut other_header = genuine;
        other_header.diag = linecard_api::control::Diagnostic::PathDown;
        // Signed as the Repr emits them, then the digest's last byte
        // flipped: forgeries the digest alone refuses.
        let forge = |packet: &Repr| {
            let mut wire = packet.to_bytes().to_vec();
            *wire.last_mut().unwrap() ^= 1;
            wire
        };
        let other_header = forge(&other_header);
        let wrong_digest = forge(&genuine);
        let hear_bytes = |a: &mut Session, wire: &[u8]| {
            a.receive(now, &Repr::parse_bytes(wire).unwrap(), wire)
                .map(|_| ())
        };
        for i in 0..BUDGET_BURST {
            assert_eq!(
                hear_bytes(&mut a, &other_header),
                Err(DropReason::AuthFailed),
                "{auth_type:?}: forgery {i} within the budget"
            );
        }
        assert_eq!(
            hear_bytes(&mut a, &other_header),
            Err(DropReason::VerifyBudget),
            "{auth_type:?}: past the budget, refused uncomputed"
        );
        for _ in 0..100 {
            assert_eq!(
                hear_bytes(&mut a, &wrong_digest),
                Err(DropReason::AuthFailed),
                "{auth_type:?}: a copy of the next packet is compared, not budgeted"
            );
        }
        assert_eq!(
            hear_bytes(&mut a, &genuine.to_bytes()),
            Ok(()),
            "{auth_type:?}: the peer's own packet"
        );
        assert_eq!(a.state(), State::Up);
    }
}
