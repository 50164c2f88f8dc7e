//! Where one DUT's run happens. The phase loop (`dut.rs`) is written once
//! against [`Site`]; each place that can hold the DUT, the peer and the
//! observer implements it: the lab's namespaces on this machine
//! ([`lab::LabSite`]), three hosts over SSH (`hosts.rs`), and, in the
//! tests, a stand-in that starts nothing and writes the capture it would
//! have taken (`mock.rs`), so the runner and the judge run without root.
//!
//! **A site starts things and reads things; it never judges.** Every
//! figure still comes from the capture the site hands back
//! ([`CaptureRun::finish`]) and from the witnesses' records, judged by
//! [`super::judge_dut`] whatever the site.

pub(crate) mod lab;
#[cfg(test)]
mod mock;

use super::daemons::{Bfd, EngineView, Pair};
use crate::lab::loss::{LossCounts, LossyLink};
use crate::procs::{Capture, CaptureOutcome, Daemon};
use crate::receive_path::{Detail, InterfaceRecord};
use crate::scenario::programs::ProgramRecord;
use crate::scenario::Fault;
use crate::scenario::{DutImplementation, DutSpec, Scenario};
use anyhow::{bail, Result};
use linecard_api::BackendKind;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A process the run started (stress-ng, a witness), stopped by its PID.
pub(crate) trait Process {
    fn running(&mut self) -> bool;
    fn stop(&mut self) -> Result<()>;
}

/// The observer's capture while it runs.
pub(crate) trait CaptureRun {
    fn running(&mut self) -> bool;
    /// Stops it and brings the file here, saying whether it can be
    /// trusted (ran to the end, dropped nothing).
    fn finish(self: Box<Self>) -> Result<CaptureOutcome>;
}

/// A running BFD daemon (the DUT or the peer), asked as its operator
/// would: its own words about its sessions, never a figure of the verdict.
pub(crate) trait BfdDaemon {
    fn pid(&self) -> u32;
    /// Whether its process has ended.
    fn exited(&mut self) -> bool;
    /// `Ok` when it says `expected` sessions are Up; else what it says.
    fn sessions_up(&mut self, expected: usize) -> Result<(), String>;
    /// SIGKILL (a crash, for the faults).
    fn kill(&mut self) -> Result<()>;
    /// Stops it at once, no graceful Down (a restart fault).
    fn stop_hard(&mut self) -> Result<()>;
    fn stop(&mut self) -> Result<()>;
    /// linecardd's own view (`ctl list`); `None` for other daemons.
    fn engine_view(&self) -> Option<EngineView>;
    /// Frames the fast path handled on the DUT's CPUs, of all it handled.
    fn fast_path_frames_on(&self, dut_cpus: &[usize]) -> Option<(u64, u64)>;
    /// Which fast-path program answered, when one did.
    fn fast_path_responder(&self) -> Option<String>;
    /// FRR's control plane stayed connected to a linecardd DUT.
    fn control_plane_uninterrupted(
        &self,
        expected: usize,
        up_for_s: u64,
    ) -> Option<Result<String, String>>;
}

/// Counts of a lossy link, for a `loss` fault's phase.
pub(crate) trait FrameCounter {
    fn counts(&self) -> Result<LossCounts>;
}

/// The recorders that run beside the DUT for a whole DUT run: each is
/// `linecard NAME --seconds S --out FILE`, its record read afterwards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Recorder {
    /// Stalls of a thread on the DUT's CPUs (what the stress did to them).
    Canary,
    /// When no CPU of the DUT's could run anything (SCHED_DEADLINE).
    FreezeWitness,
    /// The same witness on the other CPUs: a freeze there at the same
    /// instants as the DUT's is the machine's, whatever runs on the DUT's.
    RestFreezeWitness,
    /// The hypervisor's steal on the DUT's CPUs; runs off them.
    StealWitness,
    /// The DUT engine's metrics endpoint, scraped once a second
    /// (`crate::scrape`); runs off the DUT's CPUs, beside the engine.
    EngineScrape,
}

impl Recorder {
    pub(crate) const ALL: [Recorder; 4] = [
        Self::Canary,
        Self::FreezeWitness,
        Self::RestFreezeWitness,
        Self::StealWitness,
    ];

    /// The recorders a DUT's run starts: the witnesses always, the
    /// scraper where the DUT is a linecardd (it serves the endpoint).
    pub(crate) fn for_dut(dut: &DutSpec) -> Vec<Recorder> {
        let mut recorders = Self::ALL.to_vec();
        if matches!(
            dut.implementation,
            DutImplementation::Linecardd { .. } | DutImplementation::FrrDataplane { .. }
        ) {
            recorders.push(Self::EngineScrape);
        }
        recorders
    }

    /// Its name (its log's: `NAME.log`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Canary => "canary",
            Self::FreezeWitness => "freeze-witness",
            Self::RestFreezeWitness => "rest-freeze-witness",
            Self::StealWitness => "steal-witness",
            Self::EngineScrape => "engine-scrape",
        }
    }

    /// Its record's file name (`canary.jsonl`, `freeze.jsonl`, ...).
    pub(crate) fn record(self) -> &'static str {
        match self {
            Self::Canary => "canary.jsonl",
            Self::FreezeWitness => "freeze.jsonl",
            Self::RestFreezeWitness => "freeze-rest.jsonl",
            Self::StealWitness => "steal.jsonl",
            Self::EngineScrape => "engine-scrape.jsonl",
        }
    }

    /// Whether it must run off the DUT's CPUs: the steal witness watches
    /// them and must not be starved by what they run.
    pub(crate) fn off_dut(self) -> bool {
        matches!(
            self,
            Self::StealWitness | Self::RestFreezeWitness | Self::EngineScrape
        )
    }

    /// The `linecard` subcommand it runs.
    fn subcommand(self) -> &'static str {
        match self {
            Self::RestFreezeWitness => Self::FreezeWitness.name(),
            _ => self.name(),
        }
    }

    /// Whether it runs in the DUT's network namespace (the lab's): the
    /// scraper reaches the engine's endpoint on its loopback.
    pub(crate) fn in_dut_namespace(self) -> bool {
        !self.off_dut() || self == Self::EngineScrape
    }

    /// What its record's absence costs the judge.
    pub(crate) fn missing(self) -> &'static str {
        match self {
            Self::Canary => "the canary's record did not come back",
            Self::FreezeWitness => {
                "the freeze witness's record did not come back (no freeze can excuse a gap)"
            }
            Self::RestFreezeWitness => {
                "the other CPUs' freeze witness's record did not come back (no freeze can excuse a gap where a successor engine starts)"
            }
            Self::StealWitness => {
                "the steal witness's record did not come back (no steal can excuse a gap)"
            }
            Self::EngineScrape => {
                "the engine's scrapes did not come back (the report has no engine view)"
            }
        }
    }

    /// Its arguments, the subcommand first.
    pub(crate) fn args(self, dut_cpus: &[usize], seconds: u64, out: &str) -> Vec<String> {
        let mut args = vec![self.subcommand().to_string()];
        if self == Self::StealWitness {
            args.extend(["--cpus".into(), crate::remote::cpu_list(dut_cpus)]);
        }
        if self == Self::EngineScrape {
            let address = crate::run::daemons::DUT_METRICS;
            args.extend(["--address".into(), address.to_string()]);
        }
        args.extend([
            "--seconds".into(),
            seconds.to_string(),
            "--out".into(),
            out.to_string(),
        ]);
        args
    }
}

/// Whose `/proc` to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    Dut,
    Peer,
}

/// One DUT attempt's directories: `local` here (logs, capture, records),
/// `name` the attempt's directory name, the same on a remote host.
pub(crate) struct DutDir {
    pub local: PathBuf,
    pub name: String,
}

/// What a site holds for the length of a DUT's run (the lab's extra
/// addresses, RT throttling set for the DUT), released on drop, and what
/// the run needs to know from it.
pub(crate) struct Prepared {
    /// The sessions' (DUT, peer) addresses.
    pub pairs: Vec<Pair>,
    /// `kernel.sched_rt_runtime_us` on the DUT as the run finds it.
    pub sched_rt_runtime_us: Option<i64>,
    pub _held: Vec<Box<dyn std::any::Any>>,
}

/// A place that runs a DUT, its peer and the observer.
pub(crate) trait Site {
    /// The CPUs the DUT runs on.
    fn dut_cpus(&self) -> &[usize];
    /// The CPUs whose steal counts against the peer.
    fn peer_cpus(&self) -> Vec<usize>;
    /// Why `backend` cannot run on the DUT here, in the words of the
    /// linecardd that would run (`linecardd backends --json`).
    fn unavailable(&self, backend: BackendKind) -> Result<Option<String>>;
    /// Readies the DUT's run (directories, addresses, settings it asks).
    fn prepare_dut(&self, scenario: &Scenario, dut: &DutSpec, dir: &DutDir) -> Result<Prepared>;
    /// Starts the observer's capture into `dir.local/capture.pcap`.
    fn start_capture(&self, dir: &DutDir) -> Result<Box<dyn CaptureRun>>;
    /// Starts the peer as configured facing `dut` (its own timers, if any).
    fn start_peer(
        &self,
        scenario: &Scenario,
        dut: &DutSpec,
        pairs: &[Pair],
        dir: &DutDir,
    ) -> Result<Box<dyn BfdDaemon>>;
    fn start_dut(
        &self,
        scenario: &Scenario,
        dut: &DutSpec,
        pairs: &[Pair],
        dir: &DutDir,
    ) -> Result<Box<dyn BfdDaemon>>;
    fn start_recorder(
        &self,
        recorder: Recorder,
        seconds: u64,
        dir: &DutDir,
    ) -> Result<Box<dyn Process>>;
    /// Brings a stopped recorder's record here; its path here.
    fn fetch_record(&self, recorder: Recorder, dir: &DutDir) -> Result<PathBuf>;
    /// One stress-ng process of phase `phase` on the DUT's CPUs.
    fn start_stress(
        &self,
        name: &str,
        args: &[String],
        dir: &DutDir,
        log: &Path,
    ) -> Result<Box<dyn Process>>;
    /// `/proc/stat` of the role's host, and `/proc/PID/stat` if `pid`
    /// still runs.
    fn proc_stat(&self, role: Role, pid: Option<u32>) -> (String, Option<String>);

    /// The times the harness could not reach a host of the site since the
    /// last call (a site over SSH); a local site has none.
    fn connection_outages(&self) -> Vec<crate::manifest::evidence::ConnectionOutage> {
        Vec::new()
    }
    /// A lossy link on the peer's side (a `loss` fault).
    fn lossy_link(&self, _percent: f64, _seed: u64) -> Result<Box<dyn FrameCounter>> {
        bail!("faults run only in the local lab (the scenario is refused elsewhere)")
    }
    /// Each interface of the DUT's receive path read at `detail`
    /// (`crate::receive_path`); none where the site has no interface to
    /// read (the tests' stand-in).
    fn receive_path(&self, _detail: Detail) -> Vec<InterfaceRecord> {
        Vec::new()
    }
    /// The DUT's CPUs' softirq threads as they run now
    /// (`crate::softirq_threads`); none where the site cannot read them.
    fn softirq_threads(&self) -> Vec<crate::softirq_threads::SoftirqThread> {
        Vec::new()
    }
    /// The file a process of this run executes (`/proc/PID/exe`), where
    /// the site can tell.
    fn exe(&self, _pid: u32) -> Option<PathBuf> {
        None
    }
    /// Every program this DUT's run starts, described for the manifest
    /// (path, SHA-256, version); none where the site cannot say.
    fn programs(&self, _scenario: &Scenario, _dut: &DutSpec) -> Result<Vec<ProgramRecord>> {
        Ok(Vec::new())
    }
    /// Acts out a fault (everything but `loss`) on the daemons it may
    /// kill, stop or start again.
    fn act(
        &self,
        _fault: &FaultAct,
        _peer: &mut Box<dyn BfdDaemon>,
        _dut: &mut Box<dyn BfdDaemon>,
    ) -> Result<crate::manifest::evidence::Applied> {
        bail!("faults run only in the local lab (the scenario is refused elsewhere)")
    }
}

/// One fault to act out, and where.
pub(crate) struct FaultAct<'a> {
    pub scenario: &'a Scenario,
    pub dut_spec: &'a DutSpec,
    pub fault: &'a Fault,
    pub phase: usize,
    pub pairs: &'a [Pair],
    pub dir: &'a DutDir,
    /// Twice the detection time, 100 ms at least: a killed daemon stays
    /// dead that long, so the other side's Down is a timeout.
    pub dead_for: Duration,
}

impl Process for Daemon {
    fn running(&mut self) -> bool {
        Daemon::running(self)
    }

    fn stop(&mut self) -> Result<()> {
        Daemon::stop(self).map(drop)
    }
}

impl CaptureRun for Capture {
    fn running(&mut self) -> bool {
        Capture::running(self)
    }

    fn finish(self: Box<Self>) -> Result<CaptureOutcome> {
        self.finish_checked()
    }
}

impl FrameCounter for LossyLink {
    fn counts(&self) -> Result<LossCounts> {
        LossyLink::counts(self)
    }
}

impl BfdDaemon for Bfd {
    fn pid(&self) -> u32 {
        self.daemon.pid()
    }

    fn exited(&mut self) -> bool {
        Bfd::exited(self)
    }

    fn sessions_up(&mut self, expected: usize) -> Result<(), String> {
        Bfd::sessions_up(self, expected)
    }

    fn kill(&mut self) -> Result<()> {
        self.daemon.kill().map(drop)
    }

    fn stop_hard(&mut self) -> Result<()> {
        Bfd::stop_hard(self)
    }

    fn stop(&mut self) -> Result<()> {
        Bfd::stop(self)
    }

    fn engine_view(&self) -> Option<EngineView> {
        Bfd::engine_view(self)
    }

    fn fast_path_frames_on(&self, dut_cpus: &[usize]) -> Option<(u64, u64)> {
        Bfd::fast_path_frames_on(self, dut_cpus)
    }

    fn fast_path_responder(&self) -> Option<String> {
        Bfd::fast_path_responder(self)
    }

    fn control_plane_uninterrupted(
        &self,
        expected: usize,
        up_for_s: u64,
    ) -> Option<Result<String, String>> {
        Bfd::control_plane_uninterrupted(self, expected, up_for_s)
    }
}
