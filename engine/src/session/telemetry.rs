//! What a session keeps for the metrics endpoint (issue 41): the gaps
//! userspace measured between the packets it handled itself, and each
//! time the session left Up, by diagnostic. Kept beside the state machine,
//! never read by it: nothing here decides anything on the wire.
//!
//! The gaps are userspace's own, at the instant the loop judged a packet
//! heard or handed one to the backend. On the xdp backend the kernel
//! measures where the packet is (`LC_GAPS`), and the endpoint shows the
//! kernel's figures for those sessions instead.

use super::Nanos;
use linecard_api::control::{State, Transition};
use linecard_common::gaps::{GapHistogram, SessionGaps};

/// Diagnostic codes are 5 bits (RFC 5880 4.1).
pub const DIAGNOSTICS: usize = 32;

#[derive(Clone, Debug)]
pub struct Telemetry {
    /// Receive gaps against our detection time, transmit gaps against the
    /// peer's (6.8.4).
    pub gaps: SessionGaps,
    /// Transitions out of Up, by the diagnostic they carried: what pulls
    /// a route.
    pub downs: [u64; DIAGNOSTICS],
    /// The last of them.
    pub last_down: Option<Transition>,
    /// Transitions into Up.
    pub ups: u64,
    last_rx_ns: Option<Nanos>,
    last_tx_ns: Option<Nanos>,
    /// The scrape window the gaps' window maxima are recorded into
    /// (`GapHistogram::window`), closed by [`Telemetry::close_window`].
    window: u64,
}

/// The largest gap of a scrape window and when it ended (engine time).
pub type WindowMax = Option<(u64, Nanos)>;

impl Default for Telemetry {
    fn default() -> Self {
        Self {
            gaps: SessionGaps::default(),
            downs: [0; DIAGNOSTICS],
            last_down: None,
            ups: 0,
            last_rx_ns: None,
            last_tx_ns: None,
            window: 0,
        }
    }
}

impl Telemetry {
    pub fn transition(&mut self, t: &Transition) {
        if t.to == State::Up && t.from != State::Up {
            self.ups += 1;
        }
        if t.from == State::Up && t.to != State::Up {
            self.downs[usize::from(t.diag.bits()) % DIAGNOSTICS] += 1;
            self.last_down = Some(*t);
        }
    }

    /// A valid packet heard at `now`, while `detect_ns` (0: none yet) was
    /// the detection time running.
    pub fn received(&mut self, now: Nanos, detect_ns: Nanos) {
        record(
            &mut self.gaps.rx,
            &mut self.last_rx_ns,
            now,
            detect_ns,
            self.window,
        );
    }

    /// A packet handed to the backend at `now`, while `peer_detect_ns` (0:
    /// not known) was the peer's detection time.
    pub fn sent(&mut self, now: Nanos, peer_detect_ns: Nanos) {
        record(
            &mut self.gaps.tx,
            &mut self.last_tx_ns,
            now,
            peer_detect_ns,
            self.window,
        );
    }

    /// The largest receive and transmit gaps since the previous scrape
    /// (or the start), and the next window opened: called once per scrape,
    /// on the loop, so that no gap is in two windows or none.
    pub fn close_window(&mut self) -> [WindowMax; 2] {
        let closing = self.window;
        self.window += 1;
        [&self.gaps.rx, &self.gaps.tx]
            .map(|h| h.window_max(closing).map(|(gap, at)| (gap, at as Nanos)))
    }
}

/// The gap from `last` to `now` into `histogram` (none before the first
/// packet, or if the clock did not move on), and `now` as the last.
fn record(
    histogram: &mut GapHistogram,
    last: &mut Option<Nanos>,
    now: Nanos,
    detect_ns: Nanos,
    window: u64,
) {
    if let Some(previous) = last.filter(|&p| now > p) {
        let gap = (now - previous) as u64;
        histogram.record(gap, detect_ns.max(0) as u64, now.max(0) as u64, window);
    }
    *last = Some(now);
}
