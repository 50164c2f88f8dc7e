//! `linecard report` as a document: the bake-off in one picture (HTML),
//! several runs side by side, then per run its setup, the bake-off table,
//! the ladder, the families, the sessions that flapped together, the
//! measurement-quality warnings, the per-DUT plots and the manifest (the
//! last two in HTML only).

use super::document::{self, Align, Block, Cell, Inline, Table};
use super::table::{bakeoff, Column};
use crate::manifest::Manifest;
use crate::report::RunView;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// Whether the document carries the plots and the manifest (HTML) or
/// not (Markdown).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Figures {
    Include,
    Omit,
}

/// The report in Markdown.
pub fn markdown(views: &[RunView]) -> String {
    // Markdown leaves figures out: building them would only waste time.
    document::markdown(&blocks(views, Figures::Omit).unwrap_or_default())
}

/// The report as one self-contained HTML page.
pub fn html(views: &[RunView]) -> Result<String> {
    Ok(document::html(
        "linecard report",
        &blocks(views, Figures::Include)?,
    ))
}

fn blocks(views: &[RunView], figures: Figures) -> Result<Vec<Block>> {
    let mut out = vec![Block::Heading(1, "linecard report".into())];
    if figures == Figures::Include {
        // The bake-off in one picture first: every DUT's own gaps, one plot.
        for v in views.iter().filter(|v| v.bakeoff.len() > 1) {
            let sessions = &v.manifest.scenario.sessions;
            let detection_ms = f64::from(sessions.multiplier) * sessions.tx_interval_ms as f64;
            out.push(Block::Heading(
                2,
                format!("The bake-off in one picture: {}", title(v)),
            ));
            out.push(Block::Figure {
                name: "bakeoff-ccdf.svg".into(),
                svg: crate::plots::bakeoff_ccdf(&v.bakeoff, detection_ms)?,
                caption: "Each DUT's transmit gaps on the observer's capture in its last phase; a line that reaches the detection time is a flap at the peer.".into(),
            });
        }
    }
    if views.len() > 1 {
        out.push(Block::Heading(
            2,
            "Side by side (flaps / max gap ms)".into(),
        ));
        out.push(Block::Table(side_by_side(views)));
    }
    for v in views {
        out.extend(run_blocks(v, figures)?);
    }
    Ok(out)
}

/// One run's part of the report.
fn run_blocks(v: &RunView, figures: Figures) -> Result<Vec<Block>> {
    let m = &v.manifest;
    let mut out = vec![
        Block::Heading(2, title(v)),
        Block::text(m.scenario.description.clone()),
        Block::Paragraph(vec![
            Inline::Text("Status: ".into()),
            Inline::Bold(m.status.to_string()),
            Inline::Text(format!(". {}", setup_line(m))),
        ]),
        Block::Table(bakeoff(m, Column::REPORT, &v.dir)),
        Block::text("Gaps are the DUT's transmit gaps on the observer's capture; flaps are the larger of both directions."),
    ];
    if let Some(table) = ladder(m) {
        out.push(Block::Heading(3, "Ladder (flaps / max gap ms)".into()));
        out.push(Block::Table(table));
    }
    let families = super::table::families(m);
    if !families.rows.is_empty() {
        out.push(Block::Heading(
            3,
            "Per address family, each judged alone".into(),
        ));
        out.push(Block::Table(families));
    }
    out.extend(
        m.duts
            .iter()
            .flat_map(super::summary::flapped_together)
            .map(Block::text),
    );
    let programs = super::summary::programs_section(m);
    if !programs.is_empty() {
        out.push(Block::Heading(3, "What ran".into()));
        out.extend(programs);
    }
    out.push(Block::Heading(3, "Measurement quality".into()));
    if v.warnings.is_empty() {
        out.push(Block::text("No warnings."));
    } else {
        out.push(Block::List(
            v.warnings.iter().map(ToString::to_string).collect(),
        ));
    }
    if figures == Figures::Include {
        for (dut, svgs) in &v.plots {
            out.push(Block::Heading(3, dut.clone()));
            for (name, svg) in svgs {
                out.push(Block::Figure {
                    name: (*name).into(),
                    svg: svg.clone(),
                    caption: format!("{dut} ({name})"),
                });
            }
        }
        out.push(Block::Details {
            summary: "Manifest".into(),
            text: serde_json::to_string_pretty(m)?,
        });
    }
    Ok(out)
}

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

/// (DUT, phase) -> per run "flaps / max ms" (the verdict where nothing
/// was measured), for runs side by side.
fn side_by_side(views: &[RunView]) -> Table {
    const PICKED: &[Column] = &[
        Column::Dut,
        Column::Phase,
        Column::Flaps,
        Column::Max,
        Column::Verdict,
    ];
    let tables: Vec<Table> = views
        .iter()
        .map(|v| bakeoff(&v.manifest, PICKED, Path::new("")))
        .collect();
    let text = |row: &[Cell], i: usize| row[i].text().to_string();
    let mut keys: Vec<(String, String)> = Vec::new();
    for row in tables.iter().flat_map(|t| &t.rows) {
        let key = (text(row, 0), text(row, 1));
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    let mut header = vec![
        ("DUT".to_string(), Align::Left),
        ("phase".to_string(), Align::Left),
    ];
    header.extend(views.iter().map(|v| (title(v), Align::Right)));
    let rows = keys
        .into_iter()
        .map(|(dut, phase)| {
            let mut cells: Vec<Cell> = vec![dut.clone().into(), phase.clone().into()];
            cells.extend(tables.iter().map(|t| {
                t.rows
                    .iter()
                    .find(|r| text(r, 0) == dut && text(r, 1) == phase)
                    .map_or("-".into(), |r| {
                        if text(r, 2) == "-" {
                            text(r, 4)
                        } else {
                            format!("{} / {}", text(r, 2), text(r, 3))
                        }
                    })
                    .into()
            }));
            cells
        })
        .collect();
    Table { header, rows }
}

/// The ladder view of a run with several phases: one row per DUT, one
/// column per phase, "flaps / max gap ms" in each cell. `None` for a run
/// with one phase.
fn ladder(m: &Manifest) -> Option<Table> {
    let mut phases: Vec<String> = Vec::new();
    for d in &m.duts {
        for p in d.evidence.iter().flat_map(|e| &e.phases) {
            if !phases.contains(&p.phase) {
                phases.push(p.phase.clone());
            }
        }
    }
    if phases.len() < 2 {
        return None;
    }
    let rows = m
        .duts
        .iter()
        .map(|d| {
            let mut cells: Vec<Cell> = vec![d.label.clone().into()];
            cells.extend(phases.iter().map(|name| {
                d.evidence
                    .iter()
                    .flat_map(|e| &e.phases)
                    .find(|p| &p.phase == name)
                    .map_or("-".into(), |p| format!("{} / {:.2}", p.flaps, p.max_ms))
                    .into()
            }));
            cells
        })
        .collect();
    let mut header = vec![("DUT".to_string(), Align::Left)];
    header.extend(phases.into_iter().map(|p| (p, Align::Right)));
    Some(Table { header, rows })
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
