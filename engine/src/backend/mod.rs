//! Transmit backends and whether each can run on this host.
//!
//! Every backend can say why it cannot run here; a bake-off shows such a row
//! as unavailable with that reason instead of failing obscurely.

pub mod xdp;

use serde::Serialize;

/// Whether a backend can run on this host, and if not, why and what fixes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Availability {
    Available,
    Unavailable { reason: String },
}
