//! The programs a DUT and the peer run, as data: by default this
//! machine's FRR (`/usr/lib/frr/bfdd`, `zebra`) and BIRD (`bird` on the
//! PATH) and this build's linecardd; a scenario may name others
//! (`bfdd = "/opt/frr/sbin/bfdd"` in `[peer]` or a `[[dut]]`, relative
//! paths from the scenario file; `linecardd_upgrade` in a linecardd
//! `[[dut]]` is the build its `engine_upgrade` fault hands over to), and
//! `linecard run --dut-binary
//! LABEL=PATH` names one DUT's for a single run. Each named program is
//! checked before anything starts (it exists, it is an executable file);
//! it is asked its `--version` only by a run that will start it, never
//! by `--dry-run` or `--check` (reviewing a scenario must not run what it
//! names), and every program a run starts is recorded in its manifest
//! with its path, SHA-256 and version ([`ProgramRecord`]).

use super::{DutImplementation, DutSpec, PeerImplementation, Scenario};
use linecard_api::InputError;
use serde::{Deserialize, Serialize};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Where FRR's daemons are on Debian.
const FRR_BFDD: &str = "/usr/lib/frr/bfdd";
const FRR_ZEBRA: &str = "/usr/lib/frr/zebra";

/// The programs one side runs; `None` is the default.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Programs {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bfdd: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zebra: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bird: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linecardd: Option<PathBuf>,
    /// The second build an `engine_upgrade` fault hands the engine over
    /// to (a linecardd DUT's only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linecardd_upgrade: Option<PathBuf>,
}

impl Programs {
    pub fn bfdd(&self) -> PathBuf {
        self.bfdd.clone().unwrap_or_else(|| FRR_BFDD.into())
    }

    pub fn zebra(&self) -> PathBuf {
        self.zebra.clone().unwrap_or_else(|| FRR_ZEBRA.into())
    }

    pub fn bird(&self) -> PathBuf {
        self.bird.clone().unwrap_or_else(|| "bird".into())
    }

    pub fn linecardd(&self) -> PathBuf {
        self.linecardd
            .clone()
            .unwrap_or_else(crate::linecardd::binary)
    }

    /// The programs named, by key.
    pub fn named(&self) -> Vec<(&'static str, &Path)> {
        [
            ("bfdd", &self.bfdd),
            ("zebra", &self.zebra),
            ("bird", &self.bird),
            ("linecardd", &self.linecardd),
            ("linecardd_upgrade", &self.linecardd_upgrade),
        ]
        .into_iter()
        .filter_map(|(key, path)| Some((key, path.as_deref()?)))
        .collect()
    }

    /// Reads the keys of a `[peer]` or `[[dut]]` table, relative paths from
    /// `base` (the scenario's directory); `allowed` are the keys its
    /// implementation runs, and the error is (key, value, why).
    pub(super) fn read(
        raw: &RawPrograms,
        base: &Path,
        allowed: &[&str],
        implementation: &str,
    ) -> Result<Self, (String, String, String)> {
        let path = |key: &str, value: &Option<String>| -> Result<Option<PathBuf>, _> {
            let Some(text) = value else { return Ok(None) };
            if !allowed.contains(&key) {
                return Err((
                    key.to_string(),
                    text.clone(),
                    format!(
                        "{implementation} runs no {key} (its programs: {})",
                        allowed.join(", ")
                    ),
                ));
            }
            if let Err(why) = super::value::program_path(text) {
                return Err((key.to_string(), format!("{text:?}"), why.into()));
            }
            // Absolute, so that the manifest names the file wherever it is
            // read, and without `..` (`scenarios/../target/x` is
            // `target/x`).
            Ok(Some(lexically_normal(
                &std::path::absolute(base.join(text)).unwrap_or_else(|_| base.join(text)),
            )))
        };
        Ok(Self {
            bfdd: path("bfdd", &raw.bfdd)?,
            zebra: path("zebra", &raw.zebra)?,
            bird: path("bird", &raw.bird)?,
            linecardd: path("linecardd", &raw.linecardd)?,
            linecardd_upgrade: path("linecardd_upgrade", &raw.linecardd_upgrade)?,
        })
    }
}

/// `path` with its `.` and `..` components folded away, without asking
/// the file system (a symbolic link is taken as written).
fn lexically_normal(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut normal = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                normal.pop();
            }
            other => normal.push(other),
        }
    }
    normal
}

/// The program keys of a `[peer]` or `[[dut]]` table, as written.
#[derive(Debug, Default)]
pub(super) struct RawPrograms {
    bfdd: Option<String>,
    zebra: Option<String>,
    bird: Option<String>,
    linecardd: Option<String>,
    linecardd_upgrade: Option<String>,
}

impl RawPrograms {
    /// From the table's `bfdd`, `zebra`, `bird`, `linecardd` and
    /// `linecardd_upgrade` keys.
    pub(super) fn of(
        [bfdd, zebra, bird, linecardd, linecardd_upgrade]: [&Option<String>; 5],
    ) -> Self {
        Self {
            bfdd: bfdd.clone(),
            zebra: zebra.clone(),
            bird: bird.clone(),
            linecardd: linecardd.clone(),
            linecardd_upgrade: linecardd_upgrade.clone(),
        }
    }
}

/// The programs the peer's implementation runs.
pub(super) fn peer_keys(peer: PeerImplementation) -> &'static [&'static str] {
    match peer {
        PeerImplementation::Frr => &["bfdd", "zebra"],
        PeerImplementation::Bird => &["bird"],
        PeerImplementation::Linecardd => &["linecardd"],
    }
}

/// The programs a DUT's implementation runs.
pub(super) fn dut_keys(dut: &DutImplementation) -> &'static [&'static str] {
    match dut {
        DutImplementation::Frr => &["bfdd", "zebra"],
        DutImplementation::Linecardd { .. } => &["linecardd", "linecardd_upgrade"],
        DutImplementation::FrrDataplane { .. } => &["bfdd", "zebra", "linecardd"],
    }
}

impl DutSpec {
    /// `--dut-binary LABEL=PATH`: the program this DUT is (linecardd, or
    /// FRR's bfdd for an FRR DUT) for one run.
    pub fn set_binary(&mut self, path: PathBuf) {
        match self.implementation {
            DutImplementation::Frr => self.programs.bfdd = Some(path),
            DutImplementation::Linecardd { .. } | DutImplementation::FrrDataplane { .. } => {
                self.programs.linecardd = Some(path)
            }
        }
    }
}

/// A program a run started: what the manifest records of it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramRecord {
    /// Whose it is and which (`dut bfdd`, `peer bird`, `dut linecardd`).
    pub role: String,
    pub path: PathBuf,
    pub sha256: String,
    /// The first line of its `--version` (linecardd's names its commit
    /// and build profile).
    pub version: String,
    /// The daemon's process was seen running this very file
    /// (`/proc/PID/exe`, once it was ready): the DUT's and the peer's
    /// daemons; `None` where nobody looked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seen_running: Option<bool>,
}

impl ProgramRecord {
    /// Describes `program` (a path, or a name on the PATH).
    pub fn of(role: &str, program: &Path) -> Result<Self, String> {
        let path = resolve(program)?;
        let bytes = std::fs::read(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        Ok(Self {
            role: role.to_string(),
            sha256: crate::sys::sha256_hex(&bytes),
            version: version(&path)?,
            path,
            seen_running: None,
        })
    }
}

/// `program` as a file: itself when it has a directory part, else where
/// the PATH finds it.
fn resolve(program: &Path) -> Result<PathBuf, String> {
    if program.components().count() > 1 {
        return Ok(program.to_path_buf());
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
        .ok_or_else(|| format!("{} is not on the PATH", program.display()))
}

/// The first line `program --version` prints (on stdout, or stderr as
/// BIRD does), bounded at 10 s.
fn version(program: &Path) -> Result<String, String> {
    let out = std::process::Command::new("timeout")
        .arg("10")
        .arg(program)
        .arg("--version")
        .output()
        .map_err(|e| format!("running {} --version: {e}", program.display()))?;
    let text = if out.stdout.is_empty() {
        &out.stderr
    } else {
        &out.stdout
    };
    let first = String::from_utf8_lossy(text)
        .lines()
        .next()
        .unwrap_or("")
        .trim()
        .to_string();
    if !out.status.success() || first.is_empty() {
        return Err(format!(
            "`{} --version` did not answer ({}): is it the program its key names?",
            program.display(),
            out.status
        ));
    }
    Ok(first)
}

/// Checks every program the scenario names without running any: it
/// exists and is an executable file. The error names the scenario file,
/// the key and the path.
pub fn check(scenario: &Scenario) -> Result<(), InputError> {
    each_named(scenario, |path| match std::fs::metadata(path) {
        Err(e) => Some(format!("cannot be read: {e}")),
        Ok(m) if !m.is_file() => Some("is not a file".to_string()),
        Ok(m) if m.permissions().mode() & 0o111 == 0 => {
            Some("is not executable (chmod +x)".to_string())
        }
        Ok(_) => None,
    })
}

/// Runs each program the scenario names once with `--version`, as a run
/// that is about to start them does: a program that does not answer is
/// refused before anything starts.
pub fn check_answers(scenario: &Scenario) -> Result<(), InputError> {
    check(scenario)?;
    each_named(scenario, |path| version(path).err())
}

/// `why(path)` of every program the scenario names; the first `Some` is
/// the error, naming file, table, key and path.
fn each_named(
    scenario: &Scenario,
    why: impl Fn(&Path) -> Option<String>,
) -> Result<(), InputError> {
    let file = scenario.file.display().to_string();
    let sides = std::iter::once(("peer".to_string(), &scenario.peer_programs)).chain(
        scenario
            .duts
            .iter()
            .enumerate()
            .map(|(i, d)| (format!("dut[{i}]"), &d.programs)),
    );
    for (table, programs) in sides {
        for (key, path) in programs.named() {
            if let Some(why) = why(path) {
                return Err(InputError::invalid(
                    &file,
                    &format!("{table}.{key}"),
                    &path.display(),
                    &why,
                ));
            }
        }
    }
    Ok(())
}

/// Marks the record of `side`'s (`dut`, `peer`) program that the process
/// runs (`exe`, its `/proc/PID/exe`) as seen running; `Err` names the file
/// when it is none of them: the manifest would otherwise name a program
/// that did not run.
pub fn seen_running(records: &mut [ProgramRecord], side: &str, exe: &Path) -> Result<(), String> {
    let same = |p: &Path| match (std::fs::canonicalize(p), std::fs::canonicalize(exe)) {
        (Ok(a), Ok(b)) => a == b,
        _ => p == exe,
    };
    let prefix = format!("{side} ");
    match records
        .iter_mut()
        .find(|r| r.role.starts_with(&prefix) && same(&r.path))
    {
        Some(record) => {
            record.seen_running = Some(true);
            Ok(())
        }
        None => Err(format!(
            "the {side}'s daemon runs {}, which is none of the programs recorded for it",
            exe.display()
        )),
    }
}
