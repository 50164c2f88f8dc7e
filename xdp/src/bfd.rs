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
    bindings::xdp_action,
    helpers::generated::bpf_ktime_get_ns,
    macros::{map, xdp},
    maps::{Array, HashMap, PerCpuArray, RingBuf},
    programs::XdpContext,
};
use core::ops::ControlFlow;
use linecard_common::bfd::header::{field, flag, HEADER_LEN, STATE_SHIFT, VERSION, VERSION_SHIFT};
use linecard_common::bfd::{
    auth_seq_known_lapse_ns, auth_type, detection_time_ns, drop, verdict, AuthKeyRef, AuthSecret,
    DeadMan, EchoPeer, SessionConfig, SessionState, SlotConfig, DROP_REASONS,
    FLAG_AUTH_IN_USERSPACE, FLAG_MULTIHOP, FLAG_POLLS_ONLY, FLAG_REPLY, MAX_AUTH_KEYS,
    MAX_SESSIONS, PORT_ECHO, PORT_MULTI_HOP, PORT_SINGLE_HOP, SWEEP_SLOTS, VERDICTS,
};
use linecard_common::gaps::SessionGaps;
use linecard_common::verify::VerifyGuard;

mod auth;
use auth::{verify_auth, Received, AUTH_SCRATCH_LEN};
mod sign;
use sign::{payload_sum, sign, signer};
mod reply;
use reply::{decide_reply, rewrite_into_reply};
mod echo;
use echo::echo;

#[map]
static LC_SESSIONS: HashMap<u32, SessionConfig> = HashMap::with_max_entries(MAX_SESSIONS, 0);
#[map]
static LC_STATE: Array<SessionState> = Array::with_max_entries(MAX_SESSIONS, 0);
#[map]
static LC_DROPS: PerCpuArray<u64> = PerCpuArray::with_max_entries(DROP_REASONS, 0);
#[map]
static LC_VERDICTS: PerCpuArray<u64> = PerCpuArray::with_max_entries(VERDICTS, 0);
/// By slot: the gaps the fast path measured where the packets are
/// (issue 41), summed over CPUs by the engine's metrics endpoint.
#[map]
static LC_GAPS: PerCpuArray<SessionGaps> = PerCpuArray::with_max_entries(MAX_SESSIONS, 0);
/// The scrape window the gaps' window maxima belong to (userspace bumps
/// it at each scrape).
#[map]
static LC_GAPS_WINDOW: Array<u64> = Array::with_max_entries(1, 0);
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
use sweep::ensure_sweep;

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

/// `names::NO_GAPS_GLOBAL`: 1 only for `linecard bench xdp`'s reply
/// without the gap histograms, which prices them.
#[no_mangle]
static LC_NO_GAPS: u8 = 0;

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
const IPV6_LEN: usize = 40;
const REPLY_LEN_V4: usize = ETH_LEN + IPV4_LEN + UDP_LEN + HEADER_LEN;
const REPLY_LEN_V6: usize = ETH_LEN + IPV6_LEN + UDP_LEN + HEADER_LEN;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const PROTO_UDP: u8 = 17;
const STATE_UP: u8 = 3;

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

/// One gap of `slot`'s, received (`transmit` false) or sent, into this
/// CPU's histogram.
#[inline(never)]
fn record_gap(slot: u32, transmit: bool, gap_ns: u64, detect_ns: u64, at_ns: u64) {
    if switch_on(&LC_NO_GAPS) {
        return;
    }
    let window = LC_GAPS_WINDOW.get(0).copied().unwrap_or(0);
    if let Some(gaps) = LC_GAPS.get_ptr_mut(slot) {
        // SAFETY: this CPU's value of a per-CPU array; no other writer.
        let gaps = unsafe { &mut *gaps };
        let histogram = if transmit { &mut gaps.tx } else { &mut gaps.rx };
        histogram.record(gap_ns, detect_ns, at_ns, window);
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

/// To userspace, which keeps the state machine.
#[inline(always)]
fn to_userspace<T>() -> Stage<T> {
    count(&LC_VERDICTS, verdict::PASSED);
    Ok(ControlFlow::Break(xdp_action::XDP_PASS))
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

/// A stage's outcome: `Continue` with what the next stage needs, `Break`
/// with the program's action (its verdict counted), `Err` a drop reason.
type Stage<T> = Result<ControlFlow<u32, T>, u32>;

/// The value a stage continues with; the action it ended on is returned.
macro_rules! stage {
    ($stage:expr) => {
        match $stage? {
            ControlFlow::Continue(value) => value,
            ControlFlow::Break(action) => return Ok(action),
        }
    };
}

/// The stages of a BFD Control packet, each `#[inline(always)]` so that
/// the verifier sees one program: the network layer and GTSM, the header's
/// session-independent rules, the session and its hop rules, hearing it
/// (authentication, what the peer said), and the reply, if any.
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
    // GTSM before any map lookup: an off-link sender costs no lookup
    // (RFC 5881 section 5: TTL or hop limit 255). A multihop packet is
    // judged against its session's minimum once the session is known.
    if !net.multihop && net.hops != 255 {
        return Err(drop::BAD_TTL);
    }
    let header = stage!(validated_header(ctx, &net));
    let (config, session) = session_of(&net, &header)?;
    let arrived = stage!(hear(ctx, &header, config, session));
    let signing = stage!(decide_reply(&header, config, session, arrived));
    rewrite_into_reply(ctx, &net, &header, config, session, signing)
}

/// A BFD Control packet's header that passed the rules of RFC 5880 6.8.6
/// that need no session.
struct Header {
    /// Where it starts in the frame.
    at: usize,
    bytes: *mut [u8; HEADER_LEN],
    /// The Length field: the header and its authentication section.
    length: usize,
    /// The second byte: State and the flag bits.
    flags: u8,
    /// Your Discriminator, not 0.
    your: u32,
}

impl Header {
    #[inline(always)]
    fn state(&self) -> u8 {
        self.flags >> STATE_SHIFT
    }

    /// The header's bytes.
    #[inline(always)]
    fn bytes(&self) -> &mut [u8; HEADER_LEN] {
        // SAFETY: `ptr_at` checked the header lies inside the packet, and
        // the program holds no other reference into it.
        unsafe { &mut *self.bytes }
    }

    /// The 32-bit field at `at` (`field::*`).
    #[inline(always)]
    fn word(&self, at: usize) -> u32 {
        word(self.bytes(), at)
    }
}

/// The header's session-independent rules (RFC 5880 6.8.6): version 1,
/// a Length that fits, Detect Mult and My Discriminator not 0, no
/// Multipoint. A bootstrap (Your Discriminator 0, Down or AdminDown) goes
/// to userspace, which selects its session by addresses.
#[inline(always)]
fn validated_header(ctx: &XdpContext, net: &Network) -> Stage<Header> {
    let at = match net.ip {
        Ip::V4(_) => ETH_LEN + IPV4_LEN + UDP_LEN,
        Ip::V6(_) => ETH_LEN + IPV6_LEN + UDP_LEN,
    };
    let Some(bytes) = ptr_at::<[u8; HEADER_LEN]>(ctx, at) else {
        return Err(drop::TRUNCATED);
    };
    // SAFETY: `ptr_at` checked both lie inside the packet.
    let (b, udp_len) = unsafe { (&*bytes, u16::from_be((*net.udp).len_be)) };
    if b[field::VERS_DIAG] >> VERSION_SHIFT != VERSION {
        return Err(drop::BAD_VERSION);
    }
    let udp_payload = usize::from(udp_len).saturating_sub(UDP_LEN);
    let length = usize::from(b[field::LENGTH]);
    let flags = b[field::STATE_FLAGS];
    // At least 24 bytes, 26 with the A bit (the section's Type and Len),
    // and no more than the datagram holds.
    let shortest = if flags & flag::AUTH != 0 {
        HEADER_LEN + 2
    } else {
        HEADER_LEN
    };
    if length < shortest || length > udp_payload {
        return Err(drop::BAD_LENGTH);
    }
    if b[field::DETECT_MULT] == 0 {
        return Err(drop::ZERO_MULTIPLIER);
    }
    if flags & flag::MULTIPOINT != 0 {
        return Err(drop::MULTIPOINT);
    }
    if word(b, field::MY_DISCR) == 0 {
        return Err(drop::ZERO_MY_DISCRIMINATOR);
    }
    let your = word(b, field::YOUR_DISCR);
    if your == 0 {
        return if flags >> STATE_SHIFT <= 1 {
            to_userspace()
        } else {
            Err(drop::ZERO_YOUR_DISCRIMINATOR)
        };
    }
    Ok(ControlFlow::Continue(Header {
        at,
        bytes,
        length,
        flags,
        your,
    }))
}

/// The session Your Discriminator names, between exactly these addresses
/// and of the packet's kind: the GTSM relaxation belongs to multihop
/// sessions, so a packet on either port must name a session of its own
/// kind, and a multihop one arrive with at least its minimum TTL (RFC
/// 5883 section 2).
#[inline(always)]
fn session_of(
    net: &Network,
    header: &Header,
) -> Result<(&'static SessionConfig, &'static mut SessionState), u32> {
    // SAFETY: a hash map lookup; the value stays valid for this program run.
    let Some(config) = (unsafe { LC_SESSIONS.get(&header.your) }) else {
        return Err(drop::NO_SESSION);
    };
    if !same_address(&net.src, &config.peer_ip) || !same_address(&net.dst, &config.local_ip) {
        return Err(drop::ADDRESS_MISMATCH);
    }
    if net.multihop != (config.flags & FLAG_MULTIHOP != 0) {
        return Err(drop::HOP_MISMATCH);
    }
    if net.multihop && net.hops < config.min_ttl {
        return Err(drop::BAD_TTL);
    }
    let Some(session) = LC_STATE.get_ptr_mut(config.slot) else {
        return Err(drop::NO_SESSION);
    };
    // SAFETY: the kernel is this value's only writer (userspace reads).
    Ok((config, unsafe { &mut *session }))
}

/// Hears the packet: its authentication (RFC 5880 6.7), then what the peer
/// said of its timers and state (6.8.6). Userspace keeps everything but
/// the steady state: transitions, the peer's Final (the end of our Poll),
/// a change of the peer's Demand mode (its D bit not as `FLAG_POLLS_ONLY`
/// says), and an authenticated session it did not offload for replies
/// (`FLAG_REPLY`). Continues with the arrival time when the kernel may
/// answer.
#[inline(always)]
fn hear(
    ctx: &XdpContext,
    header: &Header,
    config: &SessionConfig,
    session: &mut SessionState,
) -> Stage<u64> {
    // SAFETY: a helper without arguments.
    let arrived = unsafe { bpf_ktime_get_ns() };
    let flags = header.flags;
    // 6.8.6: the A bit where the session has no authentication, or its
    // absence where it has, is discarded.
    if (flags & flag::AUTH != 0) != (config.auth_type != auth_type::NONE) {
        return Err(drop::AUTH_MISMATCH);
    }
    if config.flags & FLAG_AUTH_IN_USERSPACE != 0 {
        // A digest the kernel does not compute: userspace verifies (and
        // applies the sequence window).
        session.passed += 1;
        return to_userspace();
    }
    let detect_mult = header.bytes()[field::DETECT_MULT];
    let desired_min_tx_us = header.word(field::DESIRED_MIN_TX);
    let our_required_min_rx_us = word(&config.reply, field::REQUIRED_MIN_RX);
    if config.auth_type != auth_type::NONE {
        // bfd.AuthSeqKnown outlives twice the detection time (6.8.1), by
        // the rule userspace keeps too.
        let packet = Received {
            at: header.at,
            length: header.length,
            detect_mult,
            lapse_ns: auth_seq_known_lapse_ns(config.detect_ns, detect_mult, desired_min_tx_us),
            now: arrived,
            slot: config.slot,
            desired_min_tx_us,
            our_required_min_rx_us,
        };
        verify_auth(ctx, &packet, header.your, config.auth_type, session)?;
    }
    // The receive gap this packet ends, against the detection time the
    // peer's previous packet set (6.8.4): what the sweep waited against.
    let previous = session.last_rx_ns;
    // 6.8.4: the sweep declared the silence this packet ends expired (the
    // responder sends our Down): the session is Down from that instant,
    // and a late Up must not get an Up back from the kernel before
    // userspace takes it Down (measured, 256 sessions under L4: our Down,
    // then the kernel's Up to the peer's late packet 78 us later).
    // SAFETY: a plain load of a field the sweep writes, of a live value.
    let reported = unsafe { core::ptr::read_volatile(core::ptr::addr_of!(session.reported_rx_ns)) };
    let declared_down = previous != 0 && reported == previous;
    if previous != 0 && arrived > previous {
        record_gap(
            config.slot,
            false,
            arrived - previous,
            session.detect_ns,
            arrived,
        );
    }
    session.last_rx_ns = arrived;
    session.rx_packets += 1;
    ensure_sweep();
    session.remote_desired_min_tx_us = desired_min_tx_us;
    session.remote_required_min_rx_us = header.word(field::REQUIRED_MIN_RX);
    session.remote_detect_mult = u32::from(detect_mult);
    session.detect_ns = detection_time_ns(detect_mult, our_required_min_rx_us, desired_min_tx_us);
    // 6.8.6: a peer that says Down or AdminDown takes our session Down
    // (Diag 3); the sweep has the responder say so at once and stops the
    // own clock, whenever the loop gets to run.
    if header.state() <= 1 {
        session.peer_down_rx_ns = arrived;
    }
    let polls_only = config.flags & FLAG_POLLS_ONLY != 0;
    if config.flags & FLAG_REPLY == 0
        || declared_down
        || header.state() != STATE_UP
        || flags & flag::FINAL != 0
        || (flags & flag::DEMAND != 0) != polls_only
    {
        session.passed += 1;
        return to_userspace();
    }
    Ok(ControlFlow::Continue(arrived))
}

/// The 32-bit field at `at` (`field::*`) of a BFD header: ours in a
/// session's prepared reply, or the peer's.
#[inline(always)]
fn word(header: &[u8; HEADER_LEN], at: usize) -> u32 {
    u32::from_be_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]])
}
