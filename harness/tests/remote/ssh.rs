//! The `ssh` provider against a real sshd (OpenSSH, listening on loopback
//! only, key authentication, started and stopped by this test by PID):
//! CI's `smoke` staged on the "host", run there, and its run directory
//! brought back whole; then the connection lost mid-run, ridden out when it comes
//! back within `lost_after_s` and failing the run, with what came back
//! kept and marked, when it does not. The host is this machine (sshd runs
//! commands as root here), so the remote run's lab is the local lab: the
//! test holds the lab lock until every remote run has ended.

use crate::common::*;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// sshd on 127.0.0.1:`port` with keys of its own under `dir`.
struct Sshd {
    dir: PathBuf,
    port: u16,
    child: Option<Child>,
    /// /run/sshd (its privilege separation directory) made by this test.
    made_run_dir: bool,
}

impl Sshd {
    fn start(dir: &Path) -> Self {
        ssh_keys(dir);
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let d = dir.display();
        std::fs::write(
            dir.join("sshd_config"),
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\n\
                 AuthorizedKeysFile {d}/authorized_keys\nPermitRootLogin prohibit-password\n\
                 PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n\
                 StrictModes no\nPidFile {d}/sshd.pid\nLogLevel INFO\n"
            ),
        )
        .unwrap();
        let run_dir = Path::new("/run/sshd");
        let made_run_dir = !run_dir.exists();
        if made_run_dir {
            std::fs::create_dir_all(run_dir).unwrap();
        }
        let mut sshd = Self {
            dir: dir.to_path_buf(),
            port,
            child: None,
            made_run_dir,
        };
        sshd.listen();
        sshd
    }

    /// Starts the listener (again) and waits, bounded, until it accepts.
    fn listen(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("sshd.log"))
            .unwrap();
        self.child = Some(
            Command::new("/usr/sbin/sshd")
                .args(["-D", "-e", "-f"])
                .arg(self.dir.join("sshd_config"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("starting sshd (openssh-server)"),
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "sshd never listened");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops the listener: new connections are refused from now on.
    fn stop_listening(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("sshd.log")).unwrap_or_default()
    }

    /// The `[ssh]` table for this sshd, staging in `remote_dir`.
    fn table(&self, lost_after_s: u64, remote_dir: &Path) -> String {
        let d = self.dir.display();
        format!(
            "provider = \"ssh\"\n\n[ssh]\ntarget = \"root@127.0.0.1\"\nport = {}\n\
             identity = \"{d}/client_key\"\nremote_dir = \"{}\"\nlost_after_s = {lost_after_s}\n\
             options = [\"StrictHostKeyChecking=no\", \"UserKnownHostsFile={d}/known_hosts\"]\n\n",
            self.port,
            remote_dir.display()
        )
    }

    /// A scenario of one xdp DUT, idle for `seconds`, on this sshd's host.
    fn scenario(&self, name: &str, seconds: u64, lost_after_s: u64, remote_dir: &Path) -> PathBuf {
        let text = format!(
            "schema_version = 1\nname = \"{name}\"\ndescription = \"xdp idle over ssh\"\n{}\
             [peer]\nimplementation = \"frr\"\n\n[[phase]]\nprofile = \"idle\"\nseconds = {seconds}\n\n\
             [[dut]]\nlabel = \"xdp\"\nimplementation = \"linecardd\"\nbackend = \"xdp\"\nmax_flaps = 0\n",
            self.table(lost_after_s, remote_dir)
        );
        let path = self.dir.join(format!("{name}.toml"));
        std::fs::write(&path, text).unwrap();
        path
    }

    /// The shipped `smoke` scenario, on this sshd's host; its phases
    /// shortened (idle 3 s, L4 9 s), which still starve the naive control.
    fn smoke(&self, remote_dir: &Path) -> PathBuf {
        let text = std::fs::read_to_string(repo().join("scenarios/smoke.toml")).unwrap();
        let text = with_phase_seconds(&text, &[("idle", 2), ("L4", 6)])
            .replace("[peer]", &format!("{}[peer]", self.table(30, remote_dir)));
        let path = self.dir.join("smoke.toml");
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        self.stop_listening();
        if self.made_run_dir {
            let _ = std::fs::remove_dir("/run/sshd");
        }
    }
}

fn run_args(scenario: &Path, results: &Path) -> Vec<String> {
    let profiles = repo().join("stress-profiles");
    [
        "run",
        scenario.to_str().unwrap(),
        "--profiles",
        profiles.to_str().unwrap(),
        "--results",
        results.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec()
}

/// `linecard run` in the background, its stderr (the remote run's
/// progress) into a file.
fn spawn_run(scenario: &Path, results: &Path, err: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_linecard"))
        .args(run_args(scenario, results))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(err).unwrap())
        .spawn()
        .unwrap()
}

/// The one run directory under `results/<name>/`.
fn run_dir(results: &Path, name: &str) -> PathBuf {
    let dirs: Vec<PathBuf> = std::fs::read_dir(results.join(name))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

/// Waits (bounded) until every run staged under `remote_dir` has ended
/// there: its lab is the local lab.
fn wait_remote_runs(remote_dir: &Path) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let running = std::fs::read_dir(remote_dir)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .filter(|e| e.path().join("run.pid").exists())
                    .filter(|e| !e.path().join("run.exit").exists())
                    .count()
            })
            .unwrap_or(0);
        if running == 0 {
            return;
        }
        assert!(Instant::now() < deadline, "a remote run never ended");
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn a_scenario_runs_on_an_ssh_host_and_a_lost_connection_is_ridden_out_or_marked() {
    if !privileged("a_scenario_runs_on_an_ssh_host") {
        return;
    }
    let _lock = lock_lab();
    // Short: the remote lab's unix sockets live under the staging directory.
    let dir = scratch_dir("ssh");
    let remote = dir.join("remote");
    let results = dir.join("results");
    let mut sshd = Sshd::start(&dir);

    // 0. A staging parent someone else owns (a local user who made it
    // first) is refused before anything is copied there, naming it.
    let foreign = dir.join("foreign");
    std::fs::create_dir(&foreign).unwrap();
    std::os::unix::fs::chown(&foreign, Some(65534), Some(65534)).unwrap();
    let refused = sshd.scenario("sshforeign", 1, 30, &foreign);
    let out = linecard(
        &run_args(&refused, &results)
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(
        said.contains(&format!("{} belongs to uid 65534", foreign.display())),
        "{said}"
    );
    assert_eq!(
        std::fs::read_dir(&foreign).unwrap().count(),
        0,
        "something was staged there"
    );
    assert_eq!(
        std::fs::read_dir(results.join("sshforeign")).map_or(0, |d| d.count()),
        0,
        "a refused run left a run directory"
    );

    // 1. CI's smoke scenario over SSH, its directory brought back.
    let scenario = sshd.smoke(&remote);
    let args = run_args(&scenario, &results);
    let out = linecard(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_exit(&out, 0, "smoke over ssh");
    assert!(
        sshd.log()
            .contains("Accepted publickey for root from 127.0.0.1"),
        "the run did not go through this sshd: {}",
        sshd.log()
    );
    let run = run_dir(&results, "smoke");
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["status"], "complete", "{manifest:#}");
    assert_eq!(manifest["host"]["provider"], "ssh");
    assert_eq!(manifest["host"]["via"], "root@127.0.0.1");
    // The positive control flapped under L4, and xdp held.
    let duts = manifest["duts"].as_array().unwrap();
    let flaps = |label: &str| -> u64 {
        let d = duts.iter().find(|d| d["label"] == label).unwrap();
        assert!(passed(d), "{d:#}");
        d["evidence"]["phases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["flaps"].as_u64().unwrap())
            .sum()
    };
    assert!(flaps("naive") > 0);
    assert_eq!(flaps("xdp"), 0);
    // The capture and its analysis came back, and the host kept nothing.
    for d in duts {
        let capture = run.join(d["capture"].as_str().unwrap());
        assert!(std::fs::metadata(&capture).unwrap().len() > 1000, "{d:#}");
        let analysis = capture.with_file_name("analysis").join("analysis.json");
        assert!(analysis.exists(), "{}", analysis.display());
    }
    assert!(std::fs::read_to_string(run.join("remote-run.log"))
        .unwrap()
        .contains("results:"));
    assert_eq!(std::fs::read_dir(&remote).unwrap().count(), 0);

    // 2. The listener gone for 3 s mid-run, within lost_after_s: the run
    // goes on (it is detached on the host) and comes back complete.
    let scenario = sshd.scenario("sshblip", 12, 30, &remote);
    let err = dir.join("blip.err");
    let mut child = spawn_run(&scenario, &results, &err);
    wait_for_remote_phase(&remote);
    sshd.stop_listening();
    std::thread::sleep(Duration::from_secs(3));
    sshd.listen();
    let out = child_output(&mut child, &err, 120);
    assert!(out.0 == Some(0), "the blip failed the run: {}", out.1);
    assert!(out.1.contains("lost the connection"), "{}", out.1);
    assert!(out.1.contains("is back after"), "{}", out.1);
    assert_eq!(
        std::fs::read_to_string(run_dir(&results, "sshblip").join("status"))
            .unwrap()
            .trim(),
        "complete"
    );

    // 3. The listener gone for good: after lost_after_s the run fails
    // here, keeping the remote log up to the loss and saying so.
    let scenario = sshd.scenario("sshlost", 12, 3, &remote);
    let err = dir.join("lost.err");
    let mut child = spawn_run(&scenario, &results, &err);
    wait_for_remote_phase(&remote);
    sshd.stop_listening();
    let out = child_output(&mut child, &err, 60);
    assert_eq!(out.0, Some(1), "{}", out.1);
    let lost = run_dir(&results, "sshlost");
    let status = std::fs::read_to_string(lost.join("status")).unwrap();
    assert!(
        status.starts_with("failed: the SSH connection to root@127.0.0.1 was lost"),
        "{status}"
    );
    assert!(status.contains("partial results"), "{status}");
    let partial = std::fs::read_to_string(lost.join("remote-run.log")).unwrap();
    assert!(!partial.is_empty(), "no partial log kept");
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(lost.join("manifest.json")).unwrap())
            .unwrap();
    assert_eq!(manifest["status"].as_str(), Some(status.trim()));
    // The remote run went on: let it end (and take its lab down) here.
    wait_remote_runs(&remote);
    drop(sshd);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Waits (bounded) until a run staged under `remote_dir` has started its
/// phases (its log shows the lab up).
fn wait_for_remote_phase(remote_dir: &Path) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let started = std::fs::read_dir(remote_dir).ok().and_then(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| !e.path().join("run.exit").exists())
                .find_map(|e| std::fs::read_to_string(e.path().join("run.log")).ok())
        });
        // The runner's first progress line: the phase has begun.
        if started.is_some_and(|log| log.contains(": idle 0/")) {
            return;
        }
        assert!(Instant::now() < deadline, "the remote run never started");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The child's exit code and stderr (in `err`), waiting at most
/// `seconds`.
fn child_output(child: &mut Child, err: &Path, seconds: u64) -> (Option<i32>, String) {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return (status.code(), std::fs::read_to_string(err).unwrap());
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("linecard run over ssh did not end within {seconds} s");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
