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
use linecard_api::{Availability, BackendKind};

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

/// Whether `kind` can run on this host, with the reason when not
/// (`linecardd backends` prints it; the harness asks that command).
pub fn availability(kind: BackendKind) -> Availability {
    match kind {
        BackendKind::Naive => Availability::Available,
        BackendKind::Rt => rt::availability(),
        BackendKind::Deadline => rt::deadline_availability(),
        BackendKind::Txtime => txtime::availability(),
        BackendKind::Xdp => xdp::availability(),
    }
}
