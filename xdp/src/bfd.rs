//! The BFD fast path (`lc_bfd`): validation before userspace and
//! RX-clocked replies.
//!
//! Every single-hop BFD frame is checked here first, in this order: IPv4
//! without options (options shift the UDP header), no fragment, TTL 255
//! (GTSM, RFC 5881 section 5) before any map lookup, then the
//! session-independent rules of RFC 5880 section 6.8.6, then Your
//! Discriminator must name a session between exactly these addresses,
//! then, for an authenticated session, the password or the keyed digest
//! and the sequence window (6.7), so that a spoofed or replayed packet
//! never counts as heard. Failures are dropped and counted by reason;
//! nothing invalid reaches a userspace socket. While a session is Up and offloaded, each valid packet
//! from the peer is rewritten in place into our reply and sent back with
//! XDP_TX; a Poll is answered with Final. A peer in Demand mode gets only
//! the Finals to its Polls (`FLAG_POLLS_ONLY`). Everything else valid goes to
//! userspace (XDP_PASS), which keeps the state machine. A timer sweep
//! detects silent peers and keeps each offloaded session's own clock for
//! when the peer does not clock us (it stalls, or it is RX-clocked too).
//!
//! The echo port (3785) is judged before GTSM, because our own echoes come
//! back at TTL 254 by definition: only a peer's self-addressed echo, at
//! TTL 255, from a peer listed in `LC_ECHO_PEERS`, is reflected (TTL
//! decremented, payload untouched); everything else on 3785 passes.

use aya_ebpf::{
    bindings::{bpf_timer, xdp_action},
    btf_maps::Array as BtfArray,
    helpers::generated::{
        bpf_get_prandom_u32, bpf_ktime_get_ns, bpf_loop, bpf_timer_init, bpf_timer_set_callback,
        bpf_timer_start, bpf_xdp_adjust_tail,
    },
    macros::{btf_map, map, xdp},
    maps::{Array, HashMap, PerCpuArray, RingBuf},
    programs::XdpContext,
};
use core::ffi::c_void;
use linecard_common::bfd::{
    auth_seq_known_lapse_ns, auth_type, detection_time_ns, drop, event, jittered_gap_ns,
    judged_detection_ns, longest_gap_ns, periodic_interval_ns, reply_floor_ns, verdict, AuthKeyRef,
    AuthSecret, DeadMan, EchoPeer, SessionConfig, SessionState, SlotConfig, SweepEvent,
    DROP_REASONS, FLAG_AUTH_IN_USERSPACE, FLAG_MULTIHOP, FLAG_POLLS_ONLY, FLAG_REPLY,
    MAX_AUTH_KEYS, MAX_SESSIONS, MD5_AUTH_LEN, PORT_ECHO, PORT_MULTI_HOP, PORT_SINGLE_HOP,
    SHA1_AUTH_LEN, SWEEP_MIN_NS, SWEEP_PERIOD_NS, SWEEP_SLOTS, VERDICTS,
};
use linecard_common::digest::{md5_single_block_in, sha1_single_block_in};
use linecard_common::verify::VerifyGuard;

mod auth;
use auth::{verify_auth, Received, AUTH_SCRATCH_LEN};
mod sign;
use sign::{payload_sum, sign, signer};

#[map]
static LC_SESSIONS: HashMap<u32, SessionConfig> = HashMap::with_max_entries(MAX_SESSIONS, 0);
#[map]
static LC_STATE: Array<SessionState> = Array::with_max_entries(MAX_SESSIONS, 0);
#[map]
static LC_DROPS: PerCpuArray<u64> = PerCpuArray::with_max_entries(DROP_REASONS, 0);
#[map]
static LC_VERDICTS: PerCpuArray<u64> = PerCpuArray::with_max_entries(VERDICTS, 0);
#[map]
static LC_SLOTS: Array<SlotConfig> = Array::with_max_entries(SWEEP_SLOTS, 0);
/// How many slots from 0 the sweep visits (written by userspace only).
#[map]
static LC_SWEEP_LEN: Array<u32> = Array::with_max_entries(1, 0);
/// When the responder thread last sent for each slot's own clock
/// (`CLOCK_MONOTONIC` ns; written by that thread only).
#[map]
static LC_CLOCK_SENT: Array<u64> = Array::with_max_entries(SWEEP_SLOTS, 0);
/// The engine's heartbeat and its limit (written by the responder only).
#[map]
static LC_DEAD_MAN: Array<DeadMan> = Array::with_max_entries(1, 0);
/// The peers whose self-addressed echoes we reflect (written by userspace).
#[map]
static LC_ECHO_PEERS: HashMap<[u8; 16], EchoPeer> = HashMap::with_max_entries(MAX_SESSIONS, 0);
/// The keys of authenticated sessions (written by userspace).
#[map]
static LC_AUTH_KEYS: HashMap<AuthKeyRef, AuthSecret> = HashMap::with_max_entries(MAX_AUTH_KEYS, 0);
/// Each CPU's working memory for the authenticated packet being verified:
/// in a map, not on the stack, where it would take the call chain past
/// its 512 bytes.
#[map]
static LC_AUTH_SCRATCH: PerCpuArray<AuthScratch> = PerCpuArray::with_max_entries(1, 0);

#[repr(C)]
pub struct AuthScratch {
    /// The packet, its digest field overwritten with the key.
    packet: [u8; AUTH_SCRATCH_LEN],
    /// The digest field as received, and the one computed (`auth::keyed`;
    /// both at multiples of 4, compared a word at a time).
    received: [u8; 20],
    expected: [u8; 20],
    /// The digest's 16-word block or schedule.
    words: [u32; 16],
    /// What `auth::lc_verify_md5` and `lc_verify_sha1` know of the packet
    /// beside its bytes (`auth::Received`): here rather than in arguments,
    /// which a BPF call takes five of.
    now_ns: u64,
    lapse_ns: u64,
    slot: u32,
    kind: u32,
    detect_mult: u32,
    desired_min_tx_us: u32,
    our_required_min_rx_us: u32,
    /// 1: the packet being verified took a digest from the budget.
    charged: u32,
}
/// Each authenticated session's digest budget and expected digests, by
/// `LC_STATE` slot (`linecard_common::verify`).
#[map]
static LC_VERIFY: Array<VerifyGuard> = Array::with_max_entries(MAX_SESSIONS, 0);
/// Room for every slot's two events at once (40 bytes each with the record
/// header): a burst of clock events must not crowd out a detection.
#[map]
static LC_EVENTS: RingBuf = RingBuf::with_byte_size(512 * 1024, 0);

mod expect;
mod sweep;
use sweep::{clock_sent, ensure_sweep};

/// `names::FIXED_SWEEP_GLOBAL`: 1 only for the negative control; set by
/// the loader before verification, so the verifier sees a constant.
#[no_mangle]
static LC_FIXED_SWEEP: u8 = 0;

/// `names::UNVERIFIED_AUTH_GLOBAL`: 1 only for the negative control, set
/// by the loader like [`LC_FIXED_SWEEP`].
#[no_mangle]
static LC_UNVERIFIED_AUTH: u8 = 0;

/// `names::ECHO_UNLISTED_GLOBAL` and `names::GTSM_FIRST_GLOBAL`: 1 only
/// for the fast-path tests' negative controls (guards removed).
#[no_mangle]
static LC_ECHO_UNLISTED: u8 = 0;
#[no_mangle]
static LC_GTSM_FIRST: u8 = 0;

/// Reads a load-time constant (`.rodata`): the volatile read keeps LLVM
/// from folding the default 0, so the loader's value is what runs.
#[inline(always)]
fn switch_on(global: &u8) -> bool {
    // SAFETY: a read of a static.
    unsafe { core::ptr::read_volatile(global) != 0 }
}

#[inline(always)]
fn max(a: u64, b: u64) -> u64 {
    if a > b {
        a
    } else {
        b
    }
}

#[inline(always)]
fn min(a: u64, b: u64) -> u64 {
    if a < b {
        a
    } else {
        b
    }
}

const ETH_LEN: usize = 14;
const IPV4_LEN: usize = 20;
const UDP_LEN: usize = 8;
const BFD_LEN: usize = 24;
const IPV6_LEN: usize = 40;
const REPLY_LEN_V4: usize = ETH_LEN + IPV4_LEN + UDP_LEN + BFD_LEN;
const REPLY_LEN_V6: usize = ETH_LEN + IPV6_LEN + UDP_LEN + BFD_LEN;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const PROTO_UDP: u8 = 17;
const STATE_UP: u8 = 3;
const FLAG_POLL: u8 = 0x20;
const FLAG_FINAL: u8 = 0x10;
const FLAG_AUTH: u8 = 0x04;
const FLAG_DEMAND: u8 = 0x02;
const FLAG_MULTIPOINT: u8 = 0x01;

#[repr(C)]
struct Eth {
    dst: [u8; 6],
    src: [u8; 6],
    proto_be: u16,
}

#[repr(C)]
struct Ipv4 {
    version_ihl: u8,
    tos: u8,
    total_len_be: u16,
    id_be: u16,
    frag_be: u16,
    ttl: u8,
    proto: u8,
    check_be: u16,
    src: [u8; 4],
    dst: [u8; 4],
}

#[repr(C)]
struct Ipv6 {
    version_class_flow_be: u32,
    payload_len_be: u16,
    next_header: u8,
    hop_limit: u8,
    src: [u8; 16],
    dst: [u8; 16],
}

#[repr(C)]
struct Udp {
    source_be: u16,
    dest_be: u16,
    len_be: u16,
    check_be: u16,
}

/// The one bounds-checked accessor every packet read goes through.
#[inline(always)]
fn ptr_at<T>(ctx: &XdpContext, offset: usize) -> Option<*mut T> {
    let start = ctx.data();
    if start + offset + core::mem::size_of::<T>() > ctx.data_end() {
        return None;
    }
    Some((start + offset) as *mut T)
}

#[inline(always)]
fn count(map: &PerCpuArray<u64>, index: u32) {
    if let Some(counter) = map.get_ptr_mut(index) {
        // SAFETY: this CPU's slot of a per-CPU array; no other writer.
        unsafe { *counter += 1 };
    }
}

#[xdp]
pub fn lc_bfd(ctx: XdpContext) -> u32 {
    match try_bfd(&ctx) {
        Ok(action) => action,
        Err(reason) => {
            count(&LC_DROPS, reason);
            count(&LC_VERDICTS, verdict::DROPPED);
            xdp_action::XDP_DROP
        }
    }
}

#[inline(always)]
fn not_bfd() -> Result<u32, u32> {
    count(&LC_VERDICTS, verdict::NOT_BFD);
    Ok(xdp_action::XDP_PASS)
}

#[inline(always)]
fn to_userspace() -> Result<u32, u32> {
    count(&LC_VERDICTS, verdict::PASSED);
    Ok(xdp_action::XDP_PASS)
}

/// RFC 1071 checksum of a 20-byte IPv4 header whose checksum field is 0.
#[inline(always)]
fn ipv4_checksum(ip: *const Ipv4) -> u16 {
    fold(sum_words(ip.cast::<u8>(), IPV4_LEN / 2))
}

/// Where the network layer put the UDP datagram, and what it said.
struct Network {
    udp: *mut Udp,
    /// TTL or hop limit.
    hops: u8,
    /// Arrived on UDP 4784 (RFC 5883).
    multihop: bool,
    /// Arrived on UDP 3785 (RFC 5881 section 4). An echo in an IPv4 header
    /// with options, or a fragment, is reported with `hops` 0: never
    /// reflected.
    echo: bool,
    /// Source and destination, IPv4 as v4-mapped IPv6 (the maps' keys).
    src: [u8; 16],
    dst: [u8; 16],
    ip: Ip,
}

#[derive(Clone, Copy)]
enum Ip {
    V4(*mut Ipv4),
    V6(*mut Ipv6),
}

/// Two 16-byte addresses compared as two 8-byte words (a byte-wise
/// comparison costs the reply ~20 ns).
#[inline(always)]
fn same_address(a: &[u8; 16], b: &[u8; 16]) -> bool {
    let word = |x: &[u8; 16], i: usize| {
        // SAFETY: i is 0 or 8, within the 16 bytes.
        unsafe { core::ptr::read_unaligned(x.as_ptr().add(i).cast::<u64>()) }
    };
    word(a, 0) == word(b, 0) && word(a, 8) == word(b, 8)
}

#[inline(always)]
fn v4_mapped(a: [u8; 4]) -> [u8; 16] {
    [
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a[0], a[1], a[2], a[3],
    ]
}

/// The network layer of a BFD frame: `Ok(None)` when the frame is not one
/// (passed untouched), `Err` for one refused before any lookup.
#[inline(always)]
fn network(ctx: &XdpContext) -> Result<Option<Network>, u32> {
    let Some(eth) = ptr_at::<Eth>(ctx, 0) else {
        return Ok(None);
    };
    // SAFETY (all raw reads below): each pointer comes from `ptr_at`, which
    // checked that the whole object lies inside the packet.
    let proto = unsafe { (*eth).proto_be };
    if proto == ETHERTYPE_IPV6.to_be() {
        let Some(ip) = ptr_at::<Ipv6>(ctx, ETH_LEN) else {
            return Ok(None);
        };
        // No extension-header walking: UDP behind one is not ours here
        // (the stack has it; userspace refuses it). Non-UDP, neighbour
        // discovery included, passes untouched.
        if unsafe { (*ip).next_header } != PROTO_UDP {
            return Ok(None);
        }
        let Some(udp) = ptr_at::<Udp>(ctx, ETH_LEN + IPV6_LEN) else {
            return Ok(None);
        };
        let Some(port) = bfd_port(unsafe { (*udp).dest_be }) else {
            return Ok(None);
        };
        let (hops, src, dst) = unsafe { ((*ip).hop_limit, (*ip).src, (*ip).dst) };
        return Ok(Some(Network {
            udp,
            hops,
            multihop: port == PORT_MULTI_HOP,
            echo: port == PORT_ECHO,
            src,
            dst,
            ip: Ip::V6(ip),
        }));
    }
    if proto != ETHERTYPE_IPV4.to_be() {
        return Ok(None);
    }
    let Some(ip) = ptr_at::<Ipv4>(ctx, ETH_LEN) else {
        return Ok(None);
    };
    let (version_ihl, proto) = unsafe { ((*ip).version_ihl, (*ip).proto) };
    if version_ihl >> 4 != 4 || proto != PROTO_UDP {
        return Ok(None);
    }
    // Locate UDP where the header says it is, so that a packet with options
    // is recognised as BFD (and refused), not mistaken for something else.
    let ihl = usize::from(version_ihl & 0x0f) * 4;
    if ihl < IPV4_LEN {
        return Ok(None);
    }
    let Some(udp) = ptr_at::<Udp>(ctx, ETH_LEN + ihl) else {
        return Ok(None);
    };
    let Some(port) = bfd_port(unsafe { (*udp).dest_be }) else {
        return Ok(None);
    };
    let fragment = u16::from_be(unsafe { (*ip).frag_be }) & 0x3fff != 0;
    if port != PORT_ECHO {
        if ihl != IPV4_LEN {
            return Err(drop::IP_OPTIONS);
        }
        if fragment {
            return Err(drop::FRAGMENT);
        }
    }
    let (ttl, src, dst) = unsafe { ((*ip).ttl, (*ip).src, (*ip).dst) };
    let irregular = ihl != IPV4_LEN || fragment;
    Ok(Some(Network {
        udp,
        hops: if irregular { 0 } else { ttl },
        multihop: port == PORT_MULTI_HOP,
        echo: port == PORT_ECHO,
        src: v4_mapped(src),
        dst: v4_mapped(dst),
        ip: Ip::V4(ip),
    }))
}

/// The BFD port a UDP destination port (network order) names, if any.
#[inline(always)]
fn bfd_port(dest_be: u16) -> Option<u16> {
    let port = u16::from_be(dest_be);
    if port == PORT_SINGLE_HOP || port == PORT_MULTI_HOP || port == PORT_ECHO {
        Some(port)
    } else {
        None
    }
}

/// RFC 1071 sum of `words` 16-bit words at `p`, unfolded.
#[inline(always)]
fn sum_words(p: *const u8, words: usize) -> u32 {
    let mut sum: u32 = 0;
    let mut i = 0;
    while i < words {
        // SAFETY: the caller checked the bytes are in the packet (or on
        // our stack).
        sum += u32::from(unsafe { core::ptr::read_unaligned(p.add(2 * i).cast::<u16>()) });
        i += 1;
    }
    sum
}

#[inline(always)]
fn fold(mut sum: u32) -> u16 {
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    !(sum as u16)
}

#[inline(always)]
fn try_bfd(ctx: &XdpContext) -> Result<u32, u32> {
    let Some(net) = network(ctx)? else {
        return not_bfd();
    };
    // The negative control puts GTSM first: our returning echo is lost.
    if switch_on(&LC_GTSM_FIRST) && !net.multihop && net.hops != 255 {
        return Err(drop::BAD_TTL);
    }
    // Before GTSM: our own echoes return at TTL 254 by definition.
    if net.echo {
        return echo(ctx, net.hops, &net.src, &net.dst);
    }
    let multihop = net.multihop;
    // GTSM before any map lookup: an off-link sender costs no lookup
    // (RFC 5881 section 5: TTL or hop limit 255). A multihop packet is
    // judged against its session's minimum once the session is known.
    if !multihop && net.hops != 255 {
        return Err(drop::BAD_TTL);
    }
    let udp = net.udp;
    let bfd_offset = match net.ip {
        Ip::V4(_) => ETH_LEN + IPV4_LEN + UDP_LEN,
        Ip::V6(_) => ETH_LEN + IPV6_LEN + UDP_LEN,
    };
    let Some(bfd) = ptr_at::<[u8; BFD_LEN]>(ctx, bfd_offset) else {
        return Err(drop::TRUNCATED);
    };
    // SAFETY (all raw reads and writes below): each pointer comes from
    // `ptr_at`, which checked that the whole object lies inside the packet.
    let b = unsafe { &mut *bfd };
    if b[0] >> 5 != 1 {
        return Err(drop::BAD_VERSION);
    }
    let udp_payload = usize::from(u16::from_be(unsafe { (*udp).len_be })).saturating_sub(UDP_LEN);
    let length = usize::from(b[3]);
    let flags = b[1];
    // 6.8.6: at least 24 bytes, 26 with the A bit (the section's Type and
    // Len), and no more than the datagram holds.
    let shortest = if flags & FLAG_AUTH != 0 {
        BFD_LEN + 2
    } else {
        BFD_LEN
    };
    if length < shortest || length > udp_payload {
        return Err(drop::BAD_LENGTH);
    }
    if b[2] == 0 {
        return Err(drop::ZERO_MULTIPLIER);
    }
    if flags & FLAG_MULTIPOINT != 0 {
        return Err(drop::MULTIPOINT);
    }
    if u32::from_be_bytes([b[4], b[5], b[6], b[7]]) == 0 {
        return Err(drop::ZERO_MY_DISCRIMINATOR);
    }
    let state = flags >> 6;
    let your = u32::from_be_bytes([b[8], b[9], b[10], b[11]]);
    if your == 0 {
        // Bootstrap (Down or AdminDown only): userspace selects the session
        // by addresses.
        return if state <= 1 {
            to_userspace()
        } else {
            Err(drop::ZERO_YOUR_DISCRIMINATOR)
        };
    }
    // SAFETY: a hash map lookup; the value stays valid for this program run.
    let Some(config) = (unsafe { LC_SESSIONS.get(&your) }) else {
        return Err(drop::NO_SESSION);
    };
    if !same_address(&net.src, &config.peer_ip) || !same_address(&net.dst, &config.local_ip) {
        return Err(drop::ADDRESS_MISMATCH);
    }
    // The GTSM relaxation belongs to multihop sessions: a packet on either
    // port must name a session of its own kind (RFC 5883 section 2).
    if multihop != (config.flags & FLAG_MULTIHOP != 0) {
        return Err(drop::HOP_MISMATCH);
    }
    if multihop && net.hops < config.min_ttl {
        return Err(drop::BAD_TTL);
    }
    let Some(session) = LC_STATE.get_ptr_mut(config.slot) else {
        return Err(drop::NO_SESSION);
    };
    // SAFETY: the kernel is this value's only writer (userspace reads).
    let session = unsafe { &mut *session };
    // SAFETY: a helper without arguments.
    let arrived = unsafe { bpf_ktime_get_ns() };
    // 6.8.6: the A bit where the session has no authentication, or its
    // absence where it has, is discarded.
    if (flags & FLAG_AUTH != 0) != (config.auth_type != auth_type::NONE) {
        return Err(drop::AUTH_MISMATCH);
    }
    if config.flags & FLAG_AUTH_IN_USERSPACE != 0 {
        // A digest the kernel does not compute: userspace verifies (and
        // applies the sequence window).
        session.passed += 1;
        return to_userspace();
    }
    if config.auth_type != auth_type::NONE {
        // bfd.AuthSeqKnown outlives twice the detection time (6.8.1), by
        // the rule userspace keeps too.
        let packet = Received {
            at: bfd_offset,
            length,
            detect_mult: b[2],
            lapse_ns: auth_seq_known_lapse_ns(
                config.detect_ns,
                b[2],
                u32::from_be_bytes([b[12], b[13], b[14], b[15]]),
            ),
            now: arrived,
            slot: config.slot,
            desired_min_tx_us: u32::from_be_bytes([b[12], b[13], b[14], b[15]]),
            our_required_min_rx_us: u32::from_be_bytes([
                config.reply[16],
                config.reply[17],
                config.reply[18],
                config.reply[19],
            ]),
        };
        verify_auth(ctx, &packet, your, config.auth_type, session)?;
    }
    session.last_rx_ns = arrived;
    session.rx_packets += 1;
    ensure_sweep();
    session.remote_desired_min_tx_us = u32::from_be_bytes([b[12], b[13], b[14], b[15]]);
    session.remote_required_min_rx_us = u32::from_be_bytes([b[16], b[17], b[18], b[19]]);
    session.remote_detect_mult = u32::from(b[2]);
    session.detect_ns = detection_time_ns(
        b[2],
        u32::from_be_bytes([
            config.reply[16],
            config.reply[17],
            config.reply[18],
            config.reply[19],
        ]),
        session.remote_desired_min_tx_us,
    );
    // 6.8.6: a peer that says Down or AdminDown takes our session Down
    // (Diag 3); the sweep has the responder say so at once and stops the
    // own clock, whenever the loop gets to run.
    if state <= 1 {
        session.peer_down_rx_ns = arrived;
    }
    // Userspace keeps everything but the steady state: transitions, the
    // peer's Final (the end of our Poll), and a change of the peer's
    // Demand mode (its D bit not as FLAG_POLLS_ONLY says). An
    // authenticated session is answered here only when userspace offloaded
    // it (FLAG_REPLY): the reply is signed below.
    let polls_only = config.flags & FLAG_POLLS_ONLY != 0;
    if config.flags & FLAG_REPLY == 0
        || state != STATE_UP
        || flags & FLAG_FINAL != 0
        || (flags & FLAG_DEMAND != 0) != polls_only
    {
        session.passed += 1;
        return to_userspace();
    }
    let poll = flags & FLAG_POLL != 0;
    let now = session.last_rx_ns;
    // A stopped engine must not be kept alive by its program: past the
    // heartbeat's limit the peer's packets go to the engine's socket, which
    // nobody reads, and the peer's detection time runs (RFC 5880 6.8.4).
    if let Some(dead_man) = LC_DEAD_MAN.get(0) {
        if dead_man.limit_ns != 0
            && (now as i64).wrapping_sub(dead_man.heartbeat_ns as i64) > dead_man.limit_ns as i64
        {
            session.passed += 1;
            count(&LC_VERDICTS, verdict::ORPHANED);
            return Ok(xdp_action::XDP_PASS);
        }
    }
    // A peer in Demand mode gets no periodic packet (RFC 5880 6.8.7):
    // only its Polls are answered; its other packets are heard.
    if polls_only && !poll {
        count(&LC_VERDICTS, verdict::HEARD);
        return Ok(xdp_action::XDP_DROP);
    }
    // 6.8.7, the rule userspace keeps: our periodic packets no more often
    // than the larger of our Desired Min TX (the reply's own field) and
    // the Required Min RX this packet carries, jittered, and none to a peer
    // that asks for none. A Poll is answered at once (6.5).
    let interval = periodic_interval_ns(
        u64::from(u32::from_be_bytes([
            config.reply[12],
            config.reply[13],
            config.reply[14],
            config.reply[15],
        ])) * 1_000,
        session.remote_required_min_rx_us,
    );
    if !poll {
        if interval == 0 {
            count(&LC_VERDICTS, verdict::HEARD);
            return Ok(xdp_action::XDP_DROP);
        }
        // Too soon after our last packet, whoever sent it: heard, not
        // answered (an answer to our own answer among them: two
        // RX-clocked engines would otherwise ping-pong at wire speed).
        let user_tx = LC_SLOTS.get(config.slot).map_or(0, |s| s.user_tx_ns);
        let last_tx = max(max(user_tx, session.last_tx_ns), clock_sent(config.slot));
        let floor = reply_floor_ns(
            interval,
            session.remote_desired_min_tx_us,
            session.next_gap_ns,
        );
        // Signed: the responder's stamp a hair ahead of this packet's.
        if last_tx != 0 && (now as i64).wrapping_sub(last_tx as i64) < floor as i64 {
            count(&LC_VERDICTS, verdict::HEARD);
            return Ok(xdp_action::XDP_DROP);
        }
    }
    // 6.7.1: an authenticated session's reply is signed, or not sent from
    // here: without its key, or when it would not fit the peer's frame,
    // the packet goes to userspace, which answers signed.
    let signing = if config.auth_type == auth_type::NONE {
        None
    } else {
        let Some(signer) = signer(config, your, length) else {
            session.passed += 1;
            return to_userspace();
        };
        Some(signer)
    };
    // The gap before our next periodic packet, drawn now for the reply
    // below (its instant is `now`).
    // SAFETY: a helper without arguments.
    let draw = unsafe { bpf_get_prandom_u32() };
    session.next_gap_ns = jittered_gap_ns(interval, config.reply[2], draw);

    let bfd_len = signing.map_or(BFD_LEN, |s| s.len);
    // The RX-clocked reply: rewrite the peer's frame into ours.
    let Some(eth) = ptr_at::<Eth>(ctx, 0) else {
        return Err(drop::TRUNCATED);
    };
    unsafe {
        (*eth).dst = config.peer_mac;
        (*eth).src = config.local_mac;
        (*udp).source_be = config.local_port_be;
        // The port it came to: 3784 single-hop, 4784 multihop.
        (*udp).dest_be = if multihop {
            PORT_MULTI_HOP.to_be()
        } else {
            PORT_SINGLE_HOP.to_be()
        };
        (*udp).len_be = ((UDP_LEN + bfd_len) as u16).to_be();
        (*udp).check_be = 0;
    }
    *b = config.reply;
    if poll {
        // Answer the Poll with Final, P clear (RFC 5880 6.8.6).
        b[1] = (b[1] & !FLAG_POLL) | FLAG_FINAL;
        session.finals_sent += 1;
    }
    if let Some(signer) = signing {
        // Over the header as it leaves, Final included.
        sign(ctx, bfd_offset, config, signer)?;
    }
    let reply_len = match net.ip {
        Ip::V4(ip) => unsafe {
            (*ip).tos = 0xc0; // DSCP CS6
            (*ip).total_len_be = ((IPV4_LEN + UDP_LEN + bfd_len) as u16).to_be();
            (*ip).ttl = 255;
            (*ip).src = [net.dst[12], net.dst[13], net.dst[14], net.dst[15]];
            (*ip).dst = [net.src[12], net.src[13], net.src[14], net.src[15]];
            (*ip).check_be = 0;
            (*ip).check_be = ipv4_checksum(ip);
            // UDP checksum 0: none, allowed for IPv4.
            REPLY_LEN_V4 - BFD_LEN + bfd_len
        },
        Ip::V6(ip) => unsafe {
            // Version 6, traffic class CS6, flow label 0.
            (*ip).version_class_flow_be = (6u32 << 28 | 0xc0 << 20).to_be();
            (*ip).payload_len_be = ((UDP_LEN + bfd_len) as u16).to_be();
            (*ip).hop_limit = 255;
            (*ip).src = net.dst;
            (*ip).dst = net.src;
            // The checksum is mandatory over IPv6 (RFC 8200 8.1): over the
            // swapped pseudo-header, our UDP header and our payload,
            // before the tail moves (packet pointers are invalid after).
            let pseudo_tail: [u16; 4] = [
                0,
                ((UDP_LEN + bfd_len) as u16).to_be(),
                0,
                u16::from(PROTO_UDP).to_be(),
            ];
            let sum = sum_words(net.dst.as_ptr(), 8)
                + sum_words(net.src.as_ptr(), 8)
                + sum_words(pseudo_tail.as_ptr().cast(), 4)
                + sum_words(udp.cast::<u8>(), UDP_LEN / 2)
                + payload_sum(ctx, bfd_offset, bfd_len);
            let check = fold(sum);
            // 0 means "no checksum", which IPv6 forbids: send its
            // one's-complement twin.
            (*udp).check_be = if check == 0 { 0xffff } else { check };
            REPLY_LEN_V6 - BFD_LEN + bfd_len
        },
    };
    session.tx_packets += 1;
    session.last_tx_ns = now;
    count(&LC_VERDICTS, verdict::REPLIED);
    // Trim padding or trailing bytes last: packet pointers are invalid after.
    // In 64 bits: with ALU32 (CPU v3) LLVM would otherwise subtract the
    // two packet pointers' low halves, which the verifier refuses.
    let frame_len = (ctx.data_end() - ctx.data()) as u64;
    let extra = frame_len.wrapping_sub(reply_len as u64);
    if extra > 0 && extra < 0x1_0000 {
        // SAFETY: shrinking the frame of this XDP context.
        if unsafe { bpf_xdp_adjust_tail(ctx.ctx, -(extra as i32)) } != 0 {
            return Err(drop::TRUNCATED);
        }
    }
    Ok(xdp_action::XDP_TX)
}

/// The echo port (RFC 5880 6.4, RFC 5881 section 4). A peer's echo is
/// addressed to the peer itself and sent to our MAC: we turn it around as
/// a router would forward it, TTL decremented and payload untouched, so
/// that it tests our forwarding path without our host forwarding. Only a
/// self-addressed packet, one hop away (TTL 255), from a peer listed in
/// `LC_ECHO_PEERS`: anything wider reflects strangers' traffic at whoever
/// they name. Everything else, our own echoes coming back at TTL 254
/// included, goes to the stack untouched.
#[inline(always)]
fn echo(ctx: &XdpContext, hops: u8, src: &[u8; 16], dst: &[u8; 16]) -> Result<u32, u32> {
    if hops != 255 || !same_address(src, dst) {
        return echo_passed();
    }
    // The key in a local of its own: a reference into `Network` pinned
    // that struct to the stack, where LLVM spilled a packet pointer in
    // 4-byte halves, which the verifier refuses.
    let key: [u8; 16] = *src;
    // SAFETY: a hash map lookup; the value is not kept.
    if unsafe { LC_ECHO_PEERS.get(&key) }.is_none() && !switch_on(&LC_ECHO_UNLISTED) {
        return echo_passed();
    }
    let Some(eth) = ptr_at::<Eth>(ctx, 0) else {
        return echo_passed();
    };
    // SAFETY (all raw accesses below): each pointer comes from `ptr_at`.
    if unsafe { (*eth).proto_be } == ETHERTYPE_IPV6.to_be() {
        let Some(ip) = ptr_at::<Ipv6>(ctx, ETH_LEN) else {
            return echo_passed();
        };
        // The hop limit is outside the UDP pseudo-header: no checksum
        // changes.
        unsafe { (*ip).hop_limit -= 1 };
    } else {
        let Some(ip) = ptr_at::<Ipv4>(ctx, ETH_LEN) else {
            return echo_passed();
        };
        // RFC 1624 incremental update: TTL is the high byte of its 16-bit
        // word, so the checksum gains 0x0100.
        unsafe {
            let sum = u32::from((*ip).check_be) + u32::from(0x0100u16.to_be());
            (*ip).check_be = (sum + (sum >> 16)) as u16;
            (*ip).ttl -= 1;
        }
    }
    unsafe {
        let peer_mac = (*eth).src;
        (*eth).src = (*eth).dst;
        (*eth).dst = peer_mac;
    }
    count(&LC_VERDICTS, verdict::ECHO_REFLECTED);
    Ok(xdp_action::XDP_TX)
}

#[inline(always)]
fn echo_passed() -> Result<u32, u32> {
    count(&LC_VERDICTS, verdict::ECHO_PASSED);
    Ok(xdp_action::XDP_PASS)
}
