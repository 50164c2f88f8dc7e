//! A single-host run's files brought back here: streamed from the host's
//! tar into ours and checked file by file against the host's SHA-256
//! before anything there is removed; or, when nothing came back, a run
//! directory that says why.

use crate::manifest::status::RunStatus;
use crate::manifest::HostFacts;
use crate::manifest::Manifest;
use crate::remote::Connection;
use crate::run::RunResult;
use crate::scenario::value::quote;
use crate::scenario::{ProviderKind, Scenario};
use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::{Command, Stdio};

/// Brings the remote run directory here and returns it as a run of this
/// harness (its manifest saying where it ran).
pub(super) fn fetch(
    conn: &Connection,
    staged: &str,
    scenario: &Scenario,
    dir: &Path,
    facts: HostFacts,
) -> Result<RunResult> {
    let remote = format!("{staged}/r/{}", scenario.name);
    // One run directory under results/<scenario>/ on the host.
    let unpack = dir.join(".fetched");
    std::fs::create_dir_all(&unpack)?;
    fetch_tree(conn, &remote, &unpack)?;
    let remote_run = std::fs::read_dir(&unpack)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.is_dir())
        .context("the host's results hold no run directory")?;
    for entry in std::fs::read_dir(&remote_run)? {
        let entry = entry?;
        std::fs::rename(entry.path(), dir.join(entry.file_name()))?;
    }
    std::fs::remove_dir_all(&unpack)?;
    let manifest_path = dir.join("manifest.json");
    let mut manifest: Manifest = serde_json::from_str(
        &std::fs::read_to_string(&manifest_path).context("the remote run left no manifest.json")?,
    )?;
    // Where it ran: the host's own facts, reached over SSH.
    manifest.host.provider = ProviderKind::Ssh;
    manifest.host.via = facts.via;
    manifest.scenario = scenario.clone();
    crate::run::finish(dir.to_path_buf(), manifest)
}

/// Copies the host's directory `remote` into `local` here, streamed from
/// the host's tar into ours (a soak's captures need not fit in memory),
/// then proves the copy whole: every file the host lists, of the same
/// SHA-256.
pub(crate) fn fetch_tree(conn: &Connection, remote: &str, local: &Path) -> Result<()> {
    let mut sender = conn
        .command()
        .arg(format!("cd {} && tar -cf - .", quote(remote)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("running ssh (is openssh-client installed?)")?;
    let stream = sender.stdout.take().expect("piped");
    let unpacked = Command::new("tar")
        .args(["-x", "-C"])
        .arg(local)
        .stdin(stream)
        .status()?;
    let sent = sender.wait_with_output()?;
    if !sent.status.success() || !unpacked.success() {
        bail!(
            "fetching {}:{remote}: {}",
            conn.target,
            String::from_utf8_lossy(&sent.stderr).trim()
        );
    }
    verify_fetched(conn, remote, local)
}

/// Proves the copy of the host's `remote` directory in `local` whole:
/// the same files, each of the same size and SHA-256.
fn verify_fetched(conn: &Connection, remote: &str, local: &Path) -> Result<()> {
    let listed = conn.exec(
        &format!(
            "cd {} && find . -type f -exec sha256sum {{}} +",
            quote(remote)
        ),
        None,
    )?;
    let listed = String::from_utf8_lossy(&listed);
    let mut count = 0;
    for line in listed.lines() {
        let Some((digest, name)) = line.split_once("  ") else {
            continue;
        };
        let path = local.join(name);
        let bytes = std::fs::read(&path)
            .with_context(|| format!("{name} did not come back from {}", conn.target))?;
        let here = crate::sys::sha256_hex(&bytes);
        if here != digest {
            bail!(
                "{name} came back from {} different (sha256 {here}, the host's {digest})",
                conn.target
            );
        }
        count += 1;
    }
    if count == 0 {
        bail!("the host listed no file of its run directory");
    }
    Ok(())
}

/// A run whose results never came back: the manifest says why and what
/// is here.
pub(super) fn unfinished(
    scenario: &Scenario,
    dir: &Path,
    run_id: &str,
    facts: HostFacts,
    status: RunStatus,
) -> Result<RunResult> {
    let manifest = Manifest {
        schema_version: 1,
        scenario: scenario.clone(),
        run_id: run_id.into(),
        status,
        host: facts,
        duts: Vec::new(),
    };
    crate::run::finish(dir.to_path_buf(), manifest)
}
