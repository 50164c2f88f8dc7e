//! The echo port's stage of `lc_bfd` (RFC 5880 6.4, RFC 5881 section 4):
//! a listed peer's self-addressed echo is reflected, everything else on
//! 3785 passes untouched.

use super::{
    count, ptr_at, same_address, switch_on, Eth, Ipv4, Ipv6, ETHERTYPE_IPV6, ETH_LEN,
    LC_ECHO_PEERS, LC_ECHO_UNLISTED, LC_VERDICTS,
};
use aya_ebpf::bindings::xdp_action;
use aya_ebpf::programs::XdpContext;
use linecard_common::bfd::verdict;

/// The echo port (RFC 5880 6.4, RFC 5881 section 4). A peer's echo is
/// addressed to the peer itself and sent to our MAC: we turn it around as
/// a router would forward it, TTL decremented and payload untouched, so
/// that it tests our forwarding path without our host forwarding. Only a
/// self-addressed packet, one hop away (TTL 255), from a peer listed in
/// `LC_ECHO_PEERS`: anything wider reflects strangers' traffic at whoever
/// they name. Everything else, our own echoes coming back at TTL 254
/// included, goes to the stack untouched.
#[inline(always)]
pub(super) fn echo(ctx: &XdpContext, hops: u8, src: &[u8; 16], dst: &[u8; 16]) -> Result<u32, u32> {
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
