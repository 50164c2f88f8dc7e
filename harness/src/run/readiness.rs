//! Readiness: both daemons say every session is Up (bounded, never a fixed
//! sleep), the wire agrees, and when they never came Up, whose failure it
//! was.

use super::site::BfdDaemon;
use super::{judge, INTERRUPTED};
use linecard_capture_analyzer::model::FlowResult;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How long daemons get to bring their sessions Up: 10 s, and 30 ms more
/// per session (1024 sessions: about 40 s; bring-up runs at one packet per
/// second per session, RFC 5880 6.8.3).
pub(super) fn ready_within(sessions: usize) -> Duration {
    Duration::from_secs(10) + Duration::from_millis(30) * sessions as u32
}

/// Waits (bounded) until both daemons say every session is Up.
pub(super) fn wait_up(
    dut: &mut dyn BfdDaemon,
    peer: &mut dyn BfdDaemon,
    sessions: usize,
    within: Duration,
) -> Result<(), String> {
    let deadline = Instant::now() + within;
    loop {
        // A DUT that died is the DUT's failure, never an untrustworthy run.
        if dut.exited() {
            return Err(format!(
                "{}{}",
                judge::DUT_EXITED,
                dut.sessions_up(sessions).err().unwrap_or_default()
            ));
        }
        if peer.exited() {
            return Err(format!(
                "{}{}",
                judge::PEER_EXITED,
                peer.sessions_up(sessions).err().unwrap_or_default()
            ));
        }
        let state = dut
            .sessions_up(sessions)
            .and_then(|()| peer.sessions_up(sessions));
        if state.is_ok() || Instant::now() >= deadline || INTERRUPTED.load(Ordering::Relaxed) {
            return state;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Readiness as the judge takes it: the daemons' words (`up`), and on the
/// wire every session's DUT packets in Up before `before_ns` (the first
/// phase, or the daemons' readiness if sooner). `flows` are the whole
/// capture's, `(dut, peer)` the sessions' addresses. Sessions that never
/// came Up while the peer timed out on the DUT again and again, each a
/// detection time after the DUT's last packet on the wire, are the DUT's
/// failure (it fell silent, RFC 5880 6.8.4; `judge::silent_dut`), not an
/// untrustworthy run.
pub(super) fn on_the_wire(
    up: Result<(), String>,
    flows: &[FlowResult],
    (dut, peer): (&[String], &[String]),
    before_ns: i64,
    sessions: usize,
    detection_ms: f64,
) -> Result<(), String> {
    up.and_then(|()| {
        let up_on_wire = flows
            .iter()
            .filter(|f| dut.contains(&f.src))
            // A silence Demand mode asked for starts at a packet in Up
            // too (both sides' D: every gap is one).
            .filter(|f| {
                (f.up_gap_ms.count > 0 || f.demand_silence_ms.count > 0)
                    && f.first_ts_ns < before_ns
            })
            .count();
        if up_on_wire == sessions {
            Ok(())
        } else {
            Err(format!(
                "the capture shows DUT packets in state Up for {up_on_wire} of {sessions} sessions"
            ))
        }
    })
    .map_err(|why| {
        let timeouts: Vec<f64> = flows
            .iter()
            .filter(|f| peer.contains(&f.src))
            .flat_map(|f| &f.flap_events)
            .filter_map(|ev| ev.detection_latency_ms)
            .filter(|&ms| ms >= detection_ms - 1.0)
            .collect();
        judge::silent_dut(why, &timeouts)
    })
}
