//! The Debian packages (issue 39), built by `scripts/package.sh` from
//! this build's binaries: lintian finds nothing but the accepted tags
//! (`packaging/lintian-accepted`); both install into a scratch root
//! (`dpkg --root`, maintainer scripts chrootless, so that this machine's
//! own user database is never touched), which makes the `linecardd` user;
//! `man` renders the pages; systemd's own parser reads the unit; the
//! installed linecardd, run as that user with exactly the capabilities
//! the unit grants (setpriv, since no systemd runs here as PID 1), brings
//! the sample configuration's session Up against FRR bfdd in the lab, in
//! both daemons' words and on the capture, and the unit's ExecReload
//! reloads it; purge leaves nothing in the root but dpkg's own database.

use crate::common::*;
use linecard_capture_analyzer::decode::State;
use linecard_capture_analyzer::{analyze, Options};
use linecard_harness::lab::spec::{self, DUT, PEER};
use linecard_harness::procs::start_frr_bfdd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn run(command: &mut Command) -> String {
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{command:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// Every path under `root` but dpkg's database and the user database
/// tools' own lock and backup files (`.pwd.lock`, `passwd-`), sorted.
fn files_under(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let relative = path.strip_prefix(root).unwrap().display().to_string();
            if relative.starts_with("var/lib/dpkg")
                || relative == "etc/.pwd.lock"
                || (relative.starts_with("etc/") && relative.ends_with('-'))
            {
                continue;
            }
            if path.is_dir() && !path.is_symlink() {
                stack.push(path.clone());
            }
            out.push(relative);
        }
    }
    out.sort();
    out
}

/// A root with what dpkg and useradd need: an empty dpkg database and a
/// user database holding root.
fn scratch_root(dir: &Path) -> PathBuf {
    let root = dir.join("root");
    for sub in [
        "etc",
        "var/lib/dpkg/info",
        "var/lib/dpkg/updates",
        "var/log",
    ] {
        std::fs::create_dir_all(root.join(sub)).unwrap();
    }
    for (file, text) in [
        ("var/lib/dpkg/status", ""),
        ("etc/passwd", "root:x:0:0:root:/root:/bin/bash\n"),
        ("etc/group", "root:x:0:\n"),
        ("etc/shadow", "root:*:20000:0:99999:7:::\n"),
        ("etc/gshadow", "root:*::\n"),
    ] {
        std::fs::write(root.join(file), text).unwrap();
    }
    root
}

fn dpkg(root: &Path) -> Command {
    let mut command = Command::new("dpkg");
    command.arg(format!("--root={}", root.display())).args([
        // Maintainer scripts run here with DPKG_ROOT set (they honour it);
        // the scratch root has no libc6 package for Depends to find.
        "--force-script-chrootless",
        "--force-depends",
        "--log=/dev/null",
    ]);
    command
}

/// The unit's value of `key` (the last assignment wins, as in systemd).
fn unit_value(unit: &str, key: &str) -> String {
    unit.lines()
        .filter_map(|l| l.strip_prefix(&format!("{key}=")))
        .next_back()
        .unwrap_or_else(|| panic!("the unit sets no {key}"))
        .to_string()
}

/// The capability bits of `names` (CAP_BPF ...), as /proc/PID/status
/// shows them.
fn capability_mask(names: &str) -> u64 {
    names
        .split_whitespace()
        .map(|name| match name {
            "CAP_NET_ADMIN" => 12,
            "CAP_NET_RAW" => 13,
            "CAP_SYS_NICE" => 23,
            "CAP_PERFMON" => 38,
            "CAP_BPF" => 39,
            other => panic!("the test knows no bit for {other}: add it"),
        })
        .fold(0u64, |mask, bit| mask | 1 << bit)
}

/// A `/proc/PID/status` field.
fn status_field(pid: u32, field: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
        .trim()
        .to_string()
}

/// A mount this test made, unmounted when the test ends, a failed
/// assertion included (a bpffs left under /tmp cannot be removed).
struct Unmount(PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// The PID of `program`'s process under `parent` (setpriv execs it, `ip
/// netns exec` execs setpriv: the PID is the spawned one's).
fn linecardd_pid(dut: &linecard_harness::procs::Daemon) -> u32 {
    let pid = dut.pid();
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
    assert!(
        exe.ends_with("usr/sbin/linecardd"),
        "PID {pid} runs {}",
        exe.display()
    );
    pid
}

#[test]
fn the_debian_packages_install_run_as_their_own_user_and_purge_clean() {
    if !privileged("the_debian_packages_install_run_as_their_own_user_and_purge_clean") {
        return;
    }
    // The lab's lock from the start, though the lab is needed only later:
    // lintian and dpkg-deb busy both CPUs for seconds, and beside another
    // test's 64 sessions at 3 x 10 ms they delayed FRR's packets enough to
    // put half the DUT's replies on its own clock (a CI run's scale test:
    // 19,013 of 36,118 answered within 2 ms).
    let _lock = lock_lab();
    let dir = scratch_dir("package");
    // The packages, from this build's binaries.
    let debs = run(Command::new("bash")
        .arg(repo().join("scripts/package.sh"))
        .args([
            "--profile",
            "debug",
            "--no-build",
            "--compression",
            "gzip",
            "--out",
            dir.join("debs").to_str().unwrap(),
        ]));
    let debs: Vec<&str> = debs.lines().collect();
    assert_eq!(debs.len(), 2, "two packages: {debs:?}");

    // Lintian: nothing but the accepted tags.
    let accepted: Vec<String> = std::fs::read_to_string(repo().join("packaging/lintian-accepted"))
        .unwrap()
        .lines()
        .filter_map(|l| l.split('#').next())
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect();
    let out = Command::new("lintian")
        // Its scratch files (mldbm-elf-*, which it leaves behind) go with
        // this test's directory.
        .env("TMPDIR", &dir)
        .args(["--no-tag-display-limit", "--display-info"])
        .args(&debs)
        .output()
        .expect("lintian (scripts/install-deps.sh installs it)");
    let said = String::from_utf8_lossy(&out.stdout);
    let tags: Vec<&str> = said
        .lines()
        .filter(|l| l.len() > 3 && l.as_bytes()[1] == b':' && !l.starts_with("N:"))
        .collect();
    let unexpected: Vec<&&str> = tags
        .iter()
        .filter(|l| {
            // "W: PACKAGE: TAG CONTEXT": accepted if TAG CONTEXT starts
            // with an accepted line.
            let report = l.splitn(3, ": ").nth(2).unwrap_or("");
            !accepted.iter().any(|a| report.starts_with(a.as_str()))
        })
        .collect();
    assert!(unexpected.is_empty(), "lintian: {unexpected:#?}");
    assert!(
        !tags.is_empty(),
        "lintian reported no tag at all, not even the accepted ones: did it run? {said}"
    );

    // Install into a scratch root.
    let root = scratch_root(&dir);
    let before = files_under(&root);
    run(dpkg(&root).arg("-i").args(&debs));
    let passwd = std::fs::read_to_string(root.join("etc/passwd")).unwrap();
    let user = passwd
        .lines()
        .find(|l| l.starts_with("linecardd:"))
        .unwrap_or_else(|| panic!("postinst made no linecardd user: {passwd}"));
    let fields: Vec<&str> = user.split(':').collect();
    let (uid, gid): (u32, u32) = (fields[2].parse().unwrap(), fields[3].parse().unwrap());
    assert!(
        (100..1000).contains(&uid) && fields[6] == "/usr/sbin/nologin",
        "a system user without a login: {user}"
    );
    for page in [
        "usr/share/man/man8/linecardd.8.gz",
        "usr/share/man/man1/linecard.1.gz",
    ] {
        let text = run(Command::new("man")
            .arg("-l")
            .arg(root.join(page))
            .env("MANWIDTH", "100"));
        assert!(
            text.contains("SYNOPSIS"),
            "{page} renders no synopsis:\n{text}"
        );
    }
    let page = run(Command::new("man")
        .arg("-l")
        .arg(root.join("usr/share/man/man8/linecardd.8.gz")));
    assert!(
        page.contains("SIGHUP"),
        "linecardd(8) says nothing of SIGHUP:\n{page}"
    );
    // systemd's own parser reads the unit and rates its hardening.
    let security = Command::new("systemd-analyze")
        .args(["security", "--offline=yes", "--no-pager"])
        .arg(format!("--root={}", root.display()))
        .arg("linecardd.service")
        .output()
        .unwrap();
    let rated = String::from_utf8_lossy(&security.stdout).to_string();
    let exposure: f64 = rated
        .lines()
        .find_map(|l| l.split("exposure level for linecardd.service: ").nth(1))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("systemd-analyze security: {rated}"));
    assert!(
        exposure <= 5.0,
        "the unit's exposure is {exposure}: {rated}"
    );

    // The installed engine, as the unit runs it, against FRR in the lab.
    let unit = std::fs::read_to_string(root.join("lib/systemd/system/linecardd.service")).unwrap();
    assert_eq!(unit_value(&unit, "User"), "linecardd");
    let capabilities = unit_value(&unit, "AmbientCapabilities");
    assert_eq!(capabilities, unit_value(&unit, "CapabilityBoundingSet"));
    assert_eq!(unit_value(&unit, "NoNewPrivileges"), "yes");
    let caps: String = capabilities
        .split_whitespace()
        .map(|c| format!(",+{}", c.trim_start_matches("CAP_").to_lowercase()))
        .collect();
    let runtime = root.join("run/linecardd");
    std::fs::create_dir_all(&runtime).unwrap();
    std::os::unix::fs::chown(&runtime, Some(uid), Some(gid)).unwrap();
    let socket = runtime.join("linecardd.sock");
    // The sample configuration, its example session uncommented (it is
    // the lab's DUT and peer) and the socket in the scratch root.
    let sample = std::fs::read_to_string(root.join("etc/linecardd/linecardd.toml")).unwrap();
    let (head, example) = sample
        .split_once("# [[session]]")
        .expect("the sample has an example session");
    // The BPF filesystem the unit mounts for handovers, here in the
    // scratch directory: the unit's own ExecStartPre, as root (systemd
    // runs `+` commands so), its path and owner substituted.
    let pins = dir.join("bpf");
    let pre_start = unit_value(&unit, "ExecStartPre");
    let pre_start = pre_start
        .strip_prefix('+')
        .expect("the unit's ExecStartPre runs privileged")
        .replace("/run/linecardd-bpf", pins.to_str().unwrap())
        .replace("linecardd:linecardd", &format!("{uid}:{gid}"));
    run(Command::new("sh").arg("-c").arg(&pre_start));
    let _unmounted_however_this_ends = Unmount(pins.clone());
    let config = format!(
        "{}[[session]]{}",
        head.replace("/run/linecardd/linecardd.sock", socket.to_str().unwrap())
            .replace("/run/linecardd-bpf", pins.to_str().unwrap()),
        example.replace("\n# ", "\n")
    );
    assert!(
        config.contains(&format!("handover_dir = \"{}\"", pins.display())),
        "the sample names the unit's BPF filesystem as its handover folder"
    );
    assert!(config.contains(&format!("local = \"{}\"", DUT.ipv4)));
    assert!(config.contains(&format!("peer = \"{}\"", PEER.ipv4)));
    let config_path = dir.join("linecardd.toml");
    std::fs::write(&config_path, config).unwrap();

    assert_exit(&linecard(&["lab", "up"]), 0, "lab up");
    let rest = spec::cpuset_dir(spec::REST_CPUSET);
    let _frr = start_frr_bfdd(
        "frr",
        PEER.namespace,
        Some(&rest),
        &dir,
        &[session_3x10(PEER.ipv4, DUT.ipv4)],
    )
    .unwrap();
    let capture = capture_dut_port(&dir);
    let as_the_unit = |program: &Path| -> Vec<String> {
        vec![
            format!("--reuid={uid}"),
            format!("--regid={gid}"),
            "--clear-groups".into(),
            format!("--inh-caps=-all{caps}"),
            format!("--ambient-caps=-all{caps}"),
            format!("--bounding-set=-all{caps}"),
            "--no-new-privs".into(),
            program.display().to_string(),
        ]
    };
    let engine = root.join("usr/sbin/linecardd");
    let mut args = as_the_unit(&engine);
    args.extend(["--config".into(), config_path.display().to_string()]);
    // As the unit starts it (and restarts it), its log appended.
    let start_engine = || {
        linecard_harness::procs::Daemon::spawn(
            "linecardd",
            DUT.namespace,
            Some(&spec::cpuset_dir(spec::DUT_CPUSET)),
            "setpriv",
            &args,
            &dir.join("linecardd.log"),
        )
        .unwrap()
    };
    let mut dut = start_engine();
    wait_sessions(
        &socket,
        &mut dut,
        Duration::from_secs(10),
        "the session Up and offloaded",
        |s| s.len() == 1 && s[0]["state"] == "up" && s[0]["offloaded"] == true,
    );
    // Its own user, and exactly the unit's capabilities.
    let pid = linecardd_pid(&dut);
    let uids = status_field(pid, "Uid");
    assert!(
        uids.split_whitespace().all(|u| u == uid.to_string()),
        "linecardd runs as {uids}, not {uid}"
    );
    let effective = u64::from_str_radix(&status_field(pid, "CapEff"), 16).unwrap();
    assert_eq!(
        effective,
        capability_mask(&capabilities),
        "effective capabilities {effective:#x}, the unit grants {capabilities}"
    );
    // FRR's words.
    let peers =
        linecard_harness::procs::vtysh(PEER.namespace, &dir.join("frr"), &["show bfd peers json"])
            .unwrap();
    let peers: serde_json::Value = serde_json::from_slice(&peers.stdout).unwrap_or_default();
    assert_eq!(peers[0]["status"], "up", "FRR's bfdd: {peers:#}");
    // The unit's ExecReload, as the unit's user: nothing changed.
    let reload = unit_value(&unit, "ExecReload")
        .replace("/usr/sbin/linecardd", engine.to_str().unwrap())
        .replace("/run/linecardd/linecardd.sock", socket.to_str().unwrap());
    let mut words = reload.split_whitespace();
    let program = PathBuf::from(words.next().unwrap());
    let said = run(Command::new("setpriv")
        .args(as_the_unit(&program))
        .args(words));
    assert_eq!(
        said.trim(),
        "reloaded: 0 added, 0 removed, 0 retimed, 0 rekeyed, 0 restarted, 1 unchanged"
    );
    // The restart peers do not see: SIGUSR2, exit 75, and the unit's
    // restart (RestartForceExitStatus) adopts the session.
    assert_eq!(unit_value(&unit, "RestartForceExitStatus"), "75");
    assert_eq!(unit_value(&unit, "RuntimeDirectoryPreserve"), "restart");
    let discr = |socket: &Path| ctl(socket, &["list"])["sessions"][0]["local_discr"].clone();
    let before_restart = (discr(&socket), frr_session_downs(&dir, 1));
    // SAFETY: kill on the PID of the engine this test started.
    unsafe { libc::kill(pid as i32, libc::SIGUSR2) };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while dut.running() {
        assert!(
            std::time::Instant::now() < deadline,
            "linecardd still runs 5 s after SIGUSR2: {}",
            dut.log_tail()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let handed = dut.stop().unwrap();
    assert_eq!(
        handed.code(),
        Some(i32::from(linecard_api::control::EXIT_AWAITING_NEXT_START)),
        "linecardd's exit after SIGUSR2: {}",
        dut.log_tail()
    );
    let mut dut = start_engine();
    wait_sessions(
        &socket,
        &mut dut,
        Duration::from_secs(10),
        "the session adopted, Up and offloaded",
        |s| s.len() == 1 && s[0]["state"] == "up" && s[0]["offloaded"] == true,
    );
    let log = std::fs::read_to_string(dir.join("linecardd.log")).unwrap();
    assert_eq!(
        log.matches("adopted 1 sessions").count(),
        1,
        "the restarted engine adopted the session once: {log}"
    );
    assert_eq!(
        (discr(&socket), frr_session_downs(&dir, 1)),
        before_restart,
        "the same discriminator, and no Down counted by FRR, across the restart"
    );
    std::thread::sleep(Duration::from_millis(500));
    let stopped = dut.stop().unwrap();
    assert!(
        stopped.success(),
        "linecardd exited {stopped}: {}",
        dut.log_tail()
    );
    let pcap = capture.finish().unwrap();
    // The wire's words: both directions Up.
    let a = analyze(&[pcap], &Options::default(), None).unwrap();
    for (src, dst) in [(DUT.ipv4, PEER.ipv4), (PEER.ipv4, DUT.ipv4)] {
        let flow = a
            .all
            .flows
            .iter()
            .find(|f| f.src == src && f.dst == dst)
            .unwrap_or_else(|| panic!("no {src} -> {dst} on the capture"));
        assert!(
            flow.up_gap_ms.count > 0,
            "{src} -> {dst} never Up on the wire"
        );
    }
    let ours = a.all.flows.iter().find(|f| f.src == DUT.ipv4).unwrap();
    assert_eq!(
        ours.last_state,
        Some(State::AdminDown),
        "a stop says AdminDown last"
    );

    run(Command::new("umount").arg(&pins));

    // Purge: nothing left but dpkg's database, the user gone.
    std::fs::remove_dir_all(root.join("run")).unwrap();
    run(dpkg(&root).args(["--purge", "linecardd", "linecard"]));
    let after = files_under(&root);
    assert_eq!(after, before, "purge left files behind");
    for db in ["etc/passwd", "etc/group"] {
        let text = std::fs::read_to_string(root.join(db)).unwrap();
        assert!(!text.contains("linecardd"), "{db} after purge: {text}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
