//! A scenario file as TOML gives it, before validation: every key
//! optional where the file may leave it out, unknown keys refused.

use super::{ProxmoxSpec, SshSpec};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawScenario {
    pub(super) schema_version: i64,
    pub(super) name: String,
    pub(super) description: String,
    pub(super) provider: Option<String>,
    pub(super) proxmox: Option<ProxmoxSpec>,
    pub(super) ssh: Option<SshSpec>,
    pub(super) peer: RawPeer,
    pub(super) sessions: Option<RawSessions>,
    #[serde(default)]
    pub(super) phase: Vec<RawPhase>,
    #[serde(default)]
    pub(super) dut: Vec<RawDut>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPeer {
    pub(super) implementation: String,
    pub(super) rt_priority: Option<i64>,
    pub(super) bfdd: Option<String>,
    pub(super) zebra: Option<String>,
    pub(super) bird: Option<String>,
    pub(super) linecardd: Option<String>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSessions {
    pub(super) count: Option<i64>,
    pub(super) steps: Option<Vec<i64>>,
    pub(super) family: Option<String>,
    pub(super) tx_interval_ms: Option<i64>,
    pub(super) rx_interval_ms: Option<i64>,
    pub(super) multiplier: Option<i64>,
    pub(super) multihop: Option<bool>,
    pub(super) min_ttl: Option<i64>,
    pub(super) echo: Option<bool>,
    pub(super) auth: Option<RawAuth>,
    pub(super) demand: Option<String>,
}

/// `sessions.auth = { type = "meticulous_keyed_sha1", key_id = 1, secret = "..." }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAuth {
    #[serde(rename = "type")]
    pub(super) kind: String,
    pub(super) key_id: Option<i64>,
    pub(super) secret: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPhase {
    pub(super) profile: String,
    pub(super) seconds: i64,
    pub(super) fault: Option<RawFault>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFault {
    pub(super) kind: String,
    pub(super) percent: Option<f64>,
    pub(super) seed: Option<i64>,
    pub(super) down_ms: Option<i64>,
    pub(super) stop_ms: Option<i64>,
    pub(super) stall_ms: Option<i64>,
    pub(super) times: Option<i64>,
    pub(super) every_ms: Option<i64>,
    pub(super) frames: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDut {
    pub(super) label: String,
    pub(super) implementation: String,
    pub(super) backend: Option<String>,
    pub(super) rt_throttling: Option<String>,
    pub(super) ksoftirqd_priority: Option<i64>,
    pub(super) positive_control: Option<bool>,
    pub(super) max_flaps: Option<i64>,
    pub(super) max_gap_ms: Option<f64>,
    pub(super) excused_gaps: Option<String>,
    pub(super) engine: Option<toml::Table>,
    pub(super) offload: Option<String>,
    pub(super) ipv4: Option<RawLimits>,
    pub(super) ipv6: Option<RawLimits>,
    pub(super) peer_echo: Option<String>,
    pub(super) own_echo: Option<bool>,
    pub(super) peer_timers: Option<RawPeerTimers>,
    pub(super) bfdd: Option<String>,
    pub(super) zebra: Option<String>,
    pub(super) bird: Option<String>,
    pub(super) linecardd: Option<String>,
    pub(super) linecardd_upgrade: Option<String>,
}

/// `dut.peer_timers = { tx_interval_ms = 10, rx_interval_ms = 50 }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPeerTimers {
    pub(super) tx_interval_ms: Option<i64>,
    pub(super) rx_interval_ms: Option<i64>,
}

/// A DUT's limits for one address family's sessions (`family = "dual"`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLimits {
    pub(super) positive_control: Option<bool>,
    pub(super) max_flaps: Option<i64>,
    pub(super) max_gap_ms: Option<f64>,
    pub(super) peer_echo: Option<String>,
    pub(super) own_echo: Option<bool>,
}

impl RawPeer {
    pub(super) fn programs(&self) -> super::programs::RawPrograms {
        super::programs::RawPrograms::of([
            &self.bfdd,
            &self.zebra,
            &self.bird,
            &self.linecardd,
            &None,
        ])
    }
}

impl RawDut {
    pub(super) fn programs(&self) -> super::programs::RawPrograms {
        super::programs::RawPrograms::of([
            &self.bfdd,
            &self.zebra,
            &self.bird,
            &self.linecardd,
            &self.linecardd_upgrade,
        ])
    }
}
