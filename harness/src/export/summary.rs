//! `summary.md`: a run's manifest as a document (the bake-off table, then
//! faults, families, echo, authentication, Demand mode, cost and the
//! notes on each DUT). Each section is a legend and a table, also
//! embedded by name in published pages ([`section`]).

use super::document::{markdown, Align, Block, Cell, Inline, Table};
use super::table::{bakeoff, Column};
use crate::manifest::figures::{AuthFigures, DemandFigures, IntervalFigures, PhaseFigures};
use crate::manifest::verdict::Verdict;
use crate::manifest::{DutOutcome, Manifest};
use crate::scenario::Fault;
use std::path::Path;

/// A section: its legend and table, or nothing when it has no rows.
pub(super) fn section_blocks(
    legend: &str,
    header: &[(&'static str, Align)],
    rows: Vec<Vec<Cell>>,
) -> Vec<Block> {
    if rows.is_empty() {
        return Vec::new();
    }
    vec![Block::text(legend), Block::Table(Table::new(header, rows))]
}

pub(super) use Align::{Left as L, Right as R};

/// The faults' table: what each fault did to each DUT, on the wire.
fn faults_section(m: &Manifest) -> Vec<Block> {
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
    let mut rows = Vec::new();
    for d in &m.duts {
        for p in d.evidence.iter().flat_map(|e| &e.phases) {
            let Some(f) = &p.fault else { continue };
            let lost = match (f.frames_seen, f.frames_dropped) {
                (Some(seen), Some(dropped)) => format!("{dropped} of {seen}"),
                _ => "-".into(),
            };
            let fault = match &f.fault {
                None => "?".into(),
                Some(fault @ Fault::Impostor) => format!(
                    "{} ({} of its packets on the wire)",
                    fault.describe(),
                    f.impostor_packets
                ),
                Some(fault @ Fault::Flood { .. }) => {
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
            };
            let up_again = match (&f.fault, f.recovered_ms) {
                (Some(Fault::Loss { .. }), _) => "-".into(),
                (_, Some(ms)) => format!("{ms:.0}"),
                (_, None) => "never".into(),
            };
            rows.push(vec![
                d.label.clone().into(),
                p.phase.clone().into(),
                fault.into(),
                lost.into(),
                range(&f.detections_ms).into(),
                f.missed_ms.len().to_string().into(),
                range(&f.peer_detections_ms).into(),
                format!("{:.2}", f.up_gap_max_ms).into(),
                up_again.into(),
            ]);
        }
    }
    section_blocks(
        "Faults, on the capture: our Downs for an expired detection time (count, ms after the peer's last packet), peer silences we missed, the peer's Downs for an expired detection time (ms after our last packet), our longest gap while Up, and when both sides were Up again after the fault.",
        &[
            ("DUT", L),
            ("phase", L),
            ("fault", L),
            ("peer frames lost", R),
            ("our Downs", L),
            ("missed", R),
            ("the peer's Downs", L),
            ("our max Up gap", R),
            ("Up again (ms)", R),
        ],
        rows,
    )
}

/// Dual-stack: each family's sessions alone, with the path that answered
/// them.
fn families_section(m: &Manifest) -> Vec<Block> {
    let table = super::table::families(m);
    if table.rows.is_empty() {
        return Vec::new();
    }
    vec![
        Block::text("Per address family, each judged alone: the DUT's transmit gaps in ms and the flaps of its sessions of that family, and which path answered them."),
        Block::Table(table),
    ]
}

/// The echo packets on the wire (`sessions.echo`), per DUT, phase and
/// originator: each echo passes the observer going and coming back.
fn echo_section(m: &Manifest) -> Vec<Block> {
    let mut rows = Vec::new();
    for d in &m.duts {
        let Some(e) = &d.evidence else { continue };
        for p in &e.phases {
            for x in &p.echo {
                let originator = if x.originator == "dut" { "DUT" } else { "peer" };
                rows.push(vec![
                    d.label.clone().into(),
                    p.profile.clone().into(),
                    format!("{originator} {}", x.family).into(),
                    x.sent.to_string().into(),
                    x.returned.to_string().into(),
                    x.lost.to_string().into(),
                    format!("{:.3}", x.rtt_max_ms).into(),
                    format!("{:.2}", x.send_gap_p99_ms).into(),
                    format!("{:.2}", x.send_gap_max_ms).into(),
                ]);
            }
        }
    }
    section_blocks(
        "Echo packets on the capture, by originator (RFC 5880 6.4; advisory, never a session's state): sent, came back, lost (not back within 1 s), the round trip's max in ms, and the gaps between the originator's consecutive echoes in ms (p99, max: its own lateness). A peer with no row sent none.",
        &[
            ("DUT", L),
            ("phase", L),
            ("originator", L),
            ("sent", R),
            ("returned", R),
            ("lost", R),
            ("RTT max", R),
            ("send gap p99", R),
            ("send gap max", R),
        ],
        rows,
    )
}

/// What each phase cost the DUT's CPUs (`run::cpu`), per DUT.
fn cpu_section(m: &Manifest) -> Vec<Block> {
    let mut rows = Vec::new();
    for d in &m.duts {
        for p in &d.phases {
            let Some(c) = p.cpu.as_ref().filter(|c| c.seconds > 0.0) else {
                continue;
            };
            rows.push(vec![
                d.label.clone().into(),
                p.profile.clone().into(),
                c.engine_cpu_ms
                    .map_or("-".into(), |ms| format!("{:.1}", ms / c.seconds))
                    .into(),
                format!("{:.1}", c.softirq_ms / c.seconds).into(),
            ]);
        }
    }
    section_blocks(
        "What each phase cost, from /proc (a cost, never a timing: timings are the capture's), in ms of CPU per second of the phase: the DUT daemon's own CPU time (all its threads), and the softirq time on the DUT's CPUs, where its receive path and XDP program run (under L3 the timer storm's softirqs count there too). 10 ms ticks.",
        &[
            ("DUT", L),
            ("phase", L),
            ("engine CPU ms/s", R),
            ("DUT CPUs' softirq ms/s", R),
        ],
        rows,
    )
}

/// The engine's own view beside the wire's, per DUT and phase
/// (`crate::scrape`): where they disagree is the engine's blind spot.
fn engine_view_section(m: &Manifest) -> Vec<Block> {
    let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
    let mut rows = Vec::new();
    for d in &m.duts {
        for v in &d.engine_view {
            let agree = match v.disagreements.is_empty() {
                true => "agree".to_string(),
                false => v.disagreements.join("; "),
            };
            rows.push(vec![
                d.label.clone().into(),
                v.phase.clone().into(),
                v.path.clone().into(),
                format!("{} / {}", v.engine_downs, v.wire_flaps).into(),
                format!(
                    "{} / {}",
                    ms(v.engine_receive_max_ms),
                    ms(v.wire_receive_max_ms)
                )
                .into(),
                format!(
                    "{} / {}",
                    ms(v.engine_transmit_max_ms),
                    ms(v.wire_transmit_max_ms)
                )
                .into(),
                agree.into(),
            ]);
        }
    }
    section_blocks(
        "The engine's own view, from its metrics endpoint scraped once a second during the run (docs/metrics.md), beside the capture's (engine / wire): departures from Up against flaps, and the largest gap each way in ms (receive: between the peer's packets; transmit: between the DUT's). Never a verdict's figure: a starved engine thinks it is on time. A scrape's window is the second before it, so the engine's figures may reach a second past the phase's edges; gaps differing by more than the larger of 1 ms and a tenth are called out.",
        &[
            ("DUT", L),
            ("phase", L),
            ("measured in", L),
            ("downs / flaps", R),
            ("receive max ms", R),
            ("transmit max ms", R),
            ("engine and wire", L),
        ],
        rows,
    )
}

/// A section of per-side figures of every phase of the DUTs `wanted`
/// picks (`row` gives one row's cells after DUT, phase and side), under
/// `legend`; empty when no DUT has any.
fn side_section<T: Side>(
    m: &Manifest,
    wanted: impl Fn(&DutOutcome) -> bool,
    figures: impl Fn(&PhaseFigures) -> &[T],
    row: impl Fn(&T) -> Vec<String>,
    legend: &str,
    header: &[(&'static str, Align)],
) -> Vec<Block> {
    let mut rows = Vec::new();
    for d in m.duts.iter().filter(|d| wanted(d)) {
        let Some(e) = &d.evidence else { continue };
        for p in &e.phases {
            for f in figures(p) {
                let side = if f.side() == "dut" { "DUT" } else { "peer" };
                let mut cells: Vec<Cell> = vec![
                    d.label.clone().into(),
                    p.profile.clone().into(),
                    side.into(),
                ];
                cells.extend(row(f).into_iter().map(Cell::Text));
                rows.push(cells);
            }
        }
    }
    let mut full = vec![("DUT", L), ("phase", L), ("side", L)];
    full.extend_from_slice(header);
    section_blocks(legend, &full, rows)
}

/// Figures of one side of the session (`dut` or `peer`).
trait Side {
    fn side(&self) -> &str;
}

impl Side for AuthFigures {
    fn side(&self) -> &str {
        &self.side
    }
}

impl Side for DemandFigures {
    fn side(&self) -> &str {
        &self.side
    }
}

impl Side for IntervalFigures {
    fn side(&self) -> &str {
        &self.side
    }
}

/// Authentication on the wire (`sessions.auth`), per DUT, phase and side.
fn auth_section(m: &Manifest) -> Vec<Block> {
    let list = |v: &[u8]| v.iter().map(u8::to_string).collect::<Vec<_>>().join(", ");
    side_section(
        m,
        // Only where authentication was configured: elsewhere every row
        // would say 0 authenticated, which is what was asked for.
        |d| d.spec.expect.auth.is_some(),
        |p| &p.auth,
        |a| {
            vec![
                a.packets.to_string(),
                a.authenticated.to_string(),
                list(&a.types),
                list(&a.key_ids),
                a.sequence_next.to_string(),
                a.sequence_same.to_string(),
                a.sequence_other.to_string(),
            ]
        },
        "Authentication on the capture (RFC 5880 6.7), each side's control packets: how many, how many with the A bit, the Auth Types and Key IDs they carried, and between consecutive keyed packets of one sender whether the Sequence Number went up by one, stayed, or did anything else (a meticulous sender shows +1 only). The analyzer holds no key: digests are the receivers' to verify.",
        &[
            ("packets", R),
            ("authenticated", R),
            ("types", L),
            ("key IDs", L),
            ("seq +1", R),
            ("seq same", R),
            ("seq other", R),
        ],
    )
}

/// Demand mode on the wire (`sessions.demand`), per DUT, phase and side.
fn demand_section(m: &Manifest) -> Vec<Block> {
    side_section(
        m,
        |d| d.spec.expect.demand.is_some(),
        |p| &p.demand,
        |s| {
            vec![
                s.packets.to_string(),
                s.demand_packets.to_string(),
                s.silences.to_string(),
                format!("{:.2}", s.silence_max_ms),
                s.polls.to_string(),
                s.finals.to_string(),
                format!("{:.2}", s.final_max_ms),
            ]
        },
        "Demand mode on the capture (RFC 5880 6.6), each side's control packets: how many, how many with D (asking the other side to stop), the silences the other side asked of it (kept out of the gap figures) and the longest in ms, the verification Polls it started, the Finals it sent and the slowest of them in ms from the start of the Poll it answered.",
        &[
            ("packets", R),
            ("with D", R),
            ("silences", R),
            ("longest silence", R),
            ("polls", R),
            ("finals", R),
            ("slowest Final", R),
        ],
    )
}

/// Each side's periodic gaps against its legal interval (RFC 5880 6.8.7),
/// for the DUTs whose peer runs timers of its own (`dut.peer_timers`):
/// there each direction has an interval of its own.
fn intervals_section(m: &Manifest) -> Vec<Block> {
    let ms = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}"));
    side_section(
        m,
        |d| d.spec.peer_timers.is_some(),
        |p| &p.intervals,
        |i| {
            vec![
                ms(i.legal_ms),
                i.gaps.to_string(),
                ms(i.shortest_ms),
                ms(i.longest_ms),
                i.too_soon.to_string(),
                i.late.to_string(),
            ]
        },
        "Each direction against its own interval (RFC 5880 6.8.7: the larger of the sender's Desired Min TX and the receiver's Required Min RX, from the wire): gaps between two Up packets, the shortest and longest, how many came sooner than 75 % of the interval (more often than allowed; a gap beside a Final aside) and how many later than the interval (0.5 ms of capture slack either way).",
        &[
            ("interval ms", R),
            ("gaps", R),
            ("shortest ms", R),
            ("longest ms", R),
            ("too soon", R),
            ("late", R),
        ],
    )
}

/// What decides each DUT's receive path, interface by interface
/// (`crate::receive_path`), and the drops its counters took in all phases.
fn receive_path_section(m: &Manifest) -> Vec<Block> {
    let mut rows = Vec::new();
    for d in &m.duts {
        for i in &d.receive_path {
            let dropped: u64 = (d.phases.iter())
                .flat_map(|p| &p.drops)
                .filter(|x| x.at == i.at && x.name == i.name)
                .flat_map(|x| x.moved().into_iter().map(|(_, n)| n))
                .sum();
            let irqs = if i.irqs.is_empty() {
                "none".to_string()
            } else {
                (i.irqs.iter())
                    .map(|q| format!("{} on {}", q.irq, q.affinity))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let firmware = if i.firmware.is_empty() {
                String::new()
            } else {
                format!(" ({})", i.firmware)
            };
            rows.push(vec![
                d.label.clone().into(),
                format!("{}/{}", i.at, i.name).into(),
                format!("{}{firmware}", i.driver).into(),
                (i.xdp.as_ref())
                    .map_or("-".into(), |x| format!("{} {}", x.program, x.mode))
                    .into(),
                format!(
                    "{}/{}",
                    i.rx_queues.map_or("?".into(), |n| n.to_string()),
                    i.tx_queues.map_or("?".into(), |n| n.to_string())
                )
                .into(),
                i.udp4_hash.clone().into(),
                i.flow_control.clone().into(),
                i.coalescing.clone().into(),
                irqs.into(),
                i.threaded_napi
                    .map_or("?", |on| if on { "on" } else { "off" })
                    .into(),
                dropped.to_string().into(),
            ]);
        }
    }
    section_blocks(
        "The receive path as each DUT's host reported it once its sessions were Up (driver and firmware from `ethtool -i`, the XDP mode the kernel reports in force, queues, the fields UDP over IPv4 is hashed on, flow control, coalescing, each queue's interrupt and its CPUs, threaded NAPI), and the frames its drop counters counted over all phases (a phase whose counters moved is named in the report's warnings).",
        &[
            ("DUT", L),
            ("interface", L),
            ("driver", L),
            ("XDP", L),
            ("rx/tx queues", R),
            ("UDP4 hash", L),
            ("flow control", L),
            ("coalescing", L),
            ("IRQs", L),
            ("threaded NAPI", L),
            ("dropped", R),
        ],
        rows,
    )
}

/// What ran: every program each DUT's run started, with its SHA-256 and
/// the first line of its `--version`.
pub(super) fn programs_section(m: &Manifest) -> Vec<Block> {
    let rows = (m.duts.iter())
        .flat_map(|d| {
            d.programs.iter().map(|p| {
                vec![
                    d.label.clone().into(),
                    p.role.clone().into(),
                    Cell::File(p.path.display().to_string()),
                    p.sha256.get(..16).unwrap_or(&p.sha256).into(),
                    p.version.clone().into(),
                    match p.seen_running {
                        Some(true) => "yes",
                        Some(false) => "no",
                        None => "-",
                    }
                    .into(),
                ]
            })
        })
        .collect();
    section_blocks(
        "The programs each DUT's run started: where, which file (the first 16 hex digits of its SHA-256), what it says it is (linecardd: its commit and build profile), and whether the daemon's process was seen running that very file (/proc/PID/exe, once ready).",
        &[
            ("DUT", L),
            ("role", L),
            ("path", L),
            ("sha256", L),
            ("version", L),
            ("seen running", L),
        ],
        rows,
    )
}

/// The tables of `summary.md` that a published file may embed by name
/// (`linecard tables`: `<!-- evidence: RUN_DIR NAME -->`), each with its
/// one-paragraph legend.
pub const SECTIONS: [&str; 11] = [
    "ladder",
    "faults",
    "families",
    "echo",
    "auth",
    "demand",
    "intervals",
    "cpu",
    "engine_view",
    "programs",
    "receive_path",
];

/// The blocks of section `name`.
fn section_of(name: &str, m: &Manifest) -> Option<Vec<Block>> {
    let render = match name {
        "ladder" => super::ladder::section,
        "faults" => faults_section,
        "families" => families_section,
        "echo" => echo_section,
        "auth" => auth_section,
        "demand" => demand_section,
        "intervals" => intervals_section,
        "cpu" => cpu_section,
        "engine_view" => engine_view_section,
        "programs" => programs_section,
        "receive_path" => receive_path_section,
        _ => return None,
    };
    Some(render(m))
}

/// The summary's table `name` (one of [`SECTIONS`]) of a run as Markdown,
/// legend first; `None` for an unknown name. Empty when the run has no
/// such figures.
pub fn section(name: &str, m: &Manifest) -> Option<String> {
    section_of(name, m).map(|blocks| markdown(&blocks))
}

/// `what: 1.56, 25.32 ms`, or nothing for no figures.
fn list_ms(what: &str, ms: &[f64]) -> String {
    if ms.is_empty() {
        return String::new();
    }
    let figures: Vec<String> = ms.iter().map(|v| format!("{v:.2}")).collect();
    format!("{what} {} ms", figures.join(", "))
}

/// The run's first paragraphs: what, its status, its setup.
fn heading(m: &Manifest) -> Vec<Block> {
    let peer_priority = match (m.scenario.peer, m.scenario.peer_rt_priority) {
        // The runner starts a linecardd peer on its rt backend, whose
        // loop sets SCHED_FIFO 90 itself (daemons::linecardd_config).
        (crate::scenario::PeerImplementation::Linecardd, _) => {
            "rt backend, SCHED_FIFO 90".to_string()
        }
        (_, 0) => "normal priority".to_string(),
        (_, p) => format!("SCHED_FIFO {p}"),
    };
    vec![
        Block::Heading(1, format!("{} ({})", m.scenario.name, m.run_id)),
        Block::text(m.scenario.description.clone()),
        Block::Paragraph(vec![
            Inline::Text("Status: ".into()),
            Inline::Bold(m.status.to_string()),
            Inline::Text(format!(
                ". Peer: {} ({peer_priority}); sessions {} x {} ms ({}). Host: kernel {}, DUT CPUs {:?}, sched_rt_runtime_us as shipped {}.",
                format!("{:?}", m.scenario.peer).to_lowercase(),
                m.scenario.sessions.multiplier,
                m.scenario.sessions.tx_interval_ms,
                m.scenario.sessions.family_name(),
                m.host.kernel,
                m.host.dut_cpus,
                m.host.sched_rt_runtime_us,
            )),
        ]),
        Block::text("DUT -> peer transmit gaps in ms, from the observer's capture; flaps: the larger of both directions."),
        Block::Table(bakeoff(m, Column::SUMMARY, Path::new(""))),
    ]
}

/// At scale: per phase, how many of the DUT's sessions flapped and
/// whether together (one stall of the DUT taking many down).
pub(super) fn flapped_together(d: &DutOutcome) -> Vec<String> {
    d.evidence
        .iter()
        .flat_map(|e| &e.phases)
        .filter(|p| p.sessions > 1)
        .map(|p| {
            format!(
                "{} in {}: {} sessions, {} flapped; the largest correlated flap took {} sessions within 100 ms.",
                d.label, p.profile, p.sessions, p.sessions_flapped, p.correlated_flaps
            )
        })
        .collect()
}

/// The notes on one DUT: sessions that flapped together, excused flaps
/// and gaps,
/// spoiled attempts, where its fast path ran, gaps that followed the
/// peer's, its control plane.
fn notes(d: &DutOutcome) -> Vec<String> {
    let mut notes = flapped_together(d);
    if let Some(e) = d.evidence.as_ref().filter(|e| e.excused_flaps() > 0) {
        notes.push(format!(
            "{}: {} of its flaps are excused from its verdict, the wire proving them not its own{}{}. The flaps column counts them.",
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
    if let Verdict::Excused(excused) = &d.verdict {
        notes.push(format!(
            "{}: {} of its gaps over its {} ms limit are excused from its verdict, each inside a disturbance of its CPUs measured in that very gap: {}. The max column counts them.",
            d.label,
            excused.len(),
            d.spec.expect.max_gap_ms.map_or("gap".into(), |ms| ms.to_string()),
            excused
                .iter()
                .map(|g| format!("{} (ending at {} ns)", g.describe(), g.end_ns))
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    for (i, spoiled) in d.spoiled_attempts.iter().enumerate() {
        notes.push(format!(
            "{}: attempt {} of {} was {} (capture `{}`).",
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
    let Some(e) = d.evidence.as_ref() else {
        return notes;
    };
    if let Some((on, total)) = e.fast_path_on_dut_cpus {
        notes.push(format!(
            "{}: BFD frames the fast path judged on the DUT's CPUs: {on} of {total}; its responder (own clock, first Down) ran at {}.",
            d.label,
            e.responder.as_deref().unwrap_or("an unreported policy")
        ));
    }
    if e.long_gaps_left_out > 0 {
        notes.push(format!(
            "{}: its manifest keeps the {} longest of its gaps over 1.2 intervals; {} shorter ones are left out (it did not pass), and the notes below count only those kept.",
            d.label,
            e.long_gaps.len(),
            e.long_gaps_left_out
        ));
    }
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
        notes.push(format!(
            "{}: {} gap(s) over 1.2 intervals followed the peer's own silence (longest {longest:.2} ms), which excuses none (the DUT's own clock sends whatever the peer does, RFC 5880 6.8.7); its longest gap over 1.2 intervals while the peer kept sending: {}.",
            d.label,
            mirrored.len(),
            if own.is_nan() { "none".to_string() } else { format!("{own:.2} ms") }
        ));
    }
    if let Some(Ok(what) | Err(what)) = e.control_plane_uninterrupted.as_ref() {
        notes.push(format!("{}: {what}.", d.label));
    }
    notes
}

/// `summary.md` as blocks.
pub fn summary(m: &Manifest) -> Vec<Block> {
    let mut blocks = heading(m);
    for name in SECTIONS {
        blocks.extend(section_of(name, m).unwrap_or_default());
    }
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
    blocks.push(Block::text(format!(
        "RT throttling per DUT (sched_rt_runtime_us during its run): {}",
        throttling.join("; ")
    )));
    if let Some(line) = softirq_threads_line(m) {
        blocks.push(Block::text(line));
    }
    blocks.extend(m.duts.iter().flat_map(notes).map(Block::text));
    blocks
}

/// The DUT's CPUs' softirq threads as each phase's end found them (the
/// scenario's `ksoftirqd_priority`, or the kernel's policy where it asked
/// none); `None` where no phase read them (older manifests, other sites).
fn softirq_threads_line(m: &Manifest) -> Option<String> {
    let per_dut: Vec<String> = (m.duts.iter())
        .filter_map(|d| {
            let mut seen: Vec<String> = Vec::new();
            for t in d.phases.iter().flat_map(|p| &p.softirq_threads) {
                let described = t.describe();
                if !seen.contains(&described) {
                    seen.push(described);
                }
            }
            let asked = match d.spec.ksoftirqd_priority {
                0 => "as shipped".to_string(),
                p => format!("asked SCHED_FIFO {p}"),
            };
            (!seen.is_empty()).then(|| format!("{} ({asked}): {}", d.label, seen.join(", ")))
        })
        .collect();
    (!per_dut.is_empty()).then(|| {
        format!(
            "The DUT CPUs' softirq threads, read from /proc at each phase's end (the receive path, XDP program and sweep timer the kernel defers to them run at this policy): {}",
            per_dut.join("; ")
        )
    })
}

/// `summary.md`.
pub fn summary_markdown(m: &Manifest) -> String {
    markdown(&summary(m))
}
