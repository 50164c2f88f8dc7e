//! `linecardd bench`: this build's userspace verification cost, timed in
//! the process that runs it, for `linecard bench xdp` to print beside the
//! kernel's cost for the same packets (the harness asks the binary; it
//! never links the engine).

use crate::session::auth::{Auth, AuthConfig, AuthKey, SequenceJudge};
use crate::wire::Repr;
use linecard_api::AuthType;
use linecard_api::UserspaceVerifyCost;
use linecard_bpf_objects::craft;

/// Rounds per type; each row is the median round.
pub const ROUNDS: usize = 5;

/// Times `Auth::verify` on a genuine packet of each non-meticulous type
/// (packets of the shape `linecard bench xdp` hands the kernel), `repeat`
/// verifications per round.
pub fn verification_cost(repeat: u32) -> Result<Vec<UserspaceVerifyCost>, String> {
    let mut rows = Vec::new();
    for (auth_type, name) in [
        (AuthType::SimplePassword, "simple password"),
        (AuthType::KeyedMd5, "keyed MD5"),
        (AuthType::KeyedSha1, "keyed SHA1"),
    ] {
        let frame = craft::frame(
            255,
            &craft::authenticated(
                craft::bfd(3, 0, craft::PEER_DISCR, craft::OUR_DISCR),
                auth_type.code(),
                craft::AUTH_KEY_ID,
                100,
                craft::AUTH_SECRET,
            ),
        );
        // Ethernet, IPv4 and UDP headers: the socket hands over the rest.
        let wire = &frame[42..];
        let packet = Repr::parse_bytes(wire).map_err(|e| format!("{name}: {e:?}"))?;
        let mut auth = Auth::new(
            AuthConfig {
                auth_type,
                keys: vec![AuthKey {
                    id: craft::AUTH_KEY_ID,
                    secret: craft::AUTH_SECRET.to_vec(),
                }],
                send_key: craft::AUTH_KEY_ID,
                construction: Default::default(),
            },
            0,
        );
        let mut samples = Vec::with_capacity(ROUNDS);
        for _ in 0..ROUNDS {
            let start = std::time::Instant::now();
            for _ in 0..repeat {
                auth.verify(
                    0,
                    std::hint::black_box(&packet),
                    wire,
                    60_000_000,
                    SequenceJudge::Here,
                    10_000,
                )
                .map_err(|e| format!("{name}: the engine refused it ({e:?})"))?;
            }
            samples.push((start.elapsed().as_nanos() / u128::from(repeat.max(1))) as u32);
        }
        samples.sort_unstable();
        rows.push(UserspaceVerifyCost {
            auth_type: name.into(),
            ns_per_packet: samples[ROUNDS / 2],
            method: format!("median of {ROUNDS} x {repeat} verifications"),
        });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_row_verifies_a_genuine_packet() {
        let rows = super::verification_cost(2).unwrap();
        assert_eq!(rows.len(), 3);
        assert!(rows.iter().all(|r| r.method.contains("x 2")));
    }
}
