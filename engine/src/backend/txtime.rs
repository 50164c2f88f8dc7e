//! The `txtime` backend: packets handed to the kernel ahead of their
//! departure with SO_TXTIME, released by the etf qdisc on time even when the
//! daemon is not scheduled.
//!
//! Its hazard (from the reference): a pipelined sender answered Polls a
//! second late. Finals therefore never enter the pipeline: they leave at
//! once, untimed ([`Pipeline::admit`] only admits periodic packets).

use super::Availability;
use std::collections::VecDeque;
use std::process::{Command, Stdio};

/// Whether this kernel has the etf qdisc. Probed in a private network
/// namespace (`unshare -n`), so nothing on the host changes.
pub fn availability() -> Availability {
    let probe = Command::new("unshare")
        .args([
            "-n",
            "tc",
            "qdisc",
            "add",
            "dev",
            "lo",
            "root",
            "etf",
            "clockid",
            "CLOCK_TAI",
            "delta",
            "300000",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    match probe {
        Ok(out) if out.status.success() => Availability::Available,
        Ok(out) => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let reason = if stderr.contains("Operation not permitted") {
                "probing for the etf qdisc needs root".to_string()
            } else {
                format!(
                    "this kernel has no etf qdisc (`tc qdisc add ... etf` said: {}); SO_TXTIME has nothing to honour it. \
                     Run the txtime backend on a host whose kernel has CONFIG_NET_SCH_ETF",
                    stderr.trim()
                )
            };
            Availability::Unavailable { reason }
        }
        Err(e) => Availability::Unavailable {
            reason: format!(
                "cannot run `unshare`/`tc` to probe for etf ({e}); install util-linux and iproute2"
            ),
        },
    }
}

/// How many periodic packets may wait in the qdisc, and which.
#[derive(Debug)]
pub struct Pipeline {
    depth: usize,
    /// Departure times (ns) of packets handed over and not yet departed.
    queued: VecDeque<i64>,
}

impl Pipeline {
    /// `depth` 1: one packet in flight; N: pipelined N deep.
    pub fn new(depth: usize) -> Self {
        assert!(depth >= 1);
        Self {
            depth,
            queued: VecDeque::new(),
        }
    }

    /// Forgets packets that have departed by `now`.
    pub fn advance(&mut self, now: i64) {
        while self.queued.front().is_some_and(|&t| t <= now) {
            self.queued.pop_front();
        }
    }

    /// Whether a periodic packet departing at `departure` may be handed over
    /// now; records it if so.
    pub fn admit(&mut self, now: i64, departure: i64) -> bool {
        self.advance(now);
        if self.queued.len() >= self.depth {
            return false;
        }
        self.queued.push_back(departure);
        true
    }

    pub fn in_flight(&self) -> usize {
        self.queued.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_one_holds_one_packet_in_flight() {
        let mut p = Pipeline::new(1);
        assert!(p.admit(0, 10));
        assert!(!p.admit(1, 20), "the first has not departed");
        assert!(p.admit(10, 20), "departed at 10");
    }

    #[test]
    fn depth_n_pipelines_n_deep() {
        let mut p = Pipeline::new(5);
        for i in 0..5 {
            assert!(p.admit(0, 10 * (i + 1)));
        }
        assert!(!p.admit(0, 60));
        assert_eq!(p.in_flight(), 5);
        p.advance(25);
        assert_eq!(p.in_flight(), 3);
    }
}
