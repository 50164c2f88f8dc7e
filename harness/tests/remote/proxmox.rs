//! The `proxmox` provider end to end, against a STAND-IN Proxmox VE host
//! (nested virtualisation does not run on the machines this project is
//! built on): `standin-pve/` beside this file implements the subset of
//! `qm`, `pvesh` and `pveversion` the provider uses, with Proxmox VE 8's
//! output formats, and is reached exactly as a real host would be: an
//! OpenSSH sshd in the network namespace `lc-pve` (the hypervisor, with its
//! management bridge `vmbr0`), whose sessions find the stand-in's commands
//! on their PATH. A "VM" is a network namespace `lc-pve-vm<id>` with its
//! own sshd and a veth per NIC on the stand-in's bridges. The provider's
//! code does not know it talks to a stand-in.
//!
//! 1. The bake-off's FRR and xdp rows on three cloned VMs: the capture
//!    taken by tcpdump on the hypervisor at the DUT's tap, every host
//!    reached over SSH (the guests through the hypervisor), the FRR
//!    positive control flapped under L4 and xdp held with its fast path on
//!    the DUT's CPU; afterwards no VM, bridge, staged file or process of
//!    the run is left.
//! 2. A run interrupted (Ctrl-C) at each stage of the bring-up (clone,
//!    start, the agent wait) and mid-phase leaves nothing either, and a
//!    run killed outright is cleaned by `linecard teardown RUN_DIR`, which
//!    leaves a VM that was replaced meanwhile by someone else's.
//! 3. Ownership: a VM someone else makes between the run's check and its
//!    clone is never stopped or destroyed; a clone that fails mid-way is
//!    removed (it carries the run's mark).
//! 4. A VM ID in use is refused before anything is made.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const NS: &str = "lc-pve";
const FIRST_VMID: u32 = 7100;
const TEMPLATE: u32 = 9000;

/// The stand-in host: its namespace, its sshd (a child of this test), its
/// state directory.
struct StandIn {
    dir: PathBuf,
    sshd: Option<Child>,
    made_run_sshd: bool,
}

impl StandIn {
    fn start(dir: &Path) -> Self {
        ssh_keys(dir);
        let d = dir.display();
        let state = dir.join("state");
        std::fs::create_dir_all(state.join("qemu-server")).unwrap();
        // The template: Debian 12 with the agent, its management NIC on vmbr0.
        std::fs::write(
            state.join(format!("qemu-server/{TEMPLATE}.conf")),
            "agent: enabled=1\ncores: 2\nname: debian12-linecard\n\
             net0: virtio=BC:24:11:00:23:28,bridge=vmbr0\ntemplate: 1\n",
        )
        .unwrap();
        let mut standin = Self {
            dir: dir.to_path_buf(),
            sshd: None,
            made_run_sshd: !Path::new("/run/sshd").exists(),
        };
        standin.settings(&[]);
        std::fs::create_dir_all("/run/sshd").unwrap();
        let _ = Command::new("ip").args(["netns", "delete", NS]).status();
        for args in [
            vec!["netns", "add", NS],
            vec!["-n", NS, "link", "set", "lo", "up"],
            vec!["-n", NS, "link", "add", "vmbr0", "type", "bridge"],
            vec!["-n", NS, "addr", "add", "198.51.100.1/24", "dev", "vmbr0"],
            vec!["-n", NS, "link", "set", "vmbr0", "up"],
        ] {
            assert!(
                Command::new("ip").args(&args).status().unwrap().success(),
                "{args:?}"
            );
        }
        let tools = repo().join("harness/tests/standin-pve");
        let config = dir.join("sshd-pve.conf");
        std::fs::write(
            &config,
            format!(
                "Port 22\nListenAddress 127.0.0.1\nHostKey {d}/host_key\n\
                 AuthorizedKeysFile {d}/authorized_keys\nPermitRootLogin prohibit-password\n\
                 PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n\
                 StrictModes no\nPidFile {d}/sshd-pve.pid\nLogLevel INFO\n\
                 SetEnv PATH={}:/usr/sbin:/usr/bin:/sbin:/bin LC_STANDIN_STATE={}\n",
                tools.canonicalize().unwrap().display(),
                state.display()
            ),
        )
        .unwrap();
        // Only the network namespace: the stand-in makes its VMs' namespaces
        // where the machine (and `linecard lab down`) sees them.
        let sshd = Command::new("nsenter")
            .arg(format!("--net=/run/netns/{NS}"))
            .args(["/usr/sbin/sshd", "-D", "-e", "-f"])
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("sshd-pve.log")).unwrap())
            .spawn()
            .expect("starting sshd (openssh-server)");
        standin.sshd = Some(sshd);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !Command::new("ip")
            .args(["netns", "exec", NS, "nc", "-z", "127.0.0.1", "22"])
            .status()
            .unwrap()
            .success()
        {
            assert!(
                Instant::now() < deadline,
                "the stand-in's sshd never listened"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        standin
    }

    /// Writes the stand-in's settings with per-command delays (seconds).
    fn settings(&self, delays: &[(&str, f64)]) {
        self.settings_with(delays, serde_json::Value::Null);
    }

    /// The settings with a fault of `qm clone` (standin-pve/README.md).
    fn settings_with(&self, delays: &[(&str, f64)], clone_fault: serde_json::Value) {
        let d = self.dir.display();
        let delays: serde_json::Map<String, serde_json::Value> = delays
            .iter()
            .map(|(k, v)| (k.to_string(), (*v).into()))
            .collect();
        let settings = serde_json::json!({
            "host_key": format!("{d}/host_key"),
            "authorized_keys": format!("{d}/authorized_keys"),
            "management_prefix": "198.51.100",
            // The DUT's XDP_TX must reach the bridge (see standin-pve/README.md).
            "xdp_tx_vms": [FIRST_VMID],
            "delays": delays,
            "clone_fault": clone_fault,
        });
        std::fs::write(
            self.dir.join("state/standin.json"),
            serde_json::to_vec_pretty(&settings).unwrap(),
        )
        .unwrap();
    }

    /// Every command the provider ran on the stand-in since the last
    /// [`StandIn::forget_calls`], a line each, as called.
    fn calls(&self) -> String {
        std::fs::read_to_string(self.dir.join("state/calls.log")).unwrap_or_default()
    }

    /// Runs the stand-in's own `qm` as an administrator on the host would
    /// (in its network namespace only, as its sshd's sessions are).
    fn qm(&self, args: &[&str]) {
        let status = Command::new("nsenter")
            .arg(format!("--net=/run/netns/{NS}"))
            .arg(repo().join("harness/tests/standin-pve/qm"))
            .args(args)
            .env("LC_STANDIN_STATE", self.dir.join("state"))
            .status()
            .unwrap();
        assert!(status.success(), "qm {args:?}");
    }

    fn forget_calls(&self) {
        std::fs::write(self.dir.join("state/calls.log"), "").unwrap();
    }

    /// The `[proxmox]` table for this stand-in; with `own_route`, the
    /// guests are reached from the hypervisor's namespace directly (a
    /// scenario's own `ProxyCommand`), not through its sshd (`ssh -W`).
    fn table(&self, dut_cpu: usize, own_route: bool) -> String {
        let d = self.dir.display();
        let known = format!("UserKnownHostsFile={d}/known_hosts");
        format!(
            "[proxmox]\nhost = \"root@{NS}\"\nidentity = \"{d}/client_key\"\n\
             options = [\"ProxyCommand=ip netns exec {NS} nc 127.0.0.1 22\", \
             \"StrictHostKeyChecking=no\", \"{known}\"]\n\
             guest_options = [{route}\"StrictHostKeyChecking=no\", \"{known}\"]\n\
             template_vmid = {TEMPLATE}\nfirst_vmid = {FIRST_VMID}\n\
             dut_cores = 2\ndut_affinity = \"{dut_cpu}\"\npeer_affinity = \"{rest}\"\n\
             dut_cpus = [{dut_cpu}]\npeer_cpus = [{rest}]\nagent_timeout_s = 20\n\
             remote_dir = \"{d}/r\"\n\n",
            rest = 1 - dut_cpu.min(1),
            route = if own_route {
                format!("\"ProxyCommand=ip netns exec {NS} nc %h %p\", ")
            } else {
                String::new()
            }
        )
    }

    /// What the stand-in still holds of any run: VMs other than the
    /// template, their namespaces, the lab bridge, staged files.
    fn leftovers(&self) -> Vec<String> {
        let mut left = Vec::new();
        for entry in std::fs::read_dir(self.dir.join("state/qemu-server")).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            if name != format!("{TEMPLATE}.conf") {
                left.push(format!("VM config {name}"));
            }
        }
        let namespaces = Command::new("ip").args(["netns", "list"]).output().unwrap();
        for line in String::from_utf8_lossy(&namespaces.stdout).lines() {
            if line.starts_with("lc-pve-vm") {
                left.push(format!("namespace {line}"));
            }
        }
        // A run's bridge is `lcbr` and its token.
        let links = Command::new("ip")
            .args(["-n", NS, "-o", "link", "show"])
            .output()
            .unwrap();
        for line in String::from_utf8_lossy(&links.stdout).lines() {
            if let Some(name) = line.split(": ").nth(1).filter(|n| n.starts_with("lcbr")) {
                left.push(format!("bridge {name}"));
            }
        }
        if std::fs::read_dir(self.dir.join("r")).is_ok_and(|mut d| d.next().is_some()) {
            left.push("staged files".into());
        }
        for pid in marked_processes() {
            left.push(format!("process {pid} of a run"));
        }
        left
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        // Whatever a failed test left: the stand-in's own `qm stop`.
        let state = self.dir.join("state");
        let qm = repo().join("harness/tests/standin-pve/qm");
        for entry in std::fs::read_dir(state.join("qemu-server"))
            .into_iter()
            .flatten()
        {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            if let Some(id) = name
                .strip_suffix(".conf")
                .filter(|id| *id != TEMPLATE.to_string())
            {
                let _ = Command::new("ip")
                    .args(["netns", "exec", NS])
                    .arg(&qm)
                    .args(["stop", id])
                    .env("LC_STANDIN_STATE", &state)
                    .status();
            }
        }
        if let Some(sshd) = &mut self.sshd {
            let _ = sshd.kill();
            let _ = sshd.wait();
        }
        let _ = Command::new("ip").args(["netns", "delete", NS]).status();
        if self.made_run_sshd {
            let _ = std::fs::remove_dir("/run/sshd");
        }
    }
}

/// The shipped proxmox bake-off on the stand-in, its L4 phase shortened,
/// as `dir/name.toml` (`own_route`: see [`StandIn::table`]).
fn scenario(
    dir: &Path,
    name: &str,
    standin: &StandIn,
    l4_seconds: u64,
    own_route: bool,
) -> PathBuf {
    let shipped = std::fs::read_to_string(repo().join("scenarios/bakeoff-proxmox.toml")).unwrap();
    let shipped = with_phase_seconds(&shipped, &[("L4", l4_seconds)]);
    let start = shipped.find("[proxmox]").unwrap();
    let end = shipped.find("[peer]").unwrap();
    let text = format!(
        "{}{}{}",
        &shipped[..start],
        standin.table(dut_cpu(), own_route),
        &shipped[end..]
    )
    .replace("name = \"bakeoff-proxmox\"", &format!("name = \"{name}\""));
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

fn manifest(run: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(run.join("manifest.json")).unwrap()).unwrap()
}

/// What the run directory's record still names on the host: made, then
/// pending.
fn recorded(run: &Path) -> serde_json::Value {
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("proxmox-made.json")).unwrap())
            .unwrap();
    let mut named = record["made"].as_array().unwrap().clone();
    named.extend(record["pending"].as_array().unwrap().iter().cloned());
    serde_json::Value::Array(named)
}

/// `linecard run SCENARIO --results INTO EXTRA...`, to its end.
fn run_to_end(scenario: &Path, into: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "run",
        scenario.to_str().unwrap(),
        "--results",
        into.to_str().unwrap(),
    ];
    args.extend(extra);
    linecard(&args)
}

/// No command of `calls` stopped or destroyed VM `id`.
fn untouched(calls: &str, id: u32) -> bool {
    !calls.lines().any(|l| {
        l.starts_with(&format!("qm stop {id}")) || l.starts_with(&format!("qm destroy {id}"))
    })
}

/// `linecard run` in the background; SIGINT once `ready` says so (bounded).
fn interrupted_when(
    scenario: &Path,
    results: &Path,
    extra: &[&str],
    what: &str,
    ready: &dyn Fn() -> bool,
) -> (Option<i32>, String) {
    let err = results.with_extension(format!("{what}.err"));
    let mut child = spawn_run(
        scenario,
        results,
        extra,
        std::fs::File::create(&err).unwrap().into(),
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    while !ready() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "{what}: the run ended before the stage: {}",
            std::fs::read_to_string(&err).unwrap_or_default()
        );
        assert!(Instant::now() < deadline, "{what}: the stage never came");
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: kill(2) on our own child's PID.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return (status.code(), std::fs::read_to_string(&err).unwrap());
        }
        assert!(
            Instant::now() < deadline,
            "{what}: the run never ended after Ctrl-C"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_bakeoff_runs_on_three_vms_of_a_standin_proxmox_host_and_leaves_nothing() {
    if !privileged("the_bakeoff_runs_on_three_vms_of_a_standin_proxmox_host") {
        return;
    }
    let _lock = lock_lab();
    let dir = scratch_dir("pve");
    let results = dir.join("results");
    // The lab's cpusets make the DUT's CPU a scheduling partition, as a
    // three-host DUT needs (its freeze witness runs at SCHED_DEADLINE
    // there); the lab's own namespaces are not used.
    assert_exit(&linecard(&["lab", "up"]), 0, "lab up");
    let standin = StandIn::start(&dir);
    let profiles = repo().join("stress-profiles");
    let profiles = ["--profiles", profiles.to_str().unwrap()];

    // 1. The bake-off's rows on three VMs.
    let bakeoff = scenario(&dir, "pvebake", &standin, 6, false);
    if let Some((out, run)) = judged_run(&bakeoff, "pvebake", &results, "a", &profiles) {
        eprintln!("{}", String::from_utf8_lossy(&out.stderr));
        assert_exit(&out, 0, "the proxmox bake-off on the stand-in");
        let m = manifest(&run);
        assert_eq!(m["status"], "complete", "{m:#}");
        assert_eq!(m["host"]["provider"], "proxmox");
        let via = m["host"]["via"].as_str().unwrap();
        assert!(
            via.contains("VM 7100 (DUT), VM 7101 (peer), VM 7102 (spare) cloned from 9000")
                && via.contains("observer root@lc-pve (captures on tap7100i1)")
                && via.contains("dut root@198.51.100."),
            "{via}"
        );
        // The manifest says the hypervisor was the stand-in.
        let tools = m["host"]["tools"].as_array().unwrap();
        assert!(
            tools.iter().any(|t| t[0] == "pveversion (hypervisor)"
                && t[1]
                    .as_str()
                    .unwrap()
                    .starts_with("pve-manager/8.2.4/linecard-standin")),
            "{tools:?}"
        );
        // The stand-in saw the plan: checks, clones, the agent, teardown.
        let calls = standin.calls();
        for call in [
            "pveversion",
            "pvesh get /cluster/resources --type vm --output-format json",
            "qm clone 9000 7100 --name lc-dut-",
            "qm guest cmd 7101 network-get-interfaces",
            "qm destroy 7102 --purge 1",
        ] {
            assert!(
                calls.lines().any(|l| l.starts_with(call)),
                "never called: {call}\n{calls}"
            );
        }
        let flaps = |label: &str| -> u64 {
            let d = dut(&m, label);
            assert!(passed(d), "{d:#}");
            phase(d, "L4")["flaps"].as_u64().unwrap()
        };
        assert!(
            flaps("FRR bfdd 8.4.4") > 0,
            "the FRR positive control never flapped under L4"
        );
        assert_eq!(flaps("xdp"), 0);
        let xdp = dut(&m, "xdp");
        let placed = &xdp["evidence"]["fast_path_on_dut_cpus"];
        let (on, all) = (placed[0].as_u64().unwrap(), placed[1].as_u64().unwrap());
        assert!(
            all > 500 && on == all,
            "fast path frames on the DUT's CPU: {on} of {all}"
        );
        for d in m["duts"].as_array().unwrap() {
            let capture = run.join(d["capture"].as_str().unwrap());
            assert!(std::fs::metadata(&capture).unwrap().len() > 10_000, "{d:#}");
        }
        assert_eq!(
            recorded(&run),
            serde_json::json!([]),
            "the record still names something"
        );
    }
    assert_eq!(standin.leftovers(), Vec::<String>::new());

    // 2. Ctrl-C at each stage of the bring-up, then mid-phase.
    let xdp_only = ["--only", "xdp", profiles[0], profiles[1]];
    // Reached by a route of the scenario's own (one SSH hop a command).
    let short = scenario(&dir, "pvestop", &standin, 20, true);
    for (what, call) in [
        ("clone", "qm clone 9000 7101 --name lc-peer-"),
        ("start", "qm start 7100"),
        ("agent", "qm guest cmd 7100 ping"),
    ] {
        // Only the stage under test is slow (as a real host's would be).
        standin.settings(&[(what, 1.0)]);
        standin.forget_calls();
        let into = results.join(format!("stop-{what}"));
        // The stand-in logs a call as it begins; its delay holds it there.
        let (code, said) = interrupted_when(&short, &into, &xdp_only, what, &|| {
            standin
                .calls()
                .lines()
                .last()
                .is_some_and(|l| l.starts_with(call))
        });
        assert_ne!(code, Some(0), "{what}: {said}");
        assert!(said.contains("interrupted"), "{what}: {said}");
        let run = run_dir(&into, "pvestop");
        let status = std::fs::read_to_string(run.join("status")).unwrap();
        assert!(
            status.starts_with("failed: proxmox bring-up"),
            "{what}: {status}"
        );
        assert_eq!(recorded(&run), serde_json::json!([]), "{what}");
        assert_eq!(standin.leftovers(), Vec::<String>::new(), "{what}");
    }
    standin.settings(&[]);
    let into = results.join("mid");
    let (code, said) = interrupted_when(&short, &into, &xdp_only, "mid-phase", &|| {
        // The progress line of the phase: "xdp: L4 0/20 s", or a bar.
        std::fs::read_to_string(into.with_extension("mid-phase.err"))
            .is_ok_and(|e| e.contains("xdp: L4") || e.contains("L4 ["))
    });
    assert_eq!(code, Some(1), "{said}");
    let run = run_dir(&into, "pvestop");
    let m = manifest(&run);
    assert!(
        m["status"].as_str().unwrap().contains("interrupted"),
        "{m:#}"
    );
    assert!(
        run.join("xdp/capture.pcap").exists(),
        "the partial capture is kept"
    );
    assert_eq!(standin.leftovers(), Vec::<String>::new(), "mid-phase");

    // 3. Killed outright during the bring-up: `linecard teardown` removes
    // exactly what the record names and the host shows to be the run's;
    // VM 7101, replaced meanwhile by someone else's, is left alone.
    standin.settings(&[("agent", 30.0)]);
    standin.forget_calls();
    let into = results.join("killed");
    let mut child = spawn_run(&short, &into, &xdp_only, Stdio::null());
    let deadline = Instant::now() + Duration::from_secs(60);
    while !standin.calls().contains("qm guest cmd 7100 ping") {
        assert!(
            Instant::now() < deadline,
            "the killed run never reached the agent wait"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let run = run_dir(&into, "pvestop");
    assert_eq!(
        recorded(&run).as_array().unwrap().len(),
        4,
        "bridge and three VMs"
    );
    assert!(!standin.leftovers().is_empty());
    standin.qm(&["stop", "7101"]);
    standin.qm(&["destroy", "7101", "--purge", "1"]);
    std::fs::write(
        dir.join("state/qemu-server/7101.conf"),
        "cores: 1\ndescription: linecard-ffffffff-run-20250101T000000Z\nname: lc-peer-ffffffff\n",
    )
    .unwrap();
    standin.forget_calls();
    let out = linecard(&["teardown", run.to_str().unwrap()]);
    assert_exit(&out, 0, "linecard teardown");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("left Vm(7101): VM 7101 is named \"lc-peer-ffffffff\""),
        "{said}"
    );
    assert!(untouched(&standin.calls(), 7101), "{}", standin.calls());
    assert_eq!(recorded(&run), serde_json::json!([]));
    assert_eq!(
        standin.leftovers(),
        vec!["VM config 7101.conf".to_string()],
        "after linecard teardown"
    );
    std::fs::remove_file(dir.join("state/qemu-server/7101.conf")).unwrap();

    // 4. Someone else makes VM 7100 between the run's check and its clone:
    // the clone fails and nothing stops or destroys that VM; and a clone
    // that fails after writing its configuration (7101) is removed.
    for (vmid, kind) in [(7100, "taken"), (7101, "fails_after_config")] {
        standin.settings_with(&[], serde_json::json!({"vmid": vmid, "kind": kind}));
        standin.forget_calls();
        let into = results.join(kind);
        let out = run_to_end(&short, &into, &profiles);
        assert_ne!(out.status.code(), Some(0), "{kind}");
        let run = run_dir(&into, "pvestop");
        assert_eq!(recorded(&run), serde_json::json!([]), "{kind}");
        let calls = standin.calls();
        if kind == "taken" {
            assert!(
                untouched(&calls, 7100),
                "someone else's VM touched:\n{calls}"
            );
            assert!(
                calls.lines().any(|l| l == "qm config 7100"),
                "its owner never read back:\n{calls}"
            );
            assert_eq!(standin.leftovers(), vec!["VM config 7100.conf".to_string()]);
            std::fs::remove_file(dir.join("state/qemu-server/7100.conf")).unwrap();
        } else {
            assert!(
                calls.lines().any(|l| l == "qm destroy 7101 --purge 1"),
                "the half-made clone was left:\n{calls}"
            );
        }
        assert_eq!(standin.leftovers(), Vec::<String>::new(), "{kind}");
    }

    // 5. A VM ID in use: refused before anything is made.
    std::fs::copy(
        dir.join(format!("state/qemu-server/{TEMPLATE}.conf")),
        dir.join("state/qemu-server/7102.conf"),
    )
    .unwrap();
    standin.settings(&[]);
    standin.forget_calls();
    let into = results.join("taken");
    let out = run_to_end(&short, &into, &profiles);
    assert_ne!(out.status.code(), Some(0));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("VM ID(s) [7102] exist in the cluster"),
        "{said}"
    );
    assert!(
        !standin.calls().contains("qm clone"),
        "something was cloned"
    );
    std::fs::remove_file(dir.join("state/qemu-server/7102.conf")).unwrap();
    assert_eq!(standin.leftovers(), Vec::<String>::new());
    drop(standin);
    assert_exit(&linecard(&["lab", "down"]), 0, "lab down");
    let _ = std::fs::remove_dir_all(&dir);
}
