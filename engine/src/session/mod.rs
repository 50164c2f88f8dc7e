//! One BFD session's state machine (RFC 5880 section 6), sans-IO.
//!
//! The session never reads a clock or touches a socket: time comes in as an
//! argument (integer nanoseconds on any monotonic clock), packets come in as
//! [`Repr`], and packets to send and the next deadline go out. That makes
//! every rule of the RFC a fast, deterministic test (`tests.rs`).

pub mod auth;
#[cfg(test)]
mod auth_tests;
#[cfg(test)]
mod demand_tests;
pub mod handover;
pub mod table;
pub mod telemetry;
#[cfg(test)]
mod tests;

use crate::wire::Repr;
use auth::{Auth, SequenceJudge};
use linecard_api::control::Counters;
use linecard_api::control::Remote;
use linecard_api::control::Transition;
use linecard_api::control::{Diagnostic, State};
use linecard_common::bfd::DropReason;
use serde::Serialize;

/// Nanoseconds on the caller's monotonic clock.
pub type Nanos = i64;

/// While not Up, bfd.DesiredMinTxInterval is at least one second (6.8.3).
pub const SLOW_TX_US: u32 = 1_000_000;

/// What the operator asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SessionConfig {
    /// bfd.LocalDiscr: non-zero, unique within the engine.
    pub local_discr: u32,
    pub desired_min_tx_us: u32,
    pub required_min_rx_us: u32,
    pub detect_mult: u8,
    /// Advertised Required Min Echo RX; 0: this side does not echo.
    pub required_min_echo_rx_us: u32,
    /// Section 6.1: a passive side sends nothing until it hears the peer.
    pub passive: bool,
    /// bfd.DemandMode (6.6): once both sides are Up we set D and the
    /// remote stops its periodic packets; liveness is then verified by a
    /// Poll Sequence every `demand_verify_us`.
    pub demand: bool,
    /// In Demand mode, how long after a Poll Sequence ends the next one
    /// starts, µs; 0: never (some other mechanism vouches for the path,
    /// 6.6, and nothing here declares the remote down).
    pub demand_verify_us: u32,
}

/// What the fast path may do for a session ([`Session::fast_path_role`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FastPathRole {
    /// Answer each of the remote's packets with our steady packet.
    Steady,
    /// The remote is in Demand mode: answer its Polls with Final and
    /// nothing else.
    PollsOnly,
}

#[derive(Clone, Debug)]
pub struct Session {
    config: SessionConfig,
    state: State,
    local_diag: Diagnostic,
    remote: Remote,
    /// bfd.DesiredMinTxInterval as advertised now.
    desired_min_tx_us: u32,
    /// bfd.RequiredMinRxInterval as advertised now.
    required_min_rx_us: u32,
    /// Desired Min TX used for our transmit timer: an increase while Up
    /// takes effect only when the Poll Sequence ends (6.8.3).
    tx_in_force_us: u32,
    /// Required Min RX used for the detection time: a decrease while Up
    /// takes effect only when the Poll Sequence ends (6.8.3).
    rx_in_force_us: u32,
    /// A Poll Sequence is in progress: periodic packets carry P.
    polling: bool,
    /// The remote polled: the next packet, sent at once, carries F (6.8.6).
    final_owed: bool,
    /// When the first packet with P of the current Poll Sequence left: in
    /// Demand mode the detection time runs from it (6.8.4).
    poll_sent_ns: Option<Nanos>,
    /// Demand mode active here: when the next verification Poll starts.
    next_verify_ns: Option<Nanos>,
    next_tx_ns: Option<Nanos>,
    last_rx_ns: Option<Nanos>,
    /// After a detection: when bfd.RemoteDiscr is cleared (see `on_timer`).
    remote_discr_until: Option<Nanos>,
    admin_down: bool,
    /// Section 6.7: `None` sends and accepts packets without it.
    auth: Option<Auth>,
    rng: u64,
    counters: Counters,
    /// For the metrics endpoint only (never read by the state machine).
    telemetry: telemetry::Telemetry,
    /// The negative control `engine.never_leave_init`: the three-way
    /// handshake never completes (6.8.6's Init -> Up is skipped).
    handshake_broken: bool,
}

impl Session {
    /// A new session in Down, ready to transmit at `now` (unless passive).
    /// `seed` drives the transmit jitter (tests fix it; the daemon randomises).
    pub fn new(config: SessionConfig, now: Nanos, seed: u64) -> Self {
        assert_ne!(config.local_discr, 0, "My Discriminator is never 0");
        let slow = config.desired_min_tx_us.max(SLOW_TX_US);
        Self {
            config,
            state: State::Down,
            local_diag: Diagnostic::NoDiagnostic,
            remote: Remote {
                discr: 0,
                state: State::Down,
                min_rx_us: 1,
                desired_min_tx_us: 0,
                detect_mult: 0,
                min_echo_rx_us: 0,
                demand: false,
                diag: Diagnostic::NoDiagnostic,
            },
            desired_min_tx_us: slow,
            required_min_rx_us: config.required_min_rx_us,
            tx_in_force_us: slow,
            rx_in_force_us: config.required_min_rx_us,
            polling: false,
            final_owed: false,
            poll_sent_ns: None,
            next_verify_ns: None,
            next_tx_ns: Some(now),
            last_rx_ns: None,
            remote_discr_until: None,
            admin_down: false,
            auth: None,
            rng: seed | 1,
            counters: Counters::default(),
            telemetry: telemetry::Telemetry::default(),
            handshake_broken: false,
        }
    }

    /// The negative control `engine.never_leave_init`: the session goes
    /// from Down to Init but never to Up, so that a build whose handshake
    /// broke can be shown to fail the suite, never to pass it.
    pub fn with_broken_handshake(mut self) -> Self {
        self.handshake_broken = true;
        self
    }

    /// The session authenticates what it sends and requires it of what
    /// it receives (6.7).
    pub fn with_auth(mut self, auth: Auth) -> Self {
        self.auth = Some(auth);
        self
    }

    pub fn config(&self) -> &SessionConfig {
        &self.config
    }
    pub fn auth(&self) -> Option<&Auth> {
        self.auth.as_ref()
    }
    pub fn auth_mut(&mut self) -> Option<&mut Auth> {
        self.auth.as_mut()
    }
    pub fn state(&self) -> State {
        self.state
    }
    pub fn local_diag(&self) -> Diagnostic {
        self.local_diag
    }
    pub fn remote(&self) -> &Remote {
        &self.remote
    }
    pub fn polling(&self) -> bool {
        self.polling
    }

    /// Demand mode is active on the local system: we asked for it, and
    /// both sides are Up, the only time D may be set (6.6, 6.8.7). The
    /// remote then sends nothing periodically.
    pub fn local_demand_active(&self) -> bool {
        self.config.demand && self.state == State::Up && self.remote.state == State::Up
    }

    /// Demand mode is active on the remote system (6.8.6): bfd.RemoteDemandMode
    /// and both sides Up. We then send nothing periodically outside a Poll
    /// Sequence (6.8.7), and Finals as ever.
    pub fn remote_demand_active(&self) -> bool {
        self.remote.demand && self.state == State::Up && self.remote.state == State::Up
    }
    /// What the metrics endpoint shows of this session (`telemetry`).
    pub fn telemetry(&self) -> &telemetry::Telemetry {
        &self.telemetry
    }
    /// The largest receive and transmit gaps since the previous scrape
    /// (`Telemetry::close_window`).
    pub fn close_metrics_window(&mut self) -> [telemetry::WindowMax; 2] {
        self.telemetry.close_window()
    }

    pub fn counters(&self) -> Counters {
        self.counters
    }
    /// (advertised Desired Min TX, advertised Required Min RX), µs.
    pub fn advertised(&self) -> (u32, u32) {
        (self.desired_min_tx_us, self.required_min_rx_us)
    }

    /// The one place state changes: records the transition and its
    /// diagnostic and adjusts the timers that depend on Up-ness.
    fn set_state(&mut self, now: Nanos, to: State, diag: Diagnostic) -> Transition {
        let transition = Transition {
            at_ns: now,
            from: self.state,
            to,
            diag,
        };
        self.state = to;
        self.local_diag = diag;
        self.counters.transitions += 1;
        self.telemetry.transition(&transition);
        if to == State::Up {
            // Leaving slow start changes Desired Min TX: Poll (6.8.3).
            self.change_timers(
                now,
                self.config.desired_min_tx_us,
                self.config.required_min_rx_us,
            );
        } else {
            // Not Up: at least 1 s between packets, at once, no Poll pending.
            let slow = self.config.desired_min_tx_us.max(SLOW_TX_US);
            self.desired_min_tx_us = slow;
            self.tx_in_force_us = slow;
            self.required_min_rx_us = self.config.required_min_rx_us;
            self.rx_in_force_us = self.config.required_min_rx_us;
            self.end_poll();
            self.next_verify_ns = None;
        }
        // Tell the peer now rather than at the next (possibly 1 s) tick.
        self.next_tx_ns = Some(now);
        transition
    }

    /// Changes the advertised timers; while Up a changed value starts a
    /// Poll Sequence and the transitional rules of 6.8.3 apply.
    fn change_timers(&mut self, now: Nanos, desired_tx_us: u32, required_rx_us: u32) {
        let desired_tx_us = if self.state == State::Up {
            desired_tx_us
        } else {
            desired_tx_us.max(SLOW_TX_US)
        };
        let changed =
            desired_tx_us != self.desired_min_tx_us || required_rx_us != self.required_min_rx_us;
        if !changed {
            return;
        }
        let up = self.state == State::Up;
        // An increase of our transmit interval waits for the Final; a
        // decrease may take effect at once.
        if !(up && desired_tx_us > self.tx_in_force_us) {
            self.tx_in_force_us = desired_tx_us;
        }
        // A decrease of what we require waits for the Final (the remote may
        // still send at the old, slower rate); an increase applies at once.
        if !(up && required_rx_us < self.rx_in_force_us) {
            self.rx_in_force_us = required_rx_us;
        }
        self.desired_min_tx_us = desired_tx_us;
        self.required_min_rx_us = required_rx_us;
        self.start_poll(now);
    }

    /// Starts a Poll Sequence (6.5): periodic packets carry P until a
    /// Final arrives, and the first goes out now (a stale schedule computed
    /// from an old interval must not delay it). A sequence in progress
    /// goes on: one Final answers it whatever started it.
    fn start_poll(&mut self, now: Nanos) {
        if !self.polling {
            self.polling = true;
            self.counters.polls_started += 1;
        }
        self.next_tx_ns = Some(self.next_tx_ns.map_or(now, |t| t.min(now)));
    }

    fn end_poll(&mut self) {
        self.polling = false;
        self.poll_sent_ns = None;
    }

    /// Operator changes timers or multiplier at run time: while Up, a Poll
    /// Sequence announces the change (6.8.3); otherwise it applies at once.
    pub fn set_timers(
        &mut self,
        now: Nanos,
        desired_tx_us: u32,
        required_rx_us: u32,
        detect_mult: u8,
    ) {
        let mult_changed = detect_mult != self.config.detect_mult;
        self.config.desired_min_tx_us = desired_tx_us;
        self.config.required_min_rx_us = required_rx_us;
        self.config.detect_mult = detect_mult;
        self.change_timers(now, desired_tx_us, required_rx_us);
        if self.state == State::Up && mult_changed {
            self.start_poll(now);
        }
        if self.state != State::Up {
            // Not Up: nothing to negotiate with a remote that ignores it.
            self.end_poll();
        }
    }

    /// Operator sets or clears AdminDown (section 6.8.16).
    pub fn set_admin_down(&mut self, now: Nanos, down: bool) -> Option<Transition> {
        if down == self.admin_down {
            return None;
        }
        self.admin_down = down;
        Some(if down {
            self.set_state(now, State::AdminDown, Diagnostic::AdministrativelyDown)
        } else {
            self.set_state(now, State::Down, Diagnostic::NoDiagnostic)
        })
    }

    /// The detection time (6.8.4). Asynchronous mode: the remote's Detect
    /// Mult times the larger of our Required Min RX (in force) and the
    /// remote's Desired Min TX. Demand mode active here: our own Detect
    /// Mult times our transmit interval, since it bounds the Poll we send,
    /// not packets the remote no longer sends. `None` before the remote is
    /// heard.
    pub fn detection_time_ns(&self) -> Option<Nanos> {
        if self.remote.detect_mult == 0 {
            return None;
        }
        if self.local_demand_active() {
            return Some(i64::from(self.config.detect_mult) * self.tx_interval_ns());
        }
        // One rule for both planes (the kernel's sweep keeps it too).
        Some(linecard_common::bfd::detection_time_ns(
            self.remote.detect_mult,
            self.rx_in_force_us,
            self.remote.desired_min_tx_us,
        ) as Nanos)
    }

    /// When the remote is declared down unless a packet arrives first. In
    /// Demand mode only a Poll Sequence is timed, from its first packet
    /// (6.8.4): between Polls the remote's silence is what we asked for.
    pub fn detection_deadline(&self) -> Option<Nanos> {
        if self.local_demand_active() {
            return Some(self.poll_sent_ns? + self.detection_time_ns()?);
        }
        Some(self.last_rx_ns? + self.detection_time_ns()?)
    }

    /// Handles a packet that passed the codec's checks and was demultiplexed
    /// to this session (6.8.6, the session-dependent part). `wire` is the
    /// packet as received: an authenticated session's digest covers it.
    pub fn receive(
        &mut self,
        now: Nanos,
        packet: &Repr,
        wire: &[u8],
    ) -> Result<Option<Transition>, DropReason> {
        self.receive_judged(now, packet, wire, SequenceJudge::Here)
    }

    /// [`Session::receive`] of a packet whose authentication sequence
    /// `judge` has applied the window to (the fast path, when it saw the
    /// packet first).
    pub fn receive_judged(
        &mut self,
        now: Nanos,
        packet: &Repr,
        wire: &[u8],
        judge: SequenceJudge,
    ) -> Result<Option<Transition>, DropReason> {
        // 6.8.6: the A bit must match the session's configuration, and a
        // packet that carries authentication must pass it (6.7).
        let detection_before = self.detection_time_ns().unwrap_or(0) as u64;
        match &mut self.auth {
            None if packet.auth.is_some() => return Err(DropReason::AuthMismatch),
            None => {}
            Some(auth) => {
                // 6.8.1, by the rule the kernel keeps too.
                let lapse = linecard_common::bfd::auth_seq_known_lapse_ns(
                    detection_before,
                    packet.detect_mult,
                    packet.desired_min_tx_us,
                );
                auth.verify(
                    now,
                    packet,
                    wire,
                    lapse as Nanos,
                    judge,
                    self.required_min_rx_us,
                )?;
            }
        }
        if self.state == State::AdminDown {
            return Err(DropReason::AdminDown);
        }
        self.counters.packets_in += 1;
        self.telemetry.received(now, detection_before as Nanos);
        let previous_min_rx = self.remote.min_rx_us;
        self.remote = Remote {
            discr: packet.my_discr,
            state: packet.state,
            min_rx_us: packet.required_min_rx_us,
            desired_min_tx_us: packet.desired_min_tx_us,
            detect_mult: packet.detect_mult,
            min_echo_rx_us: packet.required_min_echo_rx_us,
            demand: packet.demand,
            diag: packet.diag,
        };
        self.last_rx_ns = Some(now);
        self.remote_discr_until = None;
        if packet.final_ && self.polling {
            // The Poll Sequence ends: transitional values give way (6.8.3).
            self.end_poll();
            self.tx_in_force_us = self.desired_min_tx_us;
            self.rx_in_force_us = self.required_min_rx_us;
            self.next_verify_ns = None;
        }
        // A faster remote receiver shortens our interval now, not at the
        // next tick of the old schedule.
        if self.remote.min_rx_us < previous_min_rx {
            if let Some(next) = self.next_tx_ns {
                self.next_tx_ns = Some(next.min(now + self.tx_interval_ns()));
            }
        }
        let transition = match (packet.state, self.state) {
            (State::AdminDown, local) if local != State::Down => {
                Some(self.set_state(now, State::Down, Diagnostic::NeighborSignaledSessionDown))
            }
            (State::AdminDown, _) => None,
            (State::Down, State::Down) => {
                Some(self.set_state(now, State::Init, Diagnostic::NoDiagnostic))
            }
            (State::Init, State::Down) if self.handshake_broken => {
                Some(self.set_state(now, State::Init, Diagnostic::NoDiagnostic))
            }
            (State::Init | State::Up, State::Init) if self.handshake_broken => None,
            (State::Init, State::Down) => {
                Some(self.set_state(now, State::Up, Diagnostic::NoDiagnostic))
            }
            (State::Init | State::Up, State::Init) => {
                Some(self.set_state(now, State::Up, Diagnostic::NoDiagnostic))
            }
            (State::Down, State::Up) => {
                Some(self.set_state(now, State::Down, Diagnostic::NeighborSignaledSessionDown))
            }
            _ => None,
        };
        if packet.poll {
            // Answer with F as soon as practicable, whatever the timer, the
            // state or Demand mode on either side (6.8.6).
            self.final_owed = true;
        }
        // Demand mode here: the next verification is due an interval after
        // it became active or after the last one ended.
        if !self.local_demand_active() {
            self.next_verify_ns = None;
        } else if !self.polling && self.next_verify_ns.is_none() && self.config.demand_verify_us > 0
        {
            self.next_verify_ns = Some(now + i64::from(self.config.demand_verify_us) * 1_000);
        }
        Ok(transition)
    }

    /// A valid packet from the remote was handled by the fast path at `at`
    /// (it never reached us): liveness and the remote's timers as the kernel
    /// saw them. Older news than what we have is ignored.
    pub fn note_fast_path_packet(
        &mut self,
        at: Nanos,
        desired_min_tx_us: u32,
        required_min_rx_us: u32,
        detect_mult: u8,
    ) {
        // Nothing the kernel saw before a detection revives the session.
        if self.last_rx_ns.is_none() || self.last_rx_ns.is_some_and(|last| at - last <= 0) {
            return;
        }
        self.last_rx_ns = Some(at);
        self.remote.desired_min_tx_us = desired_min_tx_us;
        self.remote.min_rx_us = required_min_rx_us;
        if detect_mult != 0 {
            self.remote.detect_mult = detect_mult;
        }
    }

    /// What the fast path may do for us now, if anything: answer every
    /// packet in steady state, or only the Polls of a remote in Demand mode
    /// (6.8.7: no periodic packet to it, but a Final to each Poll, which a
    /// starved userspace would send late). Neither while a Final is owed or
    /// we are administratively down; Steady not while a Poll of ours is in
    /// progress either (its packets carry P, the template does not).
    /// PollsOnly goes on through a Poll of ours: our Polls leave from
    /// userspace, the remote's Finals come to it, and the remote's own Polls
    /// still get their Final at once (P and F never together, 6.8.7): the
    /// remote polls every second too, so withdrawing for each of our Polls
    /// handed its Poll to a starved userspace about as often as not.
    pub fn fast_path_role(&self) -> Option<FastPathRole> {
        if self.is_steady() {
            return Some(FastPathRole::Steady);
        }
        let answerable = self.state == State::Up && !self.final_owed && !self.admin_down;
        (answerable && self.remote_demand_active()).then_some(FastPathRole::PollsOnly)
    }

    /// Steady state: Up with no Poll in progress and no Final owed. Only
    /// then may the fast path answer for us every packet. Never in Demand mode, asked
    /// by either side: an RX-clocked reply to each packet of a remote in
    /// Demand mode is the periodic transmission 6.8.7 forbids, and a
    /// remote we asked to stop gives the fast path nothing to answer.
    pub fn is_steady(&self) -> bool {
        self.state == State::Up
            && !self.polling
            && !self.final_owed
            && !self.admin_down
            && !self.config.demand
            && !self.remote.demand
    }

    /// The packet the fast path sends on our behalf in steady state.
    pub fn steady_packet(&self) -> Repr {
        self.packet(false, false)
    }

    /// Advances timers to `now`: detection expiry (6.8.4), and the end of
    /// bfd.RemoteDiscr one detection time after it.
    pub fn on_timer(&mut self, now: Nanos) -> Option<Transition> {
        if self
            .remote_discr_until
            .is_some_and(|until| now - until >= 0)
        {
            self.remote.discr = 0;
            self.remote_discr_until = None;
        }
        // Demand mode: verify the path with a Poll Sequence (6.6).
        if self.next_verify_ns.is_some_and(|due| now - due >= 0) {
            self.next_verify_ns = None;
            if self.local_demand_active() {
                self.start_poll(now);
            }
        }
        let deadline = self.detection_deadline()?;
        // Signed comparison: a packet stamped after `now` (a racing reader)
        // is not an 18-quintillion-nanosecond silence.
        if now - deadline < 0 {
            return None;
        }
        // 6.8.1 clears bfd.RemoteDiscr once a detection time passes without
        // packets. We keep it one detection time longer, as FRR does: FRR
        // 8.4.4 discards a packet whose Your Discriminator is 0 while its
        // session is Up ("not overridden"), so a Down that cleared it at once
        // would be ignored and the peer would learn of the failure only from
        // its own detection time, up to one detection time later (measured:
        // FRR Down 30 ms after our last Up packet, our Down unheeded).
        self.remote_discr_until = Some(now + self.detection_time_ns().unwrap_or(0));
        self.remote.detect_mult = 0;
        self.last_rx_ns = None;
        matches!(self.state, State::Init | State::Up)
            .then(|| self.set_state(now, State::Down, Diagnostic::ControlDetectionTimeExpired))
    }

    /// The packet this session will send if its detection time expires
    /// with nothing more heard (6.8.4: Down, diagnostic 1, the peer's
    /// discriminator still in Your Discriminator), prepared ahead so that it can
    /// leave before the state machine runs (`backend::responder`).
    pub fn down_on_detection(&self) -> Option<Repr> {
        let deadline = self.detection_deadline()?;
        let mut after = self.clone();
        // A rehearsal takes no number from a shared sequence: the packet is
        // signed again when it leaves.
        after.auth = after.auth.as_ref().map(Auth::detached);
        after.on_timer(deadline)?;
        after.poll_transmit(deadline)
    }

    /// Whether periodic transmission is allowed (6.8.7): not by a passive
    /// side before it heard the remote, not to a remote that wants none
    /// (Required Min RX 0), and not to a remote in Demand mode unless a
    /// Poll Sequence is being transmitted.
    fn may_transmit(&self) -> bool {
        !(self.config.passive && self.remote.discr == 0)
            && self.remote.min_rx_us != 0
            && (self.polling || !self.remote_demand_active())
    }

    /// Our bfd.DesiredMinTxInterval in force (6.8.3: a rise waits for
    /// the end of its Poll Sequence), ns.
    pub fn desired_min_tx_in_force_ns(&self) -> Nanos {
        i64::from(self.tx_in_force_us) * 1_000
    }

    /// The transmit interval in force (6.8.7, before jitter): the larger
    /// of our Desired Min TX in force and the remote's Required Min RX.
    pub fn tx_interval_ns(&self) -> Nanos {
        i64::from(self.tx_in_force_us.max(self.remote.min_rx_us)) * 1_000
    }

    /// Jitter (6.8.7): 75-100 % of the interval, or 75-90 % when Detect Mult
    /// is 1, so that consecutive packets never drift into the detection time.
    fn jittered(&mut self, interval: Nanos) -> Nanos {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        // One rule for both planes (the kernel draws the same way).
        linecard_common::bfd::jittered_gap_ns(
            interval as u64,
            self.config.detect_mult,
            self.rng as u32,
        ) as Nanos
    }

    fn packet(&self, poll: bool, final_: bool) -> Repr {
        Repr {
            diag: self.local_diag,
            state: self.state,
            poll,
            final_,
            control_plane_independent: false,
            // 6.8.7: D is bfd.DemandMode while both sides are Up, else 0.
            demand: self.local_demand_active(),
            detect_mult: self.config.detect_mult,
            my_discr: self.config.local_discr,
            your_discr: self.remote.discr,
            desired_min_tx_us: self.desired_min_tx_us,
            required_min_rx_us: self.required_min_rx_us,
            required_min_echo_rx_us: self.config.required_min_echo_rx_us,
            auth: self.auth.as_ref().map(Auth::section),
        }
    }

    /// The packet to send at `now`, if any: a Final owed to the remote
    /// (urgent, outside the schedule), or the periodic packet when due.
    pub fn poll_transmit(&mut self, now: Nanos) -> Option<Repr> {
        if self.final_owed {
            self.final_owed = false;
            self.counters.packets_out += 1;
            self.counters.finals_sent += 1;
            // P and F are never set together (4.1); P rides the next packet.
            return Some(self.sent(now, self.packet(false, true)));
        }
        let due = self.next_tx_ns?;
        if now - due < 0 || !self.may_transmit() {
            return None;
        }
        let interval = self.tx_interval_ns();
        self.next_tx_ns = Some(now + self.jittered(interval));
        self.counters.packets_out += 1;
        if self.polling && self.poll_sent_ns.is_none() {
            self.poll_sent_ns = Some(now);
        }
        Some(self.sent(now, self.packet(self.polling, false)))
    }

    /// A packet leaves: it carries the sequence number it takes (shared
    /// with the kernel's replies on the xdp backend), the next one the
    /// next.
    fn sent(&mut self, now: Nanos, mut packet: Repr) -> Repr {
        // The peer's detection time (6.8.4): its Detect Mult times the
        // interval we send at.
        let peer_detect = Nanos::from(self.remote.detect_mult) * self.tx_interval_ns();
        self.telemetry.sent(now, peer_detect);
        if let Some(auth) = &mut self.auth {
            let sequence = auth.take_sequence();
            if let Some(section) = packet.auth.as_mut().filter(|s| s.sequence.is_some()) {
                section.sequence = Some(sequence);
            }
        }
        packet
    }

    /// When the next periodic packet is due, if transmission is allowed.
    pub fn next_transmit_ns(&self) -> Option<Nanos> {
        self.next_tx_ns.filter(|_| self.may_transmit())
    }

    /// When the caller must next call [`Session::poll_transmit`] or
    /// [`Session::on_timer`].
    pub fn next_deadline(&self) -> Option<Nanos> {
        if self.final_owed {
            // Immediately.
            return Some(Nanos::MIN);
        }
        let tx = self.next_tx_ns.filter(|_| self.may_transmit());
        [tx, self.detection_deadline(), self.next_verify_ns]
            .into_iter()
            .flatten()
            .min()
    }
}
