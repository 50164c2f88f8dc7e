//! What the daemon writes to the fast path for a session: its
//! registration (every session, so that the kernel validates its packets),
//! and, when the offload policy (`offload.rs`) hands it over, the reply
//! template, keys and responder's prepared packets. Split out of `mod.rs`
//! by responsibility; it sees its parent's items.

use super::fast_path::{self, FastPath};
use super::offload::{self, Placement, SessionView};
use super::{log, Peer, Placing};
use crate::backend::responder::Prepared;
use crate::config::SessionSpec;
use crate::session::table::{PathKey, SessionId};
use crate::session::{FastPathRole, Nanos, Session};

/// `FLAG_MULTIHOP` for a multihop session.
fn hop_flags(spec: &SessionSpec) -> u32 {
    if spec.multihop {
        linecard_common::bfd::FLAG_MULTIHOP
    } else {
        0
    }
}

/// Whether the kernel verifies the session's authentication: the RFC
/// 5880 constructions only (FRR's HMAC-SHA1 is verified here).
pub(super) fn kernel_verifies(session: &Session) -> bool {
    session
        .auth()
        .is_none_or(|a| a.config().construction == crate::wire::Construction::Rfc5880)
}

/// The registration's flags: the hop kind, and authentication verified in
/// userspace where the kernel cannot.
fn registration_flags(spec: &SessionSpec, session: &Session) -> u32 {
    hop_flags(spec)
        | if kernel_verifies(session) {
            0
        } else {
            linecard_common::bfd::FLAG_AUTH_IN_USERSPACE
        }
}

/// bfd.AuthType as the fast path's `SessionConfig::auth_type` carries it.
fn auth_code(session: &Session) -> u8 {
    session
        .auth()
        .map_or(linecard_common::bfd::auth_type::NONE, |a| {
            a.config().auth_type.code()
        })
}

/// The Auth Key ID the session signs with (0 without authentication).
fn send_key_id(session: &Session) -> u8 {
    session.auth().map_or(0, |a| a.config().send_key)
}

/// The fast path's view of a session it validates for but does not answer;
/// for an authenticated one, the detection time its sequence window
/// lapses by (RFC 5880 6.8.1).
pub(super) fn registered_config(
    path: &PathKey,
    session: &Session,
    peer: &Peer,
    slot: u32,
) -> linecard_common::bfd::SessionConfig {
    linecard_common::bfd::SessionConfig {
        local_ip: fast_path::mapped(path.local),
        peer_ip: fast_path::mapped(path.peer),
        local_mac: [0; 6],
        peer_mac: [0; 6],
        local_port_be: peer.tx.source_port.to_be(),
        min_ttl: peer.spec.min_ttl,
        auth_type: auth_code(session),
        reply: [0; 24],
        flags: registration_flags(&peer.spec, session),
        slot,
        detect_ns: session.detection_time_ns().unwrap_or(0) as u64,
        send_key_id: send_key_id(session),
        _reserved: [0; 7],
    }
}

/// Hands session `slot` to the fast path in `role` (or refreshes its
/// reply template) and arms the responder thread with the Down that leaves
/// the moment the kernel declares the peer silent and what the session's
/// own clock sends. Not yet when the neighbour's MAC is unknown; a failure
/// is logged and the session stays userspace's.
pub(super) fn offload(
    fast: &mut FastPath,
    path: &PathKey,
    session: &Session,
    peer: &mut Peer,
    slot: u32,
    role: FastPathRole,
    neighbours: &fast_path::Neighbours,
) {
    let Some(config) = fast_path_config(path, session, peer, slot, role, neighbours) else {
        return;
    };
    let discr = session.config().local_discr;
    if let Err(e) = fast.offload(discr, config) {
        log(&format!(
            "offloading {} -> {} failed: {e:#}",
            path.local, path.peer
        ));
        return;
    }
    peer.kernel.role = Some(role);
    peer.kernel.reply = config.reply;
    peer.kernel.send_key = config.send_key_id;
    match peer.tx.duplicate() {
        Ok((socket, peer_addr)) => fast.arm_responder(
            discr,
            Prepared {
                socket,
                peer: peer_addr,
                down: session
                    .down_on_detection()
                    .map(|down| down.to_bytes().to_vec()),
                // With authentication, the whole packet: the responder
                // signs it again as it leaves.
                steady: session.steady_packet().to_bytes().to_vec(),
                signer: session.auth().map(|a| a.signer()),
            },
        ),
        Err(e) => log(&format!(
            "no responder for {} -> {}: {e}",
            path.local, path.peer
        )),
    }
}

/// The fast path's view of a steady session: our reply, both MACs, our
/// port. `None` while the neighbour's MAC is not known yet.
fn fast_path_config(
    path: &PathKey,
    session: &Session,
    peer: &Peer,
    slot: u32,
    role: FastPathRole,
    neighbours: &fast_path::Neighbours,
) -> Option<linecard_common::bfd::SessionConfig> {
    let role_flags = match role {
        FastPathRole::Steady => 0,
        FastPathRole::PollsOnly => linecard_common::bfd::FLAG_POLLS_ONLY,
    };
    let interface = peer.spec.interface.as_deref()?;
    Some(linecard_common::bfd::SessionConfig {
        local_ip: fast_path::mapped(path.local),
        peer_ip: fast_path::mapped(path.peer),
        local_mac: fast_path::interface_mac(interface)?,
        peer_mac: neighbours.mac(path.peer, interface)?,
        local_port_be: peer.tx.source_port.to_be(),
        min_ttl: peer.spec.min_ttl,
        auth_type: auth_code(session),
        reply: session.steady_packet().header_bytes(),
        flags: linecard_common::bfd::FLAG_REPLY | role_flags | hop_flags(&peer.spec),
        slot,
        detect_ns: session.detection_time_ns().unwrap_or(0) as u64,
        send_key_id: send_key_id(session),
        _reserved: [0; 7],
    })
}

/// What the kernel answered for an offloaded session counts as heard: its
/// state slot, read fresh (the packets it replied to, the peer's timers,
/// bfd.RcvAuthSeq, the own clock's requests).
pub(super) fn note_kernel_state(
    fast: &FastPath,
    id: SessionId,
    session: &mut Session,
    peer: &mut Peer,
    epoch_mono_ns: Nanos,
) {
    let Ok(state) = fast.state(id as u32) else {
        return;
    };
    peer.own_clock_requests = state.clock_tx_requests;
    if state.clock_tx_ns != 0 {
        peer.last_own_clock = Some(state.clock_tx_ns as i64 - epoch_mono_ns);
    }
    if state.last_rx_ns != 0 {
        session.note_fast_path_packet(
            state.last_rx_ns as i64 - epoch_mono_ns,
            state.remote_desired_min_tx_us,
            state.remote_required_min_rx_us,
            state.remote_detect_mult as u8,
        );
    }
    if let (Some(auth), true) = (session.auth_mut(), state.auth_known_until_ns != 0) {
        // What the kernel accepted is bfd.RcvAuthSeq here too.
        auth.note_kernel_sequence(
            state.rcv_auth_seq,
            state.auth_known_until_ns as i64 - epoch_mono_ns,
        );
    }
}

/// Places the session as the offload policy says (hands it to the kernel,
/// takes it back, or rewrites its registration), then arms the kernel's
/// sweep for it (its detection time and own clock) when that changed.
pub(super) fn place(
    fast: &mut FastPath,
    at: &Placing,
    allowed: offload::Allowed,
    session: &Session,
    peer: &mut Peer,
    neighbours: &mut Option<fast_path::Neighbours>,
) {
    let (path, slot) = (at.path, at.id as u32);
    let view = SessionView::of(session, allowed);
    match offload::placement(&view, &peer.kernel) {
        Some(Placement::Offload(role)) => {
            let neighbours = neighbours.get_or_insert_with(fast_path::Neighbours::read);
            offload(fast, path, session, peer, slot, role, neighbours);
        }
        Some(Placement::Withdraw) => {
            fast.disarm_responder(session.config().local_discr);
            if let Err(e) = fast.register(
                session.config().local_discr,
                registered_config(path, session, peer, slot),
            ) {
                log(&format!(
                    "withdrawing {} -> {} failed: {e:#}",
                    path.local, path.peer
                ));
            }
            peer.kernel.role = None;
        }
        Some(Placement::Reregister) => match fast.register(
            session.config().local_discr,
            registered_config(path, session, peer, slot),
        ) {
            Ok(()) => peer.kernel.registered_detect_ns = view.detection_ns,
            Err(e) => log(&format!(
                "updating {} -> {} in the fast path failed: {e:#}",
                path.local, path.peer
            )),
        },
        None => {}
    }
    // After the placement, so that a session offloaded in this pass is
    // armed in it too (offload::sweep).
    if offload::sweep_stale(&view, &peer.kernel) {
        let (detect_ns, clock_ns) = offload::sweep(&view, &peer.kernel);
        let slot_config = linecard_common::bfd::SlotConfig {
            detect_ns,
            discr: session.config().local_discr,
            armed: u32::from(detect_ns != 0),
            // The clock counts from our last packet until the kernel
            // sends one.
            user_tx_ns: (peer.last_user_tx.unwrap_or(at.now) + at.epoch_mono_ns) as u64,
            desired_min_tx_ns: clock_ns,
            detect_mult: u32::from(session.config().detect_mult),
            _reserved: 0,
            written_ns: crate::io::clock_ns(libc::CLOCK_MONOTONIC),
        };
        match fast.set_slot(slot, slot_config) {
            Ok(()) => {
                (peer.kernel.armed_detect_ns, peer.kernel.armed_clock_ns) = (detect_ns, clock_ns)
            }
            Err(e) => log(&format!(
                "arming the kernel's detection for {} failed: {e:#}",
                path.peer
            )),
        }
    }
}
