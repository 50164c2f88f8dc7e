//! The `sim` backend: two sessions joined by an in-memory link on a
//! simulated clock. Deterministic for a given seed, so whole conversations
//! (bring-up, minutes of steady state, a peer's death, a timer change) run
//! in milliseconds and replay identically.

use crate::session::{Nanos, Session, SessionConfig};
use crate::wire::{Encoded, Repr};
use linecard_api::control::Transition;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// One end of the simulated link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Side {
    A,
    B,
}

impl Side {
    fn other(self) -> Self {
        match self {
            Self::A => Self::B,
            Self::B => Self::A,
        }
    }
    fn index(self) -> usize {
        self as usize
    }
}

/// What happened, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum SimEvent {
    Sent { at: Nanos, from: Side, packet: Repr },
    Transition { side: Side, transition: Transition },
}

/// A packet on the simulated link: (arrival time, sequence for a stable
/// order, receiver, bytes), earliest first.
type InFlight = BinaryHeap<Reverse<(Nanos, u64, Side, Encoded)>>;

/// An active 3 x 10 ms session with discriminator `discr`: the shape every
/// simulation and the lab use.
pub fn config_3x10(discr: u32) -> SessionConfig {
    SessionConfig {
        local_discr: discr,
        desired_min_tx_us: 10_000,
        required_min_rx_us: 10_000,
        detect_mult: 3,
        required_min_echo_rx_us: 0,
        passive: false,
        demand: false,
        demand_verify_us: 0,
    }
}

pub struct SimPair {
    sessions: [Session; 2],
    alive: [bool; 2],
    now: Nanos,
    delay_ns: Nanos,
    in_flight: InFlight,
    sequence: u64,
    pub events: Vec<SimEvent>,
}

impl SimPair {
    pub fn new(a: SessionConfig, b: SessionConfig, delay_ns: Nanos, seed: u64) -> Self {
        Self {
            sessions: [
                Session::new(a, 0, seed),
                Session::new(b, 0, seed.rotate_left(17) ^ 0x5eed),
            ],
            alive: [true, true],
            now: 0,
            delay_ns,
            in_flight: BinaryHeap::new(),
            sequence: 0,
            events: Vec::new(),
        }
    }

    pub fn now(&self) -> Nanos {
        self.now
    }

    pub fn session(&self, side: Side) -> &Session {
        &self.sessions[side.index()]
    }

    pub fn session_mut(&mut self, side: Side) -> &mut Session {
        &mut self.sessions[side.index()]
    }

    /// The side stops sending and receiving, without a farewell.
    pub fn kill(&mut self, side: Side) {
        self.alive[side.index()] = false;
    }

    fn next_event(&self) -> Option<Nanos> {
        let mut next = self.in_flight.peek().map(|Reverse((t, ..))| *t);
        for side in [Side::A, Side::B] {
            if self.alive[side.index()] {
                if let Some(d) = self.sessions[side.index()].next_deadline() {
                    next = Some(next.map_or(d, |n| n.min(d)));
                }
            }
        }
        next
    }

    /// Advances the simulated clock to `end`, processing every event.
    pub fn run_until(&mut self, end: Nanos) {
        while let Some(next) = self.next_event() {
            if next > end {
                break;
            }
            self.now = self.now.max(next);
            let now = self.now;
            while let Some(Reverse((at, _, to, bytes))) = self.in_flight.peek().copied() {
                if at > now {
                    break;
                }
                self.in_flight.pop();
                if !self.alive[to.index()] {
                    continue;
                }
                // Through the codec, as on the wire.
                let packet = Repr::parse_bytes(&bytes).expect("sessions emit valid packets");
                if let Ok(Some(t)) = self.sessions[to.index()].receive(now, &packet, &bytes) {
                    self.events.push(SimEvent::Transition {
                        side: to,
                        transition: t,
                    });
                }
            }
            for side in [Side::A, Side::B] {
                if !self.alive[side.index()] {
                    continue;
                }
                let session = &mut self.sessions[side.index()];
                if let Some(t) = session.on_timer(now) {
                    self.events.push(SimEvent::Transition {
                        side,
                        transition: t,
                    });
                }
                while let Some(packet) = self.sessions[side.index()].poll_transmit(now) {
                    self.sequence += 1;
                    self.in_flight.push(Reverse((
                        now + self.delay_ns,
                        self.sequence,
                        side.other(),
                        packet.to_bytes(),
                    )));
                    self.events.push(SimEvent::Sent {
                        at: now,
                        from: side,
                        packet,
                    });
                }
            }
        }
        self.now = end;
    }

    pub fn transitions(&self, side: Side) -> Vec<Transition> {
        self.events
            .iter()
            .filter_map(|e| match e {
                SimEvent::Transition {
                    side: s,
                    transition,
                } if *s == side => Some(*transition),
                _ => None,
            })
            .collect()
    }

    /// Send times of `side`'s packets within [from, to).
    pub fn send_times(&self, side: Side, from: Nanos, to: Nanos) -> Vec<Nanos> {
        self.events
            .iter()
            .filter_map(|e| match e {
                SimEvent::Sent { at, from: s, .. } if *s == side && *at >= from && *at < to => {
                    Some(*at)
                }
                _ => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linecard_api::control::{Diagnostic, State};

    const MS: Nanos = 1_000_000;
    const S: Nanos = 1_000_000_000;

    fn config(discr: u32) -> SessionConfig {
        config_3x10(discr)
    }

    fn pair(seed: u64) -> SimPair {
        SimPair::new(config(1), config(2), 50_000, seed)
    }

    #[test]
    fn two_sessions_come_up_within_two_seconds_and_stay_up_for_a_minute() {
        let mut sim = pair(1);
        sim.run_until(2 * S);
        for side in [Side::A, Side::B] {
            assert_eq!(sim.session(side).state(), State::Up);
            assert!(
                !sim.session(side).polling(),
                "the slow-start Poll completed"
            );
        }
        sim.run_until(62 * S);
        for side in [Side::A, Side::B] {
            assert_eq!(
                sim.transitions(side).len(),
                2,
                "Down -> Init/Up only: {:?}",
                sim.transitions(side)
            );
            let times = sim.send_times(side, 2 * S, 62 * S);
            let gaps: Vec<Nanos> = times.windows(2).map(|w| w[1] - w[0]).collect();
            // RFC 5880 6.8.7: 10 ms with 75-100 % jitter.
            assert!(
                gaps.iter().all(|&g| (7_500_000..=10_000_000).contains(&g)),
                "{side:?}: gaps outside 7.5-10 ms"
            );
            assert!(gaps.len() > 5_000);
        }
    }

    #[test]
    fn a_dead_peer_is_declared_down_exactly_one_detection_time_later() {
        let mut sim = pair(2);
        sim.run_until(5 * S);
        sim.kill(Side::B);
        let last_from_b = *sim.send_times(Side::B, 0, 5 * S).last().unwrap();
        sim.run_until(6 * S);
        let t = *sim.transitions(Side::A).last().unwrap();
        assert_eq!(
            (t.to, t.diag),
            (State::Down, Diagnostic::ControlDetectionTimeExpired)
        );
        // Received `delay` after it was sent; detection time 3 x 10 ms.
        assert_eq!(t.at_ns, last_from_b + 50_000 + 30 * MS);
    }

    #[test]
    fn a_timer_change_polls_without_a_down_and_then_slows_down() {
        let mut sim = pair(3);
        sim.run_until(3 * S);
        let now = sim.now();
        sim.session_mut(Side::A).set_timers(now, 50_000, 50_000, 3);
        sim.run_until(4 * S);
        assert!(!sim.session(Side::A).polling(), "Final received");
        assert_eq!(sim.session(Side::A).state(), State::Up);
        assert_eq!(sim.transitions(Side::A).len(), 2);
        let times = sim.send_times(Side::A, 3 * S + 100 * MS, 4 * S);
        assert!(
            times.windows(2).all(|w| w[1] - w[0] >= 37_500_000),
            "A sends at 50 ms after the Final"
        );
        // B adapts: A now requires 50 ms between B's packets.
        let times = sim.send_times(Side::B, 3 * S + 100 * MS, 4 * S);
        assert!(
            times.windows(2).all(|w| w[1] - w[0] >= 37_500_000),
            "B honours A's Required Min RX"
        );
    }

    #[test]
    fn same_seed_same_conversation() {
        let run = |seed| {
            let mut sim = pair(seed);
            sim.run_until(3 * S);
            sim.events
        };
        assert_eq!(run(9), run(9));
        assert_ne!(run(9), run(10), "the seed drives the jitter");
    }
}
