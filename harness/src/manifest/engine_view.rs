//! The engine's own view of each phase, from its metrics endpoint scraped
//! once a second during the run (`crate::scrape`), beside the wire's.
//! Never a verdict's figure: a starved engine thinks it is on time, and
//! where the two disagree is what the endpoint is for.

use serde::{Deserialize, Serialize};

/// One phase: the engine's figures and the capture's, and where they
/// disagree.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct PhaseEngineView {
    pub phase: String,
    /// Scrapes whose window reached into the phase (each covers the
    /// second before it, so the engine's figures may reach up to a second
    /// past the phase's edges).
    pub scrapes: usize,
    /// Scrapes that failed among them.
    pub failed_scrapes: usize,
    /// `kernel` or `userspace`: where the engine measured its gaps.
    pub path: String,
    /// Departures from Up, every session, in the engine's words.
    pub engine_downs: u64,
    /// Up -> not Up on the wire.
    pub wire_flaps: u64,
    /// The largest gap between the peer's packets as the engine heard
    /// them, and on the wire (the peer's Up packets), ms.
    pub engine_receive_max_ms: Option<f64>,
    pub wire_receive_max_ms: Option<f64>,
    /// The largest gap between the DUT's packets as the engine sent
    /// them, and on the wire, ms.
    pub engine_transmit_max_ms: Option<f64>,
    pub wire_transmit_max_ms: Option<f64>,
    /// Each disagreement in words; empty when they agree.
    pub disagreements: Vec<String>,
}
