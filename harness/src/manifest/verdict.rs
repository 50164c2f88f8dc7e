//! A DUT's verdict: pass (outright, or with gaps a measured disturbance
//! excuses), fail, invalid (nothing judged) or unavailable.

use crate::scenario::Expectation;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "status", content = "why", rename_all = "snake_case")]
pub enum Verdict {
    /// Expectations held (a positive control: it flapped, as it must).
    Pass,
    /// Expectations held but for gaps over the gap limit, each inside a
    /// disturbance measured in that very gap that accounts for its excess
    /// (the scenario's `excused_gaps = "pass"`, the default): a pass the
    /// tables show apart, gap by gap.
    Excused(Vec<ExcusedGap>),
    Fail(String),
    /// The run cannot be trusted; its numbers are kept but judge nothing.
    Invalid(String),
    /// The design cannot run on this host.
    Unavailable(String),
}

/// One gap over a DUT's gap limit that a disturbance measured inside it
/// accounts for (`LongGap::excused_beyond`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ExcusedGap {
    /// The phase it ended in.
    pub phase: String,
    pub gap_ms: f64,
    /// The capture's timestamp of the packet that ended it
    /// (CLOCK_REALTIME ns), to find it in the capture.
    pub end_ns: i64,
    /// What covers it: `freeze`, `steal` or `canary stall`.
    pub by: String,
    /// How long that disturbance lasted inside the gap, ms.
    pub disturbed_ms: f64,
}

impl ExcusedGap {
    /// `L3#2 22.63 ms inside 17.3 ms of freeze`.
    pub fn describe(&self) -> String {
        format!(
            "{} {:.2} ms inside {:.1} ms of {}",
            self.phase, self.gap_ms, self.disturbed_ms, self.by
        )
    }
}

/// "1 gap" or "3 gaps".
fn gaps(n: usize) -> String {
    format!("{n} gap{}", if n == 1 { "" } else { "s" })
}

impl Verdict {
    /// The verdict with its reason, as tables and logs show it.
    pub fn describe(&self) -> String {
        match self {
            Self::Pass => "pass".into(),
            Self::Excused(excused) => format!(
                "pass, {} excused ({})",
                gaps(excused.len()),
                excused
                    .iter()
                    .map(ExcusedGap::describe)
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            Self::Fail(w) => format!("FAIL: {w}"),
            Self::Invalid(w) => format!("INVALID: {w}"),
            Self::Unavailable(w) => format!("unavailable: {w}"),
        }
    }

    /// Whether the DUT held what it was judged on (an excused pass too).
    pub fn passed(&self) -> bool {
        matches!(self, Self::Pass | Self::Excused(_))
    }

    /// The gaps a disturbance excused in `phase` (none for another verdict).
    pub fn excused_in<'a>(&'a self, phase: &'a str) -> impl Iterator<Item = &'a ExcusedGap> {
        let excused = match self {
            Self::Excused(excused) => excused.as_slice(),
            _ => &[],
        };
        excused.iter().filter(move |g| g.phase == phase)
    }

    /// The verdict as every table shows it (summary.md, `linecard
    /// report`, the README's evidence tables): a positive control's pass
    /// says it flapped, and a pass by limits that judge nothing says
    /// `measured`: nothing was held against its figures.
    pub fn shown(&self, expect: &Expectation, faults_judged: bool) -> String {
        match self {
            Self::Pass if expect.positive_control => "flapped (positive control)".into(),
            Self::Pass if !expect.judges_anything() && !faults_judged => "measured".into(),
            Self::Excused(excused) => format!("pass, {} excused", gaps(excused.len())),
            // One table row: a tool's multi-line error on one line.
            v => v.describe().replace('\n', " "),
        }
    }

    /// The verdict on one phase's row: an excused pass says how many of
    /// its gaps this phase's were (a clean phase of that run: `pass`).
    pub fn shown_in(&self, phase: &str, expect: &Expectation, faults_judged: bool) -> String {
        match self {
            Self::Excused(_) => match self.excused_in(phase).count() {
                0 => "pass".into(),
                n => format!("pass, {} excused", gaps(n)),
            },
            v => v.shown(expect, faults_judged),
        }
    }
}
