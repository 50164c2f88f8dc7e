//! Starting the daemons a run faces: the peer (FRR bfdd, BIRD, or
//! linecardd on its rt backend for counts bfdd cannot hold) and the DUT
//! (FRR bfdd, BIRD, linecardd on a backend, or FRR's bfdd driving
//! linecardd over the dataplane protocol), each with the configuration it
//! is given and ready in its own words before it is handed back.

use super::{
    add_frr_peers, offloads, peer_sessions, spawn_linecardd, spec, wait_dataplane_attached, Bfd,
    ControlPlane, EngineSite, FrrEcho, Kind, LinecarddHost, Pair, PeerSession, Place,
    FRR_DATAPLANE, FRR_REGISTRATION_BURST,
};
use crate::procs;
use crate::scenario::programs::Programs;
use crate::scenario::{DutImplementation, DutSpec, Family, PeerImplementation, Sessions};
use anyhow::{Context, Result};
use std::net::IpAddr;
use std::path::Path;
use std::time::Duration;
pub(super) fn start_peer_daemon(
    implementation: PeerImplementation,
    programs: &Programs,
    sessions: &Sessions,
    pairs: &[Pair],
    dir: &Path,
) -> Result<Bfd> {
    let rest = spec::cpuset_dir(spec::REST_CPUSET);
    let configured = peer_sessions(pairs, sessions, true);
    Ok(match implementation {
        PeerImplementation::Frr => {
            // zebra first: bfdd finds its socket when it starts.
            let echo = FrrEcho::if_echo(
                &programs.zebra(),
                sessions,
                "peer-zebra",
                spec::PEER.namespace,
                &rest,
                &dir.join("peer-frr"),
                true,
            )?;
            Bfd {
                daemon: procs::start_frr_bfdd_program(
                    &programs.bfdd(),
                    "peer-frr",
                    spec::PEER.namespace,
                    Some(&rest),
                    dir,
                    &configured,
                    &[],
                )?,
                kind: Kind::Frr {
                    vty: dir.join("peer-frr"),
                },
                at: Place::Lab(spec::PEER.namespace),
                control_plane: None,
                _echo: echo,
            }
        }
        PeerImplementation::Linecardd => {
            // The same engine, facing the other way, on the peer's CPUs.
            let flipped: Vec<Pair> = pairs
                .iter()
                .map(|p| Pair {
                    dut: p.peer,
                    peer: p.dut,
                })
                .collect();
            let cpus = spec::parse_cpu_list(&std::fs::read_to_string(rest.join("cpuset.cpus"))?)
                .context("the lab's rest cpuset lists no CPUs")?;
            let (daemon, socket) = spawn_linecardd(
                &LinecarddHost {
                    program: &programs.linecardd(),
                    name: "peer-linecardd",
                    namespace: spec::PEER.namespace,
                    cpuset: &rest,
                    site: EngineSite {
                        cpus: &cpus,
                        asks_demand: sessions.demand.is_some_and(|d| d.peer_asks()),
                        interface: spec::HOST_IFACE,
                    },
                },
                "rt",
                "",
                sessions,
                &flipped,
                None,
                dir,
            )?;
            Bfd {
                daemon,
                kind: Kind::Linecardd {
                    socket,
                    offloads: false,
                    offload_only: None,
                },
                at: Place::Lab(spec::PEER.namespace),
                control_plane: None,
                _echo: None,
            }
        }
        PeerImplementation::Bird => {
            let router_id: IpAddr = spec::PEER.ipv4.parse()?;
            Bfd {
                daemon: procs::start_bird_program(
                    &programs.bird(),
                    "peer-bird",
                    spec::PEER.namespace,
                    Some(&rest),
                    dir,
                    &procs::bird_config(router_id, &configured),
                )?,
                kind: Kind::Bird {
                    ctl: dir.join("peer-bird").join("bird.ctl"),
                    peers: pairs.iter().map(|p| p.dut).collect(),
                },
                at: Place::Lab(spec::PEER.namespace),
                control_plane: None,
                _echo: None,
            }
        }
    })
}

/// The configuration of a linecardd on `host` with a session per pair.
/// `engine`: the scenario's extra `[engine]` keys (TOML), which take the
/// place of the runner's defaults.
pub(crate) fn linecardd_config(
    site: &EngineSite,
    backend: &str,
    engine: &str,
    sessions: &Sessions,
    pairs: &[Pair],
    offload_only: Option<Family>,
    socket: &Path,
) -> String {
    let (dut_cpus, asks_demand) = (site.cpus, site.asks_demand);
    let mut config = format!("[engine]\ncontrol_socket = \"{}\"\n", socket.display());
    let extra: toml::Table = engine.parse().unwrap_or_default();
    if !extra.contains_key("rt_priority") {
        config.push_str("rt_priority = 90\n");
    }
    if let (Some(cpu), false) = (dut_cpus.first(), extra.contains_key("cpu")) {
        config.push_str(&format!("cpu = {cpu}\n"));
    }
    config.push_str(engine);
    for pair in pairs {
        config.push_str(&format!(
            "\n[[session]]\npeer = \"{}\"\nlocal = \"{}\"\ntx_interval_ms = {}\nrx_interval_ms = {}\nmultiplier = {}\nbackend = \"{backend}\"\n",
            pair.peer,
            pair.dut,
            sessions.tx_interval_ms,
            sessions.rx_interval_ms,
            sessions.multiplier,
        ));
        // The fast path attaches to it; etf sits on it; echoes go out on it.
        if matches!(backend, "xdp" | "txtime") || sessions.echo {
            config.push_str(&format!("interface = \"{}\"\n", site.interface));
        }
        if offload_only.is_some_and(|f| f != Family::of(pair.dut)) {
            config.push_str("offload = false\n");
        }
        if sessions.echo {
            // Our echoes at the control interval; the xdp backend also
            // reflects the peer's (and so advertises Required Min Echo RX).
            config.push_str(&format!(
                "echo = true\necho_interval_ms = {}\n",
                sessions.tx_interval_ms,
            ));
        }
        if sessions.multihop {
            config.push_str("multihop = true\n");
            if let Some(ttl) = sessions.min_ttl {
                config.push_str(&format!("min_ttl = {ttl}\n"));
            }
        }
        if asks_demand {
            // A verification Poll every second (the engine's default).
            config.push_str("demand = true\n");
        }
        if let Some(auth) = &sessions.auth {
            // Validated printable, without quotes or backslashes.
            config.push_str(&format!(
                "auth = {{ type = \"{}\", keys = [{{ id = {}, secret = \"{}\" }}] }}\n",
                auth.kind, auth.key_id, auth.secret
            ));
        }
    }
    config
}

pub fn start_dut(
    dut: &DutSpec,
    sessions: &Sessions,
    pairs: &[Pair],
    dir: &Path,
    dut_cpus: &[usize],
) -> Result<Bfd> {
    let cpuset = spec::cpuset_dir(spec::DUT_CPUSET);
    let engine = dut.engine.as_str();
    let linecardd = dut.programs.linecardd();
    match &dut.implementation {
        DutImplementation::Frr => {
            let configured = peer_sessions(pairs, sessions, false);
            // FRR reflects by forwarding, and runs echo with zebra.
            let echo = FrrEcho::if_echo(
                &dut.programs.zebra(),
                sessions,
                "dut-zebra",
                spec::DUT.namespace,
                &cpuset,
                &dir.join("dut-frr"),
                true,
            )?;
            Ok(Bfd {
                daemon: procs::start_frr_bfdd_program(
                    &dut.programs.bfdd(),
                    "dut-frr",
                    spec::DUT.namespace,
                    Some(&cpuset),
                    dir,
                    &configured,
                    &[],
                )?,
                kind: Kind::Frr {
                    vty: dir.join("dut-frr"),
                },
                at: Place::Lab(spec::DUT.namespace),
                control_plane: None,
                _echo: echo,
            })
        }
        DutImplementation::FrrDataplane { backend } => {
            let configured = peer_sessions(pairs, sessions, false);
            // bfdd seeds its discriminators with the second it started in:
            // a peer bfdd started in the same second draws the same ones,
            // and a my/your mix-up could hide (docs/frr-dataplane.md).
            let second = crate::sys::unix_ns() / 1_000_000_000;
            while crate::sys::unix_ns() / 1_000_000_000 == second {
                std::thread::sleep(Duration::from_millis(10));
            }
            // Past the registration burst's limit, bfdd starts empty and
            // the peers are added one command at a time once linecardd is
            // connected.
            let in_config: &[PeerSession] = if configured.len() <= FRR_REGISTRATION_BURST {
                &configured
            } else {
                &[]
            };
            // bfdd needs zebra for its echo-mode (interface) peers; the
            // reflector is linecardd's fast path, not forwarding.
            let echo = FrrEcho::if_echo(
                &dut.programs.zebra(),
                sessions,
                "dut-zebra",
                spec::DUT.namespace,
                &cpuset,
                &dir.join("dut-frr-control"),
                false,
            )?;
            let control = procs::start_frr_bfdd_program(
                &dut.programs.bfdd(),
                "dut-frr-control",
                spec::DUT.namespace,
                Some(&cpuset),
                dir,
                in_config,
                &["--dplaneaddr".into(), format!("ipv4:{FRR_DATAPLANE}")],
            )?;
            let vty = dir.join("dut-frr-control");
            let engine_keys = format!(
                "frr_dataplane = \"{FRR_DATAPLANE}\"\nfrr_backend = \"{backend}\"\n{engine}"
            );
            // No sessions of its own: bfdd hands them over.
            let (daemon, socket) = spawn_linecardd(
                &LinecarddHost::dut(&linecardd, &cpuset, dut_cpus, sessions),
                backend,
                &engine_keys,
                sessions,
                &[],
                None,
                dir,
            )?;
            if in_config.is_empty() && !configured.is_empty() {
                wait_dataplane_attached(&vty)?;
                add_frr_peers(&vty, &configured)?;
            }
            Ok(Bfd {
                daemon,
                kind: Kind::Linecardd {
                    socket,
                    offloads: offloads(backend, engine),
                    offload_only: None,
                },
                at: Place::Lab(spec::DUT.namespace),
                control_plane: Some(ControlPlane {
                    daemon: control,
                    vty,
                }),
                _echo: echo,
            })
        }
        DutImplementation::Linecardd { backend } => {
            let (daemon, socket) = spawn_linecardd(
                &LinecarddHost::dut(&linecardd, &cpuset, dut_cpus, sessions),
                backend,
                engine,
                sessions,
                pairs,
                dut.offload_only,
                dir,
            )?;
            Ok(Bfd {
                daemon,
                kind: Kind::Linecardd {
                    socket,
                    offloads: offloads(backend, engine),
                    offload_only: dut.offload_only,
                },
                at: Place::Lab(spec::DUT.namespace),
                control_plane: None,
                _echo: None,
            })
        }
    }
}
