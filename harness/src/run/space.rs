//! The results disk: a run refuses to start without room for what it will
//! write, and keeps a ballast file so that a disk that fills anyway (another
//! writer, a wrong estimate) still has room for the run's own verdict.
//!
//! Measured: a 3 x 10 ms session's run directory holds ~180 bytes per
//! packet on the wire (the capture, ~82; the per-packet CSV and Parquet,
//! ~90), plus the manifest and the analyses.

use super::RunOptions;
use crate::scenario::Scenario;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// Bytes per packet on the wire, with room above the measured ~180.
const BYTES_PER_PACKET: u64 = 200;
/// Bring-up, readiness and teardown around the phases, per DUT.
const MARGIN_SECONDS: u64 = 15;
/// The ballast: room for the final manifest, status and summary.
pub const BALLAST_BYTES: usize = 256 * 1024;
const BALLAST: &str = ".ballast";

/// What the run will write, about: every selected DUT, both directions of
/// every session at its interval, for its phases and bring-up.
pub fn estimate_bytes(scenario: &Scenario, only: &[String]) -> u64 {
    let packets: u64 = (scenario.duts.iter())
        .filter(|d| only.is_empty() || only.iter().any(|l| d.answers_to(l)))
        .map(|d| {
            // A ladder's row runs its own step.
            let s = &scenario.for_dut(d).sessions;
            2 * s.total() as u64 * 1000 / u64::from(s.tx_interval_ms.max(1))
        })
        .sum();
    packets * (scenario.seconds_per_dut() + MARGIN_SECONDS) * BYTES_PER_PACKET
        + BALLAST_BYTES as u64
}

/// Free bytes on the filesystem that holds `path` (or its nearest existing
/// ancestor), as an unprivileged writer sees them.
pub fn free_bytes(path: &Path) -> Result<u64> {
    let mut probe: PathBuf = path.to_path_buf();
    while !probe.exists() {
        if !probe.pop() || probe.as_os_str().is_empty() {
            probe = PathBuf::from(".");
            break;
        }
    }
    let c = std::ffi::CString::new(probe.as_os_str().as_encoded_bytes())
        .context("a results path with a NUL byte")?;
    // SAFETY: statvfs writes into the zeroed struct we pass; c is valid.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above: a valid path and a zeroed struct to fill.
    if unsafe { libc::statvfs(c.as_ptr(), &mut stat) } != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("statvfs {}", probe.display()));
    }
    Ok(stat.f_bavail as u64 * stat.f_frsize as u64)
}

/// Refuses a run the results disk cannot hold, before anything starts.
pub fn check(scenario: &Scenario, options: &RunOptions) -> Result<()> {
    let need = estimate_bytes(scenario, &options.only);
    let free = free_bytes(&options.results)?;
    if free < need {
        bail!(
            "the results disk is too full: {} has {} free, this run writes about {} (captures and \
             their analyses); free some space or pass --results on a larger disk. Nothing was started.",
            options.results.display(),
            human(free),
            human(need)
        );
    }
    Ok(())
}

/// The shell line that says how much room the directory `$d` has on a
/// host, for [`check_df`].
pub const DF: &str = "df -Pk \"$d\" | tail -n 1";

/// Refuses a run whose files the directory `dir` on `target` cannot hold
/// (about `need` bytes: the remote run's directory, or the observer's
/// captures), before anything starts there; `said` is what [`DF`]
/// printed there, `what` names the files.
pub fn check_df(target: &str, dir: &str, said: &str, need: u64, what: &str) -> Result<()> {
    // POSIX df -P: filesystem, 1024-blocks, used, available, capacity, mount.
    let free = said
        .lines()
        .last()
        .unwrap_or("")
        .split_whitespace()
        .nth(3)
        .and_then(|kib| kib.parse::<u64>().ok())
        .with_context(|| format!("{target}: df -Pk {dir} said {:?}", said.trim()))?
        * 1024;
    if free < need {
        bail!(
            "{target}:{dir} has {} free, and {what} take about {}: free some space there or \
             choose another remote_dir. Nothing was started.",
            human(free),
            human(need)
        );
    }
    Ok(())
}

/// Reserves room in the run directory for the run's own records.
pub fn lay_ballast(dir: &Path) -> Result<()> {
    std::fs::write(dir.join(BALLAST), vec![0u8; BALLAST_BYTES]).with_context(|| {
        format!(
            "reserving {} KiB in {} for the run's records",
            BALLAST_BYTES / 1024,
            dir.display()
        )
    })
}

/// Frees the reserved room: the records written next always fit.
pub fn drop_ballast(dir: &Path) {
    let _ = std::fs::remove_file(dir.join(BALLAST));
}

/// Whether `error` (anywhere in its chain) is a full disk.
pub fn is_disk_full(error: &anyhow::Error) -> bool {
    error.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.raw_os_error() == Some(libc::ENOSPC))
    })
}

fn human(bytes: u64) -> String {
    if bytes >= 1 << 30 {
        format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
    } else {
        format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_covers_every_selected_dut() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let smoke = Scenario::load(
            &root.join("scenarios/smoke.toml"),
            &root.join("stress-profiles"),
        )
        .unwrap();
        // 2 directions x 100 packets/s x (20 s + 15 s) x 200 bytes.
        let one = 1_400_000 + BALLAST_BYTES as u64;
        assert_eq!(estimate_bytes(&smoke, &["xdp".into()]), one);
        assert_eq!(
            estimate_bytes(&smoke, &[]),
            2 * (one - BALLAST_BYTES as u64) + BALLAST_BYTES as u64
        );
    }

    #[test]
    fn a_host_without_room_is_refused_naming_it() {
        let df =
            "Filesystem 1024-blocks Used Available Capacity Mounted on\n/dev/vda 100 50 50 50% /\n";
        let e = check_df("root@h", "/var/tmp/x", df, 1 << 20, "the captures").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("root@h:/var/tmp/x has 0.0 MiB free"),
            "{e}"
        );
        assert!(check_df("root@h", "/d", df, 50 * 1024, "x").is_ok());
        assert!(check_df("root@h", "/d", "df: no such file", 1, "x").is_err());
    }

    #[test]
    fn free_space_is_read_from_the_nearest_existing_directory() {
        let free = free_bytes(Path::new("/tmp/linecard-does-not-exist/a/b")).unwrap();
        assert!(free > 0);
    }
}
