//! Binaries as data, end to end on the local lab: the smoke ladder run
//! against two builds of linecardd and `linecard compare` on the runs,
//! and FRR's bfdd named by path as the DUT and the peer.
//!
//! The second build is this one with a deliberate regression compiled in
//! (`--features regress-xdp-replies`: the xdp backend's replies off by
//! default), built by the test command before the tests run
//! (`scripts/test.sh`: cargo holds its build directory while tests run,
//! so a test cannot build it itself).

use crate::common::*;
use std::path::{Path, PathBuf};

/// Where `scripts/test.sh` puts the regressed build.
fn regressed_linecardd() -> PathBuf {
    let path = repo().join("target/regressed/linecardd");
    let version = std::process::Command::new(&path)
        .arg("--version")
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e}: build it with `cargo build -p linecard-engine --bin linecardd --features regress-xdp-replies` and copy target/debug/linecardd there (scripts/test.sh does)",
                path.display()
            )
        });
    let version = String::from_utf8_lossy(&version.stdout);
    // Precondition: it is the regressed build, not a copy of this one.
    assert!(
        version.contains("deliberate regression: regress-xdp-replies"),
        "{}: {version}",
        path.display()
    );
    path
}

/// The smoke scenario shortened (idle 3 s, L4 6 s) in `dir`.
fn short_smoke(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(repo().join("scenarios/smoke.toml")).unwrap();
    let file = dir.join("smoke.toml");
    std::fs::write(&file, with_phase_seconds(&text, &[("idle", 3), ("L4", 6)])).unwrap();
    file
}

/// Prints a run's summary for the test's log.
fn show(dir: &Path) {
    eprintln!(
        "{}",
        std::fs::read_to_string(dir.join("summary.md")).unwrap_or_default()
    );
}

fn sha256(path: &Path) -> String {
    let out = std::process::Command::new("sha256sum")
        .arg(path)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

/// The manifest's record of `role` in DUT `label`'s run.
fn program(dir: &Path, label: &str, role: &str) -> serde_json::Value {
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    dut(&manifest, label)["programs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["role"] == role)
        .unwrap_or_else(|| panic!("no {role} recorded: {manifest:#}"))
        .clone()
}

/// Two runs of this build compare as not different (exit 0); a run of the
/// regressed build compares as worse (exit 1), naming the build, the DUT,
/// the phase and the metric; the manifest names each build by path,
/// SHA-256 and version.
#[test]
fn compare_names_a_regressed_build_and_not_a_second_run_of_the_same() {
    if !privileged("compare_names_a_regressed_build") {
        return;
    }
    let regressed = regressed_linecardd();
    let _lock = lock_lab();
    let results = scratch_dir("cmp");
    let scenario = short_smoke(&results);
    let profiles = repo().join("stress-profiles");
    let xdp_only = ["--only", "xdp", "--profiles", profiles.to_str().unwrap()];
    let Some((_, a)) = judged_run(&scenario, "smoke", &results, "a", &xdp_only) else {
        return;
    };
    let Some((_, again)) = judged_run(&scenario, "smoke", &results, "a2", &xdp_only) else {
        return;
    };
    let binary = format!("xdp={}", regressed.display());
    let mut with_regressed = xdp_only.to_vec();
    with_regressed.extend(["--dut-binary", &binary]);
    let Some((_, b)) = judged_run(&scenario, "smoke", &results, "b", &with_regressed) else {
        return;
    };
    for dir in [&a, &again, &b] {
        show(dir);
    }
    // What ran, per the manifest and /proc.
    let this = program(&a, "xdp", "dut linecardd");
    assert_eq!(this["path"], linecardd().display().to_string(), "{this:#}");
    let other = program(&b, "xdp", "dut linecardd");
    assert_eq!(other["path"], regressed.display().to_string(), "{other:#}");
    assert_eq!(other["sha256"], sha256(&regressed), "{other:#}");
    assert!(
        other["version"]
            .as_str()
            .unwrap()
            .contains("regress-xdp-replies"),
        "{other:#}"
    );
    assert_eq!(other["seen_running"], true, "{other:#}");

    let same = linecard(&["compare", a.to_str().unwrap(), again.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&same.stdout);
    eprintln!("{text}");
    assert_exit(&same, 0, "two runs of one build");
    assert!(text.contains("**B is not worse than A**"), "{text}");

    let html = results.join("compare.html");
    let worse = linecard(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&worse.stdout);
    eprintln!("{text}");
    assert_exit(&worse, 1, "this build against the regressed one");
    assert!(text.contains("**B is worse than A**"), "{text}");
    assert!(
        text.contains(&regressed.display().to_string()),
        "B's build is not named: {text}"
    );
    // The regression is the L4 phase's: userspace transmits, and the hog
    // starves it.
    assert!(
        text.contains("xdp L4#1: gaps over budget") || text.contains("xdp L4#1: flaps"),
        "{text}"
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("data-plot=\"compare-ccdf.svg\""), "{page}");
    let _ = std::fs::remove_dir_all(&results);
}

/// FRR's bfdd named by path, as the DUT and as the peer: it runs (Up in
/// both daemons' words, the processes seen running the file), and the
/// manifest names it by path, SHA-256 and `bfdd --version`.
#[test]
fn frr_bfdd_named_by_path_runs_as_dut_and_peer() {
    if !privileged("frr_bfdd_named_by_path") {
        return;
    }
    let _lock = lock_lab();
    let results = scratch_dir("frr-path");
    // A copy under another name: the path is not the default's, the hash
    // is the same file's.
    let copy = results.join("bfdd-under-test");
    std::fs::copy("/usr/lib/frr/bfdd", &copy).unwrap();
    let scenario = results.join("frr-path.toml");
    std::fs::write(
        &scenario,
        "schema_version = 1\nname = \"frr-path\"\ndescription = \"FRR bfdd by path\"\n\
         [peer]\nimplementation = \"frr\"\nbfdd = \"bfdd-under-test\"\n\
         [[phase]]\nprofile = \"idle\"\nseconds = 2\n\
         [[dut]]\nlabel = \"frr\"\nimplementation = \"frr\"\nbfdd = \"bfdd-under-test\"\n",
    )
    .unwrap();
    let profiles = repo().join("stress-profiles");
    let Some((out, dir)) = judged_run(
        &scenario,
        "frr-path",
        &results,
        "r",
        &["--profiles", profiles.to_str().unwrap()],
    ) else {
        return;
    };
    assert_exit(&out, 0, "FRR bfdd by path");
    for role in ["dut bfdd", "peer bfdd"] {
        let record = program(&dir, "frr", role);
        assert_eq!(record["path"], copy.display().to_string(), "{record:#}");
        assert_eq!(
            record["sha256"],
            sha256(Path::new("/usr/lib/frr/bfdd")),
            "{record:#}"
        );
        assert_eq!(
            record["version"], "bfdd-under-test version 8.4.4",
            "{record:#}"
        );
        assert_eq!(record["seen_running"], true, "{record:#}");
    }
    // A program that is not one is refused before anything starts.
    let text_file = results.join("not-a-program");
    std::fs::write(&text_file, "bfdd\n").unwrap();
    let not_a_program = format!("frr={}", text_file.display());
    let bad = linecard(&[
        "run",
        scenario.to_str().unwrap(),
        "--profiles",
        profiles.to_str().unwrap(),
        "--dut-binary",
        &not_a_program,
        "--check",
    ]);
    assert_exit(&bad, 2, "a DUT binary that is not executable");
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains(&format!(
            "dut[0].bfdd = {}: is not executable",
            text_file.display()
        )),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    let _ = std::fs::remove_dir_all(&results);
}
