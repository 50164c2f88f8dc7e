//! linecard's XDP programs. Built for `bpfel-unknown-none` by the build
//! script of `bpf-objects/`, never for the host.
//!
//! Entry points are thin: each calls a `try_*` body. Counting happens in
//! per-CPU arrays; nothing logs per packet.
#![no_std]
#![no_main]
// `atomic_xadd`: the BPF target has no compare-and-swap, so `AtomicU64`
// offers no `fetch_add`; the intrinsic is BPF's atomic fetch-add (v3).
#![feature(core_intrinsics)]
#![allow(internal_features)]

mod bfd;
mod loss;

use aya_ebpf::{
    bindings::xdp_action,
    macros::{map, xdp},
    maps::PerCpuArray,
    programs::XdpContext,
};
use linecard_common::placement::PlacementCount;

/// The layout version this object was built against; the userspace loader
/// reads this symbol from the ELF and refuses a mismatch.
#[no_mangle]
#[used]
static LC_LAYOUT_VERSION: u32 = linecard_common::LAYOUT_VERSION;

#[map]
static LC_PLACEMENT: PerCpuArray<PlacementCount> = PerCpuArray::with_max_entries(1, 0);

/// Passes every frame. Its only job is to exist on the receiving end of a
/// veth whose other end sends with XDP_TX (see `linecard_common::names`).
#[xdp]
pub fn lc_pass(_ctx: XdpContext) -> u32 {
    xdp_action::XDP_PASS
}

/// Counts frames on the CPU that runs it, then passes them.
#[xdp]
pub fn lc_placement(ctx: XdpContext) -> u32 {
    try_placement(&ctx);
    xdp_action::XDP_PASS
}

#[inline(always)]
fn try_placement(ctx: &XdpContext) {
    let len = (ctx.data_end() - ctx.data()) as u64;
    if let Some(count) = LC_PLACEMENT.get_ptr_mut(0) {
        // SAFETY: the pointer comes from the per-CPU map lookup, is valid for
        // the duration of the program and no other CPU writes this CPU's slot.
        unsafe {
            (*count).packets += 1;
            (*count).bytes += len;
        }
    }
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

/// The timer and ring-buffer helpers the engine's programs use are GPL-only.
#[link_section = "license"]
#[no_mangle]
#[used]
static LICENSE: [u8; 4] = *b"GPL\0";
