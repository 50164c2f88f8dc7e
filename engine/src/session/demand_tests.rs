//! Demand mode (RFC 5880 6.6, and its rules in 6.8.4, 6.8.6 and 6.8.7).

use super::tests::{config, remote, up_session, up_with, MS, S};
use super::*;
use crate::backend::sim::{config_3x10, Side, SimPair};
use linecard_api::control::Diagnostic as D;

/// Verification every 500 ms.
const VERIFY_US: u32 = 500_000;

fn demand_config() -> SessionConfig {
    SessionConfig {
        demand: true,
        demand_verify_us: VERIFY_US,
        ..config()
    }
}

#[test]
fn d_is_set_only_while_both_sides_are_up() {
    let mut s = Session::new(demand_config(), 0, 7);
    assert!(!s.poll_transmit(0).unwrap().demand, "Down: never D");
    // The remote says Init: we go Up, but it does not know it yet.
    s.receive_repr(MS, &remote(State::Init, 0x1111)).unwrap();
    assert_eq!(s.state(), State::Up);
    assert!(!s.poll_transmit(MS).unwrap().demand, "the remote is not Up");
    let mut s = up_with(demand_config());
    assert!(s.local_demand_active());
    assert_eq!(
        s.fast_path_role(),
        None,
        "only we ask: we keep transmitting, and detection is Poll-timed, userspace's"
    );
    assert!(s.poll_transmit(20 * MS).unwrap().demand);
    // The remote goes Down: D clears with our Up.
    s.receive_repr(30 * MS, &remote(State::Down, 0x1111))
        .unwrap();
    assert!(!s.poll_transmit(30 * MS).unwrap().demand);
}

#[test]
fn a_remote_in_demand_mode_gets_no_periodic_packets_but_every_final() {
    let mut s = up_session();
    let mut demanding = remote(State::Up, 0x1111);
    demanding.demand = true;
    s.receive_repr(10 * MS, &demanding).unwrap();
    assert!(s.remote_demand_active());
    assert!(!s.is_steady(), "no RX-clocked reply to each of its packets");
    assert_eq!(
        s.fast_path_role(),
        Some(FastPathRole::PollsOnly),
        "the fast path may answer its Polls, nothing else"
    );
    // Drain anything due at the moment the remote asked.
    while s.poll_transmit(10 * MS).is_some() {}
    for t in (11..2_000).map(|ms| ms * MS) {
        // The remote still sends periodically: we did not ask it to stop.
        if t % (10 * MS) == 0 {
            s.receive_repr(t, &demanding).unwrap();
        }
        assert!(s.on_timer(t).is_none(), "its packets keep us Up");
        assert!(s.poll_transmit(t).is_none(), "periodic packet at {t}");
    }
    // 6.8.6: a Poll is answered at once, Demand mode or not.
    let mut poll = demanding;
    poll.poll = true;
    s.receive_repr(2 * S, &poll).unwrap();
    assert_eq!(s.fast_path_role(), None, "a Final is owed: userspace's");
    let f = s.poll_transmit(2 * S).expect("the Final");
    assert!(f.final_ && !f.poll);
    assert!(s.poll_transmit(2 * S + 50 * MS).is_none());
    assert_eq!(s.fast_path_role(), Some(FastPathRole::PollsOnly));
    // The remote leaves Demand mode: periodic transmission resumes at once.
    s.receive_repr(2 * S + 60 * MS, &remote(State::Up, 0x1111))
        .unwrap();
    assert_eq!(s.fast_path_role(), Some(FastPathRole::Steady));
    assert!(s.poll_transmit(2 * S + 60 * MS).is_some());
}

#[test]
fn our_own_poll_is_transmitted_to_a_remote_in_demand_mode() {
    let mut s = up_session();
    let mut demanding = remote(State::Up, 0x1111);
    demanding.demand = true;
    s.receive_repr(10 * MS, &demanding).unwrap();
    while s.poll_transmit(10 * MS).is_some() {}
    // A timer change polls: the Poll's packets flow despite Demand mode
    // (6.8.7), until the Final ends it.
    s.set_timers(20 * MS, 20_000, 10_000, 3);
    let p = s.poll_transmit(20 * MS).expect("the Poll goes out");
    assert!(p.poll);
    // Through our Poll the fast path still answers the remote's Polls, with
    // the values our Poll announces and never P beside its F.
    assert_eq!(s.fast_path_role(), Some(FastPathRole::PollsOnly));
    let template = s.steady_packet();
    assert!(!template.poll && !template.final_);
    assert_eq!(template.desired_min_tx_us, 20_000);
    let mut fin = demanding;
    fin.final_ = true;
    s.receive_repr(21 * MS, &fin).unwrap();
    assert!(!s.polling());
    while s.poll_transmit(21 * MS).is_some() {}
    assert!(s.poll_transmit(200 * MS).is_none(), "quiet again");
}

#[test]
fn in_demand_mode_only_an_unanswered_poll_declares_the_remote_down() {
    let mut s = up_with(demand_config());
    // The remote stops sending (as we asked): no detection between Polls.
    assert_eq!(s.detection_deadline(), None);
    assert_eq!(
        s.next_deadline().map(|d| d <= 3 * MS + 10 * MS),
        Some(true),
        "our periodic packets still run"
    );
    let verify_at = 3 * MS + i64::from(VERIFY_US) * 1_000;
    let mut t = 3 * MS;
    let mut first_poll = None;
    while t < verify_at + 200 * MS {
        if let Some(down) = s.on_timer(t) {
            // 6.8.4: our multiplier times our transmit interval after the
            // first packet with P.
            let first = first_poll.expect("a Poll preceded the Down");
            assert_eq!(down.to, State::Down);
            assert_eq!(down.diag, D::ControlDetectionTimeExpired);
            assert_eq!(down.at_ns, first + 3 * 10 * MS);
            return;
        }
        while let Some(p) = s.poll_transmit(t) {
            assert!(p.demand || p.state != State::Up);
            if p.poll && first_poll.is_none() {
                assert!(t >= verify_at, "no Poll before the interval");
                first_poll = Some(t);
            }
        }
        assert!(t < verify_at || s.polling(), "verification started on time");
        t += MS / 4;
    }
    panic!("never declared down");
}

#[test]
fn an_answered_poll_keeps_the_session_and_schedules_the_next() {
    let mut s = up_with(demand_config());
    let verify_at = 3 * MS + i64::from(VERIFY_US) * 1_000;
    s.on_timer(verify_at);
    let p = s.poll_transmit(verify_at).expect("the Poll");
    assert!(p.poll && p.demand);
    let mut fin = remote(State::Up, 0x1111);
    fin.final_ = true;
    s.receive_repr(verify_at + MS, &fin).unwrap();
    assert!(!s.polling());
    assert_eq!(s.detection_deadline(), None);
    // Long after the old Poll's detection time: still Up.
    assert!(s.on_timer(verify_at + 100 * MS).is_none());
    assert_eq!(s.state(), State::Up);
    assert_eq!(
        s.next_verify_ns,
        Some(verify_at + MS + i64::from(VERIFY_US) * 1_000)
    );
}

#[test]
fn demand_mode_between_two_engines_stops_one_direction_and_still_detects() {
    // A asks for Demand mode; B runs asynchronously.
    let a = SessionConfig {
        demand: true,
        demand_verify_us: 1_000_000,
        ..config_3x10(1)
    };
    let mut sim = SimPair::new(a, config_3x10(2), 50_000, 11);
    sim.run_until(3 * S);
    for side in [Side::A, Side::B] {
        assert_eq!(sim.session(side).state(), State::Up);
    }
    assert!(sim.session(Side::A).local_demand_active());
    assert!(sim.session(Side::B).remote_demand_active());
    sim.run_until(63 * S);
    for side in [Side::A, Side::B] {
        assert_eq!(sim.transitions(side).len(), 2, "{side:?} never flapped");
    }
    // A kept its periodic packets; B sent only a Final per verification.
    let from_a = sim.send_times(Side::A, 3 * S, 63 * S).len();
    let from_b = sim.send_times(Side::B, 3 * S, 63 * S).len();
    assert!(from_a > 6_000, "A periodic: {from_a}");
    assert!(
        (55..=65).contains(&from_b),
        "B answered ~60 Polls: {from_b}"
    );
    // B dies: A finds out at its next Poll plus its detection time.
    let now = sim.now();
    sim.kill(Side::B);
    sim.run_until(now + 2 * S);
    let down = *sim.transitions(Side::A).last().unwrap();
    assert_eq!(
        (down.to, down.diag),
        (State::Down, D::ControlDetectionTimeExpired)
    );
    assert!(
        down.at_ns - now <= 1_000 * MS + 40 * MS,
        "{}",
        down.at_ns - now
    );
    // The Poll that found it: 30 ms before the Down.
    let polls: Vec<Nanos> = sim
        .events
        .iter()
        .filter_map(|e| match e {
            crate::backend::sim::SimEvent::Sent {
                at,
                from: Side::A,
                packet,
            } if packet.poll && *at > now => Some(*at),
            _ => None,
        })
        .collect();
    assert_eq!(down.at_ns, polls[0] + 30 * MS);
}
