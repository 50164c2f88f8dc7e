//! A session handed from one linecardd process to the next (a hitless
//! restart): what the next process needs to go on saying exactly what
//! this one said, so that the peer sees no change (RFC 5880 6.8.1's
//! variables; the discriminator is the session's config).
//!
//! Times do not travel: the two processes' clocks start at different
//! instants. The adopting process takes the session as heard at the
//! moment it adopts it (the kernel's fast path, which answered meanwhile,
//! keeps its own detection running), and sends its next packet an
//! interval later.

use super::{Nanos, Session, SessionConfig};
use linecard_api::control::{Counters, Diagnostic, Remote, State};
use serde::{Deserialize, Serialize};

/// The state a session hands over; what [`Session::adopt`] takes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub state: State,
    pub local_diag: Diagnostic,
    pub remote: Remote,
    pub desired_min_tx_us: u32,
    pub required_min_rx_us: u32,
    pub tx_in_force_us: u32,
    pub rx_in_force_us: u32,
    pub polling: bool,
    pub final_owed: bool,
    pub admin_down: bool,
    pub counters: Counters,
}

/// Why a session cannot be handed over.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotHandedOver {
    /// Its sequence numbers live in this process and in the kernel's
    /// counter at once; carrying them over is not built yet.
    #[error("it authenticates (RFC 5880 6.7): carrying bfd.XmitAuthSeq and bfd.RcvAuthSeq across processes is not built yet")]
    Authenticated,
    /// In Demand mode the detection runs from our last Poll (6.8.4), a
    /// time that does not travel.
    #[error(
        "Demand mode is active (RFC 5880 6.6): its verification Poll schedule is not carried over"
    )]
    Demand,
}

impl Session {
    /// What the next process needs to go on as this session.
    pub fn snapshot(&self) -> Result<Snapshot, NotHandedOver> {
        if self.auth.is_some() {
            return Err(NotHandedOver::Authenticated);
        }
        if self.local_demand_active() || self.remote_demand_active() {
            return Err(NotHandedOver::Demand);
        }
        Ok(Snapshot {
            state: self.state,
            local_diag: self.local_diag,
            remote: self.remote,
            desired_min_tx_us: self.desired_min_tx_us,
            required_min_rx_us: self.required_min_rx_us,
            tx_in_force_us: self.tx_in_force_us,
            rx_in_force_us: self.rx_in_force_us,
            polling: self.polling,
            final_owed: self.final_owed,
            admin_down: self.admin_down,
            counters: self.counters,
        })
    }

    /// The session `snapshot` describes, under `config` (its discriminator
    /// among it), as heard at `now`: its next packet an interval later,
    /// unless a Final is owed (sent at once, 6.8.6).
    pub fn adopt(config: SessionConfig, snapshot: &Snapshot, now: Nanos, seed: u64) -> Self {
        let mut session = Self::new(config, now, seed);
        session.state = snapshot.state;
        session.local_diag = snapshot.local_diag;
        session.remote = snapshot.remote;
        session.desired_min_tx_us = snapshot.desired_min_tx_us;
        session.required_min_rx_us = snapshot.required_min_rx_us;
        session.tx_in_force_us = snapshot.tx_in_force_us;
        session.rx_in_force_us = snapshot.rx_in_force_us;
        session.polling = snapshot.polling;
        session.final_owed = snapshot.final_owed;
        session.admin_down = snapshot.admin_down;
        session.counters = snapshot.counters;
        session.last_rx_ns = (snapshot.state != State::Down).then_some(now);
        session.next_tx_ns = Some(if snapshot.final_owed {
            now
        } else {
            now + session.tx_interval_ns()
        });
        session
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::tests::{up_session, MS};

    /// When the session tests' `up_session` has come Up.
    const UP_AT: Nanos = 3 * MS;

    #[test]
    fn an_adopted_session_says_on_the_wire_what_the_old_one_said() {
        let (a, now) = (up_session(), UP_AT);
        let snapshot = a.snapshot().unwrap();
        // A process started later, its clock elsewhere.
        let later = now + 123_456 * MS;
        let adopted = Session::adopt(*a.config(), &snapshot, later, 99);
        assert_eq!(adopted.steady_packet(), a.steady_packet());
        assert_eq!(adopted.fast_path_role(), a.fast_path_role());
        assert!(adopted.is_steady(), "the kernel may go on answering for it");
        assert_eq!(adopted.detection_time_ns(), a.detection_time_ns());
        assert_eq!(adopted.counters(), a.counters());
    }

    #[test]
    fn an_adopted_session_is_heard_at_adoption_and_sends_an_interval_later() {
        let (a, now) = (up_session(), UP_AT);
        let later = now + 5_000 * MS;
        let mut adopted = Session::adopt(*a.config(), &a.snapshot().unwrap(), later, 99);
        // Not declared down for the time no process was there to hear.
        assert_eq!(adopted.on_timer(later + 29 * MS), None);
        assert!(adopted.poll_transmit(later + MS).is_none());
        assert!(adopted.poll_transmit(later + 10 * MS).is_some());
    }

    #[test]
    fn an_authenticated_or_demanding_session_is_not_handed_over() {
        use crate::session::auth::{Auth, AuthConfig, AuthKey};
        let a = up_session();
        let auth = AuthConfig {
            auth_type: linecard_api::AuthType::KeyedSha1,
            keys: vec![AuthKey {
                id: 1,
                secret: b"secret".to_vec(),
            }],
            send_key: 1,
            construction: crate::wire::Construction::Rfc5880,
        };
        let signed = a.clone().with_auth(Auth::new(auth, 5));
        assert_eq!(signed.snapshot(), Err(NotHandedOver::Authenticated));
    }
}
