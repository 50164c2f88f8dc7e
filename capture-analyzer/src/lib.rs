//! The capture analyzer: BFD captures in, per-flow gap distributions, flaps,
//! budgets and latencies out. A pure library; `linecard analyze` is its CLI.
//!
//! Definitions follow `docs/measurement.md`: a flow is one
//! sender's packets (src, dst, src port, dst port); a gap is the time between
//! consecutive packets of a flow; percentiles are nearest rank; a flap is the
//! sender's state leaving Up.
//!
//! Invariant: this crate never depends on the engine (nor the engine on it).

pub mod analysis;
pub mod decode;
pub mod histogram;
pub mod model;
pub mod reader;
pub mod stats;

use analysis::{Analyzer, PacketSink};
pub mod export;
use decode::Decoded;
use model::*;
use reader::{CaptureError, FrameMeta, FrameSource};
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

/// A named time window, nanoseconds since the epoch, `start <= ts < end`.
#[derive(Clone, Debug)]
pub struct Phase {
    pub name: String,
    pub start_ns: i64,
    pub end_ns: i64,
}

#[derive(Debug, thiserror::Error)]
pub enum AnalyzeError {
    #[error("{path}: cannot open: {source}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Capture { path: PathBuf, source: CaptureError },
}

struct Source {
    path: PathBuf,
    frames: Box<dyn FrameSource>,
    /// The next frame, copied out (only when merging several files).
    pending: Option<FrameMeta>,
    buf: Vec<u8>,
    count: u64,
}

impl Source {
    fn open(path: &Path) -> Result<Self, AnalyzeError> {
        let file = File::open(path).map_err(|source| AnalyzeError::Open {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_reader(path, Box::new(file))
    }

    fn from_reader(path: &Path, read: Box<dyn Read>) -> Result<Self, AnalyzeError> {
        let frames = reader::open(read).map_err(|source| AnalyzeError::Capture {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(Self {
            path: path.to_path_buf(),
            frames,
            pending: None,
            buf: Vec::with_capacity(256),
            count: 0,
        })
    }

    fn advance(&mut self) -> Result<(), AnalyzeError> {
        let next = self
            .frames
            .next_frame()
            .map_err(|source| AnalyzeError::Capture {
                path: self.path.clone(),
                source,
            })?;
        self.pending = next.map(|(meta, frame)| {
            self.buf.clear();
            self.buf.extend_from_slice(frame);
            meta
        });
        self.count += u64::from(self.pending.is_some());
        Ok(())
    }
}

/// What to compute beyond the defaults.
#[derive(Clone, Debug, Default)]
pub struct Options {
    pub phases: Vec<Phase>,
    /// Keep each flow's bounded gap time series (`gap_timeline`).
    pub timeline: bool,
}

/// Analyses captures, merged by timestamp (one file per observer port, for
/// example), over the whole capture and within each phase.
pub fn analyze_files(paths: &[PathBuf], phases: &[Phase]) -> Result<Analysis, AnalyzeError> {
    analyze(
        paths,
        &Options {
            phases: phases.to_vec(),
            timeline: false,
        },
        None,
    )
}

/// [`analyze_files`] with options, handing every control packet of the
/// whole capture to `sink` (per-packet exports).
pub fn analyze(
    paths: &[PathBuf],
    options: &Options,
    sink: Option<&mut dyn PacketSink>,
) -> Result<Analysis, AnalyzeError> {
    let sources = paths
        .iter()
        .map(|p| Source::open(p))
        .collect::<Result<Vec<_>, _>>()?;
    run_sources(sources, options, sink)
}

/// Analyses one capture from any reader (stdin, memory; the fuzz targets).
pub fn analyze_reader(
    name: &str,
    read: Box<dyn Read>,
    options: &Options,
) -> Result<Analysis, AnalyzeError> {
    run_sources(
        vec![Source::from_reader(Path::new(name), read)?],
        options,
        None,
    )
}

fn run_sources(
    mut sources: Vec<Source>,
    options: &Options,
    mut sink: Option<&mut dyn PacketSink>,
) -> Result<Analysis, AnalyzeError> {
    let phases = &options.phases;
    let mut all = Analyzer::new(None, options.timeline);
    let mut windows: Vec<Analyzer> = phases
        .iter()
        .map(|p| Analyzer::new(Some((p.start_ns, p.end_ns)), options.timeline))
        .collect();
    if let [source] = sources.as_mut_slice() {
        // One file: frames are analysed in place, without a copy.
        while let Some((meta, frame)) =
            source
                .frames
                .next_frame()
                .map_err(|e| AnalyzeError::Capture {
                    path: source.path.clone(),
                    source: e,
                })?
        {
            source.count += 1;
            feed(&mut all, &mut windows, meta, frame, sink.as_deref_mut());
        }
    } else {
        for source in &mut sources {
            source.advance()?;
        }
        // k-way merge by timestamp.
        while let Some((_, i)) = sources
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.pending.map(|m| (m.ts_ns, i)))
            .min()
        {
            let meta = sources[i]
                .pending
                .expect("the source chosen has a pending packet");
            feed(
                &mut all,
                &mut windows,
                meta,
                &sources[i].buf,
                sink.as_deref_mut(),
            );
            sources[i].advance()?;
        }
    }
    let files: Vec<FileSummary> = sources
        .iter()
        .map(|s| FileSummary {
            path: s.path.display().to_string(),
            frames: s.count,
            truncated: s.frames.notes().truncated,
            corrupt_at_byte: s.frames.notes().corrupt_at_byte,
            capture_drops: s.frames.notes().capture_drops,
        })
        .collect();
    let all = all.finish();
    let phases: Vec<PhaseResult> = phases
        .iter()
        .zip(windows)
        .map(|(p, w)| PhaseResult {
            name: p.name.clone(),
            start_ns: p.start_ns,
            end_ns: p.end_ns,
            result: w.finish(),
        })
        .collect();
    let warnings = warnings(&files, &all);
    Ok(Analysis {
        schema_version: SCHEMA_VERSION,
        files,
        warnings,
        all,
        phases,
    })
}

#[inline]
fn feed(
    all: &mut Analyzer,
    windows: &mut [Analyzer],
    meta: FrameMeta,
    frame: &[u8],
    sink: Option<&mut (dyn PacketSink + '_)>,
) {
    if meta.ts_ns == i64::MIN {
        all.integrity.untimed_frames += 1;
        return;
    }
    if meta.orig_len as usize > frame.len() {
        all.integrity.snapped_frames += 1;
    }
    match decode::decode(meta.link, frame) {
        Decoded::NotBfd => all.integrity.other_frames += 1,
        Decoded::Malformed(reason) => all.malformed(reason),
        Decoded::Bfd(d) => {
            all.datagram(meta.ts_ns, &d, sink);
            for w in windows.iter_mut() {
                if w.in_window(meta.ts_ns) {
                    w.datagram(meta.ts_ns, &d, None);
                } else if w.before_window(meta.ts_ns) {
                    w.echo_before_window(&d);
                }
            }
        }
    }
}

fn warnings(files: &[FileSummary], all: &WindowResult) -> Vec<Warning> {
    let mut out = Vec::new();
    for f in files {
        if f.truncated {
            out.push(Warning {
                code: "truncated-capture",
                message: format!(
                    "{} ends inside a record (was the capture killed?); analysed what it holds",
                    f.path
                ),
            });
        }
        if let Some(at) = f.corrupt_at_byte {
            out.push(Warning {
                code: "corrupt-capture",
                message: format!(
                    "{}: unreadable record at byte {at}; analysed what came before",
                    f.path
                ),
            });
        }
        if let Some(drops) = f.capture_drops.filter(|&d| d > 0) {
            out.push(Warning {
                code: "capture-drops",
                message: format!("{}: the capturing side dropped {drops} packets; gaps may be artefacts of the capture (raise the buffer: tcpdump -B)", f.path),
            });
        }
    }
    let i = &all.integrity;
    if i.out_of_order > 0 {
        out.push(Warning { code: "out-of-order", message: format!("{} packets had timestamps earlier than their flow's previous packet; their gaps were not counted", i.out_of_order) });
    }
    let malformed: u64 = i.malformed.iter().map(|(_, n)| n).sum();
    if malformed > 0 {
        out.push(Warning {
            code: "malformed-bfd",
            message: format!(
                "{malformed} frames on BFD ports failed basic checks (see integrity.malformed)"
            ),
        });
    }
    if i.snapped_frames > 0 {
        out.push(Warning {
            code: "snapped-frames",
            message: format!(
                "{} frames were cut by the snap length; capture with -s 0",
                i.snapped_frames
            ),
        });
    }
    for f in all
        .flows
        .iter()
        .filter(|f| f.packets > 0 && f.packets < 100)
    {
        out.push(Warning {
            code: "few-samples",
            message: format!(
                "flow {}:{} -> {}:{} has only {} packets; its tail percentiles mean little",
                f.src, f.src_port, f.dst, f.dst_port, f.packets
            ),
        });
    }
    if all.flows.is_empty() {
        out.push(Warning {
            code: "no-bfd",
            message: "no BFD control packets found (ports 3784/4784)".into(),
        });
    }
    out
}

/// Convenience for one path.
pub fn analyze_file(path: &Path) -> Result<Analysis, AnalyzeError> {
    analyze_files(&[path.to_path_buf()], &[])
}
