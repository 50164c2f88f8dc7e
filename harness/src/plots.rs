//! SVG plots of an analysis, drawn with plotters (pure SVG: no font files,
//! no network, embeddable in the HTML report).

use anyhow::{anyhow, Context, Result};
use linecard_capture_analyzer::model::Analysis;
use plotters::prelude::*;
use std::path::{Path, PathBuf};

const SIZE: (u32, u32) = (900, 520);

fn palette(i: usize) -> RGBColor {
    const COLORS: [RGBColor; 8] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
    ];
    COLORS[i % COLORS.len()]
}

fn plot_err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("drawing failed: {e:?}")
}

/// The analysis's plots as SVG documents, by file name: `gap-ccdf.svg`,
/// `gap-timeline.svg` (when the analysis kept timelines) and
/// `session-maxima.svg`.
pub fn render_all(analysis: &Analysis) -> Result<Vec<(&'static str, String)>> {
    let mut plots = Vec::new();
    let mut svg = String::new();
    gap_ccdf(analysis, &mut svg)?;
    plots.push(("gap-ccdf.svg", svg));
    if analysis
        .all
        .flows
        .iter()
        .any(|f| !f.gap_timeline.is_empty())
    {
        let mut svg = String::new();
        gap_timeline(analysis, &mut svg)?;
        plots.push(("gap-timeline.svg", svg));
    }
    let mut svg = String::new();
    session_maxima(analysis, &mut svg)?;
    plots.push(("session-maxima.svg", svg));
    Ok(plots)
}

/// Writes [`render_all`]'s plots into `dir`; returns their paths.
pub fn write_all(analysis: &Analysis, dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut written = Vec::new();
    for (name, svg) in render_all(analysis)? {
        let path = dir.join(name);
        std::fs::write(&path, svg).with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

fn flow_label(f: &linecard_capture_analyzer::model::FlowResult) -> String {
    format!("{}:{} > {}:{}", f.src, f.src_port, f.dst, f.dst_port)
}

/// One line of a CCDF plot: its legend label (none past
/// [`MAX_LABELLED`]) and its (gap ms, share of gaps longer) points.
type CcdfLine = (Option<String>, Vec<(f64, f64)>);

/// Legends stay readable up to this many flows; beyond, lines are unlabelled.
const MAX_LABELLED: usize = 12;

fn gap_ccdf(analysis: &Analysis, out: &mut String) -> Result<()> {
    let series: Vec<CcdfLine> = (analysis.all.flows.iter())
        .enumerate()
        .map(|(i, f)| {
            let points = f.gap_ccdf.iter().map(|p| (p.gap_ms, p.fraction_above));
            ((i < MAX_LABELLED).then(|| flow_label(f)), points.collect())
        })
        .collect();
    ccdf_plot(out, "Gap CCDF per flow: P(gap > x)", &series, None)
}

/// The bake-off in one picture: each DUT's own gap CCDF (`series`: label,
/// (gap ms, share of gaps longer) points) on one pair of log axes, the
/// detection time marked: a line that reaches it is a flap.
pub fn bakeoff_ccdf(series: &[(String, Vec<(f64, f64)>)], detection_ms: f64) -> Result<String> {
    let labelled: Vec<CcdfLine> = series
        .iter()
        .map(|(label, points)| (Some(label.clone()), points.clone()))
        .collect();
    let mut out = String::new();
    ccdf_plot(
        &mut out,
        "Each DUT's transmit gaps: P(gap > x), detection time marked",
        &labelled,
        Some(detection_ms),
    )?;
    Ok(out)
}

/// Gap CCDFs on log axes, one line per series (labelled when it has a
/// label), a vertical line at `marker_ms` if given.
fn ccdf_plot(
    out: &mut String,
    caption: &str,
    series: &[CcdfLine],
    marker_ms: Option<f64>,
) -> Result<()> {
    let points = || series.iter().flat_map(|(_, p)| p.iter());
    let max_ms = points()
        .map(|p| p.0)
        .fold(marker_ms.unwrap_or(1.0), f64::max)
        * 1.5;
    let min_frac = points()
        .map(|p| p.1)
        .filter(|&p| p > 0.0)
        .fold(1.0, f64::min)
        .min(1e-3)
        / 2.0;
    let root = SVGBackend::with_string(out, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d((0.1f64..max_ms).log_scale(), (min_frac..1.0f64).log_scale())
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .x_desc("gap (ms)")
        .y_desc("share of gaps longer")
        .draw()
        .map_err(plot_err)?;
    if let Some(at) = marker_ms {
        chart
            .draw_series(LineSeries::new(
                [(at, min_frac), (at, 1.0)],
                BLACK.stroke_width(1),
            ))
            .map_err(plot_err)?
            .label(format!("detection time {at} ms"))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK.stroke_width(1)));
    }
    for (i, (label, points)) in series.iter().enumerate() {
        // Zero shares cannot sit on a log axis: stop the line there.
        let points: Vec<(f64, f64)> = (points.iter().copied())
            .filter(|&(gap, share)| gap > 0.0 && share > 0.0)
            .collect();
        let color = palette(i);
        let drawn = chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))
            .map_err(plot_err)?;
        if let Some(label) = label {
            drawn.label(label.clone()).legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        }
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(plot_err)?;
    root.present().map_err(plot_err)?;
    Ok(())
}

fn gap_timeline(analysis: &Analysis, out: &mut String) -> Result<()> {
    let flows = &analysis.all.flows;
    let origin = flows.iter().map(|f| f.first_ts_ns).min().unwrap_or(0);
    let end = flows
        .iter()
        .map(|f| f.last_ts_ns)
        .max()
        .unwrap_or(origin + 1);
    let secs = |ns: i64| (ns - origin) as f64 / 1e9;
    let max_ms = flows.iter().map(|f| f.gap_ms.max).fold(1.0, f64::max) * 1.5;
    let root = SVGBackend::with_string(out, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Largest gap over time (flaps red, phase boundaries grey)",
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..secs(end).max(1e-3), (0.1f64..max_ms).log_scale())
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .x_desc("time since first packet (s)")
        .y_desc("largest gap in bin (ms)")
        .draw()
        .map_err(plot_err)?;
    for phase in &analysis.phases {
        for at in [phase.start_ns, phase.end_ns] {
            let x = secs(at);
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(x, 0.1), (x, max_ms)],
                    RGBColor(150, 150, 150).stroke_width(1),
                )))
                .map_err(plot_err)?;
        }
    }
    for (i, f) in flows.iter().enumerate() {
        let color = palette(i);
        // Points, not lines: an empty bin (a silence) must not be drawn as
        // a ramp between its neighbours.
        let series =
            chart
                .draw_series(f.gap_timeline.iter().map(|p| {
                    Circle::new((secs(p.at_ns), p.max_gap_ms.max(0.1)), 2, color.filled())
                }))
                .map_err(plot_err)?;
        if i < MAX_LABELLED {
            series.label(flow_label(f)).legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        }
        for flap in &f.flap_events {
            let x = secs(flap.at_ns);
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(x, 0.1), (x, max_ms)],
                    RED.mix(0.5).stroke_width(1),
                )))
                .map_err(plot_err)?;
        }
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(plot_err)?;
    root.present().map_err(plot_err)?;
    Ok(())
}

fn session_maxima(analysis: &Analysis, out: &mut String) -> Result<()> {
    let maxima: Vec<f64> = analysis.all.sessions.iter().map(|s| s.max_gap_ms).collect();
    let top = maxima.iter().copied().fold(1.0, f64::max);
    const BINS: usize = 40;
    let width = top / BINS as f64;
    let mut counts = [0u32; BINS + 1];
    for m in &maxima {
        counts[((m / width) as usize).min(BINS)] += 1;
    }
    let root = SVGBackend::with_string(out, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("Per-session maximum gap ({} sessions)", maxima.len()),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(
            0f64..top + width,
            0u32..counts.iter().copied().max().unwrap_or(1) + 1,
        )
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .x_desc("maximum gap of the session (ms)")
        .y_desc("sessions")
        .draw()
        .map_err(plot_err)?;
    chart
        .draw_series(
            counts
                .iter()
                .enumerate()
                .filter(|(_, &c)| c > 0)
                .map(|(i, &c)| {
                    let x0 = i as f64 * width;
                    Rectangle::new([(x0, 0), (x0 + width, c)], palette(0).filled())
                }),
        )
        .map_err(plot_err)?;
    root.present().map_err(plot_err)?;
    Ok(())
}
