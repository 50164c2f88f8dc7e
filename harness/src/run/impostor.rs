//! The impostor fault's packets (`fault = { kind = "impostor" }`): while
//! the peer lies dead, the lab's spare host sends as it, with the
//! discriminators and the receive sequence the DUT's engine reports over
//! its control socket (what a neighbour on the link learns by listening).
//! Two packets, each every 2 ms: one under a guessed key with the next
//! sequence number, one the peer's own key with a sequence number of the
//! past (a replay). RFC 5880 6.7.3-6.7.4 ask the receiver to discard both;
//! a receiver that does not verify keeps the dead session Up for as long
//! as they come.

use super::daemons::EngineView;
use super::faults::{IMPOSTOR_MS, IMPOSTOR_PORT};
use crate::manifest::faults::FloodCounts;
use crate::scenario::SessionAuth;
use crate::scenario::FLOOD_FRAMES_PER_MS;
use anyhow::{Context, Result};
use linecard_api::control::ListReply;
use linecard_bpf_objects::craft;
use linecard_common::bfd::DropReason;
use std::net::IpAddr;
use std::time::Duration;

/// What the impostor needs of the live session, from the DUT's `list
/// --json`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target {
    pub our_discr: u32,
    pub peer_discr: u32,
    /// bfd.RcvAuthSeq: the last sequence number the DUT accepted.
    pub receive_sequence: u32,
}

impl Target {
    /// The session to `peer` in an engine's `ctl list`.
    pub fn from_list(list: &ListReply, peer: IpAddr) -> Result<Target> {
        let session = list
            .session(peer)
            .with_context(|| format!("the DUT's engine lists no session with {peer}"))?;
        Ok(Target {
            our_discr: session.local_discr,
            peer_discr: session.remote.discr,
            receive_sequence: session
                .auth
                .and_then(|a| a.receive_sequence)
                .with_context(|| {
                    format!("the DUT's session with {peer} has no auth.receive_sequence (is it authenticated?)")
                })?,
        })
    }
}

/// The impostor's two frames: Up, both discriminators, the A bit; from the
/// spare host's MAC, the peer's address and [`IMPOSTOR_PORT`]. The guess
/// carries the sequence number `ahead` of the last accepted one.
pub fn frames(target: Target, auth: &SessionAuth, spare_mac: [u8; 6], ahead: u32) -> Vec<Vec<u8>> {
    let kind = auth.auth_type().code();
    let packet = craft::bfd(3, 0, target.peer_discr, target.our_discr);
    // Not the secret: a guess, as long as the real one can be.
    let guessed = vec![b'?'; auth.secret.len().clamp(1, 20)];
    [
        (
            guessed.as_slice(),
            target.receive_sequence.wrapping_add(ahead),
        ),
        // Five behind: outside every window RFC 5880 6.8.1 allows.
        (
            auth.secret.as_bytes(),
            target.receive_sequence.wrapping_sub(5),
        ),
    ]
    .into_iter()
    .map(|(key, sequence)| {
        let payload = craft::authenticated(packet, kind, auth.key_id, sequence, key);
        let mut frame = craft::frame(255, &payload);
        frame[6..12].copy_from_slice(&spare_mac);
        // UDP source port, after Ethernet (14) and IPv4 (20).
        frame[34..36].copy_from_slice(&IMPOSTOR_PORT.to_be_bytes());
        craft::fix_ipv4_checksum(&mut frame);
        frame
    })
    .collect()
}

/// Sends `frames` from the spare host, every frame every 2 ms, for
/// [`IMPOSTOR_MS`]; returns how many it sent.
pub fn send(frames: &[Vec<u8>]) -> Result<u64> {
    crate::inject::send_from_spare_every(
        frames,
        Duration::from_millis(2),
        Duration::from_millis(IMPOSTOR_MS),
    )
}

/// How often the flood reads the DUT's bfd.RcvAuthSeq again (its control
/// socket answers slowly while L4 starves the engine's loop: 300 ms seen).
const FLOOD_READ_EVERY: Duration = Duration::from_secs(1);
/// The peer's packets a millisecond until two reads measure it: one every
/// 8.75 ms (3 x 10 ms, jittered to 75-100 %, RFC 5880 6.8.7).
const PEER_PACKETS_PER_MS: f64 = 1.0 / 8.75;

/// Sends `total` frames from the spare host as the live peer of the
/// session `read_view` names, at [`FLOOD_FRAMES_PER_MS`] a millisecond:
/// a guessed digest and a replay in turn. The guess's sequence number is
/// kept inside the window, where each costs the DUT a digest (RFC 5880
/// 6.7.3: up to 3 x Detect Mult ahead of bfd.RcvAuthSeq): the DUT's
/// number is read every [`FLOOD_READ_EVERY`] and extrapolated at the rate
/// two reads measured. Returns how many it sent.
pub fn flood(
    auth: &SessionAuth,
    total: u64,
    read_view: &dyn Fn() -> Result<EngineView>,
) -> Result<u64> {
    let peer: IpAddr = crate::lab::spec::PEER
        .ipv4
        .parse()
        .expect("the lab's peer address is an address");
    let read = || -> Result<(Target, std::time::Instant)> {
        let view = read_view()?;
        let target = Target::from_list(&view.list, peer)?;
        Ok((target, std::time::Instant::now()))
    };
    // Bounded in count and in time: twice what the pace takes, since each
    // read of the DUT's control socket under L4 holds the sender up (some
    // 300 ms a second here); the phase was sized for it, 3 s to spare.
    let limit = Duration::from_millis(2 * total.div_ceil(FLOOD_FRAMES_PER_MS));
    let started = std::time::Instant::now();
    let (mut last, mut last_at) = read()?;
    let mut rate = PEER_PACKETS_PER_MS;
    let mut sent = 0;
    while sent < total && started.elapsed() < limit {
        let chunk = (FLOOD_READ_EVERY.as_millis() as u64 * FLOOD_FRAMES_PER_MS).min(total - sent);
        let (base, at, per_ms, auth) = (last, last_at, rate, auth.clone());
        let spare = crate::inject::spare_mac();
        let took = crate::inject::send_from_spare_paced(
            move |n, _| {
                if n % 2 == 1 {
                    // The replay: the peer's own key, a number from
                    // before the last read, so one the peer really sent
                    // (an estimate could run ahead of the peer, and a
                    // genuine packet from the future is the peer's as far
                    // as RFC 5880 6.7.3 can tell).
                    return frames(base, &auth, spare, 4).swap_remove(1);
                }
                // The guess: the peer's number now, estimated, 4 past it,
                // the middle of the window.
                let climbed = (at.elapsed().as_secs_f64() * 1000.0 * per_ms) as u32;
                let target = Target {
                    receive_sequence: base.receive_sequence.wrapping_add(climbed),
                    ..base
                };
                frames(target, &auth, spare, 4).swap_remove(0)
            },
            chunk,
            FLOOD_FRAMES_PER_MS,
            limit.saturating_sub(started.elapsed()),
        )?;
        sent += took;
        if took < chunk {
            break;
        }
        let (now, now_at) = read()?;
        let climbed = now.receive_sequence.wrapping_sub(last.receive_sequence);
        let ms = now_at.duration_since(last_at).as_secs_f64() * 1000.0;
        if ms > 0.0 && climbed > 0 {
            rate = f64::from(climbed) / ms;
        }
        (last, last_at) = (now, now_at);
    }
    Ok(sent)
}

/// The authentication refusals an engine counted between two of its
/// views (`Bfd::engine_view`): the fast path's drops by reason, if it has
/// one, and its sessions'.
pub fn refusals(before: &EngineView, after: &EngineView, sent: u64) -> FloodCounts {
    const REASONS: [DropReason; 5] = [
        DropReason::AuthMismatch,
        DropReason::AuthFailed,
        DropReason::AuthSequence,
        DropReason::BadAuth,
        DropReason::VerifyBudget,
    ];
    let kernel = |view: &EngineView| {
        let counts = &view.drops.fast_path.as_ref()?.drops;
        Some(
            REASONS
                .iter()
                .map(|&r| counts.get(r as usize).copied().unwrap_or(0))
                .sum::<u64>(),
        )
    };
    let userspace = |view: &EngineView| -> u64 {
        (view.list.sessions.iter())
            .flat_map(|s| &s.drops)
            .filter(|(reason, _)| REASONS.contains(reason))
            .map(|(_, n)| n)
            .sum()
    };
    FloodCounts {
        sent,
        kernel_refused: kernel(after).map(|a| a.saturating_sub(kernel(before).unwrap_or(0))),
        userspace_refused: userspace(after).saturating_sub(userspace(before)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_impostor_sends_as_the_peer_from_its_own_port_with_a_guess_and_a_replay() {
        let auth = SessionAuth {
            kind: "meticulous_keyed_sha1".into(),
            key_id: 7,
            secret: "linecard-auth".into(),
        };
        let target = Target {
            our_discr: 11,
            peer_discr: 22,
            receive_sequence: 100,
        };
        let spare = [2, 0x1c, 0, 0, 0, 3];
        let frames = frames(target, &auth, spare, 1);
        assert_eq!(frames.len(), 2);
        for (frame, sequence, genuine) in [(&frames[0], 101u32, false), (&frames[1], 95, true)] {
            assert_eq!(&frame[6..12], &spare);
            assert_eq!(&frame[26..30], &craft::PEER_IP);
            assert_eq!(u16::from_be_bytes([frame[34], frame[35]]), IMPOSTOR_PORT);
            let bfd = &frame[42..];
            // Up, A bit; My Discriminator the peer's, Your ours.
            assert_eq!((bfd[1] >> 6, bfd[1] & 0x04), (3, 0x04));
            assert_eq!(&bfd[4..12], &[0, 0, 0, 22, 0, 0, 0, 11]);
            // Meticulous keyed SHA1, Key ID 7, the sequence number.
            assert_eq!((bfd[24], bfd[26]), (5, 7));
            assert_eq!(&bfd[28..32], &sequence.to_be_bytes());
            // The replay's digest is the genuine one; the guess's is not.
            let again =
                craft::authenticated(craft::bfd(3, 0, 22, 11), 5, 7, sequence, b"linecard-auth");
            assert_eq!(bfd == again.as_slice(), genuine);
        }
        let none = ListReply {
            sessions: Vec::new(),
        };
        assert!(Target::from_list(&none, "192.0.2.2".parse().unwrap()).is_err());
    }
}
