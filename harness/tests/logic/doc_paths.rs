//! The documents name only what exists: every path in backticks in
//! `ARCHITECTURE.md`, `README.md` and `docs/*.md` is a file or folder of
//! this repository, and nothing points outside it (a fact the project
//! depends on is written in its own `docs/`).

use crate::common::*;
use std::path::{Path, PathBuf};

/// Where a path in the documents may start: the repository, each crate,
/// each crate's `src/`, `docs/` (whose pages name `evidence/...`) and the
/// harness's tests (whose tiers are named as `lab/`, `runs/`).
fn roots() -> Vec<PathBuf> {
    let repo = repo();
    let mut roots = vec![repo.clone(), repo.join("docs"), repo.join("harness/tests")];
    for krate in [
        "api",
        "bpf-objects",
        "capture-analyzer",
        "common",
        "engine",
        "harness",
        "xdp",
    ] {
        roots.push(repo.join(krate));
        roots.push(repo.join(krate).join("src"));
    }
    roots
}

/// Paths that are not the repository's: what a run or a build writes, and
/// FRR's sources named as the origin of a fact.
fn made_elsewhere(path: &str) -> bool {
    ["target/", "results/", "bfdd/", "/"]
        .iter()
        .any(|p| path.starts_with(p))
}

/// Every file name under `dir` (the test's own scratch and build output
/// aside), to find a bare `judge.rs` wherever it lives.
fn file_names(dir: &Path, into: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') {
                file_names(&path, into);
            }
        } else {
            into.push(name);
        }
    }
}

/// The backticked words of `text` that look like paths.
fn named_paths(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|s| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-./".contains(c))
                && s.chars().any(|c| c.is_ascii_alphabetic())
                && (s.contains('/')
                    || [".rs", ".toml", ".sh", ".py"]
                        .iter()
                        .any(|e| s.ends_with(e)))
        })
        .map(str::to_string)
        .collect()
}

#[test]
fn every_path_the_documents_name_exists_in_the_repository() {
    let repo = repo();
    let mut documents = vec![repo.join("ARCHITECTURE.md"), repo.join("README.md")];
    for entry in std::fs::read_dir(repo.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            documents.push(path);
        }
    }
    let roots = roots();
    let mut names = Vec::new();
    file_names(&repo, &mut names);
    let mut checked = 0;
    let mut missing = Vec::new();
    for document in &documents {
        let text = std::fs::read_to_string(document).unwrap();
        for path in named_paths(&text) {
            if path.contains("shared/") {
                missing.push(format!(
                    "{}: `{path}` points outside the repository",
                    document.display()
                ));
                continue;
            }
            if made_elsewhere(&path) {
                continue;
            }
            let found = match path.contains('/') {
                true => roots.iter().any(|r| r.join(&path).exists()),
                // A bare file name, named in its folder's section.
                false => names.contains(&path),
            };
            checked += 1;
            if !found {
                missing.push(format!("{}: `{path}`", document.display()));
            }
        }
    }
    // Precondition: the scan read the documents (a renamed document would
    // make this test pass on nothing).
    assert!(checked > 200, "only {checked} paths found in {documents:?}");
    assert!(
        missing.is_empty(),
        "named but not there:\n{}",
        missing.join("\n")
    );
}
