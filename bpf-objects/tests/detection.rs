//! RFC 5880 6.8.4 in the kernel's detection sweep, on its real timer: the
//! detection time in force is the one the fast path computed from the
//! peer's last packet once it has heard one since userspace wrote its own
//! (`linecard_common::bfd::judged_detection_ns`, whose every case is a
//! unit test). This proves the sweep judges by it. Needs root; without it,
//! a printed skip (a failure under LINECARD_REQUIRE_PRIVILEGED=1).

use linecard_bpf_objects::craft::{bfd, frame, session, OUR_DISCR, PEER_DISCR, SLOT};
use linecard_bpf_objects::test_run::{self, monotonic_ns, Loaded};
use linecard_common::bfd::{detection_time_ns, SlotConfig};
use linecard_common::names;
use std::time::{Duration, Instant};

const MS: u64 = 1_000_000;

/// The peer's Up packet at 3 x 10 ms: 30 ms of detection time (ours asks
/// for 10 ms too).
fn peer_up_at_mult_3() -> Vec<u8> {
    frame(255, &bfd(3, 0, PEER_DISCR, OUR_DISCR))
}

/// Userspace's arming of the slot, with the detection time it last
/// computed: 10 x 50 ms, what the peer's Detect Mult 10 set before it went
/// back to 3 (6.8.11) and a starved loop did not yet rewrite.
fn arm(fast: &mut Loaded) {
    fast.set(names::SWEEP_LEN_MAP, 0, SLOT + 1);
    fast.set(
        names::SLOTS_MAP,
        SLOT,
        SlotConfig {
            detect_ns: detection_time_ns(10, 50_000, 50_000),
            discr: OUR_DISCR,
            armed: 1,
            detect_mult: 3,
            written_ns: monotonic_ns(),
            ..SlotConfig::default()
        },
    );
}

/// How long after the peer's packet the sweep reported its silence (the
/// reported packet is the last heard), polled until `limit`.
fn reported_within(fast: &Loaded, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    while started.elapsed() < limit {
        let state = fast.state();
        if state.last_rx_ns != 0 && state.reported_rx_ns == state.last_rx_ns {
            return Some(Duration::from_nanos(monotonic_ns() - state.last_rx_ns));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    None
}

#[test]
fn a_packet_heard_after_userspace_wrote_sets_the_detection_time() {
    if !test_run::privileged(module_path!()) {
        return;
    }
    let mut fast = Loaded::new(session(true), Default::default());
    arm(&mut fast);
    // Heard after the write: 3 x 10 ms, not userspace's 500 ms.
    fast.run(&peer_up_at_mult_3());
    assert_eq!(fast.state().detect_ns, 30 * MS);
    let reported = reported_within(&fast, Duration::from_millis(300));
    assert!(
        reported.is_some(),
        "the sweep judged by userspace's stale 500 ms, not the packet's 30 ms"
    );

    // The control: heard before userspace wrote, userspace's larger time
    // holds (the kernel's may be older than a Poll userspace answered).
    let mut fast = Loaded::new(session(true), Default::default());
    fast.run(&peer_up_at_mult_3());
    std::thread::sleep(Duration::from_millis(1));
    arm(&mut fast);
    assert_eq!(
        reported_within(&fast, Duration::from_millis(300)),
        None,
        "reported before userspace's 500 ms"
    );
    let late = reported_within(&fast, Duration::from_secs(2))
        .expect("reported once userspace's 500 ms passed");
    assert!(late >= Duration::from_millis(500), "{late:?}");
}

/// The slot armed as userspace arms an offloaded session with an own
/// clock at 10 ms and a detection time long enough not to interfere.
fn arm_with_clock(fast: &mut Loaded) {
    fast.set(names::SWEEP_LEN_MAP, 0, SLOT + 1);
    fast.set(
        names::SLOTS_MAP,
        SLOT,
        SlotConfig {
            detect_ns: 3_000 * MS,
            discr: OUR_DISCR,
            armed: 1,
            desired_min_tx_ns: 10 * MS,
            detect_mult: 3,
            written_ns: monotonic_ns(),
            ..SlotConfig::default()
        },
    );
}

/// RFC 5880 6.8.6: a peer that says Down (or AdminDown) takes our session
/// Down with Diag 3. The sweep reports it once (`event::PEER_DOWN`: the
/// responder sends the Down at once) and the session's own clock sends no
/// Up after it, whenever the loop gets to read the packet.
#[test]
fn the_peer_s_down_is_reported_and_stops_the_own_clock() {
    if !test_run::privileged(module_path!()) {
        return;
    }
    // The control: after our reply to its Up, a silent peer is sent our
    // steady packet by the own clock 10 ms on.
    let mut fast = Loaded::new(session(true), Default::default());
    arm_with_clock(&mut fast);
    fast.run(&peer_up_at_mult_3());
    std::thread::sleep(Duration::from_millis(25));
    assert!(fast.state().clock_tx_requests >= 1, "{:?}", fast.state());

    // The peer says Down right after our reply, at the slow rate (1 s).
    let mut fast = Loaded::new(session(true), Default::default());
    arm_with_clock(&mut fast);
    fast.run(&peer_up_at_mult_3());
    let mut down = bfd(1, 0, PEER_DISCR, OUR_DISCR);
    down[12..16].copy_from_slice(&1_000_000u32.to_be_bytes());
    fast.run(&frame(255, &down));
    std::thread::sleep(Duration::from_millis(25));
    let state = fast.state();
    assert_eq!(state.peer_down_rx_ns, state.last_rx_ns, "{state:?}");
    assert_eq!(state.reported_down_rx_ns, state.last_rx_ns, "reported once");
    assert_eq!(state.clock_tx_requests, 0, "no Up after the peer's Down");
}
