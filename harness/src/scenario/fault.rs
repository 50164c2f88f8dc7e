//! A phase's fault (`fault = { kind = ... }`): what a scenario can ask
//! for, checked key by key. The runner applies it (`run::actions`) and
//! judges the wire against it (`run::faults`).

use super::raw::RawFault;
use serde::{Deserialize, Serialize};

/// One fault, applied once per phase (`[[phase]] fault = { kind = ... }`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Fault {
    /// `percent` of the peer's BFD control frames lost for the whole phase
    /// (`lc_loss` on its bridge port, seeded).
    Loss { percent: f64, seed: u64 },
    /// The peer's bridge port down for `down_ms`, one second into the phase.
    LinkFlap { down_ms: u64 },
    /// The peer daemon killed one second into the phase and started again,
    /// `times` times: after each restart, the next kill once both daemons
    /// say the session is Up again and it has run for a moment.
    PeerRestart {
        #[serde(default = "once")]
        times: u64,
    },
    /// The peer daemon stopped (SIGSTOP) for `stall_ms`, `times` times,
    /// `every_ms` apart from one second into the phase: silences shorter
    /// than a detection time that our own clock must fill (RFC 5880
    /// 6.8.7), wherever they fall (under `rt_throttling = "half"`, into
    /// the windows that hold every RT task).
    PeerStall {
        stall_ms: u64,
        times: u64,
        every_ms: u64,
    },
    /// The DUT's engine stopped (SIGSTOP) for `stop_ms`, one second into
    /// the phase: the peer must declare it Down (linecardd's xdp backend
    /// after its dead-man limit), and it must come back.
    EngineStop { stop_ms: u64 },
    /// The DUT's engine killed (SIGKILL) one second into the phase and
    /// started again: the peer detects it, and the new engine comes Up
    /// under a new discriminator.
    EngineRestart,
    /// The DUT's engine handed over to a new process one second into the
    /// phase: `linecardd --config FILE --take-over` started beside it (xdp
    /// backend). Nothing may show on the wire: no Down on either side, the
    /// same discriminator after, our own clock on schedule throughout.
    EngineHandover,
    /// [`Fault::EngineHandover`] to the DUT's other build: its
    /// `linecardd_upgrade` while its `linecardd` runs, and back (a
    /// rollback) while the second build runs. The same handover record
    /// and pinned maps read by another binary, which keeps the running XDP
    /// program when its own is the same (`linecard_bpf_objects::identity`)
    /// and otherwise loads, verifies and swaps in its own. Judged as a
    /// handover.
    EngineUpgrade,
    /// The peer daemon killed one second into the phase while an impostor
    /// on the link (the lab's spare host) sends as the peer for
    /// `run::faults::IMPOSTOR_MS`, with both discriminators: packets under a guessed
    /// key and a replay of the peer's past; then the peer started again.
    /// Verification must refuse them all (RFC 5880 6.7.3, 6.7.4): our Down
    /// a detection time after the peer's last genuine packet.
    Impostor,
    /// While the peer lives, the impostor floods the DUT with `frames`
    /// packets as the peer (a guessed digest with the next sequence number
    /// and a replay of the past, in turn, [`FLOOD_FRAMES_PER_MS`] a
    /// millisecond at most), one second into the phase. Every one must be
    /// refused (RFC 5880 6.7.3-6.7.4), in the kernel on the fast path
    /// (none reaching userspace), and the session must hold.
    Flood { frames: u64 },
}

fn once() -> u64 {
    1
}

/// The flood's pace: this many frames a millisecond at most (5000 a
/// second, 100 000 in 20 s: what the spare host's packet socket sustained
/// here with L4 on the DUT's CPU, 4700 a second unpaced).
pub const FLOOD_FRAMES_PER_MS: u64 = 5;

impl Fault {
    /// Whether the DUT's port sees every packet of ours the peer received:
    /// not while a link flap drops ours too, after the capture.
    pub fn peer_hears_the_capture(&self) -> bool {
        !matches!(self, Self::LinkFlap { .. })
    }

    pub fn describe(&self) -> String {
        match self {
            Self::Loss { percent, seed } => format!("loss {percent} % (seed {seed})"),
            Self::LinkFlap { down_ms } => format!("link down {down_ms} ms"),
            Self::PeerRestart { times: 1 } => "peer restarted".into(),
            Self::PeerRestart { times } => format!("peer restarted {times} times"),
            Self::PeerStall {
                stall_ms,
                times,
                every_ms,
            } => format!("peer stopped {stall_ms} ms, {times} times {every_ms} ms apart"),
            Self::EngineStop { stop_ms } => format!("engine stopped {stop_ms} ms"),
            Self::EngineRestart => "engine restarted".into(),
            Self::EngineHandover => "engine handed over to a new process".into(),
            Self::EngineUpgrade => "engine handed over to its other build".into(),
            Self::Impostor => "peer killed, an impostor sending as it".into(),
            Self::Flood { frames } => {
                format!("an impostor's flood of {frames} forged and replayed packets")
            }
        }
    }

    /// The `kind` key that names it in a scenario.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Self::Loss { .. } => "loss",
            Self::LinkFlap { .. } => "link_flap",
            Self::PeerRestart { .. } => "peer_restart",
            Self::PeerStall { .. } => "peer_stall",
            Self::EngineStop { .. } => "engine_stop",
            Self::EngineRestart => "engine_restart",
            Self::EngineHandover => "engine_handover",
            Self::EngineUpgrade => "engine_upgrade",
            Self::Impostor => "impostor",
            Self::Flood { .. } => "flood",
        }
    }
}

impl Fault {
    /// Whether the fault silences only the peer's side, so that our own
    /// clock keeps sending through it (not a stopped or restarted engine).
    pub fn leaves_our_clock_running(&self) -> bool {
        matches!(
            self,
            Fault::Loss { .. }
                | Fault::LinkFlap { .. }
                | Fault::PeerRestart { .. }
                | Fault::PeerStall { .. }
                | Fault::Impostor
                | Fault::Flood { .. }
                | Fault::EngineHandover
                | Fault::EngineUpgrade
        )
    }

    /// Whether a successor process takes the running engine's sessions
    /// over (the same build or a second one).
    pub fn hands_over(&self) -> bool {
        matches!(self, Fault::EngineHandover | Fault::EngineUpgrade)
    }
}

/// What a phase allows for each kill of a repeated `peer_restart`.
const RESTART_SECONDS: u64 = 1;

/// A phase's fault; the error is (key, value, why). Every action must end
/// within its phase, one second in.
pub(super) fn parse_fault(f: &RawFault, seconds: u64) -> Result<Fault, KeyError> {
    let only = |kind: &str, allowed: &[&str]| only_keys(f, kind, allowed);
    // Room for the action and a recovery after it.
    let fits = |ms: i64| (ms as u64) + 1000 + 3000 <= seconds * 1000;
    match f.kind.as_str() {
        "loss" => {
            only("loss", &["percent", "seed"])?;
            loss(f)
        }
        "link_flap" => {
            only("link_flap", &["down_ms"])?;
            match f.down_ms {
                Some(ms) if (1..=60_000).contains(&ms) && fits(ms) => {
                    Ok(Fault::LinkFlap { down_ms: ms as u64 })
                }
                Some(ms) => err(
                    "down_ms",
                    &ms,
                    "must be 1 to 60000 and end 3 s before the phase does (it starts 1 s in)",
                ),
                None => err("down_ms", &"(none)", "fault link_flap needs down_ms"),
            }
        }
        "peer_restart" => {
            only("peer_restart", &["times"])?;
            peer_restart(f, seconds)
        }
        "engine_stop" => {
            only("engine_stop", &["stop_ms"])?;
            match f.stop_ms {
                Some(ms) if (1..=60_000).contains(&ms) && fits(ms) => {
                    Ok(Fault::EngineStop { stop_ms: ms as u64 })
                }
                Some(ms) => err(
                    "stop_ms",
                    &ms,
                    "must be 1 to 60000 and end 3 s before the phase does (it starts 1 s in)",
                ),
                None => err("stop_ms", &"(none)", "fault engine_stop needs stop_ms"),
            }
        }
        "engine_restart" => {
            only("engine_restart", &[])?;
            if seconds < 6 {
                return err(
                    "kind",
                    &"engine_restart",
                    "needs a phase of at least 6 s (kill 1 s in, restart, recover)",
                );
            }
            Ok(Fault::EngineRestart)
        }
        kind @ ("engine_handover" | "engine_upgrade") => {
            only(kind, &[])?;
            if seconds < 5 {
                return err(
                    "kind",
                    &kind,
                    "needs a phase of at least 5 s (the handover 1 s in, then the sessions watched)",
                );
            }
            Ok(if kind == "engine_upgrade" {
                Fault::EngineUpgrade
            } else {
                Fault::EngineHandover
            })
        }
        "peer_stall" => {
            only("peer_stall", &["stall_ms", "times", "every_ms"])?;
            peer_stall(f, &fits)
        }
        "impostor" => {
            only("impostor", &[])?;
            if seconds < 6 {
                return err(
                    "kind",
                    &"impostor",
                    "needs a phase of at least 6 s (kill 1 s in, the impostor, restart, recover)",
                );
            }
            Ok(Fault::Impostor)
        }
        "flood" => {
            only("flood", &["frames"])?;
            flood(f, &fits)
        }
        k => err(
            "kind",
            &k,
            "must be loss, link_flap, peer_restart, peer_stall, engine_stop, engine_restart, engine_handover, engine_upgrade, impostor or flood",
        ),
    }
}

/// The error of a fault's key: (key, value, why).
type KeyError = (String, String, String);

fn err<T>(k: &str, v: &dyn std::fmt::Display, why: &str) -> Result<T, KeyError> {
    Err((k.to_string(), v.to_string(), why.to_string()))
}

/// Refuses any key set in `f` that fault `kind` does not take.
fn only_keys(f: &RawFault, kind: &str, allowed: &[&str]) -> Result<(), KeyError> {
    for (key, set) in [
        ("percent", f.percent.is_some()),
        ("seed", f.seed.is_some()),
        ("down_ms", f.down_ms.is_some()),
        ("stop_ms", f.stop_ms.is_some()),
        ("stall_ms", f.stall_ms.is_some()),
        ("times", f.times.is_some()),
        ("every_ms", f.every_ms.is_some()),
        ("frames", f.frames.is_some()),
    ] {
        if set && !allowed.contains(&key) {
            return Err((
                key.into(),
                "(set)".into(),
                format!("not a key of fault {kind}"),
            ));
        }
    }
    Ok(())
}

/// `loss`: a share of the peer's frames lost on its port, seeded.
fn loss(f: &RawFault) -> Result<Fault, KeyError> {
    let percent = match f.percent {
        Some(p) if (0.0..=100.0).contains(&p) => p,
        Some(p) => return err("percent", &p, "must be 0 to 100"),
        None => return err("percent", &"(none)", "fault loss needs percent"),
    };
    let seed = match f.seed.unwrap_or(1) {
        s if s >= 0 => s as u64,
        s => return err("seed", &s, "cannot be negative"),
    };
    Ok(Fault::Loss { percent, seed })
}

/// `peer_restart`: the peer killed `times` times, started again each time.
fn peer_restart(f: &RawFault, seconds: u64) -> Result<Fault, KeyError> {
    let times = f.times.unwrap_or(1);
    if !(1..=100).contains(&times) {
        return err("times", &times, "must be 1 to 100");
    }
    // Each kill after the first waits for the session to come Up
    // again (RFC 5880 6.8.3: a packet a second while not Up).
    let needs = 6 + RESTART_SECONDS * (times as u64 - 1);
    if seconds < needs {
        return err(
            "kind",
            &"peer_restart",
            &format!("needs a phase of at least {needs} s (kill 1 s in, restart, recover; {RESTART_SECONDS} s more for each further kill)"),
        );
    }
    Ok(Fault::PeerRestart {
        times: times as u64,
    })
}

/// `peer_stall`: the peer stopped (SIGSTOP) `times` times.
fn peer_stall(f: &RawFault, fits: &dyn Fn(i64) -> bool) -> Result<Fault, KeyError> {
    let (Some(stall_ms), Some(times), Some(every_ms)) = (f.stall_ms, f.times, f.every_ms) else {
        return err("kind", &"peer_stall", "needs stall_ms, times and every_ms");
    };
    if !(1..=1000).contains(&stall_ms) {
        return err("stall_ms", &stall_ms, "must be 1 to 1000");
    }
    if !(1..=1000).contains(&times) {
        return err("times", &times, "must be 1 to 1000");
    }
    if every_ms <= stall_ms || every_ms > 60_000 {
        return err(
            "every_ms",
            &every_ms,
            "must be longer than stall_ms, at most 60000",
        );
    }
    if !fits(times * every_ms) {
        return err(
            "times",
            &times,
            "times x every_ms must end 3 s before the phase does (it starts 1 s in)",
        );
    }
    Ok(Fault::PeerStall {
        stall_ms: stall_ms as u64,
        times: times as u64,
        every_ms: every_ms as u64,
    })
}

/// `flood`: forged and replayed packets at the DUT, paced.
fn flood(f: &RawFault, fits: &dyn Fn(i64) -> bool) -> Result<Fault, KeyError> {
    let frames = f.frames.unwrap_or(100_000);
    if !(1..=1_000_000).contains(&frames) {
        return err("frames", &frames, "must be 1 to 1000000");
    }
    // Up to twice what FLOOD_FRAMES_PER_MS takes (the sender's
    // bound): the flood must end 3 s before the phase does.
    let takes_ms = 2 * (frames as u64).div_ceil(FLOOD_FRAMES_PER_MS) as i64;
    if !fits(takes_ms) {
        return err(
            "frames",
            &frames,
            &format!(
                "may take {takes_ms} ms (twice its pace of {} frames a millisecond): the phase must last it, 1 s before and 3 s after",
                FLOOD_FRAMES_PER_MS
            ),
        );
    }
    Ok(Fault::Flood {
        frames: frames as u64,
    })
}
