//! An engine built: the file's checks and negative controls announced,
//! its control socket, its fast path (adopting a running engine's when one
//! handed over, or taking over from one that runs), then its sessions.
//! Split out of `mod.rs` by responsibility.

use super::{control, frr, handover, log, monotonic_ns, random_u64, DueQueue, Engine};
use crate::backend::{self, xdp::FastPath};
use crate::config::EngineConfig;
use crate::session::table::SessionTable;
use anyhow::{bail, Context, Result};
use linecard_api::{Availability, BackendKind};
use linecard_common::bfd::{DropReason, PORT_SINGLE_HOP};
use std::os::unix::net::UnixListener;
use std::time::Instant;

/// Says which negative controls are on, and checks the file's backend can
/// run here; the loop's backend.
fn announce_and_check(config: &EngineConfig) -> Result<BackendKind> {
    if !config.verify_authentication {
        log("NEGATIVE CONTROL: verify_authentication = false: authenticated sessions accept forged and replayed packets");
    }
    if config.never_leave_init {
        log("NEGATIVE CONTROL: never_leave_init = true: no session ever comes Up");
    }
    if config.xdp_sweep_fixed_period {
        log(
            "NEGATIVE CONTROL: xdp_sweep_fixed_period = true: the kernel detects up to 0.5 ms late",
        );
    }
    if !config.handover_adopt {
        log("NEGATIVE CONTROL: handover_adopt = false: a handed-over engine's sessions are sent AdminDown, not adopted");
    }
    let loop_kind = loop_kind(config)?;
    if let Availability::Unavailable { reason } = crate::backend::availability(loop_kind) {
        bail!("the {loop_kind} backend cannot run here: {reason}");
    }
    Ok(loop_kind)
}

/// The loop all sessions of one engine share (one receive port per host),
/// those FRR will create included.
fn loop_kind(config: &EngineConfig) -> Result<BackendKind> {
    let mut kinds: Vec<BackendKind> = config.sessions.iter().map(|s| s.backend).collect();
    if config.frr_dataplane.is_some() {
        kinds.push(config.frr_backend);
    }
    kinds.sort_by_key(|k| k.name());
    kinds.dedup();
    match kinds.as_slice() {
        [] => Ok(BackendKind::Naive),
        [one] => Ok(*one),
        _ => bail!(
            "sessions ask for several backends ({}); one linecardd runs one backend (they share the BFD port)",
            kinds.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
        ),
    }
}

impl Engine {
    pub fn new(config: EngineConfig) -> Result<Self> {
        Self::with_port(config, PORT_SINGLE_HOP)
    }

    /// `port`: the BFD control port (tests use others to avoid clashes).
    pub fn with_port(config: EngineConfig, port: u16) -> Result<Self> {
        let loop_kind = announce_and_check(&config)?;
        let control = control::open_socket(&config.control_socket)?;
        // A running engine's sessions, handed over (SIGUSR2, `ctl
        // handover`) before this process started.
        let (record, adoption) = match handover::pending(&config) {
            Some(pending) => (Some(pending.record), Some(pending.adoption)),
            None => (None, None),
        };
        let fast = if loop_kind == BackendKind::Xdp {
            Some(FastPath::load(&config, adoption)?)
        } else {
            None
        };
        Self::assemble(config, port, control, fast, record, None)
    }

    /// Takes over from the engine running with the same control socket,
    /// while it runs (`linecardd --config FILE --take-over`): it pins its
    /// maps, this process loads its program on them (the verifier's
    /// second passes with the running engine still answering and
    /// beating), then it hands its sessions over and exits, and this one
    /// adopts them. Refused before anything is handed over (the running
    /// engine untouched) when the two builds' map layouts differ. With no
    /// engine running, a plain start.
    pub fn taking_over(config: EngineConfig) -> Result<Self> {
        let loop_kind = announce_and_check(&config)?;
        let socket = config.control_socket.clone();
        let prepared = match control::call(&socket, &control::Request::PrepareHandover) {
            Ok(reply) => reply,
            Err(e) if !socket.exists() => {
                log(&format!("nothing to take over ({e:#}): starting afresh"));
                return Self::new(config);
            }
            Err(e) => return Err(e.context("asking the running engine to prepare a handover")),
        };
        let adoption = handover::prepared(&config, &prepared)?;
        if loop_kind != BackendKind::Xdp {
            bail!("taking over needs the xdp backend: the file runs {loop_kind}");
        }
        let fast =
            FastPath::load(&config, Some(adoption)).inspect_err(|_| handover::abandon(&config))?;
        let (said, predecessor) = control::call_keeping(&socket, &control::Request::Handover)
            .context("asking the running engine to hand over")?;
        log(&format!("the running engine said {said}"));
        let control = control::open_socket(&config.control_socket)?;
        let record = handover::take_record(&config, true);
        Self::assemble(
            config,
            PORT_SINGLE_HOP,
            control,
            Some(fast),
            record,
            Some(predecessor),
        )
    }

    /// The engine around its socket and fast path, its file's sessions
    /// added (adopted first from `record`).
    fn assemble(
        config: EngineConfig,
        port: u16,
        control: UnixListener,
        fast: Option<FastPath>,
        record: Option<handover::HandoverRecord>,
        predecessor: Option<std::os::unix::net::UnixStream>,
    ) -> Result<Self> {
        let loop_kind = loop_kind(&config)?;
        let sessions = config.sessions.clone();
        let transmitter = backend::transmitter(loop_kind, &config);
        let epoch = Instant::now();
        let epoch_mono_ns = monotonic_ns();
        let epoch_unix_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i64);
        let frr = config
            .frr_dataplane
            .map(|addr| frr::FrrLink::new(addr, config.frr_hold_seconds));
        let metrics = match config.metrics {
            Some(addr) => {
                let kernel = fast.as_ref().map(FastPath::metrics_maps).transpose()?;
                Some(crate::metrics::start(addr, kernel)?)
            }
            None => None,
        };
        let mut engine = Self {
            config,
            config_path: None,
            transmitter,
            table: SessionTable::default(),
            rx: [None, None, None, None],
            control,
            pending: Vec::new(),
            drops: [0; DropReason::ALL.len()],
            epoch,
            epoch_mono_ns,
            epoch_unix_ns,
            fast,
            frr,
            echo: None,
            echo_sessions: Vec::new(),
            seed: random_u64(),
            port,
            full_pass_wanted: true,
            last_full_pass: 0,
            due: DueQueue::default(),
            handed_over: false,
            successor: None,
            successor_prepared: false,
            predecessor,
            metrics,
        };
        let record = match record {
            Some(record) if !engine.config.handover_adopt => {
                handover::refuse(&record, "handover_adopt = false (the negative control)");
                None
            }
            record => record,
        };
        match record {
            Some(record) => engine.take_over(sessions, record)?,
            None => {
                if let Some(fast) = engine.fast.as_mut() {
                    fast.adopted();
                    fast.start_responder()?;
                }
                engine.predecessor = None;
                for spec in sessions {
                    engine.add_session(spec)?;
                }
            }
        }
        Ok(engine)
    }
}
