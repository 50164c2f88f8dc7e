//! The `ssh` provider with three hosts, against real sshd: one OpenSSH
//! sshd inside each of the lab's DUT, peer and observer namespaces
//! (listening on the namespace's own loopback, key authentication,
//! started and stopped by this test by PID), reached through a
//! `ProxyCommand` that enters the namespace, as a user reaches hosts
//! behind a jump host. Each namespace is a host: the runner starts the
//! DUT's daemon, the stress and the canary in `lc-dut`, FRR's bfdd in
//! `lc-peer` and tcpdump on the DUT's bridge port in `lc-obs`, all over
//! SSH, and judges the capture that came back.
//!
//! 1. CI's `smoke` on the three hosts, its xdp row: under L4 (the canary
//!    on the DUT's CPU stalled) xdp held with its fast path on the DUT's CPU; every host was
//!    reached through its own sshd; nothing of the run is left on them.
//!    3 s into L4 every host's SSH path is cut for 8 s (each sshd and
//!    what it serves stopped, so the connections die of their keepalive
//!    and new ones time out): the run completes all the same, its verdict
//!    from the capture, each outage in its evidence and its report's
//!    warnings.
//! 2. The observer's tcpdump killed mid-run: the run is failed, the
//!    partial capture kept.
//! 3. A backend the DUT host cannot run: unavailable, in the engine's
//!    words there.
//! 4. A host that cannot be reached: a clear error naming it, before
//!    anything starts.
//! 5. The harness killed outright (SIGKILL) mid-phase: `linecard teardown
//!    RUN_DIR` leaves no process and no file of the run on any host.
//!
//! Ctrl-C in the middle of a three-host run (failed as interrupted, the
//! capture kept, the hosts cleaned) is `--test remote proxmox::`'s, whose guests
//! run through this same path.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const HOSTS: [(&str, &str); 3] = [
    ("dut", "lc-dut"),
    ("peer", "lc-peer"),
    ("observer", "lc-obs"),
];

/// sshd in network namespace `ns`, on its loopback's port 22.
struct NamespaceSshd {
    ns: &'static str,
    child: Child,
    log: PathBuf,
}

impl NamespaceSshd {
    fn start(dir: &Path, ns: &'static str) -> Self {
        let d = dir.display();
        let config = dir.join(format!("sshd-{ns}.conf"));
        std::fs::write(
            &config,
            format!(
                "Port 22\nListenAddress 127.0.0.1\nHostKey {d}/host_key\n\
                 AuthorizedKeysFile {d}/authorized_keys\nPermitRootLogin prohibit-password\n\
                 PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n\
                 StrictModes no\nPidFile {d}/sshd-{ns}.pid\nLogLevel INFO\n"
            ),
        )
        .unwrap();
        let log = dir.join(format!("sshd-{ns}.log"));
        let child = Command::new("ip")
            .args(["netns", "exec", ns, "/usr/sbin/sshd", "-D", "-e", "-f"])
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("starting sshd (openssh-server)");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !Command::new("ip")
            .args(["netns", "exec", ns, "nc", "-z", "127.0.0.1", "22"])
            .status()
            .unwrap()
            .success()
        {
            assert!(Instant::now() < deadline, "sshd in {ns} never listened");
            std::thread::sleep(Duration::from_millis(50));
        }
        Self { ns, child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Sends `signal` to this sshd and every process it serves (its
    /// descendants): the run's detached processes are not among them.
    fn signal_tree(&self, signal: i32) {
        let mut pending = vec![self.child.id()];
        while let Some(pid) = pending.pop() {
            // SAFETY: kill(2) on this sshd (our child) and its descendants.
            unsafe { libc::kill(pid as i32, signal) };
            let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
                .unwrap_or_default();
            pending.extend(
                children
                    .split_whitespace()
                    .filter_map(|c| c.parse::<u32>().ok()),
            );
        }
    }
}

impl Drop for NamespaceSshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `[ssh]` tables of the three namespaces as hosts; the peer's
/// ProxyCommand goes to `peer_port` (22: its sshd).
fn tables(dir: &Path, remote: &Path, dut_cpu: usize, peer_port: u16) -> String {
    let d = dir.display();
    let mut text = format!(
        "provider = \"ssh\"\n\n[ssh]\nidentity = \"{d}/client_key\"\nremote_dir = \"{}\"\n\
         options = [\"StrictHostKeyChecking=no\", \"UserKnownHostsFile={d}/known_hosts\"]\n\n",
        remote.display()
    );
    for (role, ns) in HOSTS {
        let port = if role == "peer" { peer_port } else { 22 };
        let (interface, address, cpus) = match role {
            "dut" => (
                "eth0",
                "address = \"192.0.2.1\"\n",
                format!("cpus = [{dut_cpu}]\n"),
            ),
            "peer" => (
                "eth0",
                "address = \"192.0.2.2\"\n",
                format!("cpus = [{}]\n", 1 - dut_cpu.min(1)),
            ),
            _ => (
                "lc-dut-port",
                "",
                format!("cpus = [{}]\n", 1 - dut_cpu.min(1)),
            ),
        };
        text.push_str(&format!(
            "[ssh.{role}]\ntarget = \"root@{ns}\"\ninterface = \"{interface}\"\n{address}{cpus}\
             options = [\"ProxyCommand=ip netns exec {ns} nc 127.0.0.1 {port}\"]\n\n"
        ));
    }
    text
}

/// The shipped smoke scenario, its phases shortened (idle 3 s, L4 9 s,
/// which still starve the naive control), or `body` instead of its phases
/// and DUTs, on the three hosts, as `dir/name.toml`.
fn scenario(dir: &Path, name: &str, ssh: &str, body: Option<&str>) -> PathBuf {
    let smoke = std::fs::read_to_string(repo().join("scenarios/smoke.toml")).unwrap();
    let smoke = with_phase_seconds(&smoke, &[("idle", 3), ("L4", 9)]);
    let text = match body {
        None => smoke
            .replace("name = \"smoke\"", &format!("name = \"{name}\""))
            .replace("[peer]", &format!("{ssh}[peer]")),
        Some(body) => format!(
            "schema_version = 1\nname = \"{name}\"\ndescription = \"three hosts\"\n{ssh}\
             [peer]\nimplementation = \"frr\"\n\n{body}"
        ),
    };
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// `linecard run SCENARIO` in the background until its (one, `xdp`) DUT
/// is 2 s into its phase: the child, its stderr's file, and the PID of
/// the capture it started on the observer (from the run's own record in
/// `remote`: the namespaces share this file system).
fn run_into_phase(
    scenario: &Path,
    results: &Path,
    remote: &Path,
    extra: &[&str],
) -> (Child, PathBuf, i32) {
    let err = scenario.with_extension("err");
    let child = spawn_run(
        scenario,
        results,
        extra,
        std::fs::File::create(&err).unwrap().into(),
    );
    let deadline = Instant::now() + Duration::from_secs(90);
    let tcpdump = loop {
        let pid = std::fs::read_dir(remote).ok().and_then(|runs| {
            runs.filter_map(Result::ok)
                .find_map(|run| std::fs::read_to_string(run.path().join("xdp/tcpdump.pid")).ok())
        });
        let said = std::fs::read_to_string(&err).unwrap_or_default();
        // The progress line: "xdp: idle 0/15 s", or a bar on a terminal.
        let begun = said.contains("xdp: idle") || said.contains("idle [");
        if let (Some(pid), true) = (pid, begun) {
            break pid.trim().parse::<i32>().unwrap();
        }
        assert!(
            Instant::now() < deadline,
            "the run never began its phase: {said}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    // The marker that clean-up relies on is there, on what the run started.
    assert!(
        marked_processes().contains(&(tcpdump as u32)),
        "tcpdump {tcpdump} carries no run marker"
    );
    std::thread::sleep(Duration::from_secs(2));
    (child, err, tcpdump)
}

/// `linecard run SCENARIO --results RESULTS EXTRA...`, to its end.
fn run_to_end(scenario: &Path, results: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "run",
        scenario.to_str().unwrap(),
        "--results",
        results.to_str().unwrap(),
    ];
    args.extend(extra);
    linecard(&args)
}

/// The child's exit code and stderr, once it ended (bounded).
fn ended(child: &mut Child, err: &Path) -> (Option<i32>, String) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return (status.code(), std::fs::read_to_string(err).unwrap());
        }
        assert!(Instant::now() < deadline, "the run never ended");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn smoke_runs_on_three_ssh_hosts_and_a_dead_capture_or_lost_host_is_reported() {
    if !privileged("smoke_runs_on_three_ssh_hosts") {
        return;
    }
    let _lock = lock_lab();
    let dir = scratch_dir("sshh");
    let remote = dir.join("r");
    let results = dir.join("results");
    ssh_keys(&dir);
    let made_run_dir = !Path::new("/run/sshd").exists();
    std::fs::create_dir_all("/run/sshd").unwrap();
    assert_exit(&linecard(&["lab", "up"]), 0, "lab up");
    let cpu = dut_cpu();
    let sshds: Vec<NamespaceSshd> = HOSTS
        .iter()
        .map(|(_, ns)| NamespaceSshd::start(&dir, ns))
        .collect();
    let ssh = tables(&dir, &remote, cpu, 22);

    // 1. Smoke's xdp row on three hosts. (Its naive positive control on
    // the three-host path is `--test remote proxmox::`'s FRR row, which flaps
    // under L4 there; here the canary proves L4 bit.)
    let smoke = scenario(&dir, "hsmoke", &ssh, None);
    // L4 long enough for an 8 s cut 3 s in (the keepalive ends the
    // connections 6 s into it) and the reconnection after it.
    let text = with_phase_seconds(&std::fs::read_to_string(&smoke).unwrap(), &[("L4", 18)]);
    std::fs::write(&smoke, text).unwrap();
    let profiles = repo().join("stress-profiles");
    let profiles = ["--profiles", profiles.to_str().unwrap()];
    let xdp_only = ["--only", "xdp", profiles[0], profiles[1]];
    let cut = std::sync::atomic::AtomicBool::new(false);
    let judged = std::thread::scope(|s| {
        s.spawn(|| {
            // L4 is the second phase: its stress's pidfile on the DUT host.
            let deadline = Instant::now() + Duration::from_secs(120);
            while Instant::now() < deadline && !stress_of_phase(&remote, 1) {
                std::thread::sleep(Duration::from_millis(100));
            }
            std::thread::sleep(Duration::from_secs(3));
            for sshd in &sshds {
                sshd.signal_tree(libc::SIGSTOP);
            }
            cut.store(true, std::sync::atomic::Ordering::Relaxed);
            std::thread::sleep(Duration::from_secs(8));
            for sshd in &sshds {
                sshd.signal_tree(libc::SIGCONT);
            }
        });
        judged_run(&smoke, "hsmoke", &results, "a", &xdp_only)
    });
    assert!(
        cut.load(std::sync::atomic::Ordering::Relaxed),
        "the SSH paths were never cut: the run ended before L4"
    );
    if let Some((out, run)) = judged {
        assert_exit(&out, 0, "smoke on three ssh hosts");
        for sshd in &sshds {
            assert!(
                sshd.log().contains("Accepted publickey for root"),
                "the run never went through the sshd in {}: {}",
                sshd.ns,
                sshd.log()
            );
        }
        let manifest: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(run.join("manifest.json")).unwrap())
                .unwrap();
        assert_eq!(manifest["status"], "complete", "{manifest:#}");
        assert_eq!(manifest["host"]["provider"], "ssh");
        let via = manifest["host"]["via"].as_str().unwrap();
        assert!(
            via.contains("dut root@lc-dut")
                && via.contains("observer root@lc-obs (captures on lc-dut-port)"),
            "{via}"
        );
        let flaps = |label: &str| -> u64 {
            let d = dut(&manifest, label);
            assert!(passed(d), "{d:#}");
            d["evidence"]["phases"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["flaps"].as_u64().unwrap())
                .sum()
        };
        assert_eq!(flaps("xdp"), 0);
        // The fast path judged the peer's frames on the DUT's CPU, and the
        // stress ran there (the canary saw it).
        let xdp = dut(&manifest, "xdp");
        let placed = &xdp["evidence"]["fast_path_on_dut_cpus"];
        let (on, all) = (placed[0].as_u64().unwrap(), placed[1].as_u64().unwrap());
        // 12 s of the peer's 100 a second, and more while coming Up.
        assert!(
            all > 1000 && on == all,
            "fast path frames on the DUT's CPU: {on} of {all}"
        );
        let l4 = phase(xdp, "L4");
        assert!(
            l4["canary_stall_ms"].as_f64().unwrap_or(0.0) > 10.0,
            "the canary on the DUT's CPU never stalled under L4: {l4:#}"
        );
        eprintln!(
            "{}",
            std::fs::read_to_string(run.join("summary.md")).unwrap()
        );
        for d in manifest["duts"].as_array().unwrap() {
            let capture = run.join(d["capture"].as_str().unwrap());
            assert!(std::fs::metadata(&capture).unwrap().len() > 10_000, "{d:#}");
        }
        // The cut is in the evidence, for the DUT's host among others,
        // and in the report's warnings.
        let outages = xdp["evidence"]["connection_outages"].as_array().unwrap();
        assert!(
            outages
                .iter()
                .any(|o| o["host"].as_str().unwrap().starts_with("dut root@lc-dut")),
            "no outage of the DUT's host recorded: {outages:?}"
        );
        for o in outages {
            let seconds =
                (o["end_ns"].as_i64().unwrap() - o["start_ns"].as_i64().unwrap()) as f64 / 1e9;
            assert!(seconds > 0.0 && seconds < 20.0, "{o}");
        }
        let reports = dir.join("reports");
        let out = linecard(&[
            "report",
            run.to_str().unwrap(),
            "--format",
            "md",
            "--out",
            reports.to_str().unwrap(),
        ]);
        assert_exit(&out, 0, "linecard report");
        let report = std::fs::read_to_string(String::from_utf8_lossy(&out.stdout).trim()).unwrap();
        assert!(
            report.contains("xdp: the harness could not reach the dut root@lc-dut host for"),
            "{report}"
        );
    }
    // Nothing of the run is left on the hosts.
    assert_eq!(std::fs::read_dir(&remote).map_or(0, |d| d.count()), 0);
    assert_eq!(marked_processes(), Vec::<u32>::new());

    // 2. The observer's capture killed mid-run: failed, partial capture kept.
    let idle = |name: &str| {
        scenario(
            &dir,
            name,
            &ssh,
            Some(
                "[[phase]]\nprofile = \"idle\"\nseconds = 15\n\n\
                 [[dut]]\nlabel = \"xdp\"\nimplementation = \"linecardd\"\nbackend = \"xdp\"\nmax_flaps = 0\n",
            ),
        )
    };
    let (mut child, err, tcpdump) = run_into_phase(&idle("hkill"), &results, &remote, &profiles);
    // SAFETY: a signal to the tcpdump this test's run started (its PID
    // from the run's own record).
    assert_eq!(unsafe { libc::kill(tcpdump, libc::SIGKILL) }, 0);
    let (code, said) = ended(&mut child, &err);
    assert_eq!(code, Some(1), "{said}");
    let run = run_dir(&results, "hkill");
    let run_status = std::fs::read_to_string(run.join("status")).unwrap();
    assert!(run_status.starts_with("failed: xdp:"), "{run_status}");
    assert!(run_status.contains("capture"), "{run_status}");
    let partial = std::fs::metadata(run.join("xdp/capture.pcap"))
        .unwrap()
        .len();
    assert!(
        partial > 1000,
        "the partial capture was not kept ({partial} bytes)"
    );
    eprintln!(
        "the observer's capture killed: {} ({partial} bytes kept)",
        run_status.trim()
    );
    assert_eq!(std::fs::read_dir(&remote).map_or(0, |d| d.count()), 0);
    assert_eq!(marked_processes(), Vec::<u32>::new());

    // 3. A backend the DUT host's kernel cannot run (no etf for txtime on
    // this machine kind) is unavailable, in the engine's words there, and
    // nothing starts for it.
    let local = Command::new("ip")
        .args(["netns", "exec", "lc-dut"])
        .arg(linecardd())
        .args(["backends", "--json"])
        .output()
        .unwrap();
    let local: serde_json::Value = serde_json::from_slice(&local.stdout).unwrap();
    assert_eq!(
        local["txtime"]["status"], "unavailable",
        "this kernel has etf: the premise (a backend the DUT host cannot run) needs another backend"
    );
    let txtime = scenario(
        &dir,
        "htx",
        &ssh,
        Some(
            "[[phase]]\nprofile = \"idle\"\nseconds = 5\n\n\
             [[dut]]\nlabel = \"txtime\"\nimplementation = \"linecardd\"\nbackend = \"txtime\"\nmax_flaps = 0\n",
        ),
    );
    let out = run_to_end(&txtime, &results, &profiles);
    assert_exit(&out, 0, "a run whose one DUT is unavailable");
    let run = run_dir(&results, "htx");
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("manifest.json")).unwrap()).unwrap();
    let verdict = &dut(&manifest, "txtime")["verdict"];
    assert_eq!(verdict["status"], "unavailable", "{verdict:#}");
    let reason = local["txtime"]["reason"].as_str().unwrap();
    assert!(
        verdict["why"]
            .as_str()
            .is_some_and(|r| r == format!("on root@lc-dut: {reason}")),
        "{verdict:#}"
    );
    assert!(
        !run.join("txtime/capture.pcap").exists(),
        "a capture ran for an unavailable DUT"
    );
    assert_eq!(marked_processes(), Vec::<u32>::new());

    // 4. A peer host nobody answers for: a clear error before anything
    // starts, and no run directory.
    let unreachable = scenario(&dir, "hgone", &tables(&dir, &remote, cpu, 2222), None);
    let out = run_to_end(&unreachable, &results, &profiles);
    let said = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{said}");
    assert!(
        said.contains("checking the peer host root@lc-peer"),
        "{said}"
    );
    eprintln!("the unreachable peer host, as reported: {}", said.trim());
    assert!(!results.join("hgone").exists(), "a run directory was left");
    assert_eq!(marked_processes(), Vec::<u32>::new());

    // 5. The harness killed outright mid-phase: its processes and files
    // stay on the hosts until `linecard teardown RUN_DIR`, which leaves
    // none.
    let (mut child, _err, _tcpdump) =
        run_into_phase(&idle("hkilled"), &results, &remote, &profiles);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        !marked_processes().is_empty(),
        "the killed run's processes did not outlive it"
    );
    let run = run_dir(&results, "hkilled");
    let out = linecard(&["teardown", run.to_str().unwrap()]);
    assert_exit(&out, 0, "linecard teardown of a killed three-host run");
    let said = String::from_utf8_lossy(&out.stdout);
    for (role, ns) in HOSTS {
        assert!(
            said.contains(&format!("{role} root@{ns}: stopped the run's processes")),
            "{said}"
        );
    }
    assert_eq!(marked_processes(), Vec::<u32>::new(), "{said}");
    assert_eq!(
        std::fs::read_dir(&remote).map_or(0, |d| d.count()),
        0,
        "{said}"
    );

    drop(sshds);
    if made_run_dir {
        let _ = std::fs::remove_dir("/run/sshd");
    }
    assert_exit(&linecard(&["lab", "down"]), 0, "lab down");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Whether phase `i`'s stress has started on the DUT host (its pidfile
/// in the run's directory there: the namespaces share this file system).
fn stress_of_phase(remote: &Path, i: usize) -> bool {
    std::fs::read_dir(remote).is_ok_and(|runs| {
        runs.filter_map(Result::ok)
            .any(|run| run.path().join(format!("xdp/stress-{i}-0.pid")).exists())
    })
}
