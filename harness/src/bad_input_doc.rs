//! `docs/bad-input.md` kept true: every test its table names exists where
//! it says, and every message it quotes is still said somewhere in the
//! code or asserted by a test.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure, with its line

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every `.rs` file's text under the crates' source and test trees.
fn sources() -> String {
    fn walk(dir: &Path, out: &mut String) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push_str(&std::fs::read_to_string(&path).unwrap_or_default());
            }
        }
    }
    let mut text = String::new();
    for krate in ["api", "common", "engine", "capture-analyzer", "harness"] {
        for tree in ["src", "tests"] {
            walk(&repo().join(krate).join(tree), &mut text);
        }
    }
    text
}

/// The backticked spans of a table cell.
fn quoted(cell: &str) -> Vec<&str> {
    cell.split('`').skip(1).step_by(2).collect()
}

#[test]
fn every_row_of_the_bad_input_table_names_a_test_that_exists_and_a_message_still_said() {
    let doc = std::fs::read_to_string(repo().join("docs/bad-input.md")).unwrap();
    let sources = sources();
    let rows: Vec<Vec<&str>> = doc
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| Input"))
        .map(|l| l.trim_matches('|').split(" | ").map(str::trim).collect())
        .collect();
    assert!(rows.len() >= 20, "the table has {} rows", rows.len());
    for row in rows {
        assert_eq!(row.len(), 5, "a row of five cells: {row:?}");
        let [file, test] = quoted(row[4])[..] else {
            panic!("the last cell names a file and a test: {row:?}");
        };
        let text = std::fs::read_to_string(repo().join(file))
            .unwrap_or_else(|e| panic!("{file}, named by docs/bad-input.md: {e}"));
        assert!(
            text.contains(&format!("fn {test}(")),
            "docs/bad-input.md names {file} {test}, which is not there"
        );
        // Messages with a placeholder (FILE, N, ...) are patterns, not text.
        for message in quoted(row[2]) {
            if ["FILE", " N", "...", "ctl "]
                .iter()
                .any(|p| message.contains(p))
            {
                continue;
            }
            assert!(
                sources.contains(message),
                "docs/bad-input.md quotes `{message}`, which no source says any more"
            );
        }
    }
}
