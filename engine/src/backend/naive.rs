//! The `naive` backend: the design most daemons start with. One thread
//! whose only clock is a receive timeout of 2 ms, so a packet leaves at the
//! first tick after it is due, and a starved thread sends late.

use super::{BackendKind, Transmitter};
use crate::session::Nanos;

/// The naive transmit clock: a receive timeout of 2 ms.
pub const TICK_NS: Nanos = 2_000_000;

pub struct Naive;

impl Transmitter for Naive {
    fn kind(&self) -> BackendKind {
        BackendKind::Naive
    }

    /// Transmission waits for the next tick; detection is not what the
    /// bake-off compares, so it keeps its own deadline.
    fn sleep_ns(&self, _until_wake: Option<Nanos>, until_detection: Option<Nanos>) -> Nanos {
        until_detection.map_or(TICK_NS, |d| d.min(TICK_NS))
    }
}
