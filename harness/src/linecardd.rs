//! The linecardd client: how the harness drives linecardd, as a user
//! would, through its binary and its control socket (`linecardd ctl`,
//! replies typed by `linecard_api::control`), never through its crate
//! (`tests/logic/boundary.rs`).

use crate::lab::spec;
use crate::sys;
use anyhow::{bail, Context, Result};
use linecard_api::config::SessionSettings;
use linecard_api::BackendKind;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The engine binary: `LINECARD_LINECARDD`, else beside this `linecard`,
/// else `linecardd` on the PATH.
pub fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("LINECARD_LINECARDD") {
        return path.into();
    }
    std::env::current_exe()
        .ok()
        .map(|exe| exe.with_file_name("linecardd"))
        .filter(|p| p.exists())
        .unwrap_or_else(|| "linecardd".into())
}

/// `linecardd ctl ARGS`, run off the DUT's CPUs (polling must not compete
/// with the DUT for them).
pub fn ctl(socket: &Path, args: &[&str]) -> Result<serde_json::Value> {
    ctl_with(&binary(), socket, args)
}

/// `linecardd ctl ARGS` read as its typed reply (`linecard_api::control`).
pub fn ctl_as<T: serde::de::DeserializeOwned>(socket: &Path, args: &[&str]) -> Result<T> {
    let reply = ctl(socket, args)?;
    serde_json::from_value(reply)
        .with_context(|| format!("linecardd ctl {args:?}: not the reply this linecard expects"))
}

/// [`ctl`] with a given engine binary (tests use the one cargo
/// built).
pub fn ctl_with(binary: &Path, socket: &Path, args: &[&str]) -> Result<serde_json::Value> {
    let mut cmd = Command::new(binary);
    cmd.arg("ctl").arg("--socket").arg(socket).args(args);
    let rest = spec::cpuset_dir(spec::REST_CPUSET);
    if rest.exists() {
        sys::join_cpuset_on_exec(&mut cmd, &rest);
    }
    let out = cmd.output().context("running linecardd ctl")?;
    if !out.status.success() {
        bail!(
            "linecardd ctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null))
}

/// A `[[session]]` from `local` to `peer` at these timers (ms, ms, Detect
/// Mult) on `backend`: what every session the harness configures starts
/// from.
pub fn session_settings(
    local: &dyn std::fmt::Display,
    peer: &dyn std::fmt::Display,
    (tx_ms, rx_ms, multiplier): (u32, u32, u8),
    backend: BackendKind,
) -> SessionSettings {
    SessionSettings {
        peer: peer.to_string(),
        local: local.to_string(),
        tx_interval_ms: Some(i64::from(tx_ms)),
        rx_interval_ms: Some(i64::from(rx_ms)),
        multiplier: Some(i64::from(multiplier)),
        backend: Some(backend.to_string()),
        ..SessionSettings::default()
    }
}
