//! `linecard lab ...`: the local lab's life (up, down, status), the proof
//! of where the DUT's receive path runs (check) and a lossy link on
//! demand (loss).

use crate::{print_json, Output};
use anyhow::Result;
use clap::Subcommand;
use linecard_harness::lab;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Subcommand)]
pub(crate) enum LabCommand {
    /// Create the lab: namespaces lc-dut, lc-peer, lc-spare around a bridge in lc-obs,
    /// cpusets lc-dut and lc-rest, RPS steering to the DUT's CPUs. Idempotent.
    Up {
        /// CPUs for the DUT (kernel list format, e.g. "1" or "2-3"); default: the last CPU
        #[arg(long)]
        dut_cpus: Option<String>,
        /// When another linecard holds the lab (a run), wait up to this long
        #[arg(long, value_name = "SECONDS", default_value_t = 0)]
        wait: u64,
        #[command(flatten)]
        output: Output,
    },
    /// Remove everything the lab created (anything named lc-*), also after a crash
    Down {
        /// When another linecard holds the lab (a run), wait up to this long
        #[arg(long, value_name = "SECONDS", default_value_t = 0)]
        wait: u64,
        #[command(flatten)]
        output: Output,
    },
    /// Show the lab's hosts, addresses, MACs, ports and CPU sets; exit 1 if it is not fully up
    Status {
        #[command(flatten)]
        output: Output,
    },
    /// Prove with a per-CPU counter that the DUT's XDP program runs on the DUT's CPUs
    Check {
        /// Turn RPS steering off during the check; the check must then fail
        /// and name the sender's CPU (proof that it can fail)
        #[arg(long)]
        no_steering: bool,
        /// Echo requests the peer sends, 5 ms apart
        #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(20..=10_000))]
        packets: u32,
        #[command(flatten)]
        output: Output,
    },
    /// Lose a share of one host's BFD control frames on its bridge port for a while (this kernel
    /// has no netem: the lab's own XDP program, seeded and counted), then print what it judged
    /// and dropped. On the peer's port the observer's capture on the DUT's port shows exactly
    /// what the DUT received.
    Loss {
        /// The host whose frames are lost: peer or spare (the DUT's port carries the lab's XDP_PASS)
        #[arg(long, default_value = "peer")]
        host: String,
        /// Percentage of its BFD control frames (UDP 3784 and 4784) dropped, 0-100
        #[arg(long)]
        percent: f64,
        /// Seed of the draw: the same seed and the same frames give the same drops
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// How long the link stays lossy (bounded: at most an hour)
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
        seconds: u64,
        #[command(flatten)]
        output: Output,
    },
}

pub(crate) fn run(command: LabCommand) -> Result<ExitCode> {
    match command {
        LabCommand::Up {
            dut_cpus,
            wait,
            output,
        } => {
            let mut options = lab::LabOptions::detect()?;
            if let Some(list) = dut_cpus {
                options.dut_cpus = lab::spec::parse_cpu_list(&list).ok_or_else(|| {
                    anyhow::anyhow!("--dut-cpus {list:?} is not a CPU list like \"1\" or \"2-3\"")
                })?;
            }
            let _lab = linecard_harness::lock::take(Duration::from_secs(wait))?;
            let status = lab::up(&options)?;
            if output.json {
                print_json(&status)?;
            } else {
                print!("{}", lab::status::render(&status));
            }
            Ok(ExitCode::SUCCESS)
        }
        LabCommand::Down { wait, output } => {
            let _lab = linecard_harness::lock::take(Duration::from_secs(wait))?;
            let removed = lab::down()?;
            if output.json {
                print_json(&removed)?;
            } else {
                let mut restored = String::new();
                if let Some(v) = removed.restored_rt_runtime_us {
                    restored += &format!("; sched_rt_runtime_us restored to {v}");
                }
                for t in &removed.restored_softirq_threads {
                    restored += &format!("; {} restored", t.describe());
                }
                if let Some(v) = &removed.restored_load_balance {
                    restored += &format!("; the root cpuset's sched_load_balance restored to {v}");
                }
                println!(
                    "removed: {} namespaces, {} cpusets, {} processes{}{restored}",
                    removed.namespaces.len(),
                    removed.cpusets.len(),
                    removed.processes.len(),
                    if removed.bpf_pins {
                        ", pinned XDP links"
                    } else {
                        ""
                    }
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        LabCommand::Status { output } => {
            lab::preflight()?;
            let status = lab::status::read()?;
            if output.json {
                print_json(&status)?;
            } else {
                print!("{}", lab::status::render(&status));
            }
            Ok(if status.up {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        LabCommand::Loss {
            host,
            percent,
            seed,
            seconds,
            output,
        } => {
            linecard_harness::run::install_interrupt_handler();
            run_loss(&host, percent, seed, seconds, &output)
        }
        LabCommand::Check {
            no_steering,
            packets,
            output,
        } => {
            let report = lab::check::run(&lab::check::CheckOptions {
                steering: !no_steering,
                packets,
            })?;
            if output.json {
                print_json(&report)?;
            } else {
                for c in &report.per_cpu {
                    println!("  cpu {:>3}: {:>7} frames", c.cpu, c.frames);
                }
                println!(
                    "{}: {}",
                    if report.passed { "PASS" } else { "FAIL" },
                    report.verdict
                );
            }
            Ok(if report.passed {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
    }
}

fn run_loss(
    host: &str,
    percent: f64,
    seed: u64,
    seconds: u64,
    output: &Output,
) -> Result<ExitCode> {
    let Some(host) = lab::spec::HOSTS.iter().find(|h| h.role == host) else {
        anyhow::bail!("--host {host:?}: one of peer, spare");
    };
    if !(0.0..=100.0).contains(&percent) {
        anyhow::bail!("--percent {percent}: between 0 and 100");
    }
    lab::preflight()?;
    let link = lab::loss::LossyLink::attach(host, percent / 100.0, seed)?;
    let started = std::time::Instant::now();
    let limit = std::time::Duration::from_secs(seconds);
    while started.elapsed() < limit
        && !linecard_harness::run::INTERRUPTED.load(std::sync::atomic::Ordering::Relaxed)
    {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let counts = link.counts()?;
    drop(link);
    if output.json {
        print_json(&serde_json::json!({
            "port": host.bridge_port,
            "percent": percent,
            "seed": seed,
            "seconds": started.elapsed().as_secs_f64(),
            "seen": counts.seen,
            "dropped": counts.dropped,
        }))?;
    } else {
        let share = if counts.seen == 0 {
            0.0
        } else {
            100.0 * counts.dropped as f64 / counts.seen as f64
        };
        println!(
            "{}: {} of {} BFD control frames dropped ({share:.2} %, asked {percent} %, seed {seed}) in {:.1} s",
            host.bridge_port,
            counts.dropped,
            counts.seen,
            started.elapsed().as_secs_f64()
        );
    }
    Ok(ExitCode::SUCCESS)
}
