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
    let path = record_path(&config.control_socket);
    let text = std::fs::read_to_string(&path).ok()?;
    let _ = std::fs::remove_file(&path);
    let adoption = Adoption::at(&config.handover_dir);
    let record: HandoverRecord = match serde_json::from_str(&text) {
        Ok(record) => record,
        Err(e) => {
            log(&format!(
                "handover refused: {} is unreadable ({e}); starting afresh",
                path.display()
            ));
            if let Some(adoption) = adoption {
                adoption.finish();
            }
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
    } else if adoption.is_none() {
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
    match (refused, adoption) {
        (None, Some(adoption)) => {
            log(&format!(
                "taking over {} sessions from {}",
                record.sessions.len(),
                record.written_by
            ));
            Some(Pending { record, adoption })
        }
        (why, adoption) => {
            log(&format!(
                "handover from {} refused: {}; its {} sessions are sent AdminDown and start afresh",
                record.written_by,
                why.unwrap_or_default(),
                record.sessions.len()
            ));
            if let Some(adoption) = adoption {
                adoption.finish();
            }
            for s in &record.sessions {
                admin_down(s);
            }
            None
        }
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
            sessions,
        };
        let path = record_path(&self.config.control_socket);
        write_private(&path, &serde_json::to_vec(&record)?)?;
        let dir = self.config.handover_dir.clone();
        let fast = self.fast.as_mut().expect("an xdp engine has a fast path");
        if let Err(e) = fast.hand_over(&dir, u64::from(self.config.handover_window_ms) * 1_000_000)
        {
            let _ = std::fs::remove_file(&path);
            if let Some(adoption) = Adoption::at(&dir) {
                adoption.finish();
            }
            return Err(e.context("pinning the fast path"));
        }
        let _ = std::fs::remove_file(&self.config.control_socket);
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
        }
        log(&format!("adopted {adopted} sessions"));
        for spec in fresh {
            self.add_session(spec)?;
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
