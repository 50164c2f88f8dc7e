//! `linecard lab check`: proves where the DUT's XDP program runs.
//!
//! Attaches the project's placement program to the DUT's interface, sends a
//! bounded ping stream from the peer (pinned to the non-DUT CPUs), and reads
//! the per-CPU counter. With steering off (`--no-steering`), the program runs
//! on the sender's CPU and the check must fail: a check that cannot fail
//! proves nothing.

use super::spec::{self, DUT, HOST_IFACE, PEER};
use crate::sys::{self, PING};
use anyhow::{bail, Context, Result};
use aya::maps::PerCpuArray;
use aya::programs::{Xdp, XdpMode};
use linecard_common::names;
use linecard_common::placement::PlacementCount;
use serde::Serialize;
use std::process::{Command, Stdio};

/// Share of the frames that must be seen on the DUT's CPUs.
const REQUIRED_SHARE: f64 = 0.95;

#[derive(Clone, Debug)]
pub struct CheckOptions {
    /// Leave RPS steering on (the lab's normal state) or turn it off for the
    /// duration of the check.
    pub steering: bool,
    /// Echo requests the peer sends (bounded: 5 ms apart).
    pub packets: u32,
}

/// The check's evidence, printed as a table or JSON.
#[derive(Debug, Serialize)]
pub struct PlacementReport {
    pub steering: bool,
    pub dut_cpus: Vec<usize>,
    pub packets_sent: u32,
    /// Frames the XDP program counted, per CPU (CPUs with none omitted).
    pub per_cpu: Vec<CpuCount>,
    pub frames_total: u64,
    pub frames_on_dut_cpus: u64,
    pub share_on_dut_cpus: f64,
    pub passed: bool,
    pub verdict: String,
}

#[derive(Debug, Serialize)]
pub struct CpuCount {
    pub cpu: usize,
    pub frames: u64,
}

pub fn run(options: &CheckOptions) -> Result<PlacementReport> {
    super::preflight()?;
    sys::require_tool(PING)?;
    let status = super::status::read()?;
    if !status.up {
        bail!(
            "the lab is not up ({}); run `linecard lab up`",
            status.problems.join("; ")
        );
    }
    let dut_cpus = status.dut_cpus();
    if options.steering {
        return measure(options, &dut_cpus);
    }
    super::set_rps(&PEER, &[])?;
    let result = measure(options, &dut_cpus);
    // Restore steering whatever happened above.
    super::set_rps(&PEER, &dut_cpus).context("restoring RPS steering after the check")?;
    result
}

fn measure(options: &CheckOptions, dut_cpus: &[usize]) -> Result<PlacementReport> {
    let per_cpu = sys::in_netns(DUT.namespace, || {
        let mut bpf = linecard_bpf_objects::load()?;
        let program: &mut Xdp = bpf
            .program_mut(names::PLACEMENT_PROGRAM)
            .context("the XDP object has no placement program")?
            .try_into()?;
        program.load()?;
        // Native mode: the placement of the generic (skb) hook would say
        // nothing about where the engine's native program runs.
        let link = program
            .attach(HOST_IFACE, XdpMode::Driver)
            .with_context(|| {
                format!(
                    "attaching the placement program to {HOST_IFACE} in {} (native XDP)",
                    DUT.namespace
                )
            })?;
        let sent = send_pings(options.packets);
        let map: PerCpuArray<_, PlacementCount> = PerCpuArray::try_from(
            bpf.map(names::PLACEMENT_MAP)
                .context("placement map missing")?,
        )?;
        let values = map.get(&0, 0)?;
        let counts: Vec<u64> = values.iter().map(|v| v.packets).collect();
        let program: &mut Xdp = bpf
            .program_mut(names::PLACEMENT_PROGRAM)
            .context("lc_placement in the object")?
            .try_into()?;
        program.detach(link)?;
        sent?;
        Ok(counts)
    })?;
    Ok(judge(options, dut_cpus, &per_cpu))
}

/// Sends the bounded echo stream from the peer, confined to the non-DUT CPUs
/// so that, without steering, the DUT's receive path visibly runs there.
fn send_pings(count: u32) -> Result<()> {
    let mut cmd = Command::new("ip");
    cmd.args([
        "netns",
        "exec",
        PEER.namespace,
        "ping",
        "-q",
        "-i",
        "0.005",
        "-W",
        "1",
    ])
    .args(["-c", &count.to_string(), DUT.ipv4])
    .stdin(Stdio::null())
    .stdout(Stdio::null());
    sys::join_cpuset_on_exec(&mut cmd, &spec::cpuset_dir(spec::REST_CPUSET));
    let status = cmd.status().context("running ping from the peer")?;
    if !status.success() {
        bail!(
            "ping from {} to {} failed ({status}); is the lab healthy?",
            PEER.namespace,
            DUT.ipv4
        );
    }
    Ok(())
}

fn judge(options: &CheckOptions, dut_cpus: &[usize], counts: &[u64]) -> PlacementReport {
    let per_cpu: Vec<_> = counts
        .iter()
        .enumerate()
        .filter(|(_, &n)| n > 0)
        .map(|(cpu, &frames)| CpuCount { cpu, frames })
        .collect();
    let total: u64 = counts.iter().sum();
    let on_dut: u64 = per_cpu
        .iter()
        .filter(|c| dut_cpus.contains(&c.cpu))
        .map(|c| c.frames)
        .sum();
    let share = if total == 0 {
        0.0
    } else {
        on_dut as f64 / total as f64
    };
    let ran_on = spec::format_cpu_list(&per_cpu.iter().map(|c| c.cpu).collect::<Vec<_>>());
    let dut_list = spec::format_cpu_list(dut_cpus);
    // Precondition before verdict: the traffic must have reached the program.
    let (passed, verdict) = if total < u64::from(options.packets) * 9 / 10 {
        (
            false,
            format!(
                "inconclusive: the program saw {total} frames of {} sent; the check tested nothing",
                options.packets
            ),
        )
    } else if share >= REQUIRED_SHARE {
        (
            true,
            format!(
                "the DUT's XDP program ran on its CPUs ({dut_list}): {on_dut} of {total} frames"
            ),
        )
    } else {
        (
            false,
            format!(
                "the DUT's XDP program ran on CPU {ran_on}, not the DUT's CPUs ({dut_list}): only {on_dut} of {total} frames{}",
                if options.steering { "; RPS steering is not effective" } else { " (expected with --no-steering)" }
            ),
        )
    };
    PlacementReport {
        steering: options.steering,
        dut_cpus: dut_cpus.to_vec(),
        packets_sent: options.packets,
        per_cpu,
        frames_total: total,
        frames_on_dut_cpus: on_dut,
        share_on_dut_cpus: share,
        passed,
        verdict,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> CheckOptions {
        CheckOptions {
            steering: true,
            packets: 100,
        }
    }

    #[test]
    fn all_frames_on_the_dut_cpu_pass() {
        let report = judge(&options(), &[1], &[0, 101]);
        assert!(report.passed, "{}", report.verdict);
    }

    #[test]
    fn frames_on_the_sender_cpu_fail_and_name_it() {
        let report = judge(&options(), &[1], &[101, 0]);
        assert!(!report.passed);
        assert!(
            report.verdict.contains("ran on CPU 0"),
            "{}",
            report.verdict
        );
    }

    #[test]
    fn no_traffic_is_inconclusive_not_a_pass() {
        let report = judge(&options(), &[1], &[0, 3]);
        assert!(!report.passed);
        assert!(
            report.verdict.starts_with("inconclusive"),
            "{}",
            report.verdict
        );
    }
}
