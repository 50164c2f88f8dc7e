//! `linecardd`: the BFD engine under test.
//!
//! `linecardd --config FILE` runs in the foreground, logs to stderr, on
//! SIGHUP reads FILE again (changing only the sessions it changed), and on
//! SIGTERM or SIGINT sends AdminDown to every peer and exits cleanly.

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use linecard_api::config::SessionSettings;
use linecard_api::{Availability, BackendKind};
use linecard_engine::config::{EngineConfig, DEFAULT_CONTROL_SOCKET};
use linecard_engine::daemon::control::{call, Request};
use linecard_engine::daemon::{Ending, Engine, Signals};
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;

/// `linecardd --version`: the package version, the commit and profile of
/// this build (`build.rs`), and a deliberate regression if compiled in.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("LINECARDD_BUILD"),
    ")",
    regression!(),
    second_build!()
);

/// Names the second build the upgrade scenario hands over to.
#[cfg(feature = "second-build")]
macro_rules! second_build {
    () => {
        " (second build, for the upgrade scenario)"
    };
}
#[cfg(not(feature = "second-build"))]
macro_rules! second_build {
    () => {
        ""
    };
}
use second_build;

/// Names the deliberate regression of a build that has one.
#[cfg(feature = "regress-xdp-replies")]
macro_rules! regression {
    () => {
        " with a deliberate regression: regress-xdp-replies"
    };
}
#[cfg(not(feature = "regress-xdp-replies"))]
macro_rules! regression {
    () => {
        ""
    };
}
use regression;

#[derive(Parser)]
#[command(
    name = "linecardd",
    version = VERSION,
    about = "A BFD engine (RFC 5880/5881/5883) with pluggable transmit backends: naive, rt, deadline, txtime, xdp",
    long_about = "A BFD engine (RFC 5880/5881/5883) with pluggable transmit backends: naive, rt, \
                  deadline, txtime, and xdp, which answers steady sessions from the kernel.\n\n\
                  `linecardd --config FILE` runs in the foreground and logs to stderr. Signals: \
                  SIGHUP reads FILE again and changes only the sessions it changed (as \
                  `linecardd ctl reload` does); SIGTERM and SIGINT send AdminDown to every peer \
                  and exit; SIGUSR2 (xdp) leaves the sessions to the kernel for the next start to \
                  adopt and exits 75 (`--take-over` starts the next one beside this one instead). \
                  Exit status: 0 stopped, 75 handed over to the next start, 2 an error. The \
                  packaged service reads /etc/linecardd/linecardd.toml, answers on \
                  /run/linecardd/linecardd.sock, and restarts on 75.",
    args_conflicts_with_subcommands = true,
    after_help = "Run:     linecardd --config linecardd.toml\n\
                  Inspect: linecardd ctl list            (like FRR's `show bfd peers`)\n\
                  Change:  linecardd ctl set --local 192.0.2.1 --peer 192.0.2.2 --tx-ms 50 --rx-ms 50 --multiplier 3"
)]
struct Cli {
    /// Run the engine with this TOML configuration ([engine] and [[session]] tables)
    #[arg(long)]
    config: Option<PathBuf>,
    /// Take over the sessions of the linecardd running with this file's
    /// control socket, with nothing on the wire (xdp backend): it keeps
    /// answering while this one loads, then hands over and exits. With
    /// none running, a plain start
    #[arg(long, requires = "config")]
    take_over: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Say which transmit backends can run here, and why not
    Backends {
        #[arg(long)]
        json: bool,
    },
    /// Time this build's userspace verification of one authenticated
    /// packet per type (what `linecard bench xdp` sets beside the kernel's)
    Bench {
        /// Verifications per round (the median of 5 rounds is reported)
        #[arg(long, default_value_t = 100_000)]
        repeat: u32,
        #[arg(long)]
        json: bool,
    },
    /// Talk to a running linecardd over its control socket
    Ctl(Ctl),
    /// Write this program's man pages (section 8) or shell completions into DIR (packaging)
    #[command(hide = true)]
    Generate {
        what: linecard_api::cli_docs::Generated,
        dir: PathBuf,
    },
}

#[derive(Args)]
struct Ctl {
    /// The control socket (engine.control_socket)
    #[arg(long, default_value = DEFAULT_CONTROL_SOCKET)]
    socket: PathBuf,
    #[command(subcommand)]
    op: CtlOp,
}

#[derive(Args)]
struct Pair {
    #[arg(long)]
    local: IpAddr,
    #[arg(long)]
    peer: IpAddr,
}

#[derive(Subcommand)]
enum CtlOp {
    /// Hand the sessions to the next linecardd and exit without AdminDown
    /// (as SIGUSR2 does): the kernel answers the peers until the next
    /// `linecardd --config FILE` adopts them (xdp backend)
    Handover,
    /// Read the config file again (as SIGHUP does): added sessions start,
    /// removed ones are sent AdminDown, changed timers go through a Poll
    /// Sequence, a changed send key rolls over; the rest see nothing
    Reload,
    /// Show sessions (state, discriminators, timers, counters)
    List {
        #[arg(long)]
        json: bool,
    },
    /// Show sessions as FRR's bfdd prints `show bfd peers json` (FRR's
    /// keys, units and words), for tools that already parse FRR
    Peers {
        /// As `show bfd peers counters json` instead
        #[arg(long)]
        counters: bool,
    },
    /// Add a session
    Add {
        #[command(flatten)]
        pair: Pair,
        #[arg(long, default_value_t = 1000)]
        tx_ms: i64,
        #[arg(long, default_value_t = 1000)]
        rx_ms: i64,
        #[arg(long, default_value_t = 3)]
        multiplier: i64,
        #[arg(long, default_value = "naive")]
        backend: String,
        #[arg(long)]
        interface: Option<String>,
    },
    /// Remove a session (the peer is sent AdminDown)
    Remove {
        #[command(flatten)]
        pair: Pair,
    },
    /// Change timers; while Up a Poll Sequence announces the change
    Set {
        #[command(flatten)]
        pair: Pair,
        #[arg(long)]
        tx_ms: u32,
        #[arg(long)]
        rx_ms: u32,
        #[arg(long)]
        multiplier: u8,
    },
    /// Set (--down) or clear AdminDown
    Admin {
        #[command(flatten)]
        pair: Pair,
        #[arg(long)]
        down: bool,
    },
    /// Engine-wide drop counters by reason (packets that reached no session)
    Drops,
    /// Per session, only what readiness needs (JSON; cheap at thousands of
    /// sessions, where `list` is megabytes)
    Readiness,
    /// Key rollover: send with another configured key (all stay accepted)
    Key {
        #[command(flatten)]
        pair: Pair,
        /// Auth Key ID to send with; one of the session's `auth.keys`
        #[arg(long)]
        send: u8,
    },
}

static SIGNALS: Signals = Signals::new();

extern "C" fn on_signal(signal: libc::c_int) {
    let flag = match signal {
        libc::SIGHUP => &SIGNALS.reload,
        libc::SIGUSR2 => &SIGNALS.hand_over,
        _ => &SIGNALS.stop,
    };
    flag.store(true, Ordering::Relaxed);
}

fn install_signal_handlers() {
    for signal in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGUSR2] {
        // SAFETY: the handler only stores to an atomic (async-signal-safe);
        // no SA_RESTART, so ppoll returns EINTR and the loop sees STOP.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as *const () as usize;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

fn run_daemon(path: PathBuf, take_over: bool) -> Result<()> {
    let config = EngineConfig::load(&path)?;
    install_signal_handlers();
    let engine = if take_over {
        Engine::taking_over(config)?
    } else {
        Engine::new(config)?
    };
    let mut engine = engine.reloads_from(path);
    eprintln!(
        "linecardd: {} sessions, backend {}",
        engine.session_count(),
        engine.loop_kind()
    );
    let ending = engine.run(&SIGNALS)?;
    // Released as a return would, before an exit that skips destructors.
    drop(engine);
    match ending {
        Ending::Stopped => {}
        Ending::HandedOver(n) => {
            eprintln!("linecardd: {n} sessions handed over; exiting without AdminDown");
        }
        Ending::AwaitingNextStart(n) => {
            eprintln!(
                "linecardd: {n} sessions handed over, waiting in the kernel for the next start; exiting {} without AdminDown",
                linecard_api::control::EXIT_AWAITING_NEXT_START
            );
            std::process::exit(i32::from(linecard_api::control::EXIT_AWAITING_NEXT_START));
        }
    }
    Ok(())
}

/// `ctl list` for people, in the manner of FRR's `show bfd peers`.
fn print_sessions(reply: &linecard_api::control::ListReply) {
    let ms = |us: u32| format!("{}ms", us / 1000);
    for s in &reply.sessions {
        println!(
            "peer {} local-address {} (backend {}, source port {})",
            s.peer, s.local, s.backend, s.source_port
        );
        println!("\tID: {}", s.local_discr);
        println!("\tRemote ID: {}", s.remote.discr);
        println!(
            "\tStatus: {}{}",
            json_name(&s.state),
            if s.polling { " (poll sequence)" } else { "" }
        );
        println!("\tDiagnostics: {}", json_name(&s.diag));
        println!("\tRemote diagnostics: {}", json_name(&s.remote.diag));
        println!("\tLocal timers:");
        println!("\t\tDetect-multiplier: {}", s.detect_mult);
        println!("\t\tReceive interval: {}", ms(s.required_min_rx_us));
        println!("\t\tTransmission interval: {}", ms(s.desired_min_tx_us));
        println!("\tRemote timers:");
        println!("\t\tDetect-multiplier: {}", s.remote.detect_mult);
        println!("\t\tReceive interval: {}", ms(s.remote.min_rx_us));
        println!(
            "\t\tTransmission interval: {}",
            ms(s.remote.desired_min_tx_us)
        );
        let demand = &s.demand;
        if demand.configured || demand.active_at_peer {
            println!(
                "\tDemand mode: asked here {} (verify every {}), active here {}, active at the peer {}",
                demand.configured,
                ms(demand.verify_interval_us),
                demand.active_here,
                demand.active_at_peer
            );
        }
        let drops: Vec<String> = (s.drops.iter())
            .map(|(reason, n)| format!("{} {n}", json_name(reason)))
            .collect();
        println!(
            "\tPackets: in {} out {}; drops [{}]",
            s.counters.packets_in,
            s.counters.packets_out,
            drops.join(", ")
        );
        if let Some(echo) = &s.echo {
            println!(
                "\tEcho (advisory): every {}; sent {} returned {} lost {}; RTT max {} us; longest gap between sends {} us",
                ms(echo.interval_us as u32),
                echo.sent,
                echo.returned,
                echo.lost,
                echo.rtt_max_us.map_or("-".into(), |us| us.to_string()),
                echo.max_send_gap_us
            );
        }
        println!();
    }
}

/// A value's name as the control socket's JSON spells it (`up`,
/// `control_detection_time_expired`, `bad_ttl`).
fn json_name<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => "?".into(),
    }
}

fn run_ctl(ctl: Ctl) -> Result<()> {
    let request = match &ctl.op {
        CtlOp::List { .. } | CtlOp::Peers { .. } => Request::List,
        CtlOp::Reload => Request::Reload,
        CtlOp::Handover => Request::Handover,
        CtlOp::Drops => Request::Drops,
        CtlOp::Readiness => Request::Readiness,
        CtlOp::Add {
            pair,
            tx_ms,
            rx_ms,
            multiplier,
            backend,
            interface,
        } => Request::Add {
            session: Box::new(SessionSettings {
                peer: pair.peer.to_string(),
                local: pair.local.to_string(),
                tx_interval_ms: Some(*tx_ms),
                rx_interval_ms: Some(*rx_ms),
                multiplier: Some(*multiplier),
                backend: Some(backend.clone()),
                interface: interface.clone(),
                multihop: None,
                min_ttl: None,
                offload: None,
                echo: None,
                echo_interval_ms: None,
                passive: None,
                demand: None,
                demand_verify_ms: None,
                auth: None,
            }),
        },
        CtlOp::Remove { pair } => Request::Remove {
            local: pair.local,
            peer: pair.peer,
        },
        CtlOp::Set {
            pair,
            tx_ms,
            rx_ms,
            multiplier,
        } => Request::Set {
            local: pair.local,
            peer: pair.peer,
            tx_interval_ms: *tx_ms,
            rx_interval_ms: *rx_ms,
            multiplier: *multiplier,
        },
        CtlOp::Admin { pair, down } => Request::Admin {
            local: pair.local,
            peer: pair.peer,
            down: *down,
        },
        CtlOp::Key { pair, send } => Request::SendKey {
            local: pair.local,
            peer: pair.peer,
            key_id: *send,
        },
    };
    let reply = call(&ctl.socket, &request)?;
    match ctl.op {
        CtlOp::List { json: false } => print_sessions(&serde_json::from_value(reply)?),
        CtlOp::Peers { counters } => {
            let list: linecard_api::control::ListReply = serde_json::from_value(reply)?;
            let now = linecard_engine::io::clock_ns(libc::CLOCK_REALTIME) as i64;
            let rows: Vec<serde_json::Value> = (list.sessions.iter())
                .map(|s| match counters {
                    true => linecard_engine::frr_json::counters(s),
                    false => linecard_engine::frr_json::peer(s, now),
                })
                .collect();
            println!("{}", serde_json::to_string_pretty(&rows)?);
        }
        CtlOp::Reload => {
            // A refused or partial reload fails the command (systemd's
            // `reload` reports it).
            let report: linecard_api::control::ReloadReport = serde_json::from_value(reply)?;
            println!("{report}");
            if report.refused.is_some() || !report.errors.is_empty() {
                anyhow::bail!("the reload did not apply in full");
            }
        }
        _ => println!("{}", serde_json::to_string_pretty(&reply)?),
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match (cli.config, cli.command) {
        (Some(path), _) => run_daemon(path, cli.take_over).context("linecardd"),
        (None, Some(Command::Backends { json })) => {
            let rows: Vec<(BackendKind, Availability)> = BackendKind::ALL
                .iter()
                .map(|k| (*k, linecard_engine::backend::availability(*k)))
                .collect();
            if json {
                let map: serde_json::Map<_, _> = rows
                    .iter()
                    .map(|(k, a)| {
                        (
                            k.name().to_string(),
                            serde_json::to_value(a).expect("Availability serialises"),
                        )
                    })
                    .collect();
                println!("{}", serde_json::Value::Object(map));
            } else {
                for (kind, availability) in &rows {
                    match availability {
                        Availability::Available => println!("{:<8} available", kind.name()),
                        Availability::Unavailable { reason } => {
                            println!("{:<8} unavailable: {reason}", kind.name())
                        }
                    }
                }
            }
            Ok(())
        }
        (None, Some(Command::Bench { repeat, json })) => {
            linecard_engine::bench::verification_cost(repeat)
                .map_err(anyhow::Error::msg)
                .and_then(|rows| {
                    if json {
                        println!("{}", serde_json::to_string(&rows)?);
                    } else {
                        for r in rows {
                            println!(
                                "{:<16} {:>6} ns   ({})",
                                r.auth_type, r.ns_per_packet, r.method
                            );
                        }
                    }
                    Ok(())
                })
        }
        (None, Some(Command::Ctl(ctl))) => run_ctl(ctl),
        (None, Some(Command::Generate { what, dir })) => {
            use clap::CommandFactory;
            linecard_api::cli_docs::generate(Cli::command(), what, "8", &dir)
                .with_context(|| format!("writing into {}", dir.display()))
        }
        (None, None) => {
            eprintln!("linecardd: give --config FILE to run the engine, or a command (see --help)");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
