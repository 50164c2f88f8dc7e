//! `linecard run SCENARIO`: brings the lab up, runs every DUT of the
//! scenario through its phases against the peer with a capture on the
//! observer, analyses the captures, judges each DUT, and writes a
//! self-describing results directory:
//!
//! ```text
//! results/<scenario>/<run-id>/
//!   manifest.json        scenario, versions, kernel, CPUs, every phase's
//!                        start/end and stress-ng command line, verdicts
//!   summary.md           the table, with every figure's capture named
//!   status               complete | failed: <why> | invalid: <why>
//!   <dut>/capture.pcap   the observer's capture (kept whatever happens)
//!   <dut>/analysis/      analysis.json, flows.csv, packets.parquet, ...
//!   <dut>/*.log          daemon, stress and canary output
//! ```

mod actions;
use actions::{act, restart_suffix};
pub mod cpu;
pub mod daemons;
pub mod faults;
mod figures;
pub mod hosts;
pub mod impostor;
pub mod judge;
pub mod mirror;
pub mod provider;
pub mod proxmox;
mod readiness;
pub mod space;
pub mod ssh;
pub mod summary;
pub use summary::summary_markdown;

use crate::lab::spec;
use crate::procs::{Capture, Daemon};
use crate::rt_throttle;
use crate::scenario::{DutImplementation, DutSpec, Family, PhaseSpec, ProviderKind, Scenario};
use anyhow::{Context, Result};
use judge::{Evidence, PhaseFigures, Verdict};
use linecard_capture_analyzer::{Options, Phase};
use serde::{Deserialize, Serialize};
use std::io::IsTerminal;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Set by SIGINT/SIGTERM: the run stops at the next check, tears down and
/// keeps what it has, marked failed.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

pub struct RunOptions {
    /// `results/` by default.
    pub results: PathBuf,
    /// Only the DUTs with these labels (all when empty).
    pub only: Vec<String>,
    /// The stress profiles' directory (copied to an `ssh` host).
    pub profiles: PathBuf,
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

impl DutOutcome {
    /// Whether its environment spoiled the run (`judge::spoiled`), for
    /// the DUT's sessions as a whole or any family's judged alone.
    fn spoiled(&self) -> bool {
        let Some(e) = &self.evidence else {
            return false;
        };
        if self.spec.per_family.is_empty() {
            return judge::spoiled(&self.spec.expect, e);
        }
        self.families.iter().any(|f| {
            judge::spoiled(
                &self.spec.expect_for(f.family),
                &e.with_phases(f.phases.clone()),
            )
        })
    }
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
    pub fault: Option<faults::Applied>,
    /// What the phase cost the DUT's CPUs (`run::cpu`).
    #[serde(default)]
    pub cpu: Option<cpu::CpuCost>,
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
    pub status: String,
    pub host: provider::HostFacts,
    pub duts: Vec<DutOutcome>,
}

pub struct RunResult {
    pub dir: PathBuf,
    pub manifest: Manifest,
}

impl RunResult {
    /// 0 when every DUT passed or was unavailable; 1 otherwise.
    pub fn exit_code(&self) -> i32 {
        i32::from(self.manifest.status != "complete")
    }
}

use crate::sys::unix_ns;

/// `20261130T092313Z`: UTC, sortable, one per second.
pub fn run_id(unix_s: i64) -> String {
    let days = unix_s.div_euclid(86_400);
    let secs = unix_s.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

/// A label as a directory name.
fn slug(label: &str) -> String {
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

/// Progress on stderr: a rewritten line on a terminal, a line every 10 s
/// otherwise.
struct Progress {
    tty: bool,
    last: Instant,
}

impl Progress {
    fn new() -> Self {
        Self {
            tty: std::io::stderr().is_terminal(),
            last: Instant::now() - Duration::from_secs(60),
        }
    }

    fn tick(&mut self, dut: &str, phase: &str, elapsed: u64, total: u64) {
        if self.tty {
            let width = 30;
            let done = (elapsed * width / total.max(1)).min(width) as usize;
            eprint!(
                "\r  {dut:<30} {phase:<6} [{}{}] {elapsed:>4}/{total} s",
                "#".repeat(done),
                " ".repeat(width as usize - done)
            );
        } else if self.last.elapsed() >= Duration::from_secs(10) {
            eprintln!("  {dut}: {phase} {elapsed}/{total} s");
            self.last = Instant::now();
        }
    }

    fn done(&self) {
        if self.tty {
            eprintln!();
        }
    }
}

extern "C" fn on_interrupt(_: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    INTERRUPTED.store(true, Ordering::Relaxed);
}

/// SIGINT and SIGTERM stop the run at its next check; it then tears down
/// and keeps what it has, marked failed.
pub fn install_interrupt_handler() {
    let handler = on_interrupt as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
    }
}

/// What `run` would do, for `linecard run --check`.
pub fn plan(scenario: &Scenario) -> String {
    let total = scenario.sessions.total();
    let mut out = format!(
        "{}: {}\nprovider {:?}, peer {:?}, {total} session{} {} x {} ms ({})\n",
        scenario.name,
        scenario.description,
        scenario.provider,
        scenario.peer,
        if total == 1 { "" } else { "s" },
        scenario.sessions.multiplier,
        scenario.sessions.tx_interval_ms,
        scenario.sessions.family_name()
    );
    if let Some(auth) = &scenario.sessions.auth {
        out.push_str(&format!(
            "authentication: {}, Key ID {} (secret of {} bytes)\n",
            auth.kind,
            auth.key_id,
            auth.secret.len()
        ));
    }
    if let Some(ssh) = &scenario.ssh {
        match (&ssh.target, &ssh.dut, &ssh.peer, &ssh.observer) {
            (Some(target), ..) => out.push_str(&format!(
                "host: {target} runs the local lab (staged in {})\n",
                ssh.remote_dir
            )),
            (None, Some(dut), Some(peer), Some(observer)) => out.push_str(&format!(
                "hosts: DUT {} ({}, CPUs {:?}), peer {} ({}), observer {} (captures on {})\n",
                dut.target,
                dut.interface,
                dut.cpus,
                peer.target,
                peer.interface,
                observer.target,
                observer.interface
            )),
            _ => {}
        }
    }
    out.push_str("phases (per DUT; counts for one DUT CPU):\n");
    for p in &scenario.phases {
        let cmd = if p.profile.is_idle() {
            "no load".to_string()
        } else {
            stress_ng_line(&p.profile.stress_ng_processes(1, p.seconds))
        };
        let fault = p
            .fault
            .as_ref()
            .map_or(String::new(), |f| format!("; fault: {}", f.describe()));
        out.push_str(&format!(
            "  {:<6} {:>5} s  {cmd}{fault}\n",
            p.profile.name, p.seconds
        ));
    }
    out.push_str("DUTs:\n");
    for d in &scenario.duts {
        let what = match &d.implementation {
            DutImplementation::Frr => "FRR bfdd".to_string(),
            DutImplementation::Linecardd { backend } => format!("linecardd, backend {backend}"),
            DutImplementation::FrrDataplane { backend } => {
                format!("FRR bfdd driving linecardd (dataplane protocol), backend {backend}")
            }
        };
        let describe = |expect: &crate::scenario::Expectation| {
            if expect.positive_control {
                return "positive control: must flap".to_string();
            }
            let mut e = Vec::new();
            if let Some(n) = expect.max_flaps {
                e.push(format!("flaps <= {n}"));
            }
            if let Some(ms) = expect.max_gap_ms {
                e.push(format!("max gap <= {ms} ms"));
            }
            match expect.peer_echo {
                Some(crate::scenario::PeerEcho::Reflected) => {
                    e.push("the peer's echoes all reflected".into())
                }
                Some(crate::scenario::PeerEcho::Absent) => e.push("no echo from the peer".into()),
                None => {}
            }
            if expect.own_echo {
                e.push("own echoes all back".into());
            }
            if let Some(auth) = expect.auth {
                e.push(format!(
                    "every packet of both sides with Auth Type {}, Key ID {}{}",
                    auth.auth_type,
                    auth.key_id,
                    if auth.meticulous {
                        ", sequence +1 each"
                    } else {
                        ""
                    }
                ));
            }
            if let Some(asker) = expect.demand {
                e.push(format!(
                    "Demand mode asked by {}: D, the other side silent, Polls answered",
                    match asker {
                        crate::scenario::DemandAsker::Dut => "the DUT",
                        crate::scenario::DemandAsker::Peer => "the peer",
                        crate::scenario::DemandAsker::Both => "both sides",
                    }
                ));
            }
            if e.is_empty() {
                "measured only".into()
            } else {
                e.join(", ")
            }
        };
        let expect = if d.per_family.is_empty() {
            describe(&d.expect)
        } else {
            Family::BOTH
                .iter()
                .map(|&f| format!("{}: {}", f.name(), describe(&d.expect_for(f))))
                .collect::<Vec<_>>()
                .join("; ")
        };
        let offload = match d.offload_only {
            Some(f) => format!("; only {} on the kernel's fast path", f.name()),
            None => String::new(),
        };
        out.push_str(&format!(
            "  {:<30} {what}{offload}; RT throttling {:?}; {expect}\n",
            d.label, d.rt_throttling
        ));
    }
    out
}

pub fn run(scenario: &Scenario, options: &RunOptions) -> Result<RunResult> {
    if let Some(spec) = &scenario.ssh {
        return if spec.target.is_some() {
            ssh::run(scenario, spec, options)
        } else {
            hosts::run(scenario, spec, options)
        };
    }
    space::check(scenario, options)?;
    check_socket_paths(scenario, options)?;
    let provider = provider::for_scenario(scenario);
    let host = provider.prepare().context("preparing the lab")?;
    let result = run_prepared(scenario, options, host, &|dut, run_dir, host, name| {
        run_dut(scenario, dut, run_dir, host, name)
    });
    // Torn down whatever happened; a teardown failure is reported, and the
    // run's own error (if any) wins.
    let teardown = provider.teardown();
    let result = result?;
    teardown.context("tearing the lab down")?;
    Ok(result)
}

/// How many times a DUT runs at most when its environment spoils it: an
/// excused run is repeated once, and a second excused run stays `invalid`
/// (inconclusive: nothing was measured), never a pass. More repeats would
/// let a flaky DUT through (a 50 % flake passes three tries 87.5 % of the
/// time).
pub const MAX_ATTEMPTS: usize = 2;

/// The directory of a DUT's attempt `n` (1-based; short: the daemons' unix
/// sockets live under it).
fn attempt_dir(label: &str, n: usize) -> String {
    if n <= 1 {
        slug(label)
    } else {
        format!("{}-{n}", slug(label))
    }
}

/// Refuses, before anything starts, a results directory so deep that a
/// daemon's unix socket in it would not fit `sun_path`.
fn check_socket_paths(scenario: &Scenario, options: &RunOptions) -> Result<()> {
    // Every run id has this length.
    let run_dir = options
        .results
        .join(&scenario.name)
        .join("YYYYMMDDTHHMMSSZ");
    // The longest restarted daemon's directory suffix (`restarted_dir`).
    let last_restart = scenario
        .phases
        .iter()
        .enumerate()
        .filter_map(|(i, p)| match p.fault {
            Some(faults::Fault::PeerRestart { times }) => Some(restart_suffix(i, times - 1)),
            Some(faults::Fault::EngineRestart | faults::Fault::Impostor) => {
                Some(restart_suffix(i, 0))
            }
            _ => None,
        })
        .max_by_key(String::len);
    let deepest = scenario
        .duts
        .iter()
        .flat_map(|dut| {
            let dut_dir = run_dir.join(attempt_dir(&dut.label, MAX_ATTEMPTS));
            daemons::socket_paths(scenario.peer, &dut.implementation, last_restart.clone())
                .into_iter()
                .map(move |socket| dut_dir.join(socket))
        })
        .max_by_key(|path| path.as_os_str().len());
    match deepest {
        Some(path) if path.as_os_str().len() > daemons::SOCKET_PATH_MAX => anyhow::bail!(
            "the results directory {} is too deep for this run's unix sockets: {} would be {} \
             bytes, and a socket's path holds at most {}; pass a shorter --results (or use \
             shorter DUT labels). Nothing was started.",
            options.results.display(),
            path.display(),
            path.as_os_str().len(),
            daemons::SOCKET_PATH_MAX
        ),
        _ => Ok(()),
    }
}

/// One attempt at one DUT: its spec, the run's directory, the host's
/// facts and the attempt's directory name.
type RunOne<'a> = dyn Fn(&DutSpec, &Path, &provider::HostFacts, &str) -> Result<DutOutcome> + 'a;

/// Runs each DUT of `scenario` with `run_one` (again, up to
/// [`MAX_ATTEMPTS`], when its environment spoiled it), recording each in
/// the run's manifest as it ends.
fn run_prepared(
    scenario: &Scenario,
    options: &RunOptions,
    host: provider::HostFacts,
    run_one: &RunOne,
) -> Result<RunResult> {
    let started = unix_ns();
    let run_id = run_id(started / 1_000_000_000);
    let dir = options.results.join(&scenario.name).join(&run_id);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    if let Err(e) = space::lay_ballast(&dir) {
        // Nothing ran: leave nothing behind.
        let _ = std::fs::remove_dir_all(&dir);
        return Err(e);
    }
    let mut manifest = Manifest {
        schema_version: 1,
        scenario: scenario.clone(),
        run_id,
        status: "running".into(),
        host,
        duts: Vec::new(),
    };
    write_manifest(&dir, &manifest)?;
    // Set when the results disk filled: no further DUT runs, and the
    // ballast makes room for the verdict.
    let mut disk_full: Option<String> = None;
    eprintln!(
        "linecard run {}: {} DUT(s), {} s of phases each; results in {}",
        scenario.name,
        scenario.duts.len(),
        scenario.seconds_per_dut(),
        dir.display()
    );
    for dut in &scenario.duts {
        if !options.only.is_empty() && !options.only.contains(&dut.label) {
            continue;
        }
        if INTERRUPTED.load(Ordering::Relaxed) || disk_full.is_some() {
            break;
        }
        let (mut outcome, full) = attempt(
            run_one,
            dut,
            &dir,
            &manifest.host,
            &attempt_dir(&dut.label, 1),
        );
        disk_full = disk_full.or(full);
        let mut spoiled = Vec::new();
        while outcome.spoiled()
            && spoiled.len() + 1 < MAX_ATTEMPTS
            && !INTERRUPTED.load(Ordering::Relaxed)
            && disk_full.is_none()
        {
            eprintln!(
                "  {:<30} {} (attempt {} of at most {MAX_ATTEMPTS}; running it again)",
                outcome.label,
                outcome.verdict.describe(),
                spoiled.len() + 1
            );
            let n = spoiled.len() + 2;
            let (next, full) = attempt(
                run_one,
                dut,
                &dir,
                &manifest.host,
                &attempt_dir(&dut.label, n),
            );
            disk_full = disk_full.or(full);
            spoiled.push(std::mem::replace(&mut outcome, next));
        }
        outcome.spoiled_attempts = spoiled;
        eprintln!("  {:<30} {}", outcome.label, outcome.verdict.describe());
        manifest.duts.push(outcome);
        if let Err(e) = write_manifest(&dir, &manifest) {
            if !space::is_disk_full(&e) {
                return Err(e);
            }
            disk_full = disk_full.or(Some(format!("{e:#}")));
        }
    }
    space::drop_ballast(&dir);
    manifest.status = match &disk_full {
        Some(why) => format!(
            "failed: the results disk filled ({why}); what was written is kept, earlier runs untouched"
        ),
        None => overall_status(&manifest.duts),
    };
    finish(dir, manifest)
}

/// Writes a run's final records (manifest, status, summary) into `dir`.
fn finish(dir: PathBuf, manifest: Manifest) -> Result<RunResult> {
    write_manifest(&dir, &manifest)?;
    std::fs::write(dir.join("status"), format!("{}\n", manifest.status))?;
    std::fs::write(dir.join("summary.md"), summary_markdown(&manifest))?;
    Ok(RunResult { dir, manifest })
}

/// One attempt at a DUT; a DUT that could not be run at all (a daemon that
/// would not start, a port in use) fails with the reason. The second value
/// says why, when the reason was a full results disk.
fn attempt(
    run_one: &RunOne,
    dut: &DutSpec,
    run_dir: &Path,
    host: &provider::HostFacts,
    dir_name: &str,
) -> (DutOutcome, Option<String>) {
    match run_one(dut, run_dir, host, dir_name) {
        Ok(outcome) => (outcome, None),
        Err(e) => {
            let why = format!("{e:#}");
            let full = space::is_disk_full(&e).then(|| why.clone());
            let outcome = DutOutcome {
                label: dut.label.clone(),
                spec: dut.clone(),
                verdict: Verdict::Fail(why),
                // A capture stopped by the full disk is kept: it is what
                // was measured before.
                capture: Some(PathBuf::from(dir_name).join("capture.pcap"))
                    .filter(|c| run_dir.join(c).exists()),
                evidence: None,
                phases: Vec::new(),
                // This machine's, when the DUT ran here.
                sched_rt_runtime_us: (host.provider == ProviderKind::Local)
                    .then(|| rt_throttle::read().ok())
                    .flatten(),
                spoiled_attempts: Vec::new(),
                families: Vec::new(),
            };
            (outcome, full)
        }
    }
}

/// `complete` only when no DUT failed or was invalid, and nothing was
/// interrupted.
fn overall_status(duts: &[DutOutcome]) -> String {
    if INTERRUPTED.load(Ordering::Relaxed) {
        return "failed: interrupted (partial results kept)".into();
    }
    if let Some(d) = duts
        .iter()
        .find(|d| matches!(d.verdict, Verdict::Invalid(_)))
    {
        return format!("invalid: {}: {}", d.label, d.verdict.describe());
    }
    if let Some(d) = duts.iter().find(|d| matches!(d.verdict, Verdict::Fail(_))) {
        return format!("failed: {}: {}", d.label, d.verdict.describe());
    }
    "complete".into()
}

fn write_manifest(dir: &Path, manifest: &Manifest) -> Result<()> {
    let tmp = dir.join(".manifest.json.tmp");
    std::fs::write(&tmp, serde_json::to_string_pretty(manifest)?)
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, dir.join("manifest.json"))?;
    Ok(())
}

/// Runs one DUT through every phase.
fn run_dut(
    scenario: &Scenario,
    dut: &DutSpec,
    run_dir: &Path,
    host: &provider::HostFacts,
    name: &str,
) -> Result<DutOutcome> {
    let dir = run_dir.join(name);
    std::fs::create_dir_all(&dir)?;
    let mut outcome = DutOutcome {
        label: dut.label.clone(),
        spec: dut.clone(),
        verdict: Verdict::Pass,
        capture: None,
        evidence: None,
        phases: Vec::new(),
        sched_rt_runtime_us: None,
        spoiled_attempts: Vec::new(),
        families: Vec::new(),
    };
    if let DutImplementation::Linecardd { backend } | DutImplementation::FrrDataplane { backend } =
        &dut.implementation
    {
        if let Some(reason) = crate::backends::Backends::local()?.unavailable(backend) {
            outcome.verdict = Verdict::Unavailable(reason);
            return Ok(outcome);
        }
    }
    // Restored on drop, also when this function fails half-way.
    let _throttling = dut
        .rt_throttling
        .runtime_us()
        .map(rt_throttle::RuntimeOverride::set)
        .transpose()?;
    outcome.sched_rt_runtime_us = rt_throttle::read().ok();
    let rest = spec::cpuset_dir(spec::REST_CPUSET);
    let dut_cpuset = spec::cpuset_dir(spec::DUT_CPUSET);
    // The capture starts first: bring-up is on it too.
    let capture_path = dir.join("capture.pcap");
    let mut capture = Capture::start(
        spec::OBSERVER_NS,
        spec::DUT.bridge_port,
        &capture_path,
        Some(&rest),
    )?;
    outcome.capture = Some(PathBuf::from(name).join("capture.pcap"));
    let pairs = daemons::pairs(&scenario.sessions);
    let _addresses = daemons::ExtraAddresses::add(&pairs)?;
    // The peer as configured facing this DUT (its own timers, if any).
    let peer_sessions = dut.peer_sessions(&scenario.sessions);
    let mut peer = daemons::start_peer(
        scenario.peer,
        scenario.peer_rt_priority,
        &peer_sessions,
        &pairs,
        &dir,
    )?;
    let mut dut_daemon = daemons::start_dut(dut, &scenario.sessions, &pairs, &dir, &host.dut_cpus)?;
    // Readiness in both daemons' own words, bounded, never a fixed sleep.
    let up = readiness::wait_up(
        &mut dut_daemon,
        &mut peer,
        pairs.len(),
        readiness::ready_within(pairs.len()),
    );
    let up_at = unix_ns();
    let total: u64 = scenario.seconds_per_dut();
    let canary_out = dir.join("canary.jsonl");
    let mut canary = spawn_recorder(
        "canary",
        spec::DUT.namespace,
        &dut_cpuset,
        &[],
        total + 2,
        &canary_out,
        &dir,
    )?;
    // The freeze witness, on the DUT's CPUs at SCHED_DEADLINE (nothing the
    // stress starts can delay it; only the machine standing still can).
    let freeze_out = dir.join("freeze.jsonl");
    let mut freeze_witness = spawn_recorder(
        "freeze-witness",
        spec::DUT.namespace,
        &dut_cpuset,
        &[],
        total + 2,
        &freeze_out,
        &dir,
    )?;
    // The steal witness, off the DUT's CPUs (the stress must not starve it).
    let steal_out = dir.join("steal.jsonl");
    let mut steal_witness = spawn_recorder(
        "steal-witness",
        spec::OBSERVER_NS,
        &rest,
        &["--cpus".into(), ssh::cpu_list(&host.dut_cpus)],
        total + 2,
        &steal_out,
        &dir,
    )?;
    let rest_cpus: Vec<usize> = host
        .online_cpus
        .iter()
        .copied()
        .filter(|c| !host.dut_cpus.contains(c))
        .collect();
    let steal_before = cpu::steal_ms(&host.dut_cpus);
    let peer_steal_before = cpu::steal_ms(&rest_cpus);
    let mut progress = Progress::new();
    let mut capture_alive = true;
    if up.is_ok() {
        for (i, phase) in scenario.phases.iter().enumerate() {
            if phase.fault.is_some() {
                // A fault needs sessions to break: the previous phase's
                // fault may still be recovering.
                let _ = readiness::wait_up(
                    &mut dut_daemon,
                    &mut peer,
                    pairs.len(),
                    Duration::from_secs(10),
                );
            }
            let loss = match &phase.fault {
                Some(faults::Fault::Loss { percent, seed }) => {
                    let link =
                        crate::lab::loss::LossyLink::attach(&spec::PEER, percent / 100.0, *seed)?;
                    let before = link.counts()?;
                    Some((link, before))
                }
                _ => None,
            };
            let mut applied = phase.fault.as_ref().map(|_| faults::Applied::default());
            let mut acted = !matches!(
                phase.fault,
                Some(
                    faults::Fault::LinkFlap { .. }
                        | faults::Fault::PeerRestart { .. }
                        | faults::Fault::PeerStall { .. }
                        | faults::Fault::EngineStop { .. }
                        | faults::Fault::EngineRestart
                        | faults::Fault::Impostor
                        | faults::Fault::Flood { .. }
                )
            );
            let start_ns = unix_ns();
            let started = Instant::now();
            let cpu_before = cpu::sample(dut_daemon.daemon.pid(), &host.dut_cpus);
            let processes = phase
                .profile
                .stress_ng_processes(host.dut_cpus.len(), phase.seconds);
            let mut stress = Vec::new();
            for (k, args) in processes.iter().enumerate() {
                stress.push(Daemon::spawn(
                    "stress-ng",
                    spec::DUT.namespace,
                    Some(&dut_cpuset),
                    "stress-ng",
                    args,
                    &dir.join(format!("stress-{i}-{}-{k}.log", phase.profile.name)),
                )?);
            }
            loop {
                let elapsed = started.elapsed();
                if phase_over(&mut stress, started, phase.seconds) {
                    break;
                }
                if !acted && elapsed >= faults::LEAD_IN {
                    acted = true;
                    let restart = |kill: u64| {
                        let dir = dir.join(format!("peer-{}", restart_suffix(i, kill)));
                        std::fs::create_dir_all(&dir)?;
                        daemons::start_peer(
                            scenario.peer,
                            scenario.peer_rt_priority,
                            &peer_sessions,
                            &pairs,
                            &dir,
                        )
                        .context("starting the peer again")
                    };
                    let restart_dut = || {
                        let dir = dir.join(restart_suffix(i, 0));
                        std::fs::create_dir_all(&dir)?;
                        daemons::start_dut(dut, &scenario.sessions, &pairs, &dir, &host.dut_cpus)
                            .context("starting the DUT again")
                    };
                    let fault = phase.fault.as_ref().expect("acted only on a fault");
                    // Twice the detection time, 100 ms at least.
                    let s = &scenario.sessions;
                    let dead_for = Duration::from_millis(
                        (2 * u64::from(s.multiplier)
                            * u64::from(s.tx_interval_ms.max(s.rx_interval_ms)))
                        .max(100),
                    );
                    let done = act(
                        fault,
                        scenario.sessions.auth.as_ref(),
                        dead_for,
                        &mut peer,
                        &mut dut_daemon,
                        &restart,
                        &restart_dut,
                    )?;
                    if let Some(a) = applied.as_mut() {
                        (a.start_ns, a.end_ns, a.flood) = (done.start_ns, done.end_ns, done.flood);
                    }
                }
                capture_alive &= capture.running();
                if !capture_alive {
                    // Failed already (the capture stopped early): no
                    // point loading the DUT for the rest of the phase.
                    break;
                }
                progress.tick(
                    &dut.label,
                    &phase.profile.name,
                    elapsed.as_secs(),
                    phase.seconds,
                );
                std::thread::sleep(Duration::from_millis(100));
            }
            for mut s in stress {
                s.stop()?;
            }
            let end_ns = unix_ns();
            let cpu_cost = cpu::cost(
                &cpu_before,
                &cpu::sample(dut_daemon.daemon.pid(), &host.dut_cpus),
                (end_ns - start_ns) as f64 / 1e9,
            );
            if let (Some((link, before)), Some(a)) = (loss, applied.as_mut()) {
                let after = link.counts()?;
                a.start_ns = start_ns;
                a.end_ns = end_ns;
                a.frames_seen = Some(after.seen - before.seen);
                a.frames_dropped = Some(after.dropped - before.dropped);
            }
            outcome.phases.push(PhaseRecord {
                name: format!("{}#{i}", phase.profile.name),
                profile: phase.profile.name.clone(),
                start_ns,
                end_ns,
                stress_ng: (!processes.is_empty()).then(|| stress_ng_line(&processes)),
                fault: applied,
                cpu: Some(cpu_cost),
            });
            if INTERRUPTED.load(Ordering::Relaxed) || !capture_alive {
                break;
            }
        }
        progress.done();
    }
    let steal_ms = cpu::steal_ms(&host.dut_cpus) - steal_before;
    let peer_steal_ms = cpu::steal_ms(&rest_cpus) - peer_steal_before;
    let fast_path_on_dut_cpus = dut_daemon.fast_path_frames_on(&host.dut_cpus);
    let responder = dut_daemon.fast_path_responder();
    let control_plane_uninterrupted = dut_daemon
        .control_plane_uninterrupted(pairs.len(), ((unix_ns() - up_at) / 1_000_000_000) as u64);
    // The engine's own view at the end, kept beside the capture to compare
    // with it; never a figure of the verdict.
    if let Some(view) = dut_daemon.engine_view() {
        std::fs::write(dir.join("engine-view.json"), format!("{view:#}\n"))?;
    }
    dut_daemon.stop()?;
    peer.stop()?;
    canary.stop()?;
    freeze_witness.stop()?;
    steal_witness.stop()?;
    let captured = capture.finish_checked()?;
    let measured = Measured {
        stalls: crate::canary::read(&canary_out).unwrap_or_default(),
        freezes: crate::canary::read(&freeze_out).unwrap_or_default(),
        steal: crate::steal::StealTrace::read(&steal_out),
        pairs,
        captured,
        capture_alive,
        up,
        up_at,
        steal_ms,
        peer_steal_ms,
        fast_path_on_dut_cpus,
        responder,
        control_plane_uninterrupted,
    };
    judge_dut(scenario, dut, &mut outcome, measured)?;
    Ok(outcome)
}

/// Starts one of this binary's own recorders (`linecard NAME [EXTRA]
/// --seconds S --out OUT`: the canary, the freeze and steal witnesses) in
/// `namespace` and `cpuset`, its log beside its record in `dir`.
pub(crate) fn spawn_recorder(
    name: &str,
    namespace: &str,
    cpuset: &Path,
    extra: &[String],
    seconds: u64,
    out: &Path,
    dir: &Path,
) -> Result<Daemon> {
    let mut args = vec![name.to_string()];
    args.extend_from_slice(extra);
    args.extend([
        "--seconds".into(),
        seconds.to_string(),
        "--out".into(),
        out.display().to_string(),
    ]);
    Daemon::spawn(
        name,
        namespace,
        Some(cpuset),
        std::env::current_exe()?
            .to_str()
            .context("non-UTF-8 path")?,
        &args,
        &dir.join(format!("{name}.log")),
    )
}

/// What a DUT's run measured, for [`judge_dut`]: the capture, and the
/// evidence taken beside it outside the engine.
pub(crate) struct Measured {
    pub pairs: Vec<daemons::Pair>,
    pub captured: crate::procs::CaptureOutcome,
    /// The capture ran to the end of the phases.
    pub capture_alive: bool,
    /// The canary's stalls on the DUT's CPUs.
    pub stalls: Vec<crate::canary::Stall>,
    /// When no CPU of the DUT's could run anything (the freeze witness).
    pub freezes: Vec<crate::canary::Stall>,
    /// The hypervisor's steal on the DUT's CPUs, placed in time.
    pub steal: crate::steal::StealTrace,
    /// Every session Up in both daemons' own words before the phases.
    pub up: Result<(), String>,
    pub up_at: i64,
    pub steal_ms: f64,
    pub peer_steal_ms: f64,
    pub fast_path_on_dut_cpus: Option<(u64, u64)>,
    pub responder: Option<String>,
    pub control_plane_uninterrupted: Option<Result<String, String>>,
}

/// Analyses a DUT's capture (every phase sliced out of it) and gives
/// `outcome` its evidence and verdict; the phases are `outcome.phases`.
pub(crate) fn judge_dut(
    scenario: &Scenario,
    dut: &DutSpec,
    outcome: &mut DutOutcome,
    measured: Measured,
) -> Result<()> {
    let Measured {
        pairs,
        captured,
        capture_alive,
        stalls,
        freezes,
        steal,
        up,
        up_at,
        steal_ms,
        peer_steal_ms,
        fast_path_on_dut_cpus,
        responder,
        control_plane_uninterrupted,
    } = measured;
    let dir = captured
        .path
        .parent()
        .context("the capture is in the DUT's directory")?
        .to_path_buf();
    // Analysis: every phase sliced out of the one capture.
    let phases: Vec<Phase> = outcome.phases.iter().map(PhaseRecord::window).collect();
    let analysis = crate::analyze::run(
        std::slice::from_ref(&captured.path),
        &Options {
            phases,
            timeline: false,
        },
        Some(&dir.join("analysis")),
    )?;
    let dut_addrs: Vec<String> = pairs.iter().map(|p| p.dut.to_string()).collect();
    let peer_addrs: Vec<String> = pairs.iter().map(|p| p.peer.to_string()).collect();
    let s = &scenario.sessions;
    let interval_ms = f64::from(s.tx_interval_ms.max(s.rx_interval_ms));
    let detection_ms = f64::from(s.multiplier) * interval_ms;
    let up_before_phases = readiness::on_the_wire(
        up,
        &analysis.all.flows,
        (&dut_addrs, &peer_addrs),
        outcome
            .phases
            .first()
            .map_or(i64::MAX, |p| p.start_ns)
            .min(up_at),
        pairs.len(),
        detection_ms,
    );
    let phase_figures = |pairs: &[daemons::Pair]| -> Vec<PhaseFigures> {
        outcome
            .phases
            .iter()
            .zip(&analysis.phases)
            .zip(&scenario.phases)
            .map(|((record, result), phase)| {
                figures::figures_of(record, &result.result, phase, pairs, &stalls, &steal)
            })
            .collect()
    };
    let mut figures = phase_figures(&pairs);
    // Dual-stack: each family's sessions alone (faults need one session,
    // so these carry no fault figures).
    let family_figures: Vec<(Family, Vec<PhaseFigures>)> = if scenario.sessions.dual_stack {
        Family::BOTH
            .iter()
            .map(|&family| {
                let of_family: Vec<daemons::Pair> = pairs
                    .iter()
                    .filter(|p| Family::of(p.dut) == family)
                    .cloned()
                    .collect();
                (family, phase_figures(&of_family))
            })
            .collect()
    } else {
        Vec::new()
    };
    // The peer's Downs for an expired detection time, within the phases,
    // that came before the detection time had passed on the wire.
    // A fault's phase has Downs by design: the checks on the peer's and
    // our Downs, and the long gaps, look at the other phases.
    let plain: Vec<(i64, i64)> = outcome
        .phases
        .iter()
        .filter(|p| p.fault.is_none())
        .map(|p| (p.start_ns, p.end_ns))
        .collect();
    let in_plain = |t: i64| plain.iter().any(|&(a, b)| (a..b).contains(&t));
    let premature_peer_detections_ms: Vec<f64> = analysis
        .all
        .flows
        .iter()
        .filter(|f| peer_addrs.contains(&f.src))
        .flat_map(|f| &f.flap_events)
        .filter(|ev| in_plain(ev.at_ns))
        .filter_map(|ev| ev.detection_latency_ms)
        // 1 ms of tolerance for the capture's own timestamping.
        .filter(|&ms| ms < detection_ms - 1.0)
        .collect();
    // The DUT's first Down within the phases, if it came for an expired
    // detection time after the peer had sent nothing for that time on the
    // wire: a true detection of a peer that fell silent. Only the first:
    // after a flap the peer's slow rate while not Up (RFC 5880 6.8.3) makes
    // long silences of its own that say nothing about its host.
    let silent_peer_detections_ms: Vec<f64> = analysis
        .all
        .flows
        .iter()
        .filter(|f| dut_addrs.contains(&f.src))
        .flat_map(|f| &f.flap_events)
        .filter(|ev| in_plain(ev.at_ns))
        .min_by_key(|ev| ev.at_ns)
        .and_then(|ev| ev.detection_latency_ms)
        .filter(|&ms| ms >= detection_ms - 1.0)
        .into_iter()
        .collect();
    // The DUT's long gaps, each checked against the peer's own silence.
    let interval_ns = u64::from(s.tx_interval_ms.max(s.rx_interval_ms)) * 1_000_000;
    let mut long = mirror::LongGaps::new(interval_ns * 6 / 5);
    let mut rows = faults::Rows::default();
    let whole = linecard_capture_analyzer::analyze(
        std::slice::from_ref(&captured.path),
        &Options {
            phases: Vec::new(),
            timeline: false,
        },
        Some(&mut linecard_capture_analyzer::analysis::Tee(vec![
            &mut long, &mut rows,
        ])),
    )?;
    let flows = &whole.all.flows;
    let dut_flows: Vec<usize> = (0..flows.len())
        .filter(|&i| dut_addrs.contains(&flows[i].src) && peer_addrs.contains(&flows[i].dst))
        .collect();
    let mut long_gaps: Vec<mirror::LongGap> = plain
        .iter()
        .flat_map(|&(start, end)| {
            mirror::judge_gaps(
                &long,
                &dut_flows,
                |i| {
                    flows.iter().position(|f| {
                        f.src == flows[i].dst
                            && f.dst == flows[i].src
                            && f.service == flows[i].service
                    })
                },
                start,
                end,
            )
        })
        .collect();
    let witnesses = mirror::Witnesses {
        steal: &steal,
        freezes: &freezes,
        stalls: &stalls,
        unstressed: outcome
            .phases
            .iter()
            .filter(|p| p.stress_ng.is_none())
            .map(|p| (p.start_ns, p.end_ns))
            .collect(),
    };
    let place_disturbances = |gap: &mut mirror::LongGap| witnesses.place(gap);
    long_gaps.iter_mut().for_each(place_disturbances);
    // Each fault's phase, walked packet by packet.
    let sides: Vec<faults::Side> = flows
        .iter()
        .map(|f| {
            if dut_addrs.contains(&f.src) {
                faults::Side::Ours
            } else if f.src_port == faults::IMPOSTOR_PORT {
                faults::Side::Impostor
            } else {
                faults::Side::Peer
            }
        })
        .collect();
    // The peer's silences of a detection time while both sides were Up, in
    // the plain phases: it sends on its own clock whatever the DUT does
    // (RFC 5880 6.8.7), so each is its host's stall (seen in CI: both
    // sides silent 110 ms at once, the machine itself stalled).
    let peer_stalls_ms: Vec<f64> = plain
        .iter()
        .flat_map(|&(start, end)| {
            faults::walk(
                &rows.0,
                &sides,
                (start, end),
                (start, start),
                (detection_ms, interval_ms),
            )
            .peer_silences
        })
        .map(|silence| silence.ms())
        .collect();
    for ((record, spec), figures) in outcome
        .phases
        .iter()
        .zip(&scenario.phases)
        .zip(&mut figures)
    {
        let (Some(applied), Some(fault)) = (&record.fault, &spec.fault) else {
            continue;
        };
        let mut f = faults::walk(
            &rows.0,
            &sides,
            (record.start_ns, record.end_ns),
            (applied.start_ns, applied.end_ns),
            (detection_ms, interval_ms),
        );
        f.fault = Some(fault.clone());
        f.stressed = record.stress_ng.is_some();
        f.late_up_gaps.iter_mut().for_each(place_disturbances);
        f.frames_seen = applied.frames_seen;
        f.frames_dropped = applied.frames_dropped;
        f.flood = applied.flood.clone();
        figures.fault = Some(f);
    }
    let evidence = Evidence {
        capture_died_early: captured.died_early || !capture_alive,
        capture_dropped: captured.dropped_by_kernel,
        up_before_phases,
        fast_path_on_dut_cpus,
        responder,
        steal_ms,
        peer_steal_ms,
        premature_peer_detections_ms,
        silent_peer_detections_ms,
        peer_stalls_ms,
        detection_ms,
        interval_ms: Some(interval_ms),
        control_plane_uninterrupted,
        long_gaps,
        phases: figures,
    };
    // Authenticated sessions are the fast path's while it signs
    // (`xdp_sign`, on unless switched off as the negative control).
    let fast_path = |family: Family| match &dut.implementation {
        DutImplementation::Linecardd { backend } | DutImplementation::FrrDataplane { backend } => {
            daemons::offloads(backend, &dut.engine)
                && (scenario.sessions.auth.is_none()
                    || daemons::engine_switch_on(&dut.engine, "xdp_sign"))
                && scenario.sessions.demand.is_none()
                && dut.offload_only.is_none_or(|f| f == family)
        }
        DutImplementation::Frr => false,
    };
    outcome.families = family_figures
        .into_iter()
        .map(|(family, phases)| FamilyOutcome {
            family,
            fast_path: fast_path(family),
            verdict: judge::judge(
                &dut.expect_for(family),
                &evidence.with_phases(phases.clone()),
            ),
            phases,
        })
        .collect();
    outcome.verdict = if INTERRUPTED.load(Ordering::Relaxed) {
        Verdict::Fail("interrupted".into())
    } else if dut.per_family.is_empty() {
        judge::judge(&dut.expect, &evidence)
    } else {
        worst_of_families(&outcome.families)
    };
    outcome.evidence = Some(evidence);
    Ok(())
}

/// Whether a phase is over: its stress processes have all ended
/// (stress-ng has `--timeout`) or, without stress, its time is up. Bounded
/// at 10 s past its time; Ctrl-C ends it too.
fn phase_over(stress: &mut [Daemon], started: Instant, seconds: u64) -> bool {
    let elapsed = started.elapsed();
    let finished = if stress.is_empty() {
        elapsed >= Duration::from_secs(seconds)
    } else {
        stress.iter_mut().all(|s| !s.running())
    };
    finished || elapsed >= Duration::from_secs(seconds + 10) || INTERRUPTED.load(Ordering::Relaxed)
}

/// The stress-ng command lines of a phase, as the manifest records them
/// (several processes run at once, joined by ` & `).
fn stress_ng_line(processes: &[Vec<String>]) -> String {
    processes
        .iter()
        .map(|args| format!("stress-ng {}", args.join(" ")))
        .collect::<Vec<_>>()
        .join(" & ")
}

/// The verdict of a DUT judged per family: the first family's invalid
/// verdict, else its failure, else a pass.
fn worst_of_families(families: &[FamilyOutcome]) -> Verdict {
    let named = |f: &FamilyOutcome, why: &str| format!("{}: {why}", f.family.name());
    families
        .iter()
        .find_map(|f| match &f.verdict {
            Verdict::Invalid(why) => Some(Verdict::Invalid(named(f, why))),
            _ => None,
        })
        .or_else(|| {
            families.iter().find_map(|f| match &f.verdict {
                Verdict::Fail(why) => Some(Verdict::Fail(named(f, why))),
                _ => None,
            })
        })
        .unwrap_or(Verdict::Pass)
}

/// The most sessions that flapped within one `window`: 1 or 0 for
/// independent flaps, many for a correlated flap.
pub fn correlated(flaps_per_session: &[Vec<i64>], window: i64) -> usize {
    let mut events: Vec<(i64, usize)> = flaps_per_session
        .iter()
        .enumerate()
        .flat_map(|(session, at)| at.iter().map(move |&t| (t, session)))
        .collect();
    events.sort_unstable();
    let mut best = 0;
    for (i, &(start, _)) in events.iter().enumerate() {
        let mut sessions: Vec<usize> = events[i..]
            .iter()
            .take_while(|(t, _)| *t - start <= window)
            .map(|&(_, s)| s)
            .collect();
        sessions.sort_unstable();
        sessions.dedup();
        best = best.max(sessions.len());
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_are_utc_and_sortable() {
        assert_eq!(run_id(0), "19700101T000000Z");
        assert_eq!(run_id(1_796_030_593), "20261130T092313Z");
        assert_eq!(run_id(951_782_400), "20000229T000000Z");
    }

    #[test]
    fn flaps_of_many_sessions_in_one_window_are_one_correlated_flap() {
        let ms = 1_000_000;
        assert_eq!(correlated(&[vec![], vec![]], 100 * ms), 0);
        // Independent: far apart.
        assert_eq!(
            correlated(&[vec![0], vec![500 * ms], vec![1000 * ms]], 100 * ms),
            1
        );
        // One stall: three sessions within 40 ms, a fourth later; a session
        // flapping twice in the window counts once.
        let sessions = [
            vec![10 * ms, 20 * ms],
            vec![30 * ms],
            vec![50 * ms],
            vec![900 * ms],
        ];
        assert_eq!(correlated(&sessions, 100 * ms), 3);
    }

    #[test]
    fn labels_become_directory_names() {
        assert_eq!(slug("rt, RT throttling off"), "rt-rt-throttling-off");
        assert_eq!(slug("FRR bfdd 8.4.4"), "frr-bfdd-8-4-4");
    }
}
