//! `linecard analyze`: captures in, per-flow statistics out (table or JSON);
//! the analysis and its files are `analysis_files`, which a run's judge
//! uses too.

use anyhow::{bail, Context, Result};
use linecard_capture_analyzer::model::Analysis;
use linecard_capture_analyzer::Phase;

/// Parses `NAME=START,END` (seconds since the epoch, fractions allowed).
pub fn parse_phase(spec: &str) -> Result<Phase> {
    let (name, range) = spec.split_once('=').context("expected NAME=START,END")?;
    let (start, end) = range.split_once(',').context("expected NAME=START,END")?;
    let secs = |s: &str| -> Result<i64> {
        let v: f64 = s
            .trim()
            .parse()
            .with_context(|| format!("{s:?} is not a number of seconds"))?;
        Ok((v * 1e9).round() as i64)
    };
    let (start_ns, end_ns) = (secs(start)?, secs(end)?);
    if name.is_empty() || end_ns <= start_ns {
        bail!("phase {spec:?}: needs a name and END after START");
    }
    Ok(Phase {
        name: name.to_string(),
        start_ns,
        end_ns,
    })
}

/// Phases recorded in a run manifest (`phases: [{name, start_ns, end_ns}]`).
pub fn manifest_phases(path: &std::path::Path) -> Result<Vec<Phase>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading manifest {}", path.display()))?;
    let manifest: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))?;
    let phases = manifest["phases"]
        .as_array()
        .with_context(|| format!("{}: no `phases` array", path.display()))?;
    phases
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let field = |key: &str| {
                p[key].as_i64().with_context(|| {
                    format!(
                        "{}: phases[{i}].{key} missing or not an integer",
                        path.display()
                    )
                })
            };
            let name = p["name"]
                .as_str()
                .with_context(|| format!("{}: phases[{i}].name missing", path.display()))?;
            Ok(Phase {
                name: name.to_string(),
                start_ns: field("start_ns")?,
                end_ns: field("end_ns")?,
            })
        })
        .collect()
}

/// The human table: one row per flow, max beside p99 always.
pub fn render(analysis: &Analysis) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "{:<34} {:>8} {:>8} {:>8} {:>8} {:>9} {:>6} {:>7}\n",
        "flow", "packets", "p50 ms", "p99 ms", "p99.9", "max ms", "flaps", ">budget"
    ));
    for f in &analysis.all.flows {
        let flow = format!("{}:{} > {}:{}", f.src, f.src_port, f.dst, f.dst_port);
        out.push_str(&format!(
            "{:<34} {:>8} {:>8.2} {:>8.2} {:>8.2} {:>9.2} {:>6} {:>7}\n",
            flow,
            f.packets,
            f.gap_ms.p50,
            f.gap_ms.p99,
            f.gap_ms.p999,
            f.gap_ms.max,
            f.flaps,
            f.over_budget
        ));
    }
    for p in &analysis.phases {
        out.push_str(&format!("phase {}:\n", p.name));
        for f in &p.result.flows {
            out.push_str(&format!(
                "  {}:{} > {}:{}  packets {} p50 {:.2} p99 {:.2} max {:.2} flaps {}\n",
                f.src,
                f.src_port,
                f.dst,
                f.dst_port,
                f.packets,
                f.gap_ms.p50,
                f.gap_ms.p99,
                f.gap_ms.max,
                f.flaps
            ));
        }
    }
    out
}
