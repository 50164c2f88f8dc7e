//! The scripted remote system's own reading and writing of the BFD Control
//! packet's mandatory section (RFC 5880 4.1). Deliberately not the engine's
//! codec: a conformance test that judged the engine with the engine's own
//! parser would share its mistakes.

/// `State` (RFC 5880 4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    AdminDown,
    Down,
    Init,
    Up,
}

impl State {
    fn from_bits(bits: u8) -> Self {
        match bits & 3 {
            0 => Self::AdminDown,
            1 => Self::Down,
            2 => Self::Init,
            _ => Self::Up,
        }
    }

    fn bits(self) -> u8 {
        match self {
            Self::AdminDown => 0,
            Self::Down => 1,
            Self::Init => 2,
            Self::Up => 3,
        }
    }
}

/// Diag 1, Control Detection Time Expired (RFC 5880 4.1).
pub const DIAG_DETECTION_EXPIRED: u8 = 1;
/// Diag 3, Neighbor Signaled Session Down.
pub const DIAG_NEIGHBOR_DOWN: u8 = 3;
/// Diag 7, Administratively Down.
pub const DIAG_ADMIN_DOWN: u8 = 7;

/// Every field of the mandatory section, as sent or as received.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Control {
    pub version: u8,
    pub diag: u8,
    pub state: State,
    pub poll: bool,
    #[serde(rename = "final")]
    pub final_: bool,
    pub control_plane_independent: bool,
    pub authenticated: bool,
    pub demand: bool,
    pub multipoint: bool,
    pub detect_mult: u8,
    /// The Length field, not the datagram's.
    pub length: u8,
    pub my_discr: u32,
    pub your_discr: u32,
    pub desired_min_tx_us: u32,
    pub required_min_rx_us: u32,
    pub required_min_echo_rx_us: u32,
}

impl Control {
    /// A well-formed packet of ours (version 1, length 24, no echo).
    pub fn new(state: State, my_discr: u32, your_discr: u32) -> Self {
        Self {
            version: 1,
            diag: 0,
            state,
            poll: false,
            final_: false,
            control_plane_independent: false,
            authenticated: false,
            demand: false,
            multipoint: false,
            detect_mult: 3,
            length: 24,
            my_discr,
            your_discr,
            desired_min_tx_us: 0,
            required_min_rx_us: 0,
            required_min_echo_rx_us: 0,
        }
    }

    /// Reads the first 24 bytes, whatever they say: judging them is the
    /// suite's job. `None` when fewer than 24 arrived.
    pub fn parse(bytes: &[u8]) -> Option<Self> {
        let b = bytes.get(..24)?;
        let word = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let flags = b[1];
        Some(Self {
            version: b[0] >> 5,
            diag: b[0] & 0x1f,
            state: State::from_bits(flags >> 6),
            poll: flags & 0x20 != 0,
            final_: flags & 0x10 != 0,
            control_plane_independent: flags & 0x08 != 0,
            authenticated: flags & 0x04 != 0,
            demand: flags & 0x02 != 0,
            multipoint: flags & 0x01 != 0,
            detect_mult: b[2],
            length: b[3],
            my_discr: word(4),
            your_discr: word(8),
            desired_min_tx_us: word(12),
            required_min_rx_us: word(16),
            required_min_echo_rx_us: word(20),
        })
    }

    pub fn to_bytes(&self) -> [u8; 24] {
        let mut b = [0u8; 24];
        b[0] = (self.version << 5) | (self.diag & 0x1f);
        b[1] = (self.state.bits() << 6)
            | u8::from(self.poll) << 5
            | u8::from(self.final_) << 4
            | u8::from(self.control_plane_independent) << 3
            | u8::from(self.authenticated) << 2
            | u8::from(self.demand) << 1
            | u8::from(self.multipoint);
        b[2] = self.detect_mult;
        b[3] = self.length;
        for (at, word) in [
            (4, self.my_discr),
            (8, self.your_discr),
            (12, self.desired_min_tx_us),
            (16, self.required_min_rx_us),
            (20, self.required_min_echo_rx_us),
        ] {
            b[at..at + 4].copy_from_slice(&word.to_be_bytes());
        }
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_survives_a_round_trip() {
        let mut p = Control::new(State::Init, 0x0102_0304, 0xa0b0_c0d0);
        p.diag = DIAG_ADMIN_DOWN;
        p.poll = true;
        p.multipoint = true;
        p.detect_mult = 7;
        p.desired_min_tx_us = 50_000;
        p.required_min_rx_us = 200_000;
        p.required_min_echo_rx_us = 9;
        let bytes = p.to_bytes();
        // RFC 5880 4.1: Vers 1 in the top three bits, then Diag.
        assert_eq!(bytes[0], 0x27);
        // State Init (2) in the top two bits, P, and M last.
        assert_eq!(bytes[1], 0b1010_0001);
        assert_eq!(Control::parse(&bytes), Some(p));
        assert_eq!(Control::parse(&bytes[..23]), None);
    }
}
