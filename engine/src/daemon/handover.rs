//! A hitless restart: the running engine hands its sessions to the next
//! process (SIGUSR2, `linecardd ctl handover`) instead of taking them Down
//! (SIGTERM). It writes what userspace knows of each session beside its
//! control socket (`<socket>.handover`, mode 0600), pins the fast path
//! (`backend/xdp/handover.rs`) and exits without a packet; the kernel
//! answers the peers meanwhile. The next `linecardd --config FILE` finds
//! both, checks the record against its build and its file, and adopts:
//! each session the file still has keeps its slot, discriminator, source
//! port and state; one the file no longer has is sent AdminDown (RFC 5880
//! 6.8.16); a new one starts. A record it cannot use is refused with the
//! reason, its sessions sent AdminDown, never left to time out.

use super::{log, Engine};
use crate::backend::xdp::Adoption;
use crate::config::{EngineConfig, SessionSpec};
use crate::session::handover::Snapshot;
use crate::session::table::{PathKey, SessionId};
use anyhow::{bail, Context, Result};
use linecard_api::BackendKind;
use serde::{Deserialize, Serialize};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

/// The record's format; bumped with any change a previous build would
/// misread (the build that reads it refuses another).
pub const HANDOVER_FORMAT: u32 = 1;

/// What a handing-over engine writes for the next one.
#[derive(Debug, Serialize, Deserialize)]
pub struct HandoverRecord {
    pub format: u32,
    /// The kernel-shared types' layout the pinned maps hold
    /// (`linecard_common::LAYOUT_VERSION`).
    pub layout_version: u32,
    /// `linecardd --version` of the writer, for the log.
    pub written_by: String,
    /// The program in the pinned attachments
    /// (`linecard_bpf_objects::identity`): a successor whose own is the
    /// same keeps it.
    #[serde(default)]
    pub program_identity: Option<String>,
    pub sessions: Vec<SessionRecord>,
}

/// One session, as the next process needs it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionRecord {
    /// Its slot in the table and in the kernel's per-session arrays.
    pub id: SessionId,
    pub local: IpAddr,
    pub peer: IpAddr,
    pub multihop: bool,
    pub local_discr: u32,
    pub detect_mult: u8,
    pub source_port: u16,
    pub snapshot: Snapshot,
}

impl SessionRecord {
    fn path(&self) -> PathKey {
        PathKey {
            local: self.local,
            peer: self.peer,
            multihop: self.multihop,
        }
    }
}

/// Where the engine answering on `control_socket` writes its record.
pub fn record_path(control_socket: &Path) -> PathBuf {
    let mut name = control_socket.as_os_str().to_owned();
    name.push(".handover");
    PathBuf::from(name)
}

/// A handover waiting for this engine: its record and pinned fast path.
pub struct Pending {
    pub record: HandoverRecord,
    pub adoption: Adoption,
}

/// The handover waiting at `config`'s socket, if any and usable. A record
/// this build cannot adopt is refused, its sessions sent AdminDown and its
/// pins released (the kernel then stops answering for them), never left
/// to lapse silently.
pub fn pending(config: &EngineConfig) -> Option<Pending> {
    let adoption = Adoption::at(&config.handover_dir);
    match (take_record(config, adoption.is_some()), adoption) {
        (Some(record), Some(adoption)) => {
            let adoption = adoption.running(record.program_identity.clone());
            Some(Pending { record, adoption })
        }
        (_, adoption) => {
            if let Some(adoption) = adoption {
                adoption.finish();
            }
            None
        }
    }
}

/// The record at `config`'s socket, removed from there, if this build can
/// adopt it (`pinned`: the fast path it describes is pinned). Otherwise
/// the reason is logged and its sessions are sent AdminDown.
pub fn take_record(config: &EngineConfig, pinned: bool) -> Option<HandoverRecord> {
    let path = record_path(&config.control_socket);
    let text = std::fs::read_to_string(&path).ok()?;
    let _ = std::fs::remove_file(&path);
    let record: HandoverRecord = match serde_json::from_str(&text) {
        Ok(record) => record,
        Err(e) => {
            log(&format!(
                "handover refused: {} is unreadable ({e}); starting afresh",
                path.display()
            ));
            return None;
        }
    };
    let refused = if record.format != HANDOVER_FORMAT {
        Some(format!(
            "its format is {} and this build reads {HANDOVER_FORMAT}",
            record.format
        ))
    } else if record.layout_version != linecard_common::LAYOUT_VERSION {
        Some(format!(
            "its maps hold layout {} and this build's program layout {} (no migration between them)",
            record.layout_version,
            linecard_common::LAYOUT_VERSION
        ))
    } else if !pinned {
        Some(format!(
            "its pinned fast path ({}) is gone",
            config.handover_dir.display()
        ))
    } else if config
        .sessions
        .iter()
        .any(|s| s.backend != BackendKind::Xdp)
    {
        Some("this engine's file is not an xdp engine's".into())
    } else {
        None
    };
    match refused {
        None => {
            log(&format!(
                "taking over {} sessions from {}",
                record.sessions.len(),
                record.written_by
            ));
            Some(record)
        }
        Some(why) => {
            refuse(&record, &why);
            None
        }
    }
}

/// A record not adopted, for `why`: every session it describes is sent
/// AdminDown (RFC 5880 6.8.16) and starts afresh, never left to time out.
pub fn refuse(record: &HandoverRecord, why: &str) {
    log(&format!(
        "handover from {} refused: {why}; its {} sessions are sent AdminDown and start afresh",
        record.written_by,
        record.sessions.len()
    ));
    for s in &record.sessions {
        admin_down(s);
    }
}

/// What the running engine said to `prepare_handover`: its maps pinned at
/// `config.handover_dir`, in a layout this build shares. Refused (and the
/// pins released: the running engine goes on, untouched) otherwise.
pub fn prepared(config: &EngineConfig, reply: &serde_json::Value) -> Result<Adoption> {
    let layout = reply["layout_version"].as_u64();
    let format = reply["format"].as_u64();
    if layout != Some(u64::from(linecard_common::LAYOUT_VERSION))
        || format != Some(u64::from(HANDOVER_FORMAT))
    {
        abandon(config);
        bail!(
            "take-over refused: the running engine's maps hold layout {layout:?} (handover format {format:?}), \
             this build's are layout {} (format {HANDOVER_FORMAT}); no migration between them. \
             The running engine goes on; stop it (AdminDown to its peers) to start this build",
            linecard_common::LAYOUT_VERSION
        );
    }
    let program = reply["program_identity"].as_str().map(String::from);
    Adoption::at(&config.handover_dir)
        .map(|a| a.running(program))
        .with_context(|| {
            format!(
                "the running engine pinned nothing at {}",
                config.handover_dir.display()
            )
        })
}

/// Releases a prepared handover's pins (the running engine keeps its own
/// descriptors and goes on).
pub fn abandon(config: &EngineConfig) {
    if let Some(adoption) = Adoption::at(&config.handover_dir) {
        adoption.finish();
    }
}

/// AdminDown for a session no process runs any more (RFC 5880 6.8.16),
/// from its own source port when it is free: the session as the record
/// has it, taken down by its own state machine.
fn admin_down(record: &SessionRecord) {
    let port = if record.multihop {
        linecard_common::bfd::PORT_MULTI_HOP
    } else {
        linecard_common::bfd::PORT_SINGLE_HOP
    };
    let open = |taken: &dyn Fn(u16) -> bool| {
        crate::io::TxSocket::open(record.local, record.peer, port, None, taken)
    };
    let Ok(tx) = open(&|p| p != record.source_port).or_else(|_| open(&|_| false)) else {
        return;
    };
    let config = crate::session::SessionConfig {
        local_discr: record.local_discr,
        desired_min_tx_us: record.snapshot.desired_min_tx_us,
        required_min_rx_us: record.snapshot.required_min_rx_us,
        detect_mult: record.detect_mult,
        required_min_echo_rx_us: 0,
        passive: false,
        demand: false,
        demand_verify_us: 0,
    };
    let mut session = crate::session::Session::adopt(config, &record.snapshot, 0, 1);
    session.set_admin_down(0, true);
    if let Some(packet) = session.poll_transmit(0) {
        let _ = tx.send(&packet.to_bytes());
    }
}

impl Engine {
    /// The first half of a take-over (`linecardd --take-over`): pins the
    /// maps for the next process to load its program on, and goes on as
    /// before. Its reply names the layout, so that a build that cannot
    /// share the maps refuses before anything is handed over.
    pub fn prepare_handover(&mut self) -> Result<serde_json::Value> {
        let fast = match (self.loop_kind(), self.fast.as_mut()) {
            (BackendKind::Xdp, Some(fast)) => fast,
            (kind, _) => bail!("the {kind} backend has nothing in the kernel to hand over"),
        };
        let pinned = fast.pin_maps(&self.config.handover_dir)?;
        // The successor binds each session's source port while we still
        // hold it (our responder sends from it until relieved).
        for id in self.table.ids().collect::<Vec<_>>() {
            if let Some((_, _, peer)) = self.table.get(id) {
                peer.tx.share_port().context("sharing a source port")?;
            }
        }
        log(&format!(
            "pinned {pinned} maps at {} for the next process",
            self.config.handover_dir.display()
        ));
        self.successor_prepared = true;
        Ok(serde_json::json!({
            "pinned": pinned,
            "format": HANDOVER_FORMAT,
            "layout_version": linecard_common::LAYOUT_VERSION,
            "program_identity": fast.identity(),
        }))
    }

    /// Hands every session over: the record, then the fast path's pins.
    /// Refused (the engine runs on, unchanged) for a backend with nothing
    /// in the kernel to answer meanwhile, or a session whose state does not
    /// travel. The caller exits without AdminDown once this succeeds.
    pub fn hand_over(&mut self) -> Result<usize> {
        if self.loop_kind() != BackendKind::Xdp {
            bail!(
                "the {} backend has nothing in the kernel to answer while no process runs: a restart is an outage",
                self.loop_kind()
            );
        }
        if self.frr.is_some() {
            bail!("FRR's bfdd drives this engine: its sessions are bfdd's to restart");
        }
        let mut sessions = Vec::new();
        for id in self.table.ids() {
            let (path, session, peer) = self.table.get(id).expect("a live id");
            let snapshot = session
                .snapshot()
                .with_context(|| format!("session {} -> {}", path.local, path.peer))?;
            sessions.push(SessionRecord {
                id,
                local: path.local,
                peer: path.peer,
                multihop: path.multihop,
                local_discr: session.config().local_discr,
                detect_mult: session.config().detect_mult,
                source_port: peer.tx.source_port,
                snapshot,
            });
        }
        let record = HandoverRecord {
            format: HANDOVER_FORMAT,
            layout_version: linecard_common::LAYOUT_VERSION,
            written_by: format!("linecardd {}", env!("CARGO_PKG_VERSION")),
            program_identity: self.fast.as_ref().map(|f| f.identity().to_string()),
            sessions,
        };
        let path = record_path(&self.config.control_socket);
        write_private(&path, &serde_json::to_vec(&record)?)?;
        let dir = self.config.handover_dir.clone();
        let fast = self.fast.as_mut().expect("an xdp engine has a fast path");
        if let Err(e) = fast.hand_over(&dir) {
            let _ = std::fs::remove_file(&path);
            if let Some(adoption) = Adoption::at(&dir) {
                adoption.finish();
            }
            return Err(e.context("pinning the fast path"));
        }
        let _ = std::fs::remove_file(&self.config.control_socket);
        // The receive ports are the successor's now.
        self.rx = [None, None, None, None];
        log(&format!(
            "handed over {} sessions: the kernel answers until the next linecardd takes them",
            record.sessions.len()
        ));
        Ok(record.sessions.len())
    }

    /// Adds the file's sessions, adopting those `pending` hands over (at
    /// their slots, first) and sending AdminDown for those the file no
    /// longer has.
    pub(super) fn take_over(
        &mut self,
        specs: Vec<SessionSpec>,
        record: HandoverRecord,
    ) -> Result<()> {
        let path_of = |s: &SessionSpec| PathKey {
            local: s.local,
            peer: s.peer,
            multihop: s.multihop,
        };
        let mut fresh = Vec::new();
        let mut adopted = 0;
        let mut specs: Vec<(SessionSpec, Option<&SessionRecord>)> = specs
            .into_iter()
            .map(|s| {
                let record = record.sessions.iter().find(|r| r.path() == path_of(&s));
                (s, record)
            })
            .collect();
        for (spec, record) in specs.drain(..) {
            match record {
                Some(record) => {
                    self.adopt_session(spec, record)?;
                    adopted += 1;
                }
                None => fresh.push(spec),
            }
        }
        let kept: Vec<PathKey> = self
            .table
            .ids()
            .filter_map(|id| self.table.get(id).map(|(p, _, _)| *p))
            .collect();
        for gone in record.sessions.iter().filter(|r| !kept.contains(&r.path())) {
            // Not in the file any more: out of the kernel, AdminDown on the
            // wire.
            if let Some(fast) = self.fast.as_mut() {
                let _ = fast.forget(gone.local_discr);
            }
            admin_down(gone);
            log(&format!(
                "session {} -> {} not in the file: sent AdminDown",
                gone.local, gone.peer
            ));
        }
        if let Some(fast) = self.fast.as_mut() {
            fast.adopted();
            // With the engine that handed over still running its responder
            // (a take-over), ours starts after our first pass has armed it
            // (`Engine::run`).
            if self.predecessor.is_none() {
                fast.start_responder()?;
            }
        }
        log(&format!("adopted {adopted} sessions"));
        for spec in fresh {
            self.add_session(spec)?;
        }
        Ok(())
    }
}

impl Engine {
    /// The end of a handing-over process: with a successor waiting on the
    /// handover's connection (a take-over), its responder runs on until the
    /// successor has armed its own and closes the connection (bounded by
    /// half the window); then it stops, and the kernel answers alone for
    /// at most the window.
    pub(super) fn release(&mut self) {
        if let Some(mut successor) = self.successor.take() {
            use std::io::Read;
            let half =
                std::time::Duration::from_millis(u64::from(self.config.handover_window_ms) / 2);
            let _ = successor.set_nonblocking(false);
            let _ = successor.set_read_timeout(Some(half));
            let mut byte = [0u8; 64];
            while matches!(successor.read(&mut byte), Ok(n) if n > 0) {}
        }
        let window_ns = u64::from(self.config.handover_window_ms) * 1_000_000;
        if let Some(fast) = self.fast.as_mut() {
            if let Err(e) = fast.release(window_ns) {
                log(&format!("releasing the fast path: {e:#}"));
            }
        }
    }

    /// A take-over's first pass is done: every adopted session is armed
    /// in our responder, so the predecessor may stop its own and ours
    /// starts.
    pub(super) fn relieve_predecessor(&mut self) -> Result<()> {
        if self.predecessor.take().is_some() {
            if let Some(fast) = self.fast.as_mut() {
                fast.start_responder()?;
            }
            log("the engine that handed over is relieved: our responder runs");
        }
        Ok(())
    }
}

/// Writes `bytes` to `path`, mode 0600, whole or not at all.
fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".partial");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temporary)
        .with_context(|| format!("writing {}", path.display()))?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&temporary, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
