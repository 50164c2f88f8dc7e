//! Reviewing a scenario executes nothing it names: `linecard run
//! --dry-run` and `--check` of a scenario whose DUT names a program of
//! its own (a script that leaves a file when run) print the plan and
//! leave no file; a scenario with shell text in a value that would reach
//! the hypervisor's root shell is refused when read, naming the key, and
//! its payload never runs. No root: nothing here starts a lab.

use crate::common::*;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Output;

/// `linecard run SCENARIO --profiles stress-profiles MODE`.
fn review(scenario: &Path, mode: &str) -> Output {
    let profiles = repo().join("stress-profiles");
    linecard(&[
        "run",
        scenario.to_str().unwrap(),
        "--profiles",
        profiles.to_str().unwrap(),
        mode,
    ])
}

#[test]
fn reviewing_a_scenario_runs_none_of_its_programs() {
    let dir = scratch_dir("review");
    let witness = dir.join("ran");
    let script = dir.join("evil.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ntouch {}\necho 'linecardd 0'\n",
            witness.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let shipped = std::fs::read_to_string(repo().join("scenarios/smoke.toml")).unwrap();
    let at = shipped.find("[[dut]]").unwrap();
    let scenario = dir.join("s.toml");
    let dut = shipped[at..].replacen(
        "implementation = \"linecardd\"",
        "implementation = \"linecardd\"\nlinecardd = \"evil.sh\"",
        1,
    );
    assert!(
        dut.contains("evil.sh"),
        "smoke.toml's first DUT is linecardd"
    );
    std::fs::write(&scenario, format!("{}{dut}", &shipped[..at])).unwrap();
    for mode in ["--dry-run", "--check"] {
        let out = review(&scenario, mode);
        assert_exit(&out, 0, mode);
        assert!(!witness.exists(), "{mode} ran the scenario's program");
    }
    // The control: the same script does leave its file when run.
    std::process::Command::new(&script).output().unwrap();
    assert!(witness.exists(), "the witness script works");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn shell_text_bound_for_the_hypervisor_is_refused_naming_its_key() {
    let dir = scratch_dir("review-pve");
    let witness = dir.join("x");
    let shipped = std::fs::read_to_string(repo().join("scenarios/bakeoff-proxmox.toml")).unwrap();
    let payload = format!("lcbr0; touch {} #", witness.display());
    let hostile = shipped.replace(
        "first_vmid = 7100\n",
        &format!("first_vmid = 7100\nbridge = \"{payload}\"\n"),
    );
    assert_ne!(hostile, shipped);
    let scenario = dir.join("px.toml");
    std::fs::write(&scenario, hostile).unwrap();
    for mode in ["--dry-run", "--check"] {
        let out = review(&scenario, mode);
        assert_exit(&out, 2, mode);
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            said.contains(&format!(
                "proxmox.bridge = {payload}: must be an interface name"
            )),
            "{mode}: {said}"
        );
        assert!(!witness.exists());
    }
    // The shipped scenario itself is accepted, and its plan quotes nothing
    // it did not validate: the bridge is the run's own.
    let out = review(&repo().join("scenarios/bakeoff-proxmox.toml"), "--dry-run");
    assert_exit(&out, 0, "the shipped proxmox scenario's dry run");
    let plan = String::from_utf8_lossy(&out.stdout);
    assert!(
        plan.contains("ip link add name lcbr") && plan.contains("--description linecard-"),
        "{plan}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
