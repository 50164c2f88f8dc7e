//! The impostor fault's packets (`fault = { kind = "impostor" }`): while
//! the peer lies dead, the lab's spare host sends as it, with the
//! discriminators and the receive sequence the DUT's engine reports over
//! its control socket (what a neighbour on the link learns by listening).
//! Two packets, each every 2 ms: one under a guessed key with the next
//! sequence number, one the peer's own key with a sequence number of the
//! past (a replay). RFC 5880 6.7.3-6.7.4 ask the receiver to discard both;
//! a receiver that does not verify keeps the dead session Up for as long
//! as they come.

use super::faults::{IMPOSTOR_MS, IMPOSTOR_PORT};
use crate::scenario::SessionAuth;
use anyhow::{Context, Result};
use linecard_bpf_objects::craft;
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
    /// The session to `peer` in an engine's `list --json`.
    pub fn from_list(list: &serde_json::Value, peer: &str) -> Result<Target> {
        let session = list["sessions"]
            .as_array()
            .and_then(|all| all.iter().find(|s| s["peer"] == peer))
            .with_context(|| format!("the DUT's engine lists no session with {peer}"))?;
        let field = |value: &serde_json::Value, name: &str| {
            value
                .as_u64()
                .and_then(|v| u32::try_from(v).ok())
                .with_context(|| format!("the DUT's session with {peer} has no {name}: {session}"))
        };
        Ok(Target {
            our_discr: field(&session["local_discr"], "local_discr")?,
            peer_discr: field(&session["remote"]["discr"], "remote.discr")?,
            receive_sequence: field(
                &session["auth"]["receive_sequence"],
                "auth.receive_sequence (is the session authenticated?)",
            )?,
        })
    }
}

/// The impostor's two frames: Up, both discriminators, the A bit; from the
/// spare host's MAC, the peer's address and [`IMPOSTOR_PORT`].
pub fn frames(target: Target, auth: &SessionAuth, spare_mac: [u8; 6]) -> Vec<Vec<u8>> {
    let kind = auth.auth_type().code();
    let packet = craft::bfd(3, 0, target.peer_discr, target.our_discr);
    // Not the secret: a guess, as long as the real one can be.
    let guessed = vec![b'?'; auth.secret.len().clamp(1, 20)];
    [
        (guessed.as_slice(), target.receive_sequence.wrapping_add(1)),
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
        let target = Target::from_list(
            &serde_json::json!({"sessions": [{
                "peer": "192.0.2.2", "local_discr": 11, "remote": {"discr": 22},
                "auth": {"receive_sequence": 100}
            }]}),
            "192.0.2.2",
        )
        .unwrap();
        let spare = [2, 0x1c, 0, 0, 0, 3];
        let frames = frames(target, &auth, spare);
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
        assert!(Target::from_list(&serde_json::json!({"sessions": []}), "192.0.2.2").is_err());
    }
}
