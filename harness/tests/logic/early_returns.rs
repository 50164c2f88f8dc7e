//! No test can pass without asserting: every early `return` in this test
//! tree is listed with the guard that precedes it, and each guard is one of
//! the few that cannot turn into a silent pass:
//! - `privileged(..)`, or a check of `LINECARD_REQUIRE_PRIVILEGED` (a
//!   missing browser): not root. Under the test command
//!   (`LINECARD_REQUIRE_PRIVILEGED=1`, set by `scripts/test.sh`) it panics
//!   instead of returning, so in CI it is a failure, never a skip.
//! - `judged_run(..)`, `run_shortened(..)`, `inconclusive_run(..)`,
//!   `inconclusive(..)`: every attempt was spoiled by a disturbance
//!   measured inside the gap it excuses; the outcome is recorded and
//!   `scripts/outcomes.sh` counts the test inconclusive, not passed.
//! - `LINECARD_UPDATE_SNAPSHOTS`: writing a snapshot on request (never set
//!   by the test command), instead of comparing with it.
//!
//! A return in a helper that is not a `#[test]` is the helper's result,
//! which its caller asserts on; it is listed, not judged. A return in a
//! `#[test]` behind any other guard fails this test, naming the line.
//! Run with `--nocapture` to print the list.

use std::path::Path;

/// The guards an early return may follow, and what each means.
const GUARDS: &[(&str, &str)] = &[
    (
        "privileged(",
        "not root: panics under the test command instead",
    ),
    (
        "LINECARD_REQUIRE_PRIVILEGED",
        "a missing tool: panics under the test command instead",
    ),
    ("judged_run(", "inconclusive, recorded and counted"),
    ("run_shortened(", "inconclusive, recorded and counted"),
    ("inconclusive_run(", "inconclusive, recorded and counted"),
    ("inconclusive(", "inconclusive, recorded and counted"),
    (
        "LINECARD_UPDATE_SNAPSHOTS",
        "writes the snapshot on request instead",
    ),
];

/// How many lines above a return its guard may start (a `let ... else`
/// spanning a call's arguments).
const GUARD_REACH: usize = 14;

struct EarlyReturn {
    at: String,
    function: String,
    in_test: bool,
    guard: Option<&'static str>,
}

fn early_returns(file: &Path) -> Vec<EarlyReturn> {
    let text = std::fs::read_to_string(file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    let (mut function, mut in_test) = (String::new(), false);
    for (i, line) in lines.iter().enumerate() {
        let code = line.trim_start();
        // A function at the file's top level: the unit a return leaves.
        if let Some(rest) = line
            .strip_prefix("fn ")
            .or_else(|| line.strip_prefix("pub fn "))
        {
            function = rest.split(['(', '<']).next().unwrap_or("").to_string();
            in_test = lines[..i]
                .iter()
                .rev()
                .take_while(|l| {
                    l.trim_start().starts_with("#[") || l.trim_start().starts_with("///")
                })
                .any(|l| l.trim() == "#[test]");
        }
        let is_return = code.starts_with("return;")
            || code.starts_with("return None;")
            || code.starts_with("return Ok(());");
        if !is_return {
            continue;
        }
        let reach = &lines[i.saturating_sub(GUARD_REACH)..i];
        let guard = GUARDS
            .iter()
            .find(|(pattern, _)| reach.iter().any(|l| l.contains(pattern)))
            .map(|(_, meaning)| *meaning);
        found.push(EarlyReturn {
            at: format!("{}:{}", file.file_name().unwrap().to_string_lossy(), i + 1),
            function: function.clone(),
            in_test,
            guard,
        });
    }
    found
}

#[test]
fn every_early_return_follows_a_guard_that_cannot_pass_silently() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    // Each test binary's root and the folder of its modules.
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .flat_map(|p| match p.is_dir() {
            true => std::fs::read_dir(&p)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect(),
            false => vec![p],
        })
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .collect();
    files.sort();
    let mut unguarded = Vec::new();
    let mut listed = 0;
    for file in &files {
        for r in early_returns(file) {
            listed += 1;
            let what = match (r.guard, r.in_test) {
                (Some(meaning), _) => meaning.to_string(),
                (None, false) => "a helper's result: its caller asserts".to_string(),
                (None, true) => {
                    unguarded.push(format!("{} in {}", r.at, r.function));
                    "UNGUARDED in a test".to_string()
                }
            };
            eprintln!("{:<22} {:<60} {what}", r.at, r.function);
        }
    }
    // Precondition: the scan found the tree's returns (a moved directory
    // would make this test pass on nothing).
    assert!(listed > 40, "only {listed} early returns found in {dir:?}");
    assert!(
        unguarded.is_empty(),
        "early returns in tests behind no recognised guard: {unguarded:#?}"
    );
}
