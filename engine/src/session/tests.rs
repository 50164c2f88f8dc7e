//! One test per rule of RFC 5880 section 6 the session implements.

use super::table::{PathKey, SessionTable};
use super::*;
use linecard_api::control::Diagnostic as D;

impl Session {
    /// A packet as it arrives: emitted, so that authentication covers the
    /// bytes a peer would send.
    pub(super) fn receive_repr(
        &mut self,
        now: Nanos,
        packet: &Repr,
    ) -> Result<Option<Transition>, DropReason> {
        self.receive(now, packet, &packet.to_bytes())
    }
}

pub(super) const MS: Nanos = 1_000_000;
pub(super) const S: Nanos = 1_000_000_000;

pub(super) fn config() -> SessionConfig {
    SessionConfig {
        local_discr: 0x1111,
        desired_min_tx_us: 10_000,
        required_min_rx_us: 10_000,
        detect_mult: 3,
        required_min_echo_rx_us: 0,
        passive: false,
        demand: false,
        demand_verify_us: 0,
    }
}

/// A packet from the remote (discriminator 0x2222) in `state`.
pub(super) fn remote(state: State, your: u32) -> Repr {
    Repr {
        diag: D::NoDiagnostic,
        state,
        poll: false,
        final_: false,
        control_plane_independent: false,
        demand: false,
        detect_mult: 3,
        my_discr: 0x2222,
        your_discr: your,
        desired_min_tx_us: 10_000,
        required_min_rx_us: 10_000,
        required_min_echo_rx_us: 0,
        auth: None,
    }
}

/// Brings a session Up through the three-way handshake at t = 0..2 ms and
/// completes the Poll that leaving slow start starts.
pub(super) fn up_session() -> Session {
    up_with(config())
}

/// [`up_session`] with another configuration.
pub(super) fn up_with(config: SessionConfig) -> Session {
    let mut s = Session::new(config, 0, 7);
    s.receive_repr(MS, &remote(State::Down, 0)).unwrap();
    s.receive_repr(2 * MS, &remote(State::Up, 0x1111)).unwrap();
    assert_eq!(s.state(), State::Up);
    while s.poll_transmit(2 * MS).is_some() {}
    let mut fin = remote(State::Up, 0x1111);
    fin.final_ = true;
    s.receive_repr(3 * MS, &fin).unwrap();
    assert!(!s.polling());
    s
}

#[test]
fn starts_down_and_sends_a_bootstrap_packet_at_once() {
    let mut s = Session::new(config(), 0, 1);
    let p = s.poll_transmit(0).unwrap();
    assert_eq!(
        (p.state, p.your_discr, p.my_discr),
        (State::Down, 0, 0x1111)
    );
    // 6.8.3: while not Up, Desired Min TX is at least one second.
    assert_eq!(p.desired_min_tx_us, SLOW_TX_US);
    assert!(!p.poll && !p.final_);
}

#[test]
fn three_way_handshake_down_init_up() {
    let mut s = Session::new(config(), 0, 1);
    let t = s
        .receive_repr(MS, &remote(State::Down, 0))
        .unwrap()
        .unwrap();
    assert_eq!((t.from, t.to), (State::Down, State::Init));
    assert_eq!(s.remote().discr, 0x2222);
    let t = s
        .receive_repr(2 * MS, &remote(State::Up, 0x1111))
        .unwrap()
        .unwrap();
    assert_eq!(
        (t.from, t.to, t.diag),
        (State::Init, State::Up, D::NoDiagnostic)
    );
}

#[test]
fn down_goes_straight_up_on_remote_init() {
    let mut s = Session::new(config(), 0, 1);
    let t = s
        .receive_repr(MS, &remote(State::Init, 0x1111))
        .unwrap()
        .unwrap();
    assert_eq!((t.from, t.to), (State::Down, State::Up));
}

#[test]
fn leaving_slow_start_polls_and_the_final_ends_it() {
    let mut s = Session::new(config(), 0, 1);
    s.receive_repr(MS, &remote(State::Init, 0x1111)).unwrap();
    // 6.8.3: the change of Desired Min TX on Up is announced with P, at once
    // (not after the 1 s slow-start interval: the stale-schedule bug).
    let p = s.poll_transmit(MS).unwrap();
    assert!(p.poll);
    assert_eq!((p.state, p.desired_min_tx_us), (State::Up, 10_000));
    let mut fin = remote(State::Up, 0x1111);
    fin.final_ = true;
    s.receive_repr(5 * MS, &fin).unwrap();
    assert!(!s.polling());
    let next = s.next_deadline().unwrap();
    assert!(
        next <= MS + 10 * MS,
        "next packet at the fast rate, got {next}"
    );
    assert!(!s.poll_transmit(next).unwrap().poll);
}

#[test]
fn not_up_packets_are_at_least_750_ms_apart() {
    let mut s = Session::new(config(), 0, 3);
    let mut last = 0;
    s.poll_transmit(0).unwrap();
    for _ in 0..50 {
        let next = s.next_transmit_ns().unwrap();
        // 1 s with 75-100 % jitter (6.8.7).
        assert!(
            next - last >= 750 * MS && next - last <= S,
            "gap {}",
            next - last
        );
        s.poll_transmit(next).unwrap();
        last = next;
    }
}

#[test]
fn jitter_is_75_to_100_percent_and_75_to_90_with_multiplier_1() {
    for (mult, high) in [(3u8, 100), (1, 90)] {
        let mut cfg = config();
        cfg.detect_mult = mult;
        let mut s = Session::new(cfg, 0, 99);
        s.receive_repr(0, &remote(State::Init, 0x1111)).unwrap();
        let mut fin = remote(State::Up, 0x1111);
        fin.final_ = true;
        s.receive_repr(0, &fin).unwrap();
        s.poll_transmit(0);
        let (mut min, mut max, mut last) = (Nanos::MAX, 0, 0);
        for _ in 0..2000 {
            let next = s.next_transmit_ns().unwrap();
            min = min.min(next - last);
            max = max.max(next - last);
            s.poll_transmit(next).unwrap();
            last = next;
        }
        assert!(
            (7_500_000..7_600_000).contains(&min),
            "mult {mult}: min {min}"
        );
        assert!(
            max <= high * 100_000 && max > (high - 1) * 100_000,
            "mult {mult}: max {max}"
        );
    }
}

#[test]
fn a_poll_is_answered_with_final_at_once_and_p_clear() {
    let mut s = up_session();
    let mut poll = remote(State::Up, 0x1111);
    poll.poll = true;
    s.receive_repr(4 * MS, &poll).unwrap();
    assert_eq!(s.next_deadline(), Some(Nanos::MIN));
    let answer = s.poll_transmit(4 * MS).unwrap();
    assert!(answer.final_ && !answer.poll);
    assert_eq!(s.counters().finals_sent, 1);
}

#[test]
fn detection_time_expiry_goes_down_with_diag_1() {
    let mut s = up_session();
    // 6.8.4: remote mult 3 x max(our 10 ms, remote 10 ms) = 30 ms after the
    // last packet (received at 3 ms).
    assert_eq!(s.detection_time_ns(), Some(30 * MS));
    assert_eq!(s.on_timer(33 * MS - 1), None);
    let t = s.on_timer(33 * MS).unwrap();
    assert_eq!(
        (t.from, t.to, t.diag),
        (State::Up, State::Down, D::ControlDetectionTimeExpired)
    );
    // The Down still names the peer (FRR discards a Your Discriminator of 0
    // while Up); bfd.RemoteDiscr (6.8.1) is cleared one detection time later.
    let down = s.poll_transmit(33 * MS).unwrap();
    assert_eq!((down.state, down.your_discr), (State::Down, 0x2222));
    assert_eq!(s.on_timer(63 * MS - 1), None);
    assert_eq!(s.remote().discr, 0x2222);
    assert_eq!(s.on_timer(63 * MS), None);
    assert_eq!(s.remote().discr, 0);
    assert_eq!(s.poll_transmit(2000 * MS).unwrap().your_discr, 0);
}

#[test]
fn the_prepared_down_is_what_detection_sends_and_changes_nothing() {
    let mut s = up_session();
    let before = s.clone();
    let prepared = s.down_on_detection().unwrap();
    assert_eq!(
        (
            prepared.state,
            prepared.diag,
            prepared.your_discr,
            prepared.my_discr
        ),
        (State::Down, D::ControlDetectionTimeExpired, 0x2222, 0x1111)
    );
    assert!(!prepared.poll && !prepared.final_);
    // 6.8.3: not Up, so at least one second between packets.
    assert_eq!(prepared.desired_min_tx_us, SLOW_TX_US);
    // Preparing it left the session alone...
    assert_eq!(s.state(), State::Up);
    assert_eq!(s.remote().discr, before.remote().discr);
    // ...and is exactly what the session sends when the time comes.
    s.on_timer(3 * MS + 30 * MS).unwrap();
    assert_eq!(s.poll_transmit(3 * MS + 30 * MS), Some(prepared));
}

#[test]
fn detection_uses_the_slower_of_our_rx_and_their_tx() {
    let mut s = up_session();
    let mut slow = remote(State::Up, 0x1111);
    slow.desired_min_tx_us = 50_000;
    slow.detect_mult = 5;
    s.receive_repr(10 * MS, &slow).unwrap();
    assert_eq!(s.detection_time_ns(), Some(250 * MS));
}

#[test]
fn a_racing_packet_is_not_an_enormous_silence() {
    let mut s = up_session();
    // The packet's timestamp is later than the timer's "now".
    s.receive_repr(100 * MS, &remote(State::Up, 0x1111))
        .unwrap();
    assert_eq!(s.on_timer(50 * MS), None);
    assert_eq!(s.state(), State::Up);
}

#[test]
fn remote_down_takes_us_down_with_diag_3() {
    let mut s = up_session();
    let t = s
        .receive_repr(5 * MS, &remote(State::Down, 0x1111))
        .unwrap()
        .unwrap();
    assert_eq!(
        (t.to, t.diag),
        (State::Down, D::NeighborSignaledSessionDown)
    );
}

#[test]
fn remote_admin_down_takes_us_down_with_diag_3() {
    let mut s = up_session();
    let t = s
        .receive_repr(5 * MS, &remote(State::AdminDown, 0x1111))
        .unwrap()
        .unwrap();
    assert_eq!(
        (t.to, t.diag),
        (State::Down, D::NeighborSignaledSessionDown)
    );
    // Already Down: no further transition.
    assert_eq!(
        s.receive_repr(6 * MS, &remote(State::AdminDown, 0x1111))
            .unwrap(),
        None
    );
}

#[test]
fn local_admin_down_sends_diag_7_and_ignores_packets() {
    let mut s = up_session();
    let t = s.set_admin_down(5 * MS, true).unwrap();
    assert_eq!((t.to, t.diag), (State::AdminDown, D::AdministrativelyDown));
    let p = s.poll_transmit(5 * MS).unwrap();
    assert_eq!(
        (p.state, p.diag),
        (State::AdminDown, D::AdministrativelyDown)
    );
    assert_eq!(
        s.receive_repr(6 * MS, &remote(State::Up, 0x1111)),
        Err(DropReason::AdminDown)
    );
    let t = s.set_admin_down(7 * MS, false).unwrap();
    assert_eq!(t.to, State::Down);
}

#[test]
fn increasing_tx_waits_for_the_final() {
    let mut s = up_session();
    s.set_timers(10 * MS, 50_000, 10_000, 3);
    assert!(s.polling());
    let p = s.poll_transmit(10 * MS).unwrap();
    assert!(p.poll);
    assert_eq!(p.desired_min_tx_us, 50_000, "the new value is advertised");
    // 6.8.3: the actual interval stays at 10 ms until the Poll terminates.
    let next = s.next_transmit_ns().unwrap();
    assert!(next - 10 * MS <= 10 * MS, "interval {}", next - 10 * MS);
    let mut fin = remote(State::Up, 0x1111);
    fin.final_ = true;
    s.receive_repr(12 * MS, &fin).unwrap();
    s.poll_transmit(next).unwrap();
    assert!(
        s.next_transmit_ns().unwrap() - next >= 37 * MS,
        "50 ms after the Final"
    );
}

#[test]
fn decreasing_rx_keeps_the_old_detection_time_until_the_final() {
    let mut cfg = config();
    cfg.required_min_rx_us = 50_000;
    let mut s = Session::new(cfg, 0, 5);
    s.receive_repr(0, &remote(State::Init, 0x1111)).unwrap();
    let mut fin = remote(State::Up, 0x1111);
    fin.final_ = true;
    s.receive_repr(MS, &fin).unwrap();
    assert_eq!(s.detection_time_ns(), Some(150 * MS));
    s.set_timers(2 * MS, 10_000, 10_000, 3);
    // 6.8.3: the previous Required Min RX applies to detection until Final.
    assert_eq!(s.detection_time_ns(), Some(150 * MS));
    s.receive_repr(3 * MS, &fin).unwrap();
    assert_eq!(s.detection_time_ns(), Some(30 * MS));
}

#[test]
fn a_timer_change_in_either_direction_keeps_the_session_up() {
    let mut s = up_session();
    for (tx, rx) in [(50_000, 50_000), (10_000, 10_000)] {
        s.set_timers(10 * MS, tx, rx, 3);
        assert!(s.poll_transmit(10 * MS).unwrap().poll);
        let mut fin = remote(State::Up, 0x1111);
        fin.final_ = true;
        assert_eq!(s.receive_repr(11 * MS, &fin).unwrap(), None);
        assert_eq!(s.state(), State::Up);
    }
}

#[test]
fn passive_side_waits_for_the_remote() {
    let mut cfg = config();
    cfg.passive = true;
    let mut s = Session::new(cfg, 0, 1);
    assert_eq!(s.poll_transmit(0), None);
    assert_eq!(s.poll_transmit(5 * S), None);
    s.receive_repr(5 * S, &remote(State::Down, 0)).unwrap();
    assert!(s.poll_transmit(5 * S).is_some());
}

#[test]
fn remote_min_rx_zero_stops_periodic_transmission() {
    let mut s = up_session();
    let mut quiet = remote(State::Up, 0x1111);
    quiet.required_min_rx_us = 0;
    s.receive_repr(4 * MS, &quiet).unwrap();
    assert_eq!(s.poll_transmit(S), None);
}

#[test]
fn a_faster_remote_receiver_shortens_the_schedule_at_once() {
    let mut s = Session::new(config(), 0, 1);
    let mut slow = remote(State::Down, 0);
    slow.required_min_rx_us = 2_000_000;
    s.receive_repr(0, &slow).unwrap();
    s.poll_transmit(0).unwrap();
    assert!(
        s.next_transmit_ns().unwrap() >= 1_500 * MS,
        "the remote asked for 2 s"
    );
    // Still Down from the remote's side (no transition), but it now
    // accepts 10 ms: our slow-start 1 s applies from now, not after 2 s.
    let mut faster = remote(State::Down, 0x1111);
    faster.required_min_rx_us = 10_000;
    assert_eq!(s.receive_repr(10 * MS, &faster).unwrap(), None);
    assert!(s.next_transmit_ns().unwrap() <= 10 * MS + S);
}

#[test]
fn authentication_is_refused_until_configured() {
    let mut s = up_session();
    let mut p = remote(State::Up, 0x1111);
    p.auth = Some(crate::wire::AuthSection {
        construction: crate::wire::Construction::Rfc5880,
        auth_type: linecard_api::AuthType::SimplePassword,
        key_id: 1,
        sequence: None,
        bytes: [0; 20],
        len: 4,
    });
    assert_eq!(s.receive_repr(4 * MS, &p), Err(DropReason::AuthMismatch));
}

#[test]
fn demux_by_discriminator_then_by_path() {
    let v4 = |a: u8| IpAddrFor::v4(a);
    let path = PathKey {
        local: v4(1),
        peer: v4(2),
        multihop: false,
    };
    let other = PathKey {
        local: v4(1),
        peer: v4(3),
        multihop: false,
    };
    let mut table = SessionTable::default();
    let id = table
        .insert(path, Session::new(config(), 0, 1), ())
        .unwrap();
    let mut cfg2 = config();
    cfg2.local_discr = 0x3333;
    let id2 = table.insert(other, Session::new(cfg2, 0, 1), ()).unwrap();
    assert_eq!(table.demux(&path, &remote(State::Up, 0x1111)), Ok(id));
    // Bootstrap: Your Discriminator 0 selects by addresses.
    assert_eq!(table.demux(&other, &remote(State::Down, 0)), Ok(id2));
    // A known discriminator from the wrong peer reaches no session.
    assert_eq!(
        table.demux(&other, &remote(State::Up, 0x1111)),
        Err(DropReason::NoSession)
    );
    assert_eq!(
        table.demux(&path, &remote(State::Up, 0x9999)),
        Err(DropReason::NoSession)
    );
    let unknown = PathKey {
        local: v4(1),
        peer: v4(9),
        multihop: false,
    };
    assert_eq!(
        table.demux(&unknown, &remote(State::Down, 0)),
        Err(DropReason::NoSession)
    );
    assert!(table
        .insert(path, Session::new(config(), 0, 1), ())
        .is_err());
}

struct IpAddrFor;
impl IpAddrFor {
    fn v4(last: u8) -> std::net::IpAddr {
        std::net::IpAddr::from([192, 0, 2, last])
    }
}

#[test]
fn fast_path_liveness_keeps_detection_quiet_and_stale_news_is_ignored() {
    let mut s = up_session();
    // The kernel answered the remote until 100 ms; detection counts from there.
    s.note_fast_path_packet(100 * MS, 10_000, 10_000, 3);
    assert_eq!(s.on_timer(120 * MS), None);
    s.note_fast_path_packet(50 * MS, 10_000, 10_000, 3); // older: ignored
    assert_eq!(s.on_timer(129 * MS), None);
    assert!(
        s.on_timer(130 * MS).is_some(),
        "30 ms after the last packet the kernel saw"
    );
}

#[test]
fn only_a_steady_up_session_is_offloaded() {
    let mut s = Session::new(config(), 0, 1);
    assert!(!s.is_steady());
    s.receive_repr(MS, &remote(State::Init, 0x1111)).unwrap();
    assert!(!s.is_steady(), "Up but polling after slow start");
    let mut fin = remote(State::Up, 0x1111);
    fin.final_ = true;
    s.receive_repr(2 * MS, &fin).unwrap();
    assert!(s.is_steady());
    let p = s.steady_packet();
    assert_eq!(
        (p.state, p.poll, p.final_, p.your_discr),
        (State::Up, false, false, 0x2222)
    );
}

#[test]
fn the_broken_handshake_negative_control_stops_at_init() {
    // 6.8.6: Down hears Down -> Init, Init hears Init or Up -> Up; with
    // the control on, the second step never happens, whatever is heard.
    let mut s = Session::new(config(), 0, 7).with_broken_handshake();
    s.receive_repr(MS, &remote(State::Down, 0)).unwrap();
    assert_eq!(s.state(), State::Init);
    for (i, heard) in [State::Up, State::Init, State::Up].into_iter().enumerate() {
        s.receive_repr((2 + i as Nanos) * MS, &remote(heard, 0x1111))
            .unwrap();
        assert_eq!(s.state(), State::Init, "after {heard:?}");
    }
    let mut fresh = Session::new(config(), 0, 7).with_broken_handshake();
    fresh.receive_repr(MS, &remote(State::Init, 0)).unwrap();
    assert_eq!(fresh.state(), State::Init);
}

/// The metrics endpoint's view (issue 41): each gap userspace saw, in
/// seconds and against the detection time it ran under; each departure
/// from Up by its diagnostic. Read only, never part of a decision.
#[test]
fn telemetry_records_each_gap_against_its_detection_time_and_each_down() {
    use linecard_common::gaps::{gap_bucket, ratio_bucket};
    let mut s = up_session();
    let before = s.telemetry().gaps.rx;
    // Up since 3 ms; 30 ms detection time (3 x 10 ms). A packet 27 ms
    // later: 0.9 of it, over budget at 0.5 and 0.8.
    s.receive_repr(30 * MS, &remote(State::Up, 0x1111)).unwrap();
    let rx = s.telemetry().gaps.rx;
    assert_eq!(rx.count, before.count + 1);
    assert_eq!(rx.max_ns, 27_000_000);
    assert_eq!(
        rx.seconds[gap_bucket(27_000_000)],
        before.seconds[gap_bucket(27_000_000)] + 1
    );
    assert_eq!(rx.ratio[ratio_bucket(27_000_000, 30_000_000).unwrap()], 1);
    assert_eq!(
        (rx.over_budget(5), rx.over_budget(8), rx.over_budget(10)),
        (1, 1, 0)
    );

    // Our packets: the peer's detection time is its mult (3) times our
    // 10 ms interval.
    let tx_before = s.telemetry().gaps.tx.count;
    let first = s.next_transmit_ns().unwrap();
    s.poll_transmit(first).unwrap();
    let second = s.next_transmit_ns().unwrap();
    s.poll_transmit(second).unwrap();
    let tx = s.telemetry().gaps.tx;
    assert_eq!(tx.count, tx_before + 2);
    let gap = (second - first) as u64;
    assert!(
        tx.ratio[ratio_bucket(gap, 30_000_000).unwrap()] >= 1,
        "{tx:?}"
    );

    // A scrape closes the window: its largest receive gap (the 27 ms one,
    // ended at 30 ms) and transmit gap; the next window starts empty.
    let [rx_window, tx_window] = s.close_metrics_window();
    assert_eq!(rx_window, Some((27_000_000, 30 * MS)));
    assert!(tx_window.is_some_and(|(g, _)| g >= gap), "{tx_window:?}");
    assert_eq!(s.close_metrics_window(), [None, None]);

    // A detection: one Down, Diag 1; Down -> Init -> Up again is no down.
    assert_eq!(s.telemetry().downs.iter().sum::<u64>(), 0);
    s.on_timer(60 * MS).unwrap();
    assert_eq!(s.telemetry().downs[1], 1);
    assert_eq!(s.telemetry().downs.iter().sum::<u64>(), 1);
    let last = s.telemetry().last_down.unwrap();
    assert_eq!(
        (last.to, last.diag),
        (State::Down, D::ControlDetectionTimeExpired)
    );
}
