//! The harness drives linecardd as a user would (its binary, its config
//! file, its control socket) and never links its internals: what both
//! sides name lives in `linecard-api` and `linecard-common`. This fails the
//! moment `linecard-engine` enters the harness's dependency tree, through
//! any kind of dependency (normal, build or dev).

use std::process::Command;

#[test]
fn the_harness_does_not_depend_on_the_engine() {
    let out = Command::new(env!("CARGO"))
        .args([
            "tree",
            "--offline",
            "-p",
            "linecard-harness",
            "-e",
            "all",
            "--prefix",
            "none",
            "--format",
            "{p}",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("running cargo tree");
    assert!(out.status.success(), "cargo tree: {out:?}");
    let tree = String::from_utf8_lossy(&out.stdout);
    // The positive control: the tree was read, the API crate is in it.
    assert!(
        tree.lines().any(|l| l.starts_with("linecard-api ")),
        "{tree}"
    );
    let engine: Vec<&str> = tree
        .lines()
        .filter(|l| l.starts_with("linecard-engine "))
        .collect();
    assert!(
        engine.is_empty(),
        "the harness links the engine: {engine:?}"
    );
}

/// The harness's own floors: the scenario (its input model), the result
/// model (`manifest/`) and the linecardd client sit below the runner and
/// the renderers and never import them, so that reading a scenario cannot
/// reach anything that runs and the model of a run is one thing the
/// runner fills and the exporters read. A `use` of `crate::run`,
/// `crate::export` (or `super::run`) in those files fails here, with the
/// file and line.
#[test]
fn the_models_the_tools_below_the_runner_and_the_exporters_import_nothing_of_it() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files: Vec<_> = [
        "scenario.rs",
        "linecardd.rs",
        "remote.rs",
        "procs.rs",
        "analysis_files.rs",
        "profile.rs",
    ]
    .iter()
    .map(|f| src.join(f))
    .collect();
    for folder in ["scenario", "manifest", "remote", "procs", "export"] {
        for entry in std::fs::read_dir(src.join(folder)).unwrap() {
            files.push(entry.unwrap().path());
        }
    }
    let mut uphill = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if ["crate::run", "super::run", "crate::export"]
                .iter()
                .any(|uphill| code.contains(uphill))
            {
                uphill.push(format!("{}:{}: {}", file.display(), i + 1, line.trim()));
            }
        }
    }
    // Precondition: the scan read the model (a moved folder would make
    // this test pass on nothing).
    assert!(files.len() > 25, "only {files:?}");
    assert!(
        uphill.is_empty(),
        "imports from the runner:\n{}",
        uphill.join("\n")
    );
}
