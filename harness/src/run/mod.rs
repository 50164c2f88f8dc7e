//! `linecard run SCENARIO`: brings the lab up, runs every DUT of the
//! scenario through its phases against the peer with a capture on the
//! observer, analyses the captures, judges each DUT, and writes a
//! self-describing results directory:
//!
//! ```text
//! results/<scenario>/<run-id>/
//!   manifest.json        scenario, versions, kernel, CPUs, every phase's
//!                        start/end and stress-ng command line, verdicts
//!   summary.md           the table, with every figure's capture named
//!   status               complete | failed: <why> | invalid: <why>
//!   <dut>/capture.pcap   the observer's capture (kept whatever happens)
//!   <dut>/analysis/      analysis.json, flows.csv, packets.parquet, ...
//!   <dut>/*.log          daemon, stress and canary output
//! ```

mod actions;
use actions::restart_suffix;
pub mod cpu;
pub mod daemons;
mod dut;
pub mod faults;
mod figures;
pub mod hosts;
pub mod impostor;
pub mod judge;
pub mod mirror;
pub mod provider;
pub mod proxmox;
mod readiness;
mod road;
pub(crate) mod site;
pub mod space;
pub mod ssh;

mod verdict;

use crate::manifest::figures::PhaseFigures;
use crate::manifest::status::RunStatus;
use crate::manifest::verdict::Verdict;
use crate::manifest::{DutOutcome, FamilyOutcome, HostFacts, Manifest};
use crate::rt_throttle;
use crate::scenario::{slug, DutSpec, Fault, ProviderKind, Scenario};
use anyhow::{bail, Context, Result};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Set by SIGINT/SIGTERM: the run stops at the next check, tears down and
/// keeps what it has, marked failed.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// `results/` by default.
    pub results: PathBuf,
    /// Only the DUTs with these labels (all when empty).
    pub only: Vec<String>,
    /// The stress profiles' directory (copied to an `ssh` host).
    pub profiles: PathBuf,
    /// The run's id when its provider chose it before the run began (the
    /// proxmox provider records in the run directory what it makes);
    /// otherwise the time the run starts.
    pub run_id: Option<String>,
    /// How long a local run waits for another command that holds the
    /// lab (`lock.rs`) before it refuses, naming it.
    pub lab_wait: std::time::Duration,
}

impl DutOutcome {
    /// Whether its environment spoiled the run (`judge::spoiled`), for
    /// the DUT's sessions as a whole or any family's judged alone.
    fn spoiled(&self) -> bool {
        let Some(e) = &self.evidence else {
            return false;
        };
        if self.spec.per_family.is_empty() {
            return judge::spoiled(&self.spec.expect, e);
        }
        self.families.iter().any(|f| {
            judge::spoiled(
                &self.spec.expect_for(f.family),
                &e.with_phases(f.phases.clone()),
            )
        })
    }
}

pub struct RunResult {
    pub dir: PathBuf,
    pub manifest: Manifest,
}

impl RunResult {
    /// 0 when every DUT passed or was unavailable; 1 otherwise.
    pub fn exit_code(&self) -> i32 {
        i32::from(!self.manifest.status.is_complete())
    }
}

use crate::sys::unix_ns;

/// `20261130T092313Z`: UTC, sortable, one per second.
pub fn run_id(unix_s: i64) -> String {
    let days = unix_s.div_euclid(86_400);
    let secs = unix_s.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

/// Makes a new run's directory under `results/<scenario>/` and returns its
/// id: `run_id` of `now_ns`, with `-2`, `-3`, ... when another run took
/// that second. The directory is created exclusively (`mkdir`, never
/// `mkdir -p` on the run's own level), so two runs never share one.
pub fn new_run_dir(results: &Path, scenario: &str, now_ns: i64) -> Result<(String, PathBuf)> {
    let parent = results.join(scenario);
    std::fs::create_dir_all(&parent).with_context(|| format!("creating {}", parent.display()))?;
    let base = run_id(now_ns / 1_000_000_000);
    for n in 1..=1000 {
        let id = if n == 1 {
            base.clone()
        } else {
            format!("{base}-{n}")
        };
        let dir = parent.join(&id);
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok((id, dir)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("creating {}", dir.display())),
        }
    }
    bail!(
        "{}: a thousand runs in one second already",
        parent.display()
    )
}

/// Progress on stderr: a bar on a terminal (indicatif), a plain line
/// every 10 s otherwise (a CI log, a pipe).
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    last: Instant,
}

impl Progress {
    fn new() -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::new(0);
            bar.set_style(
                indicatif::ProgressStyle::with_template("  {msg:<38} [{bar:30}] {pos:>4}/{len} s")
                    .expect("a valid template")
                    .progress_chars("#> "),
            );
            bar
        });
        Self {
            bar,
            last: Instant::now() - Duration::from_secs(60),
        }
    }

    fn tick(&mut self, dut: &str, phase: &str, elapsed: u64, total: u64) {
        if let Some(bar) = &self.bar {
            bar.set_length(total);
            bar.set_position(elapsed.min(total));
            bar.set_message(format!("{dut} {phase}"));
        } else if self.last.elapsed() >= Duration::from_secs(10) {
            eprintln!("  {dut}: {phase} {elapsed}/{total} s");
            self.last = Instant::now();
        }
    }

    fn done(&self) {
        if let Some(bar) = &self.bar {
            bar.finish();
        }
    }
}

extern "C" fn on_interrupt(_: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    INTERRUPTED.store(true, Ordering::Relaxed);
}

/// SIGINT and SIGTERM stop the run at its next check; it then tears down
/// and keeps what it has, marked failed.
pub fn install_interrupt_handler() {
    let handler = on_interrupt as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
    }
}

pub fn run(scenario: &Scenario, options: &RunOptions) -> Result<RunResult> {
    let mut provider = match road::Road::for_scenario(scenario, options) {
        road::Road::Elsewhere(spec) => return ssh::run(scenario, spec, options),
        road::Road::Here(provider) => provider,
    };
    let result = provider.prepare().and_then(|ready| {
        let options = RunOptions {
            run_id: ready.run_id.or_else(|| options.run_id.clone()),
            ..options.clone()
        };
        let site = ready.site;
        run_prepared(scenario, &options, ready.facts, &|dut, run_dir, _, name| {
            // A ladder's row runs at its own step's session count.
            dut::run_dut(site, &scenario.for_dut(dut), dut, run_dir, name)
        })
    });
    // Torn down whatever happened (a failed `prepare` too); a teardown
    // failure is reported, and the run's own error (if any) wins.
    let teardown = provider.teardown();
    let result = result?;
    teardown.context("tearing the run's hosts down")?;
    Ok(result)
}

/// How many times a DUT runs at most when its environment spoils it: an
/// excused run is repeated once, and a second excused run stays `invalid`
/// (inconclusive: nothing was measured), never a pass. More repeats would
/// let a flaky DUT through (a 50 % flake passes three tries 87.5 % of the
/// time).
pub const MAX_ATTEMPTS: usize = 2;

/// The directory of a DUT's attempt `n` (1-based; short: the daemons' unix
/// sockets live under it).
fn attempt_dir(label: &str, n: usize) -> String {
    if n <= 1 {
        slug(label)
    } else {
        format!("{}-{n}", slug(label))
    }
}

/// Refuses, before anything starts, a results directory so deep that a
/// daemon's unix socket in it would not fit `sun_path`.
fn check_socket_paths(scenario: &Scenario, options: &RunOptions) -> Result<()> {
    // Every run id has this length.
    let run_dir = options
        .results
        .join(&scenario.name)
        .join("YYYYMMDDTHHMMSSZ");
    // The longest restarted daemon's directory suffix (`restarted_dir`).
    let last_restart = scenario
        .phases
        .iter()
        .enumerate()
        .filter_map(|(i, p)| match p.fault {
            Some(Fault::PeerRestart { times }) => Some(restart_suffix(i, times - 1)),
            Some(Fault::EngineRestart | Fault::Impostor) => Some(restart_suffix(i, 0)),
            _ => None,
        })
        .max_by_key(String::len);
    let deepest = scenario
        .duts
        .iter()
        .flat_map(|dut| {
            let dut_dir = run_dir.join(attempt_dir(&dut.label, MAX_ATTEMPTS));
            daemons::socket_paths(scenario.peer, &dut.implementation, last_restart.clone())
                .into_iter()
                .map(move |socket| dut_dir.join(socket))
        })
        .max_by_key(|path| path.as_os_str().len());
    match deepest {
        Some(path) if path.as_os_str().len() > daemons::SOCKET_PATH_MAX => anyhow::bail!(
            "the results directory {} is too deep for this run's unix sockets: {} would be {} \
             bytes, and a socket's path holds at most {}; pass a shorter --results (or use \
             shorter DUT labels). Nothing was started.",
            options.results.display(),
            path.display(),
            path.as_os_str().len(),
            daemons::SOCKET_PATH_MAX
        ),
        _ => Ok(()),
    }
}

/// The long gaps a DUT's attempt that did not pass keeps in the manifest,
/// the longest (`Evidence::keep_longest_gaps`): a 512-session step whose
/// capture dropped frames wrote a 349 MB manifest with them all.
const MANIFEST_LONG_GAPS: usize = 1000;

/// One attempt at one DUT: its spec, the run's directory, the host's
/// facts and the attempt's directory name.
type RunOne<'a> = dyn Fn(&DutSpec, &Path, &HostFacts, &str) -> Result<DutOutcome> + 'a;

/// Runs each DUT of `scenario` with `run_one` (again, up to
/// [`MAX_ATTEMPTS`], when its environment spoiled it), recording each in
/// the run's manifest as it ends.
fn run_prepared(
    scenario: &Scenario,
    options: &RunOptions,
    host: HostFacts,
    run_one: &RunOne,
) -> Result<RunResult> {
    let started = unix_ns();
    // A run id given is the caller's, whose directory it made already.
    let (run_id, dir) = match &options.run_id {
        Some(id) => (id.clone(), options.results.join(&scenario.name).join(id)),
        None => new_run_dir(&options.results, &scenario.name, started)?,
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    if let Err(e) = space::lay_ballast(&dir) {
        // Nothing ran: leave nothing behind.
        let _ = std::fs::remove_dir_all(&dir);
        return Err(e);
    }
    let mut manifest = Manifest {
        schema_version: 1,
        scenario: scenario.clone(),
        run_id,
        status: RunStatus::Running,
        host,
        duts: Vec::new(),
    };
    write_manifest(&dir, &manifest)?;
    // Set when the results disk filled: no further DUT runs, and the
    // ballast makes room for the verdict.
    let mut disk_full: Option<String> = None;
    eprintln!(
        "linecard run {}: {} DUT(s), {} s of phases each; results in {}",
        scenario.name,
        scenario.duts.len(),
        scenario.seconds_per_dut(),
        dir.display()
    );
    for dut in &scenario.duts {
        if !options.only.is_empty() && !options.only.iter().any(|l| dut.answers_to(l)) {
            continue;
        }
        if INTERRUPTED.load(Ordering::Relaxed) || disk_full.is_some() {
            break;
        }
        let (mut outcome, full) = attempt(
            run_one,
            dut,
            &dir,
            &manifest.host,
            &attempt_dir(&dut.label, 1),
        );
        disk_full = disk_full.or(full);
        let mut spoiled = Vec::new();
        while outcome.spoiled()
            && spoiled.len() + 1 < MAX_ATTEMPTS
            && !INTERRUPTED.load(Ordering::Relaxed)
            && disk_full.is_none()
        {
            eprintln!(
                "  {:<30} {} (attempt {} of at most {MAX_ATTEMPTS}; running it again)",
                outcome.label,
                outcome.verdict.describe(),
                spoiled.len() + 1
            );
            let n = spoiled.len() + 2;
            let (next, full) = attempt(
                run_one,
                dut,
                &dir,
                &manifest.host,
                &attempt_dir(&dut.label, n),
            );
            disk_full = disk_full.or(full);
            spoiled.push(std::mem::replace(&mut outcome, next));
        }
        // Judged and decided: what did not pass keeps its longest gaps.
        for judged in std::iter::once(&mut outcome).chain(&mut spoiled) {
            if let (false, Some(e)) = (judged.verdict.passed(), judged.evidence.as_mut()) {
                e.keep_longest_gaps(MANIFEST_LONG_GAPS);
            }
        }
        outcome.spoiled_attempts = spoiled;
        eprintln!("  {:<30} {}", outcome.label, outcome.verdict.describe());
        manifest.duts.push(outcome);
        if let Err(e) = write_manifest(&dir, &manifest) {
            if !space::is_disk_full(&e) {
                return Err(e);
            }
            disk_full = disk_full.or(Some(format!("{e:#}")));
        }
    }
    space::drop_ballast(&dir);
    manifest.status = match &disk_full {
        Some(why) => RunStatus::Failed(format!(
            "the results disk filled ({why}); what was written is kept, earlier runs untouched"
        )),
        None => overall_status(&manifest.duts),
    };
    finish(dir, manifest)
}

/// Writes a run's final records (manifest, status, summary) into `dir`.
fn finish(dir: PathBuf, manifest: Manifest) -> Result<RunResult> {
    write_manifest(&dir, &manifest)?;
    std::fs::write(dir.join("status"), format!("{}\n", manifest.status))?;
    std::fs::write(
        dir.join("summary.md"),
        crate::export::summary::summary_markdown(&manifest),
    )?;
    Ok(RunResult { dir, manifest })
}

/// One attempt at a DUT; a DUT that could not be run at all (a daemon that
/// would not start, a port in use) fails with the reason. The second value
/// says why, when the reason was a full results disk.
fn attempt(
    run_one: &RunOne,
    dut: &DutSpec,
    run_dir: &Path,
    host: &HostFacts,
    dir_name: &str,
) -> (DutOutcome, Option<String>) {
    match run_one(dut, run_dir, host, dir_name) {
        Ok(outcome) => (outcome, None),
        Err(e) => {
            let why = format!("{e:#}");
            let full = space::is_disk_full(&e).then(|| why.clone());
            let outcome = DutOutcome {
                label: dut.label.clone(),
                spec: dut.clone(),
                verdict: Verdict::Fail(why),
                // A capture stopped by the full disk is kept: it is what
                // was measured before.
                capture: Some(PathBuf::from(dir_name).join("capture.pcap"))
                    .filter(|c| run_dir.join(c).exists()),
                evidence: None,
                phases: Vec::new(),
                // This machine's, when the DUT ran here.
                sched_rt_runtime_us: (host.provider == ProviderKind::Local)
                    .then(|| rt_throttle::read().ok())
                    .flatten(),
                spoiled_attempts: Vec::new(),
                families: Vec::new(),
                programs: Vec::new(),
                receive_path: Vec::new(),
                engine_view: Vec::new(),
            };
            (outcome, full)
        }
    }
}

/// `complete` only when no DUT failed or was invalid, and nothing was
/// interrupted.
fn overall_status(duts: &[DutOutcome]) -> RunStatus {
    if INTERRUPTED.load(Ordering::Relaxed) {
        return RunStatus::Failed("interrupted (partial results kept)".into());
    }
    if let Some(d) = duts
        .iter()
        .find(|d| matches!(d.verdict, Verdict::Invalid(_)))
    {
        return RunStatus::Invalid(format!("{}: {}", d.label, d.verdict.describe()));
    }
    if let Some(d) = duts.iter().find(|d| matches!(d.verdict, Verdict::Fail(_))) {
        return RunStatus::Failed(format!("{}: {}", d.label, d.verdict.describe()));
    }
    RunStatus::Complete
}

fn write_manifest(dir: &Path, manifest: &Manifest) -> Result<()> {
    let tmp = dir.join(".manifest.json.tmp");
    std::fs::write(&tmp, serde_json::to_string_pretty(manifest)?)
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, dir.join("manifest.json"))?;
    Ok(())
}

/// Whether a phase is over: its stress processes have all ended
/// (stress-ng has `--timeout`) or, without stress, its time is up. Bounded
/// at 10 s past its time; Ctrl-C ends it too.
fn phase_over(stress: &mut [Box<dyn site::Process>], started: Instant, seconds: u64) -> bool {
    let elapsed = started.elapsed();
    let finished = if stress.is_empty() {
        elapsed >= Duration::from_secs(seconds)
    } else {
        stress.iter_mut().all(|s| !s.running())
    };
    finished || elapsed >= Duration::from_secs(seconds + 10) || INTERRUPTED.load(Ordering::Relaxed)
}

/// The verdict of a DUT judged per family: the first family's invalid
/// verdict, else its failure, else a pass (with every family's excused
/// gaps, if any).
fn worst_of_families(families: &[FamilyOutcome]) -> Verdict {
    let named = |f: &FamilyOutcome, why: &str| format!("{}: {why}", f.family.name());
    families
        .iter()
        .find_map(|f| match &f.verdict {
            Verdict::Invalid(why) => Some(Verdict::Invalid(named(f, why))),
            _ => None,
        })
        .or_else(|| {
            families.iter().find_map(|f| match &f.verdict {
                Verdict::Fail(why) => Some(Verdict::Fail(named(f, why))),
                _ => None,
            })
        })
        .unwrap_or_else(|| {
            let excused: Vec<_> = (families.iter())
                .flat_map(|f| match &f.verdict {
                    Verdict::Excused(gaps) => gaps.clone(),
                    _ => Vec::new(),
                })
                .collect();
            if excused.is_empty() {
                Verdict::Pass
            } else {
                Verdict::Excused(excused)
            }
        })
}

/// The most sessions that flapped within one `window`: 1 or 0 for
/// independent flaps, many for a correlated flap.
pub fn correlated(flaps_per_session: &[Vec<i64>], window: i64) -> usize {
    let mut events: Vec<(i64, usize)> = flaps_per_session
        .iter()
        .enumerate()
        .flat_map(|(session, at)| at.iter().map(move |&t| (t, session)))
        .collect();
    events.sort_unstable();
    let mut best = 0;
    for (i, &(start, _)) in events.iter().enumerate() {
        let mut sessions: Vec<usize> = events[i..]
            .iter()
            .take_while(|(t, _)| *t - start <= window)
            .map(|&(_, s)| s)
            .collect();
        sessions.sort_unstable();
        sessions.dedup();
        best = best.max(sessions.len());
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_are_utc_and_sortable() {
        assert_eq!(run_id(0), "19700101T000000Z");
        assert_eq!(run_id(1_796_030_593), "20261130T092313Z");
        assert_eq!(run_id(951_782_400), "20000229T000000Z");
    }

    #[test]
    fn flaps_of_many_sessions_in_one_window_are_one_correlated_flap() {
        let ms = 1_000_000;
        assert_eq!(correlated(&[vec![], vec![]], 100 * ms), 0);
        // Independent: far apart.
        assert_eq!(
            correlated(&[vec![0], vec![500 * ms], vec![1000 * ms]], 100 * ms),
            1
        );
        // One stall: three sessions within 40 ms, a fourth later; a session
        // flapping twice in the window counts once.
        let sessions = [
            vec![10 * ms, 20 * ms],
            vec![30 * ms],
            vec![50 * ms],
            vec![900 * ms],
        ];
        assert_eq!(correlated(&sessions, 100 * ms), 3);
    }

    #[test]
    fn labels_become_directory_names() {
        assert_eq!(slug("rt, RT throttling off"), "rt-rt-throttling-off");
        assert_eq!(slug("FRR bfdd 8.4.4"), "frr-bfdd-8-4-4");
    }
}
