//! What `linecardd --version` says about this build: the commit it was
//! built from and the build profile (and a deliberate regression, when
//! one is compiled in), so that a run's manifest can name the build that
//! ran.

use std::process::Command;

fn main() {
    let revision = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    let dirty = Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output()
        .ok()
        .filter(|o| o.status.success() && !o.stdout.is_empty())
        .map_or("", |_| "+changes");
    let profile = std::env::var("PROFILE").unwrap_or_else(|_| "unknown".into());
    println!("cargo:rustc-env=LINECARDD_BUILD=git {revision}{dirty}, {profile}");
    // A new commit or a changed index is a new build.
    for path in ["../.git/HEAD", "../.git/index"] {
        println!("cargo:rerun-if-changed={path}");
    }
}
