//! `linecard report RUN_DIR...`: what people look at. Markdown and one
//! self-contained HTML page (plots inline as SVG, no scripts, no network)
//! with the bake-off table, per-phase figures with max beside p99, plots
//! re-derived from each DUT's capture, the measurement-quality warnings,
//! the manifest and links to the captures; several runs side by side.

use crate::gate::load_manifest;
use crate::run::judge::Verdict;
use crate::run::Manifest;
use crate::warning::Warning;
use anyhow::{Context, Result};
use linecard_capture_analyzer::{analyze, Options};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// One run, loaded for reporting.
#[derive(Serialize)]
pub struct RunView {
    pub dir: PathBuf,
    pub manifest: Manifest,
    /// Measurement-quality warnings, per DUT and for the run.
    pub warnings: Vec<Warning>,
    /// Per DUT label: plots as (file name, SVG), drawn from its capture.
    #[serde(skip)]
    pub plots: Vec<(String, Vec<(&'static str, String)>)>,
    /// Per DUT ("label (phase)"): its own transmit flow's gap CCDF in its
    /// last phase, as (gap ms, share of gaps longer): the bake-off plot.
    #[serde(skip)]
    pub bakeoff: Vec<(String, Vec<(f64, f64)>)>,
}

/// The DUT's session addresses in a run: the lab's pairs, or the DUT
/// host's address in a three-host run.
fn dut_addresses(m: &Manifest) -> Vec<String> {
    if let Some(host) = m.scenario.ssh.as_ref().and_then(|s| s.dut.as_ref()) {
        return host.address.iter().map(|a| a.to_string()).collect();
    }
    crate::run::daemons::pairs(&m.scenario.sessions)
        .iter()
        .map(|p| p.dut.to_string())
        .collect()
}

pub fn load(run_dir: &Path) -> Result<RunView> {
    let manifest = load_manifest(run_dir)?;
    let mut warnings = Vec::new();
    if !manifest.status.is_complete() {
        warnings.push(Warning::RunNotComplete(manifest.status.clone()));
    }
    let mut plots = Vec::new();
    let mut bakeoff = Vec::new();
    let ours = dut_addresses(&manifest);
    for d in &manifest.duts {
        match &d.verdict {
            Verdict::Invalid(why) => warnings.push(Warning::Invalid {
                dut: d.label.clone(),
                why: why.clone(),
            }),
            Verdict::Fail(why) => warnings.push(Warning::Failed {
                dut: d.label.clone(),
                why: why.clone(),
            }),
            _ => {}
        }
        for (i, spoiled) in d.spoiled_attempts.iter().enumerate() {
            warnings.push(Warning::Spoiled {
                dut: d.label.clone(),
                attempt: i + 1,
                of: d.spoiled_attempts.len() + 1,
                verdict: format!("{:?}", spoiled.verdict),
            });
        }
        let Some(e) = &d.evidence else { continue };
        if e.steal_ms > 0.0 {
            warnings.push(Warning::Steal {
                dut: d.label.clone(),
                ms: e.steal_ms,
            });
        }
        if e.capture_dropped.unwrap_or(1) > 0 {
            warnings.push(Warning::CaptureDrops {
                dut: d.label.clone(),
                dropped: e.capture_dropped,
            });
        }
        let Some(capture) = &d.capture else { continue };
        let path = run_dir.join(capture);
        let phases = d
            .phases
            .iter()
            .map(crate::run::PhaseRecord::window)
            .collect();
        let analysis = match analyze(
            std::slice::from_ref(&path),
            &Options {
                phases,
                timeline: true,
            },
            None,
        ) {
            Ok(a) => a,
            Err(err) => {
                warnings.push(Warning::CaptureUnreadable {
                    dut: d.label.clone(),
                    capture: path.display().to_string(),
                    error: err.to_string(),
                });
                continue;
            }
        };
        for w in &analysis.warnings {
            warnings.push(Warning::Capture {
                dut: d.label.clone(),
                code: w.code.to_string(),
                message: w.message.clone(),
            });
        }
        let own_flow = analysis.phases.last().and_then(|phase| {
            let flow = (phase.result.flows.iter())
                .filter(|f| ours.contains(&f.src))
                .max_by_key(|f| f.packets)?;
            Some((phase.name.clone(), flow))
        });
        if let Some((phase, flow)) = own_flow {
            bakeoff.push((
                format!("{} ({phase})", d.label),
                (flow.gap_ccdf.iter())
                    .map(|p| (p.gap_ms, p.fraction_above))
                    .collect(),
            ));
        }
        let svgs = crate::plots::render_all(&analysis)
            .with_context(|| format!("plotting {}", path.display()))?
            .into_iter()
            .filter(|(name, _)| *name != "session-maxima.svg" || analysis.all.sessions.len() > 1)
            .collect();
        plots.push((d.label.clone(), svgs));
    }
    Ok(RunView {
        dir: run_dir.to_path_buf(),
        manifest,
        warnings,
        plots,
        bakeoff,
    })
}

/// Rows of the bake-off table: (DUT, phase, flaps, p50, p99, p99.9, max,
/// over budget, verdict, capture).
fn rows(view: &RunView) -> Vec<[String; 10]> {
    let mut rows = Vec::new();
    for d in &view.manifest.duts {
        let capture = d
            .capture
            .as_ref()
            .map_or("-".into(), |c| view.dir.join(c).display().to_string());
        match d.evidence.as_ref().filter(|e| !e.phases.is_empty()) {
            None => rows.push([
                d.label.clone(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                d.shown_verdict(),
                capture,
            ]),
            Some(e) => {
                for p in &e.phases {
                    rows.push([
                        d.label.clone(),
                        p.profile.clone(),
                        p.flaps.to_string(),
                        format!("{:.2}", p.p50_ms),
                        format!("{:.2}", p.p99_ms),
                        format!("{:.2}", p.p999_ms),
                        format!("{:.2}", p.max_ms),
                        p.over_budget.map_or("-".into(), |n| n.to_string()),
                        d.shown_verdict(),
                        capture.clone(),
                    ]);
                }
            }
        }
    }
    rows
}

const HEADER: [&str; 10] = [
    "DUT",
    "phase",
    "flaps",
    "p50 ms",
    "p99 ms",
    "p99.9 ms",
    "max ms",
    "over budget",
    "verdict",
    "capture",
];

fn title(view: &RunView) -> String {
    format!("{} / {}", view.manifest.scenario.name, view.manifest.run_id)
}

fn setup_line(m: &Manifest) -> String {
    format!(
        "{} sessions {} x {} ms against {}; kernel {}, DUT CPUs {:?} of {:?}, sched_rt_runtime_us {}, git {}",
        m.scenario.sessions.family_name(),
        m.scenario.sessions.multiplier,
        m.scenario.sessions.tx_interval_ms,
        format!("{:?}", m.scenario.peer).to_lowercase(),
        m.host.kernel,
        m.host.dut_cpus,
        m.host.online_cpus,
        m.host.sched_rt_runtime_us,
        m.host.git_revision
    )
}

/// (DUT, phase) -> per run "flaps / max ms", for side-by-side runs.
fn comparison(views: &[RunView]) -> Vec<(String, String, Vec<String>)> {
    let mut keys: Vec<(String, String)> = Vec::new();
    for v in views {
        for r in rows(v) {
            let key = (r[0].clone(), r[1].clone());
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
    }
    keys.into_iter()
        .map(|(dut, phase)| {
            let cells = views
                .iter()
                .map(|v| {
                    rows(v)
                        .into_iter()
                        .find(|r| r[0] == dut && r[1] == phase)
                        .map_or("-".into(), |r| {
                            if r[2] == "-" {
                                r[8].clone()
                            } else {
                                format!("{} / {}", r[2], r[6])
                            }
                        })
                })
                .collect();
            (dut, phase, cells)
        })
        .collect()
}

/// At scale: per DUT and phase, how many sessions flapped and whether
/// together (one stall of the DUT taking many down).
fn scale_lines(view: &RunView) -> Vec<String> {
    let mut lines = Vec::new();
    for d in &view.manifest.duts {
        for p in d
            .evidence
            .iter()
            .flat_map(|e| &e.phases)
            .filter(|p| p.sessions > 1)
        {
            lines.push(format!(
                "{} in {}: {} sessions, {} flapped; the largest correlated flap took {} sessions within 100 ms.",
                d.label, p.profile, p.sessions, p.sessions_flapped, p.correlated_flaps
            ));
        }
    }
    lines
}

const FAMILY_HEADER: [&str; 8] = [
    "DUT", "family", "path", "phase", "flaps", "p99 (ms)", "max (ms)", "verdict",
];

/// Dual-stack: one row per DUT, family and phase, each family judged alone.
fn family_rows(view: &RunView) -> Vec<[String; 8]> {
    let mut rows = Vec::new();
    for d in &view.manifest.duts {
        for f in &d.families {
            for (i, p) in f.phases.iter().enumerate() {
                rows.push([
                    d.label.clone(),
                    f.family.name().into(),
                    if f.fast_path { "kernel" } else { "userspace" }.into(),
                    p.profile.clone(),
                    p.flaps.to_string(),
                    format!("{:.2}", p.p99_ms),
                    format!("{:.2}", p.max_ms),
                    if i == 0 {
                        f.verdict.shown(&d.spec.expect_for(f.family), false)
                    } else {
                        String::new()
                    },
                ]);
            }
        }
    }
    rows
}

struct Ladder {
    phases: Vec<String>,
    /// DUT label and one cell per phase.
    rows: Vec<(String, Vec<String>)>,
}

/// The ladder view of a run with several phases: one row per DUT, one
/// column per phase, "flaps / max gap ms" in each cell. `None` for a run
/// with one phase.
fn ladder(view: &RunView) -> Option<Ladder> {
    let mut phases: Vec<String> = Vec::new();
    for d in &view.manifest.duts {
        for p in d.evidence.iter().flat_map(|e| &e.phases) {
            if !phases.contains(&p.phase) {
                phases.push(p.phase.clone());
            }
        }
    }
    if phases.len() < 2 {
        return None;
    }
    let rows = view
        .manifest
        .duts
        .iter()
        .map(|d| {
            let cells = phases
                .iter()
                .map(|name| {
                    d.evidence
                        .iter()
                        .flat_map(|e| &e.phases)
                        .find(|p| &p.phase == name)
                        .map_or("-".into(), |p| format!("{} / {:.2}", p.flaps, p.max_ms))
                })
                .collect();
            (d.label.clone(), cells)
        })
        .collect();
    Some(Ladder { phases, rows })
}

pub fn markdown(views: &[RunView]) -> String {
    let mut out = String::from("# linecard report\n\n");
    if views.len() > 1 {
        out.push_str("## Side by side (flaps / max gap ms)\n\n| DUT | phase |");
        for v in views {
            out.push_str(&format!(" {} |", title(v)));
        }
        out.push_str("\n|---|---|");
        out.push_str(&"---|".repeat(views.len()));
        out.push('\n');
        for (dut, phase, cells) in comparison(views) {
            out.push_str(&format!("| {dut} | {phase} | {} |\n", cells.join(" | ")));
        }
        out.push('\n');
    }
    for v in views {
        out.push_str(&format!(
            "## {}\n\n{}\n\nStatus: **{}**. {}\n\n",
            title(v),
            v.manifest.scenario.description,
            v.manifest.status,
            setup_line(&v.manifest)
        ));
        out.push_str(&format!(
            "| {} |\n|{}\n",
            HEADER.join(" | "),
            "---|".repeat(HEADER.len())
        ));
        for r in rows(v) {
            let mut r = r;
            r[9] = format!("`{}`", r[9]);
            out.push_str(&format!("| {} |\n", r.join(" | ")));
        }
        out.push_str("\nGaps are the DUT's transmit gaps on the observer's capture; flaps are the larger of both directions.\n\n");
        if let Some(Ladder { phases, rows }) = ladder(v) {
            out.push_str(&format!(
                "Ladder (flaps / max gap ms):\n\n| DUT | {} |\n|---|{}\n",
                phases.join(" | "),
                "---|".repeat(phases.len())
            ));
            for (dut, cells) in rows {
                out.push_str(&format!("| {dut} | {} |\n", cells.join(" | ")));
            }
            out.push('\n');
        }
        let families = family_rows(v);
        if !families.is_empty() {
            out.push_str(&format!(
                "Per address family, each judged alone:\n\n| {} |\n|{}\n",
                FAMILY_HEADER.join(" | "),
                "---|".repeat(FAMILY_HEADER.len())
            ));
            for r in families {
                out.push_str(&format!("| {} |\n", r.join(" | ")));
            }
            out.push('\n');
        }
        for line in scale_lines(v) {
            out.push_str(&format!("{line}\n\n"));
        }
        if v.warnings.is_empty() {
            out.push_str("Measurement quality: no warnings.\n\n");
        } else {
            out.push_str("Measurement quality:\n\n");
            for w in &v.warnings {
                out.push_str(&format!("- {w}\n"));
            }
            out.push('\n');
        }
    }
    out
}

/// Escapes text for HTML and XML (element content and quoted attributes).
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const STYLE: &str = "body{font-family:sans-serif;margin:2em;max-width:1200px;color:#222}\
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}\
td:first-child,th:first-child,td:nth-child(2),td:nth-child(9){text-align:left}\
.pass{color:#070}.fail{color:#b00;font-weight:bold}.invalid{color:#a60;font-weight:bold}.unavailable{color:#666}.measured{color:#333}\
figure{margin:1em 0}figure svg{max-width:100%;height:auto;border:1px solid #eee}pre{background:#f6f6f6;padding:1em;overflow:auto}";

fn verdict_class(text: &str) -> &'static str {
    if text.starts_with("FAIL") {
        "fail"
    } else if text.starts_with("INVALID") {
        "invalid"
    } else if text.starts_with("unavailable") {
        "unavailable"
    } else if text == "measured" {
        "measured"
    } else {
        "pass"
    }
}

pub fn html(views: &[RunView]) -> Result<String> {
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>linecard report</title><style>{STYLE}</style></head><body>\n<h1>linecard report</h1>\n"
    );
    // The bake-off in one picture first: every DUT's own gaps, one plot.
    for v in views.iter().filter(|v| v.bakeoff.len() > 1) {
        let sessions = &v.manifest.scenario.sessions;
        let detection_ms = f64::from(sessions.multiplier) * sessions.tx_interval_ms as f64;
        let svg = crate::plots::bakeoff_ccdf(&v.bakeoff, detection_ms)?;
        out.push_str(&format!(
            "<h2>The bake-off in one picture: {}</h2>\n<figure class=\"plot\" data-plot=\"bakeoff-ccdf.svg\">{svg}<figcaption>Each DUT's transmit gaps on the observer's capture in its last phase; a line that reaches the detection time is a flap at the peer.</figcaption></figure>\n",
            esc(&title(v))
        ));
    }
    if views.len() > 1 {
        out.push_str(
            "<h2>Side by side (flaps / max gap ms)</h2>\n<table><tr><th>DUT</th><th>phase</th>",
        );
        for v in views {
            out.push_str(&format!("<th>{}</th>", esc(&title(v))));
        }
        out.push_str("</tr>\n");
        for (dut, phase, cells) in comparison(views) {
            out.push_str(&format!(
                "<tr><td>{}</td><td>{}</td>",
                esc(&dut),
                esc(&phase)
            ));
            for c in cells {
                out.push_str(&format!("<td>{}</td>", esc(&c)));
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</table>\n");
    }
    for v in views {
        out.push_str(&format!(
            "<section><h2>{}</h2><p>{}</p><p>Status: <b>{}</b>. {}</p>\n<table><tr>",
            esc(&title(v)),
            esc(&v.manifest.scenario.description),
            esc(&v.manifest.status.to_string()),
            esc(&setup_line(&v.manifest))
        ));
        for h in HEADER {
            out.push_str(&format!("<th>{h}</th>"));
        }
        out.push_str("</tr>\n");
        for r in rows(v) {
            out.push_str("<tr>");
            for (i, cell) in r.iter().enumerate() {
                match i {
                    8 => out.push_str(&format!(
                        "<td class=\"{}\">{}</td>",
                        verdict_class(cell),
                        esc(cell)
                    )),
                    9 if cell != "-" => out.push_str(&format!(
                        "<td><a href=\"file://{}\">pcap</a></td>",
                        esc(cell)
                    )),
                    _ => out.push_str(&format!("<td>{}</td>", esc(cell))),
                }
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</table>\n<p>Gaps are the DUT's transmit gaps on the observer's capture; flaps are the larger of both directions.</p>\n");
        if let Some(Ladder { phases, rows }) = ladder(v) {
            out.push_str("<h3>Ladder (flaps / max gap ms)</h3>\n<table><tr><th>DUT</th>");
            for p in &phases {
                out.push_str(&format!("<th>{}</th>", esc(p)));
            }
            out.push_str("</tr>\n");
            for (dut, cells) in rows {
                out.push_str(&format!("<tr><td>{}</td>", esc(&dut)));
                for c in cells {
                    out.push_str(&format!("<td>{}</td>", esc(&c)));
                }
                out.push_str("</tr>\n");
            }
            out.push_str("</table>\n");
        }
        let families = family_rows(v);
        if !families.is_empty() {
            out.push_str("<h3>Per address family, each judged alone</h3>\n<table><tr>");
            for h in FAMILY_HEADER {
                out.push_str(&format!("<th>{h}</th>"));
            }
            out.push_str("</tr>\n");
            for r in families {
                out.push_str("<tr>");
                for (i, cell) in r.iter().enumerate() {
                    match i {
                        7 => out.push_str(&format!(
                            "<td class=\"{}\">{}</td>",
                            verdict_class(cell),
                            esc(cell)
                        )),
                        _ => out.push_str(&format!("<td>{}</td>", esc(cell))),
                    }
                }
                out.push_str("</tr>\n");
            }
            out.push_str("</table>\n");
        }
        for line in scale_lines(v) {
            out.push_str(&format!("<p>{}</p>\n", esc(&line)));
        }
        out.push_str("<h3>Measurement quality</h3>\n");
        if v.warnings.is_empty() {
            out.push_str("<p>No warnings.</p>\n");
        } else {
            out.push_str("<ul>");
            for w in &v.warnings {
                out.push_str(&format!("<li>{}</li>", esc(&w.to_string())));
            }
            out.push_str("</ul>\n");
        }
        for (dut, svgs) in &v.plots {
            out.push_str(&format!("<h3>{}</h3>\n", esc(dut)));
            for (name, svg) in svgs {
                out.push_str(&format!("<figure class=\"plot\" data-plot=\"{name}\">{svg}<figcaption>{} ({name})</figcaption></figure>\n", esc(dut)));
            }
        }
        out.push_str(&format!(
            "<details><summary>Manifest</summary><pre>{}</pre></details></section>\n",
            esc(&serde_json::to_string_pretty(&v.manifest)?)
        ));
    }
    out.push_str("</body></html>\n");
    Ok(out)
}

/// Writes the requested formats into `out`; returns the paths written.
pub fn write(views: &[RunView], out: &Path, formats: &[String]) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let stem = views
        .iter()
        .map(|v| format!("{}-{}", v.manifest.scenario.name, v.manifest.run_id))
        .collect::<Vec<_>>()
        .join("-vs-");
    let mut written = Vec::new();
    for f in formats {
        let (ext, body) = match f.as_str() {
            "md" => ("md", markdown(views)),
            "html" => ("html", html(views)?),
            "json" => ("json", serde_json::to_string_pretty(views)?),
            other => anyhow::bail!("--format {other}: must be md, html or json"),
        };
        let path = out.join(format!("{stem}.{ext}"));
        std::fs::write(&path, body).with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}
