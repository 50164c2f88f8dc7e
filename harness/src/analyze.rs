//! `linecard analyze`: captures in, per-flow statistics out (table or JSON).

use anyhow::{bail, Context, Result};
use linecard_capture_analyzer::analysis::Tee;
#[cfg(feature = "parquet")]
use linecard_capture_analyzer::export::parquet::{write_flows, PacketParquet};
use linecard_capture_analyzer::export::{flows_csv, PacketCsv};
use linecard_capture_analyzer::model::Analysis;
use linecard_capture_analyzer::{analyze, Options, Phase};
use std::path::PathBuf;

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

/// Runs the analysis; with `out`, also writes analysis.json, flows.csv,
/// packets.csv, flows.parquet and packets.parquet there (through temporary
/// files and a rename).
pub fn run(
    captures: &[PathBuf],
    options: &Options,
    out: Option<&std::path::Path>,
) -> Result<Analysis> {
    let Some(dir) = out else {
        return Ok(analyze(captures, options, None)?);
    };
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let result = write_all(captures, options, dir);
    if result.is_err() {
        // A failed write (a full disk) leaves no half-written temporary
        // behind; finished files stay.
        for tmp in [
            ".packets.csv.tmp",
            ".packets.parquet.tmp",
            ".flows.parquet.tmp",
            "flows.tmp",
            "analysis.tmp",
        ] {
            let _ = std::fs::remove_file(dir.join(tmp));
        }
    }
    result
}

fn write_all(captures: &[PathBuf], options: &Options, dir: &std::path::Path) -> Result<Analysis> {
    let packets_tmp = dir.join(".packets.csv.tmp");
    let file = std::fs::File::create(&packets_tmp)
        .with_context(|| format!("creating {}", packets_tmp.display()))?;
    let mut csv = PacketCsv::new(std::io::BufWriter::new(file))?;
    #[cfg(feature = "parquet")]
    let parquet_tmp = dir.join(".packets.parquet.tmp");
    #[cfg(feature = "parquet")]
    let mut parquet = PacketParquet::create(&parquet_tmp).context("creating packets.parquet")?;
    let analysis = analyze(
        captures,
        options,
        Some(&mut Tee(vec![
            &mut csv,
            #[cfg(feature = "parquet")]
            &mut parquet,
        ])),
    )?;
    csv.finish().context("writing packets.csv")?;
    std::fs::rename(&packets_tmp, dir.join("packets.csv"))?;
    #[cfg(feature = "parquet")]
    {
        parquet.finish().context("writing packets.parquet")?;
        std::fs::rename(&parquet_tmp, dir.join("packets.parquet"))?;
        let flows_tmp = dir.join(".flows.parquet.tmp");
        write_flows(&analysis, &flows_tmp).context("writing flows.parquet")?;
        std::fs::rename(&flows_tmp, dir.join("flows.parquet"))?;
    }
    write_atomically(&dir.join("flows.csv"), flows_csv(&analysis).as_bytes())?;
    write_atomically(
        &dir.join("analysis.json"),
        serde_json::to_string_pretty(&analysis)?.as_bytes(),
    )?;
    Ok(analysis)
}

fn write_atomically(path: &std::path::Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))
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
