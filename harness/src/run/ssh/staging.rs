//! Where a run is staged on its hosts, recorded in the run directory
//! ([`STAGING_RECORD`]) before anything is staged there, with how to
//! reach each host: what `linecard teardown RUN_DIR` needs to stop and
//! remove exactly the run's own after its harness was killed.

use super::fetch_tree;
use crate::remote::{kill_marked, Connection};
use crate::scenario::value::quote;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The run directory's record of the run's directories on its hosts.
pub const STAGING_RECORD: &str = "remote-staging.json";

/// [`STAGING_RECORD`].
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Staging {
    /// A three-host run's processes carry `LINECARD_RUN=<marker>`; a
    /// single-host run has none (its host runs `linecard run` itself).
    pub marker: Option<String>,
    pub hosts: Vec<Staged>,
}

/// One host's private directory of the run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Staged {
    /// `host` (single host), `dut`, `peer` or `observer`.
    pub role: String,
    pub target: String,
    pub port: Option<u16>,
    pub identity: Option<PathBuf>,
    pub options: Vec<String>,
    /// The directory `private_dir` made there.
    pub dir: String,
}

impl Staged {
    pub fn new(role: &str, conn: &Connection, dir: &str) -> Self {
        Self {
            role: role.into(),
            target: conn.target.clone(),
            port: conn.port,
            identity: conn.identity.clone(),
            options: conn.options.clone(),
            dir: dir.into(),
        }
    }

    pub fn connection(&self) -> Connection {
        Connection {
            target: self.target.clone(),
            port: self.port,
            identity: self.identity.clone(),
            options: self.options.clone(),
            multiplex: false,
        }
    }
}

impl Staging {
    /// Writes the record into `run_dir` (through a temporary file and a
    /// rename: a killed harness leaves the old record or the new one).
    pub fn write(&self, run_dir: &Path) -> Result<()> {
        crate::sys::write_json_atomically(&run_dir.join(STAGING_RECORD), self)
    }

    /// The record in `run_dir`, if the run was staged on hosts.
    pub fn read(run_dir: &Path) -> Result<Option<Self>> {
        let path = run_dir.join(STAGING_RECORD);
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(Some(
                serde_json::from_str(&text)
                    .with_context(|| format!("parsing {}", path.display()))?,
            )),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }
}

/// What `linecard teardown` did on one host.
#[derive(Debug)]
pub struct HostTeardown {
    pub role: String,
    pub target: String,
    pub dir: String,
    /// Where the host's results were brought (a single-host run whose
    /// harness died before fetching them).
    pub fetched: Option<PathBuf>,
    pub result: Result<(), String>,
}

/// `linecard teardown RUN_DIR` for a run staged on hosts over SSH: on
/// each host, stops the run's processes (a three-host run's by marker;
/// a single-host run is interrupted like Ctrl-C and waited for, bounded,
/// so that it tears its own lab down), brings back what a single-host run
/// left there (checked file by file), then removes the run's directory.
/// A host that cannot be reached keeps its record for a later try.
pub fn teardown(run_dir: &Path, staging: &mut Staging) -> Result<Vec<HostTeardown>> {
    let mut done = Vec::new();
    let mut left = Vec::new();
    for host in std::mem::take(&mut staging.hosts) {
        let conn = host.connection();
        let mut fetched = None;
        let result = (|| -> Result<()> {
            match &staging.marker {
                Some(marker) => {
                    conn.exec(&kill_marked(&quote(&host.dir), marker), None)?;
                }
                None => {
                    fetched = stop_and_fetch(&conn, &host.dir, run_dir)?;
                }
            }
            conn.exec(&format!("rm -rf {}", quote(&host.dir)), None)?;
            Ok(())
        })();
        if result.is_err() {
            left.push(host.clone());
        }
        done.push(HostTeardown {
            role: host.role,
            target: host.target,
            dir: host.dir,
            fetched,
            result: result.map_err(|e| format!("{e:#}")),
        });
    }
    staging.hosts = left;
    staging.write(run_dir)?;
    Ok(done)
}

/// A single-host run's remote `linecard run`: interrupted if it still
/// runs (it tears its lab down, as on Ctrl-C), waited for (at most 120
/// s), and its results brought into `run_dir/fetched/`.
fn stop_and_fetch(conn: &Connection, staged: &str, run_dir: &Path) -> Result<Option<PathBuf>> {
    let s = quote(staged);
    conn.exec(
        &format!(
            "[ -e {s}/run.exit ] || kill -INT $(cat {s}/run.pid 2>/dev/null) 2>/dev/null; \
             for i in $(seq 120); do [ -e {s}/run.exit ] && break; \
             kill -0 $(cat {s}/run.pid 2>/dev/null) 2>/dev/null || break; sleep 1; done; true"
        ),
        None,
    )?;
    let results = format!("{staged}/r");
    let has_results = conn
        .output(&format!("test -d {}", quote(&results)))?
        .status
        .success();
    if !has_results {
        return Ok(None);
    }
    let into = run_dir.join("fetched");
    std::fs::create_dir_all(&into)?;
    fetch_tree(conn, &results, &into)?;
    Ok(Some(into))
}
