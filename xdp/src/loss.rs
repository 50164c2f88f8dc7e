//! `lc_loss`: a lossy link on an observer's bridge port. BFD control frames
//! (UDP 3784 and 4784, IPv4 without options or IPv6) are dropped when the
//! seeded draw says so, everything else passes: neighbour discovery and
//! ARP keep working, and the DUT's detection is exercised, not its ARP.

use aya_ebpf::{
    bindings::xdp_action,
    macros::{map, xdp},
    maps::{Array, PerCpuArray},
    programs::XdpContext,
};
use linecard_common::bfd::{PORT_MULTI_HOP, PORT_SINGLE_HOP};
use linecard_common::loss::{counter, next, LossConfig, LOSS_COUNTERS};

#[map]
static LC_LOSS: Array<LossConfig> = Array::with_max_entries(1, 0);
#[map]
static LC_LOSS_COUNTS: PerCpuArray<u64> = PerCpuArray::with_max_entries(LOSS_COUNTERS, 0);

const ETH_LEN: usize = 14;

#[xdp]
pub fn lc_loss(ctx: XdpContext) -> u32 {
    if !is_bfd_control(&ctx) {
        return xdp_action::XDP_PASS;
    }
    count(counter::SEEN);
    let Some(config) = LC_LOSS.get_ptr_mut(0) else {
        return xdp_action::XDP_PASS;
    };
    // SAFETY: a live map value. Two CPUs racing here may draw the same
    // number; the counters still say exactly what was dropped.
    let drop = unsafe {
        let state = next((*config).state);
        (*config).state = state;
        ((state >> 32) as u32) < (*config).threshold
    };
    if drop {
        count(counter::DROPPED);
        xdp_action::XDP_DROP
    } else {
        xdp_action::XDP_PASS
    }
}

#[inline(always)]
fn count(index: u32) {
    if let Some(c) = LC_LOSS_COUNTS.get_ptr_mut(index) {
        // SAFETY: this CPU's slot of a per-CPU array.
        unsafe { *c += 1 };
    }
}

#[inline(always)]
fn byte(ctx: &XdpContext, offset: usize) -> Option<u8> {
    let p = ctx.data() + offset;
    if p + 1 > ctx.data_end() {
        return None;
    }
    // SAFETY: bounds checked above.
    Some(unsafe { *(p as *const u8) })
}

#[inline(always)]
fn is_bfd_control(ctx: &XdpContext) -> bool {
    let (Some(t0), Some(t1)) = (byte(ctx, 12), byte(ctx, 13)) else {
        return false;
    };
    // (offset of the IP protocol byte, offset of the UDP header)
    let (proto_at, udp_at) = match u16::from_be_bytes([t0, t1]) {
        // IPv4 without options: a fixed 20-byte header.
        0x0800 if byte(ctx, ETH_LEN) == Some(0x45) => (ETH_LEN + 9, ETH_LEN + 20),
        0x86dd => (ETH_LEN + 6, ETH_LEN + 40),
        _ => return false,
    };
    if byte(ctx, proto_at) != Some(17) {
        return false;
    }
    let (Some(d0), Some(d1)) = (byte(ctx, udp_at + 2), byte(ctx, udp_at + 3)) else {
        return false;
    };
    let port = u16::from_be_bytes([d0, d1]);
    port == PORT_SINGLE_HOP || port == PORT_MULTI_HOP
}
