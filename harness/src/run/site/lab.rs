//! The local lab as a [`Site`]: the DUT, the peer and the observer are
//! network namespaces on this machine; the DUT's processes in the DUT's
//! cpuset, the harness's own (capture, steal witness) in the rest. The
//! only site with faults: they need the lab's plumbing (the observer's
//! bridge, `lc_loss` on the peer's port, the spare's port for impostors).

use super::{
    BfdDaemon, CaptureRun, DutDir, FaultAct, FrameCounter, Prepared, Process, Recorder, Role, Site,
};
use crate::lab::spec;
use crate::manifest::HostFacts;
use crate::procs::{Capture, Daemon};
use crate::receive_path::{self, Detail, InterfaceRecord};
use crate::rt_throttle;
use crate::run::actions;
use crate::run::daemons::{self, Pair};
use crate::scenario::programs::ProgramRecord;
use crate::scenario::{DutImplementation, DutSpec, PeerImplementation, Scenario};
use anyhow::{Context, Result};
use linecard_api::BackendKind;
use std::path::{Path, PathBuf};

/// The lab, with the facts `prepare` found (its CPUs).
pub(crate) struct LabSite {
    pub host: HostFacts,
}

impl LabSite {
    fn rest_cpus(&self) -> Vec<usize> {
        let dut = &self.host.dut_cpus;
        self.host
            .online_cpus
            .iter()
            .copied()
            .filter(|c| !dut.contains(c))
            .collect()
    }
}

/// Starts a recorder in the lab: on the DUT's CPUs in the DUT's namespace,
/// or (the steal witness) on the rest in the observer's; its record and
/// log in `dir`.
pub(crate) fn spawn_recorder(
    recorder: Recorder,
    dut_cpus: &[usize],
    seconds: u64,
    dir: &Path,
) -> Result<Daemon> {
    let namespace = if recorder.in_dut_namespace() {
        spec::DUT.namespace
    } else {
        spec::OBSERVER_NS
    };
    let cpuset = if recorder.off_dut() {
        spec::cpuset_dir(spec::REST_CPUSET)
    } else {
        spec::cpuset_dir(spec::DUT_CPUSET)
    };
    let out = dir.join(recorder.record());
    let args = recorder.args(dut_cpus, seconds, &out.display().to_string());
    Daemon::spawn(
        recorder.name(),
        namespace,
        Some(&cpuset),
        std::env::current_exe()?
            .to_str()
            .context("non-UTF-8 path")?,
        &args,
        &dir.join(format!("{}.log", recorder.name())),
    )
}

impl Site for LabSite {
    fn dut_cpus(&self) -> &[usize] {
        &self.host.dut_cpus
    }

    fn softirq_threads(&self) -> Vec<crate::softirq_threads::SoftirqThread> {
        crate::softirq_threads::find(&self.host.dut_cpus).unwrap_or_default()
    }

    fn peer_cpus(&self) -> Vec<usize> {
        self.rest_cpus()
    }

    fn unavailable(&self, backend: BackendKind) -> Result<Option<String>> {
        Ok(crate::backends::Backends::local()?.unavailable(backend.name()))
    }

    fn prepare_dut(&self, scenario: &Scenario, dut: &DutSpec, _dir: &DutDir) -> Result<Prepared> {
        // Restored on drop, also when the run fails half-way.
        let throttling = dut
            .rt_throttling
            .runtime_us()
            .map(rt_throttle::RuntimeOverride::set)
            .transpose()?;
        let pairs = daemons::pairs(&scenario.sessions);
        let addresses = daemons::ExtraAddresses::add(&pairs)?;
        let mut held: Vec<Box<dyn std::any::Any>> = vec![Box::new(addresses)];
        if let Some(throttling) = throttling {
            held.push(Box::new(throttling));
        }
        if dut.ksoftirqd_priority > 0 {
            held.push(Box::new(crate::softirq_threads::PriorityOverride::set(
                &self.host.dut_cpus,
                dut.ksoftirqd_priority,
            )?));
        }
        Ok(Prepared {
            pairs,
            sched_rt_runtime_us: rt_throttle::read().ok(),
            _held: held,
        })
    }

    fn start_capture(&self, dir: &DutDir) -> Result<Box<dyn CaptureRun>> {
        Ok(Box::new(Capture::start(
            spec::OBSERVER_NS,
            spec::DUT.bridge_port,
            &dir.local.join("capture.pcap"),
            Some(&spec::cpuset_dir(spec::REST_CPUSET)),
        )?))
    }

    fn start_peer(
        &self,
        scenario: &Scenario,
        dut: &DutSpec,
        pairs: &[Pair],
        dir: &DutDir,
    ) -> Result<Box<dyn BfdDaemon>> {
        start_peer_in(scenario, dut, pairs, &dir.local)
    }

    fn start_dut(
        &self,
        scenario: &Scenario,
        dut: &DutSpec,
        pairs: &[Pair],
        dir: &DutDir,
    ) -> Result<Box<dyn BfdDaemon>> {
        let daemon = daemons::start_dut(
            dut,
            &scenario.sessions,
            pairs,
            &dir.local,
            &self.host.dut_cpus,
        )?;
        Ok(Box::new(daemon))
    }

    fn start_recorder(
        &self,
        recorder: Recorder,
        seconds: u64,
        dir: &DutDir,
    ) -> Result<Box<dyn Process>> {
        let daemon = spawn_recorder(recorder, &self.host.dut_cpus, seconds, &dir.local)?;
        Ok(Box::new(daemon))
    }

    fn fetch_record(&self, recorder: Recorder, dir: &DutDir) -> Result<PathBuf> {
        Ok(dir.local.join(recorder.record()))
    }

    fn start_stress(
        &self,
        _name: &str,
        args: &[String],
        _dir: &DutDir,
        log: &Path,
    ) -> Result<Box<dyn Process>> {
        Ok(Box::new(Daemon::spawn(
            "stress-ng",
            spec::DUT.namespace,
            Some(&spec::cpuset_dir(spec::DUT_CPUSET)),
            "stress-ng",
            args,
            log,
        )?))
    }

    fn proc_stat(&self, _role: Role, pid: Option<u32>) -> (String, Option<String>) {
        (
            std::fs::read_to_string("/proc/stat").unwrap_or_default(),
            pid.and_then(|pid| std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()),
        )
    }

    /// The DUT's interface and the bridge port that delivers to it.
    fn receive_path(&self, detail: Detail) -> Vec<InterfaceRecord> {
        [
            (spec::DUT.namespace, spec::HOST_IFACE),
            (spec::OBSERVER_NS, spec::DUT.bridge_port),
        ]
        .into_iter()
        .map(|(ns, interface)| {
            let script = receive_path::script(interface, detail);
            let text = crate::lab::netns_sh(ns, &script).unwrap_or_else(|e| format!("{e:#}"));
            InterfaceRecord::parse(ns, interface, &text)
        })
        .collect()
    }

    fn exe(&self, pid: u32) -> Option<PathBuf> {
        std::fs::read_link(format!("/proc/{pid}/exe")).ok()
    }

    fn programs(&self, scenario: &Scenario, dut: &DutSpec) -> Result<Vec<ProgramRecord>> {
        let (d, p) = (&dut.programs, &scenario.peer_programs);
        let echo = scenario.sessions.echo;
        let mut started: Vec<(&str, PathBuf)> = match &dut.implementation {
            DutImplementation::Frr => vec![("dut bfdd", d.bfdd())],
            DutImplementation::Linecardd { .. } => {
                let mut started = vec![("dut linecardd", d.linecardd())];
                let upgrades = scenario
                    .phases
                    .iter()
                    .any(|ph| ph.fault == Some(crate::scenario::Fault::EngineUpgrade));
                if let (true, Some(second)) = (upgrades, &d.linecardd_upgrade) {
                    started.push(("dut linecardd_upgrade", second.clone()));
                }
                started
            }
            DutImplementation::FrrDataplane { .. } => {
                vec![("dut bfdd", d.bfdd()), ("dut linecardd", d.linecardd())]
            }
        };
        if echo && !matches!(dut.implementation, DutImplementation::Linecardd { .. }) {
            started.push(("dut zebra", d.zebra()));
        }
        started.extend(match scenario.peer {
            PeerImplementation::Frr => {
                let mut peer = vec![("peer bfdd", p.bfdd())];
                if echo {
                    peer.push(("peer zebra", p.zebra()));
                }
                peer
            }
            PeerImplementation::Bird => vec![("peer bird", p.bird())],
            PeerImplementation::Linecardd => vec![("peer linecardd", p.linecardd())],
        });
        started.push(("capture", "tcpdump".into()));
        if scenario.phases.iter().any(|ph| !ph.profile.is_idle()) {
            started.push(("stress", "stress-ng".into()));
        }
        started
            .into_iter()
            .map(|(role, program)| {
                ProgramRecord::of(role, &program)
                    .map_err(|why| anyhow::anyhow!("the {role} program: {why}"))
            })
            .collect()
    }

    fn lossy_link(&self, percent: f64, seed: u64) -> Result<Box<dyn FrameCounter>> {
        Ok(Box::new(crate::lab::loss::LossyLink::attach(
            &spec::PEER,
            percent / 100.0,
            seed,
        )?))
    }

    fn act(
        &self,
        fault: &FaultAct,
        peer: &mut Box<dyn BfdDaemon>,
        dut: &mut Box<dyn BfdDaemon>,
    ) -> Result<crate::manifest::evidence::Applied> {
        // A restarted daemon gets a directory of its own beside the first.
        let restart_peer = |kill: u64| {
            let dir = fault.dir.local.join(format!(
                "peer-{}",
                actions::restart_suffix(fault.phase, kill)
            ));
            std::fs::create_dir_all(&dir)?;
            start_peer_in(fault.scenario, fault.dut_spec, fault.pairs, &dir)
                .context("starting the peer again")
        };
        let restart_dut = || -> Result<Box<dyn BfdDaemon>> {
            let dir = fault
                .dir
                .local
                .join(actions::restart_suffix(fault.phase, 0));
            std::fs::create_dir_all(&dir)?;
            let daemon = daemons::start_dut(
                fault.dut_spec,
                &fault.scenario.sessions,
                fault.pairs,
                &dir,
                &self.host.dut_cpus,
            )
            .context("starting the DUT again")?;
            Ok(Box::new(daemon))
        };
        // A successor with the running engine's own file, socket and log,
        // seen running the build it was asked for.
        let same = |p: &Path| std::fs::canonicalize(p).ok();
        let take_over_dut =
            |successor: actions::Successor| -> Result<(Box<dyn BfdDaemon>, PathBuf)> {
                let programs = &fault.dut_spec.programs;
                let program = match successor {
                    actions::Successor::SameBuild => programs.linecardd(),
                    actions::Successor::OtherBuild { running } => {
                        let second = programs
                            .linecardd_upgrade
                            .clone()
                            .context("engine_upgrade without linecardd_upgrade (validated)")?;
                        let now = self.exe(running).and_then(|exe| same(&exe));
                        if now.is_some() && now == same(&second) {
                            programs.linecardd()
                        } else {
                            second
                        }
                    }
                };
                let daemon = daemons::take_over_dut(fault.dut_spec, &fault.dir.local, &program)
                    .context("starting the successor engine")?;
                // `ip netns exec` execs it: bounded, until it has.
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
                loop {
                    let running = self.exe(daemon.pid());
                    if running.as_deref().and_then(same) == same(&program) {
                        break Ok((Box::new(daemon), program));
                    }
                    anyhow::ensure!(
                        std::time::Instant::now() < deadline,
                        "the successor runs {running:?}, not {}",
                        program.display()
                    );
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            };
        actions::act(
            fault.fault,
            fault.scenario.sessions.auth.as_ref(),
            fault.dead_for,
            peer,
            dut,
            &actions::Starters {
                peer: &restart_peer,
                dut: &restart_dut,
                successor: &take_over_dut,
            },
        )
    }
}

/// The peer as configured facing `dut` (its own timers, if any), its files
/// in `dir`.
fn start_peer_in(
    scenario: &Scenario,
    dut: &DutSpec,
    pairs: &[Pair],
    dir: &Path,
) -> Result<Box<dyn BfdDaemon>> {
    let peer = daemons::start_peer(
        scenario.peer,
        &scenario.peer_programs,
        scenario.peer_rt_priority,
        &dut.peer_sessions(&scenario.sessions),
        pairs,
        dir,
    )?;
    Ok(Box::new(peer))
}
