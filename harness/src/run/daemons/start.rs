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
use linecard_api::config::{
    AuthKeySettings, AuthSettings, ConfigFile, EngineSettings, SessionSettings,
};
use linecard_api::BackendKind;
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
                        metrics: None,
                    },
                },
                BackendKind::Rt,
                &EngineSettings::default(),
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

/// The configuration of a linecardd on `site` with a session per pair,
/// serialized from `linecard_api::config`'s types. `engine`: the
/// scenario's `[engine]` settings, which take the place of the runner's
/// defaults.
pub(crate) fn linecardd_config(
    site: &EngineSite,
    backend: BackendKind,
    engine: &EngineSettings,
    sessions: &Sessions,
    pairs: &[Pair],
    offload_only: Option<Family>,
    socket: &Path,
) -> String {
    let mut engine = EngineSettings {
        control_socket: Some(socket.into()),
        ..engine.clone()
    };
    engine.rt_priority.get_or_insert(90);
    if let Some(address) = site.metrics {
        engine.metrics = Some(address.to_string());
    }
    if let Some(&cpu) = site.cpus.first() {
        engine.cpu.get_or_insert(cpu as i64);
    }
    // The fast path attaches to it; etf sits on it; echoes go out on it.
    let interface = (matches!(backend, BackendKind::Xdp | BackendKind::Txtime) || sessions.echo)
        .then(|| site.interface.to_string());
    let session = pairs
        .iter()
        .map(|pair| SessionSettings {
            interface: interface.clone(),
            offload: offload_only
                .is_some_and(|f| f != Family::of(pair.dut))
                .then_some(false),
            // Our echoes at the control interval; the xdp backend also
            // reflects the peer's (and so advertises Required Min Echo RX).
            echo: sessions.echo.then_some(true),
            echo_interval_ms: sessions.echo.then_some(i64::from(sessions.tx_interval_ms)),
            multihop: sessions.multihop.then_some(true),
            min_ttl: sessions
                .min_ttl
                .filter(|_| sessions.multihop)
                .map(i64::from),
            // A verification Poll every second (the engine's default).
            demand: site.asks_demand.then_some(true),
            auth: sessions.auth.as_ref().map(|auth| AuthSettings {
                kind: auth.kind.clone(),
                keys: vec![AuthKeySettings {
                    id: i64::from(auth.key_id),
                    secret: auth.secret.clone(),
                }],
                send_key: None,
                digest: None,
            }),
            ..crate::linecardd::session_settings(
                &pair.dut,
                &pair.peer,
                (
                    sessions.tx_interval_ms,
                    sessions.rx_interval_ms,
                    sessions.multiplier,
                ),
                backend,
            )
        })
        .collect();
    toml::to_string(&ConfigFile { engine, session })
        .expect("linecardd's config types serialize to TOML")
}

pub fn start_dut(
    dut: &DutSpec,
    sessions: &Sessions,
    pairs: &[Pair],
    dir: &Path,
    dut_cpus: &[usize],
) -> Result<Bfd> {
    let cpuset = spec::cpuset_dir(spec::DUT_CPUSET);
    let engine = &dut.engine;
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
            let engine_keys = EngineSettings {
                frr_dataplane: Some(FRR_DATAPLANE.to_string()),
                frr_backend: Some(backend.to_string()),
                ..engine.clone()
            };
            // No sessions of its own: bfdd hands them over.
            let (daemon, socket) = spawn_linecardd(
                &LinecarddHost::dut(&linecardd, &cpuset, dut_cpus, sessions),
                *backend,
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
                    offloads: offloads(*backend, engine),
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
                *backend,
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
                    offloads: offloads(*backend, engine),
                    offload_only: dut.offload_only,
                },
                at: Place::Lab(spec::DUT.namespace),
                control_plane: None,
                _echo: None,
            })
        }
    }
}
