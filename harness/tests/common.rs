//! Helpers for the privileged tests: they run the real `linecard` binary
//! against the real kernel, one at a time (the lab is machine-global).

#![allow(dead_code)]

use std::fs::File;
use std::process::{Command, Output};

/// Whether privileged tests can run here. Not root: a printed skip, unless
/// `LINECARD_REQUIRE_PRIVILEGED=1` (set by CI), where it is a failure.
pub fn privileged(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    if std::env::var_os("LINECARD_REQUIRE_PRIVILEGED").is_some_and(|v| v == "1") {
        panic!("{test}: LINECARD_REQUIRE_PRIVILEGED=1 but not running as root");
    }
    eprintln!("skipped {test}: needs root (network namespaces, cgroups, XDP)");
    false
}

/// Serialises lab tests across test binaries with an exclusive file lock.
pub struct LabLock(#[allow(dead_code)] File);

pub fn lock_lab() -> LabLock {
    let file = File::create("/tmp/linecard-lab-tests.lock").expect("creating the lab test lock");
    // SAFETY: flock on an fd we own; blocks until the lock is ours.
    assert_eq!(
        unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&file), libc::LOCK_EX) },
        0
    );
    LabLock(file)
}

pub fn linecard(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_linecard"))
        .args(args)
        .output()
        .expect("running linecard")
}

pub fn stdout_json(output: &Output) -> serde_json::Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

pub fn assert_exit(output: &Output, code: i32, what: &str) {
    assert_eq!(
        output.status.code(),
        Some(code),
        "{what}: expected exit {code}\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
