//! The reply stage of `lc_bfd`: whether the kernel answers a packet it
//! heard (the engine alive, the peer not in Demand mode, RFC 5880 6.8.7's
//! floor, a signer when the session is authenticated), and the rewrite of
//! the peer's frame into our reply, sent back with XDP_TX.

use super::sign::Signer;
use super::sweep::clock_sent;
use super::{
    count, max, payload_sum, ptr_at, record_gap, sign, signer, to_userspace, word, Eth, Header, Ip,
    Ipv4, Network, Stage, IPV4_LEN, LC_DEAD_MAN, LC_SLOTS, LC_VERDICTS, PROTO_UDP, REPLY_LEN_V4,
    REPLY_LEN_V6, UDP_LEN,
};
use aya_ebpf::bindings::xdp_action;
use aya_ebpf::helpers::generated::{bpf_get_prandom_u32, bpf_xdp_adjust_tail};
use aya_ebpf::programs::XdpContext;
use core::ops::ControlFlow;
use linecard_common::bfd::header::{field, flag, HEADER_LEN};
use linecard_common::bfd::{
    auth_type, drop, jittered_gap_ns, periodic_interval_ns, reply_floor_ns, verdict, SessionConfig,
    SessionState, FLAG_POLLS_ONLY, PORT_MULTI_HOP, PORT_SINGLE_HOP,
};

/// Heard, not answered: the packet is dropped, its verdict counted.
#[inline(always)]
fn heard<T>() -> Stage<T> {
    count(&LC_VERDICTS, verdict::HEARD);
    Ok(ControlFlow::Break(xdp_action::XDP_DROP))
}

/// Whether the kernel answers the packet heard at `now`: continues with
/// the signer an authenticated session's reply needs (None without
/// authentication), having drawn the jittered gap before our next periodic
/// packet.
#[inline(always)]
pub(super) fn decide_reply(
    header: &Header,
    config: &SessionConfig,
    session: &mut SessionState,
    now: u64,
) -> Stage<Option<Signer>> {
    // A stopped engine must not be kept alive by its program: past the
    // heartbeat's limit the peer's packets go to the engine's socket, which
    // nobody reads, and the peer's detection time runs (RFC 5880 6.8.4).
    if let Some(dead_man) = LC_DEAD_MAN.get(0) {
        if dead_man.limit_ns != 0
            && (now as i64).wrapping_sub(dead_man.heartbeat_ns as i64) > dead_man.limit_ns as i64
        {
            session.passed += 1;
            count(&LC_VERDICTS, verdict::ORPHANED);
            return Ok(ControlFlow::Break(xdp_action::XDP_PASS));
        }
    }
    let poll = header.flags & flag::POLL != 0;
    // A peer in Demand mode gets no periodic packet (RFC 5880 6.8.7):
    // only its Polls are answered; its other packets are heard.
    if config.flags & FLAG_POLLS_ONLY != 0 && !poll {
        return heard();
    }
    // 6.8.7, the rule userspace keeps: our periodic packets no more often
    // than the larger of our Desired Min TX (the reply's own field) and
    // the Required Min RX this packet carries, jittered, and none to a peer
    // that asks for none. A Poll is answered at once (6.5).
    let interval = periodic_interval_ns(
        u64::from(word(&config.reply, field::DESIRED_MIN_TX)) * 1_000,
        session.remote_required_min_rx_us,
    );
    // Our last packet, whoever sent it.
    let user_tx = LC_SLOTS.get(config.slot).map_or(0, |s| s.user_tx_ns);
    let last_tx = max(max(user_tx, session.last_tx_ns), clock_sent(config.slot));
    if !poll {
        if interval == 0 {
            return heard();
        }
        // Too soon after our last packet: heard, not answered (an answer
        // to our own answer among them: two RX-clocked engines would
        // otherwise ping-pong at wire speed).
        let floor = reply_floor_ns(
            interval,
            session.remote_desired_min_tx_us,
            session.next_gap_ns,
        );
        // Signed: the responder's stamp a hair ahead of this packet's.
        if last_tx != 0 && (now as i64).wrapping_sub(last_tx as i64) < floor as i64 {
            return heard();
        }
    }
    // 6.7.1: an authenticated session's reply is signed, or not sent from
    // here: without its key, or when it would not fit the peer's frame,
    // the packet goes to userspace, which answers signed.
    let signing = if config.auth_type == auth_type::NONE {
        None
    } else {
        let Some(signer) = signer(config, header.your, header.length) else {
            session.passed += 1;
            return to_userspace();
        };
        Some(signer)
    };
    // The gap before our next periodic packet, drawn now for the reply
    // (its instant is `now`).
    // SAFETY: a helper without arguments.
    let draw = unsafe { bpf_get_prandom_u32() };
    session.next_gap_ns = jittered_gap_ns(interval, config.reply[field::DETECT_MULT], draw);
    // The transmit gap this reply ends, against the peer's detection time
    // (6.8.4: its Detect Mult times the interval we send at).
    if last_tx != 0 && now > last_tx {
        let peer_detect_ns = u64::from(session.remote_detect_mult) * interval;
        record_gap(config.slot, true, now - last_tx, peer_detect_ns, now);
    }
    Ok(ControlFlow::Continue(signing))
}

/// The RX-clocked reply: the peer's frame rewritten into ours (addresses
/// swapped, our prepared header, Final for a Poll, signed when
/// authenticated, checksums, the tail trimmed) and sent back.
#[inline(always)]
pub(super) fn rewrite_into_reply(
    ctx: &XdpContext,
    net: &Network,
    header: &Header,
    config: &SessionConfig,
    session: &mut SessionState,
    signing: Option<Signer>,
) -> Result<u32, u32> {
    let now = session.last_rx_ns;
    let bfd_len = signing.map_or(HEADER_LEN, |s| s.len);
    let udp = net.udp;
    let Some(eth) = ptr_at::<Eth>(ctx, 0) else {
        return Err(drop::TRUNCATED);
    };
    // SAFETY (all raw writes below): each pointer comes from `ptr_at`,
    // which checked that the whole object lies inside the packet.
    unsafe {
        (*eth).dst = config.peer_mac;
        (*eth).src = config.local_mac;
        (*udp).source_be = config.local_port_be;
        // The port it came to: 3784 single-hop, 4784 multihop.
        (*udp).dest_be = if net.multihop {
            PORT_MULTI_HOP.to_be()
        } else {
            PORT_SINGLE_HOP.to_be()
        };
        (*udp).len_be = ((UDP_LEN + bfd_len) as u16).to_be();
        (*udp).check_be = 0;
    }
    let b = header.bytes();
    *b = config.reply;
    if header.flags & flag::POLL != 0 {
        // Answer the Poll with Final, P clear (RFC 5880 6.8.6).
        b[field::STATE_FLAGS] = (b[field::STATE_FLAGS] & !flag::POLL) | flag::FINAL;
        session.finals_sent += 1;
    }
    if let Some(signer) = signing {
        // Over the header as it leaves, Final included.
        sign(ctx, header.at, config, signer)?;
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
            REPLY_LEN_V4 - HEADER_LEN + bfd_len
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
                + payload_sum(ctx, header.at, bfd_len);
            let check = fold(sum);
            // 0 means "no checksum", which IPv6 forbids: send its
            // one's-complement twin.
            (*udp).check_be = if check == 0 { 0xffff } else { check };
            REPLY_LEN_V6 - HEADER_LEN + bfd_len
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

/// RFC 1071 checksum of a 20-byte IPv4 header whose checksum field is 0.
#[inline(always)]
fn ipv4_checksum(ip: *const Ipv4) -> u16 {
    fold(sum_words(ip.cast::<u8>(), IPV4_LEN / 2))
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
