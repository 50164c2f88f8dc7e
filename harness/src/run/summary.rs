//! `summary.md`: a run's manifest as Markdown (the table, faults, families,
//! echo, authentication, Demand mode, cost and the notes on each DUT).

use super::*;

/// A DUT's verdict as the table shows it.
fn row_verdict(d: &DutOutcome) -> String {
    d.shown_verdict()
}

/// The faults' table: what each fault did to each DUT, on the wire.
fn faults_markdown(m: &Manifest) -> String {
    let range = |v: &[f64]| match v.iter().copied().reduce(f64::min) {
        None => "-".to_string(),
        Some(lo) => {
            let hi = v.iter().copied().fold(lo, f64::max);
            match crate::gate::median(v) {
                // The figure the gate holds (`detection_p50_ms`).
                Some(m) if v.len() >= crate::gate::MIN_DETECTIONS => {
                    format!("{} ({lo:.2}-{hi:.2}, median {m:.2})", v.len())
                }
                _ => format!("{} ({lo:.2}-{hi:.2})", v.len()),
            }
        }
    };
    let mut rows = String::new();
    for d in &m.duts {
        for p in d.evidence.iter().flat_map(|e| &e.phases) {
            let Some(f) = &p.fault else { continue };
            let lost = match (f.frames_seen, f.frames_dropped) {
                (Some(seen), Some(dropped)) => format!("{dropped} of {seen}"),
                _ => "-".into(),
            };
            rows.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {:.2} | {} |\n",
                d.label,
                p.phase,
                match &f.fault {
                    None => "?".into(),
                    Some(fault @ faults::Fault::Impostor) => format!(
                        "{} ({} of its packets on the wire)",
                        fault.describe(),
                        f.impostor_packets
                    ),
                    Some(fault @ faults::Fault::Flood { .. }) => {
                        let refused = f.flood.as_ref().map_or("not read".into(), |c| {
                            format!(
                                "{} sent, refused {} in the kernel and {} in userspace",
                                c.sent,
                                c.kernel_refused.map_or("-".into(), |k| k.to_string()),
                                c.userspace_refused
                            )
                        });
                        format!(
                            "{} ({} on the wire; {refused})",
                            fault.describe(),
                            f.impostor_packets
                        )
                    }
                    Some(fault) => fault.describe(),
                },
                lost,
                range(&f.detections_ms),
                f.missed_ms.len(),
                range(&f.peer_detections_ms),
                f.up_gap_max_ms,
                match (&f.fault, f.recovered_ms) {
                    (Some(faults::Fault::Loss { .. }), _) => "-".into(),
                    (_, Some(ms)) => format!("{ms:.0}"),
                    (_, None) => "never".into(),
                },
            ));
        }
    }
    if rows.is_empty() {
        return rows;
    }
    format!(
        "\nFaults, on the capture: our Downs for an expired detection time (count, ms after the peer's last packet), peer silences we missed, the peer's Downs for an expired detection time (ms after our last packet), our longest gap while Up, and when both sides were Up again after the fault.\n\n| DUT | phase | fault | peer frames lost | our Downs | missed | the peer's Downs | our max Up gap | Up again (ms) |\n|---|---|---|---:|---|---:|---|---:|---:|\n{rows}"
    )
}

/// Dual-stack: each family's sessions alone, with the path that answered
/// them.
fn families_markdown(m: &Manifest) -> String {
    let mut rows = String::new();
    for d in &m.duts {
        for f in &d.families {
            for (i, p) in f.phases.iter().enumerate() {
                rows.push_str(&format!(
                    "| {} | {} | {} | {} | {} | {:.2} | {:.2} | {} |\n",
                    d.label,
                    f.family.name(),
                    if f.fast_path { "kernel" } else { "userspace" },
                    p.profile,
                    p.flaps,
                    p.p99_ms,
                    p.max_ms,
                    if i > 0 {
                        String::new()
                    } else if matches!(f.verdict, Verdict::Pass)
                        && d.spec.expect_for(f.family).positive_control
                    {
                        "flapped (positive control)".into()
                    } else {
                        f.verdict.describe()
                    },
                ));
            }
        }
    }
    if rows.is_empty() {
        return rows;
    }
    format!(
        "\nPer address family, each judged alone: the DUT's transmit gaps in ms and the flaps of its sessions of that family, and which path answered them.\n\n| DUT | family | path | phase | flaps | p99 | max | verdict |\n|---|---|---|---|---:|---:|---:|---|\n{rows}"
    )
}

/// The echo packets on the wire (`sessions.echo`), per DUT, phase and
/// originator: each echo passes the observer going and coming back.
fn echo_markdown(m: &Manifest) -> String {
    let mut rows = String::new();
    for d in &m.duts {
        let Some(e) = &d.evidence else { continue };
        for p in &e.phases {
            for x in &p.echo {
                rows.push_str(&format!(
                    "| {} | {} | {} {} | {} | {} | {} | {:.3} | {:.2} | {:.2} |\n",
                    d.label,
                    p.profile,
                    if x.originator == "dut" { "DUT" } else { "peer" },
                    x.family,
                    x.sent,
                    x.returned,
                    x.lost,
                    x.rtt_max_ms,
                    x.send_gap_p99_ms,
                    x.send_gap_max_ms,
                ));
            }
        }
    }
    if rows.is_empty() {
        return rows;
    }
    format!(
        "\nEcho packets on the capture, by originator (RFC 5880 6.4; advisory, never a session's state): sent, came back, lost (not back within 1 s), the round trip's max in ms, and the gaps between the originator's consecutive echoes in ms (p99, max: its own lateness). A peer with no row sent none.\n\n| DUT | phase | originator | sent | returned | lost | RTT max | send gap p99 | send gap max |\n|---|---|---|---:|---:|---:|---:|---:|---:|\n{rows}"
    )
}

/// What each phase cost the DUT's CPUs (`run::cpu`), per DUT.
fn cpu_markdown(m: &Manifest) -> String {
    let mut rows = String::new();
    for d in &m.duts {
        for p in &d.phases {
            let Some(c) = p.cpu.as_ref().filter(|c| c.seconds > 0.0) else {
                continue;
            };
            rows.push_str(&format!(
                "| {} | {} | {} | {:.1} |\n",
                d.label,
                p.profile,
                c.engine_cpu_ms
                    .map_or("-".into(), |ms| format!("{:.1}", ms / c.seconds)),
                c.softirq_ms / c.seconds,
            ));
        }
    }
    if rows.is_empty() {
        return rows;
    }
    format!(
        "\nWhat each phase cost, from /proc (a cost, never a timing: timings are the capture's), in ms of CPU per second of the phase: the DUT daemon's own CPU time (all its threads), and the softirq time on the DUT's CPUs, where its receive path and XDP program run (under L3 the timer storm's softirqs count there too). 10 ms ticks.\n\n| DUT | phase | engine CPU ms/s | DUT CPUs' softirq ms/s |\n|---|---|---:|---:|\n{rows}"
    )
}

/// A table of per-side figures of every phase of the DUTs `wanted` picks
/// (`row` gives one row's cells after DUT and phase), under `intro`; empty
/// when no DUT has any.
fn side_table<T>(
    m: &Manifest,
    wanted: impl Fn(&DutOutcome) -> bool,
    figures: impl Fn(&PhaseFigures) -> &[T],
    row: impl Fn(&T) -> String,
    intro: &str,
) -> String {
    let mut rows = String::new();
    for d in m.duts.iter().filter(|d| wanted(d)) {
        let Some(e) = &d.evidence else { continue };
        for p in &e.phases {
            for f in figures(p) {
                rows.push_str(&format!("| {} | {} | {} |\n", d.label, p.profile, row(f)));
            }
        }
    }
    if rows.is_empty() {
        return rows;
    }
    format!("\n{intro}{rows}")
}

fn side_name(side: &str) -> &'static str {
    if side == "dut" {
        "DUT"
    } else {
        "peer"
    }
}

/// Authentication on the wire (`sessions.auth`), per DUT, phase and side.
fn auth_markdown(m: &Manifest) -> String {
    let list = |v: &[u8]| v.iter().map(u8::to_string).collect::<Vec<_>>().join(", ");
    side_table(
        m,
        // Only where authentication was configured: elsewhere every row
        // would say 0 authenticated, which is what was asked for.
        |d| d.spec.expect.auth.is_some(),
        |p| &p.auth,
        |a| {
            format!(
                "{} | {} | {} | {} | {} | {} | {} | {}",
                side_name(&a.side),
                a.packets,
                a.authenticated,
                list(&a.types),
                list(&a.key_ids),
                a.sequence_next,
                a.sequence_same,
                a.sequence_other,
            )
        },
        "Authentication on the capture (RFC 5880 6.7), each side's control packets: how many, how many with the A bit, the Auth Types and Key IDs they carried, and between consecutive keyed packets of one sender whether the Sequence Number went up by one, stayed, or did anything else (a meticulous sender shows +1 only). The analyzer holds no key: digests are the receivers' to verify.\n\n| DUT | phase | side | packets | authenticated | types | key IDs | seq +1 | seq same | seq other |\n|---|---|---|---:|---:|---|---|---:|---:|---:|\n",
    )
}

/// Demand mode on the wire (`sessions.demand`), per DUT, phase and side.
fn demand_markdown(m: &Manifest) -> String {
    side_table(
        m,
        |d| d.spec.expect.demand.is_some(),
        |p| &p.demand,
        |s| {
            format!(
                "{} | {} | {} | {} | {:.2} | {} | {} | {:.2}",
                side_name(&s.side),
                s.packets,
                s.demand_packets,
                s.silences,
                s.silence_max_ms,
                s.polls,
                s.finals,
                s.final_max_ms,
            )
        },
        "Demand mode on the capture (RFC 5880 6.6), each side's control packets: how many, how many with D (asking the other side to stop), the silences the other side asked of it (kept out of the gap figures) and the longest in ms, the verification Polls it started, the Finals it sent and the slowest of them in ms from the start of the Poll it answered.\n\n| DUT | phase | side | packets | with D | silences | longest silence | polls | finals | slowest Final |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n",
    )
}

/// Each side's periodic gaps against its legal interval (RFC 5880 6.8.7),
/// for the DUTs whose peer runs timers of its own (`dut.peer_timers`):
/// there each direction has an interval of its own.
fn intervals_markdown(m: &Manifest) -> String {
    let ms = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}"));
    side_table(
        m,
        |d| d.spec.peer_timers.is_some(),
        |p| &p.intervals,
        |i| {
            format!(
                "{} | {} | {} | {} | {} | {} | {}",
                side_name(&i.side),
                ms(i.legal_ms),
                i.gaps,
                ms(i.shortest_ms),
                ms(i.longest_ms),
                i.too_soon,
                i.late,
            )
        },
        "Each direction against its own interval (RFC 5880 6.8.7: the larger of the sender's Desired Min TX and the receiver's Required Min RX, from the wire): gaps between two Up packets, the shortest and longest, how many came sooner than 75 % of the interval (more often than allowed; a gap beside a Final aside) and how many later than the interval (0.5 ms of capture slack either way).\n\n| DUT | phase | side | interval ms | gaps | shortest ms | longest ms | too soon | late |\n|---|---|---|---:|---:|---:|---:|---:|---:|\n",
    )
}

/// The tables of `summary.md` that a published file may embed by name
/// (`linecard tables`: `<!-- evidence: RUN_DIR NAME -->`), each with its
/// one-paragraph legend.
pub const SECTIONS: [&str; 7] = [
    "faults",
    "families",
    "echo",
    "auth",
    "demand",
    "intervals",
    "cpu",
];

/// The summary's table `name` (one of [`SECTIONS`]) of a run, legend
/// first; `None` for an unknown name. Empty when the run has no such
/// figures.
pub fn section(name: &str, m: &Manifest) -> Option<String> {
    let render = match name {
        "faults" => faults_markdown,
        "families" => families_markdown,
        "echo" => echo_markdown,
        "auth" => auth_markdown,
        "demand" => demand_markdown,
        "intervals" => intervals_markdown,
        "cpu" => cpu_markdown,
        _ => return None,
    };
    Some(render(m).trim_start().to_string())
}

/// `what: 1.56, 25.32 ms`, or nothing for no figures.
fn list_ms(what: &str, ms: &[f64]) -> String {
    if ms.is_empty() {
        return String::new();
    }
    let figures: Vec<String> = ms.iter().map(|v| format!("{v:.2}")).collect();
    format!("{what} {} ms", figures.join(", "))
}

pub fn summary_markdown(m: &Manifest) -> String {
    let mut out = format!(
        "# {} ({})\n\n{}\n\nStatus: **{}**. Peer: {} ({}); sessions {} x {} ms ({}). Host: kernel {}, DUT CPUs {:?}, sched_rt_runtime_us as shipped {}.\n\n",
        m.scenario.name,
        m.run_id,
        m.scenario.description,
        m.status,
        format!("{:?}", m.scenario.peer).to_lowercase(),
        match (m.scenario.peer, m.scenario.peer_rt_priority) {
            // The runner starts a linecardd peer on its rt backend, whose
            // loop sets SCHED_FIFO 90 itself (daemons::linecardd_config).
            (crate::scenario::PeerImplementation::Linecardd, _) => {
                "rt backend, SCHED_FIFO 90".to_string()
            }
            (_, 0) => "normal priority".to_string(),
            (_, p) => format!("SCHED_FIFO {p}"),
        },
        m.scenario.sessions.multiplier,
        m.scenario.sessions.tx_interval_ms,
        m.scenario.sessions.family_name(),
        m.host.kernel,
        m.host.dut_cpus,
        m.host.sched_rt_runtime_us,
    );
    out.push_str("DUT -> peer transmit gaps in ms, from the observer's capture; flaps: the larger of both directions.\n\n");
    out.push_str("| DUT | phase | flaps | p50 | p99 | p99.9 | max | canary stall | verdict | capture |\n|---|---|---:|---:|---:|---:|---:|---:|---|---|\n");
    for d in &m.duts {
        let capture = d
            .capture
            .as_ref()
            .map_or("-".to_string(), |c| format!("`{}`", c.display()));
        match &d.evidence {
            None => out.push_str(&format!(
                "| {} | - | - | - | - | - | - | - | {} | {capture} |\n",
                d.label,
                row_verdict(d)
            )),
            Some(e) => {
                for (i, p) in e.phases.iter().enumerate() {
                    let verdict = if i == 0 {
                        row_verdict(d)
                    } else {
                        String::new()
                    };
                    let phase = match p.fault.as_ref().and_then(|f| f.fault.as_ref()) {
                        Some(fault) => format!("{} ({})", p.profile, fault.describe()),
                        None => p.profile.clone(),
                    };
                    out.push_str(&format!(
                        "| {} | {} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.1} | {} | {} |\n",
                        d.label,
                        phase,
                        p.flaps,
                        p.p50_ms,
                        p.p99_ms,
                        p.p999_ms,
                        p.max_ms,
                        p.canary_stall_ms,
                        verdict,
                        capture
                    ));
                }
                if e.phases.is_empty() {
                    out.push_str(&format!(
                        "| {} | - | - | - | - | - | - | - | {} | {capture} |\n",
                        d.label,
                        row_verdict(d)
                    ));
                }
            }
        }
    }
    out.push_str(&families_markdown(m));
    out.push_str(&echo_markdown(m));
    out.push_str(&auth_markdown(m));
    out.push_str(&demand_markdown(m));
    out.push_str(&intervals_markdown(m));
    out.push_str(&faults_markdown(m));
    out.push_str(&cpu_markdown(m));
    out.push_str("\nRT throttling per DUT (sched_rt_runtime_us during its run): ");
    let throttling: Vec<String> = m
        .duts
        .iter()
        .map(|d| {
            format!(
                "{} {}",
                d.label,
                d.sched_rt_runtime_us.map_or("?".into(), |v| v.to_string())
            )
        })
        .collect();
    out.push_str(&throttling.join("; "));
    out.push('\n');
    for d in &m.duts {
        for p in d
            .evidence
            .iter()
            .flat_map(|e| &e.phases)
            .filter(|p| p.sessions > 1)
        {
            out.push_str(&format!(
                "\n{} in {}: {} sessions, {} flapped, the largest correlated flap took {} sessions within 100 ms.\n",
                d.label, p.profile, p.sessions, p.sessions_flapped, p.correlated_flaps
            ));
        }
        if let Some(e) = d.evidence.as_ref().filter(|e| e.excused_flaps() > 0) {
            out.push_str(&format!(
                "\n{}: {} of its flaps are excused from its verdict, the wire proving them not its own{}{}. The flaps column counts them.\n",
                d.label,
                e.excused_flaps(),
                list_ms(
                    "; the peer declared it dead before its detection time, this long after its last packet",
                    &e.premature_peer_detections_ms
                ),
                list_ms(
                    "; it declared dead a peer silent on the wire for",
                    &e.silent_peer_detections_ms
                ),
            ));
        }
        for (i, spoiled) in d.spoiled_attempts.iter().enumerate() {
            out.push_str(&format!(
                "\n{}: attempt {} of {} was {} (capture `{}`).\n",
                d.label,
                i + 1,
                d.spoiled_attempts.len() + 1,
                spoiled.verdict.describe(),
                spoiled
                    .capture
                    .as_ref()
                    .map_or("-".into(), |c| c.display().to_string())
            ));
        }
        if let Some((on, total)) = d.evidence.as_ref().and_then(|e| e.fast_path_on_dut_cpus) {
            out.push_str(&format!(
                "\n{}: BFD frames the fast path judged on the DUT's CPUs: {on} of {total}; its responder (own clock, first Down) ran at {}.\n",
                d.label,
                d.evidence
                    .as_ref()
                    .and_then(|e| e.responder.as_deref())
                    .unwrap_or("an unreported policy")
            ));
        }
        if let Some(e) = d.evidence.as_ref() {
            let mirrored: Vec<f64> = e
                .long_gaps
                .iter()
                .filter(|g| g.mirrors_peer)
                .map(|g| g.gap_ms)
                .collect();
            if !mirrored.is_empty() {
                let own = e
                    .long_gaps
                    .iter()
                    .filter(|g| !g.mirrors_peer)
                    .map(|g| g.gap_ms)
                    .fold(f64::NAN, f64::max);
                let longest = mirrored.iter().copied().fold(0.0, f64::max);
                out.push_str(&format!(
                    "\n{}: {} gap(s) over 1.2 intervals followed the peer's own silence (longest {longest:.2} ms), which excuses none (the DUT's own clock sends whatever the peer does, RFC 5880 6.8.7); its longest gap over 1.2 intervals while the peer kept sending: {}.\n",
                    d.label,
                    mirrored.len(),
                    if own.is_nan() { "none".to_string() } else { format!("{own:.2} ms") }
                ));
            }
        }
        if let Some(view) = d
            .evidence
            .as_ref()
            .and_then(|e| e.control_plane_uninterrupted.as_ref())
        {
            out.push_str(&format!(
                "\n{}: {}.\n",
                d.label,
                match view {
                    Ok(what) | Err(what) => what,
                }
            ));
        }
    }
    out
}
