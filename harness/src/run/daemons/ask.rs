//! A running BFD daemon, asked as its operator would: its sessions Up in
//! its own words (FRR's vtysh, BIRD's birdc, linecardd's control socket),
//! whether FRR's control plane stayed connected to a linecardd DUT, the
//! engine's own view for the run directory, where its fast path ran, and
//! stopping it.

use super::{
    frr_sessions_up, spec, Bfd, Daemon, Kind, Place, COUNTERS_SWEEPS, FRR_COUNTERS_PER_SWEEP,
};
use crate::procs;
use crate::remote::RemoteHost;
use crate::scenario::Family;
use anyhow::Result;
use linecard_api::control::{DropsReply, ListReply, ReadinessReply, SessionReadiness, State};
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
impl Bfd {
    /// FRR's bfdd on a host over SSH, its vtysh socket directory `vty`
    /// there.
    pub fn frr_on(daemon: Daemon, host: Arc<RemoteHost>, vty: PathBuf) -> Self {
        Self {
            daemon,
            kind: Kind::Frr { vty },
            at: Place::Host(host),
            control_plane: None,
            _echo: None,
        }
    }

    /// BIRD on a host over SSH, its control socket `ctl` there, its
    /// sessions facing `peers`.
    pub fn bird_on(
        daemon: Daemon,
        host: Arc<RemoteHost>,
        ctl: PathBuf,
        peers: Vec<IpAddr>,
    ) -> Self {
        Self {
            daemon,
            kind: Kind::Bird { ctl, peers },
            at: Place::Host(host),
            control_plane: None,
            _echo: None,
        }
    }

    /// linecardd on a host over SSH, its control socket `socket` there.
    pub fn linecardd_on(
        daemon: Daemon,
        host: Arc<RemoteHost>,
        socket: PathBuf,
        offloads: bool,
    ) -> Self {
        Self {
            daemon,
            kind: Kind::Linecardd {
                socket,
                offloads,
                offload_only: None,
            },
            at: Place::Host(host),
            control_plane: None,
            _echo: None,
        }
    }

    /// Whether the daemon's process has ended.
    pub fn exited(&mut self) -> bool {
        !self.daemon.running()
    }

    /// Whether the daemon reports all its `expected` sessions Up and
    /// steady, in its own words; `Err` says what it reports instead.
    pub fn sessions_up(&mut self, expected: usize) -> Result<(), String> {
        if !self.daemon.running() {
            return Err(format!(
                "{} exited: {}",
                self.daemon.name,
                self.daemon.log_tail()
            ));
        }
        match &self.kind {
            Kind::Frr { vty } => frr_sessions_up(&self.at, vty, expected),
            Kind::Bird { ctl, peers } => {
                let out = self
                    .at
                    .birdc(ctl, &["show", "bfd", "sessions"])
                    .map_err(|e| format!("birdc: {e}"))?;
                let text = String::from_utf8_lossy(&out.stdout);
                let up = peers
                    .iter()
                    .filter(|peer| {
                        text.lines().any(|l| {
                            l.split_whitespace().next() == Some(&peer.to_string())
                                && l.split_whitespace().any(|w| w == "Up")
                        })
                    })
                    .count();
                if up == expected {
                    Ok(())
                } else {
                    Err(format!("BIRD lists {up} of {expected} sessions Up"))
                }
            }
            Kind::Linecardd {
                socket,
                offloads,
                offload_only,
            } => {
                let list: ReadinessReply = self
                    .at
                    .ctl(socket, &["readiness"])
                    .map_err(|e| e.to_string())?;
                let sessions = list.sessions;
                // Where each session must be: where the engine's own policy
                // puts it (`placed`, in its own words: a build under test
                // may place sessions otherwise, and is then measured, not
                // refused), and never the family a scenario keeps off the
                // fast path on it. A linecardd that does not say is held
                // to this harness's expectation: on the fast path, or (the
                // family kept out of it; authenticated: the fast path
                // verifies but does not sign) in userspace; a session in
                // Demand mode may be either.
                let offloaded = |s: &SessionReadiness| {
                    *offloads
                        && !s.authenticated
                        && !s.demand_configured
                        && !s.demand_active_at_peer
                        && offload_only.is_none_or(|f| Family::of(s.peer) == f)
                };
                let steady = sessions
                    .iter()
                    .filter(|s| {
                        let where_expected = match s.placed {
                            Some(placed) => {
                                placed
                                    && (!s.offloaded
                                        || offload_only.is_none_or(|f| Family::of(s.peer) == f))
                            }
                            None => {
                                (s.offloaded || !offloaded(s))
                                    && (!s.offloaded || offload_only.is_none() || offloaded(s))
                            }
                        };
                        s.state == State::Up && !s.polling && where_expected
                    })
                    .count();
                if sessions.len() == expected && steady == expected {
                    match &mut self.control_plane {
                        None => Ok(()),
                        Some(control) => {
                            if !control.daemon.running() {
                                return Err(format!(
                                    "the control plane's bfdd exited: {}",
                                    control.daemon.log_tail()
                                ));
                            }
                            frr_sessions_up(&self.at, &control.vty, expected)
                        }
                    }
                } else {
                    Err(format!(
                        "linecardd lists {} sessions, {steady} Up and steady{}, of {expected}",
                        sessions.len(),
                        if *offloads { " and offloaded" } else { "" }
                    ))
                }
            }
        }
    }

    /// For a DUT with FRR's bfdd as its control plane: whether bfdd kept
    /// every one of its `expected` sessions Up for the `up_for_s` seconds
    /// since readiness (its own uptime, from `show bfd peers json`, which
    /// does not ask the dataplane), then whether counters sweeps through
    /// the dataplane keep the connection. `Ok` says what was verified;
    /// `None` for other DUTs.
    pub fn control_plane_uninterrupted(
        &self,
        expected: usize,
        up_for_s: u64,
    ) -> Option<Result<String, String>> {
        let control = self.control_plane.as_ref()?;
        let Kind::Linecardd { socket, .. } = &self.kind else {
            return None;
        };
        let check = || -> Result<String, String> {
            let out = procs::vtysh(spec::DUT.namespace, &control.vty, &["show bfd peers json"])
                .map_err(|e| format!("asking bfdd for its sessions: {e}"))?;
            let peers: serde_json::Value = serde_json::from_slice(&out.stdout)
                .map_err(|e| format!("bfdd's session list is not JSON ({e})"))?;
            let peers = peers.as_array().cloned().unwrap_or_default();
            // `uptime` is in whole seconds.
            let interrupted: Vec<String> = peers
                .iter()
                .filter(|p| p["status"] != "up" || p["uptime"].as_u64().unwrap_or(0) + 1 < up_for_s)
                .map(|p| {
                    format!(
                        "{} ({}, up {} s)",
                        p["peer"].as_str().unwrap_or("?"),
                        p["status"].as_str().unwrap_or("?"),
                        p["uptime"]
                    )
                })
                .collect();
            if peers.len() != expected || !interrupted.is_empty() {
                return Err(format!(
                    "FRR's bfdd lists {} of {expected} sessions, {} of them not Up for the run's {up_for_s} s: {}",
                    peers.len(),
                    interrupted.len(),
                    interrupted.iter().take(8).cloned().collect::<Vec<_>>().join(", ")
                ));
            }
            if expected > FRR_COUNTERS_PER_SWEEP {
                return Ok(format!(
                    "FRR's bfdd kept all {expected} sessions Up for {up_for_s} s; counters sweeps not run above {FRR_COUNTERS_PER_SWEEP} sessions (bfdd 8.4.4 drops the dataplane at the 103rd reply of one sweep)"
                ));
            }
            for sweep in 0..COUNTERS_SWEEPS {
                let out = procs::vtysh(
                    spec::DUT.namespace,
                    &control.vty,
                    &["show bfd peers counters json"],
                )
                .map_err(|e| format!("counters sweep {sweep}: {e}"))?;
                let counters: serde_json::Value =
                    serde_json::from_slice(&out.stdout).unwrap_or_default();
                let fresh = counters.as_array().map_or(0, |a| {
                    a.iter()
                        .filter(|c| c["control-packet-input"].as_u64() > Some(0))
                        .count()
                });
                if fresh != expected {
                    return Err(format!(
                        "counters sweep {sweep}: bfdd got counters for {fresh} of {expected} sessions"
                    ));
                }
                // Our keepalive (every 0.5 s) lets bfdd reclaim its input
                // buffer between sweeps.
                std::thread::sleep(Duration::from_millis(600));
            }
            let list: ListReply = self
                .at
                .ctl(socket, &["list", "--json"])
                .map_err(|e| e.to_string())?;
            let held = list.sessions.len();
            if held != expected {
                return Err(format!(
                    "after {COUNTERS_SWEEPS} counters sweeps linecardd holds {held} of {expected} sessions: the dataplane connection dropped"
                ));
            }
            Ok(format!(
                "FRR's bfdd kept all {expected} sessions Up for {up_for_s} s; {COUNTERS_SWEEPS} counters sweeps through the dataplane kept the connection"
            ))
        };
        Some(check())
    }

    /// SIGKILL: no farewell packet (a crash), its control plane too.
    pub fn stop_hard(&mut self) -> Result<()> {
        self.daemon.kill()?;
        if let Some(control) = self.control_plane.as_mut() {
            control.daemon.kill()?;
        }
        Ok(())
    }

    /// Stops the daemon, then its control plane if it has one.
    pub fn stop(&mut self) -> Result<()> {
        self.daemon.stop()?;
        if let Some(control) = self.control_plane.as_mut() {
            control.daemon.stop()?;
        }
        Ok(())
    }

    /// How the engine's responder thread is scheduled, in words, if this is
    /// a linecardd with a fast path.
    pub fn fast_path_responder(&self) -> Option<String> {
        let Kind::Linecardd { socket, .. } = &self.kind else {
            return None;
        };
        let reply: DropsReply = self.at.ctl(socket, &["drops"]).ok()?;
        Some(reply.fast_path?.responder?.to_string())
    }

    /// A linecardd's `ctl list` and `ctl drops` as it sees them now.
    pub fn engine_view(&self) -> Option<EngineView> {
        let Kind::Linecardd { socket, .. } = &self.kind else {
            return None;
        };
        Some(EngineView {
            list: self.at.ctl(socket, &["list", "--json"]).ok()?,
            drops: self.at.ctl(socket, &["drops"]).ok()?,
        })
    }

    /// The BFD frames the fast path judged (passed, replied or dropped) on
    /// `dut_cpus` and in all, if this is a linecardd with one (placement
    /// evidence: it holds whether or not the engine offloads replies).
    pub fn fast_path_frames_on(&self, dut_cpus: &[usize]) -> Option<(u64, u64)> {
        let Kind::Linecardd { socket, .. } = &self.kind else {
            return None;
        };
        let reply: DropsReply = self.at.ctl(socket, &["drops"]).ok()?;
        let per_cpu = reply.fast_path?.verdicts_per_cpu;
        use linecard_common::bfd::verdict::{
            DROPPED, ECHO_PASSED, ECHO_REFLECTED, HEARD, ORPHANED, PASSED, REPLIED,
        };
        let judged = |v: &[u64; linecard_common::bfd::VERDICTS as usize]| -> u64 {
            [
                PASSED,
                REPLIED,
                DROPPED,
                HEARD,
                ORPHANED,
                ECHO_REFLECTED,
                ECHO_PASSED,
            ]
            .iter()
            .map(|&i| v[i as usize])
            .sum()
        };
        let total = per_cpu.iter().map(judged).sum();
        let on_dut = per_cpu
            .iter()
            .enumerate()
            .filter(|(cpu, _)| dut_cpus.contains(cpu))
            .map(|(_, v)| judged(v))
            .sum();
        Some((on_dut, total))
    }
}

/// A linecardd's own view at one moment (`ctl list`, `ctl drops`): kept
/// beside the capture, read by the faults that need the session's
/// discriminators and counters; never a figure of a verdict.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct EngineView {
    pub list: ListReply,
    pub drops: DropsReply,
}
