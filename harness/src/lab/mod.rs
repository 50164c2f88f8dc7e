//! The local lab: network namespaces on one machine, a bridge in an observer
//! namespace, cpusets for the DUT and for everything else (`linecard lab`).
//!
//! `up` is idempotent: a healthy lab is left alone, a half-created one (a
//! crash mid-`up`) is removed and rebuilt. `down` removes every namespace
//! and cpuset whose name carries [`spec::PREFIX`] (the project's names,
//! also after a crash: a crashed test's stand-ins included), the processes
//! in them (each by PID only while that PID still names the process
//! listed), and in the root namespace only the links the lab itself names.
//! Both hold the lab's lock (`lock.rs`): no other run's lab is torn down
//! under it.

pub mod check;
pub mod loss;
pub mod spec;
pub mod status;

use crate::sys::{self, IP};
use anyhow::{bail, Context, Result};
use spec::{Host, BPF_PIN_DIR, BRIDGE, HOSTS, HOST_IFACE, OBSERVER_NS};
pub use status::LabStatus;
use std::path::Path;
use std::time::{Duration, Instant};

/// How the lab is laid out on this machine's CPUs.
#[derive(Clone, Debug)]
pub struct LabOptions {
    /// The DUT's CPUs; everything else gets the remaining ones.
    pub dut_cpus: Vec<usize>,
}

impl LabOptions {
    /// Default: the last CPU for the DUT, the rest for everything else.
    pub fn detect() -> Result<Self> {
        let online = online_cpus()?;
        if online.len() < 2 {
            bail!("the lab needs at least 2 online CPUs (one for the DUT, one for the rest); this machine has {}", online.len());
        }
        Ok(Self {
            dut_cpus: vec![*online.last().expect("checked: at least two CPUs")],
        })
    }

    pub fn rest_cpus(&self) -> Result<Vec<usize>> {
        Ok(online_cpus()?
            .into_iter()
            .filter(|c| !self.dut_cpus.contains(c))
            .collect())
    }

    fn validate(&self) -> Result<()> {
        let online = online_cpus()?;
        if self.dut_cpus.is_empty() {
            bail!("--dut-cpus is empty");
        }
        if let Some(cpu) = self.dut_cpus.iter().find(|c| !online.contains(c)) {
            bail!(
                "--dut-cpus names CPU {cpu}, which is not online (online: {})",
                spec::format_cpu_list(&online)
            );
        }
        if self.rest_cpus()?.is_empty() {
            bail!(
                "--dut-cpus takes every CPU; leave at least one for the peer, observer and harness"
            );
        }
        Ok(())
    }
}

pub fn online_cpus() -> Result<Vec<usize>> {
    let list = std::fs::read_to_string("/sys/devices/system/cpu/online")
        .context("reading the online CPU list")?;
    spec::parse_cpu_list(&list).context("parsing /sys/devices/system/cpu/online")
}

/// Checks what every lab command needs, with the fix in each message.
pub fn preflight() -> Result<()> {
    sys::require_root("the lab")?;
    sys::require_tool(IP)?;
    sys::require_tool(sys::PING)?;
    let cpuset = Path::new(spec::CPUSET_ROOT);
    if !cpuset.join("cpuset.cpus").exists() {
        bail!(
            "the cgroup v1 cpuset controller is not mounted at {}; mount it with \
             `mkdir -p {0} && mount -t cgroup -o cpuset cpuset {0}`",
            spec::CPUSET_ROOT
        );
    }
    Ok(())
}

/// Brings the lab up; see the module documentation for idempotence.
pub fn up(options: &LabOptions) -> Result<LabStatus> {
    preflight()?;
    options.validate()?;
    let before = status::read()?;
    if before.up && before.dut_cpus() == options.dut_cpus {
        eprintln!("lab already up");
        return Ok(before);
    }
    if before.anything_present() {
        eprintln!(
            "found a partial or differently shaped lab; removing it first: {}",
            before.problems.join("; ")
        );
        down()?;
    }
    build(options).inspect_err(|_| {
        eprintln!("lab bring-up failed; run `linecard lab down` to remove what was created");
    })?;
    keep_off_dut_cpus();
    wait_reachable()?;
    let after = status::read()?;
    if !after.up {
        bail!("the lab came up incomplete: {}", after.problems.join("; "));
    }
    Ok(after)
}

fn ip(args: &[&str]) -> Result<()> {
    sys::run("ip", args).map(drop)
}

/// Runs a shell snippet inside a namespace (`ip netns exec` remounts /sys so
/// that sysfs shows the namespace's own interfaces).
pub(crate) fn netns_sh(ns: &str, script: &str) -> Result<String> {
    sys::run("ip", ["netns", "exec", ns, "sh", "-c", script])
}

fn build(options: &LabOptions) -> Result<()> {
    for ns in std::iter::once(OBSERVER_NS).chain(HOSTS.iter().map(|h| h.namespace)) {
        ip(&["netns", "add", ns])?;
        ip(&["-n", ns, "link", "set", "lo", "up"])?;
    }
    // The observer only forwards and captures: no addresses, and no IPv6
    // router solicitations or MLD reports of its own in the captures.
    netns_sh(
        OBSERVER_NS,
        "sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1",
    )?;
    ip(&[
        "-n",
        OBSERVER_NS,
        "link",
        "add",
        BRIDGE,
        "type",
        "bridge",
        "stp_state",
        "0",
        "mcast_snooping",
        "0",
    ])?;
    ip(&["-n", OBSERVER_NS, "link", "set", BRIDGE, "up"])?;
    for host in HOSTS {
        add_host(&host)?;
    }
    make_cpusets(options)?;
    steer_receive_path(&options.dut_cpus, &options.rest_cpus()?)?;
    attach_pass_programs()?;
    mount_engine_bpffs()?;
    Ok(())
}

/// The engines' BPF filesystem (`spec::ENGINE_BPFFS`).
fn mount_engine_bpffs() -> Result<()> {
    if bpffs_at(spec::ENGINE_BPFFS) {
        return Ok(());
    }
    std::fs::create_dir_all(spec::ENGINE_BPFFS)?;
    sys::run("mount", ["-t", "bpf", "lc-bpffs", spec::ENGINE_BPFFS])
        .with_context(|| format!("mounting a BPF filesystem at {}", spec::ENGINE_BPFFS))?;
    Ok(())
}

/// Empties and unmounts the engines' BPF filesystem: what is pinned there
/// is a handover no engine took (the lab's, under its own mount).
fn release_engine_bpffs() -> Result<bool> {
    let root = Path::new(spec::ENGINE_BPFFS);
    if !root.exists() {
        return Ok(false);
    }
    if bpffs_at(spec::ENGINE_BPFFS) {
        // Engines pin in folders; the files beside them are the kernel's
        // own iterators (maps.debug, progs.debug), gone with the mount.
        for entry in std::fs::read_dir(root)?.flatten() {
            let path = entry.path();
            if path.is_dir() {
                std::fs::remove_dir_all(&path)
                    .with_context(|| format!("removing {}", path.display()))?;
            }
        }
        sys::run("umount", [spec::ENGINE_BPFFS])
            .with_context(|| format!("unmounting {}", spec::ENGINE_BPFFS))?;
    }
    std::fs::remove_dir(root).with_context(|| format!("removing {}", root.display()))?;
    Ok(true)
}

fn add_host(host: &Host) -> Result<()> {
    let port_mac = spec::bridge_port_mac(host);
    // Both ends are created directly in their namespaces: nothing ever
    // appears in the root namespace, so a crash cannot leave a veth there.
    ip(&[
        "link",
        "add",
        "name",
        HOST_IFACE,
        "address",
        host.mac,
        "netns",
        host.namespace,
        "type",
        "veth",
        "peer",
        "name",
        host.bridge_port,
        "address",
        &port_mac,
        "netns",
        OBSERVER_NS,
    ])?;
    ip(&[
        "-n",
        OBSERVER_NS,
        "link",
        "set",
        host.bridge_port,
        "master",
        BRIDGE,
        "up",
    ])?;
    let ns = host.namespace;
    netns_sh(
        ns,
        "sysctl -qw net.ipv6.conf.all.accept_ra=0 net.ipv6.conf.default.accept_ra=0",
    )?;
    ip(&[
        "-n",
        ns,
        "addr",
        "add",
        &format!("{}/{}", host.ipv4, spec::IPV4_PREFIX_LEN),
        "dev",
        HOST_IFACE,
    ])?;
    // nodad: the address is usable at once, so readiness needs no sleep.
    ip(&[
        "-n",
        ns,
        "addr",
        "add",
        &format!("{}/{}", host.ipv6, spec::IPV6_PREFIX_LEN),
        "dev",
        HOST_IFACE,
        "nodad",
    ])?;
    ip(&["-n", ns, "link", "set", HOST_IFACE, "up"])?;
    Ok(())
}

fn make_cpusets(options: &LabOptions) -> Result<()> {
    let mems = std::fs::read_to_string(Path::new(spec::CPUSET_ROOT).join("cpuset.mems"))?;
    for (name, cpus) in [
        (spec::DUT_CPUSET, options.dut_cpus.clone()),
        (spec::REST_CPUSET, options.rest_cpus()?),
    ] {
        let dir = spec::cpuset_dir(name);
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("creating cpuset {}", dir.display()))?;
        // mems before cpus: a cpuset without mems accepts no tasks.
        std::fs::write(dir.join("cpuset.mems"), mems.trim())?;
        std::fs::write(dir.join("cpuset.cpus"), spec::format_cpu_list(&cpus))
            .with_context(|| format!("writing {}/cpuset.cpus", dir.display()))?;
    }
    partition_cpusets()
}

/// Makes the DUT's CPUs a scheduling partition of their own, as on a box
/// whose data-plane CPUs are set apart: the kernel admits a SCHED_DEADLINE
/// task only if its CPUs cover its whole root domain, and linecardd's
/// responder is one (RT throttling cannot hold it). With load balancing off
/// in the root cpuset, each lab cpuset is a root domain. The price: a task
/// of the root cpuset no longer migrates between the partitions (it stays
/// where it was), which is why the harness keeps itself off the DUT's CPUs
/// ([`keep_off_dut_cpus`]). `lab down` restores the switch.
fn partition_cpusets() -> Result<()> {
    let original = std::fs::read_to_string(spec::ROOT_LOAD_BALANCE)
        .with_context(|| format!("reading {}", spec::ROOT_LOAD_BALANCE))?;
    // A value saved by a lab that was never taken down is the true original.
    if !Path::new(spec::ROOT_LOAD_BALANCE_SAVED).exists() {
        std::fs::write(spec::ROOT_LOAD_BALANCE_SAVED, original.trim())
            .with_context(|| format!("writing {}", spec::ROOT_LOAD_BALANCE_SAVED))?;
    }
    std::fs::write(spec::ROOT_LOAD_BALANCE, "0")
        .with_context(|| format!("writing 0 to {}", spec::ROOT_LOAD_BALANCE))
}

/// Puts the root cpuset's load balancing back as it was before the lab.
fn restore_load_balance() -> Result<Option<String>> {
    let Ok(saved) = std::fs::read_to_string(spec::ROOT_LOAD_BALANCE_SAVED) else {
        return Ok(None);
    };
    let saved = saved.trim().to_string();
    std::fs::write(spec::ROOT_LOAD_BALANCE, &saved)
        .with_context(|| format!("restoring {} to {saved}", spec::ROOT_LOAD_BALANCE))?;
    std::fs::remove_file(spec::ROOT_LOAD_BALANCE_SAVED)?;
    Ok(Some(saved))
}

/// Keeps the calling thread, and every thread and process it starts from
/// now on, off the DUT's CPUs while the lab is up: with the partitions in
/// place a harness thread that happened to be on the DUT's CPU would stay
/// there, and an L4 hog would hold it for most of each second. Processes
/// that belong on the DUT join its cpuset, which sets their CPUs anew.
pub fn keep_off_dut_cpus() {
    let Ok(cpus) = std::fs::read_to_string(spec::cpuset_dir(spec::REST_CPUSET).join("cpuset.cpus"))
    else {
        return;
    };
    let Some(cpus) = spec::parse_cpu_list(&cpus) else {
        return;
    };
    if cpus.is_empty() {
        return;
    }
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes within
    // it; sched_setaffinity reads it; 0 is the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for cpu in cpus {
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// With plain veth the receiver's processing (XDP included) runs on the
/// sender's CPU. RPS on the bridge ports facing the DUT's neighbours moves
/// the DUT's receive path onto the DUT's CPUs in softirq, as a NIC interrupt
/// affined to the DUT would (the README's "The local lab", receive-path placement).
///
/// The other way, RPS on the port facing the DUT moves what the DUT sends
/// off the DUT's CPUs: once a packet leaves the DUT it is on the wire, and
/// its capture timestamp must not wait for the DUT's starved softirq (a
/// SCHED_FIFO sender otherwise showed 17 ms gaps under L4 that were the
/// observer's, not its own).
fn steer_receive_path(dut_cpus: &[usize], rest_cpus: &[usize]) -> Result<()> {
    set_rps(&spec::PEER, dut_cpus)?;
    set_rps(&spec::SPARE, dut_cpus)?;
    set_rps(&spec::DUT, rest_cpus)
}

/// Writes the RPS mask of a host's bridge port (empty `cpus`: steering off).
pub fn set_rps(host: &Host, cpus: &[usize]) -> Result<()> {
    let mask = if cpus.is_empty() {
        "0".to_string()
    } else {
        spec::cpu_mask(cpus)
    };
    netns_sh(
        OBSERVER_NS,
        &format!(
            "echo {mask} > /sys/class/net/{}/queues/rx-0/rps_cpus",
            host.bridge_port
        ),
    )
    .map(drop)
    .with_context(|| format!("setting RPS on {}", host.bridge_port))
}

/// XDP_TX on a veth is dropped silently unless the other end runs an XDP
/// program; the DUT may XDP_TX, so its bridge port gets an XDP_PASS program.
/// The link is pinned so it outlives this command.
fn attach_pass_programs() -> Result<()> {
    ensure_bpffs()?;
    std::fs::create_dir_all(BPF_PIN_DIR).with_context(|| format!("creating {BPF_PIN_DIR}"))?;
    let port = spec::DUT.bridge_port;
    let pin = Path::new(BPF_PIN_DIR).join(format!("pass-{port}"));
    sys::in_netns(OBSERVER_NS, || {
        let mut bpf = linecard_bpf_objects::load()?;
        let program: &mut aya::programs::Xdp = bpf
            .program_mut(linecard_common::names::PASS_PROGRAM)
            .context("the XDP object has no pass program")?
            .try_into()?;
        program.load()?;
        let link_id = program
            .attach(port, aya::programs::XdpMode::Driver)
            .with_context(|| format!("attaching XDP_PASS to {port} in native mode"))?;
        let link = aya::programs::links::FdLink::try_from(program.take_link(link_id)?)?;
        link.pin(&pin)
            .with_context(|| format!("pinning {}", pin.display()))?;
        Ok(())
    })
}

/// An XDP_PASS program on `host`'s bridge port for as long as this lives,
/// so that `host` too can answer with XDP_TX (two RX-clocked engines facing
/// each other). Not pinned: dropping it detaches it, and `down` removes the
/// port with its namespace in any case.
pub struct PassGuard {
    _bpf: aya::Ebpf,
}

pub fn pass_xdp_tx_from(host: &Host) -> Result<PassGuard> {
    let port = host.bridge_port;
    let bpf = sys::in_netns(OBSERVER_NS, || {
        let mut bpf = linecard_bpf_objects::load()?;
        let program: &mut aya::programs::Xdp = bpf
            .program_mut(linecard_common::names::PASS_PROGRAM)
            .context("the XDP object has no pass program")?
            .try_into()?;
        program.load()?;
        program
            .attach(port, aya::programs::XdpMode::Driver)
            .with_context(|| format!("attaching XDP_PASS to {port} in native mode"))?;
        Ok(bpf)
    })?;
    Ok(PassGuard { _bpf: bpf })
}

/// Left by `up` when it mounted the BPF filesystem itself, so that `down`
/// unmounts only what the lab mounted.
const BPFFS_MOUNTED_MARKER: &str = "/run/lc-bpffs-mounted";

/// Whether the BPF filesystem is mounted at /sys/fs/bpf.
pub fn bpffs_mounted() -> bool {
    bpffs_at("/sys/fs/bpf")
}

/// Whether `path` is on a BPF filesystem.
pub fn bpffs_at(path: &str) -> bool {
    const BPF_FS_MAGIC: i64 = 0xcafe_4a11;
    let Ok(path) = std::ffi::CString::new(path) else {
        return false;
    };
    // SAFETY: statfs writes into the zeroed struct we pass; path is valid.
    let mut stat: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above: a valid path and a zeroed struct to fill.
    let rc = unsafe { libc::statfs(path.as_ptr(), &mut stat) };
    rc == 0 && stat.f_type as i64 == BPF_FS_MAGIC
}

/// Mounts the BPF filesystem at /sys/fs/bpf when it is not mounted yet.
fn ensure_bpffs() -> Result<()> {
    if bpffs_mounted() {
        return Ok(());
    }
    std::fs::create_dir_all("/sys/fs/bpf")?;
    sys::run("mount", ["-t", "bpf", "bpf", "/sys/fs/bpf"]).context(
        "mounting the BPF filesystem at /sys/fs/bpf (needed to keep lab XDP programs attached)",
    )?;
    std::fs::write(BPFFS_MOUNTED_MARKER, "mounted by linecard lab up\n")
        .with_context(|| format!("writing {BPFFS_MOUNTED_MARKER}"))
}

/// Unmounts the BPF filesystem if the lab mounted it and nothing else
/// pinned anything there since.
fn release_bpffs() -> Result<bool> {
    if !Path::new(BPFFS_MOUNTED_MARKER).exists() {
        return Ok(false);
    }
    if bpffs_mounted() {
        // A fresh mount holds the kernel's preloaded iterators; anything
        // else was pinned by someone since, who keeps the mount.
        let in_use = std::fs::read_dir("/sys/fs/bpf")?.any(|e| {
            e.map_or(true, |e| {
                !matches!(e.file_name().to_str(), Some("maps.debug" | "progs.debug"))
            })
        });
        if in_use {
            return Ok(false);
        }
        sys::run("umount", ["/sys/fs/bpf"]).context("unmounting /sys/fs/bpf")?;
    }
    std::fs::remove_file(BPFFS_MOUNTED_MARKER)?;
    Ok(true)
}

/// Readiness: the DUT reaches the peer over IPv4 and IPv6 (bounded retries,
/// no fixed sleep).
fn wait_reachable() -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(5);
    for target in [spec::PEER.ipv4, spec::PEER.ipv6] {
        loop {
            let out = sys::try_output(
                "ip",
                [
                    "netns",
                    "exec",
                    spec::DUT.namespace,
                    "ping",
                    "-c",
                    "1",
                    "-W",
                    "1",
                    target,
                ],
            )?;
            if out.status.success() {
                break;
            }
            if Instant::now() > deadline {
                bail!(
                    "the lab is built but {} cannot reach {target}",
                    spec::DUT.namespace
                );
            }
        }
    }
    Ok(())
}

/// What `down` removed.
#[derive(Debug, Default, serde::Serialize)]
pub struct Removed {
    pub processes: Vec<u32>,
    pub namespaces: Vec<String>,
    pub cpusets: Vec<String>,
    pub bpf_pins: bool,
    /// The BPF filesystem, mounted by the lab and left empty, unmounted.
    pub bpffs_unmounted: bool,
    /// The engines' BPF filesystem, emptied and unmounted.
    pub engine_bpffs_unmounted: bool,
    /// sched_rt_runtime_us restored from a run that did not finish.
    pub restored_rt_runtime_us: Option<i64>,
    /// The root cpuset's load balancing, as it was before the lab.
    pub restored_load_balance: Option<String>,
    /// Softirq threads a run that did not finish left raised, put back.
    pub restored_softirq_threads: Vec<crate::softirq_threads::SoftirqThread>,
}

/// Removes everything carrying the prefix, also after a crash.
pub fn down() -> Result<Removed> {
    preflight()?;
    let mut removed = Removed::default();
    let namespaces = status::lab_namespaces()?;
    let cpusets = status::lab_cpusets()?;

    // Processes first: a namespace with processes in it outlives `ip netns
    // delete`, and a cpuset with tasks cannot be removed.
    let mut pids: Vec<u32> = Vec::new();
    for ns in &namespaces {
        let out = sys::try_output("ip", ["netns", "pids", ns])?;
        pids.extend(
            String::from_utf8_lossy(&out.stdout)
                .split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok()),
        );
    }
    for name in &cpusets {
        pids.extend(status::cpuset_tasks(name));
    }
    let own = std::process::id();
    pids.retain(|&p| p != own);
    pids.sort_unstable();
    pids.dedup();
    terminate(&pids);
    removed.processes = pids;

    if Path::new(BPF_PIN_DIR).exists() {
        std::fs::remove_dir_all(BPF_PIN_DIR).with_context(|| format!("removing {BPF_PIN_DIR}"))?;
        removed.bpf_pins = true;
    }
    removed.bpffs_unmounted = release_bpffs()?;
    removed.engine_bpffs_unmounted = release_engine_bpffs()?;
    for ns in namespaces {
        ip(&["netns", "delete", &ns])?;
        removed.namespaces.push(ns);
    }
    for name in cpusets {
        let dir = spec::cpuset_dir(&name);
        // Anything still inside (a task that ignored SIGKILL while exiting)
        // moves to the root cpuset so the directory can go.
        for pid in status::cpuset_tasks(&name) {
            let _ = std::fs::write(Path::new(spec::CPUSET_ROOT).join("tasks"), pid.to_string());
        }
        std::fs::remove_dir(&dir).with_context(|| format!("removing cpuset {}", dir.display()))?;
        removed.cpusets.push(name);
    }
    removed.restored_rt_runtime_us = crate::rt_throttle::restore_if_saved()?;
    removed.restored_load_balance = restore_load_balance()?;
    removed.restored_softirq_threads = crate::softirq_threads::restore_if_saved()?;
    // Links a crashed bring-up may have left in the root namespace: only
    // the lab's own names (a bridge port before its move into the
    // observer), never anything else that merely starts with the prefix.
    let ours: Vec<&str> = spec::HOSTS
        .iter()
        .map(|h| h.bridge_port)
        .chain([BRIDGE])
        .collect();
    let links = sys::run("ip", ["-o", "link", "show"])?;
    for name in links
        .lines()
        .filter_map(|l| l.split(": ").nth(1))
        .map(|n| n.split('@').next().unwrap_or(n))
    {
        if ours.contains(&name) {
            ip(&["link", "delete", name])?;
        }
    }
    Ok(removed)
}

/// When process `pid` started (`/proc/PID/stat` field 22, clock ticks
/// since boot): with its PID, its identity, which a reused PID does not
/// share.
fn started_at(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces: count after its ')'.
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

/// SIGTERM, then SIGKILL whatever is still alive after 2 s, each only
/// while its PID still names the process that was listed (a PID reused
/// meanwhile is someone else's).
fn terminate(pids: &[u32]) {
    let listed: Vec<(u32, Option<u64>)> = pids.iter().map(|&p| (p, started_at(p))).collect();
    let alive = |pid: u32| {
        listed
            .iter()
            .any(|&(p, at)| p == pid && at.is_some() && started_at(pid) == at)
    };
    let pids: Vec<u32> = listed
        .iter()
        .filter(|(_, at)| at.is_some())
        .map(|(p, _)| *p)
        .collect();
    let pids = pids.as_slice();
    for &pid in pids {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    while pids.iter().any(|&p| alive(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    for &pid in pids.iter().filter(|&&p| alive(p)) {
        // SAFETY: as above.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_is_known_by_its_start_not_its_pid_alone() {
        let me = std::process::id();
        let at = started_at(me);
        assert!(at.is_some());
        assert_eq!(started_at(me), at, "the same process, the same start");
        assert_eq!(started_at(u32::MAX), None, "no such process");
    }
}
