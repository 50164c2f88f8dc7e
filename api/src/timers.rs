//! The bounds of a session's timers, one definition for every way a
//! session is configured: linecardd's config file, `ctl add`, `ctl set`
//! and FRR's dataplane session messages. A value outside them is refused
//! with the key, the value and the bound; nothing is computed from it
//! first (`ctl set --tx-ms 4294968` once wrapped to 704 us).

use std::ops::RangeInclusive;

/// Desired Min TX and Required Min RX, ms: 1 ms to a minute. RFC 5880
/// 6.8.3 lets a session slow to 1 s while not Up; a minute is the slowest
/// any deployment asks for, and keeps every product of an interval and a
/// Detect Mult inside an i64 of nanoseconds.
pub const INTERVAL_MS: RangeInclusive<i64> = 1..=60_000;

/// Detect Mult (RFC 5880 4.1): zero is invalid (6.8.6 discards it).
pub const MULTIPLIER: RangeInclusive<i64> = 1..=255;

/// A session's timers, validated: both intervals in µs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timers {
    pub tx_interval_us: u32,
    pub rx_interval_us: u32,
    pub multiplier: u8,
}

/// Why a timer was refused: which key, its value, the rule.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{key} = {value}: {why}")]
pub struct TimerError {
    pub key: &'static str,
    pub value: String,
    pub why: String,
}

impl TimerError {
    fn new(key: &'static str, value: impl std::fmt::Display, why: String) -> Self {
        Self {
            key,
            value: value.to_string(),
            why,
        }
    }
}

/// One interval given in ms (`key` names it in the error), as µs.
pub fn interval_ms(key: &'static str, ms: i64) -> Result<u32, TimerError> {
    if !INTERVAL_MS.contains(&ms) {
        return Err(TimerError::new(
            key,
            ms,
            format!(
                "must be {} to {} milliseconds",
                INTERVAL_MS.start(),
                INTERVAL_MS.end()
            ),
        ));
    }
    // In range: at most 60_000_000, far inside a u32.
    Ok((ms * 1000) as u32)
}

/// One interval given in µs (FRR's dataplane messages carry µs).
pub fn interval_us(key: &'static str, us: u32) -> Result<u32, TimerError> {
    let (lo, hi) = (INTERVAL_MS.start() * 1000, INTERVAL_MS.end() * 1000);
    if !(lo..=hi).contains(&i64::from(us)) {
        return Err(TimerError::new(
            key,
            us,
            format!("must be {lo} to {hi} microseconds"),
        ));
    }
    Ok(us)
}

pub fn multiplier(value: i64) -> Result<u8, TimerError> {
    if !MULTIPLIER.contains(&value) {
        return Err(TimerError::new(
            "multiplier",
            value,
            format!("must be {} to {}", MULTIPLIER.start(), MULTIPLIER.end()),
        ));
    }
    Ok(value as u8)
}

impl Timers {
    /// From the config file's and the control socket's milliseconds.
    pub fn from_ms(tx_ms: i64, rx_ms: i64, mult: i64) -> Result<Self, TimerError> {
        Ok(Self {
            tx_interval_us: interval_ms("tx_interval_ms", tx_ms)?,
            rx_interval_us: interval_ms("rx_interval_ms", rx_ms)?,
            multiplier: multiplier(mult)?,
        })
    }

    /// From FRR's dataplane microseconds.
    pub fn from_us(tx_us: u32, rx_us: u32, mult: u8) -> Result<Self, TimerError> {
        Ok(Self {
            tx_interval_us: interval_us("min_tx", tx_us)?,
            rx_interval_us: interval_us("min_rx", rx_us)?,
            multiplier: multiplier(i64::from(mult))?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bound_is_checked_before_any_arithmetic() {
        // The value that once wrapped to 704 us in `ctl set`.
        let wrapped = Timers::from_ms(4_294_968, 10, 3).unwrap_err();
        assert_eq!(wrapped.key, "tx_interval_ms");
        assert_eq!(
            wrapped.to_string(),
            "tx_interval_ms = 4294968: must be 1 to 60000 milliseconds"
        );
        for (tx, rx, mult, key) in [
            (0, 10, 3, "tx_interval_ms"),
            (60_001, 10, 3, "tx_interval_ms"),
            (10, -1, 3, "rx_interval_ms"),
            (10, i64::MAX, 3, "rx_interval_ms"),
            (10, 10, 0, "multiplier"),
            (10, 10, 256, "multiplier"),
        ] {
            assert_eq!(Timers::from_ms(tx, rx, mult).unwrap_err().key, key);
        }
        assert_eq!(
            Timers::from_ms(60_000, 1, 255),
            Ok(Timers {
                tx_interval_us: 60_000_000,
                rx_interval_us: 1000,
                multiplier: 255
            })
        );
        assert_eq!(Timers::from_us(999, 10_000, 3).unwrap_err().key, "min_tx");
        assert_eq!(
            Timers::from_us(10_000, 60_000_001, 3).unwrap_err().key,
            "min_rx"
        );
        assert_eq!(
            Timers::from_us(10_000, 10_000, 0).unwrap_err().key,
            "multiplier"
        );
        assert!(Timers::from_us(10_000, 10_000, 3).is_ok());
    }
}
