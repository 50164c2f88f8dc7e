//! One DUT's run through every phase, written once for every [`Site`]:
//! availability asked of its linecardd, the capture first, the peer and
//! the DUT started and ready, the witnesses beside them, each phase's
//! stress and fault with its CPU cost; then [`judge_dut`] (`verdict.rs`),
//! the verdict from the capture and the witnesses' records.

use super::faults::{self};
use super::site::{BfdDaemon, CaptureRun, DutDir, FaultAct, Recorder, Role, Site};
use super::verdict::{judge_dut, Measured};
use super::{cpu, daemons, phase_over, readiness, Progress, INTERRUPTED};
use crate::manifest::verdict::Verdict;
use crate::manifest::{DutOutcome, PhaseRecord};
use crate::profile::stress_ng_line;
use crate::receive_path::{self, Detail};
use crate::scenario::{DutImplementation, DutSpec, Fault, PhaseSpec, Scenario};
use crate::sys::unix_ns;
use anyhow::Result;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Runs one DUT through every phase on `site`, then judges it.
pub(super) fn run_dut(
    site: &dyn Site,
    scenario: &Scenario,
    dut: &DutSpec,
    run_dir: &Path,
    name: &str,
) -> Result<DutOutcome> {
    let dir = DutDir {
        local: run_dir.join(name),
        name: name.to_string(),
    };
    std::fs::create_dir_all(&dir.local)?;
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
        programs: Vec::new(),
        receive_path: Vec::new(),
        engine_view: Vec::new(),
    };
    if let DutImplementation::Linecardd { backend } | DutImplementation::FrrDataplane { backend } =
        &dut.implementation
    {
        if let Some(reason) = site.unavailable(*backend)? {
            outcome.verdict = Verdict::Unavailable(reason);
            return Ok(outcome);
        }
    }
    // What runs, recorded before anything starts.
    outcome.programs = site.programs(scenario, dut)?;
    // Held (addresses, RT throttling) until this function returns, also
    // when it fails half-way.
    let prepared = site.prepare_dut(scenario, dut, &dir)?;
    outcome.sched_rt_runtime_us = prepared.sched_rt_runtime_us;
    let pairs = prepared.pairs.clone();
    // The capture starts first: bring-up is on it too.
    let mut capture = site.start_capture(&dir)?;
    // Steal is the one disturbance measured across bring-up: a readiness
    // failure it cannot explain is the DUT's (`crate::manifest::evidence::BringUp`).
    let (steal_at_start, started_at) = (steal_ms(site), unix_ns());
    outcome.capture = Some(PathBuf::from(name).join("capture.pcap"));
    let mut peer = site.start_peer(scenario, dut, &pairs, &dir)?;
    let mut dut_daemon = site.start_dut(scenario, dut, &pairs, &dir)?;
    // Readiness in both daemons' own words, bounded, never a fixed sleep.
    let up = readiness::wait_up(
        dut_daemon.as_mut(),
        peer.as_mut(),
        pairs.len(),
        readiness::ready_within(pairs.len()),
    );
    let up_at = unix_ns();
    let steal_before = steal_ms(site);
    let bring_up = crate::manifest::evidence::BringUp {
        window_ms: (up_at - started_at) as f64 / 1e6,
        dut_steal_ms: steal_before.0 - steal_at_start.0,
        peer_steal_ms: steal_before.1 - steal_at_start.1,
    };
    // The daemons run the files the manifest names, on this site's word.
    for (side, daemon) in [("dut", &dut_daemon), ("peer", &peer)] {
        if let Some(exe) = site.exe(daemon.pid()) {
            crate::scenario::programs::seen_running(&mut outcome.programs, side, &exe)
                .map_err(|why| anyhow::anyhow!(why))?;
        }
    }
    // The witnesses outlive the phases by 2 s.
    let seconds = scenario.seconds_per_dut() + 2;
    let recorders_started = Recorder::for_dut(dut);
    let mut recorders = Vec::new();
    for &recorder in &recorders_started {
        recorders.push(site.start_recorder(recorder, seconds, &dir)?);
    }
    let mut running = Running {
        site,
        scenario,
        dut,
        dir: &dir,
        pairs: &pairs,
        peer,
        dut_daemon,
        capture_alive: true,
    };
    if up.is_ok() {
        // Read with the fast path attached: the mode in force is its.
        outcome.receive_path = site.receive_path(Detail::Full);
        running.phases(capture.as_mut(), &mut outcome.phases)?;
    }
    // A handover's successor, seen running its file when it took over.
    let successors: Vec<PathBuf> = (outcome.phases.iter())
        .filter_map(|p| p.fault.as_ref()?.successor.clone())
        .collect();
    for exe in successors {
        crate::scenario::programs::seen_running(&mut outcome.programs, "dut", &exe)
            .map_err(|why| anyhow::anyhow!(why))?;
    }
    let steal_after = steal_ms(site);
    let Running {
        mut peer,
        mut dut_daemon,
        capture_alive,
        ..
    } = running;
    let fast_path_on_dut_cpus = dut_daemon.fast_path_frames_on(site.dut_cpus());
    let responder = dut_daemon.fast_path_responder();
    let control_plane_uninterrupted = dut_daemon
        .control_plane_uninterrupted(pairs.len(), ((unix_ns() - up_at) / 1_000_000_000) as u64);
    // The engine's own view at the end, kept beside the capture to compare
    // with it; never a figure of the verdict.
    if let Some(view) = dut_daemon.engine_view() {
        std::fs::write(
            dir.local.join("engine-view.json"),
            serde_json::to_string_pretty(&view)? + "\n",
        )?;
    }
    dut_daemon.stop()?;
    peer.stop()?;
    for mut recorder in recorders {
        recorder.stop()?;
    }
    let captured = capture.finish()?;
    let record = |recorder: Recorder| match site.fetch_record(recorder, &dir) {
        Ok(path) => path,
        Err(e) => {
            eprintln!("warning: {}: {e:#}", recorder.missing());
            dir.local.join(recorder.record())
        }
    };
    let scrapes = (recorders_started.contains(&Recorder::EngineScrape))
        .then(|| crate::scrape::read(&record(Recorder::EngineScrape)))
        .filter(|scrapes| !scrapes.is_empty());
    let measured = Measured {
        stalls: crate::canary::read(&record(Recorder::Canary)).unwrap_or_default(),
        freezes: crate::canary::read(&record(Recorder::FreezeWitness)).unwrap_or_default(),
        rest_freezes: crate::canary::read(&record(Recorder::RestFreezeWitness)).unwrap_or_default(),
        steal: crate::steal::StealTrace::read(&record(Recorder::StealWitness)),
        pairs,
        captured,
        capture_alive,
        up,
        up_at,
        bring_up,
        steal_ms: steal_after.0 - steal_before.0,
        peer_steal_ms: steal_after.1 - steal_before.1,
        fast_path_on_dut_cpus,
        responder,
        control_plane_uninterrupted,
        connection_outages: site.connection_outages(),
    };
    drop(prepared);
    judge_dut(scenario, dut, &mut outcome, measured)?;
    if let (Some(scrapes), Some(evidence)) = (scrapes, &outcome.evidence) {
        outcome.engine_view =
            crate::scrape::phase_views(&scrapes, &outcome.phases, &evidence.phases);
    }
    Ok(outcome)
}

/// The steal so far on the DUT's CPUs and on the peer's, ms.
fn steal_ms(site: &dyn Site) -> (f64, f64) {
    let (dut_stat, _) = site.proc_stat(Role::Dut, None);
    let (peer_stat, _) = site.proc_stat(Role::Peer, None);
    (
        cpu::steal_ms_in(&dut_stat, site.dut_cpus()),
        cpu::steal_ms_in(&peer_stat, &site.peer_cpus()),
    )
}

/// A DUT's run between readiness and wind-down: the daemons (a fault may
/// start either again) and whether the capture still runs.
struct Running<'a> {
    site: &'a dyn Site,
    scenario: &'a Scenario,
    dut: &'a DutSpec,
    dir: &'a DutDir,
    pairs: &'a [daemons::Pair],
    peer: Box<dyn BfdDaemon>,
    dut_daemon: Box<dyn BfdDaemon>,
    capture_alive: bool,
}

impl Running<'_> {
    /// Every phase in turn, recorded in `records`; stops early on Ctrl-C
    /// or when the capture died.
    fn phases(
        &mut self,
        capture: &mut dyn CaptureRun,
        records: &mut Vec<PhaseRecord>,
    ) -> Result<()> {
        let mut progress = Progress::new();
        for (i, phase) in self.scenario.phases.iter().enumerate() {
            if phase.fault.is_some() {
                // A fault needs sessions to break: the previous phase's
                // fault may still be recovering.
                let _ = readiness::wait_up(
                    self.dut_daemon.as_mut(),
                    self.peer.as_mut(),
                    self.pairs.len(),
                    Duration::from_secs(10),
                );
            }
            records.push(self.phase(i, phase, capture, &mut progress)?);
            if INTERRUPTED.load(Ordering::Relaxed) || !self.capture_alive {
                break;
            }
        }
        progress.done();
        Ok(())
    }

    /// One phase: its stress on the DUT's CPUs, its fault a moment in,
    /// its CPU cost.
    fn phase(
        &mut self,
        i: usize,
        phase: &PhaseSpec,
        capture: &mut dyn CaptureRun,
        progress: &mut Progress,
    ) -> Result<PhaseRecord> {
        let site = self.site;
        let loss = match &phase.fault {
            Some(Fault::Loss { percent, seed }) => Some(site.lossy_link(*percent, *seed)?),
            _ => None,
        };
        let mut applied = phase
            .fault
            .as_ref()
            .map(|_| crate::manifest::evidence::Applied::default());
        // A loss lasts the phase; every other fault acts once, a moment in.
        let mut acted = matches!(phase.fault, None | Some(Fault::Loss { .. }));
        let drops_before = site.receive_path(Detail::Counters);
        // The loss program's counts are read next to the phase's edges: the
        // capture's frames are counted between them, and a frame every
        // 10 ms passes in the tens of ms the receive path's script takes.
        let loss = match loss {
            Some(link) => {
                let before = link.counts()?;
                Some((link, before))
            }
            None => None,
        };
        let start_ns = unix_ns();
        let started = Instant::now();
        let pid = self.dut_daemon.pid();
        let cpu_before = self.cpu_sample(pid);
        let peer_before = self.peer_cpu_sample();
        let dut_cpus = site.dut_cpus();
        let processes = phase
            .profile
            .stress_ng_processes(dut_cpus.len(), phase.seconds);
        let mut stress = Vec::new();
        for (k, args) in processes.iter().enumerate() {
            let log = self
                .dir
                .local
                .join(format!("stress-{i}-{}-{k}.log", phase.profile.name));
            stress.push(site.start_stress(&format!("stress-{i}-{k}"), args, self.dir, &log)?);
        }
        loop {
            let elapsed = started.elapsed();
            if phase_over(&mut stress, started, phase.seconds) {
                break;
            }
            if let (false, Some(fault)) = (acted, &phase.fault) {
                if elapsed >= faults::LEAD_IN {
                    acted = true;
                    let done = self.act(fault, i)?;
                    if let Some(a) = applied.as_mut() {
                        (a.start_ns, a.end_ns, a.flood, a.successor) =
                            (done.start_ns, done.end_ns, done.flood, done.successor);
                    }
                }
            }
            self.capture_alive &= capture.running();
            if !self.capture_alive {
                // Failed already (the capture stopped early): no point
                // loading the DUT for the rest of the phase.
                break;
            }
            progress.tick(
                &self.dut.label,
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
        let loss_after = match &loss {
            Some((link, _)) => Some(link.counts()?),
            None => None,
        };
        let drops = receive_path::drops_around(&drops_before, &site.receive_path(Detail::Counters));
        let seconds = (end_ns - start_ns) as f64 / 1e9;
        let cpu_cost = cpu::cost(&cpu_before, &self.cpu_sample(pid), seconds);
        let peer_cpu = cpu::cost(&peer_before, &self.peer_cpu_sample(), seconds);
        if let (Some((_, before)), Some(after), Some(a)) = (loss, loss_after, applied.as_mut()) {
            a.start_ns = start_ns;
            a.end_ns = end_ns;
            a.frames_seen = Some(after.seen - before.seen);
            a.frames_dropped = Some(after.dropped - before.dropped);
        }
        Ok(PhaseRecord {
            name: format!("{}#{i}", phase.profile.name),
            profile: phase.profile.name.clone(),
            start_ns,
            end_ns,
            stress_ng: (!processes.is_empty()).then(|| stress_ng_line(&processes)),
            fault: applied,
            cpu: Some(cpu_cost),
            peer_cpu: Some(peer_cpu),
            drops,
            softirq_threads: site.softirq_threads(),
        })
    }

    /// The DUT's CPU time and its CPUs' softirq time so far.
    fn cpu_sample(&self, pid: u32) -> cpu::Sample {
        let (stat, process) = self.site.proc_stat(Role::Dut, Some(pid));
        cpu::sample_from(&stat, process.as_deref(), pid, self.site.dut_cpus())
    }

    /// The peer daemon's CPU time and its CPUs' softirq and idle so far.
    fn peer_cpu_sample(&self) -> cpu::Sample {
        let pid = self.peer.pid();
        let (stat, process) = self.site.proc_stat(Role::Peer, Some(pid));
        cpu::sample_from(&stat, process.as_deref(), pid, &self.site.peer_cpus())
    }

    /// Acts out phase `i`'s fault on the site.
    fn act(&mut self, fault: &Fault, i: usize) -> Result<crate::manifest::evidence::Applied> {
        let s = &self.scenario.sessions;
        let dead_for = Duration::from_millis(
            (2 * u64::from(s.multiplier) * u64::from(s.tx_interval_ms.max(s.rx_interval_ms)))
                .max(100),
        );
        let act = FaultAct {
            scenario: self.scenario,
            dut_spec: self.dut,
            fault,
            phase: i,
            pairs: self.pairs,
            dir: self.dir,
            dead_for,
        };
        self.site.act(&act, &mut self.peer, &mut self.dut_daemon)
    }
}
