//! Any sequence of packets and clock steps into a session: no panic, and
//! the session's invariants hold (My Discriminator never 0, P and F never
//! together, no state change from a refused packet). The first byte
//! chooses a session without authentication or one with each type (RFC
//! 5880 6.7), whose verification then sees every packet; its top bit puts
//! the session in Demand mode (6.6), whose D appears only while both sides
//! are Up.
#![no_main]
use libfuzzer_sys::fuzz_target;
use linecard_api::AUTH_TYPES;
use linecard_engine::session::auth::{Auth, AuthConfig, AuthKey};
use linecard_engine::session::{Session, SessionConfig};
use linecard_engine::wire::Repr;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, data)) = data.split_first() else {
        return;
    };
    let config = SessionConfig {
        local_discr: 0x1111,
        desired_min_tx_us: 10_000,
        required_min_rx_us: 10_000,
        detect_mult: 3,
        required_min_echo_rx_us: 0,
        passive: false,
        demand: mode & 0x80 != 0,
        demand_verify_us: 100_000,
    };
    let mut session = Session::new(config, 0, 1);
    if let Some(&(_, auth_type)) = AUTH_TYPES.get(usize::from((mode & 0x7f) % 6)) {
        let keys = vec![AuthKey { id: 1, secret: b"linecard".to_vec() }];
        session = session.with_auth(Auth::new(AuthConfig { auth_type, keys, send_key: 1, construction: Default::default() }, 7));
    }
    let mut now: i64 = 0;
    // Room for the longest packet (keyed SHA1, 52 bytes) after the step.
    for chunk in data.chunks(54) {
        // Two bytes of time step (up to ~65 ms), then a packet.
        let (step, bytes) = chunk.split_at(chunk.len().min(2));
        now += i64::from(u16::from_be_bytes([step.first().copied().unwrap_or(0), step.get(1).copied().unwrap_or(0)])) * 1_000;
        if let Ok(packet) = Repr::parse_bytes(bytes) {
            let before = session.state();
            if session.receive(now, &packet, bytes).is_err() {
                assert_eq!(session.state(), before, "a refused packet changed state");
            }
        }
        session.on_timer(now);
        while let Some(out) = session.poll_transmit(now) {
            assert_ne!(out.my_discr, 0);
            assert!(!(out.poll && out.final_));
            assert!(!out.demand || session.local_demand_active(), "D while not both Up");
        }
    }
});
