//! The xdp backend's offload policy, as pure functions (smoltcp's
//! `dispatch`/`poll_at` shape): from what the session says and what the
//! kernel holds for it, the kernel operations due now. No clock, no
//! socket, no map: the daemon reads a [`SessionView`], asks these
//! functions, performs what they return on the fast path and records the
//! outcome in its [`KernelView`]. Each rule has a test below.

use crate::session::auth::SequenceJudge;
use crate::session::{FastPathRole, Nanos, Session};
use linecard_common::bfd::header::HEADER_LEN;

/// How long after the detection deadline userspace declares an offloaded
/// session down itself if the kernel's sweep (at the deadline, at least
/// every 0.5 ms) has not.
pub const KERNEL_DETECTION_GRACE_NS: Nanos = 5_000_000;

/// What the policy needs of a session, read at one instant.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SessionView {
    /// The role the state machine allows (`Session::fast_path_role`).
    pub role: Option<FastPathRole>,
    /// Whether this engine may offload the session at all (`xdp_replies`
    /// and the session's `offload` key).
    pub offload_allowed: bool,
    /// The session authenticates (RFC 5880 6.7): the kernel verifies its
    /// packets and signs its replies.
    pub authenticated: bool,
    /// The kernel may sign for us (`xdp_sign`, and a digest it computes;
    /// `false` as the negative control or for FRR's HMAC-SHA1: an
    /// authenticated session is then answered from the userspace loop).
    pub sign_allowed: bool,
    /// Our steady packet's mandatory section, the reply the kernel sends
    /// for us (with authentication, its A bit and Length count the section
    /// the kernel signs).
    pub steady_reply: [u8; HEADER_LEN],
    /// The Auth Key ID we sign with (0 without authentication): a key
    /// rollover (6.7.1) refreshes the kernel's.
    pub send_key: u8,
    /// The detection time in force (6.8.4), ns; 0 while there is none.
    pub detection_ns: u64,
    /// Demand mode is active on our side: the remote's silence is what we
    /// asked for, and detection is Poll-timed, userspace's (6.8.4).
    pub local_demand: bool,
    /// Our bfd.DesiredMinTxInterval in force, ns: the own clock's base,
    /// which the kernel holds against the Required Min RX of the peer's
    /// last packet (6.8.7, `linecard_common::bfd::periodic_interval_ns`).
    pub desired_min_tx_ns: u64,
    /// The kernel's own clock may send for us (`xdp_own_clock`; `false`
    /// only as the negative control).
    pub own_clock_allowed: bool,
}

impl SessionView {
    pub fn of(session: &Session, allowed: Allowed) -> Self {
        // The kernel computes RFC 5880's digests only: FRR's HMAC-SHA1
        // stays with userspace.
        let rfc_digest = session
            .auth()
            .is_none_or(|a| a.config().construction == crate::wire::Construction::Rfc5880);
        Self {
            role: session.fast_path_role(),
            offload_allowed: allowed.offload,
            authenticated: session.auth().is_some(),
            sign_allowed: allowed.sign && rfc_digest,
            steady_reply: session.steady_packet().header_bytes(),
            send_key: session.auth().map_or(0, |a| a.config().send_key),
            detection_ns: session.detection_time_ns().unwrap_or(0) as u64,
            local_demand: session.local_demand_active(),
            desired_min_tx_ns: session.desired_min_tx_in_force_ns() as u64,
            own_clock_allowed: allowed.own_clock,
        }
    }

    /// The role the kernel should hold: the state machine's, unless the
    /// engine keeps the session in userspace.
    fn wanted(&self) -> Option<FastPathRole> {
        self.role
            .filter(|_| self.offload_allowed && (self.sign_allowed || !self.authenticated))
    }
}

/// What the engine's configuration lets the kernel do for a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Allowed {
    /// Answer for it at all (`xdp_replies` and the session's `offload`).
    pub offload: bool,
    /// Sign its replies (`xdp_sign`).
    pub sign: bool,
    /// Send on its own clock (`xdp_own_clock`).
    pub own_clock: bool,
}

/// What userspace last wrote to the kernel for a session.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct KernelView {
    /// The role the kernel answers in; `None`: not offloaded.
    pub role: Option<FastPathRole>,
    /// The reply template it holds while offloaded, and the key it signs
    /// with.
    pub reply: [u8; HEADER_LEN],
    pub send_key: u8,
    /// The detection time and own clock in the sweep's slot, ns (0:
    /// unarmed).
    pub armed_detect_ns: u64,
    pub armed_clock_ns: u64,
    /// The detection time in the session's registration (its sequence
    /// window's lapse), ns.
    pub registered_detect_ns: u64,
}

impl KernelView {
    pub fn offloaded(&self) -> bool {
        self.role.is_some()
    }
}

/// Who answers for the session, and what the registration must say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Hand the session to the kernel in this role, or refresh its reply
    /// template (a Poll of ours may have announced new timers, 6.8.3).
    Offload(FastPathRole),
    /// Take it back: userspace answers from this pass (registered again,
    /// so the kernel still validates its packets).
    Withdraw,
    /// Rewrite the registration of a session the kernel does not answer
    /// for: its detection time changed, and the kernel's sequence window
    /// lapses after twice it (6.8.1).
    Reregister,
}

/// Whether the session is where this engine's policy puts it now: the
/// kernel holds the role the policy wants, or neither holds one. What
/// `ctl readiness` calls placed: a harness waits for it instead of
/// predicting the policy of the build it runs.
pub fn placed(s: &SessionView, k: &KernelView) -> bool {
    s.wanted() == k.role
}

/// The placement due now, if any (at most one per pass).
pub fn placement(s: &SessionView, k: &KernelView) -> Option<Placement> {
    let want = s.wanted();
    match (want, k.role) {
        (Some(role), None) => Some(Placement::Offload(role)),
        // The kernel's reply is no longer ours.
        (Some(role), Some(held))
            if role == held && (k.reply != s.steady_reply || k.send_key != s.send_key) =>
        {
            Some(Placement::Offload(role))
        }
        (Some(_), Some(_)) | (None, Some(_)) if want != k.role => Some(Placement::Withdraw),
        (None, None) if s.authenticated && s.detection_ns != k.registered_detect_ns => {
            Some(Placement::Reregister)
        }
        _ => None,
    }
}

/// What the kernel's sweep slot should hold: (detection time, the own
/// clock's Desired Min TX), ns, 0 for off. Asked after the placement was carried out, so
/// that a session offloaded in a pass is armed in the same pass (armed a
/// pass later, it went up to a detection time with neither own clock nor
/// kernel detection: 17-27 ms gaps under 30 % loss).
/// - Not offloaded: nothing (userspace detects and sends).
/// - Demand mode ours: the remote's silence is what we asked for; no
///   kernel detection (6.8.4).
/// - Only a Steady session has an own clock in the kernel; to a remote in
///   Demand mode nothing periodic goes (6.8.7). `xdp_own_clock = false`
///   (the negative control) takes it away.
pub fn sweep(s: &SessionView, k: &KernelView) -> (u64, u64) {
    let Some(role) = k.role else {
        return (0, 0);
    };
    let detect_ns = if s.local_demand { 0 } else { s.detection_ns };
    let clock_ns = if role == FastPathRole::Steady && s.own_clock_allowed {
        s.desired_min_tx_ns
    } else {
        0
    };
    (detect_ns, clock_ns)
}

/// Whether the sweep slot must be rewritten.
pub fn sweep_stale(s: &SessionView, k: &KernelView) -> bool {
    sweep(s, k) != (k.armed_detect_ns, k.armed_clock_ns)
}

/// How late userspace's own detection runs: while the kernel's sweep is
/// the detector (its event carries the instant), userspace is the
/// backstop, a grace period later; otherwise on time.
pub fn detection_grace(k: &KernelView) -> Nanos {
    if k.offloaded() && k.armed_detect_ns != 0 {
        KERNEL_DETECTION_GRACE_NS
    } else {
        0
    }
}

/// Whether the kernel transmits for the session (Steady): userspace then
/// keeps only its backstops. A remote in Demand mode gets only Finals from
/// the kernel; our own Polls still leave from userspace (6.8.7).
pub fn kernel_transmits(k: &KernelView) -> bool {
    k.role == Some(FastPathRole::Steady)
}

/// Who judges a received packet's authentication sequence (6.7.3-6.7.4):
/// the first plane that saw it. Every registered session is in `lc_bfd`'s
/// map, so a packet that came through the program (`through_fast_path`:
/// it arrived on an interface the program is attached to) and names our
/// discriminator had its window applied there; a bootstrap packet (Your
/// Discriminator 0) or one from elsewhere reaches userspace unjudged.
pub fn sequence_judge(through_fast_path: bool, your_discr: u32, local_discr: u32) -> SequenceJudge {
    if through_fast_path && your_discr == local_discr {
        SequenceJudge::Kernel
    } else {
        SequenceJudge::Here
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use FastPathRole::{PollsOnly, Steady};

    const REPLY: [u8; HEADER_LEN] = [0x20; HEADER_LEN];
    const MS: u64 = 1_000_000;

    fn steady() -> SessionView {
        SessionView {
            role: Some(Steady),
            offload_allowed: true,
            authenticated: false,
            sign_allowed: true,
            steady_reply: REPLY,
            send_key: 0,
            detection_ns: 30 * MS,
            local_demand: false,
            desired_min_tx_ns: 10 * MS,
            own_clock_allowed: true,
        }
    }

    fn offloaded(role: FastPathRole) -> KernelView {
        KernelView {
            role: Some(role),
            reply: REPLY,
            send_key: 0,
            armed_detect_ns: 30 * MS,
            armed_clock_ns: if role == Steady { 10 * MS } else { 0 },
            registered_detect_ns: 0,
        }
    }

    #[test]
    fn a_session_is_placed_once_the_kernel_holds_what_the_policy_wants() {
        let s = steady();
        assert!(!placed(&s, &KernelView::default()));
        assert!(placed(&s, &offloaded(FastPathRole::Steady)));
        let kept = SessionView {
            offload_allowed: false,
            ..s
        };
        assert!(placed(&kept, &KernelView::default()));
        assert!(!placed(&kept, &offloaded(FastPathRole::Steady)));
    }

    #[test]
    fn a_steady_session_is_offloaded_in_its_role() {
        assert_eq!(
            placement(&steady(), &KernelView::default()),
            Some(Placement::Offload(Steady))
        );
        let demanding = SessionView {
            role: Some(PollsOnly),
            ..steady()
        };
        assert_eq!(
            placement(&demanding, &KernelView::default()),
            Some(Placement::Offload(PollsOnly))
        );
    }

    #[test]
    fn an_offloaded_session_in_its_role_with_its_reply_needs_nothing() {
        assert_eq!(placement(&steady(), &offloaded(Steady)), None);
        assert!(!sweep_stale(&steady(), &offloaded(Steady)));
    }

    #[test]
    fn a_changed_reply_template_is_offloaded_afresh() {
        // A Poll of ours announced new timers (6.8.3): the kernel's reply
        // is no longer ours.
        let s = SessionView {
            steady_reply: [0x21; HEADER_LEN],
            ..steady()
        };
        assert_eq!(
            placement(&s, &offloaded(Steady)),
            Some(Placement::Offload(Steady))
        );
    }

    #[test]
    fn a_session_that_leaves_steady_state_is_withdrawn() {
        // A Poll in progress, a Final owed, Down: no role.
        let s = SessionView {
            role: None,
            ..steady()
        };
        assert_eq!(placement(&s, &offloaded(Steady)), Some(Placement::Withdraw));
    }

    #[test]
    fn a_changed_role_is_withdrawn_first() {
        // The remote entered Demand mode: userspace's for this pass,
        // offloaded afresh in its new role at the next.
        let s = SessionView {
            role: Some(PollsOnly),
            ..steady()
        };
        assert_eq!(placement(&s, &offloaded(Steady)), Some(Placement::Withdraw));
    }

    #[test]
    fn an_authenticated_session_is_offloaded_and_a_key_rollover_refreshes_it() {
        // The kernel signs its replies (6.7).
        let s = SessionView {
            authenticated: true,
            send_key: 1,
            ..steady()
        };
        assert_eq!(
            placement(&s, &KernelView::default()),
            Some(Placement::Offload(Steady))
        );
        let signing = KernelView {
            send_key: 1,
            ..offloaded(Steady)
        };
        assert_eq!(placement(&s, &signing), None);
        // `ctl key --send 2` (6.7.1): the kernel signs with the new key.
        let rolled = SessionView { send_key: 2, ..s };
        assert_eq!(
            placement(&rolled, &signing),
            Some(Placement::Offload(Steady))
        );
    }

    #[test]
    fn without_kernel_signing_authenticated_sessions_stay_in_userspace() {
        // `xdp_sign = false`, the negative control.
        let s = SessionView {
            authenticated: true,
            sign_allowed: false,
            ..steady()
        };
        assert_eq!(placement(&s, &offloaded(Steady)), Some(Placement::Withdraw));
        // Not offloaded: registered again whenever the detection time
        // changes (the kernel's sequence window lapses after twice it).
        let kernel = KernelView {
            registered_detect_ns: 900 * MS,
            ..KernelView::default()
        };
        assert_eq!(placement(&s, &kernel), Some(Placement::Reregister));
        let current = KernelView {
            registered_detect_ns: 30 * MS,
            ..KernelView::default()
        };
        assert_eq!(placement(&s, &current), None);
    }

    #[test]
    fn the_engine_can_keep_every_session_in_userspace() {
        // `xdp_replies = false` (the negative control) or `offload = false`.
        let s = SessionView {
            offload_allowed: false,
            ..steady()
        };
        assert_eq!(placement(&s, &KernelView::default()), None);
        assert_eq!(placement(&s, &offloaded(Steady)), Some(Placement::Withdraw));
    }

    #[test]
    fn the_sweep_is_armed_only_while_offloaded() {
        assert_eq!(sweep(&steady(), &KernelView::default()), (0, 0));
        assert_eq!(sweep(&steady(), &offloaded(Steady)), (30 * MS, 10 * MS));
        // Freshly offloaded in this pass: armed in the same pass.
        let fresh = KernelView {
            armed_detect_ns: 0,
            armed_clock_ns: 0,
            ..offloaded(Steady)
        };
        assert!(sweep_stale(&steady(), &fresh));
    }

    #[test]
    fn a_new_detection_time_rearms_the_sweep() {
        let s = SessionView {
            detection_ns: 150 * MS,
            desired_min_tx_ns: 50 * MS,
            ..steady()
        };
        assert!(sweep_stale(&s, &offloaded(Steady)));
        assert_eq!(sweep(&s, &offloaded(Steady)), (150 * MS, 50 * MS));
    }

    #[test]
    fn the_negative_control_arms_detection_without_an_own_clock() {
        let s = SessionView {
            own_clock_allowed: false,
            ..steady()
        };
        assert_eq!(sweep(&s, &offloaded(Steady)), (30 * MS, 0));
    }

    #[test]
    fn demand_mode_ours_has_no_kernel_detection() {
        let s = SessionView {
            local_demand: true,
            ..steady()
        };
        assert_eq!(sweep(&s, &offloaded(Steady)).0, 0);
    }

    #[test]
    fn a_demanding_remote_gets_no_own_clock_from_the_kernel() {
        let s = SessionView {
            role: Some(PollsOnly),
            ..steady()
        };
        assert_eq!(sweep(&s, &offloaded(PollsOnly)), (30 * MS, 0));
        assert!(!kernel_transmits(&offloaded(PollsOnly)));
        assert!(kernel_transmits(&offloaded(Steady)));
    }

    #[test]
    fn userspace_detects_a_grace_late_only_behind_an_armed_sweep() {
        assert_eq!(
            detection_grace(&offloaded(Steady)),
            KERNEL_DETECTION_GRACE_NS
        );
        let unarmed = KernelView {
            armed_detect_ns: 0,
            ..offloaded(Steady)
        };
        assert_eq!(detection_grace(&unarmed), 0);
        assert_eq!(detection_grace(&KernelView::default()), 0);
    }

    #[test]
    fn the_first_plane_that_saw_a_packet_judges_its_sequence() {
        assert_eq!(sequence_judge(true, 7, 7), SequenceJudge::Kernel);
        // Bootstrap: selected by addresses, never looked up in the kernel.
        assert_eq!(sequence_judge(true, 0, 7), SequenceJudge::Here);
        // An interface without the program.
        assert_eq!(sequence_judge(false, 7, 7), SequenceJudge::Here);
    }
}
