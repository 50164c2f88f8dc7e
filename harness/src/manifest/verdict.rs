//! A DUT's verdict: pass, fail, invalid (nothing judged) or unavailable.

use crate::scenario::Expectation;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "status", content = "why", rename_all = "snake_case")]
pub enum Verdict {
    /// Expectations held (a positive control: it flapped, as it must).
    Pass,
    Fail(String),
    /// The run cannot be trusted; its numbers are kept but judge nothing.
    Invalid(String),
    /// The design cannot run on this host.
    Unavailable(String),
}

impl Verdict {
    /// The verdict with its reason, as tables and logs show it.
    pub fn describe(&self) -> String {
        match self {
            Self::Pass => "pass".into(),
            Self::Fail(w) => format!("FAIL: {w}"),
            Self::Invalid(w) => format!("INVALID: {w}"),
            Self::Unavailable(w) => format!("unavailable: {w}"),
        }
    }

    /// The verdict as every table shows it (summary.md, `linecard
    /// report`, the README's evidence tables): a positive control's pass
    /// says it flapped, and a pass by limits that judge nothing says
    /// `measured`: nothing was held against its figures.
    pub fn shown(&self, expect: &Expectation, faults_judged: bool) -> String {
        match self {
            Self::Pass if expect.positive_control => "flapped (positive control)".into(),
            Self::Pass if !expect.judges_anything() && !faults_judged => "measured".into(),
            // One table row: a tool's multi-line error on one line.
            v => v.describe().replace('\n', " "),
        }
    }

    pub fn label(&self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Fail(_) => "FAIL",
            Self::Invalid(_) => "INVALID",
            Self::Unavailable(_) => "unavailable",
        }
    }
}
