//! `linecard run SCENARIO`: the scenario read and checked, its plan
//! printed (`--check`, `--dry-run`), or its run with the summary.

use crate::{print_json, Output};
use anyhow::Result;
use clap::Args;
use std::process::ExitCode;

#[derive(Args)]
pub(crate) struct RunArgs {
    /// Scenario file (scenarios/*.toml)
    pub(crate) scenario: std::path::PathBuf,
    /// Stress profiles directory (default: stress-profiles/ beside the scenario's directory)
    #[arg(long)]
    pub(crate) profiles: Option<std::path::PathBuf>,
    /// Results directory
    #[arg(long, default_value = "results")]
    pub(crate) results: std::path::PathBuf,
    /// Run only the DUT with this label (repeatable)
    #[arg(long = "only", value_name = "LABEL")]
    pub(crate) only: Vec<String>,
    /// Validate the scenario and its profiles, print the plan, and stop
    #[arg(long)]
    pub(crate) check: bool,
    /// Print every command the provider would run (the proxmox provider's qm plan), and stop
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Run this program as one DUT for this run, LABEL=PATH (repeatable):
    /// its linecardd, or FRR's bfdd for an FRR DUT; checked before anything
    /// starts, and recorded in the manifest with its SHA-256 and version.
    /// Example: --dut-binary xdp=./target/release/linecardd
    #[arg(long = "dut-binary", value_name = "LABEL=PATH", value_parser = parse_dut_binary)]
    pub(crate) dut_binary: Vec<(String, std::path::PathBuf)>,
    /// When another linecard holds the local lab, wait up to this long for
    /// it (default: refuse at once, naming it)
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    pub(crate) wait: u64,
    #[command(flatten)]
    pub(crate) output: Output,
}

/// `LABEL=PATH` for `--dut-binary`.
fn parse_dut_binary(text: &str) -> Result<(String, std::path::PathBuf), String> {
    match text.split_once('=') {
        Some((label, path)) if !label.is_empty() && !path.is_empty() => {
            Ok((label.to_string(), path.into()))
        }
        _ => Err(format!(
            "{text:?}: expected LABEL=PATH, e.g. xdp=./target/release/linecardd"
        )),
    }
}

pub(crate) fn scenario(args: RunArgs) -> Result<ExitCode> {
    let RunArgs {
        scenario,
        profiles,
        results,
        only,
        check,
        dry_run,
        dut_binary,
        wait,
        output,
    } = args;
    let profiles =
        profiles.unwrap_or_else(|| linecard_harness::scenario::default_profiles_dir(&scenario));
    let mut scenario = linecard_harness::scenario::Scenario::load(&scenario, &profiles)?;
    for (label, path) in dut_binary {
        let Some(dut) = scenario.duts.iter_mut().find(|d| d.label == label) else {
            anyhow::bail!("--dut-binary {label}=...: the scenario has no DUT labelled {label:?}");
        };
        if scenario.provider != linecard_harness::scenario::ProviderKind::Local {
            anyhow::bail!("--dut-binary: programs by path run in the local lab only");
        }
        dut.set_binary(std::path::absolute(&path)?);
    }
    // Every program named, checked before anything starts; only a run
    // asks them their --version (below): reviewing runs nothing.
    linecard_harness::scenario::programs::check(&scenario)?;
    if let Some(label) = only
        .iter()
        .find(|l| !scenario.duts.iter().any(|d| d.answers_to(l)))
    {
        anyhow::bail!(
            "--only {label:?}: the scenario has no such DUT (labels: {})",
            scenario
                .duts
                .iter()
                .map(|d| format!("{:?}", d.label))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if dry_run {
        match &scenario.proxmox {
            Some(p) => print!(
                "{}",
                linecard_harness::run::proxmox::render(
                    p,
                    &scenario.name,
                    &linecard_harness::run::proxmox::Owner::draw("RUN_ID")?
                )
            ),
            None => print!("{}", linecard_harness::export::plan::plan(&scenario)),
        }
        return Ok(ExitCode::SUCCESS);
    }
    if check {
        if output.json {
            print_json(&scenario)?;
        } else {
            print!("{}", linecard_harness::export::plan::plan(&scenario));
        }
        return Ok(ExitCode::SUCCESS);
    }
    linecard_harness::scenario::programs::check_answers(&scenario)?;
    // An ssh or proxmox scenario runs on its hosts, as root there; a
    // local one holds the lab for its whole run (`run::run`, once its
    // input is checked).
    if scenario.provider == linecard_harness::scenario::ProviderKind::Local {
        linecard_harness::sys::require_root("linecard run")?;
    }
    linecard_harness::run::install_interrupt_handler();
    let result = linecard_harness::run::run(
        &scenario,
        &linecard_harness::run::RunOptions {
            results,
            only,
            profiles,
            run_id: None,
            lab_wait: std::time::Duration::from_secs(wait),
        },
    )?;
    if output.json {
        print_json(&result.manifest)?;
    } else {
        print!(
            "{}",
            linecard_harness::export::summary::summary_markdown(&result.manifest)
        );
        println!("\nresults: {}", result.dir.display());
    }
    Ok(ExitCode::from(result.exit_code() as u8))
}
