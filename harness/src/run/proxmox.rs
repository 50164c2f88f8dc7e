//! The `proxmox` provider: a Proxmox VE host reached over SSH clones three
//! VMs (DUT, peer, spare) from a template with `qm`, puts their second NIC
//! on an isolated bridge with no uplink, finds each guest's management
//! address and lab NIC through the guest agent, gives the lab NICs the
//! lab's addresses, and hands the guests to the three-host path
//! (`hosts.rs`): the DUT and the peer are guests, the observer is the
//! hypervisor, capturing on the DUT's tap (outside the device under test
//! by construction). Teardown destroys exactly the VMs and the bridge the
//! run created (`proxmox/execute.rs`): each carries the run's [`Owner`]
//! mark (a VM's name and description, the bridge's alias), and nothing is
//! stopped or removed before the host shows that mark on it again.
//!
//! The plan is one list of [`Step`]s: `linecard run --dry-run` prints it
//! and the executor runs it, so what a user reviews is what runs. A step's
//! command may name a guest's lab NIC, known only once the guest agent has
//! answered: it is printed as [`LAB_NIC`] and filled in when run.

use crate::lab::spec;
use crate::scenario::value::quote;
use crate::scenario::ProxmoxSpec;
use serde::{Deserialize, Serialize};

mod execute;

pub use execute::{teardown_recorded, Made, Proxmox, Teardown, RECORD};

/// Who a thing on the hypervisor belongs to: the run's id and a token
/// drawn when the run starts. Every VM carries it in its name
/// (`lc-dut-TOKEN`) and description, the bridge in its name (unless the
/// scenario names one) and its alias; removal reads it back first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    pub run_id: String,
    /// 8 hex digits from the kernel's random pool: two runs started in
    /// the same second still differ.
    pub token: String,
}

impl Owner {
    /// A fresh owner for the run `run_id`.
    pub fn draw(run_id: &str) -> std::io::Result<Self> {
        use std::io::Read;
        let mut bytes = [0u8; 4];
        std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
        Ok(Self {
            run_id: run_id.to_string(),
            token: bytes.iter().map(|b| format!("{b:02x}")).collect(),
        })
    }

    /// The VM name of `role`.
    pub fn vm_name(&self, role: &str) -> String {
        format!("lc-{role}-{}", self.token)
    }

    /// What a VM's description and the bridge's alias say: one word, so
    /// that neither `qm` nor `ip` needs it quoted.
    pub fn mark(&self) -> String {
        format!("linecard-{}-run-{}", self.token, self.run_id)
    }

    /// The bridge's name: the scenario's, else `lcbr` and the token.
    pub fn bridge(&self, p: &ProxmoxSpec) -> String {
        p.bridge
            .clone()
            .unwrap_or_else(|| format!("lcbr{}", self.token))
    }
}

/// Stands in a command for the lab NIC the guest agent names (by its MAC).
pub const LAB_NIC: &str = "{lab-nic}";

/// One command of the plan: which VM it concerns, what the executor does
/// with it, and why it is there.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    pub command: String,
    pub effect: Effect,
    pub why: &'static str,
}

/// What the executor makes of a step's command.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect {
    /// Must succeed.
    Run,
    /// Must succeed, and its output says what `Check` names.
    Check(Check),
    /// Must fail: the name is free.
    Absent,
    /// Creates this, marked as the run's; recorded as pending before it
    /// runs and as made once it succeeded.
    Creates(Made),
    /// Reads back whose this is: the output must carry the run's mark.
    Owned(Made),
    /// Repeated each second until it succeeds, for at most
    /// `agent_timeout_s`.
    Poll,
    /// `qm config`: the guest's management NIC's MAC (its `net0`).
    ReadConfig(usize),
    /// The agent's `network-get-interfaces`: the guest's management
    /// address and its lab NIC's name.
    ReadInterfaces(usize),
    /// `qm guest exec`: the guest command's own exit code must be 0.
    GuestExec(usize),
}

/// What a step's output must show.
#[derive(Clone, Debug, PartialEq)]
pub enum Check {
    /// `pveversion`: a Proxmox VE host.
    ProxmoxVe,
    /// `qm config`: a template.
    Template,
    /// `pvesh get /cluster/resources`: none of these VM IDs in use.
    VmidsFree(Vec<u32>),
}

/// The host CPUs the plan pins a role's VM to.
impl ProxmoxSpec {
    fn affinity(&self, role: &str) -> Option<&str> {
        match role {
            "dut" => self.dut_affinity.as_deref(),
            "peer" => self.peer_affinity.as_deref(),
            _ => None,
        }
    }
}

fn step(command: String, effect: Effect, why: &'static str) -> Step {
    Step {
        command,
        effect,
        why,
    }
}

/// Before anything is made: a Proxmox VE host, the template, the VM IDs
/// and the bridge name free.
pub fn checks(p: &ProxmoxSpec, owner: &Owner) -> Vec<Step> {
    vec![
        step(
            "pveversion".into(),
            Effect::Check(Check::ProxmoxVe),
            "the host is reachable without a password and runs Proxmox VE",
        ),
        step(
            format!("qm config {}", p.template_vmid),
            Effect::Check(Check::Template),
            "the template exists and is a template (linked clones need one)",
        ),
        step(
            "pvesh get /cluster/resources --type vm --output-format json".into(),
            Effect::Check(Check::VmidsFree(p.vms().map(|(_, id, _)| id).to_vec())),
            "the plan's VM IDs are free in the whole cluster: it never touches a VM it did not create",
        ),
        step(
            format!("ip link show {}", quote(&owner.bridge(p))),
            Effect::Absent,
            "the bridge name is free: it never touches a bridge it did not create",
        ),
    ]
}

/// The bridge and the three VMs, booted. Each creation marks what it
/// makes as the run's ([`Owner::mark`]) in the same command.
pub fn creation(p: &ProxmoxSpec, owner: &Owner) -> Vec<Step> {
    let bridge = owner.bridge(p);
    let mut steps = vec![step(
        format!(
            "ip link add name {b} type bridge && ip link set {b} alias {mark} && ip link set {b} up",
            b = quote(&bridge),
            mark = quote(&owner.mark())
        ),
        Effect::Creates(Made::Bridge(bridge.clone())),
        "an isolated bridge for test traffic: no uplink, no address, marked as this run's by its alias",
    )];
    for (role, id, host) in p.vms() {
        let cores = if role == "dut" { p.dut_cores } else { 2 };
        let affinity = p
            .affinity(role)
            .map_or(String::new(), |cpus| format!(" --affinity {}", quote(cpus)));
        steps.push(step(
            format!(
                "qm clone {} {id} --name {} --description {} --full 0",
                p.template_vmid,
                quote(&owner.vm_name(role)),
                quote(&owner.mark())
            ),
            Effect::Creates(Made::Vm(id)),
            "a linked clone of the template, named and described as this run's",
        ));
        steps.push(step(
            format!(
                "qm set {id} --cores {cores} --cpu host --agent enabled=1 --net1 virtio={},bridge={},firewall=0{affinity}",
                host.mac.to_uppercase(),
                quote(&bridge)
            ),
            Effect::Run,
            "the lab's fixed MAC on the isolated bridge (net0 stays the management network); the VM's vCPUs where the scenario pins them",
        ));
        steps.push(step(format!("qm start {id}"), Effect::Run, "boot"));
    }
    steps
}

/// Each guest found through its agent and given the lab's addresses.
pub fn guests(p: &ProxmoxSpec) -> Vec<Step> {
    let mut steps = Vec::new();
    for (i, (_, id, host)) in p.vms().into_iter().enumerate() {
        steps.push(step(
            format!("qm guest cmd {id} ping"),
            Effect::Poll,
            "readiness: the guest agent answers (each second, bounded by agent_timeout_s)",
        ));
        steps.push(step(
            format!("qm config {id}"),
            Effect::ReadConfig(i),
            "the MAC of the guest's management NIC (net0)",
        ));
        steps.push(step(
            format!("qm guest cmd {id} network-get-interfaces"),
            Effect::ReadInterfaces(i),
            "the guest's management address (on net0's MAC) and its lab NIC's name (net1's MAC)",
        ));
        steps.push(step(
            format!(
                "qm guest exec {id} -- sh -c 'ip link set {n} up && ip addr add {}/{} dev {n} && ip addr add {}/{} dev {n} nodad'",
                host.ipv4,
                spec::IPV4_PREFIX_LEN,
                host.ipv6,
                spec::IPV6_PREFIX_LEN,
                n = LAB_NIC
            ),
            Effect::GuestExec(i),
            "the lab's addresses on the lab NIC, by the name the guest gave it",
        ));
    }
    steps
}

/// The whole bring-up, in order.
pub fn bring_up(p: &ProxmoxSpec, owner: &Owner) -> Vec<Step> {
    [checks(p, owner), creation(p, owner), guests(p)].concat()
}

/// Reads back whose `made` is: its output must show `owner`'s mark
/// ([`Effect::Owned`]) before any removal of it runs.
pub fn ownership(made: &Made) -> Step {
    match made {
        Made::Vm(id) => step(
            format!("qm config {id}"),
            Effect::Owned(made.clone()),
            "the VM is still this run's: its description carries the run's mark",
        ),
        Made::Bridge(name) => step(
            format!("ip -d -o link show {}", quote(name)),
            Effect::Owned(made.clone()),
            "the bridge is still this run's: its alias carries the run's mark",
        ),
    }
}

/// Removes one thing the run made, once [`ownership`] showed it is the
/// run's (both commands are tried). No `--skiplock`: a lock is someone
/// else's operation (a backup, a migration), never overridden.
pub fn removal(made: &Made) -> Vec<Step> {
    match made {
        Made::Vm(id) => vec![
            step(
                format!("qm stop {id}"),
                Effect::Run,
                "stop the VM this run cloned",
            ),
            step(
                format!("qm destroy {id} --purge 1"),
                Effect::Run,
                "remove it and its disks",
            ),
        ],
        Made::Bridge(name) => vec![step(
            format!("ip link del {}", quote(name)),
            Effect::Run,
            "remove the isolated bridge",
        )],
    }
}

/// The teardown of everything `made`, last made first: each thing's
/// ownership read back, then its removal.
pub fn teardown(made: &[Made]) -> Vec<Step> {
    made.iter()
        .rev()
        .flat_map(|m| std::iter::once(ownership(m)).chain(removal(m)))
        .collect()
}

/// What the whole plan would make, in order.
pub fn everything(p: &ProxmoxSpec, owner: &Owner) -> Vec<Made> {
    creation(p, owner)
        .into_iter()
        .filter_map(|s| match s.effect {
            Effect::Creates(m) => Some(m),
            _ => None,
        })
        .collect()
}

/// The whole plan as text, for `--dry-run`, with an example owner (a run
/// draws its own token).
pub fn render(p: &ProxmoxSpec, scenario: &str, owner: &Owner) -> String {
    let mut out = format!(
        "proxmox plan for scenario {scenario} on {} (dry run: nothing is executed; every \
         command runs there over SSH; this plan's token is {}, a run draws its own)\n\nbring-up:\n",
        p.host, owner.token
    );
    let line = |s: &Step| format!("  {}\n        # {}\n", s.command, s.why);
    for s in bring_up(p, owner) {
        out.push_str(&line(&s));
    }
    let [dut, peer, _] = p.vms();
    out.push_str(&format!(
        "\nthen the three-host run: DUT = VM {} (CPUs {:?} under test), peer = VM {}, \
         both over SSH as {} through {}; observer = {} capturing on {}; each capture comes \
         back to results/{scenario}/RUN_ID/\n",
        dut.1,
        p.dut_cpus(),
        peer.1,
        p.guest_user,
        p.host,
        p.host,
        p.capture_interface()
    ));
    out.push_str(&format!(
        "\nstaging on each guest and the host: a fresh private directory (mktemp -d {}/linecard.XXXXXXXX, 0711: root's, others may only pass through) \
         for this build's linecard and linecardd, the run's files and its captures\n",
        quote(&p.remote_dir)
    ));
    out.push_str(
        "\nteardown (also after a failure or Ctrl-C; exactly what was made, each thing only \
         once the host shows the run's mark on it):\n",
    );
    for s in teardown(&everything(p, owner)) {
        out.push_str(&line(&s));
    }
    out
}

#[cfg(test)]
mod tests;
