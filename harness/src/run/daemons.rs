//! The BFD daemons of a run: the peer (FRR bfdd or BIRD) and the DUT (FRR
//! bfdd or linecardd with a backend), started in the lab's namespaces and
//! cpusets (or, for a three-host run, on the hosts by `hosts.rs`), and
//! asked, in their own words, whether their session is Up.

use crate::lab::spec::{self, Host};
use crate::procs::{self, Daemon, PeerSession};
use crate::remote::RemoteHost;
use crate::scenario::programs::Programs;
use crate::scenario::{DutImplementation, Family, PeerImplementation, Sessions};
use crate::sys;
use anyhow::{bail, Context, Result};
use linecard_api::config::EngineSettings;
use linecard_api::BackendKind;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod ask;
mod start;

pub use ask::EngineView;
pub(crate) use start::linecardd_config;
pub use start::start_dut;
use start::start_peer_daemon;

/// One session's address pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pair {
    pub dut: IpAddr,
    pub peer: IpAddr,
}

/// The scenario's address pairs. The first is the lab's own pair; the
/// others are extra addresses on the same interfaces (FRR 8.4 brings up
/// one session per peer address, so every session has a pair of its own),
/// from the benchmarking range RFC 2544 reserves, on-link as one /15:
/// 198.18.x.y on the DUT and 198.19.x.y on the peer (IPv6, inside the lab's
/// /64: 2001:db8::1:x on the DUT and 2001:db8::2:x on the peer).
/// A dual-stack scenario has both families' pairs, IPv4's first.
pub fn pairs(sessions: &Sessions) -> Vec<Pair> {
    if sessions.dual_stack {
        let family = |ipv6| {
            pairs(&Sessions {
                ipv6,
                dual_stack: false,
                ..sessions.clone()
            })
        };
        return [family(false), family(true)].concat();
    }
    (0..sessions.count)
        .map(|i| {
            if i == 0 {
                let lab = |host: &Host| {
                    let text = if sessions.ipv6 { host.ipv6 } else { host.ipv4 };
                    text.parse().expect("the lab's addresses parse")
                };
                return Pair {
                    dut: lab(&spec::DUT),
                    peer: lab(&spec::PEER),
                };
            }
            let (hi, lo) = ((i >> 8) as u8, (i & 0xff) as u8);
            if sessions.ipv6 {
                Pair {
                    dut: format!("2001:db8::1:{i:x}")
                        .parse()
                        .expect("a valid address"),
                    peer: format!("2001:db8::2:{i:x}")
                        .parse()
                        .expect("a valid address"),
                }
            } else {
                Pair {
                    dut: IpAddr::from([198, 18, hi, lo]),
                    peer: IpAddr::from([198, 19, hi, lo]),
                }
            }
        })
        .collect()
}

impl Pair {
    /// The lab's own addresses (each family's first pair): already on the
    /// interfaces, with neighbours the lab resolves.
    fn is_the_labs_own(&self) -> bool {
        [spec::DUT.ipv4, spec::DUT.ipv6]
            .iter()
            .any(|a| a.parse::<IpAddr>().ok() == Some(self.dut))
    }
}

/// The extra addresses of a multi-session run, on the DUT's and the peer's
/// interface; removed on drop (and with the lab's namespaces in any case).
pub struct ExtraAddresses {
    added: Vec<(&'static str, Vec<String>)>,
}

/// `ip -n NS -batch FILE`: one process for any number of address commands.
/// From a file, not a pipe: ip stops reading at its first error, and a
/// write into the closed pipe would kill this process with SIGPIPE, its
/// run unrecorded (seen at 4096 sessions: the first `addr del` of a subnet
/// takes its secondary addresses with it, the second fails). `keep_going`
/// (`-force`): run every command whatever fails.
fn ip_batch(ns: &str, commands: &[String], keep_going: bool) -> Result<()> {
    let file = std::env::temp_dir().join(format!("linecard-ip-batch-{}-{ns}", std::process::id()));
    std::fs::write(&file, commands.join("\n") + "\n")
        .with_context(|| format!("writing {}", file.display()))?;
    let mut command = Command::new(sys::IP.program);
    command.args(["-n", ns]);
    if keep_going {
        command.arg("-force");
    }
    let out = command
        .arg("-batch")
        .arg(&file)
        .output()
        .context("running ip -batch");
    let _ = std::fs::remove_file(&file);
    let out = out?;
    if !out.status.success() {
        bail!(
            "ip -n {ns} -batch: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

impl ExtraAddresses {
    pub fn add(pairs: &[Pair]) -> Result<Self> {
        let mut extra = Self { added: Vec::new() };
        for (ns, pick) in [
            (
                spec::DUT.namespace,
                (|p: &Pair| p.dut) as fn(&Pair) -> IpAddr,
            ),
            (spec::PEER.namespace, |p: &Pair| p.peer),
        ] {
            let cidrs: Vec<String> = pairs
                .iter()
                .filter(|p| !p.is_the_labs_own())
                .map(|p| match pick(p) {
                    IpAddr::V4(a) => format!("{a}/15"),
                    IpAddr::V6(a) => format!("{a}/64"),
                })
                .collect();
            if cidrs.is_empty() {
                continue;
            }
            // No duplicate address detection: IPv6 addresses usable at once.
            // `replace`, not `add`: addresses a crashed run left behind are
            // taken over, not an error.
            let commands: Vec<String> = cidrs
                .iter()
                .map(|c| {
                    let nodad = if c.contains(':') { " nodad" } else { "" };
                    format!("addr replace {c} dev {}{nodad}", spec::HOST_IFACE)
                })
                .collect();
            ip_batch(ns, &commands, false)?;
            extra.added.push((ns, cidrs));
        }
        // Every peer address resolves to the other host's fixed MAC, as
        // permanent entries: the kernel's neighbour tables are shared by
        // all namespaces and garbage-collect above 1024 entries
        // (gc_thresh3), which 1024 sessions on each side exceed; permanent
        // entries are not collected and do not count.
        for (ns, other, pick) in [
            (
                spec::DUT.namespace,
                &spec::PEER,
                (|p: &Pair| p.peer) as fn(&Pair) -> IpAddr,
            ),
            (spec::PEER.namespace, &spec::DUT, |p: &Pair| p.dut),
        ] {
            let commands: Vec<String> = pairs
                .iter()
                .filter(|p| !p.is_the_labs_own())
                .map(|p| {
                    format!(
                        "neigh replace {} lladdr {} dev {} nud permanent",
                        pick(p),
                        other.mac,
                        spec::HOST_IFACE
                    )
                })
                .collect();
            if !commands.is_empty() {
                ip_batch(ns, &commands, false)?;
            }
        }
        Ok(extra)
    }
}

impl Drop for ExtraAddresses {
    fn drop(&mut self) {
        for (ns, cidrs) in &self.added {
            let commands: Vec<String> = cidrs
                .iter()
                .map(|c| format!("addr del {c} dev {}", spec::HOST_IFACE))
                .collect();
            // Deleting a subnet's first address takes its secondaries with
            // it: the rest of the commands fail, harmlessly.
            let _ = ip_batch(ns, &commands, true);
        }
    }
}

pub(crate) fn peer_sessions(
    pairs: &[Pair],
    sessions: &Sessions,
    from_peer: bool,
) -> Vec<PeerSession> {
    pairs
        .iter()
        .map(|p| PeerSession {
            local: if from_peer { p.peer } else { p.dut },
            peer: if from_peer { p.dut } else { p.peer },
            tx_ms: sessions.tx_interval_ms,
            rx_ms: sessions.rx_interval_ms,
            multiplier: sessions.multiplier,
            multihop: sessions.multihop,
            min_ttl: sessions.min_ttl,
            echo: sessions.echo,
            auth: sessions.auth.clone(),
        })
        .collect()
}

/// A running BFD daemon and how to ask it about its session.
pub struct Bfd {
    pub daemon: Daemon,
    kind: Kind,
    /// Where it answers the harness's questions.
    at: Place,
    /// FRR's bfdd when it is the control plane of a linecardd DUT.
    control_plane: Option<ControlPlane>,
    /// What FRR needs for the echo function (`sessions.echo`).
    _echo: Option<FrrEcho>,
}

/// What FRR's echo function needs in a namespace (`sessions.echo`):
/// zebra, since bfdd runs echo only for a peer on an interface zebra told
/// it about (and originates IPv4 echoes only with the neighbour's MAC
/// learned); and, where FRR is the reflector (a peer FRR, or an FRR DUT),
/// forwarding, which is what turns the other side's echoes around (RFC
/// 5880 6.4: the forwarding plane, not BFD, reflects). Redirects off: the
/// echo leaves by the interface it came in on, which would otherwise earn
/// an ICMP redirect per echo. Dropping it puts the sysctls back and stops
/// zebra.
struct FrrEcho {
    _zebra: Option<Daemon>,
    ns: &'static str,
    restore: Vec<(String, String)>,
}

/// The sysctls of a namespace whose FRR reflects echoes.
const REFLECTOR_SYSCTLS: [(&str, &str); 4] = [
    ("net.ipv4.ip_forward", "1"),
    ("net.ipv6.conf.all.forwarding", "1"),
    ("net.ipv4.conf.all.send_redirects", "0"),
    ("net.ipv4.conf.eth0.send_redirects", "0"),
];

impl FrrEcho {
    /// [`FrrEcho::start`] when the sessions run the echo function.
    fn if_echo(
        zebra: &Path,
        sessions: &Sessions,
        name: &str,
        ns: &'static str,
        cpuset: &Path,
        dir: &Path,
        reflect: bool,
    ) -> Result<Option<Self>> {
        sessions
            .echo
            .then(|| Self::start(zebra, name, ns, cpuset, dir, reflect))
            .transpose()
    }

    /// `dir`: the bfdd instance's directory (zebra's socket goes there);
    /// `reflect`: this host's forwarding turns echoes around.
    fn start(
        zebra: &Path,
        name: &str,
        ns: &'static str,
        cpuset: &Path,
        dir: &Path,
        reflect: bool,
    ) -> Result<Self> {
        // Built first, so that a failure half-way still restores what was
        // set (on drop).
        let mut setup = Self {
            _zebra: None,
            ns,
            restore: Vec::new(),
        };
        for (key, value) in REFLECTOR_SYSCTLS.iter().filter(|_| reflect) {
            let old = sys::run("ip", ["netns", "exec", ns, "sysctl", "-n", key])?;
            setup
                .restore
                .push((key.to_string(), old.trim().to_string()));
            let set = format!("{key}={value}");
            sys::run("ip", ["netns", "exec", ns, "sysctl", "-qw", set.as_str()])?;
        }
        setup._zebra = Some(procs::start_frr_zebra(zebra, name, ns, Some(cpuset), dir)?);
        Ok(setup)
    }
}

impl Drop for FrrEcho {
    fn drop(&mut self) {
        for (key, old) in &self.restore {
            let _ = sys::run(
                "ip",
                [
                    "netns",
                    "exec",
                    self.ns,
                    "sysctl",
                    "-qw",
                    &format!("{key}={old}"),
                ],
            );
        }
    }
}

struct ControlPlane {
    daemon: Daemon,
    vty: PathBuf,
}

/// Where a daemon answers the harness's questions (vtysh, birdc,
/// `linecardd ctl`): in a namespace of the local lab, or on its host over
/// SSH.
#[derive(Clone)]
pub enum Place {
    Lab(&'static str),
    Host(Arc<RemoteHost>),
}

impl Place {
    fn vtysh(&self, vty: &Path, commands: &[&str]) -> Result<std::process::Output> {
        match self {
            Place::Lab(ns) => procs::vtysh(ns, vty, commands),
            Place::Host(host) => {
                let mut args = vec!["--vty_socket".to_string(), vty.display().to_string()];
                for c in commands {
                    args.extend(["-c".to_string(), c.to_string()]);
                }
                host.query("vtysh", &args)
            }
        }
    }

    fn birdc(&self, ctl: &Path, args: &[&str]) -> Result<std::process::Output> {
        let mut all = vec!["-s".to_string(), ctl.display().to_string()];
        all.extend(args.iter().map(|a| a.to_string()));
        match self {
            Place::Lab(ns) => Command::new("ip")
                .args(["netns", "exec", ns, "birdc"])
                .args(&all)
                .output()
                .context("running birdc"),
            Place::Host(host) => host.query("birdc", &all),
        }
    }

    /// linecardd's typed reply to `ctl ARGS` here.
    fn ctl<T: serde::de::DeserializeOwned>(&self, socket: &Path, args: &[&str]) -> Result<T> {
        match self {
            Place::Lab(_) => crate::linecardd::ctl_as(socket, args),
            Place::Host(host) => {
                let mut all = vec![
                    "ctl".to_string(),
                    "--socket".into(),
                    socket.display().to_string(),
                ];
                all.extend(args.iter().map(|a| a.to_string()));
                let out = host.query(&format!("{}/linecardd", host.dir), &all)?;
                if !out.status.success() {
                    bail!(
                        "linecardd ctl {args:?} on {}: {}",
                        host.conn.target,
                        String::from_utf8_lossy(&out.stderr).trim()
                    );
                }
                serde_json::from_slice(&out.stdout).with_context(|| {
                    format!(
                        "linecardd ctl {args:?} on {}: an unexpected reply",
                        host.conn.target
                    )
                })
            }
        }
    }
}

/// Where the DUT's control-plane bfdd listens for linecardd (loopback in
/// the DUT's namespace).
pub const FRR_DATAPLANE: &str = "127.0.0.1:50700";
/// bfdd 8.4.4 delivers at most this many sessions in the burst it sends
/// when a dataplane connects (8 KB / 140 bytes; docs/frr-dataplane.md).
pub const FRR_REGISTRATION_BURST: usize = 58;
/// bfdd 8.4.4 reads at most 102 counters replies between two reads of its
/// event loop (8 KB / 80 bytes); one sweep of more resets the connection.
pub const FRR_COUNTERS_PER_SWEEP: usize = 100;
/// Counters sweeps the runner asks bfdd for at the end of a run.
const COUNTERS_SWEEPS: usize = 3;

enum Kind {
    /// vtysh socket directory.
    Frr { vty: PathBuf },
    Bird {
        ctl: PathBuf,
        /// The addresses BIRD's sessions face.
        peers: Vec<IpAddr>,
    },
    /// `offloads`: the engine hands steady sessions to its fast path
    /// (the xdp backend, unless `xdp_replies = false`), those of
    /// `offload_only`'s family alone when it is set.
    Linecardd {
        socket: PathBuf,
        offloads: bool,
        offload_only: Option<Family>,
    },
}

/// Puts every thread of `pid` at SCHED_FIFO `priority`.
pub fn make_realtime(pid: u32, priority: u8) -> Result<()> {
    let param = libc::sched_param {
        sched_priority: i32::from(priority),
    };
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
        .with_context(|| format!("listing the threads of {pid}"))?;
    for task in tasks {
        let tid: i32 = task?.file_name().to_string_lossy().parse()?;
        // SAFETY: sched_setscheduler reads the param we pass.
        if unsafe { libc::sched_setscheduler(tid, libc::SCHED_FIFO, &param) } != 0 {
            bail!(
                "SCHED_FIFO {priority} for thread {tid} of {pid}: {}",
                std::io::Error::last_os_error()
            );
        }
    }
    Ok(())
}

/// Starts the peer at SCHED_FIFO `rt_priority` (0: normal priority).
pub fn start_peer(
    implementation: PeerImplementation,
    programs: &Programs,
    rt_priority: u8,
    sessions: &Sessions,
    pairs: &[Pair],
    dir: &Path,
) -> Result<Bfd> {
    let peer = start_peer_daemon(implementation, programs, sessions, pairs, dir)?;
    if rt_priority > 0 {
        make_realtime(peer.daemon.pid(), rt_priority)?;
    }
    Ok(peer)
}

/// Room in `sun_path` for a unix socket's path, its terminating NUL
/// aside (unix(7)). A longer path is cut short by FRR and BIRD, which then
/// bind the wrong name or fail to bind at all.
pub const SOCKET_PATH_MAX: usize = 107;

/// Every unix socket a DUT's run may bind, relative to its directory:
/// the peer's and the DUT's daemons as first started, and as a fault
/// starts them again in `last_restart`, the longest such directory's name
/// (`restarted-N` or `restarted-N-K`; the peer's with `peer-` before it).
pub fn socket_paths(
    peer: PeerImplementation,
    dut: &DutImplementation,
    last_restart: Option<String>,
) -> Vec<PathBuf> {
    let frr = |dir: &str| {
        ["bfdd.sock", "bfdd.vty", "zserv.api"]
            .map(|f| PathBuf::from(dir).join(f))
            .to_vec()
    };
    let peers = match peer {
        PeerImplementation::Frr => frr("peer-frr"),
        PeerImplementation::Bird => vec!["peer-bird/bird.ctl".into()],
        PeerImplementation::Linecardd => vec!["peer-linecardd.sock".into()],
    };
    let mut duts = vec![PathBuf::from("linecardd.sock")];
    match dut {
        DutImplementation::Frr => duts = frr("dut-frr"),
        DutImplementation::FrrDataplane { .. } => duts.extend(frr("dut-frr-control")),
        DutImplementation::Linecardd { .. } => {}
    }
    let restarted = |dir: String, paths: &[PathBuf]| -> Vec<PathBuf> {
        paths.iter().map(|p| Path::new(&dir).join(p)).collect()
    };
    let mut all = Vec::new();
    if let Some(last) = last_restart {
        all.extend(restarted(format!("peer-{last}"), &peers));
        all.extend(restarted(last, &duts));
    }
    all.extend(peers);
    all.extend(duts);
    all
}

/// Where a linecardd runs: its files' name in the run directory, its
/// namespace and cpuset, and what its configuration says of its host.
struct LinecarddHost<'a> {
    /// The linecardd that runs (this build's, or a scenario's `linecardd =
    /// PATH`).
    program: &'a Path,
    name: &'static str,
    namespace: &'static str,
    cpuset: &'a Path,
    site: EngineSite<'a>,
}

/// What a linecardd's configuration says of its host.
/// Where a DUT linecardd serves its metrics during a run: its host's
/// loopback (the lab's DUT namespace, or an SSH host's), scraped once a
/// second by `linecard engine-scrape` beside it. A scenario's `[engine]
/// metrics` is replaced by it, so that the run always scrapes what the
/// engine serves.
pub const DUT_METRICS: &str = "127.0.0.1:19788";

pub(crate) struct EngineSite<'a> {
    /// Its CPUs; the engine is pinned to the first.
    pub cpus: &'a [usize],
    /// Its sessions set D once Up (`sessions.demand`).
    pub asks_demand: bool,
    /// The sessions' interface (the fast path attaches to it).
    pub interface: &'a str,
    /// Where it serves metrics (the DUT: [`DUT_METRICS`]).
    pub metrics: Option<&'static str>,
}

impl<'a> LinecarddHost<'a> {
    fn dut(program: &'a Path, cpuset: &'a Path, cpus: &'a [usize], sessions: &Sessions) -> Self {
        Self {
            program,
            name: "linecardd",
            namespace: spec::DUT.namespace,
            cpuset,
            site: EngineSite::dut(cpus, sessions, spec::HOST_IFACE),
        }
    }
}

impl<'a> EngineSite<'a> {
    pub(crate) fn dut(cpus: &'a [usize], sessions: &Sessions, interface: &'a str) -> Self {
        Self {
            cpus,
            asks_demand: sessions.demand.is_some_and(|d| d.dut_asks()),
            interface,
            metrics: Some(DUT_METRICS),
        }
    }
}

/// Writes `dir/NAME.toml` and starts linecardd with it in the host's
/// namespace and cpuset (sessions from `pair.dut` to `pair.peer`); returns
/// it and its control socket.
fn spawn_linecardd(
    host: &LinecarddHost,
    backend: BackendKind,
    engine: &EngineSettings,
    sessions: &Sessions,
    pairs: &[Pair],
    offload_only: Option<Family>,
    dir: &Path,
) -> Result<(Daemon, PathBuf)> {
    let socket = dir.join(format!("{}.sock", host.name));
    let config = dir.join(format!("{}.toml", host.name));
    // `ip netns exec` hides /sys/fs/bpf: a handover pins on the lab's
    // own BPF filesystem, in a folder named by this engine's socket.
    let engine = &EngineSettings {
        handover_dir: engine.handover_dir.clone().or_else(|| {
            use std::hash::{Hash, Hasher};
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            socket.hash(&mut hasher);
            Some(Path::new(spec::ENGINE_BPFFS).join(format!(
                "{}-{:016x}",
                host.name,
                hasher.finish()
            )))
        }),
        ..engine.clone()
    };
    crate::sys::write_private(
        &config,
        linecardd_config(
            &host.site,
            backend,
            engine,
            sessions,
            pairs,
            offload_only,
            &socket,
        )
        .as_bytes(),
    )?;
    let daemon = Daemon::spawn(
        host.name,
        host.namespace,
        Some(host.cpuset),
        host.program
            .to_str()
            .context("linecardd's path is not UTF-8")?,
        &["--config".into(), config.display().to_string()],
        &dir.join(format!("{}.log", host.name)),
    )?;
    Ok((daemon, socket))
}

/// A successor for the DUT's running linecardd (the `engine_handover` and
/// `engine_upgrade` faults): `program --config FILE --take-over`, where
/// `program` is the DUT's linecardd or the second build it is upgraded
/// to, with the running engine's own file in `dir` (so its socket and
/// handover folder), in the DUT's namespace and cpuset, its log appended
/// to the running one's.
pub fn take_over_dut(dut: &crate::scenario::DutSpec, dir: &Path, program: &Path) -> Result<Bfd> {
    let DutImplementation::Linecardd {
        backend: BackendKind::Xdp,
    } = dut.implementation
    else {
        bail!(
            "engine_handover needs a linecardd DUT on the xdp backend, and {} is not",
            dut.label
        );
    };
    let name = "linecardd";
    let daemon = Daemon::spawn(
        name,
        spec::DUT.namespace,
        Some(&spec::cpuset_dir(spec::DUT_CPUSET)),
        program.to_str().context("linecardd's path is not UTF-8")?,
        &[
            "--config".into(),
            dir.join(format!("{name}.toml")).display().to_string(),
            "--take-over".into(),
        ],
        &dir.join(format!("{name}.log")),
    )?;
    Ok(Bfd {
        daemon,
        kind: Kind::Linecardd {
            socket: dir.join(format!("{name}.sock")),
            offloads: offloads(BackendKind::Xdp, &dut.engine),
            offload_only: dut.offload_only,
        },
        at: Place::Lab(spec::DUT.namespace),
        control_plane: None,
        _echo: None,
    })
}

/// Whether a linecardd on `backend` with these `[engine]` settings hands
/// steady sessions to its fast path.
pub fn offloads(backend: BackendKind, engine: &EngineSettings) -> bool {
    backend == BackendKind::Xdp && engine.xdp_replies_on()
}

/// Waits (bounded) until bfdd lists a connected dataplane.
pub fn wait_dataplane_attached(vty: &Path) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = procs::vtysh(spec::DUT.namespace, vty, &["show bfd distributed"])?;
        if String::from_utf8_lossy(&out.stdout).contains("File descriptor") {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "bfdd lists no dataplane 10 s after linecardd started: {}",
                String::from_utf8_lossy(&out.stdout).trim()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Adds peers through vtysh, which sends one command at a time: bfdd's
/// event loop drains its 8 KB output buffer between them, so none is lost
/// (the registration burst would stop at 58).
fn add_frr_peers(vty: &Path, peers: &[PeerSession]) -> Result<()> {
    for chunk in peers.chunks(32) {
        let mut commands: Vec<String> = vec!["configure terminal".into(), "bfd".into()];
        for p in chunk {
            commands.push(format!("peer {} local-address {}", p.peer, p.local));
            commands.push(format!("detect-multiplier {}", p.multiplier));
            commands.push(format!("receive-interval {}", p.rx_ms));
            commands.push(format!("transmit-interval {}", p.tx_ms));
            commands.push("exit".into());
        }
        let commands: Vec<&str> = commands.iter().map(String::as_str).collect();
        let out = procs::vtysh(spec::DUT.namespace, vty, &commands)?;
        if !out.status.success() {
            bail!(
                "adding peers to bfdd through vtysh: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
    }
    Ok(())
}

/// What `show bfd peers json` says of `expected` sessions.
fn frr_sessions_up(at: &Place, vty: &Path, expected: usize) -> Result<(), String> {
    let out = at
        .vtysh(vty, &["show bfd peers json"])
        .map_err(|e| format!("vtysh: {e}"))?;
    let peers: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let list = peers.as_array().cloned().unwrap_or_default();
    let up = list.iter().filter(|p| p["status"] == "up").count();
    if list.len() == expected && up == expected {
        Ok(())
    } else {
        Err(format!(
            "FRR bfdd lists {} sessions, {up} up, of {expected}",
            list.len()
        ))
    }
}
