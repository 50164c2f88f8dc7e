//! What `linecard run --check` prints: the scenario's plan in words (the
//! sessions, each phase's stress and fault, each DUT and what it is held
//! to), from the parsed scenario alone; nothing is started.

use crate::profile::stress_ng_line;
use crate::scenario::{Family, Scenario};

/// What `run` would do, for `linecard run --check`.
pub fn plan(scenario: &Scenario) -> String {
    let total = scenario.sessions.total();
    let mut out = format!(
        "{}: {}\nprovider {:?}, peer {:?}, {total} session{} {} x {} ms ({})\n",
        scenario.name,
        scenario.description,
        scenario.provider,
        scenario.peer,
        if total == 1 { "" } else { "s" },
        scenario.sessions.multiplier,
        scenario.sessions.tx_interval_ms,
        scenario.sessions.family_name()
    );
    if let Some(auth) = &scenario.sessions.auth {
        out.push_str(&format!(
            "authentication: {}, Key ID {} (secret of {} bytes)\n",
            auth.kind,
            auth.key_id,
            auth.secret.len()
        ));
    }
    if let Some(p) = &scenario.proxmox {
        let [dut, peer, spare] = p.vms();
        out.push_str(&format!(
            "proxmox: {} clones template {} as VM {} (DUT, CPUs {:?} under test), {} (peer), {} \
             (spare) on bridge {}, captured on the hypervisor at {}; `--dry-run` prints every \
             command\n",
            p.host,
            p.template_vmid,
            dut.1,
            p.dut_cpus(),
            peer.1,
            spare.1,
            p.bridge.as_deref().unwrap_or("lcbr<the run's token>"),
            p.capture_interface()
        ));
    }
    if let Some(ssh) = &scenario.ssh {
        match (&ssh.target, &ssh.dut, &ssh.peer, &ssh.observer) {
            (Some(target), ..) => out.push_str(&format!(
                "host: {target} runs the local lab (staged in {})\n",
                ssh.remote_dir
            )),
            (None, Some(dut), Some(peer), Some(observer)) => out.push_str(&format!(
                "hosts: DUT {} ({}, CPUs {:?}), peer {} ({}), observer {} (captures on {})\n",
                dut.target,
                dut.interface,
                dut.cpus,
                peer.target,
                peer.interface,
                observer.target,
                observer.interface
            )),
            _ => {}
        }
    }
    out.push_str("phases (per DUT; counts for one DUT CPU):\n");
    for p in &scenario.phases {
        let cmd = if p.profile.is_idle() {
            "no load".to_string()
        } else {
            stress_ng_line(&p.profile.stress_ng_processes(1, p.seconds))
        };
        let fault = p
            .fault
            .as_ref()
            .map_or(String::new(), |f| format!("; fault: {}", f.describe()));
        out.push_str(&format!(
            "  {:<6} {:>5} s  {cmd}{fault}\n",
            p.profile.name, p.seconds
        ));
    }
    out.push_str("DUTs:\n");
    for d in &scenario.duts {
        let what = match &d.implementation {
            crate::scenario::DutImplementation::Frr => "FRR bfdd".to_string(),
            crate::scenario::DutImplementation::Linecardd { backend } => {
                format!("linecardd, backend {backend}")
            }
            crate::scenario::DutImplementation::FrrDataplane { backend } => {
                format!("FRR bfdd driving linecardd (dataplane protocol), backend {backend}")
            }
        };
        let describe = |expect: &crate::scenario::Expectation| {
            if expect.positive_control {
                return "positive control: must flap".to_string();
            }
            let mut e = Vec::new();
            if let Some(n) = expect.max_flaps {
                e.push(format!("flaps <= {n}"));
            }
            if let Some(ms) = expect.max_gap_ms {
                e.push(format!("max gap <= {ms} ms"));
            }
            match expect.peer_echo {
                Some(crate::scenario::PeerEcho::Reflected) => {
                    e.push("the peer's echoes all reflected".into())
                }
                Some(crate::scenario::PeerEcho::Absent) => e.push("no echo from the peer".into()),
                None => {}
            }
            if expect.own_echo {
                e.push("own echoes all back".into());
            }
            if let Some(auth) = expect.auth {
                e.push(format!(
                    "every packet of both sides with Auth Type {}, Key ID {}{}",
                    auth.auth_type,
                    auth.key_id,
                    if auth.meticulous {
                        ", sequence +1 each"
                    } else {
                        ""
                    }
                ));
            }
            if let Some(asker) = expect.demand {
                e.push(format!(
                    "Demand mode asked by {}: D, the other side silent, Polls answered",
                    match asker {
                        crate::scenario::DemandAsker::Dut => "the DUT",
                        crate::scenario::DemandAsker::Peer => "the peer",
                        crate::scenario::DemandAsker::Both => "both sides",
                    }
                ));
            }
            if e.is_empty() {
                "measured only".into()
            } else {
                e.join(", ")
            }
        };
        let expect = if d.per_family.is_empty() {
            describe(&d.expect)
        } else {
            Family::BOTH
                .iter()
                .map(|&f| format!("{}: {}", f.name(), describe(&d.expect_for(f))))
                .collect::<Vec<_>>()
                .join("; ")
        };
        let offload = match d.offload_only {
            Some(f) => format!("; only {} on the kernel's fast path", f.name()),
            None => String::new(),
        };
        let softirq = match d.ksoftirqd_priority {
            0 => String::new(),
            p => format!("; ksoftirqd at SCHED_FIFO {p}"),
        };
        out.push_str(&format!(
            "  {:<30} {what}{offload}; RT throttling {:?}{softirq}; {expect}\n",
            d.label, d.rt_throttling
        ));
        out.push_str(&named_programs("    runs", &d.programs));
    }
    out.push_str(&named_programs("the peer runs", &scenario.peer_programs));
    out
}

/// `PREFIX bfdd /opt/frr/sbin/bfdd` per program named, or nothing.
fn named_programs(prefix: &str, programs: &crate::scenario::programs::Programs) -> String {
    programs
        .named()
        .iter()
        .map(|(key, path)| format!("{prefix} {key} {}\n", path.display()))
        .collect()
}
