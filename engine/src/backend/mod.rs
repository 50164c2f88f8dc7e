//! Transmit backends and whether each can run on this host.
//!
//! Every backend can say why it cannot run here; a bake-off shows such a row
//! as unavailable with that reason instead of failing obscurely.

pub mod naive;
pub mod responder;
pub mod rt;
pub mod sim;
pub mod txtime;
pub mod xdp;
pub mod xmit_seq;

use crate::config::EngineConfig;
use crate::session::table::SessionId;
use crate::session::{Nanos, Session};
use crate::wire::Repr;
use serde::Serialize;

/// Where a packet handed to the kernel must leave: at once, or at a time
/// (engine ns) that the kernel honours (SO_TXTIME).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Departure {
    Now,
    At(Nanos),
}

/// How packets leave the engine: the one thing the transmit designs differ
/// in. The event loop, sockets and sessions are shared; a backend decides
/// how the loop's thread runs, how long it sleeps, and when each session's
/// packets are handed to the kernel.
pub trait Transmitter {
    fn kind(&self) -> BackendKind;

    /// Prepares the loop's thread (rt: SCHED_FIFO and pinning; deadline:
    /// SCHED_DEADLINE and pinning). Called once,
    /// on that thread, before the loop starts.
    fn enter_loop(&mut self) -> std::io::Result<()> {
        Ok(())
    }

    /// Prepares a new session's transmit path (txtime: SO_TXTIME on its
    /// socket and the etf qdisc on its interface).
    fn prepare_session(
        &mut self,
        _spec: &crate::config::SessionSpec,
        _socket: &mut crate::io::TxSocket,
    ) -> std::io::Result<()> {
        Ok(())
    }

    /// Hands `session`'s packets that are due at `now` (or, for a
    /// pipelining backend, soon) to `send`.
    fn transmit(
        &mut self,
        now: Nanos,
        id: SessionId,
        session: &mut Session,
        send: &mut dyn FnMut(&Repr, Departure),
    ) {
        let _ = id;
        while let Some(packet) = session.poll_transmit(now) {
            send(&packet, Departure::Now);
        }
    }

    /// When the loop must next run for this session.
    fn next_wake(&self, id: SessionId, session: &Session) -> Option<Nanos> {
        let _ = id;
        session.next_deadline()
    }

    /// How long the loop sleeps, given how far away the next wake-up of any
    /// session and the next detection deadline are (ns, never negative).
    fn sleep_ns(&self, until_wake: Option<Nanos>, until_detection: Option<Nanos>) -> Nanos;

    /// The session left the engine.
    fn forget(&mut self, _id: SessionId) {}
}

/// The transmitter for `kind`, configured from the engine's settings.
pub fn transmitter(kind: BackendKind, config: &EngineConfig) -> Box<dyn Transmitter> {
    match kind {
        BackendKind::Naive => Box::new(naive::Naive),
        BackendKind::Rt => Box::new(rt::Realtime {
            priority: config.rt_priority,
            cpu: config.cpu,
            deadline: None,
        }),
        BackendKind::Deadline => Box::new(rt::Realtime {
            priority: config.rt_priority,
            cpu: config.cpu,
            deadline: Some(rt::TIMELY),
        }),
        BackendKind::Txtime => Box::new(txtime::Txtime::new(config.txtime_depth)),
        BackendKind::Xdp => Box::new(xdp::RxClocked),
    }
}

/// The longest a deadline-driven loop sleeps with nothing due (it still
/// serves the control socket).
pub const MAX_SLEEP_NS: Nanos = 50_000_000;

/// Whether a backend can run on this host, and if not, why and what fixes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Availability {
    Available,
    Unavailable { reason: String },
}

/// The transmit designs under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BackendKind {
    /// One thread whose clock is a 2 ms receive timeout.
    Naive,
    /// A SCHED_FIFO thread, optionally pinned, sleeping to exact deadlines.
    Rt,
    /// The same loop under SCHED_DEADLINE: ahead of every SCHED_FIFO task
    /// and out of RT throttling's reach, within its own reservation.
    Deadline,
    /// SO_TXTIME with the etf qdisc: packets handed to the kernel ahead of
    /// their departure time.
    Txtime,
    /// RX-clocked replies from XDP.
    Xdp,
}

impl BackendKind {
    pub const ALL: [BackendKind; 5] = [
        Self::Naive,
        Self::Rt,
        Self::Deadline,
        Self::Txtime,
        Self::Xdp,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Naive => "naive",
            Self::Rt => "rt",
            Self::Deadline => "deadline",
            Self::Txtime => "txtime",
            Self::Xdp => "xdp",
        }
    }

    /// Whether this backend can run here, with the reason when not.
    pub fn availability(self) -> Availability {
        match self {
            Self::Naive => Availability::Available,
            Self::Rt => rt::availability(),
            Self::Deadline => rt::deadline_availability(),
            Self::Txtime => txtime::availability(),
            Self::Xdp => xdp::availability(),
        }
    }
}

impl std::str::FromStr for BackendKind {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        Self::ALL.into_iter().find(|k| k.name() == s).ok_or(())
    }
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_backend_parses_from_its_own_name_and_nothing_else_does() {
        for kind in BackendKind::ALL {
            assert_eq!(kind.name().parse::<BackendKind>(), Ok(kind));
            assert_eq!(kind.to_string(), kind.name());
        }
        assert!("fifo".parse::<BackendKind>().is_err());
        assert!("Deadline".parse::<BackendKind>().is_err());
    }
}
