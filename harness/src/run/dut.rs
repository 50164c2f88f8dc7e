//! One DUT of a local-lab run through every phase: availability asked of
//! its linecardd, RT throttling as the DUT asks, the capture first, the
//! peer and the DUT started and ready, each phase's stress, canary,
//! witnesses and faults; then `judge_dut`, the verdict from the capture,
//! which the three-host path (`hosts.rs`) shares, as it shares
//! `spawn_recorder` (the canary and the witnesses).

use super::*;
/// Runs one DUT through every phase.
pub(super) fn run_dut(
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
