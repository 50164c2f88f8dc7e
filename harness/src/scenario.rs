//! Scenarios (`scenarios/*.toml`): what runs where, under which load, and
//! what must hold. Parsed, then validated with errors that name the file,
//! key and value, before anything starts.

use crate::profile::Profile;
use linecard_api::config::EngineSettings;
use linecard_api::BackendKind;
use std::path::{Path, PathBuf};

mod dut;
mod fault;
mod parse;
pub mod programs;
mod proxmox;
mod raw;
mod ssh;
pub mod value;

use fault::parse_fault;
pub use fault::{Fault, FLOOD_FRAMES_PER_MS};
pub use proxmox::ProxmoxSpec;
use raw::*;
pub use ssh::{HostSpec, SshSpec};

/// A DUT's label as the name of its directory in a run (lowercase
/// letters, digits and single `-`); its repeated attempts add `-2`, `-3`.
/// `Scenario::parse` refuses labels whose directories would meet.
pub fn slug(label: &str) -> String {
    let s: String = label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    s.split('-')
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("-")
}

/// Whether DUTs labelled `a` and `b` would share a directory: the same
/// slug, or one's slug another's repeated attempt (`xdp 2` and `xdp`).
pub(crate) fn share_a_directory(a: &str, b: &str) -> bool {
    let (a, b) = (slug(a), slug(b));
    let attempt_of = |x: &str, y: &str| {
        x.strip_prefix(y)
            .and_then(|rest| rest.strip_prefix('-'))
            .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
    };
    a == b || attempt_of(&a, &b) || attempt_of(&b, &a)
}

/// Where the lab runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    /// Network namespaces on this machine.
    Local,
    /// Three VMs cloned on a Proxmox VE host over SSH (`[proxmox]`), run
    /// as three hosts with the hypervisor as the observer.
    Proxmox,
    /// The local lab on a remote Linux host, driven over SSH (`[ssh]`).
    Ssh,
}

/// A BFD implementation in the peer or DUT position.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PeerImplementation {
    Frr,
    Bird,
    /// linecardd on its `rt` backend (a timer-driven speaker at SCHED_FIFO
    /// on the peer's CPU): the peer for session counts FRR bfdd 8.4.4 does
    /// not bring up here (1024).
    Linecardd,
}

/// Whether the kernel's RT throttling stays as shipped for a run, is
/// switched off (`sched_rt_runtime_us = -1`), or holds RT tasks for half
/// of every second once they used the other half (`500000`: a window a
/// stall of the peer's falls into at once, to test what throttling
/// reaches); restored afterwards.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RtThrottling {
    Shipped,
    Off,
    Half,
}

impl RtThrottling {
    /// The `sched_rt_runtime_us` the run sets, if it changes it.
    pub fn runtime_us(self) -> Option<i64> {
        match self {
            Self::Shipped => None,
            Self::Off => Some(-1),
            Self::Half => Some(500_000),
        }
    }
}

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "implementation", rename_all = "snake_case")]
pub enum DutImplementation {
    /// FRR's bfdd in the DUT position: the design under the folklore.
    Frr,
    Linecardd {
        backend: BackendKind,
    },
    /// FRR's bfdd as the control plane, handing its sessions to linecardd
    /// over FRR's dataplane protocol; both on the DUT's CPUs.
    FrrDataplane {
        backend: BackendKind,
    },
}

/// An address family: a dual-stack scenario's sessions are judged and
/// reported per family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    Ipv4,
    Ipv6,
}

impl Family {
    pub const BOTH: [Family; 2] = [Family::Ipv4, Family::Ipv6];

    pub fn of(addr: std::net::IpAddr) -> Family {
        if addr.is_ipv4() {
            Family::Ipv4
        } else {
            Family::Ipv6
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Family::Ipv4 => "IPv4",
            Family::Ipv6 => "IPv6",
        }
    }
}

/// What must hold for a DUT, judged on the capture.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Expectation {
    /// This DUT must flap under the scenario's load: if it does not, the
    /// stress did not bite and the whole run is invalid.
    pub positive_control: bool,
    pub max_flaps: Option<u64>,
    pub max_gap_ms: Option<f64>,
    /// What the wire must show of the peer's echoes in each phase
    /// (`sessions.echo`).
    #[serde(default)]
    pub peer_echo: Option<PeerEcho>,
    /// Our echoes must be on the wire in each phase and every one of them
    /// come back (`sessions.echo`).
    #[serde(default)]
    pub own_echo: bool,
    /// What every control packet of both sides must carry, in each phase
    /// (`sessions.auth`).
    #[serde(default)]
    pub auth: Option<WireAuth>,
    /// Demand mode must show on the wire in each phase: the asker's D, the
    /// other side's silence, and the asker's verification Polls answered
    /// (`sessions.demand`).
    #[serde(default)]
    pub demand: Option<DemandAsker>,
    /// What a gap over `max_gap_ms` with a disturbance measured inside it
    /// that accounts for its excess makes of the run (`excused_gaps`).
    #[serde(default)]
    pub excused_gaps: ExcusedGaps,
}

/// `[[dut]] excused_gaps`: what a gap over the DUT's gap limit is worth
/// when a freeze, steal or idle-phase canary stall measured inside that
/// very gap accounts for its excess. Flaps are never excused this way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExcusedGaps {
    /// A pass with the gaps listed (`pass, N gaps excused`): a long run on
    /// a noisy host still concludes.
    #[default]
    Pass,
    /// The run is invalid (repeated once, then inconclusive): nothing the
    /// host disturbed is accepted.
    Invalid,
}

/// Authentication as the wire must show it: this Auth Type and Key ID on
/// every control packet, and for a meticulous type each sender's Sequence
/// Number one up from its last (RFC 5880 6.7.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WireAuth {
    pub auth_type: u8,
    pub key_id: u8,
    pub meticulous: bool,
}

impl WireAuth {
    pub fn of(auth: &SessionAuth) -> Self {
        let auth_type = auth.auth_type();
        Self {
            auth_type: auth_type.code(),
            key_id: auth.key_id,
            meticulous: auth_type.meticulous(),
        }
    }
}

/// The peer's echoes, as the DUT's advertised Required Min Echo RX allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PeerEcho {
    /// Sent, and every one reflected back (a DUT that advertises a
    /// non-zero Required Min Echo RX).
    Reflected,
    /// None sent: the DUT advertises 0, and the peer must not send echoes
    /// (RFC 5880 6.8.9).
    Absent,
}

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DutSpec {
    pub label: String,
    #[serde(flatten)]
    pub implementation: DutImplementation,
    pub rt_throttling: RtThrottling,
    /// The DUT CPUs' softirq threads at SCHED_FIFO this priority during
    /// its run (0: as the kernel ships them, SCHED_OTHER), so that the
    /// receive path the kernel defers to them runs above the hogs
    /// (`crate::softirq_threads`).
    #[serde(default)]
    pub ksoftirqd_priority: u8,
    pub expect: Expectation,
    /// More `[engine]` keys for linecardd (their values validated by
    /// linecardd itself).
    #[serde(default, deserialize_with = "engine_settings_or_text")]
    pub engine: EngineSettings,
    /// xdp only: the one family whose sessions go on the kernel's fast
    /// path; the other's stay in userspace (`offload = false`). `None`:
    /// every session where the engine can offload it.
    #[serde(default)]
    pub offload_only: Option<Family>,
    /// Dual-stack: limits per family, judged on that family's sessions
    /// alone, instead of `expect`.
    #[serde(default)]
    pub per_family: Vec<(Family, Expectation)>,
    /// The programs this DUT runs, where the scenario names them.
    #[serde(default)]
    pub programs: programs::Programs,
    /// The sessions this row runs, where a ladder (`sessions.steps`)
    /// gives it its own step; `None`: `sessions.count`.
    #[serde(default)]
    pub step: Option<Step>,
    /// The peer's own timers facing this DUT, where they differ from the
    /// sessions' (asymmetric timers, RFC 5880 6.8.2: each direction runs
    /// at the larger of its sender's Desired Min TX and its receiver's
    /// Required Min RX).
    #[serde(default)]
    pub peer_timers: Option<PeerTimers>,
}

/// The peer's Desired Min TX and Required Min RX, ms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PeerTimers {
    pub tx_interval_ms: u32,
    pub rx_interval_ms: u32,
}

/// One row of a ladder: the `[[dut]]` it repeats and its session count.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Step {
    /// The `[[dut]]`'s own label (the row's is `LABEL@COUNT`).
    pub label: String,
    pub sessions: usize,
}

impl DutSpec {
    /// Whether `--only NAME` picks this row: its label, or on a ladder
    /// the `[[dut]]`'s own label (every step of it).
    pub fn answers_to(&self, name: &str) -> bool {
        self.label == name || self.step.as_ref().is_some_and(|s| s.label == name)
    }

    /// The sessions as the peer facing this DUT is configured.
    pub fn peer_sessions(&self, sessions: &Sessions) -> Sessions {
        match self.peer_timers {
            None => sessions.clone(),
            Some(t) => Sessions {
                tx_interval_ms: t.tx_interval_ms,
                rx_interval_ms: t.rx_interval_ms,
                ..sessions.clone()
            },
        }
    }

    /// The limits a family's sessions are judged by: its own, else the
    /// DUT's.
    pub fn expect_for(&self, family: Family) -> Expectation {
        self.per_family
            .iter()
            .find(|(f, _)| *f == family)
            .map_or_else(|| self.expect.clone(), |(_, e)| e.clone())
    }
}

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PhaseSpec {
    pub profile: Profile,
    pub seconds: u64,
    /// A fault injected in this phase (`run::faults`); its checks replace
    /// the DUT's limits for the phase.
    #[serde(default)]
    pub fault: Option<Fault>,
}

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Sessions {
    /// Concurrent sessions, each on an address pair of its own (with
    /// `steps`, the largest step; each DUT row runs at its own).
    #[serde(default = "one")]
    pub count: usize,
    /// A ladder of session counts (`sessions.steps`): every `[[dut]]` runs
    /// once at each, labelled `LABEL@COUNT`, the steps in order.
    #[serde(default)]
    pub steps: Vec<usize>,
    pub ipv6: bool,
    /// Each of the `count` address pairs in both families: an IPv4 session
    /// and an IPv6 one (`family = "dual"`; `ipv6` is then false).
    #[serde(default)]
    pub dual_stack: bool,
    pub tx_interval_ms: u32,
    pub rx_interval_ms: u32,
    pub multiplier: u8,
    /// RFC 5883 sessions (UDP 4784) on both sides.
    #[serde(default)]
    pub multihop: bool,
    /// The lowest TTL a multihop session accepts (the DUT's and FRR's
    /// side; `None`: the implementation's default, 254).
    #[serde(default)]
    pub min_ttl: Option<u8>,
    /// The echo function on both sides (RFC 5880 6.4): the peer and
    /// linecardd (`echo = true`) originate echoes at the control interval.
    /// A peer FRR runs `echo-mode` (with zebra) on its IPv4 sessions only
    /// (its IPv6 echo is addressed to the other side, not to itself: it
    /// works only between FRRs) and its host forwards ours back; a peer
    /// linecardd originates in both families and does not reflect.
    #[serde(default)]
    pub echo: bool,
    /// Authentication on both sides (RFC 5880 6.7): one key, for every
    /// session of the peer and of each DUT.
    #[serde(default)]
    pub auth: Option<SessionAuth>,
    /// Who asks for Demand mode (RFC 5880 6.6) once the sessions are Up;
    /// `None`: asynchronous mode throughout.
    #[serde(default)]
    pub demand: Option<DemandAsker>,
}

/// `sessions.demand`: the side(s) that set D, asking the other to stop its
/// periodic packets and verifying the path with a Poll every second.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DemandAsker {
    Dut,
    Peer,
    Both,
}

impl DemandAsker {
    pub fn dut_asks(self) -> bool {
        matches!(self, Self::Dut | Self::Both)
    }
    pub fn peer_asks(self) -> bool {
        matches!(self, Self::Peer | Self::Both)
    }
}

/// A scenario's authentication: the type by linecardd's name for it
/// (`linecard_api::AUTH_TYPES`), one key.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SessionAuth {
    #[serde(rename = "type")]
    pub kind: String,
    pub key_id: u8,
    /// Never written out: a manifest names the key by its id and the
    /// first 8 hex digits of the secret's SHA-256 (`secret_sha256_8`),
    /// enough to tell two keys apart and nothing to sign with.
    #[serde(
        rename(serialize = "secret_sha256_8"),
        serialize_with = "fingerprint",
        skip_deserializing,
        default
    )]
    pub secret: String,
}

/// The first 8 hex digits of the SHA-256 of `secret`.
pub fn secret_fingerprint(secret: &str) -> String {
    crate::sys::sha256_hex(secret.as_bytes())[..8].to_string()
}

fn fingerprint<S: serde::Serializer>(secret: &str, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&secret_fingerprint(secret))
}

impl SessionAuth {
    pub fn auth_type(&self) -> linecard_api::AuthType {
        linecard_api::auth_type_named(&self.kind).expect("validated when loaded")
    }
}

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Scenario {
    pub name: String,
    pub description: String,
    pub provider: ProviderKind,
    /// The Proxmox host and VM IDs, with `provider = "proxmox"`.
    #[serde(default)]
    pub proxmox: Option<ProxmoxSpec>,
    /// The host, with `provider = "ssh"`.
    #[serde(default)]
    pub ssh: Option<SshSpec>,
    pub peer: PeerImplementation,
    /// SCHED_FIFO priority of the peer daemon (0: normal priority). The
    /// peer is the measurement's reference clock: an RX-clocked DUT
    /// mirrors every late peer packet, and a stalled peer declares a live
    /// DUT dead; but above the observer it can starve the capture.
    #[serde(default)]
    pub peer_rt_priority: u8,
    /// The programs the peer runs, where the scenario names them.
    #[serde(default)]
    pub peer_programs: programs::Programs,
    pub sessions: Sessions,
    pub phases: Vec<PhaseSpec>,
    pub duts: Vec<DutSpec>,
    /// The file it came from.
    pub file: PathBuf,
}

/// Sessions per scenario: one address pair each beyond the lab's own, from
/// the benchmarking range (see `run::daemons::pairs`); the engine's fast
/// path holds 4096.
pub const MAX_SESSIONS: i64 = 4096;

/// Validates `sessions.auth`, or (key, value, why). The secret is never
/// part of an error.
fn session_auth(
    raw: &RawAuth,
    peer: PeerImplementation,
) -> Result<SessionAuth, (&'static str, String, String)> {
    let auth_type =
        linecard_api::auth_type_named(&raw.kind).map_err(|why| ("type", raw.kind.clone(), why))?;
    if peer == PeerImplementation::Frr {
        return Err((
            "type",
            raw.kind.clone(),
            "needs peer.implementation = \"bird\" or \"linecardd\": FRR bfdd 8.4.4 has no BFD authentication"
                .into(),
        ));
    }
    let key_id = match raw.key_id.unwrap_or(1) {
        id @ 0..=255 => id as u8,
        id => return Err(("key_id", id.to_string(), "must be 0 to 255".into())),
    };
    // BIRD's configuration quotes the secret: keep it printable and plain.
    if !raw
        .secret
        .chars()
        .all(|c| c.is_ascii_graphic() && c != '"' && c != '\\')
    {
        return Err((
            "secret",
            format!("({} bytes)", raw.secret.len()),
            "printable ASCII without quotes or backslashes".into(),
        ));
    }
    let auth = SessionAuth {
        kind: raw.kind.clone(),
        key_id,
        secret: raw.secret.clone(),
    };
    auth_type
        .check_secret_len(raw.secret.len())
        .map_err(|why| ("secret", format!("({} bytes)", raw.secret.len()), why))?;
    Ok(auth)
}

/// A DUT's (or a family's) echo expectations, or (key, value, why).
fn echo_expectation(
    peer_echo: Option<&str>,
    own_echo: Option<bool>,
    echo: bool,
) -> Result<(Option<PeerEcho>, bool), (&'static str, String, &'static str)> {
    if (peer_echo.is_some() || own_echo.is_some()) && !echo {
        return Err((
            if peer_echo.is_some() {
                "peer_echo"
            } else {
                "own_echo"
            },
            "(set)".into(),
            "echo expectations need sessions.echo = true",
        ));
    }
    let peer_echo = match peer_echo {
        None => None,
        Some("reflected") => Some(PeerEcho::Reflected),
        Some("absent") => Some(PeerEcho::Absent),
        Some(other) => return Err(("peer_echo", other.into(), "must be reflected or absent")),
    };
    Ok((peer_echo, own_echo.unwrap_or(false)))
}

/// A DUT's limits, or (key, value, why): a positive control must flap and
/// carries no limits.
fn expectation(
    positive_control: Option<bool>,
    max_flaps: Option<i64>,
    max_gap_ms: Option<f64>,
) -> Result<Expectation, (&'static str, String, &'static str)> {
    let max_flaps = match max_flaps {
        Some(n) if n < 0 => return Err(("max_flaps", n.to_string(), "cannot be negative")),
        n => n.map(|n| n as u64),
    };
    if let Some(ms) = max_gap_ms {
        if !(ms.is_finite() && ms > 0.0) {
            return Err(("max_gap_ms", ms.to_string(), "must be above 0"));
        }
    }
    let positive_control = positive_control.unwrap_or(false);
    if positive_control && (max_flaps.is_some() || max_gap_ms.is_some()) {
        return Err((
            "positive_control",
            "true".into(),
            "a positive control must flap; it cannot also carry limits",
        ));
    }
    Ok(Expectation {
        positive_control,
        max_flaps,
        max_gap_ms,
        ..Expectation::default()
    })
}

impl Sessions {
    /// Sessions in all: `count` per family.
    pub fn total(&self) -> usize {
        if self.dual_stack {
            2 * self.count
        } else {
            self.count
        }
    }

    /// The sessions' address families, as tables say it.
    pub fn family_name(&self) -> &'static str {
        match (self.dual_stack, self.ipv6) {
            (true, _) => "IPv4 and IPv6",
            (false, true) => "IPv6",
            (false, false) => "IPv4",
        }
    }
}

fn one() -> usize {
    1
}

/// The peer's default priority: normal. Measured: FRR bfdd at SCHED_FIFO
/// 20 with 64 sessions starved the observer's capture on the shared CPU
/// (476715 packets dropped); a peer that stalls at normal priority is
/// caught instead (premature detection: the run is invalid and repeated).
pub const DEFAULT_PEER_RT_PRIORITY: i64 = 0;

/// Where a scenario's profiles live: `stress-profiles/` beside the
/// scenario's directory (the repository layout).
pub fn default_profiles_dir(scenario: &Path) -> PathBuf {
    scenario
        .parent()
        .and_then(Path::parent)
        .unwrap_or(Path::new("."))
        .join("stress-profiles")
}

/// A three-host `ssh` table's DUT and peer addresses are of one family
/// (a proxmox run's guests take the lab's, which are); refused as (key,
/// value, why).
fn three_hosts_share_a_family(spec: &SshSpec) -> Result<(), (String, String, String)> {
    let family = |h: &Option<HostSpec>| h.as_ref().and_then(|h| h.address).map(|a| a.is_ipv6());
    if family(&spec.dut) != family(&spec.peer) {
        return Err((
            "ssh.peer.address".into(),
            format!("{:?}", spec.peer.as_ref().and_then(|h| h.address)),
            "must be of the DUT's address family; a three-host ssh run does not do it (the local lab does)".into(),
        ));
    }
    Ok(())
}

/// What a three-host run (`run/hosts.rs`: an `ssh` run with three hosts,
/// or a proxmox run on its VMs) can do: one session between the DUT's and
/// the peer's addresses, stress phases, FRR's bfdd or BIRD as the peer,
/// linecardd or FRR's bfdd as the DUT. The rest needs the local lab's
/// plumbing; refused as (key, value, why).
fn three_hosts_can_run(
    peer: PeerImplementation,
    peer_rt_priority: u8,
    sessions: &Sessions,
    phases: &[PhaseSpec],
    duts: &[DutSpec],
) -> Result<(), (String, String, String)> {
    let refuse = |key: &str, value: String, why: &str| {
        Err((
            key.to_string(),
            value,
            format!("{why}; a three-host ssh run does not do it (the local lab does)"),
        ))
    };
    if sessions.count != 1 {
        return refuse(
            "sessions.count",
            sessions.count.to_string(),
            "one session between the two hosts' addresses",
        );
    }
    for (key, on) in [
        ("sessions.dual_stack", sessions.dual_stack),
        ("sessions.echo", sessions.echo),
        ("sessions.multihop", sessions.multihop),
    ] {
        if on {
            return refuse(key, "true".into(), "needs the lab's addresses and routes");
        }
    }
    if peer == PeerImplementation::Linecardd {
        return refuse(
            "peer.implementation",
            "linecardd".into(),
            "the peer is FRR's bfdd or BIRD",
        );
    }
    if peer_rt_priority > 0 {
        return refuse(
            "peer.rt_priority",
            peer_rt_priority.to_string(),
            "the peer runs at its host's own priority",
        );
    }
    if let Some((i, _)) = phases.iter().enumerate().find(|(_, p)| p.fault.is_some()) {
        return refuse(
            &format!("phase[{i}].fault"),
            "(set)".into(),
            "faults need the lab's loss program and link",
        );
    }
    for (i, d) in duts.iter().enumerate() {
        if matches!(d.implementation, DutImplementation::FrrDataplane { .. }) {
            return refuse(
                &format!("dut[{i}].implementation"),
                "frr_dataplane".into(),
                "FRR's dataplane",
            );
        }
        if d.rt_throttling != RtThrottling::Shipped {
            return refuse(
                &format!("dut[{i}].rt_throttling"),
                format!("{:?}", d.rt_throttling).to_lowercase(),
                "it changes a host-wide setting of the user's machine",
            );
        }
        if d.ksoftirqd_priority > 0 {
            return refuse(
                &format!("dut[{i}].ksoftirqd_priority"),
                d.ksoftirqd_priority.to_string(),
                "it changes a host-wide setting of the user's machine (docs/measurement.md gives the command)",
            );
        }
        if d.offload_only.is_some() || !d.per_family.is_empty() {
            return refuse(
                &format!("dut[{i}].offload_only"),
                "(set)".into(),
                "dual stack",
            );
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "scenario_tests.rs"]
mod tests;

/// A DUT's engine settings as a manifest holds them: a table, or the TOML
/// text that manifests written before the settings were typed hold.
fn engine_settings_or_text<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<EngineSettings, D::Error> {
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum Either {
        // Boxed: the settings outweigh the text tenfold.
        Settings(Box<EngineSettings>),
        Text(String),
    }
    match <Either as serde::Deserialize>::deserialize(d)? {
        Either::Settings(settings) => Ok(*settings),
        Either::Text(text) => toml::from_str(&text).map_err(serde::de::Error::custom),
    }
}
