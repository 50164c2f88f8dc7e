//! The bake-off table, defined once: a row per DUT and phase with max
//! beside p99, the verdict as every table shows it (`measured` where
//! nothing was judged). `summary.md`, `linecard report` and the README's
//! evidence tables are views of it that pick their columns.

use super::document::{Align, Cell, Table};
use crate::manifest::Manifest;
use std::path::Path;

/// A column of the bake-off table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Column {
    Dut,
    /// The stress profile.
    Phase,
    /// The stress profile, and the phase's fault if it had one.
    PhaseWithFault,
    Flaps,
    P50,
    P99,
    P999,
    Max,
    /// Gaps over the budget (the detection time less a margin).
    OverBudget,
    /// The canary's longest stall on the DUT's CPUs: the stress bit.
    CanaryStall,
    Verdict,
    Capture,
}

impl Column {
    /// `summary.md`: the stress bit beside the figures.
    pub const SUMMARY: &'static [Column] = &[
        Column::Dut,
        Column::PhaseWithFault,
        Column::Flaps,
        Column::P50,
        Column::P99,
        Column::P999,
        Column::Max,
        Column::CanaryStall,
        Column::Verdict,
        Column::Capture,
    ];
    /// `linecard report`: gaps over budget beside the figures.
    pub const REPORT: &'static [Column] = &[
        Column::Dut,
        Column::Phase,
        Column::Flaps,
        Column::P50,
        Column::P99,
        Column::P999,
        Column::Max,
        Column::OverBudget,
        Column::Verdict,
        Column::Capture,
    ];
    /// A published table (the README, docs/): no local paths.
    pub const EVIDENCE: &'static [Column] = &[
        Column::Dut,
        Column::Phase,
        Column::Flaps,
        Column::P50,
        Column::P99,
        Column::P999,
        Column::Max,
        Column::Verdict,
    ];

    fn header(self) -> (&'static str, Align) {
        match self {
            Self::Dut => ("DUT", Align::Left),
            Self::Phase | Self::PhaseWithFault => ("phase", Align::Left),
            Self::Flaps => ("flaps", Align::Right),
            Self::P50 => ("p50 ms", Align::Right),
            Self::P99 => ("p99 ms", Align::Right),
            Self::P999 => ("p99.9 ms", Align::Right),
            Self::Max => ("max ms", Align::Right),
            Self::OverBudget => ("over budget", Align::Right),
            Self::CanaryStall => ("canary stall ms", Align::Right),
            Self::Verdict => ("verdict", Align::Left),
            Self::Capture => ("capture", Align::Left),
        }
    }
}

/// The run's bake-off table with `columns`; captures are named under
/// `captures_under` (the run's directory as the reader will see it).
pub fn bakeoff(m: &Manifest, columns: &[Column], captures_under: &Path) -> Table {
    let mut rows = Vec::new();
    for d in &m.duts {
        let verdict = d.shown_verdict();
        let capture = d
            .capture
            .as_ref()
            .map_or("-".into(), |c| captures_under.join(c).display().to_string());
        let phases = d.evidence.iter().flat_map(|e| &e.phases);
        let mut any = false;
        for p in phases {
            any = true;
            rows.push(
                columns
                    .iter()
                    .map(|column| match column {
                        Column::Dut => d.label.clone().into(),
                        Column::Phase => p.profile.clone().into(),
                        Column::PhaseWithFault => {
                            match p.fault.as_ref().and_then(|f| f.fault.as_ref()) {
                                Some(fault) => {
                                    format!("{} ({})", p.profile, fault.describe()).into()
                                }
                                None => p.profile.clone().into(),
                            }
                        }
                        Column::Flaps => p.flaps.to_string().into(),
                        Column::P50 => format!("{:.2}", p.p50_ms).into(),
                        Column::P99 => format!("{:.2}", p.p99_ms).into(),
                        Column::P999 => format!("{:.2}", p.p999_ms).into(),
                        Column::Max => format!("{:.2}", p.max_ms).into(),
                        Column::OverBudget => {
                            p.over_budget.map_or("-".into(), |n| n.to_string()).into()
                        }
                        Column::CanaryStall => format!("{:.1}", p.canary_stall_ms).into(),
                        Column::Verdict => Cell::Verdict(d.shown_verdict_in(&p.phase)),
                        Column::Capture => Cell::File(capture.clone()),
                    })
                    .collect(),
            );
        }
        if !any {
            // Nothing measured (unavailable, failed to start): one row
            // that says why.
            rows.push(
                columns
                    .iter()
                    .map(|column| match column {
                        Column::Dut => d.label.clone().into(),
                        Column::Verdict => Cell::Verdict(verdict.clone()),
                        Column::Capture => Cell::File(capture.clone()),
                        _ => "-".into(),
                    })
                    .collect(),
            );
        }
    }
    let header: Vec<(&str, Align)> = columns.iter().map(|c| c.header()).collect();
    Table::new(&header, rows)
}

/// Dual-stack: a row per DUT, family and phase, each family's sessions
/// judged alone, with the path that answered them; the verdict on each
/// family's first row, as every table shows it.
pub fn families(m: &Manifest) -> Table {
    let mut rows = Vec::new();
    for d in &m.duts {
        for f in &d.families {
            for (i, p) in f.phases.iter().enumerate() {
                rows.push(vec![
                    d.label.clone().into(),
                    f.family.name().into(),
                    if f.fast_path { "kernel" } else { "userspace" }.into(),
                    p.profile.clone().into(),
                    p.flaps.to_string().into(),
                    format!("{:.2}", p.p99_ms).into(),
                    format!("{:.2}", p.max_ms).into(),
                    Cell::Verdict(if i == 0 {
                        f.verdict.shown(&d.spec.expect_for(f.family), false)
                    } else {
                        String::new()
                    }),
                ]);
            }
        }
    }
    Table::new(
        &[
            ("DUT", Align::Left),
            ("family", Align::Left),
            ("path", Align::Left),
            ("phase", Align::Left),
            ("flaps", Align::Right),
            ("p99 ms", Align::Right),
            ("max ms", Align::Right),
            ("verdict", Align::Left),
        ],
        rows,
    )
}
