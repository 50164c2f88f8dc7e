//! What the kernel's sweep reported (through the responder thread): a
//! peer silent past its detection time, taken Down at the kernel's
//! instant whenever the loop gets to run (RFC 5880 6.8.4), and a peer
//! that said Down, whose packet reaches the state machine through the
//! socket (6.8.6). The responder has already sent the Down on the wire.

use super::{log, log_transition, Engine};

impl Engine {
    pub(super) fn apply_kernel_events(&mut self) {
        // The kernel's sweep found silences: take the sessions down at the
        // kernel's instant, whenever we get to run.
        let events = self
            .fast
            .as_mut()
            .map(|f| f.take_events())
            .unwrap_or_default();
        for detection in events {
            let event = detection.event;
            let Some((path, session, peer)) = self.table.get_mut(event.slot as usize) else {
                continue;
            };
            if session.config().local_discr != event.discr {
                continue;
            }
            if !peer.stale {
                peer.stale = true;
                self.due.touch(event.slot as usize);
            }
            let at = event.at_ns as i64 - self.epoch_mono_ns;
            let responder_down = match detection.down_sent_mono_ns {
                Some(sent) => format!(
                    "; the responder's Down left {:.3} ms later",
                    (sent as i64 - event.at_ns as i64) as f64 / 1e6
                ),
                None if detection.stale => "; stale: the session was offloaded again before the responder ran, which sent no Down".into(),
                None => String::new(),
            };
            if event.kind == linecard_common::bfd::event::PEER_DOWN {
                // The packet that said so reaches the state machine through
                // the socket, which takes the session Down (6.8.6).
                log(&format!(
                    "the kernel heard {} say Down{responder_down}",
                    path.peer
                ));
                continue;
            }
            let remote = *session.remote();
            session.note_fast_path_packet(
                event.last_rx_ns as i64 - self.epoch_mono_ns,
                remote.desired_min_tx_us,
                remote.min_rx_us,
                remote.detect_mult,
            );
            peer.kernel_detection_unix_ns = Some(self.epoch_unix_ns + at);
            log(&format!(
                "kernel detected {} -> {} silent for {:.3} ms{responder_down}",
                path.local,
                path.peer,
                (event.at_ns as i64 - event.last_rx_ns as i64) as f64 / 1e6,
            ));
            if let Some(t) = session.on_timer(at) {
                peer.last_transition = Some(t);
                log_transition(&peer.spec, &t);
            }
        }
    }
}
