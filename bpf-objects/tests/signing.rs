//! The fast path signs its RX-clocked replies (RFC 5880 6.7.2-6.7.4), in
//! the kernel, with BPF_PROG_TEST_RUN: for every authentication type the
//! reply must be byte for byte the packet the general `md-5`/`sha1`
//! crates sign (not the code under test), its keyed Sequence Number taken
//! from `LC_XMIT_SEQ` (the bfd.XmitAuthSeq every sender of the session
//! shares) and one higher each reply. Needs root; without it, a printed
//! skip (a failure under LINECARD_REQUIRE_PRIVILEGED=1).

use aya::maps::{HashMap, MapData};
use linecard_bpf_objects::craft::{
    auth_key, authenticated, bfd, frame, frame6, peer_up, session, session6, udp6_checksum,
    AUTH_KEY_ID, AUTH_SECRET, OUR_DISCR, PEER_DISCR, SLOT,
};
use linecard_bpf_objects::test_run::{self, Loaded};
use linecard_common::bfd::{auth_type, AuthKeyRef, AuthSecret, SessionConfig};
use linecard_common::names;

const XDP_PASS: u32 = 2;
const XDP_TX: u32 = 3;

const KINDS: [u8; 5] = [
    auth_type::SIMPLE_PASSWORD,
    auth_type::KEYED_MD5,
    auth_type::METICULOUS_KEYED_MD5,
    auth_type::KEYED_SHA1,
    auth_type::METICULOUS_KEYED_SHA1,
];

/// The second key, the one we sign with in these tests: a reply signed
/// with the peer's key (the one its packets name) would pass unnoticed.
/// As long as the peer's (16 bytes), so that a password fits its frame.
const SEND_KEY_ID: u8 = 2;
const SEND_SECRET: &[u8] = b"our-send-key-16b";

/// Our steady packet with its section, as the engine's codec emits it:
/// the kernel's template is its first 24 bytes.
fn ours(kind: u8, sequence: u32) -> Vec<u8> {
    authenticated(
        bfd(3, 0, OUR_DISCR, PEER_DISCR),
        kind,
        SEND_KEY_ID,
        sequence,
        SEND_SECRET,
    )
}

struct Signing {
    fast: Loaded,
}

impl Signing {
    /// An offloaded session of `kind` whose next bfd.XmitAuthSeq is
    /// `next`, both keys installed as the engine installs them.
    fn load(kind: u8, base: SessionConfig, next: u64) -> Self {
        let mut reply = [0u8; 24];
        reply.copy_from_slice(&ours(kind, 0)[..24]);
        let config = SessionConfig {
            auth_type: kind,
            reply,
            send_key_id: SEND_KEY_ID,
            ..base
        };
        let mut fast = Loaded::new(config, Default::default());
        fast.install_key(AUTH_KEY_ID, AUTH_SECRET);
        fast.install_key(SEND_KEY_ID, SEND_SECRET);
        let mut signing = Self { fast };
        signing.set_next(next);
        signing
    }

    fn set_next(&mut self, next: u64) {
        self.fast.set(names::XMIT_SEQ_MAP, SLOT, next);
    }

    fn next(&self) -> u64 {
        self.fast.get(names::XMIT_SEQ_MAP, SLOT)
    }

    /// Forgets our last reply: the next packet of the peer is answered.
    fn an_interval_later(&mut self) {
        self.fast.an_interval_later();
    }

    fn run(&self, frame: &[u8]) -> test_run::TestRun {
        self.fast.run(frame)
    }
}

/// The peer's genuine Up packet with `sequence`, under its key.
fn from_peer(kind: u8, sequence: u32) -> Vec<u8> {
    authenticated(peer_up(), kind, AUTH_KEY_ID, sequence, AUTH_SECRET)
}

#[test]
fn every_auth_type_is_signed_in_the_kernel_from_the_shared_sequence() {
    if !test_run::privileged(module_path!()) {
        return;
    }
    for kind in KINDS {
        let keyed = kind != auth_type::SIMPLE_PASSWORD;
        let mut fast = Signing::load(kind, session(true), 1000);
        for (round, peer_sequence) in [(0u32, 100u32), (1, 101)] {
            fast.an_interval_later();
            let out = fast.run(&frame(255, &from_peer(kind, peer_sequence)));
            assert_eq!(out.action, XDP_TX, "type {kind} round {round}");
            let f = &out.frame;
            let expected = ours(kind, 1000 + round);
            assert_eq!(
                &f[42..],
                expected.as_slice(),
                "type {kind} round {round}: our packet, signed with key {SEND_KEY_ID}"
            );
            let total = u16::from_be_bytes([f[16], f[17]]) as usize;
            let udp = u16::from_be_bytes([f[38], f[39]]) as usize;
            assert_eq!(
                (total, udp, f.len()),
                (28 + expected.len(), 8 + expected.len(), 42 + expected.len()),
                "type {kind}: lengths"
            );
            assert_eq!(
                linecard_bpf_objects::craft::ones_complement_sum(&f[14..34]),
                0xffff,
                "type {kind}: IPv4 header checksum"
            );
        }
        // Two replies, two numbers taken (a password takes none).
        assert_eq!(
            fast.next(),
            if keyed { 1002 } else { 1000 },
            "type {kind}: LC_XMIT_SEQ after two replies"
        );
    }
}

#[test]
fn a_number_another_sender_took_is_never_reused() {
    if !test_run::privileged(module_path!()) {
        return;
    }
    // The responder or the userspace loop took 1000..=1004 meanwhile.
    let kind = auth_type::METICULOUS_KEYED_SHA1;
    let mut fast = Signing::load(kind, session(true), 1000);
    fast.an_interval_later();
    assert_eq!(fast.run(&frame(255, &from_peer(kind, 100))).action, XDP_TX);
    fast.set_next(1005);
    fast.an_interval_later();
    let out = fast.run(&frame(255, &from_peer(kind, 101)));
    assert_eq!(&out.frame[42..], ours(kind, 1005).as_slice());
    assert_eq!(fast.next(), 1006);
}

#[test]
fn an_ipv6_reply_is_signed_under_a_valid_udp_checksum() {
    if !test_run::privileged(module_path!()) {
        return;
    }
    for kind in KINDS {
        let mut fast = Signing::load(kind, session6(true), 7);
        fast.an_interval_later();
        let out = fast.run(&frame6(255, 17, &from_peer(kind, 5)));
        assert_eq!(out.action, XDP_TX, "type {kind}");
        let f = &out.frame;
        let expected = ours(kind, 7);
        assert_eq!(&f[62..], expected.as_slice(), "type {kind}");
        let mut udp = f[54..].to_vec();
        udp[6] = 0;
        udp[7] = 0;
        assert_eq!(
            u16::from_be_bytes([f[60], f[61]]),
            udp6_checksum(&f[22..38], &f[38..54], &udp),
            "type {kind}: UDP checksum over the signed packet"
        );
    }
}

#[test]
fn a_reply_the_kernel_cannot_sign_goes_to_userspace_whole() {
    if !test_run::privileged(module_path!()) {
        return;
    }
    // A password of another length than ours: our packet would not fit
    // the peer's frame.
    let kind = auth_type::SIMPLE_PASSWORD;
    let mut fast = Signing::load(kind, session(true), 0);
    fast.an_interval_later();
    let as_long = authenticated(peer_up(), kind, AUTH_KEY_ID, 0, AUTH_SECRET);
    let mut shorter_key = Signing::load(kind, session(true), 0);
    {
        let mut keys: HashMap<&mut MapData, AuthKeyRef, AuthSecret> =
            HashMap::try_from(shorter_key.fast.bpf.map_mut(names::AUTH_KEYS_MAP).unwrap()).unwrap();
        let (key, value) = auth_key(AUTH_KEY_ID, b"short");
        keys.insert(key, value, 0).unwrap();
    }
    shorter_key.an_interval_later();
    let short = authenticated(peer_up(), kind, AUTH_KEY_ID, 0, b"short");
    let out = shorter_key.run(&frame(255, &short));
    assert_eq!(out.action, XDP_PASS, "a frame too short for our password");
    assert_eq!(&out.frame[42..], short.as_slice(), "passed untouched");
    // Our send key missing from the kernel: unsigned is never sent.
    let mut keyless = Signing::load(auth_type::KEYED_SHA1, session(true), 0);
    {
        let mut keys: HashMap<&mut MapData, AuthKeyRef, AuthSecret> =
            HashMap::try_from(keyless.fast.bpf.map_mut(names::AUTH_KEYS_MAP).unwrap()).unwrap();
        keys.remove(&AuthKeyRef::new(OUR_DISCR, SEND_KEY_ID))
            .unwrap();
    }
    keyless.an_interval_later();
    let genuine = from_peer(auth_type::KEYED_SHA1, 3);
    let out = keyless.run(&frame(255, &genuine));
    assert_eq!(out.action, XDP_PASS, "no send key");
    assert_eq!(&out.frame[42..], genuine.as_slice(), "passed untouched");
    // The control: a password as long as ours is answered.
    assert_eq!(fast.run(&frame(255, &as_long)).action, XDP_TX);
}

#[test]
fn a_session_verified_in_userspace_passes_its_authenticated_packets_unjudged() {
    if !test_run::privileged(module_path!()) {
        return;
    }
    // FRR bfdd's HMAC-SHA1 (`digest = "frr-hmac-sha1"`): a digest the
    // kernel does not compute. Its packets go to userspace, which
    // verifies them; the same packet to a session the kernel verifies
    // (RFC 5880's digest) is refused, the control.
    let kind = auth_type::KEYED_SHA1;
    let mut frr_digest = from_peer(kind, 100);
    let last = frr_digest.len() - 1;
    frr_digest[last] ^= 1;
    let userspace = Signing::load(
        kind,
        SessionConfig {
            flags: linecard_common::bfd::FLAG_AUTH_IN_USERSPACE,
            ..session(false)
        },
        0,
    );
    let out = userspace.run(&frame(255, &frr_digest));
    assert_eq!(out.action, XDP_PASS, "verified in userspace");
    assert_eq!(&out.frame[42..], frr_digest.as_slice(), "untouched");
    let kernel = Signing::load(kind, session(false), 0);
    assert_eq!(
        kernel.run(&frame(255, &frr_digest)).action,
        1,
        "XDP_DROP: the kernel's own verification refuses it"
    );
}
