//! The result model: what a run wrote in `manifest.json`, read back by
//! `report`, `gate`, `compare` and `tables`. It imports no runner and no
//! renderer: the runner fills it (`run/`), the exporters render it
//! (`export/`).

pub mod engine_view;
pub mod evidence;
pub mod faults;
pub mod figures;
pub mod status;
pub mod verdict;

use crate::scenario::{DutSpec, Family, ProviderKind, Scenario};
use evidence::Evidence;
use figures::PhaseFigures;
use linecard_capture_analyzer::Phase;
use serde::{Deserialize, Serialize};
use status::RunStatus;
use std::path::PathBuf;
use verdict::Verdict;

/// What ran where, with which versions: the manifest's `host`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct HostFacts {
    pub provider: ProviderKind,
    pub kernel: String,
    pub online_cpus: Vec<usize>,
    pub dut_cpus: Vec<usize>,
    /// As found before the run (a DUT with `rt_throttling = "off"` changes
    /// it for its own run only).
    pub sched_rt_runtime_us: i64,
    /// `linecard lab check`: share of frames to the DUT processed on its CPUs.
    pub placement_share_on_dut_cpus: f64,
    pub git_revision: String,
    pub linecard_version: String,
    /// First line of each tool's version output.
    pub tools: Vec<(String, String)>,
    /// The `ssh` provider's target (`user@host`) the run was driven
    /// through; `None` for a run on this machine.
    #[serde(default)]
    pub via: Option<String>,
}

/// One DUT's outcome.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DutOutcome {
    pub label: String,
    pub spec: DutSpec,
    pub verdict: Verdict,
    /// Relative to the run directory; absent when the DUT could not run.
    pub capture: Option<PathBuf>,
    pub evidence: Option<Evidence>,
    /// The phases as run (ns since the epoch) with their stress-ng lines.
    pub phases: Vec<PhaseRecord>,
    /// `sched_rt_runtime_us` during the run.
    pub sched_rt_runtime_us: Option<i64>,
    /// Earlier attempts spoiled by their environment (the peer host
    /// stalled, or the limits broke only while the hypervisor stole the
    /// DUT's CPUs), oldest first: kept, and the DUT run again, at most
    /// [`MAX_ATTEMPTS`] times in all.
    #[serde(default)]
    pub spoiled_attempts: Vec<DutOutcome>,
    /// Dual-stack: each family's sessions, figured and judged alone.
    #[serde(default)]
    pub families: Vec<FamilyOutcome>,
    /// Every program the DUT's run started: path, SHA-256, version.
    #[serde(default)]
    pub programs: Vec<crate::scenario::programs::ProgramRecord>,
    /// What decides the DUT's receive path, interface by interface, read
    /// once its sessions were Up (`crate::receive_path`).
    #[serde(default)]
    pub receive_path: Vec<crate::receive_path::InterfaceRecord>,
    /// Per phase, the engine's own view (its metrics endpoint, scraped
    /// once a second) beside the wire's; empty for a DUT without one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub engine_view: Vec<engine_view::PhaseEngineView>,
}

/// One address family's sessions in a dual-stack run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FamilyOutcome {
    pub family: Family,
    /// Answered by the engine's kernel fast path (xdp), not userspace.
    pub fast_path: bool,
    /// By the DUT's limits for this family (`[[dut]] ipv4 = {...}`), or by
    /// its limits for all sessions when it has none per family.
    pub verdict: Verdict,
    pub phases: Vec<PhaseFigures>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PhaseRecord {
    pub name: String,
    pub profile: String,
    pub start_ns: i64,
    pub end_ns: i64,
    /// The exact stress-ng command line, if the phase loads the DUT.
    pub stress_ng: Option<String>,
    /// The phase's fault as the harness applied it.
    #[serde(default)]
    pub fault: Option<crate::manifest::evidence::Applied>,
    /// What the phase cost the DUT's CPUs (`run::cpu`).
    #[serde(default)]
    pub cpu: Option<crate::manifest::evidence::CpuCost>,
    /// The same of the peer's CPUs, the observer's too, and the peer's
    /// daemon (`engine_cpu_ms`): its headroom is their idle time. The peer
    /// is the measurement's clock; a peer without headroom is the ceiling.
    #[serde(default)]
    pub peer_cpu: Option<crate::manifest::evidence::CpuCost>,
    /// Each receive-path interface's drop counters before and after the
    /// phase (`receive_path`).
    #[serde(default)]
    pub drops: Vec<crate::receive_path::InterfaceDrops>,
    /// The DUT's CPUs' softirq threads as read at the phase's end: the
    /// scenario's `ksoftirqd_priority` proven in force, or the kernel's
    /// own policy where it asked none.
    #[serde(default)]
    pub softirq_threads: Vec<crate::softirq_threads::SoftirqThread>,
}

impl PhaseRecord {
    /// The phase as the analyzer's time window.
    pub fn window(&self) -> Phase {
        Phase {
            name: self.name.clone(),
            start_ns: self.start_ns,
            end_ns: self.end_ns,
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Manifest {
    pub schema_version: u32,
    pub scenario: Scenario,
    pub run_id: String,
    pub status: RunStatus,
    pub host: HostFacts,
    pub duts: Vec<DutOutcome>,
}
