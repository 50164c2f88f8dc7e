//! `linecard report RUN_DIR...`: what people look at. This loads each run
//! (its manifest, the measurement-quality warnings, plots re-derived from
//! each DUT's capture) for `export::report` to write in the formats asked:
//! Markdown and one self-contained HTML page, JSON (the loaded views as
//! they are); several runs side by side.

use crate::gate::load_manifest;
use crate::manifest::verdict::Verdict;
use crate::manifest::Manifest;
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
pub(crate) fn dut_addresses(m: &Manifest) -> Vec<String> {
    if let Some(host) = m.scenario.ssh.as_ref().and_then(|s| s.dut.as_ref()) {
        return host.address.iter().map(|a| a.to_string()).collect();
    }
    crate::run::daemons::pairs(&m.scenario.sessions)
        .iter()
        .map(|p| p.dut.to_string())
        .collect()
}

/// A warning per phase and receive-path interface whose drop counters
/// moved.
fn drops_moved(d: &crate::manifest::DutOutcome) -> Vec<Warning> {
    let mut warnings = Vec::new();
    for phase in &d.phases {
        for drops in &phase.drops {
            let moved = drops.moved();
            if moved.is_empty() {
                continue;
            }
            warnings.push(Warning::DropsMoved {
                dut: d.label.clone(),
                phase: phase.name.clone(),
                interface: format!("{}/{}", drops.at, drops.name),
                moved: (moved.iter())
                    .map(|(name, delta)| format!("{name} +{delta}"))
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
    }
    warnings
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
        warnings.extend(drops_moved(d));
        let Some(e) = &d.evidence else { continue };
        if e.steal_ms > 0.0 {
            warnings.push(Warning::Steal {
                dut: d.label.clone(),
                ms: e.steal_ms,
            });
        }
        for outage in &e.connection_outages {
            warnings.push(Warning::ConnectionLost {
                dut: d.label.clone(),
                host: outage.host.clone(),
                seconds: (outage.end_ns - outage.start_ns) as f64 / 1e9,
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
            .map(crate::manifest::PhaseRecord::window)
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
