//! What the daemon writes to the fast path for a session: its
//! registration (every session, so that the kernel validates its packets),
//! and, when the offload policy (`offload.rs`) hands it over, the reply
//! template, keys and responder's prepared packets. Split out of `mod.rs`
//! by responsibility; it sees its parent's items.

use super::*;

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
