//! RFC 5880 6.7 in the kernel, with BPF_PROG_TEST_RUN: every
//! authentication type verified before a packet counts as heard, the
//! sequence window and its lapse, and the digest budget and expected
//! digests (`linecard_common::verify`): a flood that spends the budget
//! is refused uncomputed (its own drop reason), the peer's expected
//! packet passes all the same without a digest, a genuine packet's digest
//! is refunded, credit returns with time, and the detection sweep
//! computes the next numbers' digests byte for byte as the `md-5`/`sha1`
//! crates do. Needs root; without it, a printed skip (a failure under
//! LINECARD_REQUIRE_PRIVILEGED=1).

use linecard_bpf_objects::craft::{
    auth_drop_cases, authenticated, bfd, frame, peer_up, peer_up_authenticated, session,
    AUTH_KEY_ID, AUTH_SECRET, OUR_DISCR, PEER_DISCR, SLOT,
};
use linecard_bpf_objects::test_run::{self, monotonic_ns, Loaded};
use linecard_common::bfd::{auth_type, drop, SessionConfig, SessionState, SlotConfig};
use linecard_common::names;
use linecard_common::verify::{digest_cost_ns, VerifyGuard, BUDGET_BURST, LOOKAHEAD};

const XDP_DROP: u32 = 1;
const XDP_PASS: u32 = 2;

const KEYED: [u8; 4] = [
    auth_type::KEYED_MD5,
    auth_type::METICULOUS_KEYED_MD5,
    auth_type::KEYED_SHA1,
    auth_type::METICULOUS_KEYED_SHA1,
];

/// The session of these tests: authenticated with `kind`, handed to
/// userspace (no reply: the verdict on the peer's packet is the point).
fn load(kind: u8) -> Loaded {
    let config = SessionConfig {
        auth_type: kind,
        ..session(false)
    };
    let mut fast = Loaded::new(config, Default::default());
    fast.install_key(AUTH_KEY_ID, AUTH_SECRET);
    fast
}

/// The peer's genuine Up packet with `sequence`.
fn genuine(kind: u8, sequence: u32) -> Vec<u8> {
    frame(
        255,
        &authenticated(peer_up(), kind, AUTH_KEY_ID, sequence, AUTH_SECRET),
    )
}

/// The same packet under a guessed key: what a flood without the key
/// sends, the peer's header and a number inside the window.
fn forged(kind: u8, sequence: u32) -> Vec<u8> {
    frame(
        255,
        &authenticated(peer_up(), kind, AUTH_KEY_ID, sequence, b"not-the-key"),
    )
}

/// A forgery with another header (the Poll bit set): never expected.
fn forged_poll(kind: u8, sequence: u32) -> Vec<u8> {
    let mut packet = peer_up();
    packet[1] |= 0x20;
    frame(
        255,
        &authenticated(packet, kind, AUTH_KEY_ID, sequence, b"not-the-key"),
    )
}

/// The digest field of a frame built by [`genuine`].
fn digest_of(frame: &[u8]) -> [u8; 20] {
    // Ethernet 14, IPv4 20, UDP 8, then the section's digest at 32.
    let digest = &frame[14 + 20 + 8 + 32..];
    let mut full = [0u8; 20];
    full[..digest.len()].copy_from_slice(digest);
    full
}

fn guard(fast: &Loaded) -> VerifyGuard {
    fast.get(names::VERIFY_MAP, SLOT)
}

fn drops(fast: &Loaded, reason: u32) -> u64 {
    fast.per_cpu_sum(names::DROPS_MAP, reason)
}

/// What a budgeted digest costs this session (its 10 ms timers).
fn cost() -> u64 {
    digest_cost_ns(10_000, 10_000)
}

/// Spends the budget: no credit, and none accruing for ten seconds.
fn spend_the_budget(fast: &mut Loaded) {
    let spent = VerifyGuard {
        credit_ns: 0,
        credited_at_ns: monotonic_ns() + 10_000_000_000,
        ..guard(fast)
    };
    fast.set(names::VERIFY_MAP, SLOT, spent);
}

#[test]
fn the_session_s_timers_are_what_the_cost_assumes() {
    // `cost` above reads the peer's packet and our reply as 10 ms each.
    let packet = peer_up();
    assert_eq!(
        u32::from_be_bytes(packet[12..16].try_into().unwrap()),
        10_000
    );
    assert_eq!(
        u32::from_be_bytes(session(false).reply[16..20].try_into().unwrap()),
        10_000
    );
    assert_eq!(bfd(3, 0, PEER_DISCR, OUR_DISCR)[..12], packet[..12]);
}

#[test]
fn a_flood_spends_the_budget_and_is_then_refused_uncomputed() {
    if !test_run::privileged(module_path!()) {
        return;
    }
    for kind in KEYED {
        let mut fast = load(kind);
        // The whole burst, and no credit accruing while the test runs (on
        // a loaded machine 100 runs can take longer than one digest's
        // cost; `Budget`'s arithmetic is tested in `common`).
        let full = VerifyGuard {
            credit_ns: BUDGET_BURST * cost(),
            credited_at_ns: monotonic_ns() + 10_000_000_000,
            ..guard(&fast)
        };
        fast.set(names::VERIFY_MAP, SLOT, full);
        // No packet accepted yet: every number is inside the window, and
        // every forgery needs a digest.
        for n in 0..BUDGET_BURST {
            let out = fast.run(&forged(kind, 100 + n as u32));
            assert_eq!(out.action, XDP_DROP, "kind {kind}");
        }
        assert_eq!(drops(&fast, drop::AUTH_FAILED), BUDGET_BURST, "kind {kind}");
        assert_eq!(guard(&fast).computed, BUDGET_BURST, "kind {kind}");
        // The burst is spent.
        for n in 0..100 {
            let out = fast.run(&forged(kind, 200 + n));
            assert_eq!(out.action, XDP_DROP);
        }
        assert_eq!(drops(&fast, drop::VERIFY_BUDGET), 100, "kind {kind}");
        assert_eq!(guard(&fast).computed, BUDGET_BURST, "none computed past it");
        assert_eq!(drops(&fast, drop::AUTH_FAILED), BUDGET_BURST);
    }
}

#[test]
fn credit_returns_with_time_and_a_genuine_packet_s_digest_is_refunded() {
    if !test_run::privileged(module_path!()) {
        return;
    }
    let kind = auth_type::METICULOUS_KEYED_SHA1;
    let mut fast = load(kind);
    spend_the_budget(&mut fast);
    assert_eq!(fast.run(&genuine(kind, 100)).action, XDP_DROP);
    assert_eq!(
        drops(&fast, drop::VERIFY_BUDGET),
        1,
        "even the peer's, unexpected"
    );
    // One cost's worth of time later, one digest: the peer's packet,
    // genuine, so its cost comes back.
    let now = monotonic_ns();
    let one = VerifyGuard {
        credit_ns: 0,
        credited_at_ns: now - cost(),
        ..guard(&fast)
    };
    fast.set(names::VERIFY_MAP, SLOT, one);
    assert_ne!(fast.run(&genuine(kind, 100)).action, XDP_DROP);
    let after = guard(&fast);
    assert_eq!(after.computed, 1);
    assert!(
        after.credit_ns >= cost(),
        "refunded: {} ns of credit, a digest costs {}",
        after.credit_ns,
        cost()
    );
    let state: SessionState = fast.get(names::STATE_MAP, SLOT);
    assert_eq!(state.rcv_auth_seq, 100);
    // The accepted packet is what the next ones are expected to be.
    assert_eq!(after.accepted, 100);
    assert_eq!(after.generation, 2);
    assert_eq!(after.expected(100), Some(&digest_of(&genuine(kind, 100))));
}

#[test]
fn the_peer_s_expected_packet_passes_while_a_flood_holds_the_budget_at_zero() {
    if !test_run::privileged(module_path!()) {
        return;
    }
    for kind in KEYED {
        let mut fast = load(kind);
        assert_ne!(fast.run(&genuine(kind, 100)).action, XDP_DROP);
        // What the sweep computes for the next number (its own test
        // below), written here: this test is about the packet path.
        let mut expecting = guard(&fast);
        let next = genuine(kind, 101);
        expecting.remember(101, expecting.generation, &digest_of(&next));
        fast.set(names::VERIFY_MAP, SLOT, expecting);
        spend_the_budget(&mut fast);
        // The flood: the peer's header and the expected number with a
        // wrong digest, and another header. Neither is computed.
        assert_eq!(fast.run(&forged(kind, 101)).action, XDP_DROP);
        assert_eq!(fast.run(&forged_poll(kind, 101)).action, XDP_DROP);
        assert_eq!(drops(&fast, drop::VERIFY_BUDGET), 2, "kind {kind}");
        // The peer's packet: compared, not computed, and accepted.
        assert_ne!(fast.run(&next).action, XDP_DROP, "kind {kind}");
        let after = guard(&fast);
        assert_eq!(after.computed, 1, "only the first packet's digest");
        assert_eq!(after.expected_hits, 1);
        let state: SessionState = fast.get(names::STATE_MAP, SLOT);
        assert_eq!(state.rcv_auth_seq, 101, "kind {kind}");
        // The positive control: the same packet under a header the ring
        // does not hold (its key changed) is refused by the spent budget.
        let mut stale = guard(&fast);
        stale.generation += 2;
        fast.set(names::VERIFY_MAP, SLOT, stale);
        assert_eq!(fast.run(&genuine(kind, 102)).action, XDP_DROP);
        assert_eq!(drops(&fast, drop::VERIFY_BUDGET), 3, "kind {kind}");
    }
}

#[test]
fn the_sweep_computes_the_next_numbers_digests_as_the_reference_crates_do() {
    if !test_run::privileged(module_path!()) {
        return;
    }
    for kind in KEYED {
        let mut fast = load(kind);
        // Armed as userspace arms an offloaded session; its detection time
        // long enough that the sweep reports nothing.
        fast.set(
            names::SLOTS_MAP,
            SLOT,
            SlotConfig {
                detect_ns: 60_000_000_000,
                discr: OUR_DISCR,
                armed: 1,
                detect_mult: 3,
                ..SlotConfig::default()
            },
        );
        fast.set(names::SWEEP_LEN_MAP, 0, SLOT + 1);
        assert_ne!(fast.run(&genuine(kind, 100)).action, XDP_DROP);
        // The first packet started the sweep; it passes every 0.5 ms at
        // most and computes one digest a pass: wait for all three.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while guard(&fast).first_missing().is_some() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let ring = guard(&fast);
        for ahead in 1..=LOOKAHEAD {
            let sequence = 100 + ahead;
            assert_eq!(
                ring.expected(sequence),
                Some(&digest_of(&genuine(kind, sequence))),
                "kind {kind}: the digest of {sequence}"
            );
        }
        // Then the peer's next packets cost no digest, and each one's
        // acceptance asks the sweep for one more.
        for sequence in 101..=103 {
            assert_ne!(fast.run(&genuine(kind, sequence)).action, XDP_DROP);
        }
        let after = guard(&fast);
        assert_eq!((after.computed, after.expected_hits), (1, 3), "kind {kind}");
        let state: SessionState = fast.get(names::STATE_MAP, SLOT);
        assert_eq!(state.rcv_auth_seq, 103);
    }
}

/// Our session with authentication of `kind`, its detection time
/// `detect_ns`, and key [`AUTH_KEY_ID`] installed as the engine does.
fn load_authenticated(kind: u8, detect_ns: u64) -> Loaded {
    let mut fast = Loaded::new(
        SessionConfig {
            auth_type: kind,
            detect_ns,
            ..session(false)
        },
        Default::default(),
    );
    fast.install_key(AUTH_KEY_ID, AUTH_SECRET);
    fast
}

/// What a verdict on an authenticated packet must leave behind.
trait Judged {
    /// Runs `input`, which must be dropped for `reason` without touching
    /// the session's state (a forgery never counts as heard).
    fn refused(&self, what: &str, reason: u32, input: &[u8]);
    /// Runs `input`, which must pass to userspace, heard.
    fn accepted(&self, what: &str, input: &[u8]) -> SessionState;
}

impl Judged for Loaded {
    fn refused(&self, what: &str, reason: u32, input: &[u8]) {
        let before = (self.state(), self.per_cpu_sum(names::DROPS_MAP, reason));
        let out = self.run(input);
        assert_eq!(out.action, XDP_DROP, "{what}");
        assert_eq!(
            self.per_cpu_sum(names::DROPS_MAP, reason),
            before.1 + 1,
            "{what}: its reason's counter ({})",
            drop::name(reason)
        );
        assert_eq!(self.state(), before.0, "{what}: the session's state moved");
    }

    fn accepted(&self, what: &str, input: &[u8]) -> SessionState {
        let before = self.state();
        let action = self.run(input).action;
        let drops: Vec<&str> = (0..linecard_common::bfd::DROP_REASONS)
            .filter(|r| self.per_cpu_sum(names::DROPS_MAP, *r) > 0)
            .map(drop::name)
            .collect();
        assert_eq!(action, XDP_PASS, "{what} (drops so far: {drops:?})");
        let after = self.state();
        assert_eq!(after.rx_packets, before.rx_packets + 1, "{what}");
        assert!(after.last_rx_ns > before.last_rx_ns, "{what}: heard");
        after
    }
}

/// RFC 5880 6.7: every keyed type verified in the kernel, before a packet
/// counts as heard. The genuine packet (digest by the `md-5`/`sha1`
/// crates, not by the code under test) passes to userspace and moves
/// bfd.RcvAuthSeq; every forgery is dropped for its reason and leaves the
/// session's state as it was, so that no spoofed or replayed packet can
/// keep a dead session alive; the sequence window is the RFC's, with
/// the meticulous types refusing a repeat.
#[test]
fn keyed_authentication_is_verified_in_the_kernel_before_a_packet_counts() {
    if !test_run::privileged(module_path!()) {
        return;
    }
    for kind in [
        auth_type::KEYED_MD5,
        auth_type::METICULOUS_KEYED_MD5,
        auth_type::KEYED_SHA1,
        auth_type::METICULOUS_KEYED_SHA1,
    ] {
        let mut fast = load_authenticated(kind, 30_000_000);
        let what = |s: &str| format!("type {kind}: {s}");
        let first = fast.accepted(&what("genuine"), &peer_up_authenticated(kind, 100));
        assert_eq!((first.rcv_auth_seq, first.passed), (100, 1));
        assert_eq!(
            first.auth_known_until_ns - first.last_rx_ns,
            60_000_000,
            "known for twice 30 ms"
        );
        for (case, reason, input) in auth_drop_cases(kind) {
            fast.refused(&what(case), reason, &input);
        }
        let meticulous =
            kind == auth_type::METICULOUS_KEYED_MD5 || kind == auth_type::METICULOUS_KEYED_SHA1;
        let repeat = peer_up_authenticated(kind, 100);
        if meticulous {
            fast.refused(&what("a repeat"), drop::AUTH_SEQUENCE, &repeat);
        } else {
            fast.accepted(&what("a repeat (keyed: allowed)"), &repeat);
        }
        fast.refused(
            &what("behind the window"),
            drop::AUTH_SEQUENCE,
            &peer_up_authenticated(kind, 99),
        );
        // 3 x Detect Mult (3) ahead at most.
        fast.refused(
            &what("beyond the window"),
            drop::AUTH_SEQUENCE,
            &peer_up_authenticated(kind, 110),
        );
        let edge = fast.accepted(
            &what("the window's edge"),
            &peer_up_authenticated(kind, 109),
        );
        assert_eq!(edge.rcv_auth_seq, 109);
        // Key rollover (6.7.1): a second key is accepted beside the first.
        fast.install_key(2, b"the-next-key");
        let rolled = authenticated(peer_up(), kind, 2, 110, b"the-next-key");
        fast.accepted(&what("the next key"), &frame(255, &rolled));
    }
}

/// bfd.AuthSeqKnown lapses after twice the detection time without an
/// accepted packet (6.8.1): a restarted peer, its sequence numbers started
/// afresh, is heard again. The detection time is the larger of the
/// session's (1 ms here) and the one the packet implies (3 x 10 ms).
#[test]
fn the_sequence_window_lapses_after_twice_the_detection_time() {
    if !test_run::privileged(module_path!()) {
        return;
    }
    let kind = auth_type::METICULOUS_KEYED_SHA1;
    let fast = load_authenticated(kind, 1_000_000);
    fast.accepted("genuine", &peer_up_authenticated(kind, 5000));
    fast.refused(
        "a lower number at once",
        drop::AUTH_SEQUENCE,
        &peer_up_authenticated(kind, 7),
    );
    std::thread::sleep(std::time::Duration::from_millis(20));
    fast.refused(
        "20 ms on: still within twice 30 ms",
        drop::AUTH_SEQUENCE,
        &peer_up_authenticated(kind, 7),
    );
    std::thread::sleep(std::time::Duration::from_millis(50));
    let after = fast.accepted("after the lapse", &peer_up_authenticated(kind, 7));
    assert_eq!(after.rcv_auth_seq, 7);
    // The window is known again at once: the same packet is a replay.
    fast.refused(
        "its repeat",
        drop::AUTH_SEQUENCE,
        &peer_up_authenticated(kind, 7),
    );
}

/// 6.7.2: the password byte for byte, its length from Auth Len.
#[test]
fn a_simple_password_is_checked_in_the_kernel() {
    if !test_run::privileged(module_path!()) {
        return;
    }
    let kind = auth_type::SIMPLE_PASSWORD;
    let fast = load_authenticated(kind, 30_000_000);
    fast.accepted("the password", &peer_up_authenticated(kind, 0));
    // Twice: a password has no sequence number to replay.
    fast.accepted("the password again", &peer_up_authenticated(kind, 0));
    let with = |secret: &[u8]| frame(255, &authenticated(peer_up(), kind, AUTH_KEY_ID, 0, secret));
    let mut wrong = AUTH_SECRET.to_vec();
    wrong[3] ^= 0x20;
    fast.refused("one byte wrong", drop::AUTH_FAILED, &with(&wrong));
    fast.refused(
        "a prefix of it",
        drop::AUTH_FAILED,
        &with(&AUTH_SECRET[..8]),
    );
    fast.refused(
        "keyed section on a password session",
        drop::AUTH_MISMATCH,
        &peer_up_authenticated(auth_type::KEYED_SHA1, 1),
    );
    let mut empty = authenticated(peer_up(), kind, AUTH_KEY_ID, 0, b"x");
    empty[25] = 3; // Auth Len 3: no password at all
    empty[3] = 27;
    empty.truncate(27);
    fast.refused("Auth Len 3", drop::BAD_AUTH, &frame(255, &empty));
}
