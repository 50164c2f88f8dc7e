//! Runs the plan of `proxmox.rs` on the Proxmox VE host over SSH, then the
//! scenario on the guests through the three-host path, then removes what
//! the run made, whatever happened in between (an error, Ctrl-C).
//!
//! Everything the run makes on the host is written to the run directory's
//! [`RECORD`] with how to reach the host: as pending before its command
//! runs, as made once it succeeded, so that `linecard teardown RUN_DIR`
//! finds it after a crash of this process too. Nothing, pending or made,
//! is stopped or removed until the host shows the run's mark on it
//! (`ownership`): a clone that failed because someone else took the VM ID
//! in the meantime leaves that VM alone. Each thing leaves the record once
//! it is removed, or once it is found gone or someone else's. Every
//! command sent to the host is logged with its outcome in
//! `proxmox-steps.log`.

use super::{bring_up, ownership, removal, Check, Effect, Owner, ProxmoxSpec, Step, LAB_NIC};
use crate::manifest::status::RunStatus;
use crate::manifest::HostFacts;
use crate::remote::Connection;
use crate::run::hosts::ThreeHosts;
use crate::run::provider::{Provider, Ready};
use crate::run::{RunOptions, INTERRUPTED};
use crate::scenario::value::quote;
use crate::scenario::{HostSpec, SshSpec};
use crate::scenario::{ProviderKind, Scenario};
use crate::sys::unix_ns;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The run directory's record of what the run made on the host.
pub const RECORD: &str = "proxmox-made.json";
const STEP_LOG: &str = "proxmox-steps.log";

/// One thing the run made on the host.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Made {
    Vm(u32),
    Bridge(String),
}

/// [`RECORD`]: how to reach the host, whose marks the run's things carry,
/// and what of the run's may be there.
#[derive(Serialize, Deserialize)]
struct Record {
    host: String,
    port: Option<u16>,
    identity: Option<PathBuf>,
    options: Vec<String>,
    /// Absent in a record written before things carried a mark: such a
    /// record proves nothing is the run's, and teardown refuses it.
    #[serde(default)]
    owner: Option<Owner>,
    /// Made: its creation succeeded.
    made: Vec<Made>,
    /// Its creation was under way (or failed): the host decides by the
    /// mark whether it is the run's.
    #[serde(default)]
    pending: Vec<Made>,
}

/// What `linecard teardown` did with a record.
#[derive(Debug, Default)]
pub struct Teardown {
    /// Removed: the host showed the run's mark on each.
    pub removed: Vec<Made>,
    /// Left where it was, and why (someone else's, or no mark to prove it
    /// the run's).
    pub left: Vec<(Made, String)>,
}

impl Record {
    fn connection(&self) -> Connection {
        Connection {
            target: self.host.clone(),
            port: self.port,
            identity: self.identity.clone(),
            options: self.options.clone(),
            multiplex: false,
        }
    }

    fn write(&self, dir: &Path) -> Result<()> {
        crate::sys::write_json_atomically(&dir.join(RECORD), self)
    }

    fn read(dir: &Path) -> Result<Self> {
        let path = dir.join(RECORD);
        let text = std::fs::read_to_string(&path).with_context(|| {
            format!(
                "reading {} (is this a proxmox run's directory?)",
                path.display()
            )
        })?;
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
    }
}

/// Each command sent to the host and how it ended.
struct StepLog(std::fs::File);

impl StepLog {
    fn open(dir: &Path) -> Result<Self> {
        let path = dir.join(STEP_LOG);
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        Ok(Self(file))
    }

    fn note(&mut self, command: &str, outcome: &str, started: Instant) {
        // The log is for people; a failed write must not fail the run.
        let _ = writeln!(
            self.0,
            "{:>7.2} s  {command}\n           -> {outcome}",
            started.elapsed().as_secs_f64()
        );
    }
}

/// What the bring-up found: the host's `pveversion` and the guests.
struct Found {
    version: String,
    guests: Vec<Guest>,
}

/// A guest as its configuration and its agent describe it.
#[derive(Clone, Debug, Default)]
pub(super) struct Guest {
    net0_mac: Option<String>,
    management: Option<IpAddr>,
    lab_nic: Option<String>,
}

fn host_connection(p: &ProxmoxSpec) -> Connection {
    Connection {
        target: p.host.clone(),
        port: p.port,
        identity: p.identity.clone(),
        options: p.options.clone(),
        multiplex: true,
    }
}

/// The `proxmox` provider: three VMs cloned on the Proxmox VE host `p`
/// names, then run as three hosts. The run directory is made first: it
/// records what is made on the host before it is made.
pub struct Proxmox<'a> {
    scenario: &'a Scenario,
    p: &'a ProxmoxSpec,
    options: &'a RunOptions,
    conn: Connection,
    /// The run's directory, the record of what is made and the step log,
    /// from the start of `prepare`.
    made: Option<(PathBuf, Record, StepLog)>,
    hosts: Option<ThreeHosts<'a>>,
}

impl<'a> Proxmox<'a> {
    pub fn new(scenario: &'a Scenario, p: &'a ProxmoxSpec, options: &'a RunOptions) -> Self {
        Self {
            scenario,
            p,
            options,
            conn: host_connection(p),
            made: None,
            hosts: None,
        }
    }
}

impl Provider for Proxmox<'_> {
    fn prepare(&mut self) -> Result<Ready<'_>> {
        let (p, scenario) = (self.p, self.scenario);
        let (run_id, dir) =
            crate::run::new_run_dir(&self.options.results, &scenario.name, unix_ns())?;
        let owner = Owner::draw(&run_id).context("drawing the run's token")?;
        let record = Record {
            host: p.host.clone(),
            port: p.port,
            identity: p.identity.clone(),
            options: p.options.clone(),
            owner: Some(owner.clone()),
            made: Vec::new(),
            pending: Vec::new(),
        };
        record.write(&dir)?;
        let log = StepLog::open(&dir)?;
        eprintln!(
            "proxmox: three VMs from template {} on {} (each command logged in {})",
            p.template_vmid,
            p.host,
            dir.join(STEP_LOG).display()
        );
        let (dir, record, log) = self.made.insert((dir, record, log));
        let found = execute(&bring_up(p, &owner), p, &self.conn, dir, record, log);
        let spec = found.and_then(|found| Ok((three_hosts(p, &found.guests)?, found.version)));
        let (spec, version) = match spec {
            Ok(spec) => spec,
            Err(e) => return Err(bring_up_failed(dir, e)),
        };
        let options = RunOptions {
            run_id: Some(run_id),
            ..self.options.clone()
        };
        let describe = Box::new(move |facts| described(facts, p, &owner, &version));
        let hosts = self
            .hosts
            .insert(ThreeHosts::new(scenario, spec, options, describe));
        hosts.prepare().map_err(|e| bring_up_failed(dir, e))
    }

    /// The three hosts cleaned, then what the run made on the hypervisor
    /// removed, each thing only once the host shows the run's mark on it.
    fn teardown(&mut self) -> Result<()> {
        let cleaned = self.hosts.as_mut().map_or(Ok(()), |hosts| hosts.teardown());
        let Some((dir, record, log)) = &mut self.made else {
            return cleaned;
        };
        eprintln!("proxmox: removing what the run made on {}", self.p.host);
        let removed = remove(&self.conn, dir, record, log);
        if let Ok(t) = &removed {
            for (made, why) in &t.left {
                eprintln!("proxmox: left {made:?} on {}: {why}", self.p.host);
            }
        }
        cleaned?;
        removed
            .map(|_| ())
            .context("removing the run's VMs and bridge")
    }
}

/// A bring-up that failed leaves no manifest: the run's status says why.
fn bring_up_failed(dir: &Path, e: anyhow::Error) -> anyhow::Error {
    if !dir.join("manifest.json").exists() {
        let status = RunStatus::Failed(format!("proxmox bring-up: {e:#}"));
        let _ = std::fs::write(dir.join("status"), format!("{status}\n"));
    }
    e
}

/// `linecard teardown RUN_DIR`: removes what a proxmox run recorded and
/// did not remove (its process was killed), each thing only once the host
/// shows the run's mark on it.
pub fn teardown_recorded(dir: &Path) -> Result<Teardown> {
    let mut record = Record::read(dir)?;
    let mut log = StepLog::open(dir)?;
    remove(&record.connection(), dir, &mut record, &mut log)
}

/// Whose a recorded thing turned out to be.
pub(super) enum Whose {
    /// The host shows the run's mark on it.
    Ours,
    /// It is not there.
    Gone,
    /// It is there without the run's mark: someone else's.
    Theirs(String),
}

/// Removes what `record` holds that the host shows to be the run's, last
/// made first (a pending creation before everything made); each thing
/// leaves the record once it is gone or found to be someone else's.
/// Every step is tried; the first failure is returned.
fn remove(
    conn: &Connection,
    dir: &Path,
    record: &mut Record,
    log: &mut StepLog,
) -> Result<Teardown> {
    let Some(owner) = record.owner.clone() else {
        bail!(
            "{} names no owner mark (written by a linecard before runs marked what they make): \
             nothing removed; check its VMs ({:?}) and bridge by hand",
            RECORD,
            record.made
        );
    };
    let mut done = Teardown::default();
    let mut first: Result<()> = Ok(());
    let recorded: Vec<Made> = record.made.iter().chain(&record.pending).cloned().collect();
    for made in recorded.into_iter().rev() {
        let whose = match whose(conn, &made, &owner, log) {
            Ok(whose) => whose,
            Err(e) => {
                // Unknown (the host did not answer): kept for a later
                // teardown, never removed blind.
                if first.is_ok() {
                    first = Err(e);
                }
                continue;
            }
        };
        let gone = match whose {
            Whose::Gone => true,
            Whose::Theirs(why) => {
                done.left.push((made.clone(), why));
                true
            }
            Whose::Ours => {
                let mut removed = true;
                for s in removal(&made) {
                    let started = Instant::now();
                    let outcome = conn.exec(&s.command, None);
                    log.note(&s.command, &outcome_text(&outcome), started);
                    // A VM that is already stopped may refuse `qm stop`.
                    if let Err(e) = outcome.map(drop) {
                        if !s.command.starts_with("qm stop") && !already_gone(&e) {
                            removed = false;
                            if first.is_ok() {
                                first =
                                    Err(e.context(format!("on {}: {}", conn.target, s.command)));
                            }
                        }
                    }
                }
                if removed {
                    done.removed.push(made.clone());
                }
                removed
            }
        };
        if gone {
            record.made.retain(|m| *m != made);
            record.pending.retain(|m| *m != made);
            record.write(dir)?;
        }
    }
    first.map(|()| done)
}

/// Reads back whose `made` is ([`ownership`]).
fn whose(conn: &Connection, made: &Made, owner: &Owner, log: &mut StepLog) -> Result<Whose> {
    let s = ownership(made);
    let started = Instant::now();
    let out = conn.output(&s.command)?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    let whose = if out.status.code() == Some(255) && stderr.starts_with("ssh:") {
        log.note(&s.command, &format!("failed: {stderr}"), started);
        bail!("ssh could not reach or log in to {}: {stderr}", conn.target);
    } else if !out.status.success() {
        if !already_gone(&anyhow::anyhow!("{stderr}")) {
            log.note(&s.command, &format!("failed: {stderr}"), started);
            bail!("on {}: `{}`: {stderr}", conn.target, s.command);
        }
        Whose::Gone
    } else {
        carries_mark(made, &stdout, owner)
    };
    let said = match &whose {
        Whose::Ours => "ours".to_string(),
        Whose::Gone => "gone".to_string(),
        Whose::Theirs(why) => format!("not this run's, left alone: {why}"),
    };
    log.note(&s.command, &said, started);
    Ok(whose)
}

/// Whether `qm config` (a VM) or `ip -d -o link show` (the bridge) shows
/// `owner`'s mark.
pub(super) fn carries_mark(made: &Made, output: &str, owner: &Owner) -> Whose {
    let mark = owner.mark();
    match made {
        Made::Vm(id) => {
            let description = output
                .lines()
                .find_map(|l| l.strip_prefix("description:"))
                .map(str::trim);
            if description == Some(mark.as_str()) {
                Whose::Ours
            } else {
                let name = output
                    .lines()
                    .find_map(|l| l.strip_prefix("name:"))
                    .map_or("", str::trim);
                Whose::Theirs(format!(
                    "VM {id} is named {name:?} and its description is {:?}, not this run's mark {mark}",
                    description.unwrap_or("(none)")
                ))
            }
        }
        Made::Bridge(name) => {
            let words: Vec<&str> = output.split_whitespace().collect();
            let alias = words.windows(2).find(|w| w[0] == "alias").map(|w| w[1]);
            if alias == Some(mark.as_str()) {
                Whose::Ours
            } else {
                Whose::Theirs(format!(
                    "bridge {name} has alias {:?}, not this run's mark {mark}",
                    alias.unwrap_or("(none)")
                ))
            }
        }
    }
}

/// Whether a removal failed only because there was nothing to remove:
/// `qm` names the missing configuration file, `ip` the missing device.
fn already_gone(e: &anyhow::Error) -> bool {
    let said = format!("{e:#}");
    said.contains("does not exist") || said.contains("Cannot find device")
}

fn outcome_text(outcome: &Result<Vec<u8>>) -> String {
    match outcome {
        Ok(_) => "ok".into(),
        Err(e) => format!("failed: {e:#}"),
    }
}

/// Runs `steps` in order on the host; stops at the first failure, or at
/// Ctrl-C between steps. Returns the guests as found.
fn execute(
    steps: &[Step],
    p: &ProxmoxSpec,
    conn: &Connection,
    dir: &Path,
    record: &mut Record,
    log: &mut StepLog,
) -> Result<Found> {
    let mut found = Found {
        version: String::new(),
        guests: vec![Guest::default(); 3],
    };
    for s in steps {
        if INTERRUPTED.load(Ordering::Relaxed) {
            bail!("interrupted before `{}`", s.command);
        }
        let command = match s.effect {
            Effect::GuestExec(i) => {
                let nic = found.guests[i]
                    .lab_nic
                    .as_deref()
                    .context("the lab NIC was not found")?;
                s.command.replace(LAB_NIC, &quote(nic))
            }
            _ => s.command.clone(),
        };
        let started = Instant::now();
        let outcome = step(&command, &s.effect, p, conn, dir, record, &mut found);
        log.note(
            &command,
            &match &outcome {
                Ok(()) => "ok".to_string(),
                Err(e) => format!("failed: {e:#}"),
            },
            started,
        );
        outcome.with_context(|| format!("on {}: `{command}` ({})", p.host, s.why))?;
    }
    Ok(found)
}

fn step(
    command: &str,
    effect: &Effect,
    p: &ProxmoxSpec,
    conn: &Connection,
    dir: &Path,
    record: &mut Record,
    found: &mut Found,
) -> Result<()> {
    let text = |bytes: Vec<u8>| String::from_utf8_lossy(&bytes).into_owned();
    match effect {
        Effect::Run => conn.exec(command, None).map(drop),
        Effect::Check(check) => {
            let said = text(conn.exec(command, None)?);
            if *check == Check::ProxmoxVe {
                found.version = said.lines().next().unwrap_or("").trim().to_string();
            }
            verify(check, &said)
        }
        Effect::Absent => {
            let out = conn.output(command)?;
            match out.status.code() {
                Some(255) => bail!(
                    "ssh could not reach or log in to {}: {}",
                    conn.target,
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
                Some(0) => bail!("it exists already"),
                _ => Ok(()),
            }
        }
        Effect::Creates(made) => {
            record.pending.push(made.clone());
            record.write(dir)?;
            conn.exec(command, None)?;
            record.pending.retain(|m| m != made);
            record.made.push(made.clone());
            record.write(dir)
        }
        Effect::Owned(_) => bail!("ownership is read by removal, never planned as bring-up"),
        Effect::Poll => poll(command, p.agent_timeout_s, conn),
        Effect::ReadConfig(i) => {
            found.guests[*i].net0_mac = Some(net0_mac(&text(conn.exec(command, None)?))?);
            Ok(())
        }
        Effect::ReadInterfaces(i) => {
            let lab_mac = p.vms()[*i].2.mac;
            let guest = &mut found.guests[*i];
            let net0 = guest.net0_mac.clone().context("net0's MAC was not read")?;
            let (management, lab_nic) =
                interfaces(&text(conn.exec(command, None)?), &net0, lab_mac)?;
            guest.management = Some(management);
            guest.lab_nic = Some(lab_nic);
            Ok(())
        }
        Effect::GuestExec(_) => guest_exit(&text(conn.exec(command, None)?)),
    }
}

/// Repeats `command` each second until it succeeds, Ctrl-C, or
/// `timeout_s`.
fn poll(command: &str, timeout_s: u64, conn: &Connection) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(timeout_s);
    loop {
        let out = conn.output(command)?;
        if out.status.success() {
            return Ok(());
        }
        let said = String::from_utf8_lossy(&out.stderr).trim().to_string();
        // `qm guest cmd` exits 255 too while the agent is not up; only
        // ssh's own failure starts its message with "ssh:".
        if out.status.code() == Some(255) && said.starts_with("ssh:") {
            bail!("ssh could not reach or log in to {}: {said}", conn.target);
        }
        if INTERRUPTED.load(Ordering::Relaxed) {
            bail!("interrupted while waiting ({said})");
        }
        if Instant::now() >= deadline {
            bail!("no answer within {timeout_s} s (last: {said})");
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

fn verify(check: &Check, output: &str) -> Result<()> {
    match check {
        Check::ProxmoxVe => {
            if !output.starts_with("pve-manager/") {
                bail!("not a Proxmox VE host: pveversion said {:?}", output.trim());
            }
        }
        Check::Template => {
            if !output.lines().any(|l| l.trim() == "template: 1") {
                bail!("the VM is not a template (qm config has no `template: 1`)");
            }
        }
        Check::VmidsFree(ids) => {
            let rows: Vec<serde_json::Value> =
                serde_json::from_str(output).context("pvesh's JSON")?;
            let taken: Vec<u32> = ids
                .iter()
                .copied()
                .filter(|id| {
                    rows.iter()
                        .any(|r| r.get("vmid").and_then(|v| v.as_u64()) == Some(u64::from(*id)))
                })
                .collect();
            if !taken.is_empty() {
                bail!("VM ID(s) {taken:?} exist in the cluster: choose another first_vmid");
            }
        }
    }
    Ok(())
}

/// The MAC of `net0: virtio=BC:24:11:..,bridge=vmbr0` in `qm config`.
fn net0_mac(config: &str) -> Result<String> {
    let line = config
        .lines()
        .find_map(|l| l.strip_prefix("net0:"))
        .context("the VM has no net0 (its management NIC)")?;
    let first = line.trim().split(',').next().unwrap_or("");
    let (_model, mac) = first.split_once('=').context("net0 names no MAC")?;
    Ok(mac.to_ascii_lowercase())
}

/// The QEMU guest agent's `network-get-interfaces` (as `qm guest cmd`
/// prints it): one interface each.
#[derive(Deserialize)]
struct AgentInterface {
    name: String,
    #[serde(rename = "hardware-address", default)]
    hardware_address: String,
    #[serde(rename = "ip-addresses", default)]
    ip_addresses: Vec<AgentAddress>,
}

#[derive(Deserialize)]
struct AgentAddress {
    #[serde(rename = "ip-address")]
    ip_address: String,
}

/// The guest's management address (IPv4 preferred, never link-local) on
/// the NIC with `net0_mac`, and the name of the NIC with `lab_mac`.
fn interfaces(json: &str, net0_mac: &str, lab_mac: &str) -> Result<(IpAddr, String)> {
    let nics: Vec<AgentInterface> =
        serde_json::from_str(json).context("the guest agent's network-get-interfaces")?;
    let by_mac = |mac: &str| {
        nics.iter()
            .find(|n| n.hardware_address.eq_ignore_ascii_case(mac))
    };
    let management = by_mac(net0_mac)
        .with_context(|| format!("the guest has no interface with net0's MAC {net0_mac}"))?;
    let mut addresses: Vec<IpAddr> = management
        .ip_addresses
        .iter()
        .filter_map(|a| a.ip_address.parse().ok())
        .filter(|a: &IpAddr| match a {
            IpAddr::V4(v4) => !v4.is_link_local() && !v4.is_loopback(),
            IpAddr::V6(v6) => !v6.is_unicast_link_local() && !v6.is_loopback(),
        })
        .collect();
    addresses.sort_by_key(|a| a.is_ipv6());
    let address = *addresses.first().with_context(|| {
        format!(
            "{} (net0) has no address yet: is the management network's DHCP up?",
            management.name
        )
    })?;
    let lab = by_mac(lab_mac)
        .with_context(|| format!("the guest has no interface with the lab MAC {lab_mac} (net1)"))?;
    Ok((address, lab.name.clone()))
}

/// `qm guest exec` exits 0 whatever the guest command did: its JSON says.
fn guest_exit(json: &str) -> Result<()> {
    let v: serde_json::Value = serde_json::from_str(json).context("qm guest exec's JSON")?;
    match v.get("exitcode").and_then(|c| c.as_i64()) {
        Some(0) => Ok(()),
        Some(code) => bail!(
            "the guest command exited {code}: {}",
            v.get("err-data")
                .and_then(|e| e.as_str())
                .unwrap_or("")
                .trim()
        ),
        None => bail!(
            "the guest command did not finish (qm guest exec: {})",
            json.trim()
        ),
    }
}

/// `ssh ... -W %h:%p HOST` as a ProxyCommand: a guest reached through the
/// host, which sees the guests' management network.
fn through(host: &Connection) -> String {
    let mut line = String::from("ProxyCommand=ssh -o BatchMode=yes");
    // Through the host's shared connection, when it has one.
    for o in host.sharing() {
        line.push_str(&format!(" -o {}", quote(&o)));
    }
    for o in &host.options {
        line.push_str(&format!(" -o {}", quote(o)));
    }
    if let Some(key) = &host.identity {
        line.push_str(&format!(" -i {}", quote(&key.display().to_string())));
    }
    if let Some(port) = host.port {
        line.push_str(&format!(" -p {port}"));
    }
    line.push_str(&format!(" -W %h:%p {}", quote(&host.target)));
    line
}

/// The three-host table of the guests and the host: the DUT and the peer
/// in their VMs, the observer on the hypervisor at the DUT's tap.
pub(super) fn three_hosts(p: &ProxmoxSpec, guests: &[Guest]) -> Result<SshSpec> {
    let own_route = p
        .guest_options
        .iter()
        .any(|o| o.starts_with("ProxyCommand") || o.starts_with("ProxyJump"));
    let mut guest_options = Vec::new();
    if !own_route {
        guest_options.push(through(&host_connection(p)));
    }
    guest_options.extend(p.guest_options.iter().cloned());
    let guest = |i: usize, cpus: Vec<usize>| -> Result<HostSpec> {
        let g = &guests[i];
        let address = g
            .management
            .context("a guest's management address was not found")?;
        Ok(HostSpec {
            target: format!("{}@{address}", p.guest_user),
            port: None,
            options: guest_options.clone(),
            interface: g
                .lab_nic
                .clone()
                .context("a guest's lab NIC was not found")?,
            address: Some(p.vms()[i].2.ipv4.parse()?),
            cpus,
        })
    };
    Ok(SshSpec {
        target: None,
        port: None,
        identity: p.identity.clone(),
        remote_dir: p.remote_dir.clone(),
        lost_after_s: 60,
        options: Vec::new(),
        dut: Some(guest(0, p.dut_cpus())?),
        peer: Some(guest(1, p.peer_cpus.clone())?),
        observer: Some(HostSpec {
            target: p.host.clone(),
            port: p.port,
            options: p.options.clone(),
            interface: p.capture_interface(),
            address: None,
            cpus: Vec::new(),
        }),
    })
}

/// The manifest names the provider and the VMs.
fn described(mut facts: HostFacts, p: &ProxmoxSpec, owner: &Owner, version: &str) -> HostFacts {
    let [dut, peer, spare] = p.vms();
    facts.provider = ProviderKind::Proxmox;
    facts
        .tools
        .push(("pveversion (hypervisor)".into(), version.to_string()));
    facts.via = Some(format!(
        "proxmox {}: VM {} (DUT), VM {} (peer), VM {} (spare) cloned from {} on bridge {}, each marked {}; {}",
        p.host,
        dut.1,
        peer.1,
        spare.1,
        p.template_vmid,
        owner.bridge(p),
        owner.mark(),
        facts.via.unwrap_or_default()
    ));
    facts
}

#[cfg(test)]
#[path = "execute_tests.rs"]
mod tests;
