//! `linecardd`: the BFD engine under test.

use clap::{Parser, Subcommand};
use linecard_engine::backend::{self, Availability};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "linecardd",
    version,
    about = "BFD engine with pluggable transmit backends (naive, rt, txtime, xdp)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Say which transmit backends this build can run here, and why not
    Backends {
        /// Print JSON on stdout
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Backends { json } => {
            let rows = [("xdp", backend::xdp::availability())];
            if json {
                let map: serde_json::Map<_, _> = rows
                    .iter()
                    .map(|(name, a)| (name.to_string(), serde_json::to_value(a).unwrap()))
                    .collect();
                println!("{}", serde_json::Value::Object(map));
            } else {
                for (name, availability) in &rows {
                    match availability {
                        Availability::Available => println!("{name:<8} available"),
                        Availability::Unavailable { reason } => {
                            println!("{name:<8} unavailable: {reason}")
                        }
                    }
                }
            }
            ExitCode::SUCCESS
        }
    }
}
