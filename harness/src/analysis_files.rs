//! A capture's analysis and the files a run directory keeps of it
//! (analysis.json, flows.csv, packets.csv, the Parquet tables), in one
//! pass over the capture that other packet sinks can join: `linecard
//! analyze` and a run's judge (`run/verdict.rs`) both come here.

use anyhow::{Context, Result};
use linecard_capture_analyzer::analysis::{PacketSink, Tee};
#[cfg(feature = "parquet")]
use linecard_capture_analyzer::export::parquet::{write_flows, PacketParquet};
use linecard_capture_analyzer::export::{flows_csv, PacketCsv};
use linecard_capture_analyzer::model::Analysis;
use linecard_capture_analyzer::{analyze, Options};
use std::path::{Path, PathBuf};

/// Analyses `captures` in one pass, handing every control packet to each
/// of `sinks` too; with `out`, also writes analysis.json, flows.csv,
/// packets.csv, flows.parquet and packets.parquet there (through temporary
/// files and a rename).
pub fn analyse(
    captures: &[PathBuf],
    options: &Options,
    out: Option<&Path>,
    sinks: Vec<&mut dyn PacketSink>,
) -> Result<Analysis> {
    let Some(dir) = out else {
        return Ok(analyze(captures, options, Some(&mut Tee(sinks)))?);
    };
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let result = write_all(captures, options, dir, sinks);
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

fn write_all(
    captures: &[PathBuf],
    options: &Options,
    dir: &Path,
    sinks: Vec<&mut dyn PacketSink>,
) -> Result<Analysis> {
    let packets_tmp = dir.join(".packets.csv.tmp");
    let file = std::fs::File::create(&packets_tmp)
        .with_context(|| format!("creating {}", packets_tmp.display()))?;
    let mut csv = PacketCsv::new(std::io::BufWriter::new(file))?;
    #[cfg(feature = "parquet")]
    let parquet_tmp = dir.join(".packets.parquet.tmp");
    #[cfg(feature = "parquet")]
    let mut parquet = PacketParquet::create(&parquet_tmp).context("creating packets.parquet")?;
    let mut others = Tee(sinks);
    let analysis = analyze(
        captures,
        options,
        Some(&mut Tee(vec![
            &mut csv,
            #[cfg(feature = "parquet")]
            &mut parquet,
            &mut others,
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

fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))
}
