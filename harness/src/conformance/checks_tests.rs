//! The checks on hand-built traces: each rule passes a DUT that keeps it
//! and fails one that breaks it, with explicit times.

use super::{judge, Outcome, Verdict};
use crate::canary::Stall;
use crate::conformance::packet::{Control, State};
use crate::conformance::script::PEER_DISCR;
use crate::conformance::trace::{Event, Probe, Step, Trace};

const MS: i64 = 1_000_000;
const DUT_DISCR: u32 = 0xd0d0;

#[derive(Default)]
struct Build {
    trace: Trace,
}

impl Build {
    fn began(&mut self, at_ms: f64, step: Step) -> &mut Self {
        self.trace.events.push(Event::Began {
            at_ns: (at_ms * 1e6) as i64,
            step,
        });
        self
    }

    fn heard_with(&mut self, at_ms: f64, f: impl FnOnce(&mut Control)) -> &mut Self {
        let mut p = Control::new(State::Up, DUT_DISCR, PEER_DISCR);
        p.desired_min_tx_us = 50_000;
        p.required_min_rx_us = 50_000;
        f(&mut p);
        self.trace.events.push(Event::Heard {
            at_ns: (at_ms * 1e6) as i64,
            packet: p,
            ttl: 255,
            source_port: 49_152,
        });
        self
    }

    fn heard(&mut self, at_ms: f64, state: State) -> &mut Self {
        self.heard_with(at_ms, |p| p.state = state)
    }

    fn sent_with(
        &mut self,
        at_ms: f64,
        probe: Option<Probe>,
        f: impl FnOnce(&mut Control),
    ) -> &mut Self {
        let mut p = Control::new(State::Up, PEER_DISCR, DUT_DISCR);
        f(&mut p);
        self.trace.events.push(Event::Sent {
            at_ns: (at_ms * 1e6) as i64,
            packet: p,
            probe,
        });
        self
    }

    fn sent(&mut self, at_ms: f64, state: State) -> &mut Self {
        self.sent_with(at_ms, None, |p| p.state = state)
    }

    /// Up packets from the DUT every `gap_ms` over [from, to).
    fn steady(&mut self, from_ms: f64, to_ms: f64, gaps_ms: &[f64]) -> &mut Self {
        let mut at = from_ms;
        let mut i = 0;
        while at < to_ms {
            self.heard(at, State::Up);
            at += gaps_ms[i % gaps_ms.len()];
            i += 1;
        }
        self
    }
}

fn outcome<'a>(all: &'a [Outcome], id: &str) -> &'a Outcome {
    all.iter()
        .find(|o| o.id == id)
        .unwrap_or_else(|| panic!("no check {id}: {all:#?}"))
}

/// Jittered 50 ms gaps, 37.5-50 ms.
const JITTERED: [f64; 5] = [38.0, 49.0, 42.0, 46.0, 40.0];

#[test]
fn periodic_gaps_in_the_window_pass_and_one_long_gap_fails() {
    let mut b = Build::default();
    b.began(0.0, Step::Steady).steady(0.0, 2_500.0, &JITTERED);
    let all = judge(&b.trace, &[]);
    assert_eq!(
        outcome(&all, "jitter-window").verdict,
        Verdict::Pass,
        "{all:#?}"
    );
    assert_eq!(outcome(&all, "jittered").verdict, Verdict::Pass);

    // One 60 ms silence: late past the interval and its tolerance.
    let mut b = Build::default();
    b.began(0.0, Step::Steady)
        .steady(0.0, 1_000.0, &JITTERED)
        .steady(1_060.0, 2_500.0, &JITTERED);
    let all = judge(&b.trace, &[]);
    assert_eq!(outcome(&all, "jitter-window").verdict, Verdict::Fail);

    // The same silence with the machine frozen for 25 ms inside it: not
    // judged either way.
    let last = b
        .trace
        .events
        .iter()
        .filter(|e| e.at_ns() < 1_060 * MS)
        .map(Event::at_ns)
        .max()
        .unwrap();
    let freeze = Stall {
        from_unix_ns: last + 5 * MS,
        to_unix_ns: last + 30 * MS,
    };
    let all = judge(&b.trace, &[freeze]);
    assert_eq!(
        outcome(&all, "jitter-window").verdict,
        Verdict::Inconclusive
    );
}

#[test]
fn unjittered_packets_fail_though_inside_the_window() {
    let mut b = Build::default();
    b.began(0.0, Step::Steady).steady(0.0, 2_500.0, &[50.0]);
    let all = judge(&b.trace, &[]);
    assert_eq!(outcome(&all, "jitter-window").verdict, Verdict::Pass);
    assert_eq!(outcome(&all, "jittered").verdict, Verdict::Fail);
}

#[test]
fn a_final_counts_against_silence_but_not_as_a_periodic_packet() {
    // Periodic at 0, Final at 30, next periodic at 75: the silences are
    // 30 and 45 (fine), the periodic gap 75 is not too short.
    let mut b = Build::default();
    b.began(0.0, Step::SlowerPeer)
        .sent_with(1.0, None, |p| p.poll = true)
        .heard_with(1.1, |p| p.final_ = true);
    let mut at = 2.0;
    for i in 0..60 {
        b.heard(at, State::Up);
        if i == 10 {
            b.heard_with(at + 30.0, |p| p.final_ = true);
            at += 75.0;
        } else {
            at += JITTERED[i % 5];
        }
        if i % 7 == 0 {
            b.sent(at - 1.0, State::Up);
        }
    }
    let all = judge(&b.trace, &[]);
    assert_eq!(
        outcome(&all, "own-rate-beside-slow-peer").verdict,
        Verdict::Pass,
        "{all:#?}"
    );
}

#[test]
fn a_probe_the_dut_takes_fails_its_own_check_only() {
    let mut b = Build::default();
    b.began(0.0, Step::Probes);
    let mut at = 0.0;
    for probe in Probe::WHILE_UP {
        b.sent_with(at, Some(probe), |p| p.state = State::AdminDown);
        if probe == Probe::Multipoint {
            // FRR 8.4.4: M not checked, the AdminDown taken.
            b.heard_with(at + 3.0, |p| {
                p.state = State::Down;
                p.diag = 3;
            });
        }
        b.steady(at + 10.0, at + 300.0, &JITTERED);
        at += 300.0;
    }
    let all = judge(&b.trace, &[]);
    assert_eq!(outcome(&all, "discard-multipoint").verdict, Verdict::Fail);
    assert!(outcome(&all, "discard-multipoint")
        .detail
        .contains("Diag 3"));
    assert_eq!(outcome(&all, "discard-version2").verdict, Verdict::Pass);
    assert_eq!(outcome(&all, "discard-ttl254").verdict, Verdict::Pass);
}

#[test]
fn detection_is_judged_from_our_last_packet_and_needs_diag_1() {
    let run = |down_after_ms: f64, diag: u8| {
        let mut b = Build::default();
        b.began(0.0, Step::FasterPeerThenSilence)
            .sent(0.0, State::Up)
            .heard(10.0, State::Up)
            .heard_with(down_after_ms, |p| {
                p.state = State::Down;
                p.diag = diag;
            });
        judge(&b.trace, &[])
    };
    // 3 x 50 ms: 160 ms is on time with Diag 1.
    let all = run(160.0, 1);
    assert_eq!(outcome(&all, "detection-time").verdict, Verdict::Pass);
    assert_eq!(outcome(&all, "detection-diagnostic").verdict, Verdict::Pass);
    // Too early: the DUT used a shorter detection time than 6.8.4's.
    assert_eq!(
        outcome(&run(120.0, 1), "detection-time").verdict,
        Verdict::Fail
    );
    // Too late: still on the old 3 x 300 ms.
    assert_eq!(
        outcome(&run(900.0, 1), "detection-time").verdict,
        Verdict::Fail
    );
    // The wrong diagnostic.
    assert_eq!(
        outcome(&run(160.0, 3), "detection-diagnostic").verdict,
        Verdict::Fail
    );
}

#[test]
fn up_before_our_init_breaks_the_three_way_handshake() {
    let mut good = Build::default();
    good.began(0.0, Step::Handshake)
        .sent(0.0, State::Down)
        .heard(5.0, State::Init)
        .sent(5.1, State::Up)
        .heard(8.0, State::Up);
    assert_eq!(
        outcome(&judge(&good.trace, &[]), "three-way-handshake").verdict,
        Verdict::Pass
    );
    // Straight from Down to Up on our Down.
    let mut bad = Build::default();
    bad.began(0.0, Step::Handshake)
        .sent(0.0, State::Down)
        .heard(5.0, State::Up)
        .sent(5.1, State::Up);
    assert_eq!(
        outcome(&judge(&bad.trace, &[]), "three-way-handshake").verdict,
        Verdict::Fail
    );
}

#[test]
fn periodic_packets_after_required_min_rx_zero_fail() {
    let run = |periodic_after: bool| {
        let mut b = Build::default();
        b.began(0.0, Step::ZeroMinRx)
            .sent_with(0.0, None, |p| {
                p.poll = true;
                p.required_min_rx_us = 0;
            })
            .heard_with(0.1, |p| p.final_ = true)
            .sent_with(700.0, None, |p| p.poll = true)
            .heard_with(700.1, |p| p.final_ = true);
        if periodic_after {
            b.heard(400.0, State::Up);
        }
        b.sent(1_200.0, State::Up);
        judge(&b.trace, &[])
    };
    assert_eq!(
        outcome(&run(false), "min-rx-zero-stops-periodic").verdict,
        Verdict::Pass
    );
    assert_eq!(
        outcome(&run(true), "min-rx-zero-stops-periodic").verdict,
        Verdict::Fail
    );
}

#[test]
fn a_step_the_script_could_not_set_up_is_inconclusive_never_passed() {
    let mut b = Build::default();
    b.began(0.0, Step::Steady).trace.events.push(Event::Stuck {
        at_ns: MS,
        why: "the DUT did not settle".into(),
    });
    b.steady(2.0, 2_500.0, &JITTERED);
    let all = judge(&b.trace, &[]);
    assert_eq!(
        outcome(&all, "jitter-window").verdict,
        Verdict::Inconclusive
    );
    // A step never reached is not passed either.
    assert_eq!(
        outcome(&all, "admin-down-received").verdict,
        Verdict::Inconclusive
    );
}

#[test]
fn a_dut_that_changes_its_timers_must_poll_with_the_new_values() {
    let run = |polls: bool| {
        let mut b = Build::default();
        b.began(0.0, Step::DutSlower)
            .steady(0.0, 100.0, &JITTERED)
            .heard_with(100.0, |p| {
                p.poll = polls;
                p.desired_min_tx_us = 100_000;
                p.required_min_rx_us = 100_000;
            })
            .sent_with(100.2, None, |p| p.final_ = true)
            .steady(180.0, 2_500.0, &[80.0, 95.0, 88.0, 76.0]);
        judge(&b.trace, &[])
    };
    let all = run(true);
    assert_eq!(
        outcome(&all, "dut-raise-polls").verdict,
        Verdict::Pass,
        "{all:#?}"
    );
    assert_eq!(
        outcome(&all, "dut-raise-window").verdict,
        Verdict::Pass,
        "{all:#?}"
    );
    // New timers without a Poll: 6.8.10 requires one.
    assert_eq!(
        outcome(&run(false), "dut-raise-polls").verdict,
        Verdict::Fail
    );
    // A DUT the suite cannot drive (BIRD): not judged, never passed.
    let mut b = Build::default();
    b.began(0.0, Step::DutFaster)
        .trace
        .events
        .push(Event::Stuck {
            at_ns: MS,
            why: "bird's timers change only by reconfiguration".into(),
        });
    let all = judge(&b.trace, &[]);
    assert_eq!(
        outcome(&all, "dut-cut-polls").verdict,
        Verdict::Inconclusive
    );
}
