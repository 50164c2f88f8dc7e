//! The checks of what changes while the session runs: Required Min RX
//! raised, lowered and zero; the DUT's own timer change; a slower peer; a
//! multiplier without a Poll; silence and its detection; AdminDown.

use crate::conformance::checks::first_final;
use crate::conformance::checks::gaps;
use crate::conformance::checks::jitter_window;
use crate::conformance::checks::ms;
use crate::conformance::checks::packets_from;
use crate::conformance::checks::periodic_from;
use crate::conformance::checks::Judge;
use crate::conformance::checks::MS;
use crate::conformance::checks::TOLERANCE_NS;
use crate::conformance::packet::State;
use crate::conformance::packet::DIAG_DETECTION_EXPIRED;
use crate::conformance::packet::DIAG_NEIGHBOR_DOWN;
use crate::conformance::script::BASE_INTERVAL_US;
use crate::conformance::script::DUT_SLOW_US;
use crate::conformance::script::HIGH_MULT;
use crate::conformance::script::RAISED_MIN_RX_US;
use crate::conformance::script::SLOW_TX_US;
use crate::conformance::trace::heard;
use crate::conformance::trace::sent;
use crate::conformance::trace::Event;
use crate::conformance::trace::Step;
use crate::conformance::Verdict;

pub(super) fn min_rx_changes(j: &mut Judge) {
    const RFC: &str = "RFC 5880 6.8.7, 6.8.10";
    // From the Final on for a raise (the DUT knows it then); for a cut,
    // from one old interval later (a packet already scheduled at the old
    // rate may still take its time: 6.8.7 asks no reschedule).
    let cases = [
        (
            "honours-raised-min-rx",
            Step::RaisedMinRx,
            RAISED_MIN_RX_US,
            0,
            "periodic packets at Required Min RX 200 ms",
        ),
        (
            "honours-lowered-min-rx",
            Step::LoweredMinRx,
            BASE_INTERVAL_US,
            RAISED_MIN_RX_US,
            "periodic packets back at 50 ms",
        ),
    ];
    for (id, step, interval_us, grace_us, what) in cases {
        if let Some(why) = j.stuck_in(step) {
            j.record(id, RFC, true, Verdict::Inconclusive, why);
            continue;
        }
        let events = j.trace.step(step);
        let Some(fin) = first_final(events, events[0].at_ns()) else {
            j.record(id, RFC, true, Verdict::Fail, "no Final to our Poll".into());
            continue;
        };
        let from = fin + i64::from(grace_us) * 1_000;
        j.window(
            id,
            RFC,
            &packets_from(events, from),
            jitter_window(interval_us),
            5,
            what,
        );
    }
    let id = "min-rx-zero-stops-periodic";
    if let Some(why) = j.stuck_in(Step::ZeroMinRx) {
        return j.record(id, RFC, false, Verdict::Inconclusive, why);
    }
    let events = j.trace.step(Step::ZeroMinRx);
    let Some(fin) = first_final(events, events[0].at_ns()) else {
        return j.record(
            id,
            RFC,
            false,
            Verdict::Fail,
            "no Final to our Poll for 0".into(),
        );
    };
    // One interval for a packet already on its way.
    let settled = fin + i64::from(BASE_INTERVAL_US) * 1_000 + TOLERANCE_NS;
    let periodic = periodic_from(events, settled).len();
    let finals = heard(events)
        .filter(|(at, p)| *at > fin && p.final_)
        .count();
    let end = events.last().map_or(settled, Event::at_ns);
    j.record(
        id,
        "RFC 5880 6.8.7, 6.5",
        false,
        if periodic == 0 && finals >= 1 && end - settled >= 500 * MS {
            Verdict::Pass
        } else {
            Verdict::Fail
        },
        format!(
            "{periodic} periodic packets over {:.0} ms after the Final; {finals} Finals to our later Polls (Finals still go, 6.5)",
            ms(end - settled)
        ),
    );
}

/// The DUT's own timer changes by its operator: a Poll carrying the new
/// values (6.8.3, 6.8.10), no false Down, and its gaps at the new rate
/// once our Final answered (6.8.7).
pub(super) fn dut_changes(j: &mut Judge) {
    const RFC: &str = "RFC 5880 6.8.3, 6.8.10";
    for (step, us, id, window_id) in [
        (
            Step::DutSlower,
            DUT_SLOW_US,
            "dut-raise-polls",
            "dut-raise-window",
        ),
        (
            Step::DutFaster,
            BASE_INTERVAL_US,
            "dut-cut-polls",
            "dut-cut-window",
        ),
    ] {
        if j.unjudged(
            step,
            &[(id, RFC, false), (window_id, "RFC 5880 6.8.7", true)],
        ) {
            continue;
        }
        let events = j.trace.step(step);
        let poll = heard(events)
            .find(|(_, p)| p.poll && p.desired_min_tx_us == us && p.required_min_rx_us == us)
            .map(|(at, _)| at);
        let fell = not_up_packets(events);
        let our_final = poll.and_then(|at| {
            sent(events)
                .find(|(t, p, _)| *t >= at && p.final_)
                .map(|x| x.0)
        });
        // Polling ends with our Final (6.5): no P after the next interval.
        let still_polling = our_final.map_or(0, |f| {
            heard(events)
                .filter(|(at, p)| *at > f + i64::from(us) * 1_000 + TOLERANCE_NS && p.poll)
                .count()
        });
        let verdict = if poll.is_some() && fell.is_empty() && still_polling == 0 {
            Verdict::Pass
        } else {
            Verdict::Fail
        };
        j.record(
            id,
            RFC,
            false,
            verdict,
            format!(
                "a Poll with Desired Min TX and Required Min RX {} ms: {}; Polls after our Final: {still_polling}; DUT packets not Up: {fell:?}",
                us / 1_000,
                if poll.is_some() { "seen" } else { "none" }
            ),
        );
        // The new rate from one old interval after our Final (a packet
        // scheduled at the old rate may still leave at it).
        let from = our_final.map_or(i64::MAX, |f| f + i64::from(DUT_SLOW_US) * 1_000);
        j.window(
            window_id,
            "RFC 5880 6.8.7",
            &packets_from(events, from),
            jitter_window(us),
            8,
            &format!("periodic packets at their new {} ms", us / 1_000),
        );
    }
}

/// The DUT's packets not Up in `events`, as (ms into it, state, diag).
fn not_up_packets(events: &[Event]) -> Vec<(f64, State, u8)> {
    let start = events.first().map_or(0, Event::at_ns);
    heard(events)
        .filter(|(_, p)| p.state != State::Up)
        .map(|(at, p)| (ms(at - start), p.state, p.diag))
        .collect()
}

/// Our longest silence in `events` after `from_ns`.
fn our_longest_silence(events: &[Event], from_ns: i64) -> i64 {
    let ours: Vec<i64> = sent(events)
        .filter(|(at, _, probe)| *at >= from_ns && probe.is_none())
        .map(|x| x.0)
        .collect();
    gaps(&ours).iter().map(|(a, b)| b - a).max().unwrap_or(0)
}

pub(super) fn slower_peer(j: &mut Judge) {
    const RFC: &str = "RFC 5880 6.8.4, 6.8.3";
    let checks = [
        ("follows-slower-peer", RFC, false),
        ("own-rate-beside-slow-peer", "RFC 5880 6.8.7", true),
    ];
    if j.unjudged(Step::SlowerPeer, &checks) {
        return;
    }
    let events = j.trace.step(Step::SlowerPeer);
    let Some(fin) = first_final(events, events[0].at_ns()) else {
        j.record(
            "follows-slower-peer",
            RFC,
            false,
            Verdict::Fail,
            "no Final to our Poll".into(),
        );
        return;
    };
    let silence = our_longest_silence(events, fin);
    let fell = not_up_packets(events);
    let verdict = if silence < i64::from(SLOW_TX_US) * 1_000 * 2 / 3 {
        Verdict::Inconclusive
    } else if fell.is_empty() {
        Verdict::Pass
    } else {
        Verdict::Fail
    };
    j.record(
        "follows-slower-peer",
        RFC,
        false,
        verdict,
        format!(
            "we sent every {} ms after the Final (longest silence {:.0} ms, detection 3 x 300 ms); DUT packets not Up: {fell:?}",
            SLOW_TX_US / 1_000,
            ms(silence)
        ),
    );
    // Our slow packets must not slow the DUT: its interval is still
    // max(its Desired Min TX, our Required Min RX) = 50 ms.
    j.window(
        "own-rate-beside-slow-peer",
        "RFC 5880 6.8.7",
        &packets_from(events, fin),
        jitter_window(BASE_INTERVAL_US),
        20,
        "periodic packets while we send every 300 ms",
    );
}

pub(super) fn multiplier(j: &mut Judge) {
    const RFC: &str = "RFC 5880 6.8.11, 6.8.4";
    if let Some(why) = j.stuck_in(Step::Multiplier) {
        return j.record(
            "multiplier-without-poll",
            RFC,
            false,
            Verdict::Inconclusive,
            why,
        );
    }
    let events = j.trace.step(Step::Multiplier);
    let polled = sent(events).any(|(_, p, _)| p.poll);
    let raised = sent(events).all(|(_, p, _)| p.detect_mult == HIGH_MULT);
    let silence = our_longest_silence(events, events[0].at_ns());
    let fell = not_up_packets(events);
    // Covered by the new multiplier (10 x 50 ms), not by the old (3 x).
    let verdict = if polled || !raised || silence < 300 * MS {
        Verdict::Inconclusive
    } else if fell.is_empty() {
        Verdict::Pass
    } else {
        Verdict::Fail
    };
    j.record(
        "multiplier-without-poll",
        RFC,
        false,
        verdict,
        format!(
            "Detect Mult {HIGH_MULT} without a Poll, then silences up to {:.0} ms (detection {} ms, 150 ms before); DUT packets not Up: {fell:?}",
            ms(silence),
            u32::from(HIGH_MULT) * BASE_INTERVAL_US / 1_000
        ),
    );
}

pub(super) fn detection(j: &mut Judge) {
    const RFC: &str = "RFC 5880 6.8.4";
    let checks = [
        ("detection-time", RFC, true),
        ("detection-diagnostic", "RFC 5880 6.8.1, 4.1", false),
    ];
    if j.unjudged(Step::FasterPeerThenSilence, &checks) {
        return;
    }
    let events = j.trace.step(Step::FasterPeerThenSilence);
    let last_ours = sent(events)
        .filter(|(_, _, p)| p.is_none())
        .map(|x| x.0)
        .max();
    let down = last_ours.and_then(|last| {
        heard(events)
            .find(|(at, p)| *at > last && p.state != State::Up)
            .map(|(at, p)| (at - last, p.state, p.diag))
    });
    // 3 x 50 ms after our last packet: our Desired Min TX lowered from
    // 300 ms by the Poll, so the DUT must have followed it down.
    let detect = 3 * i64::from(BASE_INTERVAL_US) * 1_000;
    let (lo, hi) = (
        detect - MS,
        detect + i64::from(BASE_INTERVAL_US) * 1_000 + TOLERANCE_NS,
    );
    let (verdict, detail) = match down {
        None => (
            Verdict::Fail,
            "the DUT never went Down after we fell silent".to_string(),
        ),
        Some((after, state, diag)) => {
            let frozen = crate::freeze::frozen_within_ms(
                j.freezes,
                last_ours.unwrap_or(0),
                last_ours.unwrap_or(0) + after,
            );
            let verdict = if after < lo {
                Verdict::Fail
            } else if after <= hi {
                Verdict::Pass
            } else if ms(after - hi) <= frozen + 1.0 {
                Verdict::Inconclusive
            } else {
                Verdict::Fail
            };
            (
                verdict,
                format!(
                    "{state:?} (Diag {diag}) {:.1} ms after our last packet; {:.0}-{:.1} ms allowed (detection {:.0} ms, then one interval to say so)",
                    ms(after),
                    ms(lo),
                    ms(hi),
                    ms(detect)
                ),
            )
        }
    };
    j.record("detection-time", RFC, true, verdict, detail);
    let diag = down.map(|d| d.2);
    j.record(
        "detection-diagnostic",
        "RFC 5880 6.8.1, 4.1",
        false,
        if diag == Some(DIAG_DETECTION_EXPIRED) {
            Verdict::Pass
        } else {
            Verdict::Fail
        },
        format!("Diag {diag:?} on the first packet after detection (1 required)"),
    );
}

pub(super) fn admin_down(j: &mut Judge) {
    const RFC: &str = "RFC 5880 6.8.6";
    if let Some(why) = j.stuck_in(Step::AdminDown) {
        return j.record(
            "admin-down-received",
            RFC,
            false,
            Verdict::Inconclusive,
            why,
        );
    }
    let events = j.trace.step(Step::AdminDown);
    let first = sent(events)
        .find(|(_, p, _)| p.state == State::AdminDown)
        .map(|x| x.0);
    let after: Vec<(State, u8)> = heard(events)
        .filter(|(at, _)| first.is_some_and(|f| *at > f))
        .map(|(_, p)| (p.state, p.diag))
        .skip_while(|(s, _)| *s == State::Up)
        .collect();
    let ok = !after.is_empty()
        && after
            .iter()
            .all(|(s, d)| *s == State::Down && *d == DIAG_NEIGHBOR_DOWN);
    j.record(
        "admin-down-received",
        RFC,
        false,
        if ok { Verdict::Pass } else { Verdict::Fail },
        format!(
            "after our AdminDown the DUT sent {} packets past Up: {:?} (Down, Diag 3, and never Init, required)",
            after.len(),
            after.iter().take(4).collect::<Vec<_>>()
        ),
    );
}
