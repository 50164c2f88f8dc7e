//! The detection sweep: one `bpf_timer` that visits every armed slot at
//! the earliest deadline (or every `SWEEP_PERIOD_NS`), reports silent
//! peers (RFC 5880 6.8.4) and raises each session's own clock (6.8.7).

use super::{
    max, min, switch_on, LC_CLOCK_SENT, LC_EVENTS, LC_FIXED_SWEEP, LC_SLOTS, LC_STATE, LC_SWEEP_LEN,
};
use aya_ebpf::bindings::bpf_timer;
use aya_ebpf::btf_maps::Array as BtfArray;
use aya_ebpf::helpers::generated::{
    bpf_get_prandom_u32, bpf_ktime_get_ns, bpf_loop, bpf_timer_init, bpf_timer_set_callback,
    bpf_timer_start,
};
use aya_ebpf::macros::btf_map;
use core::ffi::c_void;
use linecard_common::bfd::{
    event, jittered_gap_ns, judged_detection_ns, longest_gap_ns, periodic_interval_ns,
    SessionState, SlotConfig, SweepEvent, SWEEP_MIN_NS, SWEEP_PERIOD_NS, SWEEP_SLOTS,
};

/// The detection sweep's timer. A map value holding a `bpf_timer` needs BTF,
/// hence a BTF-defined map.
#[repr(C)]
pub struct SweepTimer {
    timer: bpf_timer,
    /// 0 until some CPU has started the sweep.
    started: u64,
}

#[btf_map]
static LC_SWEEP: BtfArray<SweepTimer, 1> = BtfArray::new();

/// bpf_ringbuf_output flag: wake the consumer now.
const BPF_RB_FORCE_WAKEUP: u64 = 2;

/// CLOCK_MONOTONIC, the clock of `bpf_ktime_get_ns`, for bpf_timer_init.
const CLOCK_MONOTONIC: u64 = 1;

/// Starts the detection sweep once (the first packet on any CPU does it).
#[inline(always)]
pub(super) fn ensure_sweep() {
    let Some(cell) = LC_SWEEP.get_ptr_mut(0) else {
        return;
    };
    // SAFETY: the timer lives in a map value of LC_SWEEP, the map passed.
    // Two CPUs racing here is harmless: the second bpf_timer_init fails
    // with -EBUSY and that CPU goes no further.
    unsafe {
        if (*cell).started != 0 {
            return;
        }
        let timer = core::ptr::addr_of_mut!((*cell).timer);
        let map = core::ptr::from_ref(&LC_SWEEP).cast_mut().cast::<c_void>();
        let rc = bpf_timer_init(timer, map, CLOCK_MONOTONIC);
        (*cell).started = 1;
        if rc != 0 {
            return;
        }
        bpf_timer_set_callback(timer, sweep as *mut c_void);
        bpf_timer_start(timer, SWEEP_PERIOD_NS, 0);
    }
}

/// The sweep over each armed slot, with the kernel's timestamp, so that
/// neither instant depends on userspace being scheduled. It runs again at
/// the earliest detection deadline of any slot, or after SWEEP_PERIOD_NS
/// if that is sooner (the own clock's granularity), never sooner than
/// SWEEP_MIN_NS: a detection is as late as the timer fires, not up to a
/// period (issue 11: the Down within 0.5 ms of the expiry).
/// - detection: a peer silent for longer than its detection time is
///   reported once per silence (`event::PEER_SILENT`);
/// - the session's own clock: when nothing has left the session for the
///   whole interval after an RX-clocked reply, or for the jittered gap
///   drawn at its own packet (RFC 5880 6.8.7), `event::TRANSMIT_DUE` asks
///   the responder thread to send.
unsafe extern "C" fn sweep(_map: *mut c_void, _key: *mut u32, cell: *mut SweepTimer) -> i32 {
    let mut pass = SweepPass {
        now: unsafe { bpf_ktime_get_ns() },
        next: SWEEP_PERIOD_NS,
    };
    // bpf_loop, not a loop here: the verifier walks a bounded loop's every
    // iteration, and 4096 of them exceed its budget (E2BIG); a bpf_loop
    // callback is verified once.
    let used = min(
        u64::from(LC_SWEEP_LEN.get(0).copied().unwrap_or(0)),
        u64::from(SWEEP_SLOTS),
    );
    // SAFETY: the callback takes the pass on this stack, which outlives
    // the call.
    unsafe {
        bpf_loop(
            used as u32,
            sweep_one as *mut c_void,
            core::ptr::addr_of_mut!(pass).cast(),
            0,
        )
    };
    // The negative control re-arms on the fixed period, whatever the
    // deadlines: the Down then leaves up to a period after the expiry.
    let wait = if switch_on(&LC_FIXED_SWEEP) {
        SWEEP_PERIOD_NS
    } else {
        max(pass.next, SWEEP_MIN_NS)
    };
    // SAFETY: re-arms the timer this callback belongs to.
    unsafe { bpf_timer_start(core::ptr::addr_of_mut!((*cell).timer), wait, 0) };
    0
}

/// One sweep pass, shared with `bpf_loop`'s callback.
#[repr(C)]
struct SweepPass {
    now: u64,
    /// The earliest wait the slots visited so far ask for, ns.
    next: u64,
}

/// `bpf_loop`'s callback: sweeps slot `index`; 0 goes on to the next.
unsafe extern "C" fn sweep_one(index: u64, pass: *mut SweepPass) -> i64 {
    let slot = index as u32;
    if let Some(config) = LC_SLOTS.get(slot) {
        if config.armed != 0 {
            if let Some(state) = LC_STATE.get_ptr_mut(slot) {
                // SAFETY: `pass` is the sweep's stack value (bpf_loop hands
                // it back), `state` a live map value of LC_STATE.
                unsafe {
                    let wait = sweep_slot((*pass).now, slot, config, &mut *state);
                    (*pass).next = min((*pass).next, wait);
                }
                super::expect::lc_expect_ahead(slot);
            }
        }
    }
    0
}

/// Returns how long until this slot next needs the sweep (its detection
/// deadline or its own clock), ns (`u64::MAX`: nothing pending).
#[inline(always)]
fn sweep_slot(now: u64, slot: u32, config: &SlotConfig, state: &mut SessionState) -> u64 {
    // The fast path writes `last_rx_ns` and `last_tx_ns` concurrently: read
    // each once, volatile. The sweep, a single timer and so never
    // concurrent with itself, alone writes `reported_rx_ns` and the clock
    // fields, so each event is raised once without atomics.
    // SAFETY: plain loads of fields of a live map value.
    let last_rx = unsafe { core::ptr::read_volatile(core::ptr::addr_of!(state.last_rx_ns)) };
    // Signed: a packet stamped after `now` (racing this sweep on another
    // CPU) is not an enormous silence.
    let silent = now as i64 - last_rx as i64;
    // 6.8.4's detection time as the fast path last heard it, unless
    // userspace has written its own since (`judged_detection_ns`). Armed
    // only while userspace wants kernel detection.
    let detect_ns = judged_detection_ns(
        state.detect_ns,
        last_rx,
        config.detect_ns,
        config.written_ns,
    );
    if last_rx != 0 && silent > detect_ns as i64 && state.reported_rx_ns != last_rx {
        state.reported_rx_ns = last_rx;
        report(now, last_rx, slot, config, event::PEER_SILENT);
    }
    // 6.8.6: the peer's last packet said Down or AdminDown. Our session
    // goes Down with Diag 3: the responder sends the Down the loop
    // prepared, once per such packet, and no Up leaves on our own clock
    // after the peer's Down (the loop, starved under load, took 1.5 s to
    // read an AdminDown while the clock kept sending Up: measured).
    // SAFETY: a plain load of a field of a live map value.
    let said_down = unsafe { core::ptr::read_volatile(core::ptr::addr_of!(state.peer_down_rx_ns)) };
    let peer_said_down = said_down != 0 && said_down == last_rx;
    if peer_said_down && state.reported_down_rx_ns != said_down {
        state.reported_down_rx_ns = said_down;
        report(now, last_rx, slot, config, event::PEER_DOWN);
    }
    // The first instant this silence counts as expired (`silent` above
    // must exceed the detection time), if it has not been reported.
    let until_expiry = if last_rx != 0 && state.reported_rx_ns != last_rx {
        let remaining = detect_ns as i64 + 1 - silent;
        if remaining > 0 {
            remaining as u64
        } else {
            0
        }
    } else {
        u64::MAX
    };
    // 6.8.7: our Desired Min TX against the Required Min RX the peer's
    // last packet carried; none to a peer that asks for none.
    let interval = if config.desired_min_tx_ns == 0 {
        0
    } else {
        periodic_interval_ns(config.desired_min_tx_ns, state.remote_required_min_rx_us)
    };
    // After a detection or the peer's Down the session is userspace's
    // again: no clock.
    if interval == 0 || silent > detect_ns as i64 || peer_said_down {
        return until_expiry;
    }
    let xdp_tx = unsafe { core::ptr::read_volatile(core::ptr::addr_of!(state.last_tx_ns)) };
    let clock_sent = clock_sent(slot);
    let last_tx = max(max(xdp_tx, clock_sent), config.user_tx_ns);
    // 6.8.7: no gap longer than the interval allows. After an RX-clocked
    // reply, the whole of it: a punctual peer's next packet comes first
    // and clocks us (its jitter is ours), and a slow or stalled one leaves
    // us at the window's end, not past it (1.1 intervals until session 9:
    // 55 ms gaps beside a peer sending every 300 ms). Once our own clock
    // sent last, nobody else is clocking us, and once the fast path heard
    // a peer packet it could not yet answer (too soon after ours,
    // `reply_floor_ns`), we owe one: either way, the gap drawn at our last
    // packet, kept inside the window of the interval in force should the
    // peer's Required Min RX have moved since.
    let longest = longest_gap_ns(interval, config.detect_mult as u8);
    let owed = clock_sent != 0 && clock_sent >= xdp_tx || last_rx > last_tx;
    let wait = if owed && state.next_gap_ns != 0 {
        min(max(state.next_gap_ns, interval * 3 / 4), longest)
    } else {
        longest
    };
    // Due since the last packet that left, and not asked for since: a
    // responder held off is asked again a gap later, not every sweep.
    if last_tx != 0
        && now as i64 - last_tx as i64 > wait as i64
        && now as i64 - state.clock_tx_ns as i64 > wait as i64
    {
        state.clock_tx_ns = now;
        state.clock_tx_requests += 1;
        // SAFETY: a helper without arguments.
        let draw = unsafe { bpf_get_prandom_u32() };
        state.next_gap_ns = jittered_gap_ns(interval, config.detect_mult as u8, draw);
        report(now, last_rx, slot, config, event::TRANSMIT_DUE);
    }
    // Wake for whichever is first, the expiry or the clock: a clock that
    // waited for the sweep's period would stretch the gap by up to one.
    if last_tx == 0 {
        return until_expiry;
    }
    let due = max(last_tx, state.clock_tx_ns) as i64 + wait as i64 + 1;
    let until_due = due - now as i64;
    min(
        until_expiry,
        if until_due > 0 { until_due as u64 } else { 0 },
    )
}

#[inline(always)]
pub(super) fn clock_sent(slot: u32) -> u64 {
    LC_CLOCK_SENT
        .get_ptr(slot)
        // SAFETY: a live map value; userspace may be writing it (an 8-byte
        // aligned store), read once.
        .map_or(0, |sent| unsafe { core::ptr::read_volatile(sent) })
}

#[inline(always)]
fn report(now: u64, last_rx: u64, slot: u32, config: &SlotConfig, kind: u32) {
    let event = SweepEvent {
        at_ns: now,
        last_rx_ns: last_rx,
        discr: config.discr,
        slot,
        kind,
        _reserved: 0,
    };
    // Force the wakeup: the reader must act at once, not at its next poll
    // of its own.
    let _ = LC_EVENTS.output::<SweepEvent>(&event, BPF_RB_FORCE_WAKEUP);
}
