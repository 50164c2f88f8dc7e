//! Crafted frames for the fast path's tests and benchmarks: a peer at
//! 192.0.2.2 talking to the DUT at 192.0.2.1 (the lab's addresses), and one
//! offloaded session keyed by [`OUR_DISCR`].

use linecard_common::bfd::{auth_type, AuthKeyRef, AuthSecret, SessionConfig, FLAG_REPLY};
use md5::Digest as _;

pub const OUR_DISCR: u32 = 0x0a0b_0c0d;
pub const PEER_DISCR: u32 = 0x1111_2222;
pub const DUT_MAC: [u8; 6] = [0x02, 0x1c, 0, 0, 0, 1];
pub const PEER_MAC: [u8; 6] = [0x02, 0x1c, 0, 0, 0, 2];
pub const DUT_IP: [u8; 4] = [192, 0, 2, 1];
pub const PEER_IP: [u8; 4] = [192, 0, 2, 2];
pub const OUR_PORT: u16 = 60_000;
/// Where the session's state lives in `LC_STATE`.
pub const SLOT: u32 = 7;

/// IPv4 as v4-mapped IPv6, the maps' address encoding.
pub fn mapped(ip: [u8; 4]) -> [u8; 16] {
    let mut m = [0u8; 16];
    m[10] = 0xff;
    m[11] = 0xff;
    m[12..].copy_from_slice(&ip);
    m
}

/// A BFD control packet: state, flag bits, mult 3, discriminators, 10 ms.
pub fn bfd(state: u8, flags: u8, my: u32, your: u32) -> [u8; 24] {
    let mut p = [0u8; 24];
    p[0] = 0x20;
    p[1] = (state << 6) | flags;
    p[2] = 3;
    p[3] = 24;
    p[4..8].copy_from_slice(&my.to_be_bytes());
    p[8..12].copy_from_slice(&your.to_be_bytes());
    p[12..16].copy_from_slice(&10_000u32.to_be_bytes());
    p[16..20].copy_from_slice(&10_000u32.to_be_bytes());
    p
}

/// The peer's steady-state packet: Up, to our discriminator.
pub fn peer_up() -> [u8; 24] {
    bfd(3, 0, PEER_DISCR, OUR_DISCR)
}

/// Ethernet/IPv4/UDP frame from the peer to the DUT's port 3784.
pub fn frame(ttl: u8, payload: &[u8]) -> Vec<u8> {
    frame_to(3784, ttl, payload)
}

/// Ethernet/IPv4/UDP frame from the peer to the DUT's `port`.
pub fn frame_to(port: u16, ttl: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&DUT_MAC);
    f.extend_from_slice(&PEER_MAC);
    f.extend_from_slice(&[0x08, 0x00]);
    f.extend_from_slice(&[0x45, 0xc0]);
    f.extend_from_slice(&((20 + 8 + payload.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0x12, 0x34, 0x40, 0x00, ttl, 17, 0, 0]);
    f.extend_from_slice(&PEER_IP);
    f.extend_from_slice(&DUT_IP);
    f.extend_from_slice(&49152u16.to_be_bytes());
    f.extend_from_slice(&port.to_be_bytes());
    f.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    f
}

/// The lab's IPv6 addresses (2001:db8::1 and 2001:db8::2).
pub const DUT_IP6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
pub const PEER_IP6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

/// Ethernet/IPv6/UDP frame from the peer to the DUT's port 3784, with a
/// correct UDP checksum; `next_header` other than 17 puts the bytes behind
/// that header type instead (an extension header, or ICMPv6).
pub fn frame6(hop_limit: u8, next_header: u8, payload: &[u8]) -> Vec<u8> {
    let udp_len = (8 + payload.len()) as u16;
    let mut f = Vec::new();
    f.extend_from_slice(&DUT_MAC);
    f.extend_from_slice(&PEER_MAC);
    f.extend_from_slice(&[0x86, 0xdd]);
    f.extend_from_slice(&[0x6c, 0x00, 0x00, 0x00]);
    f.extend_from_slice(&udp_len.to_be_bytes());
    f.extend_from_slice(&[next_header, hop_limit]);
    f.extend_from_slice(&PEER_IP6);
    f.extend_from_slice(&DUT_IP6);
    f.extend_from_slice(&49152u16.to_be_bytes());
    f.extend_from_slice(&3784u16.to_be_bytes());
    f.extend_from_slice(&udp_len.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    let check = udp6_checksum(&f[22..38], &f[38..54], &f[54..]);
    f[60..62].copy_from_slice(&check.to_be_bytes());
    f
}

/// The UDP checksum over IPv6 (RFC 8200 8.1) of `udp` (header and
/// payload, checksum field zero) between `src` and `dst`.
pub fn udp6_checksum(src: &[u8], dst: &[u8], udp: &[u8]) -> u16 {
    let mut bytes = Vec::new();
    bytes.extend_from_slice(src);
    bytes.extend_from_slice(dst);
    bytes.extend_from_slice(&(udp.len() as u32).to_be_bytes());
    bytes.extend_from_slice(&[0, 0, 0, 17]);
    bytes.extend_from_slice(udp);
    bytes[40 + 6..40 + 8].copy_from_slice(&[0, 0]);
    match !ones_complement_sum(&bytes) {
        0 => 0xffff,
        c => c,
    }
}

/// The IPv6 session the frames of [`frame6`] belong to.
pub fn session6(reply: bool) -> SessionConfig {
    SessionConfig {
        local_ip: DUT_IP6,
        peer_ip: PEER_IP6,
        ..session(reply)
    }
}

/// The session the frames above belong to.
pub fn session(reply: bool) -> SessionConfig {
    SessionConfig {
        local_ip: mapped(DUT_IP),
        peer_ip: mapped(PEER_IP),
        local_mac: DUT_MAC,
        peer_mac: PEER_MAC,
        local_port_be: OUR_PORT.to_be(),
        min_ttl: 255,
        auth_type: 0,
        reply: bfd(3, 0, OUR_DISCR, PEER_DISCR),
        flags: if reply { FLAG_REPLY } else { 0 },
        slot: SLOT,
        detect_ns: 30_000_000,
        send_key_id: AUTH_KEY_ID,
        _reserved: [0; 7],
    }
}

/// One crafted frame per drop reason, with its `bfd::drop` index.
pub fn drop_cases() -> Vec<(&'static str, u32, Vec<u8>)> {
    drop_cases_for(PEER_DISCR, OUR_DISCR)
}

/// [`drop_cases`] around the peer's Up packet of a session whose
/// discriminators are `my` (the peer's) and `your` (ours): the cases that
/// need a session (spoofed source, hop mismatch) name that one.
pub fn drop_cases_for(my: u32, your: u32) -> Vec<(&'static str, u32, Vec<u8>)> {
    use linecard_common::bfd::drop;
    let good = bfd(3, 0, my, your);
    let with = |edit: &dyn Fn(&mut Vec<u8>)| {
        let mut f = frame(255, &good);
        edit(&mut f);
        f
    };
    vec![
        ("IP options", drop::IP_OPTIONS, {
            let mut f = frame(255, &good);
            f[14] = 0x46;
            f.splice(34..34, [1, 1, 1, 1]); // a 4-byte option (NOPs)
            f
        }),
        ("TTL 64", drop::BAD_TTL, frame(64, &good)),
        ("TTL 254", drop::BAD_TTL, frame(254, &good)),
        ("fragment", drop::FRAGMENT, with(&|f| f[20] = 0x20)),
        ("truncated", drop::TRUNCATED, frame(255, &good[..20])),
        ("version 2", drop::BAD_VERSION, with(&|f| f[42] = 0x40)),
        ("length 23", drop::BAD_LENGTH, with(&|f| f[45] = 23)),
        (
            "length beyond payload",
            drop::BAD_LENGTH,
            with(&|f| f[45] = 40),
        ),
        ("multiplier 0", drop::ZERO_MULTIPLIER, with(&|f| f[44] = 0)),
        ("M bit", drop::MULTIPOINT, with(&|f| f[43] |= 1)),
        (
            "my discriminator 0",
            drop::ZERO_MY_DISCRIMINATOR,
            with(&|f| f[46..50].fill(0)),
        ),
        (
            "your discriminator 0 in Up",
            drop::ZERO_YOUR_DISCRIMINATOR,
            with(&|f| f[50..54].fill(0)),
        ),
        (
            "wrong discriminator",
            drop::NO_SESSION,
            with(&|f| f[50..54].copy_from_slice(&0xdead_beefu32.to_be_bytes())),
        ),
        (
            "spoofed source",
            drop::ADDRESS_MISMATCH,
            with(&|f| f[29] = 3),
        ),
        (
            "multihop port, single-hop session",
            drop::HOP_MISMATCH,
            frame_to(4784, 200, &good),
        ),
        (
            "A bit, no authentication configured",
            drop::AUTH_MISMATCH,
            frame(
                255,
                &authenticated(good, auth_type::SIMPLE_PASSWORD, 1, 0, b"secret"),
            ),
        ),
        ("A bit, length 25", drop::BAD_LENGTH, {
            let mut p = good.to_vec();
            p[1] |= 0x04;
            p[3] = 25;
            p.push(auth_type::SIMPLE_PASSWORD);
            frame(255, &p)
        }),
    ]
}

/// The key of the authenticated session of [`authenticated`] frames.
pub const AUTH_KEY_ID: u8 = 1;
pub const AUTH_SECRET: &[u8] = b"linecard-lab-key";

/// `LC_AUTH_KEYS` entry for our session's key `id`.
pub fn auth_key(id: u8, secret: &[u8]) -> (AuthKeyRef, AuthSecret) {
    auth_key_of(OUR_DISCR, id, secret)
}

/// `LC_AUTH_KEYS` entry for key `id` of session `discr`.
pub fn auth_key_of(discr: u32, id: u8, secret: &[u8]) -> (AuthKeyRef, AuthSecret) {
    (
        AuthKeyRef::new(discr, id),
        AuthSecret::new(secret).expect("a key of at most 20 bytes"),
    )
}

/// `packet` (24 bytes) with the A bit and an authentication section of
/// `kind` (RFC 5880 sections 4.2-4.4) under `key_id` and `secret`; keyed
/// types carry `sequence` and the digest computed by the general `md-5`
/// and `sha1` crates, the reference the fast path's own is held to.
pub fn authenticated(
    packet: [u8; 24],
    kind: u8,
    key_id: u8,
    sequence: u32,
    secret: &[u8],
) -> Vec<u8> {
    let mut p = packet.to_vec();
    p[1] |= 0x04;
    match kind {
        auth_type::SIMPLE_PASSWORD => {
            p.extend_from_slice(&[kind, 3 + secret.len() as u8, key_id]);
            p.extend_from_slice(secret);
            p[3] = p.len() as u8;
        }
        _ => {
            let digest_len = if kind <= auth_type::METICULOUS_KEYED_MD5 {
                16
            } else {
                20
            };
            p.extend_from_slice(&[kind, 8 + digest_len as u8, key_id, 0]);
            p.extend_from_slice(&sequence.to_be_bytes());
            let mut key = vec![0u8; digest_len];
            key[..secret.len()].copy_from_slice(secret);
            p.extend_from_slice(&key);
            // The digest covers the Length field: set it first.
            p[3] = p.len() as u8;
            let digest = if digest_len == 16 {
                md5::Md5::digest(&p).to_vec()
            } else {
                sha1::Sha1::digest(&p).to_vec()
            };
            p[32..].copy_from_slice(&digest);
        }
    }
    p
}

/// The peer's Up packet to our session, authenticated.
pub fn peer_up_authenticated(kind: u8, sequence: u32) -> Vec<u8> {
    frame(
        255,
        &authenticated(peer_up(), kind, AUTH_KEY_ID, sequence, AUTH_SECRET),
    )
}

/// The drop cases of an authenticated session of `kind` (a keyed type),
/// each against the key of [`auth_key`]`(AUTH_KEY_ID, AUTH_SECRET)`. None
/// is stateful: each would be refused as the first packet too, and
/// none is decided by the sequence window after an accepted 100.
pub fn auth_drop_cases(kind: u8) -> Vec<(&'static str, u32, Vec<u8>)> {
    use linecard_common::bfd::drop;
    // Inside the window of a session that accepted 100 (the meticulous
    // types refuse a repeat): the sequence check never decides these.
    const SEQUENCE: u32 = 101;
    let up = peer_up();
    let sealed = |edit: &dyn Fn(&mut Vec<u8>)| {
        let mut p = authenticated(up, kind, AUTH_KEY_ID, SEQUENCE, AUTH_SECRET);
        edit(&mut p);
        frame(255, &p)
    };
    let other_kind = if kind <= auth_type::METICULOUS_KEYED_MD5 {
        auth_type::KEYED_SHA1
    } else {
        auth_type::KEYED_MD5
    };
    vec![
        ("no A bit", drop::AUTH_MISMATCH, frame(255, &up)),
        (
            "another Auth Type",
            drop::AUTH_MISMATCH,
            frame(
                255,
                &authenticated(up, other_kind, AUTH_KEY_ID, SEQUENCE, AUTH_SECRET),
            ),
        ),
        (
            "unknown Key ID",
            drop::AUTH_FAILED,
            frame(255, &authenticated(up, kind, 9, SEQUENCE, AUTH_SECRET)),
        ),
        (
            "wrong key",
            drop::AUTH_FAILED,
            frame(
                255,
                &authenticated(up, kind, AUTH_KEY_ID, SEQUENCE, b"not-the-key"),
            ),
        ),
        ("digest flipped", drop::AUTH_FAILED, sealed(&|p| p[40] ^= 1)),
        (
            "timers changed after signing",
            drop::AUTH_FAILED,
            sealed(&|p| p[15] ^= 1),
        ),
        ("Auth Len 20", drop::BAD_AUTH, sealed(&|p| p[25] = 20)),
        (
            "section beyond Length",
            drop::BAD_AUTH,
            sealed(&|p| p[3] -= 4),
        ),
    ]
}

/// Fills in the IPv4 header checksum of an Ethernet frame (the header length
/// taken from IHL, options included), for frames that cross a real stack:
/// a bridge with netfilter drops a bad checksum before XDP sees it.
pub fn fix_ipv4_checksum(frame: &mut [u8]) {
    let ihl = usize::from(frame[14] & 0x0f) * 4;
    frame[24] = 0;
    frame[25] = 0;
    let sum = ones_complement_sum(&frame[14..14 + ihl]);
    frame[24..26].copy_from_slice(&(!sum).to_be_bytes());
}

pub use linecard_common::checksum::ones_complement_sum;

/// The lab's spare host (192.0.2.3), a stranger to every session.
pub const STRANGER_IP: [u8; 4] = [192, 0, 2, 3];

/// An echo packet (RFC 5881 section 4): Ethernet/IPv4/UDP 3785 -> 3785
/// from the peer's MAC to the DUT's, addressed `src` -> `dst` (a peer's
/// own echo is self-addressed), with a valid header checksum and `payload`
/// the originator's own (it is opaque to a reflector).
pub fn echo_frame(src: [u8; 4], dst: [u8; 4], ttl: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = frame_to(3785, ttl, payload);
    f[26..30].copy_from_slice(&src);
    f[30..34].copy_from_slice(&dst);
    f[34..36].copy_from_slice(&3785u16.to_be_bytes());
    fix_ipv4_checksum(&mut f);
    f
}

/// [`echo_frame`] over IPv6, with its mandatory UDP checksum.
pub fn echo_frame6(src: [u8; 16], dst: [u8; 16], hop_limit: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = frame6(hop_limit, 17, payload);
    f[22..38].copy_from_slice(&src);
    f[38..54].copy_from_slice(&dst);
    f[54..56].copy_from_slice(&3785u16.to_be_bytes());
    f[56..58].copy_from_slice(&3785u16.to_be_bytes());
    f[60..62].fill(0);
    let check = udp6_checksum(&src, &dst, &f[54..]);
    f[60..62].copy_from_slice(&check.to_be_bytes());
    f
}
