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
