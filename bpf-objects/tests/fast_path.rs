//! The XDP fast path on crafted frames, in the kernel, with
//! BPF_PROG_TEST_RUN: the reply it builds byte by byte, and every drop
//! reason counted while the DROPPED verdict (the control counter) moves too.
//! Needs root; without it, a printed skip (a failure under
//! LINECARD_REQUIRE_PRIVILEGED=1).

#![allow(clippy::unwrap_used)] // a test: a panic is the failure, with its line
use aya::maps::{Array, HashMap, MapData};
use linecard_bpf_objects::test_run::{self, monotonic_ns, Loaded as FastPath};
use linecard_bpf_objects::Switches;
use linecard_common::bfd::{verdict, DeadMan, EchoPeer, SessionConfig, SessionState};
use linecard_common::names;

const XDP_DROP: u32 = 1;
const XDP_PASS: u32 = 2;
const XDP_TX: u32 = 3;

use linecard_bpf_objects::craft::{
    bfd, drop_cases, echo_frame, echo_frame6, fix_ipv4_checksum, frame, frame6, frame_to, mapped,
    ones_complement_sum, peer_up, session, session6, udp6_checksum, DUT_IP, DUT_IP6, DUT_MAC,
    OUR_DISCR, OUR_PORT, PEER_DISCR, PEER_IP, PEER_IP6, PEER_MAC, SLOT, STRANGER_IP,
};
use linecard_common::bfd::drop;

fn checksum_ok(ip_header: &[u8]) -> bool {
    ones_complement_sum(ip_header) == 0xffff
}

/// The fast path with the session of `craft::session`.
trait Load {
    fn load(reply: bool) -> Self;
    fn load_with(config: SessionConfig) -> Self;
    /// With load-time `switches` (the negative controls) set.
    fn load_switched(config: SessionConfig, switches: Switches) -> Self;
}

impl Load for FastPath {
    fn load(reply: bool) -> Self {
        Self::load_with(session(reply))
    }

    fn load_with(config: SessionConfig) -> Self {
        Self::load_switched(config, Switches::default())
    }

    fn load_switched(config: SessionConfig, switches: Switches) -> Self {
        FastPath::new(config, switches)
    }
}

#[test]
fn an_up_packet_is_answered_in_the_kernel_byte_for_byte() {
    if !test_run::privileged(module_path!()) {
        return;
    }
    let fast = FastPath::load(true);
    let input = frame(255, &bfd(3, 0, PEER_DISCR, OUR_DISCR));
    let out = fast.run(&input);
    assert_eq!(out.action, XDP_TX);
    let f = &out.frame;
    assert_eq!(f.len(), 66);
    assert_eq!((&f[0..6], &f[6..12]), (&PEER_MAC[..], &DUT_MAC[..]), "MACs");
    assert_eq!(f[15], 0xc0, "DSCP CS6");
    assert_eq!(f[22], 255, "TTL 255");
    assert_eq!(
        (&f[26..30], &f[30..34]),
        (&DUT_IP[..], &PEER_IP[..]),
        "addresses swapped"
    );
    assert!(checksum_ok(&f[14..34]), "IPv4 checksum");
    assert_eq!(
        u16::from_be_bytes([f[34], f[35]]),
        OUR_PORT,
        "our source port"
    );
    assert_eq!(u16::from_be_bytes([f[36], f[37]]), 3784);
    assert_eq!(u16::from_be_bytes([f[38], f[39]]), 32);
    assert_eq!(
        &f[42..66],
        &bfd(3, 0, OUR_DISCR, PEER_DISCR)[..],
        "the configured reply"
    );
    let state = fast.state();
    assert_eq!(
        (state.rx_packets, state.tx_packets, state.finals_sent),
        (1, 1, 0)
    );
    assert!(state.last_rx_ns > 0);
    assert_eq!(fast.per_cpu_sum(names::VERDICTS_MAP, verdict::REPLIED), 1);
}

/// Two RX-clocked engines must not answer each other's answers: a packet
/// sooner than 75 % of the interval after our last reply is heard
/// (last-seen moves, the frame is consumed) but not answered (RFC 5880
/// 6.8.7); a Poll is answered regardless (6.5).
#[test]
fn an_answer_to_our_answer_is_heard_not_answered() {
    if !test_run::privileged(module_path!()) {
        return;
    }
    let fast = FastPath::load_with(session(true));
    let up = frame(255, &bfd(3, 0, PEER_DISCR, OUR_DISCR));
    assert_eq!(fast.run(&up).action, XDP_TX, "the first packet is answered");
    let first = fast.state();
    assert!(first.last_tx_ns > 0 && first.last_tx_ns == first.last_rx_ns);
    let out = fast.run(&up);
    assert_eq!(
        out.action, XDP_DROP,
        "an answer to our answer is not answered"
    );
    let second = fast.state();
    assert!(second.last_rx_ns > first.last_rx_ns, "but it is heard");
    assert_eq!((second.rx_packets, second.tx_packets), (2, 1));
    assert_eq!(second.last_tx_ns, first.last_tx_ns);
    assert_eq!(fast.per_cpu_sum(names::VERDICTS_MAP, verdict::HEARD), 1);
    let poll = frame(255, &bfd(3, 0x20, PEER_DISCR, OUR_DISCR));
    assert_eq!(fast.run(&poll).action, XDP_TX, "a Poll is always answered");
    assert_eq!(fast.state().finals_sent, 1);
}

/// The session's own clock counts as our transmission only once the
/// responder thread stamped what it actually sent: a request the sweep
/// raised while the thread was held off (RT throttling) must not silence
/// the RX-clocked replies (seen under L4: 30 ms of silence, a flap).
#[test]
fn only_a_sent_own_clock_packet_silences_the_reply() {
    if !test_run::privileged(module_path!()) {
        return;
    }
    let mut fast = FastPath::load_with(session(true));
    let now = monotonic_ns();
    // A request without a send: the kernel's own fields, as the sweep
    // would leave them.
    let requested = SessionState {
        clock_tx_ns: now,
        clock_tx_requests: 1,
        ..SessionState::default()
    };
    let set_state = |fast: &mut FastPath| {
        let mut states: Array<&mut MapData, SessionState> =
            Array::try_from(fast.bpf.map_mut(names::STATE_MAP).unwrap()).unwrap();
        states.set(SLOT, requested, 0).unwrap();
    };
    set_state(&mut fast);
    let up = frame(255, &bfd(3, 0, PEER_DISCR, OUR_DISCR));
    assert_eq!(
        fast.run(&up).action,
        XDP_TX,
        "a clock request alone is not a transmission"
    );
    // Reset our reply's stamp; then the responder's stamp of a real send.
    set_state(&mut fast);
    let mut sent: Array<&mut MapData, u64> =
        Array::try_from(fast.bpf.map_mut(names::CLOCK_SENT_MAP).unwrap()).unwrap();
    sent.set(SLOT, monotonic_ns(), 0).unwrap();
    assert_eq!(
        fast.run(&up).action,
        XDP_DROP,
        "an answer to our own clock's packet is heard, not answered"
    );
    assert_eq!(fast.per_cpu_sum(names::VERDICTS_MAP, verdict::HEARD), 1);
}

/// RFC 5880 6.8.4: once the sweep declared the peer's silence expired
/// (its Down on the way), the peer's late Up is userspace's to judge, not
/// answered Up by the kernel; the same packet after a silence nobody
/// declared expired is answered.
#[test]
fn a_late_packet_after_the_sweep_declared_the_peer_silent_is_not_answered() {
    if !test_run::privileged(module_path!()) {
        return;
    }
    let up = frame(255, &bfd(3, 0, PEER_DISCR, OUR_DISCR));
    let heard_at = monotonic_ns() - 31_000_000;
    for (reported_rx_ns, action) in [(heard_at, XDP_PASS), (0, XDP_TX)] {
        let mut fast = FastPath::load_with(session(true));
        // The peer last heard 31 ms ago; the sweep's report (or none).
        fast.set(
            names::STATE_MAP,
            SLOT,
            SessionState {
                last_rx_ns: heard_at,
                reported_rx_ns,
                ..SessionState::default()
            },
        );
        assert_eq!(
            fast.run(&up).action,
            action,
            "reported_rx_ns {reported_rx_ns}: the late packet's verdict"
        );
        let state = fast.state();
        assert!(state.last_rx_ns > heard_at, "heard either way");
        let passed = fast.per_cpu_sum(names::VERDICTS_MAP, verdict::PASSED);
        assert_eq!(passed, u64::from(action == XDP_PASS));
    }
}

/// A stopped engine is not answered for: past the heartbeat's limit the
/// steady packet goes to userspace (ORPHANED), with a fresh heartbeat it is
/// answered again, and a limit of 0 switches the guard off.
#[test]
fn a_stale_heartbeat_hands_the_reply_back_to_userspace() {
    if !test_run::privileged(module_path!()) {
        return;
    }
    let mut fast = FastPath::load(true);
    let up = frame(255, &bfd(3, 0, PEER_DISCR, OUR_DISCR));
    let set = |fast: &mut FastPath, heartbeat_ns: u64, limit_ns: u64| {
        let mut dead_man: Array<&mut MapData, DeadMan> =
            Array::try_from(fast.bpf.map_mut(names::DEAD_MAN_MAP).unwrap()).unwrap();
        dead_man
            .set(
                0,
                DeadMan {
                    heartbeat_ns,
                    limit_ns,
                },
                0,
            )
            .unwrap();
    };
    // One second old against a limit of 100 ms: orphaned.
    set(&mut fast, monotonic_ns() - 1_000_000_000, 100_000_000);
    assert_eq!(
        fast.run(&up).action,
        XDP_PASS,
        "a stale heartbeat: no reply"
    );
    assert_eq!(fast.per_cpu_sum(names::VERDICTS_MAP, verdict::ORPHANED), 1);
    assert_eq!(fast.per_cpu_sum(names::VERDICTS_MAP, verdict::REPLIED), 0);
    assert_eq!((fast.state().passed, fast.state().tx_packets), (1, 0));
    // Beaten just now: answered.
    set(&mut fast, monotonic_ns(), 100_000_000);
    assert_eq!(fast.run(&up).action, XDP_TX, "a fresh heartbeat: the reply");
    // The guard off: answered whatever the heartbeat.
    set(&mut fast, 1, 0);
    fast.an_interval_later();
    assert_eq!(fast.run(&up).action, XDP_TX, "limit 0: the guard is off");
    assert_eq!(fast.per_cpu_sum(names::VERDICTS_MAP, verdict::ORPHANED), 1);
    assert_eq!(fast.per_cpu_sum(names::VERDICTS_MAP, verdict::REPLIED), 2);
}

#[test]
fn a_poll_is_answered_with_final_and_padding_is_trimmed() {
    if !test_run::privileged(module_path!()) {
        return;
    }
    let fast = FastPath::load(true);
    let mut input = frame(255, &bfd(3, 0x20, PEER_DISCR, OUR_DISCR));
    input.extend_from_slice(&[0xee; 30]); // trailing bytes beyond the IP packet
    let out = fast.run(&input);
    assert_eq!(out.action, XDP_TX);
    assert_eq!(out.frame.len(), 66, "trimmed to the reply");
    assert_eq!(out.frame[43] & 0x30, 0x10, "F set, P clear");
    assert_eq!(fast.state().finals_sent, 1);
}

#[test]
fn transitions_and_unoffloaded_sessions_go_to_userspace() {
    if !test_run::privileged(module_path!()) {
        return;
    }
    let fast = FastPath::load(false);
    assert_eq!(
        fast.run(&frame(255, &bfd(3, 0, PEER_DISCR, OUR_DISCR)))
            .action,
        XDP_PASS,
        "not offloaded"
    );
    let fast = FastPath::load(true);
    for (what, payload) in [
        ("Init", bfd(2, 0, PEER_DISCR, OUR_DISCR)),
        ("Down", bfd(1, 0, PEER_DISCR, OUR_DISCR)),
        ("Final for our Poll", bfd(3, 0x10, PEER_DISCR, OUR_DISCR)),
        (
            "Demand mode asked for (D)",
            bfd(3, 0x02, PEER_DISCR, OUR_DISCR),
        ),
        (
            "bootstrap Down, your discriminator 0",
            bfd(1, 0, PEER_DISCR, 0),
        ),
    ] {
        assert_eq!(fast.run(&frame(255, &payload)).action, XDP_PASS, "{what}");
    }
    assert_eq!(fast.per_cpu_sum(names::VERDICTS_MAP, verdict::PASSED), 5);
    // Not BFD at all: ARP and DNS pass untouched.
    let mut arp = frame(255, &[0; 24]);
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    assert_eq!(fast.run(&arp).action, XDP_PASS);
    let mut dns = frame(255, &[0; 24]);
    dns[36..38].copy_from_slice(&53u16.to_be_bytes());
    assert_eq!(fast.run(&dns).action, XDP_PASS);
    assert_eq!(fast.per_cpu_sum(names::VERDICTS_MAP, verdict::NOT_BFD), 2);
}

#[test]
fn every_drop_reason_is_counted_with_the_control_counter() {
    if !test_run::privileged(module_path!()) {
        return;
    }
    let fast = FastPath::load(true);
    let cases = drop_cases();
    for (i, (what, reason, input)) in cases.iter().enumerate() {
        let before = fast.per_cpu_sum(names::DROPS_MAP, *reason);
        let out = fast.run(input);
        assert_eq!(out.action, XDP_DROP, "{what}");
        assert_eq!(
            fast.per_cpu_sum(names::DROPS_MAP, *reason),
            before + 1,
            "{what}: its reason's counter"
        );
        assert_eq!(
            fast.per_cpu_sum(names::VERDICTS_MAP, verdict::DROPPED),
            i as u64 + 1,
            "{what}: the control counter"
        );
    }
    // Nothing dropped touched the session.
    assert_eq!(fast.state().rx_packets, 0);
}

/// IPv6: the reply byte by byte, its mandatory UDP checksum over the
/// swapped pseudo-header, a padded frame trimmed to the reply with a
/// correct payload length; hop limit 254 dropped before any lookup;
/// neighbour discovery and UDP behind an extension header passed untouched
/// (no extension-header walking in the fast path).
#[test]
fn an_ipv6_peer_is_answered_with_a_valid_checksum_and_guarded_like_ipv4() {
    if !test_run::privileged(module_path!()) {
        return;
    }
    let mut fast = FastPath::load_with(session6(true));
    let up = bfd(3, 0, PEER_DISCR, OUR_DISCR);
    let mut padded = up.to_vec();
    padded.extend_from_slice(&[0xee; 40]);
    for (what, input) in [
        ("plain", frame6(255, 17, &up)),
        ("padded", frame6(255, 17, &padded)),
    ] {
        fast.an_interval_later();
        let out = fast.run(&input);
        assert_eq!(out.action, XDP_TX, "{what}");
        let f = &out.frame;
        assert_eq!(f.len(), 86, "{what}: trimmed to the reply");
        assert_eq!(
            (&f[0..6], &f[6..12]),
            (&PEER_MAC[..], &DUT_MAC[..]),
            "{what}: MACs"
        );
        assert_eq!(&f[12..14], &[0x86, 0xdd]);
        assert_eq!(
            &f[14..18],
            &[0x6c, 0, 0, 0],
            "{what}: version 6, CS6, no flow label"
        );
        assert_eq!(
            u16::from_be_bytes([f[18], f[19]]),
            32,
            "{what}: payload length"
        );
        assert_eq!((f[20], f[21]), (17, 255), "{what}: UDP, hop limit 255");
        assert_eq!(
            (&f[22..38], &f[38..54]),
            (&DUT_IP6[..], &PEER_IP6[..]),
            "{what}: swapped"
        );
        assert_eq!(u16::from_be_bytes([f[54], f[55]]), OUR_PORT);
        assert_eq!(u16::from_be_bytes([f[56], f[57]]), 3784);
        assert_eq!(u16::from_be_bytes([f[58], f[59]]), 32);
        assert_eq!(
            u16::from_be_bytes([f[60], f[61]]),
            udp6_checksum(&f[22..38], &f[38..54], &f[54..]),
            "{what}: UDP checksum"
        );
        assert_eq!(
            &f[62..86],
            &bfd(3, 0, OUR_DISCR, PEER_DISCR)[..],
            "{what}: payload"
        );
    }
    let drops_before = fast.per_cpu_sum(names::DROPS_MAP, drop::BAD_TTL);
    assert_eq!(
        fast.run(&frame6(254, 17, &up)).action,
        XDP_DROP,
        "hop limit 254"
    );
    assert_eq!(
        fast.per_cpu_sum(names::DROPS_MAP, drop::BAD_TTL),
        drops_before + 1
    );
    let passed_before = fast.per_cpu_sum(names::VERDICTS_MAP, verdict::NOT_BFD);
    // 58: ICMPv6 (neighbour discovery); 0: a hop-by-hop options header.
    for next_header in [58, 0] {
        assert_eq!(
            fast.run(&frame6(255, next_header, &up)).action,
            XDP_PASS,
            "next header {next_header}"
        );
    }
    assert_eq!(
        fast.per_cpu_sum(names::VERDICTS_MAP, verdict::NOT_BFD),
        passed_before + 2
    );
    // The same session keyed by IPv4 addresses refuses the IPv6 frame.
    let v4 = FastPath::load_with(session(true));
    assert_eq!(v4.run(&frame6(255, 17, &up)).action, XDP_DROP);
    assert_eq!(v4.per_cpu_sum(names::DROPS_MAP, drop::ADDRESS_MISMATCH), 1);
    let _ = (DUT_IP, PEER_IP);
}

/// Multihop (RFC 5883) in the kernel: a multihop session is answered on
/// 4784 at TTL 255 from packets at or above its minimum TTL; below it is
/// dropped after the lookup; the GTSM relaxation is the multihop session's
/// alone (a single-hop packet naming it is a hop mismatch, and a
/// single-hop packet below 255 is still dropped before any lookup).
#[test]
fn a_multihop_session_is_answered_on_its_port_and_its_relaxation_is_its_own() {
    if !test_run::privileged(module_path!()) {
        return;
    }
    let mut fast = FastPath::load_with(SessionConfig {
        flags: linecard_common::bfd::FLAG_REPLY | linecard_common::bfd::FLAG_MULTIHOP,
        min_ttl: 254,
        ..session(true)
    });
    let up = bfd(3, 0, PEER_DISCR, OUR_DISCR);
    for ttl in [255, 254] {
        fast.an_interval_later();
        let out = fast.run(&frame_to(4784, ttl, &up));
        assert_eq!(out.action, XDP_TX, "TTL {ttl} on 4784");
        let f = &out.frame;
        assert_eq!(f[22], 255, "our TTL");
        assert_eq!(
            u16::from_be_bytes([f[36], f[37]]),
            4784,
            "to the multihop port"
        );
    }
    let count = |reason: u32| fast.per_cpu_sum(names::DROPS_MAP, reason);
    assert_eq!(fast.run(&frame_to(4784, 200, &up)).action, XDP_DROP);
    assert_eq!(count(drop::BAD_TTL), 1, "below the session's minimum");
    assert_eq!(fast.run(&frame_to(3784, 255, &up)).action, XDP_DROP);
    assert_eq!(
        count(drop::HOP_MISMATCH),
        1,
        "single-hop packet, multihop session"
    );
    assert_eq!(fast.run(&frame_to(3784, 200, &up)).action, XDP_DROP);
    assert_eq!(count(drop::BAD_TTL), 2, "single-hop GTSM before any lookup");
}

trait EchoPeers {
    /// Lists `peer` as an echo peer (`LC_ECHO_PEERS`), as the engine does
    /// for a session with the echo function on.
    fn echo_peer(&mut self, peer: [u8; 16]);
}

impl EchoPeers for FastPath {
    fn echo_peer(&mut self, peer: [u8; 16]) {
        let mut peers: HashMap<&mut MapData, [u8; 16], EchoPeer> =
            HashMap::try_from(self.bpf.map_mut(names::ECHO_PEERS_MAP).unwrap()).unwrap();
        peers
            .insert(
                peer,
                EchoPeer {
                    discr: OUR_DISCR,
                    _reserved: 0,
                },
                0,
            )
            .unwrap();
    }
}

/// The echo function's reflector (RFC 5880 6.4): a listed peer's
/// self-addressed echo at TTL 255 goes back out with XDP_TX, MACs swapped,
/// TTL or hop limit one lower, checksums valid, payload untouched; our own
/// returning echoes at TTL 254 pass to the stack (a GTSM check before the
/// echo branch would drop them); an unlisted peer's, a stranger's and a
/// non-self-addressed echo pass untouched, never reflected.
#[test]
fn only_a_listed_peers_self_addressed_echo_is_reflected() {
    if !test_run::privileged(module_path!()) {
        return;
    }
    let mut fast = FastPath::load(true);
    let payload = b"LCE1 opaque to the reflector, 32B";
    // Not yet listed: the peer without the echo function is not reflected.
    let peer_echo = echo_frame(PEER_IP, PEER_IP, 255, payload);
    assert_eq!(fast.run(&peer_echo).action, XDP_PASS, "unlisted peer");
    assert_eq!(fast_sum(&fast, verdict::ECHO_REFLECTED), 0);

    fast.echo_peer(mapped(PEER_IP));
    fast.echo_peer(PEER_IP6);
    let out = fast.run(&peer_echo);
    assert_eq!(out.action, XDP_TX, "listed peer's echo");
    let f = &out.frame;
    assert_eq!((&f[0..6], &f[6..12]), (&PEER_MAC[..], &DUT_MAC[..]), "MACs");
    assert_eq!(f[22], 254, "TTL decremented");
    assert!(
        checksum_ok(&f[14..34]),
        "IPv4 checksum after the TTL update"
    );
    assert_eq!(&f[26..34], &peer_echo[26..34], "addresses kept");
    assert_eq!(
        &f[34..],
        &peer_echo[34..],
        "UDP header and payload untouched"
    );

    let peer_echo6 = echo_frame6(PEER_IP6, PEER_IP6, 255, payload);
    let out = fast.run(&peer_echo6);
    assert_eq!(out.action, XDP_TX, "listed IPv6 peer's echo");
    let f = &out.frame;
    assert_eq!((&f[0..6], &f[6..12]), (&PEER_MAC[..], &DUT_MAC[..]));
    assert_eq!(f[21], 254, "hop limit decremented");
    assert_eq!(
        &f[54..],
        &peer_echo6[54..],
        "UDP header and payload untouched"
    );
    assert_eq!(
        udp6_checksum(&f[22..38], &f[38..54], &f[54..]),
        u16::from_be_bytes([f[60], f[61]]),
        "UDP checksum still valid"
    );
    assert_eq!(fast_sum(&fast, verdict::ECHO_REFLECTED), 2);

    let passed = [
        (
            "our own echo back at TTL 254",
            echo_frame(DUT_IP, DUT_IP, 254, payload),
        ),
        (
            "our own IPv6 echo back at hop limit 254",
            echo_frame6(DUT_IP6, DUT_IP6, 254, payload),
        ),
        (
            "a stranger's self-addressed echo",
            echo_frame(STRANGER_IP, STRANGER_IP, 255, payload),
        ),
        (
            "to us, not self-addressed",
            echo_frame(PEER_IP, DUT_IP, 255, payload),
        ),
        (
            "the peer's echo off-link (TTL 64)",
            echo_frame(PEER_IP, PEER_IP, 64, payload),
        ),
        ("the peer's echo with IP options", {
            let mut f = echo_frame(PEER_IP, PEER_IP, 255, payload);
            f[14] = 0x46;
            f.splice(34..34, [1, 1, 1, 1]);
            fix_ipv4_checksum(&mut f);
            f
        }),
    ];
    for (case, frame) in &passed {
        let out = fast.run(frame);
        assert_eq!(out.action, XDP_PASS, "{case}");
        assert_eq!(&out.frame, frame, "{case}: untouched");
    }
    assert_eq!(
        fast_sum(&fast, verdict::ECHO_REFLECTED),
        2,
        "nothing else reflected"
    );
    assert_eq!(
        fast_sum(&fast, verdict::ECHO_PASSED),
        1 + passed.len() as u64,
        "every other echo counted as passed"
    );
    assert_eq!(fast_sum(&fast, verdict::DROPPED), 0, "none dropped");
}

/// The echo branch's guards as negative controls (load-time switches of
/// the object): with the `LC_ECHO_PEERS` lookup removed a stranger's
/// self-addressed echo is reflected (an amplifier), and with GTSM put
/// before the echo branch our own echo returning at TTL 254 is dropped;
/// the test above passes both cases, so it fails with either switch.
#[test]
fn without_its_guards_the_echo_branch_reflects_strangers_and_drops_our_own() {
    if !test_run::privileged(module_path!()) {
        return;
    }
    let payload = b"LCE1 opaque to the reflector, 32B";
    let stranger = echo_frame(STRANGER_IP, STRANGER_IP, 255, payload);
    let own = echo_frame(DUT_IP, DUT_IP, 254, payload);
    // The faithful object, for contrast: both pass untouched.
    let fast = FastPath::load(true);
    assert_eq!(fast.run(&stranger).action, XDP_PASS);
    assert_eq!(fast.run(&own).action, XDP_PASS);

    let unlisted = Switches {
        echo_unlisted: true,
        ..Switches::default()
    };
    let fast = FastPath::load_switched(session(true), unlisted);
    assert_eq!(
        fast.run(&stranger).action,
        XDP_TX,
        "the list lookup removed: a stranger's echo must be reflected, or this control proves nothing"
    );
    assert_eq!(fast_sum(&fast, verdict::ECHO_REFLECTED), 1);

    let gtsm_first = Switches {
        gtsm_first: true,
        ..Switches::default()
    };
    let fast = FastPath::load_switched(session(true), gtsm_first);
    assert_eq!(
        fast.run(&own).action,
        XDP_DROP,
        "GTSM first: our own returning echo must be dropped"
    );
    assert_eq!(
        fast.per_cpu_sum(names::DROPS_MAP, drop::BAD_TTL),
        1,
        "counted as bad_ttl"
    );
}

fn fast_sum(fast: &FastPath, verdict: u32) -> u64 {
    fast.per_cpu_sum(names::VERDICTS_MAP, verdict)
}

/// RFC 5880 6.6 and 6.8.7: a peer in Demand mode gets no periodic packet.
/// With `FLAG_POLLS_ONLY` the kernel answers its Polls with Final (our D
/// as the template has it) and hears its other packets without a reply;
/// a packet whose D bit disagrees with the flag is a change of the peer's
/// mode and goes to userspace, as it does for a session without the flag.
#[test]
fn a_demand_mode_peer_gets_finals_to_its_polls_and_nothing_else() {
    if !test_run::privileged(module_path!()) {
        return;
    }
    const D: u8 = 0x02;
    const P: u8 = 0x20;
    const F: u8 = 0x10;
    let ours = bfd(3, D, OUR_DISCR, PEER_DISCR);
    let fast = FastPath::load_with(SessionConfig {
        flags: linecard_common::bfd::FLAG_REPLY | linecard_common::bfd::FLAG_POLLS_ONLY,
        reply: ours,
        ..session(true)
    });
    let silent = frame(255, &bfd(3, D, PEER_DISCR, OUR_DISCR));
    let out = fast.run(&silent);
    assert_eq!(
        out.action, XDP_DROP,
        "a packet of a demanding peer is not answered"
    );
    assert_eq!(fast_sum(&fast, verdict::HEARD), 1);
    assert_eq!(fast_sum(&fast, verdict::DROPPED), 0, "heard, not refused");
    let heard = fast.state();
    assert_eq!((heard.rx_packets, heard.tx_packets), (1, 0));
    assert!(heard.last_rx_ns > 0, "its liveness counts");

    let out = fast.run(&frame(255, &bfd(3, D | P, PEER_DISCR, OUR_DISCR)));
    assert_eq!(out.action, XDP_TX, "a Poll is answered");
    let reply = &out.frame[42..66];
    assert_eq!(reply[1], (3 << 6) | D | F, "Up, our D, F set, P clear");
    assert_eq!(&reply[2..], &ours[2..], "the rest is the template");
    assert_eq!((fast.state().tx_packets, fast.state().finals_sent), (1, 1));

    for (what, flags) in [
        ("D cleared: the peer left Demand mode", 0),
        ("the peer's Final", D | F),
    ] {
        let before = fast_sum(&fast, verdict::PASSED);
        let out = fast.run(&frame(255, &bfd(3, flags, PEER_DISCR, OUR_DISCR)));
        assert_eq!(out.action, XDP_PASS, "{what}");
        assert_eq!(fast_sum(&fast, verdict::PASSED), before + 1, "{what}");
    }
    // Without the flag, D is userspace's, as before.
    let plain = FastPath::load(true);
    assert_eq!(plain.run(&silent).action, XDP_PASS);
    assert_eq!(
        plain
            .run(&frame(255, &bfd(3, D | P, PEER_DISCR, OUR_DISCR)))
            .action,
        XDP_PASS
    );
}

/// The peer's packet `p` with its Desired Min TX and Required Min RX, µs.
fn with_timers(mut p: [u8; 24], desired_min_tx_us: u32, required_min_rx_us: u32) -> [u8; 24] {
    p[12..16].copy_from_slice(&desired_min_tx_us.to_be_bytes());
    p[16..20].copy_from_slice(&required_min_rx_us.to_be_bytes());
    p
}

/// RFC 5880 6.8.7: a remote that asks for Required Min RX 0 gets no
/// periodic packet from the kernel, only a Final to its Poll (6.5); its
/// packets still count as heard. (Measured before: 47 replies in 2 s.)
#[test]
fn a_peer_that_wants_no_periodic_packets_gets_only_finals() {
    if !test_run::privileged(module_path!()) {
        return;
    }
    let fast = FastPath::load(true);
    let quiet = with_timers(bfd(3, 0, PEER_DISCR, OUR_DISCR), 10_000, 0);
    let out = fast.run(&frame(255, &quiet));
    assert_eq!(out.action, XDP_DROP, "no periodic reply");
    assert_eq!(fast.per_cpu_sum(names::VERDICTS_MAP, verdict::HEARD), 1);
    assert_eq!((fast.state().rx_packets, fast.state().tx_packets), (1, 0));
    let poll = with_timers(bfd(3, 0x20, PEER_DISCR, OUR_DISCR), 10_000, 0);
    let out = fast.run(&frame(255, &poll));
    assert_eq!(out.action, XDP_TX, "the Poll is answered");
    assert_eq!(out.frame[43] & 0x30, 0x10, "with F, P clear");
    assert_eq!(fast.state().finals_sent, 1);
}

/// RFC 5880 6.8.7: never more often than the larger of our Desired Min TX
/// and the remote's Required Min RX, from the packet that raised it on.
/// A peer that asks for 200 ms but still sends every 50 ms is answered
/// only once the gap drawn at our last packet (75-100 % of 200 ms) has
/// passed; its packets in between are heard. (Measured before: replies
/// every 38-46 ms.)
#[test]
fn a_peer_that_raised_its_required_min_rx_is_paced_to_it() {
    if !test_run::privileged(module_path!()) {
        return;
    }
    const MS: u64 = 1_000_000;
    let mut fast = FastPath::load(true);
    let slow_down = frame(
        255,
        &with_timers(bfd(3, 0, PEER_DISCR, OUR_DISCR), 50_000, 200_000),
    );
    assert_eq!(fast.run(&slow_down).action, XDP_TX, "the first is answered");
    let drawn = fast.state().next_gap_ns;
    assert!((150 * MS..=200 * MS).contains(&drawn), "drawn {drawn}");
    // 40 ms after our reply: too soon.
    fast.our_last_packet_at(monotonic_ns() - 40 * MS);
    assert_eq!(fast.run(&slow_down).action, XDP_DROP, "40 ms after ours");
    assert_eq!(fast.per_cpu_sum(names::VERDICTS_MAP, verdict::HEARD), 1);
    // Past the drawn gap: answered.
    fast.our_last_packet_at(monotonic_ns() - drawn - MS);
    assert_eq!(fast.run(&slow_down).action, XDP_TX, "past the gap drawn");
    assert_eq!(fast.state().tx_packets, 2);
}

/// With Detect Mult 1, no gap longer than 90 % of the interval (6.8.7):
/// the kernel draws 75-90 %, as userspace does.
#[test]
fn with_detect_mult_1_the_kernel_draws_at_most_90_percent() {
    if !test_run::privileged(module_path!()) {
        return;
    }
    const MS: u64 = 1_000_000;
    let mut ours = bfd(3, 0, OUR_DISCR, PEER_DISCR);
    ours[2] = 1;
    let mut fast = FastPath::load_with(SessionConfig {
        reply: ours,
        ..session(true)
    });
    let slow_down = frame(
        255,
        &with_timers(bfd(3, 0, PEER_DISCR, OUR_DISCR), 50_000, 200_000),
    );
    let mut drawn = Vec::new();
    for _ in 0..40 {
        fast.an_interval_later();
        assert_eq!(fast.run(&slow_down).action, XDP_TX);
        drawn.push(fast.state().next_gap_ns);
    }
    assert!(
        drawn.iter().all(|g| (150 * MS..=180 * MS).contains(g)),
        "{drawn:?}"
    );
    assert!(
        drawn.iter().any(|&g| g != drawn[0]),
        "jittered per packet: {drawn:?}"
    );
}

/// RFC 5880 6.8.4: every valid packet sets the detection time the sweep
/// judges the next silence by, from that packet's Detect Mult and Desired
/// Min TX and our Required Min RX: a peer that slows down by a Poll the
/// kernel answers is not declared dead by the old time (6.8.3).
#[test]
fn each_packet_sets_the_detection_time_the_sweep_judges_by() {
    if !test_run::privileged(module_path!()) {
        return;
    }
    const MS: u64 = 1_000_000;
    let fast = FastPath::load(true);
    assert_eq!(fast.run(&frame(255, &peer_up())).action, XDP_TX);
    assert_eq!(fast.state().detect_ns, 30 * MS, "3 x 10 ms");
    // The peer's Poll announcing 50 ms at Detect Mult 5, answered here.
    let mut slower = with_timers(bfd(3, 0x20, PEER_DISCR, OUR_DISCR), 50_000, 10_000);
    slower[2] = 5;
    assert_eq!(fast.run(&frame(255, &slower)).action, XDP_TX, "the Final");
    assert_eq!(
        fast.state().detect_ns,
        250 * MS,
        "5 x 50 ms from the Poll on"
    );
    // Our Required Min RX (the reply's) is the larger: it counts.
    let mut ours = bfd(3, 0, OUR_DISCR, PEER_DISCR);
    ours[16..20].copy_from_slice(&100_000u32.to_be_bytes());
    let slow_receiver = FastPath::load_with(SessionConfig {
        reply: ours,
        ..session(true)
    });
    slow_receiver.run(&frame(255, &peer_up()));
    assert_eq!(slow_receiver.state().detect_ns, 300 * MS, "3 x 100 ms");
}
