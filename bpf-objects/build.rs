//! Builds `xdp/` for `bpfel-unknown-none` on the pinned nightly with
//! bpf-linker, and places the object in `OUT_DIR` for `include_bytes!`.
//!
//! When the BPF toolchain is missing, writes an empty placeholder and records
//! why, so `cargo build` and `cargo test` work everywhere and the XDP users
//! report "built without eBPF: <why>" at run time. When the toolchain is
//! present, a failing BPF build fails this build: a broken program must not
//! silently turn into a placeholder. `LINECARD_REQUIRE_EBPF=1` (set by CI)
//! makes a missing toolchain an error too; `LINECARD_NO_EBPF=1` skips the
//! BPF build on purpose.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The nightly the BPF object is built with. Its LLVM must match the one
/// bpf-linker was built against (LLVM 22), so the date is pinned.
const BPF_TOOLCHAIN: &str = "nightly";
const BPF_TOOLCHAIN_DATE: &str = "2026-05-19";
const BPF_TARGET: &str = "bpfel-unknown-none";
const OBJECT_NAME: &str = "linecard-xdp.o";

fn main() {
    let manifest_dir =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let workspace = manifest_dir
        .parent()
        .expect("bpf-objects/ sits in the workspace")
        .to_path_buf();
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let xdp_dir = workspace.join("xdp");
    for path in [
        xdp_dir.join("src"),
        xdp_dir.join("Cargo.toml"),
        workspace.join("common/src"),
        workspace.join("common/Cargo.toml"),
        workspace.join("Cargo.lock"),
    ] {
        println!("cargo:rerun-if-changed={}", path.display());
    }
    for var in ["LINECARD_NO_EBPF", "LINECARD_REQUIRE_EBPF"] {
        println!("cargo:rerun-if-env-changed={var}");
    }

    let object_path = out_dir.join(OBJECT_NAME);
    let outcome = if env::var_os("LINECARD_NO_EBPF").is_some_and(|v| v == "1") {
        Err("disabled with LINECARD_NO_EBPF=1".to_string())
    } else {
        missing_toolchain().map_or_else(|| Ok(()), Err)
    };
    let reason = match outcome {
        Ok(()) => {
            build_object(&workspace, &out_dir, &object_path);
            None
        }
        Err(reason) => {
            if env::var_os("LINECARD_REQUIRE_EBPF").is_some_and(|v| v == "1") {
                panic!("LINECARD_REQUIRE_EBPF=1 but the BPF toolchain is unusable: {reason}");
            }
            println!("cargo:warning=building without eBPF: {reason}");
            fs::write(&object_path, []).expect("OUT_DIR is writable");
            Some(reason)
        }
    };
    fs::write(
        out_dir.join("ebpf_status.rs"),
        format!("pub(crate) const UNAVAILABLE_REASON: Option<&str> = {reason:?};\n"),
    )
    .expect("OUT_DIR is writable");
}

/// Why the BPF toolchain cannot be used, if it cannot. Each reason names the
/// fix, because "linker not found" from deep inside cargo helps nobody.
fn missing_toolchain() -> Option<String> {
    let rustc = Command::new("rustup")
        .args(["run", BPF_TOOLCHAIN, "rustc", "-vV"])
        .output();
    let Some(rustc) = rustc.ok().filter(|o| o.status.success()) else {
        return Some(format!(
            "the `{BPF_TOOLCHAIN}` toolchain is not installed (install rustup's nightly {BPF_TOOLCHAIN_DATE})"
        ));
    };
    let version = String::from_utf8_lossy(&rustc.stdout);
    if !version.contains(BPF_TOOLCHAIN_DATE) {
        println!(
            "cargo:warning=nightly is not {BPF_TOOLCHAIN_DATE} (LLVM must match bpf-linker's): {}",
            version.lines().next().unwrap_or("")
        );
    }
    let sysroot = Command::new("rustup")
        .args(["run", BPF_TOOLCHAIN, "rustc", "--print", "sysroot"])
        .output()
        .ok()?;
    let sysroot = PathBuf::from(String::from_utf8_lossy(&sysroot.stdout).trim());
    if !sysroot.join("lib/rustlib/src/rust/library/core").exists() {
        return Some(format!(
            "rust-src is missing (run `rustup component add rust-src --toolchain {BPF_TOOLCHAIN}`)"
        ));
    }
    if Command::new("bpf-linker")
        .arg("--version")
        .output()
        .is_err()
    {
        return Some("bpf-linker is not on PATH (run `bash scripts/install-deps.sh`)".to_string());
    }
    None
}

/// Where the BPF build keeps its artifacts: `bpf/` in the outermost cargo
/// target directory (the one marked by cargo's `CACHEDIR.TAG`) that holds
/// this build, so that clippy, the host build and the fuzz builds (whose
/// target directory sits inside it) share one BPF build instead of each
/// compiling `core` for BPF again (half a minute apiece). The inner cargo
/// locks that directory and rebuilds only what changed.
fn bpf_target_dir(out_dir: &Path) -> PathBuf {
    out_dir
        .ancestors()
        .filter(|dir| dir.join("CACHEDIR.TAG").is_file())
        .last()
        .map_or_else(|| out_dir.join("bpf-target"), |root| root.join("bpf"))
}

fn build_object(workspace: &Path, out_dir: &Path, object_path: &Path) {
    let target_dir = bpf_target_dir(out_dir);
    let mut cmd = Command::new("rustup");
    cmd.args([
        "run",
        BPF_TOOLCHAIN,
        "cargo",
        "build",
        "--release",
        "--locked",
    ])
    .args(["--package", "linecard-xdp", "--target", BPF_TARGET])
    .args(["-Z", "build-std=core"])
    .arg("--manifest-path")
    .arg(workspace.join("Cargo.toml"))
    .arg("--target-dir")
    .arg(&target_dir);
    // The outer cargo's settings are for the host build; none of them may
    // leak into the BPF build.
    for (key, _) in env::vars_os() {
        let key = key.to_string_lossy();
        if key.starts_with("CARGO_")
            || key.starts_with("RUSTC")
            || key == "RUSTFLAGS"
            || key == "RUSTUP_TOOLCHAIN"
        {
            cmd.env_remove(key.as_ref());
        }
    }
    // BTF is required for maps holding a bpf_timer; debuginfo feeds it.
    // CPU v3 (kernel 5.12+): the atomic fetch-add that takes a signed
    // reply's Sequence Number from the counter userspace shares.
    cmd.env(
        "CARGO_ENCODED_RUSTFLAGS",
        "-Cdebuginfo=2\x1f-Clink-arg=--btf\x1f-Ctarget-cpu=v3",
    );
    let status = cmd
        .status()
        .expect("failed to run rustup for the BPF build");
    if !status.success() {
        panic!("building xdp/ for {BPF_TARGET} failed ({status}); set LINECARD_NO_EBPF=1 to build without eBPF");
    }
    let built = target_dir
        .join(BPF_TARGET)
        .join("release")
        .join("linecard-xdp");
    fs::copy(&built, object_path)
        .unwrap_or_else(|e| panic!("copying {} failed: {e}", built.display()));
}
