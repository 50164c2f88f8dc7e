//! Sessions in and out of the engine: added (a discriminator of its own,
//! its sockets, its place on the fast path), removed with AdminDown on the
//! wire (RFC 5880 6.8.16), and the echo function steered to the sessions
//! that may run it (6.4).

use super::fast_path::{self, FastPath};
use super::{log, random_u64, registered_config, Engine, KernelView, Peer};
use crate::backend;
use crate::config::SessionSpec;
use crate::io::TxSocket;
use crate::session::auth::Auth;
use crate::session::table::{PathKey, SessionId};
use crate::session::{Nanos, Session, SessionConfig};
use anyhow::{bail, Context, Result};
use linecard_api::control::State;
use linecard_api::{Availability, BackendKind};
use linecard_common::bfd::DropReason;

impl Engine {
    pub fn add_session(&mut self, spec: SessionSpec) -> Result<SessionId> {
        self.add_session_with_discr(spec, None)
    }

    /// `discr`: the local discriminator to use if it is free (FRR's lid);
    /// otherwise a random one.
    pub fn add_session_with_discr(
        &mut self,
        spec: SessionSpec,
        discr: Option<u32>,
    ) -> Result<SessionId> {
        self.add(spec, discr, None)
    }

    /// A session a running engine handed over (`handover.rs`): its slot,
    /// discriminator, source port and state as they were, the kernel's
    /// entry for it left as it is until the offload policy rewrites it.
    pub(super) fn adopt_session(
        &mut self,
        spec: SessionSpec,
        record: &super::handover::SessionRecord,
    ) -> Result<SessionId> {
        self.add(spec, Some(record.local_discr), Some(record))
    }

    fn add(
        &mut self,
        spec: SessionSpec,
        discr: Option<u32>,
        adopted: Option<&super::handover::SessionRecord>,
    ) -> Result<SessionId> {
        if spec.backend != self.loop_kind() {
            if !self.table.is_empty() {
                bail!(
                    "this engine runs the {} backend; a {} session needs its own linecardd",
                    self.loop_kind(),
                    spec.backend
                );
            }
            if let Availability::Unavailable { reason } = crate::backend::availability(spec.backend)
            {
                bail!("the {} backend cannot run here: {reason}", spec.backend);
            }
            // An empty engine takes the backend of its first session.
            self.fast = if spec.backend == BackendKind::Xdp {
                Some(FastPath::load(&self.config, None)?)
            } else {
                None
            };
            self.transmitter = backend::transmitter(spec.backend, &self.config);
        }
        self.ensure_rx(spec.peer.is_ipv6(), spec.multihop)?;
        if let (Some(fast), Some(interface)) = (self.fast.as_mut(), spec.interface.as_deref()) {
            fast.attach(interface)?;
        }
        // A set: at thousands of sessions a list made each add quadratic
        // (47 ms per add at 4000 sessions).
        let taken: std::collections::HashSet<u16> = self
            .table
            .ids()
            .filter_map(|id| self.table.get(id))
            .map(|(_, _, p)| p.tx.source_port)
            .collect();
        // An adopted session keeps its source port (the kernel's replies
        // carry it, RFC 5881 section 4).
        let kept_port = adopted.map(|r| r.source_port);
        let mut tx = TxSocket::open_sharing(
            spec.local,
            spec.peer,
            self.control_port(spec.multihop),
            spec.interface.as_deref(),
            &|p| taken.contains(&p) || kept_port.is_some_and(|k| k != p),
            kept_port.is_some(),
        )
        .with_context(|| {
            format!(
                "opening the transmit socket {} -> {}",
                spec.local, spec.peer
            )
        })?;
        self.transmitter
            .prepare_session(&spec, &mut tx)
            .with_context(|| {
                format!(
                    "preparing the {} backend for {} -> {}",
                    spec.backend, spec.local, spec.peer
                )
            })?;
        if adopted.is_some() && discr.is_some_and(|d| self.table.discriminator_in_use(d)) {
            bail!("the handed-over discriminator {discr:?} is in use");
        }
        let mut discr = discr
            .filter(|&d| d != 0 && !self.table.discriminator_in_use(d))
            .unwrap_or(0);
        while discr == 0 {
            discr = (random_u64() as u32).max(1);
            if self.table.discriminator_in_use(discr) {
                discr = 0;
            }
        }
        let config = SessionConfig {
            local_discr: discr,
            desired_min_tx_us: spec.tx_interval_us,
            required_min_rx_us: spec.rx_interval_us,
            detect_mult: spec.multiplier,
            required_min_echo_rx_us: spec.echo_rx_us,
            passive: spec.passive,
            demand: spec.demand,
            demand_verify_us: spec.demand_verify_us,
        };
        self.seed = self
            .seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let mut session = match adopted {
            Some(record) => Session::adopt(config, &record.snapshot, self.now(), self.seed),
            None => Session::new(config, self.now(), self.seed),
        };
        if self.config.never_leave_init {
            session = session.with_broken_handshake();
        }
        if let Some(auth) = &spec.auth {
            // bfd.XmitAuthSeq starts at a random value (6.8.1).
            let mut state = Auth::new(auth.clone(), random_u64() as u32);
            if !self.config.verify_authentication {
                state = state.unverified();
            }
            session = session.with_auth(state);
        }
        let path = PathKey {
            local: spec.local,
            peer: spec.peer,
            multihop: spec.multihop,
        };
        let peer = Peer {
            spec: spec.clone(),
            tx,
            drops: [0; DropReason::ALL.len()],
            last_transition: None,
            kernel: KernelView::default(),
            kernel_detection_unix_ns: None,
            last_user_tx: None,
            own_clock_requests: 0,
            last_own_clock: None,
            due_next: None,
            due_detection: None,
            stale: true,
            echo_interval_ns: 0,
            adopted: adopted.is_some(),
        };
        let id = match adopted {
            Some(record) => self.table.insert_at(record.id, path, session, peer),
            None => self.table.insert(path, session, peer),
        }
        .map_err(|e| anyhow::anyhow!("{e}"))?;
        // The table first, then the kernel's maps: a session the kernel
        // refuses is taken out again, so that none is left half-added
        // (the kernel dropping its packets, a retry "already exists").
        if let Err(e) = self.install_in_kernel(id, &spec, adopted.is_some()) {
            self.undo_add(id);
            return Err(e);
        }
        if let (Some(_), Some(fast)) = (adopted, self.fast.as_ref()) {
            // Our last packet is the one the kernel's slot records (the
            // reply floor and own clock count from it, RFC 5880 6.8.7):
            // rewriting the slot with "now" would silence the kernel's
            // replies for three quarters of an interval.
            let user_tx_ns = fast.slot(id as u32).map_or(0, |s| s.user_tx_ns);
            if let (true, Some((_, _, peer))) = (user_tx_ns != 0, self.table.get_mut(id)) {
                peer.last_user_tx = Some(user_tx_ns as i64 - self.epoch_mono_ns);
            }
        }
        self.due.touch(id);
        log(&format!(
            "session {} -> {} {} (discriminator {discr}, backend {})",
            spec.local,
            spec.peer,
            if adopted.is_some() {
                "adopted"
            } else {
                "added"
            },
            spec.backend
        ));
        Ok(id)
    }

    /// The fast path's maps and the echo originator for a session just
    /// put in the table.
    /// `adopted`: the kernel holds the session's entry already (a
    /// handover), which must not be rewritten as a plain registration: the
    /// kernel would stop answering for it until the next pass.
    fn install_in_kernel(
        &mut self,
        id: SessionId,
        spec: &SessionSpec,
        adopted: bool,
    ) -> Result<()> {
        let discr = match self.table.get(id) {
            Some((_, session, _)) => session.config().local_discr,
            None => bail!("session {id} is not in the table"),
        };
        if let Some(fast) = self.fast.as_mut() {
            let (path, session, peer) = self.table.get(id).expect("just inserted");
            if let Some(auth) = session.auth() {
                let keys: Vec<(u8, &[u8])> = auth
                    .config()
                    .keys
                    .iter()
                    .map(|k| (k.id, k.secret.as_slice()))
                    .collect();
                fast.install_keys(discr, &keys)?;
            }
            if !adopted {
                fast.register(discr, registered_config(path, session, peer, id as u32))?;
            }
            if let Some(auth) = self.table.get_mut(id).and_then(|(_, s, _)| s.auth_mut()) {
                // From here one bfd.XmitAuthSeq for the kernel's replies, the
                // responder and this loop, going on where it was (6.7.3).
                let counter = fast.xmit_sequence(id as u32)?;
                counter.set(auth.next_sequence());
                auth.share(counter);
            }
            if spec.echo_rx_us > 0 {
                fast.reflect_echoes_of(spec.peer, discr)?;
            }
        }
        if spec.echo_interval_us.is_some() {
            if self.echo.is_none() {
                self.echo = Some(
                    crate::echo::Originator::start()
                        .context("opening the echo originator's packet sockets")?,
                );
            }
            self.echo_sessions.push(id);
        }
        Ok(())
    }

    /// Takes out what `add_session_with_discr` put in for a session the
    /// kernel refused, saying nothing on the wire (it never sent).
    fn undo_add(&mut self, id: SessionId) {
        let _ = self.detach(id);
    }

    /// Takes a session out of the table, the transmitter, the kernel's
    /// maps and the echo list; what it says on the wire is the caller's.
    fn detach(&mut self, id: SessionId) -> Option<(PathKey, Session, Peer)> {
        let (path, session, peer) = self.table.remove(id)?;
        self.transmitter.forget(id);
        if let Some(fast) = self.fast.as_mut() {
            let _ = fast.forget(session.config().local_discr);
            if peer.spec.echo_rx_us > 0 {
                let _ = fast.stop_reflecting(path.peer);
            }
        }
        self.echo_sessions.retain(|&e| e != id);
        Some((path, session, peer))
    }

    /// Takes a session out of the engine and says goodbye on the wire with
    /// AdminDown (RFC 5880 6.8.16).
    pub fn remove_session(&mut self, id: SessionId, now: Nanos) {
        let Some((path, mut session, peer)) = self.detach(id) else {
            return;
        };
        if let Some(echo) = self.echo.as_ref() {
            echo.forget(session.config().local_discr);
        }
        session.set_admin_down(now, true);
        if let Some(packet) = session.poll_transmit(now) {
            let _ = peer.tx.send(&packet.to_bytes());
        }
        log(&format!("session {} -> {} removed", path.local, path.peer));
    }

    /// Starts, retimes or stops each echo session's echoes: they run while
    /// the session is Up and the peer advertises a Required Min Echo RX,
    /// at max(our interval, the peer's) (RFC 5880 6.8.9). Their outcome
    /// is advisory and never moves the session's state.
    pub(super) fn steer_echo(&mut self) {
        let Some(originator) = self.echo.as_ref() else {
            return;
        };
        let mut neighbours: Option<fast_path::Neighbours> = None;
        for &id in &self.echo_sessions {
            let Some((path, session, peer)) = self.table.get_mut(id) else {
                continue;
            };
            let local_us = peer.spec.echo_interval_us.unwrap_or(0);
            let remote_us = session.remote().min_echo_rx_us;
            let want_ns = if session.state() == State::Up && remote_us > 0 && local_us > 0 {
                u64::from(local_us.max(remote_us)) * 1000
            } else {
                0
            };
            if want_ns == peer.echo_interval_ns {
                continue;
            }
            let discr = session.config().local_discr;
            if want_ns == 0 {
                originator.steer(discr, None);
                peer.echo_interval_ns = 0;
                log(&format!("echo {} -> {} stopped", path.local, path.peer));
                continue;
            }
            let interface = peer.spec.interface.as_deref().unwrap_or_default();
            let neighbours = neighbours.get_or_insert_with(fast_path::Neighbours::read);
            let (Some(ifindex), Some(peer_mac)) = (
                crate::echo::ifindex(interface),
                neighbours.mac(path.peer, interface),
            ) else {
                // No neighbour entry yet: the next pass tries again.
                continue;
            };
            originator.steer(
                discr,
                Some(crate::echo::EchoPlan {
                    local: path.local,
                    ifindex,
                    peer_mac,
                    interval_ns: want_ns,
                    lost_after_ns: want_ns * u64::from(session.config().detect_mult),
                }),
            );
            peer.echo_interval_ns = want_ns;
            log(&format!(
                "echo {} -> {} every {:.3} ms (ours {:.3}, the peer's Required Min Echo RX {:.3})",
                path.local,
                path.peer,
                want_ns as f64 / 1e6,
                f64::from(local_us) / 1e3,
                f64::from(remote_us) / 1e3
            ));
        }
    }
}
