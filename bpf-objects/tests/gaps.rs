//! The fast path's gap histograms (`LC_GAPS`, issue 41), in the kernel,
//! with BPF_PROG_TEST_RUN: a packet heard records the receive gap since
//! the peer's previous one against the detection time that packet set, and
//! a reply records the transmit gap since our last packet against the
//! peer's detection time; a packet heard but not answered records no
//! transmit gap. Times are placed explicitly in the session's state, so
//! no test sleeps. Needs root; without it, a printed skip (a failure under
//! LINECARD_REQUIRE_PRIVILEGED=1).

#![allow(clippy::unwrap_used)] // a test: a panic is the failure, with its line
use aya::maps::PerCpuArray;
use linecard_bpf_objects::craft::{bfd, frame, session, OUR_DISCR, PEER_DISCR, SLOT};
use linecard_bpf_objects::test_run::{self, monotonic_ns, Loaded as FastPath};
use linecard_bpf_objects::Switches;
use linecard_common::bfd::{periodic_interval_ns, SessionState};
use linecard_common::gaps::{gap_bucket, ratio_bucket, SessionGaps};
use linecard_common::names;

const XDP_DROP: u32 = 1;
const XDP_TX: u32 = 3;
const MS: u64 = 1_000_000;

/// `LC_GAPS` at the session's slot, summed over CPUs.
fn gaps(fast: &FastPath) -> SessionGaps {
    let map: PerCpuArray<&aya::maps::MapData, SessionGaps> =
        PerCpuArray::try_from(fast.bpf.map(names::GAPS_MAP).expect("LC_GAPS")).unwrap();
    let mut sum = SessionGaps::default();
    for cpu in map.get(&SLOT, 0).unwrap().iter() {
        sum.rx.add(&cpu.rx);
        sum.tx.add(&cpu.tx);
    }
    sum
}

/// The peer's previous packet placed 12 ms ago, having set a 30 ms
/// detection time (3 x 10 ms), our last packet 11 ms ago; then the peer's
/// Up packet run, which must be answered. The state before the run.
fn reply_after_placed_gaps(fast: &mut FastPath) -> SessionState {
    let now = monotonic_ns();
    let state = SessionState {
        last_rx_ns: now - 12 * MS,
        last_tx_ns: now - 11 * MS,
        detect_ns: 30 * MS,
        ..fast.state()
    };
    fast.set(names::STATE_MAP, SLOT, state);
    let up = frame(255, &bfd(3, 0, PEER_DISCR, OUR_DISCR));
    assert_eq!(fast.run(&up).action, XDP_TX, "answered");
    state
}

#[test]
fn a_reply_records_both_gaps_and_a_packet_heard_only_the_receive_gap() {
    if !test_run::privileged(module_path!()) {
        return;
    }
    let mut fast = FastPath::new(session(true), Switches::default());
    assert_eq!(
        gaps(&fast),
        SessionGaps::default(),
        "nothing before a packet"
    );
    let state = reply_after_placed_gaps(&mut fast);
    let up = frame(255, &bfd(3, 0, PEER_DISCR, OUR_DISCR));
    let after = fast.state();
    let (rx_gap, tx_gap) = (
        after.last_rx_ns - state.last_rx_ns,
        after.last_tx_ns - state.last_tx_ns,
    );
    // Precondition: the run took well under a millisecond, so each gap is
    // in the bucket of its placed value.
    assert!(rx_gap < 13 * MS && tx_gap < 12 * MS, "{rx_gap} {tx_gap}");
    let first = gaps(&fast);
    assert_eq!((first.rx.count, first.tx.count), (1, 1));
    assert_eq!((first.rx.max_ns, first.tx.max_ns), (rx_gap, tx_gap));
    assert_eq!(first.rx.seconds[gap_bucket(rx_gap)], 1, "{first:?}");
    assert_eq!(first.rx.ratio[ratio_bucket(rx_gap, 30 * MS).unwrap()], 1);
    // The peer's detection time: its Detect Mult (3) times the interval we
    // send at (10 ms each way).
    let peer_detect = 3 * periodic_interval_ns(10 * MS, 10_000);
    assert_eq!(first.tx.seconds[gap_bucket(tx_gap)], 1);
    assert_eq!(
        first.tx.ratio[ratio_bucket(tx_gap, peer_detect).unwrap()],
        1
    );
    assert_eq!(first.rx.over_budget(5), 0, "0.4 of the detection time");

    // At once again: heard (too soon after our reply), not answered.
    assert_eq!(fast.run(&up).action, XDP_DROP);
    let second = gaps(&fast);
    assert_eq!((second.rx.count, second.tx.count), (2, 1));
    assert_eq!(second.rx.seconds[0], 1, "a gap under 1 ms");

    // A silence of 27 ms (0.9 of the detection time) is over budget at
    // 0.5 and 0.8, not at 1.0.
    let state = SessionState {
        last_rx_ns: monotonic_ns() - 27 * MS,
        ..fast.state()
    };
    fast.set(names::STATE_MAP, SLOT, state);
    fast.run(&up);
    let third = gaps(&fast);
    assert_eq!(
        (
            third.rx.over_budget(5),
            third.rx.over_budget(8),
            third.rx.over_budget(10)
        ),
        (1, 1, 0),
        "{third:?}"
    );
}

/// The scrape window (`LC_GAPS_WINDOW`): each gap's largest of the window
/// open when it was recorded, with the kernel's time it ended; a window
/// the endpoint closed stays readable while the next fills.
#[test]
fn each_scrape_window_keeps_its_largest_gap_and_when_it_ended() {
    if !test_run::privileged(module_path!()) {
        return;
    }
    let mut fast = FastPath::new(session(true), Switches::default());
    reply_after_placed_gaps(&mut fast);
    let heard_at = fast.state().last_rx_ns;
    let first = gaps(&fast);
    assert_eq!(
        first.rx.window_max(0),
        Some((first.rx.max_ns, heard_at)),
        "window 0, the one open since load"
    );
    // The endpoint opens window 1; a silence of 20 ms ends in it.
    fast.set(names::GAPS_WINDOW_MAP, 0, 1u64);
    let state = SessionState {
        last_rx_ns: monotonic_ns() - 20 * MS,
        ..fast.state()
    };
    fast.set(names::STATE_MAP, SLOT, state);
    fast.run(&frame(255, &bfd(3, 0, PEER_DISCR, OUR_DISCR)));
    let second = gaps(&fast);
    assert_eq!(
        second.rx.window_max(0),
        first.rx.window_max(0),
        "closed, kept"
    );
    let (gap, at) = second.rx.window_max(1).expect("window 1's gap");
    assert!((20 * MS..21 * MS).contains(&gap), "{gap}");
    assert_eq!(at, fast.state().last_rx_ns);
    assert_eq!(second.rx.max_ns, gap, "the largest since start too");
}

/// The negative control: the same program loaded with `LC_NO_GAPS`
/// answers the same packet and records nothing (what `linecard bench xdp`
/// prices the histograms against).
#[test]
fn with_no_gaps_set_a_reply_records_nothing() {
    if !test_run::privileged(module_path!()) {
        return;
    }
    let switches = Switches {
        no_gaps: true,
        ..Switches::default()
    };
    let mut fast = FastPath::new(session(true), switches);
    reply_after_placed_gaps(&mut fast);
    assert_eq!(gaps(&fast), SessionGaps::default());
}
