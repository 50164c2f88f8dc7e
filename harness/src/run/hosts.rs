//! The `ssh` provider with three hosts: the DUT, the peer and the observer
//! are machines of the user's (in the tests, the lab's namespaces, each
//! with an sshd of its own), each reached over SSH from here.
//!
//! Before anything starts, each host is asked about itself in one
//! connection: root, its CPUs, the tools its role needs, the interface and
//! the session's address on it, the BFD ports free. Then, for each DUT:
//! tcpdump on the observer's interface, the peer's daemon, the DUT's
//! daemon pinned to the DUT's CPUs, readiness in both daemons' own words,
//! the canary and each phase's stress-ng on the DUT's CPUs; at the end the
//! capture and the canary's record come here and are judged exactly as a
//! local run's ([`super::judge_dut`]). Every process is started by a shell
//! that records its PID in this run's directory on its host and carries
//! the run's marker in its environment; it is stopped by that PID, and the
//! run's clean-up stops whatever is left and removes the directory, also
//! after an error.
//!
//! What a three-host run does not do (refused when the scenario is read):
//! more than one session, dual stack, echo, multihop, faults, a linecardd
//! peer, a peer at real-time priority, FRR's dataplane, RT throttling
//! changed for the run. Those need the lab's own plumbing (extra
//! addresses, `lc_loss`, the lab's cpusets) or a host-wide setting the run
//! would have to change on a user's machine.

use super::daemons::{self, Bfd, EngineSite, Pair};
use super::provider::{Provider, Ready};
use super::site::{BfdDaemon, CaptureRun, DutDir, Prepared, Process, Recorder, Role, Site};
use super::ssh::{Staged, Staging};
use super::RunOptions;
use crate::manifest::HostFacts;
use crate::procs::{self, Capture, Daemon};
use crate::receive_path::{Detail, InterfaceRecord};
use crate::remote::{Connection, Mode, RemoteHost};
use crate::scenario::value::quote;
use crate::scenario::{DutImplementation, DutSpec, PeerImplementation, ProviderKind, Scenario};
use crate::scenario::{HostSpec, SshSpec};
use crate::sys::unix_ns;
use anyhow::{bail, Context, Result};
use linecard_api::BackendKind;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The run's three hosts.
struct Hosts {
    dut: Arc<RemoteHost>,
    peer: Arc<RemoteHost>,
    observer: Arc<RemoteHost>,
}

impl Hosts {
    fn all(&self) -> [&Arc<RemoteHost>; 3] {
        [&self.dut, &self.peer, &self.observer]
    }

    /// A DUT attempt's directory on `host` (in the run's own directory
    /// there).
    fn attempt_dir(host: &RemoteHost, dir: &DutDir) -> String {
        format!("{}/{}", host.dir, dir.name)
    }
}

impl Hosts {
    /// Stops what is left of the run on every host and removes its
    /// directories; the first failure is returned after all were tried.
    fn clean(&self) -> Result<()> {
        let mut first = Ok(());
        for host in self.all() {
            if let Err(e) = host.clean() {
                eprintln!(
                    "warning: cleaning {} on the {} host {}: {e:#}",
                    host.dir, host.role, host.conn.target
                );
                if first.is_ok() {
                    first = Err(e);
                }
            }
        }
        first
    }
}

/// The `ssh` provider with three hosts: the DUT, peer and observer hosts
/// of the scenario's `[ssh]` table; the run directory is here, under
/// `options.results`.
pub struct ThreeHosts<'a> {
    scenario: &'a Scenario,
    spec: SshSpec,
    options: RunOptions,
    /// Amends the manifest's description of the hosts (the proxmox
    /// provider names its VMs).
    describe: Box<dyn Fn(HostFacts) -> HostFacts + 'a>,
    /// What is staged on the hosts, recorded in the run directory before
    /// it is made there.
    staging: Option<(Staging, PathBuf)>,
    hosts: Option<Hosts>,
}

impl<'a> ThreeHosts<'a> {
    pub fn new(
        scenario: &'a Scenario,
        spec: SshSpec,
        options: RunOptions,
        describe: Box<dyn Fn(HostFacts) -> HostFacts + 'a>,
    ) -> Self {
        Self {
            scenario,
            spec,
            options,
            describe,
            staging: None,
            hosts: None,
        }
    }
}

impl Provider for ThreeHosts<'_> {
    /// Asks each host about itself, makes the run's directory (here, once
    /// every host answered, and on each host), stages the run there.
    fn prepare(&mut self) -> Result<Ready<'_>> {
        let (scenario, spec, options) = (self.scenario, &self.spec, &self.options);
        let mut probed = Vec::new();
        for (role, host) in [
            ("dut", &spec.dut),
            ("peer", &spec.peer),
            ("observer", &spec.observer),
        ] {
            let host = host
                .as_ref()
                .context("a three-host [ssh] table names each host")?;
            let conn = spec.connection_to(host);
            let online_cpus = probe(scenario, role, host, &conn)
                .with_context(|| format!("checking the {role} host {}", host.target))?;
            probed.push((role, host, conn, online_cpus));
        }
        // A run directory only once every host answered.
        let run_id = match &options.run_id {
            Some(id) => id.clone(),
            None => super::new_run_dir(&options.results, &scenario.name, unix_ns())?.0,
        };
        let marker = format!("{run_id}-{}", std::process::id());
        let local_dir = options.results.join(&scenario.name).join(&run_id);
        // Each host's own private directory for the run, noted here before
        // anything is staged in it.
        let planned_s = scenario.seconds_per_dut() * scenario.duts.len() as u64;
        let lifetime = std::time::Duration::from_secs(planned_s * super::MAX_ATTEMPTS as u64 + 600);
        let mut hosts: Vec<Arc<RemoteHost>> = Vec::new();
        let mut staging = Staging {
            marker: Some(marker.clone()),
            hosts: Vec::new(),
        };
        for (role, host, conn, online_cpus) in probed {
            // In the same connection: the host's reaper, and on the observer,
            // which writes the captures, its free space.
            let then = if role == "observer" {
                format!(
                    "{}; {}",
                    crate::remote::reaper(&marker, lifetime),
                    super::space::DF
                )
            } else {
                crate::remote::reaper(&marker, lifetime)
            };
            let made = conn
                .private_dir(&spec.remote_dir, &then)
                .with_context(|| format!("making the run's directory on the {role} host"));
            let (dir, df) = match made {
                Ok(made) => made,
                Err(e) => {
                    for made in &hosts {
                        let _ = made.clean();
                    }
                    return Err(e);
                }
            };
            staging.hosts.push(Staged::new(role, &conn, &dir));
            staging.write(&local_dir)?;
            if role == "observer" {
                // The captures are written there, and come here.
                let need = super::space::estimate_bytes(scenario, &options.only);
                let room =
                    super::space::check_df(&conn.target, &dir, &df, need, "the run's captures")
                        .and_then(|()| super::space::check(scenario, options));
                if let Err(e) = room {
                    for made in &hosts {
                        let _ = made.clean();
                    }
                    let _ = conn.exec(
                        &format!(
                            "{}; rm -rf {}",
                            crate::remote::kill_marked(&quote(&dir), &marker),
                            quote(&dir)
                        ),
                        None,
                    );
                    staging.hosts.clear();
                    staging.write(&local_dir)?;
                    return Err(e);
                }
            }
            hosts.push(Arc::new(RemoteHost {
                role,
                conn,
                spec: host.clone(),
                dir,
                marker: marker.clone(),
                online_cpus,
                keep: std::sync::atomic::AtomicBool::new(false),
                outages: Default::default(),
            }));
        }

        let (observer, peer, dut) = (hosts.pop(), hosts.pop(), hosts.pop());
        let hosts = self.hosts.insert(Hosts {
            dut: dut.expect("three hosts"),
            peer: peer.expect("three hosts"),
            observer: observer.expect("three hosts"),
        });
        self.staging = Some((staging, local_dir));
        let facts = (self.describe)(stage(hosts)?);
        eprintln!(
            "three hosts over SSH: DUT {} (CPUs {:?}), peer {}, observer {} ({})",
            hosts.dut.conn.target,
            hosts.dut.spec.cpus,
            hosts.peer.conn.target,
            hosts.observer.conn.target,
            hosts.observer.spec.interface
        );
        Ok(Ready {
            facts,
            site: hosts,
            run_id: Some(run_id),
        })
    }

    /// Cleans every host; once nothing of the run is left on them, the
    /// staging record says so.
    fn teardown(&mut self) -> Result<()> {
        let Some(hosts) = &self.hosts else {
            return Ok(());
        };
        let cleaned = hosts.clean();
        if let (Ok(()), Some((staging, local_dir))) = (&cleaned, &mut self.staging) {
            staging.hosts.clear();
            staging.write(local_dir)?;
        }
        cleaned.context("cleaning the hosts")
    }
}

/// The tools a role needs on its host for this scenario.
fn tools(scenario: &Scenario, role: &str, host: &HostSpec) -> Vec<&'static str> {
    let frr = ["/usr/lib/frr/bfdd", "vtysh"];
    let mut tools = vec!["timeout", "cat"];
    if !host.cpus.is_empty() || role == "dut" {
        tools.push("taskset");
    }
    match role {
        "dut" => {
            tools.push("stress-ng");
            if scenario
                .duts
                .iter()
                .any(|d| d.implementation == DutImplementation::Frr)
            {
                tools.extend(frr);
            }
        }
        "peer" => match scenario.peer {
            PeerImplementation::Frr => tools.extend(frr),
            PeerImplementation::Bird => tools.extend(["bird", "birdc"]),
            PeerImplementation::Linecardd => {}
        },
        _ => tools.push("tcpdump"),
    }
    tools
}

/// Asks a host about itself in one connection, before anything starts:
/// root, its CPUs, its role's tools, the interface and the address on
/// it, the BFD ports free. Returns its online CPUs.
fn probe(
    scenario: &Scenario,
    role: &str,
    host: &HostSpec,
    conn: &Connection,
) -> Result<Vec<usize>> {
    let iface = quote(&host.interface);
    // `ip link`, not /sys/class/net: a host's sysfs may show another
    // network namespace than its shell's (a hypervisor's sshd in one).
    let mut script = format!(
        "echo uid=$(id -u); echo cpus=$(cat /sys/devices/system/cpu/online); \
         ip link show dev {iface} >/dev/null 2>&1 || echo interface=absent; "
    );
    for tool in tools(scenario, role, host) {
        script.push_str(&format!(
            "command -v {tool} >/dev/null || echo missing={tool}; "
        ));
    }
    if let Some(address) = host.address {
        script.push_str(&format!(
            "ip -o addr show dev {iface} 2>/dev/null | grep -qF ' {address}/' || echo address=absent; \
             ss -Hlun 2>/dev/null | awk '{{print $4}}' | grep -E ':(3784|3785|4784)$' | sed 's/^/port=/'; "
        ));
    }
    let out = conn.exec(&script, None)?;
    let text = String::from_utf8_lossy(&out);
    let value = |key: &'static str| {
        text.lines()
            .filter_map(move |l| l.strip_prefix(key)?.strip_prefix('='))
            .map(str::trim)
    };
    let uid = value("uid").next().unwrap_or("?");
    if uid != "0" {
        bail!("the user is not root there (uid {uid}): BFD's ports, XDP and the stress's priorities need root");
    }
    let missing: Vec<&str> = value("missing").collect();
    if !missing.is_empty() {
        bail!(
            "missing on the host: {} (Debian: frr, bird2, stress-ng, tcpdump, util-linux, coreutils)",
            missing.join(", ")
        );
    }
    if value("interface").next().is_some() {
        bail!("the host has no interface {}", host.interface);
    }
    if let (Some(address), Some(_)) = (host.address, value("address").next()) {
        bail!("{address} is not an address of {} there", host.interface);
    }
    let ports: Vec<&str> = value("port").collect();
    if !ports.is_empty() {
        bail!(
            "BFD's ports are in use there ({}): another BFD daemon runs (stop it, or choose another host)",
            ports.join(", ")
        );
    }
    let cpus = value("cpus")
        .next()
        .and_then(crate::lab::spec::parse_cpu_list)
        .context("the host does not list its online CPUs")?;
    if let Some(c) = host.cpus.iter().find(|c| !cpus.contains(c)) {
        bail!(
            "CPU {c} of cpus = {:?} is not online there (online: {cpus:?})",
            host.cpus
        );
    }
    Ok(cpus)
}

/// Copies this build's
/// `linecard` (the canary) and `linecardd` to the DUT's, and describes the
/// DUT's host for the manifest.
fn stage(hosts: &Hosts) -> Result<HostFacts> {
    let dut = &hosts.dut;
    for (binary, name) in [
        (std::env::current_exe()?, "linecard"),
        (crate::linecardd::binary(), "linecardd"),
    ] {
        let bytes =
            std::fs::read(&binary).with_context(|| format!("reading {}", binary.display()))?;
        dut.conn
            .upload(&bytes, &format!("{}/{name}", dut.dir), Mode::Program)?;
    }
    let mut facts = super::ssh::host_facts(&dut.conn)?;
    facts.online_cpus = dut.online_cpus.clone();
    facts.dut_cpus = dut.spec.cpus.clone();
    // Each host asked once for the first line of each of its tools.
    let asked = [
        (
            &hosts.dut,
            vec![
                ("linecardd", format!("{}/linecardd --version", dut.dir)),
                ("stress-ng", "stress-ng --version".into()),
            ],
        ),
        (
            &hosts.peer,
            vec![
                ("bfdd", "/usr/lib/frr/bfdd --version".into()),
                ("bird", "bird --version".into()),
            ],
        ),
        (
            &hosts.observer,
            vec![("tcpdump", "tcpdump --version".into())],
        ),
    ];
    facts.tools = Vec::new();
    for (host, tools) in asked {
        let script: String = tools
            .iter()
            .map(|(_, line)| format!("printf '%s\\n' \"$({line} 2>&1 | head -1)\"; "))
            .collect();
        let said = host
            .conn
            .output(&script)
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let mut lines = said.lines();
        for (tool, _) in tools {
            let first = lines
                .next()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .unwrap_or("not found");
            facts
                .tools
                .push((format!("{tool} ({} host)", host.role), first.to_string()));
        }
    }
    facts.via = Some(format!(
        "dut {} (CPUs {:?}, {}), peer {} ({}), observer {} (captures on {})",
        dut.conn.target,
        dut.spec.cpus,
        dut.spec.interface,
        hosts.peer.conn.target,
        hosts.peer.spec.interface,
        hosts.observer.conn.target,
        hosts.observer.spec.interface
    ));
    facts.git_revision = String::from_utf8_lossy(
        &std::process::Command::new("git")
            .args(["rev-parse", "HEAD"])
            .output()
            .map(|o| o.stdout)
            .unwrap_or_default(),
    )
    .trim()
    .to_string();
    facts.provider = ProviderKind::Ssh;
    Ok(facts)
}

/// `/proc/stat` of a host, and `/proc/PID/stat` of one of its processes
/// if it still runs.
fn proc_stats(host: &RemoteHost, pid: Option<u32>) -> (String, Option<String>) {
    let script = match pid {
        Some(pid) => format!("cat /proc/stat; echo '#pid'; cat /proc/{pid}/stat 2>/dev/null"),
        None => "cat /proc/stat".into(),
    };
    let text = host
        .conn
        .exec(&script, None)
        .map(|o| String::from_utf8_lossy(&o).into_owned())
        .unwrap_or_default();
    match text.split_once("#pid\n") {
        Some((stat, process)) => (
            stat.to_string(),
            Some(process.to_string()).filter(|p| !p.trim().is_empty()),
        ),
        None => (text, None),
    }
}

/// A DUT's one session: the DUT's address and the peer's.
fn pair(hosts: &Hosts) -> Pair {
    Pair {
        dut: hosts
            .dut
            .spec
            .address
            .expect("checked: the DUT has an address"),
        peer: hosts
            .peer
            .spec
            .address
            .expect("checked: the peer has an address"),
    }
}

/// Starts FRR's bfdd on `host` with the sessions `configured`, its files
/// under `run_dir/name` there, its output in `dir/name.out` here.
fn start_frr(
    name: &str,
    host: &Arc<RemoteHost>,
    run_dir: &str,
    configured: &[procs::PeerSession],
    dir: &Path,
) -> Result<Bfd> {
    let vty = format!("{run_dir}/{name}");
    let config = format!("{vty}/bfdd.conf");
    host.conn.exec(&format!("mkdir -p {}", quote(&vty)), None)?;
    host.conn.upload(
        procs::frr_config(configured).as_bytes(),
        &config,
        Mode::Readable,
    )?;
    // bfdd drops privileges to frr:frr, which must be able to write there.
    host.conn
        .exec(&format!("chown -R frr:frr {}", quote(&vty)), None)?;
    let mut args = procs::frr_args("bfdd", Path::new(&config), Path::new(&vty));
    args.extend(["--bfdctl".into(), format!("{vty}/bfdd.sock")]);
    let daemon = Daemon::spawn_remote(
        name,
        host,
        run_dir,
        "/usr/lib/frr/bfdd",
        &args,
        &dir.join(format!("{name}.out")),
    )?;
    Ok(Bfd::frr_on(daemon, host.clone(), PathBuf::from(vty)))
}

fn start_peer(scenario: &Scenario, hosts: &Hosts, run_dir: &str, dir: &Path) -> Result<Bfd> {
    let pairs = [pair(hosts)];
    let configured = daemons::peer_sessions(&pairs, &scenario.sessions, true);
    let host = &hosts.peer;
    match scenario.peer {
        PeerImplementation::Frr => start_frr("peer-frr", host, run_dir, &configured, dir),
        PeerImplementation::Bird => {
            let bird = format!("{run_dir}/peer-bird");
            let config = format!("{bird}/bird.conf");
            let ctl = format!("{bird}/bird.ctl");
            // BIRD's router id is an IPv4 address; an IPv6 session's peer
            // takes one from the documentation range.
            let router_id = match pairs[0].peer {
                IpAddr::V4(v4) => IpAddr::V4(v4),
                IpAddr::V6(_) => "192.0.2.254".parse()?,
            };
            host.conn
                .exec(&format!("mkdir -p {}", quote(&bird)), None)?;
            host.conn.upload(
                procs::bird_config(router_id, &configured).as_bytes(),
                &config,
                Mode::Private,
            )?;
            let args = [
                "-f",
                "-c",
                &config,
                "-s",
                &ctl,
                "-P",
                &format!("{bird}/bird.pid"),
            ]
            .map(String::from)
            .to_vec();
            let daemon = Daemon::spawn_remote(
                "peer-bird",
                host,
                run_dir,
                "bird",
                &args,
                &dir.join("peer-bird.out"),
            )?;
            Ok(Bfd::bird_on(
                daemon,
                host.clone(),
                PathBuf::from(ctl),
                vec![pairs[0].dut],
            ))
        }
        PeerImplementation::Linecardd => bail!("a three-host run's peer is FRR's bfdd or BIRD"),
    }
}

fn start_dut(
    scenario: &Scenario,
    dut: &DutSpec,
    hosts: &Hosts,
    run_dir: &str,
    dir: &Path,
) -> Result<Bfd> {
    let pairs = [pair(hosts)];
    let host = &hosts.dut;
    match &dut.implementation {
        DutImplementation::Frr => {
            let configured = daemons::peer_sessions(&pairs, &scenario.sessions, false);
            start_frr("dut-frr", host, run_dir, &configured, dir)
        }
        DutImplementation::Linecardd { backend } => {
            let socket = format!("{run_dir}/linecardd.sock");
            let config = format!("{run_dir}/linecardd.toml");
            let text = daemons::linecardd_config(
                &EngineSite::dut(&host.spec.cpus, &scenario.sessions, &host.spec.interface),
                *backend,
                &dut.engine,
                &scenario.sessions,
                &pairs,
                None,
                Path::new(&socket),
            );
            host.conn.upload(text.as_bytes(), &config, Mode::Private)?;
            crate::sys::write_private(&dir.join("linecardd.toml"), text.as_bytes())?;
            let daemon = Daemon::spawn_remote(
                "linecardd",
                host,
                run_dir,
                &format!("{}/linecardd", host.dir),
                &["--config".into(), config],
                &dir.join("linecardd.log"),
            )?;
            Ok(Bfd::linecardd_on(
                daemon,
                host.clone(),
                PathBuf::from(socket),
                daemons::offloads(*backend, &dut.engine),
            ))
        }
        DutImplementation::FrrDataplane { .. } => {
            bail!("a three-host run's DUT is linecardd or FRR's bfdd")
        }
    }
}

/// Why `backend` cannot run on `host`, if it cannot: `linecardd backends
/// --json` there.
fn unavailable_on(host: &RemoteHost, backend: &str) -> Result<Option<String>> {
    let out = host.query(
        &format!("{}/linecardd", host.dir),
        &["backends".into(), "--json".into()],
    )?;
    let target = &host.conn.target;
    let backends = crate::backends::Backends::parse(&out.stdout, target)
        .with_context(|| String::from_utf8_lossy(&out.stderr).trim().to_string())?;
    Ok(backends
        .unavailable(backend)
        .map(|why| format!("on {target}: {why}")))
}

impl Site for Hosts {
    fn dut_cpus(&self) -> &[usize] {
        &self.dut.spec.cpus
    }

    /// The peer host's pinned CPUs, or all of them.
    fn peer_cpus(&self) -> Vec<usize> {
        if self.peer.spec.cpus.is_empty() {
            self.peer.online_cpus.clone()
        } else {
            self.peer.spec.cpus.clone()
        }
    }

    /// The DUT host's kernel decides (etf for txtime, XDP for xdp), in the
    /// engine's own words there.
    fn unavailable(&self, backend: BackendKind) -> Result<Option<String>> {
        unavailable_on(&self.dut, backend.name())
    }

    fn prepare_dut(&self, _scenario: &Scenario, _dut: &DutSpec, dir: &DutDir) -> Result<Prepared> {
        for host in self.all() {
            host.conn.exec(
                &format!("mkdir -p {}", quote(&Self::attempt_dir(host, dir))),
                None,
            )?;
        }
        Ok(Prepared {
            pairs: vec![pair(self)],
            sched_rt_runtime_us: self
                .dut
                .read("/proc/sys/kernel/sched_rt_runtime_us")
                .ok()
                .and_then(|t| t.trim().parse().ok()),
            _held: Vec::new(),
        })
    }

    fn start_capture(&self, dir: &DutDir) -> Result<Box<dyn CaptureRun>> {
        Ok(Box::new(Capture::start_remote(
            &self.observer,
            &Self::attempt_dir(&self.observer, dir),
            &self.observer.spec.interface,
            &dir.local.join("capture.pcap"),
        )?))
    }

    fn start_peer(
        &self,
        scenario: &Scenario,
        _dut: &DutSpec,
        _pairs: &[Pair],
        dir: &DutDir,
    ) -> Result<Box<dyn BfdDaemon>> {
        Ok(Box::new(start_peer(
            scenario,
            self,
            &Self::attempt_dir(&self.peer, dir),
            &dir.local,
        )?))
    }

    fn start_dut(
        &self,
        scenario: &Scenario,
        dut: &DutSpec,
        _pairs: &[Pair],
        dir: &DutDir,
    ) -> Result<Box<dyn BfdDaemon>> {
        Ok(Box::new(start_dut(
            scenario,
            dut,
            self,
            &Self::attempt_dir(&self.dut, dir),
            &dir.local,
        )?))
    }

    /// On the DUT host: the canary and the freeze witness on the DUT's
    /// CPUs, the steal witness off them.
    fn start_recorder(
        &self,
        recorder: Recorder,
        seconds: u64,
        dir: &DutDir,
    ) -> Result<Box<dyn Process>> {
        let remote_dir = Self::attempt_dir(&self.dut, dir);
        let out = format!("{remote_dir}/{}", recorder.record());
        let args = recorder.args(&self.dut.spec.cpus, seconds, &out);
        let program = format!("{}/linecard", self.dut.dir);
        let log = dir.local.join(format!("{}.log", recorder.name()));
        let spawn = if recorder.off_dut() {
            Daemon::spawn_remote_off_dut
        } else {
            Daemon::spawn_remote
        };
        Ok(Box::new(spawn(
            recorder.name(),
            &self.dut,
            &remote_dir,
            &program,
            &args,
            &log,
        )?))
    }

    fn fetch_record(&self, recorder: Recorder, dir: &DutDir) -> Result<PathBuf> {
        let here = dir.local.join(recorder.record());
        let there = format!(
            "{}/{}",
            Self::attempt_dir(&self.dut, dir),
            recorder.record()
        );
        if let Err(e) = self.dut.conn.download(&there, &here) {
            self.dut
                .keep
                .store(true, std::sync::atomic::Ordering::Relaxed);
            return Err(e.context(format!("it stays on {} in {there}", self.dut.conn.target)));
        }
        Ok(here)
    }

    fn start_stress(
        &self,
        name: &str,
        args: &[String],
        dir: &DutDir,
        log: &Path,
    ) -> Result<Box<dyn Process>> {
        Ok(Box::new(Daemon::spawn_remote(
            name,
            &self.dut,
            &Self::attempt_dir(&self.dut, dir),
            "stress-ng",
            args,
            log,
        )?))
    }

    fn connection_outages(&self) -> Vec<crate::manifest::evidence::ConnectionOutage> {
        let mut all = Vec::new();
        for host in self.all() {
            for (start_ns, end_ns) in host.take_outages() {
                all.push(crate::manifest::evidence::ConnectionOutage {
                    host: format!("{} {}", host.role, host.conn.target),
                    start_ns,
                    end_ns,
                });
            }
        }
        all
    }

    /// The DUT host's session interface.
    fn receive_path(&self, detail: Detail) -> Vec<InterfaceRecord> {
        let interface = &self.dut.spec.interface;
        let script = crate::receive_path::script(interface, detail);
        let text = (self.dut.conn.exec(&script, None))
            .map(|o| String::from_utf8_lossy(&o).into_owned())
            .unwrap_or_else(|e| format!("{e:#}"));
        vec![InterfaceRecord::parse(self.dut.role, interface, &text)]
    }

    fn proc_stat(&self, role: Role, pid: Option<u32>) -> (String, Option<String>) {
        match role {
            Role::Dut => proc_stats(&self.dut, pid),
            Role::Peer => proc_stats(&self.peer, pid),
        }
    }
}
