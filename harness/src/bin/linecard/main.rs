//! `linecard`: the harness CLI. Data goes to stdout, logs to stderr.
//!
//! Exit codes (ARCHITECTURE.md's conventions, the same for every command): 0 success; 1 a check or gate failed;
//! 2 usage or input error (including an environment that cannot run the
//! command, with the fix in the message).

use anyhow::Result;
use clap::{Args, Parser, Subcommand};
use linecard_harness::{analysis_files, analyze, bench, bench_xdp, plots};

mod lab;
mod run;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "linecard",
    version,
    about = "Can BFD on a plain Linux box hold 3 x 10 ms while the box is busy? Measure it.",
    long_about = "linecard brings up a lab, runs BFD engines against real peers under stress, \
                  captures packets on an observer outside the device under test, and turns \
                  the captures into gap distributions, flaps and maxima.\n\n\
                  The main job: `linecard run scenarios/bakeoff.toml` (results in results/). \
                  To explore: `linecard lab up`, then `linecard lab check`."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a scenario: every DUT through its phases against the peer, captured on the observer
    ///
    /// Brings the local lab up (and down again if it was not up before), checks where the
    /// DUT's receive path runs, then for each DUT: starts the peer and the DUT, waits until
    /// both say their session is Up, runs the phases (stress-ng on the DUT's CPUs, with a
    /// canary proving the stress bit), analyses the capture and judges the DUT. Writes
    /// results/<scenario>/<run-id>/ (manifest.json, summary.md, status, captures, analyses)
    /// and prints the table. Exit 0 when the run is complete, 1 when a DUT failed or the run
    /// is invalid, 2 on bad input. Ctrl-C stops, tears down and keeps what was captured.
    /// Example: linecard run scenarios/bakeoff.toml
    Run(run::RunArgs),
    /// Remove what a run on hosts or VMs left there when its harness was killed
    ///
    /// A run over SSH records each host's private directory (remote-staging.json): this stops
    /// the run's processes there (a three-host run's by their marker; a single-host run is
    /// interrupted like Ctrl-C, and its results are brought back first, checked file by
    /// file) and removes the directory. A proxmox run records each VM and bridge in its run
    /// directory (proxmox-made.json),
    /// with how to reach the host, and marks each with its run id and token (a VM's name
    /// and description, the bridge's alias). This reads each recorded thing back and stops
    /// and destroys it only when it still carries that mark; anything else (an ID reused by
    /// someone since) is left and named. A run that ended by itself (also by error or
    /// Ctrl-C) has already removed everything. Example: linecard teardown
    /// results/bakeoff-proxmox/20261205T101010Z
    Teardown {
        /// The run directory (results/<scenario>/<run-id>)
        run: std::path::PathBuf,
    },
    /// RFC 5880/5881 conformance: a scripted peer judges each DUT on the wire
    ///
    /// A remote system in the peer's namespace runs one script against every linecardd
    /// backend and, as controls, FRR bfdd and BIRD, idle and under a stress profile:
    /// discard rules, slow rate while not Up, the three-way handshake, Poll/Final, a raised,
    /// lowered and zero Required Min RX, the DUT's own timer change both ways (its Poll), jitter,
    /// a slower peer, a multiplier change without a Poll, detection and its Diag, AdminDown.
    /// Writes conformance.json, summary.md and each DUT's trace.jsonl; exits 1 when a
    /// linecardd backend breaks a rule (the controls' findings are reported, never fatal).
    /// Example: linecard conformance --dut xdp --load L4
    Conformance(linecard_harness::conformance::ConformanceArgs),
    /// Regenerate a Markdown file's measured tables from the committed runs they name
    ///
    /// A table is published between `<!-- evidence: docs/evidence/<scenario>/<run-id> -->`
    /// and `<!-- /evidence -->` (the path relative to the file); everything between them is
    /// rewritten from that run's manifest.json: a row per DUT and phase, max beside p99, the
    /// verdict (`measured` where nothing was judged). With --check nothing is written, and a
    /// table that differs from its evidence exits 1 naming the line.
    /// Example: linecard tables README.md --check
    Tables {
        /// The Markdown file (README.md)
        file: std::path::PathBuf,
        /// Change nothing; exit 1 when a table differs from its evidence
        #[arg(long)]
        check: bool,
    },
    /// Markdown, self-contained HTML and JSON reports of one or more runs, side by side
    ///
    /// Tables (max beside p99 always), plots re-derived from each DUT's capture (gap time
    /// series with flaps and phases, gap CCDF), measurement-quality warnings, the manifest,
    /// links to the captures. Example: linecard report results/bakeoff/20261130T093320Z
    Report {
        /// Run directories (results/<scenario>/<run-id>)
        #[arg(required = true)]
        runs: Vec<std::path::PathBuf>,
        /// Formats to write, comma-separated: md, html, json
        #[arg(long, value_delimiter = ',', default_value = "md,html")]
        format: Vec<String>,
        /// Where to write the report files
        #[arg(long, default_value = "reports")]
        out: std::path::PathBuf,
    },
    /// The injection matrix: crafted frames from the lab's spare host at a running xdp DUT
    ///
    /// Needs the lab up and a linecardd on the xdp backend in the DUT namespace whose session
    /// with the lab's peer is Up and offloaded. For each case (IP options, TTL 64 and 254,
    /// fragment, truncated, version 2, length 23 and beyond the payload, multiplier 0, M bit,
    /// my discriminator 0, your discriminator 0 in Up, a wrong discriminator, a spoofed source,
    /// the multihop port for a single-hop session): the kernel's drop counter for its reason
    /// must move by exactly the number sent, the live session must keep being answered in
    /// the same window, and no frame may reach userspace. Then a flood of wrong
    /// discriminators, back to back, bounded by --flood and 10 s. Exit 0 when every case
    /// held, 1 otherwise. Example: linecard inject --socket /tmp/dut.sock --json
    Inject {
        /// The DUT's control socket
        #[arg(long)]
        socket: std::path::PathBuf,
        /// Copies of each case
        #[arg(long, default_value_t = 100)]
        copies: u64,
        /// Frames in the flood (0: no flood)
        #[arg(long, default_value_t = 100_000)]
        flood: u64,
        #[command(flatten)]
        output: Output,
    },
    /// The CI regression gate: compare a run with a committed baseline; exit 1 on regression
    ///
    /// Per gated DUT and phase: max gap, p99.9, flaps and gaps over the detect budget (for a
    /// fault's phase, the fault rules the DUT broke, fault_failures, and where it declared the
    /// peer Down five times or more, the median delay of its Downs, detection_p50_ms). A value
    /// regresses when it exceeds the worst of the baseline's repeated runs plus its slack; a
    /// run that is not complete never passes. Example:
    /// linecard gate results/smoke/20261130T093233Z --baseline baselines/smoke.toml --junit gate.xml
    Gate {
        /// Run directory
        run: std::path::PathBuf,
        /// Baseline file (baselines/*.toml)
        #[arg(long)]
        baseline: std::path::PathBuf,
        /// Also write JUnit XML here
        #[arg(long)]
        junit: Option<std::path::PathBuf>,
        #[command(flatten)]
        output: Output,
    },
    /// Record a baseline for the gate from repeated complete runs of one scenario
    ///
    /// The file records the runs' values (their spread), the slack and its reason, and a seal:
    /// a value edited by hand afterwards makes the gate refuse the file, so a wider limit comes
    /// from a new recording with its reason, never from an edit. Example: linecard baseline
    /// results/smoke/A results/smoke/B results/smoke/C --slack-ms 5 --phase-slack-ms L4=8
    /// --slack-reason "..." --provenance "three runs on ..." --out baselines/smoke.toml
    Baseline(BaselineArgs),
    /// Two runs side by side (two builds through one scenario), and whether B is worse
    ///
    /// Per DUT and phase both runs measured: flaps, p50/p99/p99.9/max, gaps over budget, the
    /// DUT's CPU, each "A -> B". Flaps (per second) and gaps over budget (per gap) are each
    /// tested with an exact one-sided test of B's rate against A's (p-values stated;
    /// Bonferroni over all tests at 0.01 overall); quantiles and CPU are shown, not tested.
    /// Prints Markdown (or --json); --html FILE adds each DUT's gap CCDFs of both runs on one
    /// plot. Exit 1 when B is worse beyond chance, 0 when not, 2 on bad input.
    /// Example: linecard run scenarios/smoke.toml --dut-binary xdp=OLD; linecard run
    /// scenarios/smoke.toml --dut-binary xdp=NEW; linecard compare results/smoke/A results/smoke/B
    Compare {
        /// The reference run (results/<scenario>/<run-id>)
        a: std::path::PathBuf,
        /// The run judged against it
        b: std::path::PathBuf,
        /// Also write the HTML page here
        #[arg(long)]
        html: Option<std::path::PathBuf>,
        #[command(flatten)]
        output: Output,
    },
    /// The stress canary (started by `linecard run` on the DUT's CPUs): wakes every 1 ms and
    /// records as JSON lines each time it was kept from running for more than 2 ms
    #[command(hide = true)]
    Canary {
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=86_400))]
        seconds: u64,
        #[arg(long)]
        out: std::path::PathBuf,
    },
    /// The freeze witness (started by `linecard run` on the DUT's CPUs): wakes every 1 ms at
    /// SCHED_DEADLINE and records as JSON lines each time it woke more than 2 ms late, when no
    /// CPU of the DUT's could run anything (the machine itself stood still)
    #[command(hide = true)]
    FreezeWitness {
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=86_400))]
        seconds: u64,
        #[arg(long)]
        out: std::path::PathBuf,
    },
    /// The steal witness (started by `linecard run` off the DUT's CPUs): reads the DUT CPUs'
    /// hypervisor steal from /proc/stat every 2 ms and records each change as a JSON line, so
    /// that steal excuses only a gap it fell inside
    #[command(hide = true)]
    StealWitness {
        /// The DUT's CPUs (comma-separated)
        #[arg(long, value_delimiter = ',', required = true)]
        cpus: Vec<usize>,
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=86_400))]
        seconds: u64,
        #[arg(long)]
        out: std::path::PathBuf,
    },
    /// The engine scraper (started by `linecard run` beside a linecardd DUT, off its CPUs):
    /// reads the engine's OpenMetrics endpoint once a second and records as JSON lines each
    /// session's state, departures from Up and gaps, for the report's engine view
    #[command(hide = true)]
    EngineScrape {
        /// The endpoint, ADDRESS:PORT
        #[arg(long)]
        address: std::net::SocketAddr,
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=86_400))]
        seconds: u64,
        #[arg(long)]
        out: std::path::PathBuf,
    },
    /// Write this program's man pages (section 1) or shell completions into DIR (packaging)
    #[command(hide = true)]
    Generate {
        what: linecard_api::cli_docs::Generated,
        dir: std::path::PathBuf,
    },
    /// Bring up, inspect, check and tear down the local lab (network namespaces on this machine)
    #[command(subcommand)]
    Lab(lab::LabCommand),
    /// Per-flow gap distributions, flaps, budgets and latencies from BFD captures
    ///
    /// Reads pcap (us or ns) and pcapng; Ethernet (VLAN), Linux cooked (SLL, SLL2) and
    /// raw IP; UDP 3784, 4784 and 3785. Several files are merged by timestamp.
    /// Example: linecard analyze run.pcap --phase L4=1764480000,1764480060 --json
    Analyze {
        /// Capture files
        #[arg(required = true)]
        captures: Vec<std::path::PathBuf>,
        /// A time window analysed on its own: NAME=START,END in seconds since the epoch (repeatable)
        #[arg(long = "phase", value_name = "NAME=START,END")]
        phases: Vec<String>,
        /// Read phases from a run manifest (its `phases` array)
        #[arg(long)]
        manifest: Option<std::path::PathBuf>,
        /// Write analysis.json, flows.csv and packets.csv (one row per control packet) here
        #[arg(long)]
        out: Option<std::path::PathBuf>,
        /// Draw SVG plots here: gap CCDF per flow, gap time series with flaps and phases,
        /// per-session maxima
        #[arg(long)]
        plots: Option<std::path::PathBuf>,
        #[command(flatten)]
        output: Output,
    },
    /// Benchmarks, side by side with the tools a user would otherwise use
    #[command(subcommand)]
    Bench(BenchCommand),
}

#[derive(Subcommand)]
enum BenchCommand {
    /// The XDP fast path's cost per packet in the kernel (BPF_PROG_TEST_RUN), per verdict
    Xdp {
        /// Runs per measurement (the kernel reports their mean)
        #[arg(long, default_value_t = 1_000_000)]
        repeat: u32,
        #[command(flatten)]
        output: Output,
    },
    /// What scraping linecardd's metrics endpoint once a second costs the engine: its CPU time
    /// unscraped and scraped, in pairs of equal windows, one run
    Metrics {
        /// Sessions the engine holds (naive backend, loopback)
        #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=4096))]
        sessions: u64,
        /// Each window's length
        #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(5..=3600))]
        seconds: u64,
        /// Pairs of windows (unscraped, then scraped)
        #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=10))]
        pairs: u64,
        /// Where the engine's config, socket and log go
        #[arg(long, default_value = "/tmp/linecard-bench-metrics")]
        dir: std::path::PathBuf,
        #[command(flatten)]
        output: Output,
    },
    /// Analyzer speed and peak memory on a synthetic capture: linecard analyze vs tshark -T
    /// fields vs cat, one CPU
    Analyze {
        /// Packets in the synthetic capture
        #[arg(long, default_value_t = 10_000_000)]
        packets: u64,
        /// Sessions (two flows each)
        #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=65_536))]
        sessions: u32,
        /// Equal phase windows analysed beside the whole capture, as a run's phases are
        /// (each holds every flow's distributions: the memory figure grows with them)
        #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=16))]
        phases: u32,
        /// Where to write the capture (about 82 bytes per packet)
        #[arg(long, default_value = "/tmp")]
        dir: std::path::PathBuf,
        /// tshark is ~100x slower: time it on this many leading packets (0: skip tshark)
        #[arg(long, default_value_t = 1_000_000)]
        tshark_packets: u64,
        /// Timed runs of cat and linecard analyze (the median is reported)
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=20))]
        runs: u64,
        /// Keep the synthetic capture
        #[arg(long)]
        keep: bool,
        #[command(flatten)]
        output: Output,
    },
}

#[derive(Args)]
pub(crate) struct Output {
    /// Print JSON on stdout instead of a table
    #[arg(long)]
    pub(crate) json: bool,
}

pub(crate) fn print_json<T: serde::Serialize>(value: &T) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Lab(command) => lab::run(command),
        Command::Run(args) => run::scenario(args),
        Command::Teardown { run } => {
            let staging = linecard_harness::run::ssh::Staging::read(&run)?;
            let proxmox = run.join(linecard_harness::run::proxmox::RECORD).exists();
            if staging.is_none() && !proxmox {
                anyhow::bail!(
                    "{} holds no record of hosts or VMs ({} or {}): a local run's lab is removed by `linecard lab down`",
                    run.display(),
                    linecard_harness::run::ssh::STAGING_RECORD,
                    linecard_harness::run::proxmox::RECORD
                );
            }
            let mut failed = false;
            if let Some(mut staging) = staging {
                // First the processes and files on the hosts (a proxmox
                // run's observer is the hypervisor), then the VMs.
                let hosts = linecard_harness::run::ssh::staging::teardown(&run, &mut staging)?;
                for h in hosts {
                    match h.result {
                        Ok(()) => println!(
                            "{} {}: stopped the run's processes, removed {}{}",
                            h.role,
                            h.target,
                            h.dir,
                            h.fetched
                                .map(|f| format!(" (its results first brought to {})", f.display()))
                                .unwrap_or_default()
                        ),
                        Err(e) => {
                            failed = true;
                            println!(
                                "{} {}: {e} (recorded; run teardown again)",
                                h.role, h.target
                            )
                        }
                    }
                }
            }
            if proxmox {
                let done = linecard_harness::run::proxmox::teardown_recorded(&run)?;
                if done.removed.is_empty() && done.left.is_empty() {
                    println!("no VM or bridge of this run is left on its host");
                }
                for made in &done.removed {
                    println!("removed {made:?}");
                }
                for (made, why) in &done.left {
                    println!("left {made:?}: {why}");
                }
            }
            Ok(if failed {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            })
        }
        Command::Conformance(args) => {
            let (report, dir) = match &args.judge {
                Some(dir) => (linecard_harness::conformance::rejudge(dir)?, dir.clone()),
                None => linecard_harness::conformance::run(&args)?,
            };
            print!("{}", linecard_harness::conformance::table(&report));
            let failed = report.failed();
            println!("\n{}: {failed} failed", dir.display());
            Ok(if failed == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Command::Tables { file, check } => {
            let outcome = linecard_harness::evidence_tables::apply(&file, check)?;
            if let Some(differs) = outcome.differs {
                eprintln!("{differs}");
                return Ok(ExitCode::from(1));
            }
            let verb = if check {
                "agree with"
            } else {
                "regenerated from"
            };
            println!(
                "{}: {} tables {verb} their evidence",
                file.display(),
                outcome.runs.len()
            );
            for run in outcome.runs {
                println!("  {run}");
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Report { runs, format, out } => {
            let views = runs
                .iter()
                .map(|r| linecard_harness::report::load(r))
                .collect::<Result<Vec<_>>>()?;
            for path in linecard_harness::export::report::write(&views, &out, &format)? {
                println!("{}", path.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Inject {
            socket,
            copies,
            flood,
            output,
        } => {
            let matrix = linecard_harness::inject::run(&socket, copies, flood)?;
            if output.json {
                print_json(&matrix)?;
            } else {
                print!("{}", linecard_harness::inject::render(&matrix));
            }
            Ok(if matrix.pass {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Command::Gate {
            run,
            baseline,
            junit,
            output,
        } => {
            let result = linecard_harness::gate::gate(&run, &baseline)?;
            if let Some(path) = junit {
                std::fs::write(&path, linecard_harness::export::gate::junit(&result))
                    .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
            }
            if output.json {
                print_json(&result)?;
            } else {
                print!("{}", linecard_harness::export::gate::text(&result));
            }
            Ok(if result.passed {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Command::Baseline(args) => record_baseline(args),
        Command::Compare { a, b, html, output } => compare_runs(&a, &b, html.as_deref(), &output),
        Command::StealWitness { cpus, seconds, out } => {
            linecard_harness::steal::run(&cpus, std::time::Duration::from_secs(seconds), &out)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::FreezeWitness { seconds, out } => {
            linecard_harness::freeze::run(seconds, &out)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::EngineScrape {
            address,
            seconds,
            out,
        } => {
            linecard_harness::scrape::run(address, seconds, &out)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Canary { seconds, out } => {
            linecard_harness::canary::run(seconds, &out)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Generate { what, dir } => {
            use clap::CommandFactory;
            linecard_api::cli_docs::generate(Cli::command(), what, "1", &dir)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Bench(BenchCommand::Metrics {
            sessions,
            seconds,
            pairs,
            dir,
            output,
        }) => {
            let report = linecard_harness::bench_metrics::run(
                sessions as usize,
                seconds,
                pairs as usize,
                &dir,
            )?;
            if output.json {
                print_json(&report)?;
            } else {
                print!("{}", linecard_harness::bench_metrics::render(&report));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Bench(BenchCommand::Xdp { repeat, output }) => {
            let report = bench_xdp::run(repeat)?;
            if output.json {
                print_json(&report)?;
            } else {
                print!("{}", bench_xdp::render(&report));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Bench(BenchCommand::Analyze {
            packets,
            sessions,
            phases,
            dir,
            tshark_packets,
            runs,
            keep,
            output,
        }) => {
            let report = bench::run(
                packets,
                sessions,
                phases,
                &dir,
                tshark_packets,
                runs as usize,
                keep,
            )?;
            if output.json {
                print_json(&report)?;
            } else {
                print!("{}", bench::render(&report));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Analyze {
            captures,
            phases,
            manifest,
            out,
            plots,
            output,
        } => analyze_captures(&captures, &phases, manifest, out, plots, &output),
    }
}

/// `linecard analyze`: captures in, figures out (and plots, Parquet).
fn analyze_captures(
    captures: &[std::path::PathBuf],
    phases: &[String],
    manifest: Option<std::path::PathBuf>,
    out: Option<std::path::PathBuf>,
    plots: Option<std::path::PathBuf>,
    output: &Output,
) -> Result<ExitCode> {
    let mut phases = phases
        .iter()
        .map(|p| analyze::parse_phase(p))
        .collect::<Result<Vec<_>>>()?;
    if let Some(manifest) = manifest {
        phases.extend(analyze::manifest_phases(&manifest)?);
    }
    let options = linecard_capture_analyzer::Options {
        phases,
        timeline: plots.is_some(),
    };
    let analysis = analysis_files::analyse(captures, &options, out.as_deref(), Vec::new())?;
    if let Some(dir) = plots {
        for path in plots::write_all(&analysis, &dir)? {
            eprintln!("wrote {}", path.display());
        }
    }
    for w in &analysis.warnings {
        eprintln!("warning [{}]: {}", w.code, w.message);
    }
    if output.json {
        print_json(&analysis)?;
    } else {
        print!("{}", analyze::render(&analysis));
    }
    Ok(ExitCode::SUCCESS)
}

/// `linecard compare A B`.
fn compare_runs(
    a: &std::path::Path,
    b: &std::path::Path,
    html: Option<&std::path::Path>,
    output: &Output,
) -> Result<ExitCode> {
    let comparison = linecard_harness::compare::compare(a, b)?;
    if let Some(path) = html {
        let (va, vb) = (
            linecard_harness::report::load(a)?,
            linecard_harness::report::load(b)?,
        );
        let page = linecard_harness::export::compare::html(&comparison, [&va, &vb])?;
        std::fs::write(path, page)
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    if output.json {
        print_json(&comparison)?;
    } else {
        print!(
            "{}",
            linecard_harness::export::compare::markdown(&comparison)
        );
    }
    Ok(if comparison.b_worse {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// `linecard baseline`'s arguments.
#[derive(Args)]
struct BaselineArgs {
    /// Run directories of the same scenario (their spread is recorded)
    #[arg(required = true)]
    runs: Vec<std::path::PathBuf>,
    /// Slack above the worst run for the gap metrics, ms (counts get 0)
    #[arg(long, default_value_t = 2.0)]
    slack_ms: f64,
    /// The slack for the phases of one profile, PROFILE=MS (repeatable), e.g. L4=8
    #[arg(long = "phase-slack-ms", value_parser = parse_phase_slack)]
    phase_slack_ms: Vec<(String, f64)>,
    /// Slack above the worst run for the detection medians, ms (required when the runs
    /// have one: a fault phase with five Downs of ours or more), e.g. 0.1
    #[arg(long)]
    detection_slack_ms: Option<f64>,
    /// Why the slack is what it is (required: the file must say)
    #[arg(long)]
    slack_reason: String,
    /// Where the values came from, recorded in the file
    #[arg(long, default_value = "")]
    provenance: String,
    /// Output file
    #[arg(long)]
    out: std::path::PathBuf,
}

/// `linecard baseline`: a baseline recorded from repeated runs.
fn record_baseline(args: BaselineArgs) -> Result<ExitCode> {
    let BaselineArgs {
        runs,
        slack_ms,
        phase_slack_ms,
        detection_slack_ms,
        slack_reason,
        provenance,
        out,
    } = args;
    let slack = linecard_harness::gate::Slack {
        default_ms: slack_ms,
        per_profile: phase_slack_ms,
        detection_ms: detection_slack_ms,
        reason: slack_reason,
    };
    let baseline = linecard_harness::gate::record(&runs, &slack, &provenance)?;
    let text = format!(
        "# Recorded by `linecard baseline` from {} runs; the gate's rule: baselines/README.md\n{}",
        runs.len(),
        toml::to_string(&baseline)?
    );
    std::fs::write(&out, text).map_err(|e| anyhow::anyhow!("writing {}: {e}", out.display()))?;
    println!("{}", out.display());
    Ok(ExitCode::SUCCESS)
}

fn main() -> ExitCode {
    // `linecard ... | head` ends quietly, like any Unix tool.
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let cli = Cli::parse();
    // Before any thread starts, so that every thread inherits it.
    linecard_harness::lab::keep_off_dut_cpus();
    match run(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            if linecard_harness::run::space::is_disk_full(&error) {
                eprintln!("hint: the disk is full: free some space (earlier results were not touched) and run again");
            }
            ExitCode::from(2)
        }
    }
}

/// `PROFILE=MS` for `linecard baseline --phase-slack-ms`.
fn parse_phase_slack(text: &str) -> Result<(String, f64), String> {
    let (profile, ms) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?}: expected PROFILE=MS, e.g. L4=8"))?;
    let ms: f64 = ms
        .parse()
        .map_err(|e| format!("{text:?}: the slack {ms:?} is not a number ({e})"))?;
    if !(ms.is_finite() && ms >= 0.0) || profile.is_empty() {
        return Err(format!(
            "{text:?}: expected a profile name and a slack of 0 ms or more"
        ));
    }
    Ok((profile.to_string(), ms))
}
