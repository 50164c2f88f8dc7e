//! Transmit backends and whether each can run on this host.
//!
//! Every backend can say why it cannot run here; a bake-off shows such a row
//! as unavailable with that reason instead of failing obscurely.

pub mod rt;
pub mod sim;
pub mod txtime;
pub mod xdp;

use serde::Serialize;

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
    /// SO_TXTIME with the etf qdisc: packets handed to the kernel ahead of
    /// their departure time.
    Txtime,
    /// RX-clocked replies from XDP.
    Xdp,
}

impl BackendKind {
    pub const ALL: [BackendKind; 4] = [Self::Naive, Self::Rt, Self::Txtime, Self::Xdp];

    pub fn name(self) -> &'static str {
        match self {
            Self::Naive => "naive",
            Self::Rt => "rt",
            Self::Txtime => "txtime",
            Self::Xdp => "xdp",
        }
    }

    /// Whether this backend can run here, with the reason when not.
    pub fn availability(self) -> Availability {
        match self {
            Self::Naive => Availability::Available,
            Self::Rt => rt::availability(),
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
