//! What the runner does for a phase's fault, one second into the phase:
//! a link taken down, the peer killed (again and again, or while an
//! impostor sends as it) or stopped, the engine stopped, killed or handed
//! over to a new process. Judged
//! afterwards on the capture (`faults`), never by what this code believes
//! it did.

use super::site::BfdDaemon;
use super::{impostor, readiness, unix_ns};
use crate::lab::spec;
use crate::scenario::Fault;
use anyhow::{Context, Result};
use std::time::Duration;

/// The directory of a daemon restarted by phase `phase`'s fault, for its
/// `kill`th kill (0-based; a peer's is `peer-` and this).
pub(super) fn restart_suffix(phase: usize, kill: u64) -> String {
    if kill == 0 {
        format!("restarted-{phase}")
    } else {
        format!("restarted-{phase}-{kill}")
    }
}

/// How the site starts daemons anew for a fault.
pub(super) struct Starters<'a> {
    /// The peer again, for its `kill`th kill (0-based).
    pub peer: &'a dyn Fn(u64) -> Result<Box<dyn BfdDaemon>>,
    /// The DUT again, after it was killed.
    pub dut: &'a dyn Fn() -> Result<Box<dyn BfdDaemon>>,
    /// A successor beside the running DUT, to take its sessions over, and
    /// the file it was seen running.
    pub successor: &'a dyn Fn(Successor) -> Result<(Box<dyn BfdDaemon>, std::path::PathBuf)>,
}

/// Which build takes the running engine's sessions over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Successor {
    /// The build running now (`engine_handover`).
    SameBuild,
    /// The DUT's other build (`engine_upgrade`): its `linecardd_upgrade`
    /// while its `linecardd` runs, and back again (a rollback) while the
    /// second build runs; `running` is the engine's PID.
    OtherBuild { running: u32 },
}

/// Runs a fault's action (not a loss: that lasts the phase), one second
/// into its phase; returns when it started and ended (and a flood's
/// counts).
pub(super) fn act(
    fault: &Fault,
    auth: Option<&crate::scenario::SessionAuth>,
    dead_for: Duration,
    peer: &mut Box<dyn BfdDaemon>,
    dut: &mut Box<dyn BfdDaemon>,
    start: &Starters,
) -> Result<crate::manifest::evidence::Applied> {
    let (restart_peer, restart_dut, take_over_dut) = (start.peer, start.dut, start.successor);
    let start = unix_ns();
    let (mut flood, mut successor) = (None, None);
    match fault {
        Fault::Loss { .. } => {}
        Fault::LinkFlap { down_ms } => {
            let port = spec::PEER.bridge_port;
            crate::sys::run("ip", ["-n", spec::OBSERVER_NS, "link", "set", port, "down"])?;
            std::thread::sleep(Duration::from_millis(*down_ms));
            crate::sys::run("ip", ["-n", spec::OBSERVER_NS, "link", "set", port, "up"])?;
        }
        Fault::PeerRestart { times } => {
            for kill in 0..*times {
                if kill > 0 {
                    // The next kill once both daemons say the session is
                    // Up again, and it has run for a moment (steady,
                    // RX-clocked).
                    readiness::wait_up(dut.as_mut(), peer.as_mut(), 1, readiness::ready_within(1))
                        .map_err(|why| {
                            anyhow::anyhow!("after kill {kill} of the peer, not Up again: {why}")
                        })?;
                    std::thread::sleep(Duration::from_millis(300));
                }
                peer.kill()?;
                // Dead long enough that our Down is a timeout, not the
                // restarted peer's Down (a linecardd peer is back in
                // less than a detection time).
                std::thread::sleep(dead_for);
                *peer = restart_peer(kill)?;
            }
        }
        Fault::PeerStall {
            stall_ms,
            times,
            every_ms,
        } => {
            let pid = peer.pid() as libc::pid_t;
            for _ in 0..*times {
                // SAFETY: signals to the peer daemon this run started, by PID.
                unsafe { libc::kill(pid, libc::SIGSTOP) };
                std::thread::sleep(Duration::from_millis(*stall_ms));
                // SAFETY: as above: the same PID, this run's daemon.
                unsafe { libc::kill(pid, libc::SIGCONT) };
                std::thread::sleep(Duration::from_millis(every_ms - stall_ms));
            }
        }
        Fault::EngineStop { stop_ms } => {
            let pid = dut.pid() as libc::pid_t;
            // SAFETY: signals to the DUT daemon this run started, by PID.
            unsafe { libc::kill(pid, libc::SIGSTOP) };
            std::thread::sleep(Duration::from_millis(*stop_ms));
            // SAFETY: as above: the same PID, this run's daemon.
            unsafe { libc::kill(pid, libc::SIGCONT) };
        }
        Fault::EngineRestart => {
            dut.stop_hard()?;
            *dut = restart_dut()?;
        }
        Fault::EngineHandover | Fault::EngineUpgrade => {
            // The successor takes the sessions over and the running engine
            // exits once relieved (bounded: a take-over takes well under a
            // second; its program's load, if another build, a second more).
            let (next, exe) = take_over_dut(if *fault == Fault::EngineUpgrade {
                Successor::OtherBuild { running: dut.pid() }
            } else {
                Successor::SameBuild
            })?;
            successor = Some(exe);
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            while !dut.exited() {
                if std::time::Instant::now() > deadline {
                    anyhow::bail!(
                        "the engine did not hand over within 30 s of its successor's start"
                    );
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            *dut = next;
        }
        Fault::Impostor => {
            let auth = auth.context("the impostor needs sessions.auth (validated)")?;
            let view = dut
                .engine_view()
                .context("the impostor reads the session from the DUT's control socket")?;
            let peer_address = spec::PEER.ipv4.parse().context("the lab's peer address")?;
            let target = impostor::Target::from_list(&view.list, peer_address)?;
            let frames = impostor::frames(target, auth, crate::inject::spare_mac(), 1);
            peer.kill()?;
            impostor::send(&frames)?;
            *peer = restart_peer(0)?;
        }
        Fault::Flood { frames: count } => {
            let auth = auth.context("the flood needs sessions.auth (validated)")?;
            let before = dut
                .engine_view()
                .context("the flood reads the session from the DUT's control socket")?;
            let read_view = || {
                dut.engine_view()
                    .context("the flood reads the session from the DUT's control socket")
            };
            let sent = impostor::flood(auth, *count, &read_view)?;
            let after = dut
                .engine_view()
                .context("the DUT's control socket after the flood")?;
            flood = Some(impostor::refusals(&before, &after, sent));
        }
    }
    Ok(crate::manifest::evidence::Applied {
        start_ns: start,
        end_ns: unix_ns(),
        flood,
        successor,
        ..crate::manifest::evidence::Applied::default()
    })
}
