//! Helpers for the privileged tests: they run the real `linecard` binary
//! against the real kernel, one at a time (the lab is machine-global).

#![allow(clippy::unwrap_used)] // a test: a panic is the failure, with its line
#![allow(dead_code)]

pub mod prometheus;

use std::fs::File;
use std::path::{Path, PathBuf};
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
    assert_eq!(
        // SAFETY: flock on an fd we own; blocks until the lock is ours.
        unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&file), libc::LOCK_EX) },
        0
    );
    LabLock(file)
}

pub fn linecard(args: &[&str]) -> Output {
    let output = Command::new(env!("CARGO_BIN_EXE_linecard"))
        .args(args)
        .output()
        .expect("running linecard");
    if args.starts_with(&["lab", "up"]) {
        // The test's own timing (signals, waits) must not sit behind the
        // DUT's stress: the lab's partitions keep a thread where it is.
        linecard_harness::lab::keep_off_dut_cpus();
    }
    output
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

/// Wall-clock nanoseconds: the clock the captures are stamped with.
pub fn epoch_ns() -> i64 {
    linecard_harness::sys::unix_ns()
}

/// The engine binary, built beside `linecard` (`cargo build --bins`).
pub fn linecardd() -> std::path::PathBuf {
    let path = std::path::Path::new(env!("CARGO_BIN_EXE_linecard")).with_file_name("linecardd");
    assert!(
        path.exists(),
        "{} is missing: build it first (`cargo build --bins`; scripts/test.sh does)",
        path.display()
    );
    path
}

/// `linecardd ctl ARGS` against `socket`, kept off the DUT's CPUs like the
/// rest of the harness; `None` if it failed (the daemon not listening yet,
/// or a refusal).
pub fn try_ctl(socket: &std::path::Path, args: &[&str]) -> Option<serde_json::Value> {
    linecard_harness::linecardd::ctl_with(&linecardd(), socket, args).ok()
}

/// Like [`try_ctl`], but a failure fails the test.
pub fn ctl(socket: &std::path::Path, args: &[&str]) -> serde_json::Value {
    linecard_harness::linecardd::ctl_with(&linecardd(), socket, args)
        .unwrap_or_else(|e| panic!("{e:#}"))
}

/// A fresh scratch directory for one test run.
pub fn scratch_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("linecard-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// One `[[session]]` of a DUT configuration.
pub struct DutSession<'a> {
    pub peer: String,
    pub local: String,
    pub backend: &'a str,
    pub interface: Option<&'a str>,
}

/// Writes `dir/dut.toml` (3 x 10 ms sessions) and starts linecardd with it
/// in the DUT's namespace and cpuset. `engine_extra`: more `[engine]` keys.
pub fn start_linecardd(
    dir: &std::path::Path,
    socket: &std::path::Path,
    engine_extra: &str,
    sessions: &[DutSession],
) -> linecard_harness::procs::Daemon {
    start_linecardd_with(dir, socket, engine_extra, sessions, "")
}

/// [`start_linecardd`] with more keys for every session (e.g. `echo =
/// true`).
pub fn start_linecardd_with(
    dir: &std::path::Path,
    socket: &std::path::Path,
    engine_extra: &str,
    sessions: &[DutSession],
    session_extra: &str,
) -> linecard_harness::procs::Daemon {
    let mut config = format!(
        "[engine]\ncontrol_socket = \"{}\"\n{engine_extra}",
        socket.display()
    );
    for s in sessions {
        config.push_str(&format!(
            "\n[[session]]\npeer = \"{}\"\nlocal = \"{}\"\ntx_interval_ms = 10\nrx_interval_ms = 10\nmultiplier = 3\nbackend = \"{}\"\n",
            s.peer, s.local, s.backend
        ));
        if let Some(interface) = s.interface {
            config.push_str(&format!("interface = \"{interface}\"\n"));
        }
        config.push_str(session_extra);
    }
    start_linecardd_toml(dir, &config)
}

/// Writes `config` to `dir/dut.toml` and starts linecardd with it in the
/// DUT's namespace and cpuset.
pub fn start_linecardd_toml(
    dir: &std::path::Path,
    config: &str,
) -> linecard_harness::procs::Daemon {
    start_linecardd_toml_with(dir, config, &[])
}

/// [`start_linecardd_toml`] with more arguments (e.g. `--take-over`).
pub fn start_linecardd_toml_with(
    dir: &std::path::Path,
    config: &str,
    extra: &[&str],
) -> linecard_harness::procs::Daemon {
    use linecard_harness::lab::spec;
    std::fs::write(dir.join("dut.toml"), config).unwrap();
    let mut args = vec![
        "--config".to_string(),
        dir.join("dut.toml").display().to_string(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    linecard_harness::procs::Daemon::spawn(
        "linecardd",
        spec::DUT.namespace,
        Some(&spec::cpuset_dir(spec::DUT_CPUSET)),
        linecardd().to_str().unwrap(),
        &args,
        &dir.join("linecardd.log"),
    )
    .unwrap()
}

/// Waits (bounded, no fixed sleep) until `check` holds on the DUT's session
/// list; returns that list.
pub fn wait_sessions(
    socket: &std::path::Path,
    dut: &mut linecard_harness::procs::Daemon,
    limit: std::time::Duration,
    what: &str,
    check: impl Fn(&[serde_json::Value]) -> bool,
) -> Vec<serde_json::Value> {
    let deadline = std::time::Instant::now() + limit;
    loop {
        assert!(
            dut.running(),
            "linecardd exited while waiting for {what}:\n{}",
            dut.log_tail()
        );
        let list = try_ctl(socket, &["list", "--json"]).unwrap_or_default();
        if let Some(sessions) = list["sessions"].as_array() {
            if check(sessions) {
                return sessions.clone();
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what} not reached within {limit:?}: {list:#}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A duration in seconds from the environment, or `default`.
pub fn env_seconds(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// A 3 x 10 ms session as a peer daemon's configuration sees it.
pub fn session_3x10(local: &str, peer: &str) -> linecard_harness::procs::PeerSession {
    linecard_harness::procs::PeerSession {
        local: local.parse().unwrap(),
        peer: peer.parse().unwrap(),
        tx_ms: 10,
        rx_ms: 10,
        multiplier: 3,
        multihop: false,
        min_ttl: None,
        echo: false,
        auth: None,
    }
}

/// The stress canary run as a witness on the DUT's CPUs: while it runs, it
/// records every time a normal task there was kept from running for more than
/// 2 ms. A late event on the wire is the engine's fault only if the CPU was
/// free to run it; a stall here (hypervisor steal, a kernel hiccup) says it
/// was not.
pub struct CpuWitness {
    daemon: linecard_harness::procs::Daemon,
    out: std::path::PathBuf,
}

impl CpuWitness {
    /// Starts watching for at most `seconds` (the canary's own bound).
    pub fn start(dir: &std::path::Path, seconds: u64) -> Self {
        use linecard_harness::lab::spec;
        let out = dir.join("witness.jsonl");
        let daemon = linecard_harness::procs::Daemon::spawn(
            "witness",
            spec::DUT.namespace,
            Some(&spec::cpuset_dir(spec::DUT_CPUSET)),
            env!("CARGO_BIN_EXE_linecard"),
            &[
                "canary".into(),
                "--seconds".into(),
                seconds.to_string(),
                "--out".into(),
                out.display().to_string(),
            ],
            &dir.join("witness.log"),
        )
        .unwrap();
        Self { daemon, out }
    }

    /// Stops the witness; the stalls it saw (CLOCK_REALTIME windows).
    pub fn finish(mut self) -> Vec<linecard_harness::canary::Stall> {
        self.daemon.stop().unwrap();
        linecard_harness::canary::read(&self.out).unwrap()
    }
}

/// The steal witness beside a test's own measurement (the runner starts
/// one per DUT): the DUT CPUs' hypervisor steal, placed in time, read off
/// the DUT's CPUs. A late packet is excused only by steal inside its gap.
pub struct StealWitness {
    daemon: linecard_harness::procs::Daemon,
    out: std::path::PathBuf,
}

impl StealWitness {
    /// Starts watching the DUT's CPUs for at most `seconds`.
    pub fn start(dir: &std::path::Path, seconds: u64) -> Self {
        Self::start_on(dir, seconds, &[dut_cpu()])
    }

    /// Starts watching `cpus` (e.g. both ends' when each side is under
    /// test) for at most `seconds`.
    pub fn start_on(dir: &std::path::Path, seconds: u64, cpus: &[usize]) -> Self {
        use linecard_harness::lab::spec;
        let cpus: Vec<String> = cpus.iter().map(usize::to_string).collect();
        let out = dir.join("steal.jsonl");
        let daemon = linecard_harness::procs::Daemon::spawn(
            "steal-witness",
            spec::OBSERVER_NS,
            Some(&spec::cpuset_dir(spec::REST_CPUSET)),
            env!("CARGO_BIN_EXE_linecard"),
            &[
                "steal-witness".into(),
                "--cpus".into(),
                cpus.join(","),
                "--seconds".into(),
                seconds.to_string(),
                "--out".into(),
                out.display().to_string(),
            ],
            &dir.join("steal-witness.log"),
        )
        .unwrap();
        Self { daemon, out }
    }

    /// Stops the witness; what it saw.
    pub fn finish(mut self) -> linecard_harness::steal::StealTrace {
        self.daemon.stop().unwrap();
        linecard_harness::steal::StealTrace::read(&self.out)
    }
}

/// The gaps of `flow` longer than `over_ms`, as (start, end) ns.
pub fn gaps_over(
    flow: &linecard_capture_analyzer::model::FlowResult,
    over_ms: f64,
) -> Vec<(i64, i64)> {
    flow.gap_ms
        .longest
        .iter()
        .filter(|g| g.gap_ms > over_ms)
        .map(|g| (g.ended_at_ns - (g.gap_ms * 1e6) as i64, g.ended_at_ns))
        .collect()
}

/// Whether a disturbance measured on the DUT's CPU inside each of `gaps`
/// ((start, end) ns) can excuse them: hypervisor steal the witness placed
/// inside it, or a stall of the canary (a normal task on an idle CPU kept
/// from running) overlapping it. `None` when there is no gap or one of them
/// saw neither: the DUT's, whatever happened elsewhere in the window.
pub fn disturbed_inside(
    gaps: &[(i64, i64)],
    steal: &linecard_harness::steal::StealTrace,
    stalls: &[linecard_harness::canary::Stall],
) -> Option<String> {
    if gaps.is_empty() {
        return None;
    }
    let mut said = Vec::new();
    for &(from, to) in gaps {
        let stolen = steal.within(from, to);
        let stall = linecard_harness::canary::longest_stall_ms(stalls, from, to);
        if stolen <= 0.0 && stall <= 0.0 {
            return None;
        }
        said.push(format!(
            "{:.2} ms gap: {stolen} ms stolen, a {stall:.2} ms stall inside it",
            (to - from) as f64 / 1e6
        ));
    }
    Some(said.join("; "))
}

/// The first CPU of the lab's DUT cpuset.
pub fn dut_cpu() -> usize {
    use linecard_harness::lab::spec;
    std::fs::read_to_string(spec::cpuset_dir(spec::DUT_CPUSET).join("cpuset.cpus"))
        .unwrap()
        .trim()
        .split(['-', ','])
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// The whole machine's CPU time and the hypervisor's steal since a start
/// (`/proc/stat`'s first line, in ticks).
pub struct StealMeter {
    total: u64,
    steal: u64,
}

impl StealMeter {
    fn now() -> (u64, u64) {
        linecard_harness::run::cpu::machine_ticks()
    }

    pub fn start() -> Self {
        let (total, steal) = Self::now();
        Self { total, steal }
    }

    /// Steal as a share of all CPU time since the start, percent.
    pub fn percent(&self) -> f64 {
        let (total, steal) = Self::now();
        let elapsed = total.saturating_sub(self.total).max(1);
        100.0 * steal.saturating_sub(self.steal) as f64 / elapsed as f64
    }
}

/// Where inconclusive tests are listed; `scripts/test.sh` prints it last.
fn inconclusive_log() -> PathBuf {
    std::env::var_os("LINECARD_INCONCLUSIVE_LOG")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target/inconclusive.log"))
}

/// A test its environment kept from measuring: every attempt was invalid
/// (the judge excused it by a disturbance measured inside the gap it
/// spoiled, or the stress did not bite, or the capture dropped packets).
/// Never a pass: said on stderr and listed in the inconclusive log with the
/// reason and the hypervisor's share of the machine meanwhile, and counted
/// inconclusive by `scripts/outcomes.sh`.
pub fn inconclusive(label: &str, why: &str, meter: &StealMeter) {
    let stolen = meter.percent();
    record_outcome(&format!(
        "INCONCLUSIVE {label}: every attempt was invalid ({why}); the hypervisor took {stolen:.1} % of this machine's CPU time meanwhile"
    ));
}

/// Prints `line` and appends it to the inconclusive log under the running
/// test's id (`<test binary>::<test>`, the names libtest prints), so that
/// `scripts/outcomes.sh` counts that test inconclusive instead of passed.
fn record_outcome(line: &str) {
    eprintln!("{line}");
    let test = std::thread::current()
        .name()
        .unwrap_or("(unnamed thread)")
        .to_string();
    let id = format!("{}::{test}", env!("CARGO_CRATE_NAME"));
    use std::io::Write;
    let log = inconclusive_log();
    let _ = std::fs::create_dir_all(log.parent().unwrap());
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .unwrap_or_else(|e| panic!("{line} (and the inconclusive log {}: {e})", log.display()));
    writeln!(f, "{id}\t{}", line.replace(['\n', '\t'], " ")).unwrap();
}

/// Whether the run in `dir` stayed invalid after the runner's repeat (an
/// excused DUT runs twice at most): then it is [`inconclusive`], and the
/// caller returns without asserting what was not measured.
pub fn inconclusive_run(label: &str, dir: &Path, meter: &StealMeter) -> bool {
    let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
    if !status.starts_with("invalid:") {
        return false;
    }
    inconclusive(
        label,
        &format!("{} ({})", status.trim(), dir.display()),
        meter,
    );
    true
}

/// Runs `run_once`, and once more if it was invalid: `Err` means the run
/// was invalid (its environment spoiled it, measured inside the window it
/// spoiled); a second invalid run is [`inconclusive`]. Failures of the DUT
/// panic inside `run_once`.
pub fn retrying_invalid(label: &str, run_once: impl Fn() -> Result<(), String>) {
    const RUNS: usize = 2;
    let meter = StealMeter::start();
    for run in 1..=RUNS {
        match run_once() {
            Ok(()) => return,
            Err(why) if run < RUNS => eprintln!("{label}: {why}; running again once"),
            Err(why) => inconclusive(label, &format!("{why}, twice in a row"), &meter),
        }
    }
}

/// Sends raw Ethernet frames from the spare host's eth0 (AF_PACKET), so
/// that TTL, IP options and every other header byte are exactly as crafted.
pub fn inject(frames: &[Vec<u8>], copies: usize) {
    linecard_harness::inject::send_from_spare(
        frames,
        copies as u64,
        std::time::Duration::from_micros(50),
    )
    .unwrap();
}

/// A crafted frame from the spare host (its MAC) to the DUT.
pub fn from_spare(mut frame: Vec<u8>) -> Vec<u8> {
    frame[6..12].copy_from_slice(&[0x02, 0x1c, 0, 0, 0, 3]);
    frame
}

/// Waits (bounded) until stress-ng `parent`'s CPU hog has had 200 ms of
/// CPU: the stress bites from then on, not from the spawn (a hog started
/// while RT throttling held the CPU ran only at the next period, a second
/// later, and a kill in that second was not under L4).
pub fn wait_for_hog(parent: u32) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let ran_ns: u64 = std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter(|e| {
                let status = std::fs::read_to_string(e.path().join("status")).unwrap_or_default();
                status.lines().any(|l| l == "Name:\tstress-ng-cpu")
                    && status.lines().any(|l| l == format!("PPid:\t{parent}"))
            })
            .filter_map(|e| {
                std::fs::read_to_string(e.path().join("schedstat"))
                    .ok()?
                    .split_whitespace()
                    .next()?
                    .parse::<u64>()
                    .ok()
            })
            .sum();
        if ran_ns >= 200_000_000 {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "stress-ng ({parent}): its CPU hog ran {} ms in 5 s",
            ran_ns / 1_000_000
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// The L4 stress (a real-time CPU hog per DUT CPU, above normal tasks and
/// below our SCHED_FIFO 90), as stress-ng arguments.
pub const L4_HOG: [&str; 6] = ["--cpu", "1", "--sched", "fifo", "--sched-prio", "50"];
/// The L3 stress (a CPU hog and a timer storm per DUT CPU).
pub const L3_STORM: [&str; 8] = [
    "--cpu",
    "1",
    "--timer",
    "1",
    "--timerfd",
    "1",
    "--hrtimers",
    "1",
];

/// Starts stress-ng with `args` on the DUT's CPUs, in the DUT namespace,
/// bounded by its own `--timeout seconds`; its log in `dir/<name>.log`.
pub fn spawn_stress(
    dir: &std::path::Path,
    name: &str,
    args: &[&str],
    seconds: u64,
) -> linecard_harness::procs::Daemon {
    use linecard_harness::lab::spec;
    let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    args.extend(["--timeout".into(), format!("{seconds}s"), "--quiet".into()]);
    linecard_harness::procs::Daemon::spawn(
        name,
        spec::DUT.namespace,
        Some(&spec::cpuset_dir(spec::DUT_CPUSET)),
        "stress-ng",
        &args,
        &dir.join(format!("{name}.log")),
    )
    .unwrap()
}

/// Waits until every daemon in `stress` has ended (each is bounded by its
/// own timeout; this wait by `seconds` + 10 s).
pub fn wait_stress(stress: &mut [&mut linecard_harness::procs::Daemon], seconds: u64) {
    let limit = std::time::Instant::now() + std::time::Duration::from_secs(seconds + 10);
    while stress.iter_mut().any(|d| d.running()) {
        assert!(
            std::time::Instant::now() < limit,
            "stress-ng outlived its timeout"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Starts the observer's capture on the bridge port facing the DUT, into
/// `dir/run.pcap`, off the DUT's CPUs.
pub fn capture_dut_port(dir: &std::path::Path) -> linecard_harness::procs::Capture {
    use linecard_harness::lab::spec;
    linecard_harness::procs::Capture::start(
        spec::OBSERVER_NS,
        spec::DUT.bridge_port,
        &dir.join("run.pcap"),
        Some(&spec::cpuset_dir(spec::REST_CPUSET)),
    )
    .unwrap()
}

/// Analyses `pcap` within one window.
pub fn analyze_window(
    pcap: std::path::PathBuf,
    name: &str,
    start_ns: i64,
    end_ns: i64,
) -> linecard_capture_analyzer::model::Analysis {
    linecard_capture_analyzer::analyze(
        &[pcap],
        &linecard_capture_analyzer::Options {
            phases: vec![linecard_capture_analyzer::Phase {
                name: name.into(),
                start_ns,
                end_ns,
            }],
            timeline: false,
        },
        None,
    )
    .unwrap()
}

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The one run directory under `results/<scenario>/`.
pub fn run_dir(results: &Path, scenario: &str) -> PathBuf {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(results.join(scenario))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs.remove(0)
}

/// `linecard run SCENARIO --results RESULTS/<TAG> EXTRA...` for the
/// scenario called `name` (the runner repeats a spoiled DUT once itself).
/// Returns the output and the judged run's directory; `None` when it
/// stayed invalid ([`inconclusive`]). (Short names: the daemons' unix
/// sockets live under the run directory.)
pub fn judged_run(
    scenario: &Path,
    name: &str,
    results: &Path,
    tag: &str,
    extra: &[&str],
) -> Option<(std::process::Output, PathBuf)> {
    let meter = StealMeter::start();
    let into = results.join(tag);
    let mut args = vec![
        "run",
        scenario.to_str().unwrap(),
        "--results",
        into.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = linecard(&args);
    let dir = run_dir(&into, name);
    (!inconclusive_run(name, &dir, &meter)).then_some((out, dir))
}

/// `linecard gate RUN --baseline baselines/NAME.toml`: its exit status and
/// its diff (stdout), the diff printed for the test's log.
#[allow(dead_code)]
pub fn gate(run: &Path, baseline: &str) -> (std::process::Output, String) {
    let out = linecard(&[
        "gate",
        run.to_str().unwrap(),
        "--baseline",
        repo()
            .join(format!("baselines/{baseline}.toml"))
            .to_str()
            .unwrap(),
    ]);
    let diff = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!("{diff}");
    (out, diff)
}

pub fn phase<'a>(dut: &'a serde_json::Value, profile: &str) -> &'a serde_json::Value {
    dut["evidence"]["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["profile"] == profile)
        .unwrap_or_else(|| panic!("no {profile} phase in {dut:#}"))
}

/// Whether a manifest's DUT passed: outright, or with gaps over its limit
/// that a disturbance measured inside each excused (`excused_gaps`).
pub fn passed(d: &serde_json::Value) -> bool {
    matches!(d["verdict"]["status"].as_str(), Some("pass" | "excused"))
}

/// The DUT labelled `label` in a run manifest.
pub fn dut<'a>(manifest: &'a serde_json::Value, label: &str) -> &'a serde_json::Value {
    manifest["duts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["label"] == label)
        .unwrap_or_else(|| panic!("no DUT {label}"))
}

/// An ed25519 host key and client key in `dir` (no passphrase), the
/// client's public key as `dir/authorized_keys`: for an sshd of the
/// test's own.
pub fn ssh_keys(dir: &Path) {
    for key in ["host_key", "client_key"] {
        let status = Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-f"])
            .arg(dir.join(key))
            .status()
            .unwrap();
        assert!(status.success(), "ssh-keygen {key}");
    }
    std::fs::copy(dir.join("client_key.pub"), dir.join("authorized_keys")).unwrap();
}

/// The text of shipped scenario `text` with its phases' lengths replaced:
/// each `(profile, seconds)` sets every phase of that profile, and 0 drops
/// it. For the functional tests that read a shipped scenario's figures but
/// need not wait its full length (the full length is the scenario's own,
/// gated in `--test runs run::`). Panics when a named profile has no phase, so a
/// renamed phase cannot silently keep its length.
pub fn with_phase_seconds(text: &str, seconds: &[(&str, u64)]) -> String {
    let mut out = String::new();
    let mut seen = Vec::new();
    // Tables start at "[[" or "[": cut there and rewrite the phase ones.
    for (i, table) in text.split("\n[").enumerate() {
        let table = if i == 0 {
            table.to_string()
        } else {
            format!("\n[{table}")
        };
        let profile = table
            .lines()
            .find_map(|l| l.trim().strip_prefix("profile = "))
            .map(|p| p.trim_matches('"').to_string());
        let wanted = match (table.starts_with("\n[[phase]]"), &profile) {
            (true, Some(p)) => seconds.iter().find(|(name, _)| name == p),
            _ => None,
        };
        match wanted {
            None => out.push_str(&table),
            Some((name, 0)) => seen.push(*name),
            Some((name, s)) => {
                seen.push(*name);
                let lines: Vec<String> = table
                    .split('\n')
                    .map(|l| {
                        if l.trim_start().starts_with("seconds = ") {
                            format!("seconds = {s}")
                        } else {
                            l.to_string()
                        }
                    })
                    .collect();
                out.push_str(&lines.join("\n"));
            }
        }
    }
    for (name, _) in seconds {
        assert!(
            seen.contains(name),
            "no {name} phase in the scenario: {text}"
        );
    }
    out
}

/// One of the fast path's verdict counters (`linecard_common::bfd::verdict`)
/// from `linecardd ctl drops`, summed over CPUs.
pub fn fast_path_verdicts(drops: &serde_json::Value, verdict: u32) -> u64 {
    drops["fast_path"]["verdicts_per_cpu"]
        .as_array()
        .expect("the fast path's verdicts")
        .iter()
        .map(|cpu| cpu[verdict as usize].as_u64().unwrap())
        .sum()
}

/// The text of `scenario` with the negative control `switch` (an
/// `[engine]` key, e.g. `sched_deadline = false`) set on each of its
/// `duts` DUTs (after each `max_gap_ms = 15.0`); panics unless it took on
/// exactly that many.
#[allow(dead_code)]
pub fn engine_switched(scenario: &Path, switch: &str, duts: usize) -> String {
    let line = format!("engine = {{ {switch} }}");
    let text = std::fs::read_to_string(scenario)
        .unwrap()
        .replace("max_gap_ms = 15.0", &format!("max_gap_ms = 15.0\n{line}"));
    assert_eq!(
        text.matches(&line).count(),
        duts,
        "{switch} in {}",
        scenario.display()
    );
    text
}

/// PIDs of processes whose environment carries a run's marker.
#[allow(dead_code)]
pub fn marked_processes() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .map(|env| {
                    env.split(|&b| b == 0)
                        .any(|v| v.starts_with(b"LINECARD_RUN="))
                })
                .unwrap_or(false)
        })
        .collect()
}

/// `linecard run SCENARIO --results RESULTS EXTRA...` in the background,
/// its stdout discarded and its stderr (progress, errors) into `stderr`.
#[allow(dead_code)]
pub fn spawn_run(
    scenario: &Path,
    results: &Path,
    extra: &[&str],
    stderr: std::process::Stdio,
) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_linecard"))
        .args([
            "run",
            scenario.to_str().unwrap(),
            "--results",
            results.to_str().unwrap(),
        ])
        .args(extra)
        .stdout(std::process::Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap()
}

/// One address pair per session for tests of many sessions against FRR
/// (FRR 8.4 brings up only one session per peer address, whatever the
/// local addresses): the peer host's `i`-th address and the DUT's. Added
/// on the lab's eth0s by [`AddressPairs::add`], removed when it drops.
#[allow(dead_code)]
pub fn pair_peer_address(i: usize) -> std::net::IpAddr {
    std::net::IpAddr::from([192, 0, 2, 100 + i as u8])
}

#[allow(dead_code)]
pub fn pair_dut_address(i: usize) -> std::net::IpAddr {
    std::net::IpAddr::from([192, 0, 2, 180 + i as u8])
}

/// The first `count` address pairs on the lab (at most 75: they stay
/// inside 192.0.2.0/24 and clear of the lab's own addresses).
#[allow(dead_code)]
pub struct AddressPairs(usize);

#[allow(dead_code)]
impl AddressPairs {
    pub fn add(count: usize) -> Self {
        assert!(count <= 75, "{count} address pairs do not fit 192.0.2.0/24");
        let pairs = Self(count);
        for (ns, addr) in pairs.addresses() {
            let ok = Command::new("ip")
                .args([
                    "-n",
                    ns,
                    "addr",
                    "replace",
                    &format!("{addr}/24"),
                    "dev",
                    "eth0",
                ])
                .status()
                .unwrap()
                .success();
            assert!(ok, "adding {addr} in {ns}");
        }
        pairs
    }

    /// One 3 x 10 ms session per pair, as the peer host's daemon sees it.
    pub fn peer_sessions(&self) -> Vec<linecard_harness::procs::PeerSession> {
        (0..self.0)
            .map(|i| {
                session_3x10(
                    &pair_peer_address(i).to_string(),
                    &pair_dut_address(i).to_string(),
                )
            })
            .collect()
    }

    fn addresses(&self) -> Vec<(&'static str, std::net::IpAddr)> {
        use linecard_harness::lab::spec::{DUT, PEER};
        (0..self.0)
            .flat_map(|i| {
                [
                    (PEER.namespace, pair_peer_address(i)),
                    (DUT.namespace, pair_dut_address(i)),
                ]
            })
            .collect()
    }
}

impl Drop for AddressPairs {
    fn drop(&mut self) {
        for (ns, addr) in self.addresses() {
            let _ = Command::new("ip")
                .args([
                    "-n",
                    ns,
                    "addr",
                    "del",
                    &format!("{addr}/24"),
                    "dev",
                    "eth0",
                ])
                .status();
        }
    }
}

/// FRR's count of Downs across its `sessions` sessions in the lab's peer
/// (`show bfd peers counters json`, the bfdd whose files are in
/// `dir/frr`); every session must be listed.
pub fn frr_session_downs(dir: &Path, sessions: usize) -> u64 {
    let out = linecard_harness::procs::vtysh(
        linecard_harness::lab::spec::PEER.namespace,
        &dir.join("frr"),
        &["show bfd peers counters json"],
    )
    .unwrap();
    let peers: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let peers = peers.as_array().cloned().unwrap_or_default();
    assert_eq!(peers.len(), sessions, "FRR's counters: {peers:#?}");
    peers
        .iter()
        .map(|p| p["session-down"].as_u64().expect("FRR counts session-down"))
        .sum()
}
