//! `linecard tables FILE [--check]`: the measured tables of a Markdown file
//! (the README), regenerated from the committed run directories they name.
//!
//! A table is published only between two markers that name its run:
//!
//! ```text
//! <!-- evidence: docs/evidence/bakeoff/20261204T130000Z -->
//! | DUT | phase | flaps | ... |
//! <!-- /evidence -->
//! ```
//!
//! The path is relative to the file's directory. Everything between the
//! markers is rewritten from that run's `manifest.json` by [`table`] (or,
//! for a `linecard conformance` run, its `conformance.json` by
//! `conformance::table`). A name after the path picks another table of the
//! run's `summary.md` instead (`<!-- evidence: docs/evidence/echo/RUN echo
//! -->`; the names are `export::summary::SECTIONS`), rendered by the same
//! code as the summary; with
//! `RUN compare OTHER` publishes `linecard compare RUN OTHER`. With
//! `--check` nothing is written and a table that differs from its evidence
//! is an error naming it. A number typed by hand between the markers does
//! not survive the next regeneration, and fails the check until then.

use crate::gate::load_manifest;
use crate::manifest::Manifest;
use anyhow::{bail, Context, Result};
use std::path::Path;

const OPEN: &str = "<!-- evidence: ";
const CLOSE: &str = "<!-- /evidence -->";

/// One run's table: the bake-off table's published columns
/// (`export::table`), and the run it came from.
pub fn table(m: &Manifest) -> String {
    use crate::export::document::{markdown, Block};
    use crate::export::table::{bakeoff, Column};
    markdown(&[
        Block::Table(bakeoff(m, Column::EVIDENCE, std::path::Path::new(""))),
        Block::text(format!(
            "(run {}, status {}: `{}`)",
            m.run_id, m.status, m.scenario.name
        )),
    ])
}

/// The run's summary table `name`, with the run it came from.
fn section_table(m: &Manifest, name: &str) -> Result<String> {
    let Some(text) = crate::export::summary::section(name, m) else {
        bail!(
            "no table {name:?} in a run's summary (the names: {})",
            crate::export::summary::SECTIONS.join(", ")
        );
    };
    if text.is_empty() {
        bail!("run {} has no {name} figures", m.run_id);
    }
    Ok(format!(
        "{text}\n(run {}, status {}: `{}`)\n",
        m.run_id, m.status, m.scenario.name
    ))
}

/// `text` with every marked table regenerated from its run under `base`.
pub fn regenerate(text: &str, base: &Path) -> Result<String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(OPEN) {
        let (before, marked) = rest.split_at(at);
        out.push_str(before);
        let line_end = marked
            .find('\n')
            .context("an evidence marker with nothing after it")?;
        let opening = &marked[..line_end];
        let run = opening
            .strip_prefix(OPEN)
            .and_then(|r| r.strip_suffix(" -->"))
            .with_context(|| format!("malformed evidence marker: {opening}"))?
            .trim();
        let Some(close) = marked.find(CLOSE) else {
            bail!("the evidence table of {run} has no closing {CLOSE}");
        };
        let (run, section) = match run.split_once(char::is_whitespace) {
            Some((run, section)) => (run, Some(section.trim())),
            None => (run, None),
        };
        let dir = base.join(run);
        // A conformance run, or a scenario's run.
        let fresh = if dir.join("conformance.json").exists() {
            crate::conformance::table(&crate::conformance::load(&dir)?)
        } else {
            let m = load_manifest(&dir)
                .with_context(|| format!("the evidence of a published table: {run}"))?;
            match section {
                None => table(&m),
                // `RUN compare OTHER`: `linecard compare RUN OTHER`, the run
                // directories named as the marker names them.
                Some(name) if name.starts_with("compare ") => {
                    let other = name["compare ".len()..].trim();
                    let theirs = load_manifest(&base.join(other))
                        .with_context(|| format!("the evidence of a published table: {other}"))?;
                    let c = crate::compare::compare_manifests(
                        (Path::new(run), &m),
                        (Path::new(other), &theirs),
                    );
                    crate::export::compare::markdown_body(&c)
                }
                Some(name) => section_table(&m, name)
                    .with_context(|| format!("the evidence of a published table: {run}"))?,
            }
        };
        out.push_str(opening);
        out.push('\n');
        out.push_str(&fresh);
        out.push_str(CLOSE);
        rest = &marked[close + CLOSE.len()..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The runs `text`'s tables name, in order.
pub fn runs(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix(OPEN)?.strip_suffix(" -->"))
        .filter_map(|r| r.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// What [`apply`] found.
pub struct Outcome {
    /// The runs the file's tables name, in order.
    pub runs: Vec<String>,
    /// With `check`: where the file first differs from its evidence.
    pub differs: Option<String>,
}

/// Rewrites `file`'s tables, or (`check`) says where they differ from
/// their evidence. An error is bad input: an unreadable file, a marker
/// without its end, a run directory without a manifest.
pub fn apply(file: &Path, check: bool) -> Result<Outcome> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let base = file.parent().unwrap_or(Path::new("."));
    let fresh = regenerate(&text, base)?;
    let runs = runs(&text);
    if fresh == text {
        return Ok(Outcome {
            runs,
            differs: None,
        });
    }
    if check {
        let first = text
            .lines()
            .zip(fresh.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| text.lines().count().min(fresh.lines().count()));
        let differs = format!(
            "{}: line {} differs from the evidence it names (regenerate with `linecard tables {}`):\n  file:     {}\n  evidence: {}",
            file.display(),
            first + 1,
            file.display(),
            text.lines().nth(first).unwrap_or(""),
            fresh.lines().nth(first).unwrap_or("")
        );
        return Ok(Outcome {
            runs,
            differs: Some(differs),
        });
    }
    std::fs::write(file, fresh).with_context(|| format!("writing {}", file.display()))?;
    Ok(Outcome {
        runs,
        differs: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_name_their_runs_and_unclosed_ones_are_refused() {
        let text =
            "intro\n<!-- evidence: docs/evidence/ci/1 -->\n| old |\n<!-- /evidence -->\ntail\n";
        assert_eq!(runs(text), vec!["docs/evidence/ci/1".to_string()]);
        let unclosed = "<!-- evidence: docs/evidence/ci/1 -->\n| old |\n";
        let err = regenerate(unclosed, Path::new("/nonexistent")).unwrap_err();
        assert!(format!("{err:#}").contains("no closing"), "{err:#}");
        let missing = regenerate(text, Path::new("/nonexistent")).unwrap_err();
        assert!(
            format!("{missing:#}").contains("docs/evidence/ci/1"),
            "{missing:#}"
        );
        // A marker may name a summary table after its run; the run is
        // still what it names.
        let sectioned =
            "<!-- evidence: docs/evidence/echo/2 echo -->\n| old |\n<!-- /evidence -->\n";
        assert_eq!(runs(sectioned), vec!["docs/evidence/echo/2".to_string()]);
        // No marker: nothing to do, the text unchanged.
        assert_eq!(regenerate("plain\n", Path::new(".")).unwrap(), "plain\n");
    }
}
