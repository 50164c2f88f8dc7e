//! What a report warns about a run's measurement, typed: each says what
//! happened, to which DUT, and what to do about it. Reports print them
//! (Markdown, HTML) and serialise them as that text (JSON).

use crate::manifest::status::RunStatus;
use serde::{Serialize, Serializer};

#[derive(Clone, Debug, PartialEq)]
pub enum Warning {
    /// The run did not complete: its tables are what it had.
    RunNotComplete(RunStatus),
    /// A DUT's run could not be trusted.
    Invalid { dut: String, why: String },
    /// A DUT failed its expectations.
    Failed { dut: String, why: String },
    /// An attempt the runner repeated because its environment spoiled it.
    Spoiled {
        dut: String,
        attempt: usize,
        of: usize,
        verdict: String,
    },
    /// Hypervisor steal on the DUT's CPUs during the run.
    Steal { dut: String, ms: f64 },
    /// The capture reported drops (or did not say).
    CaptureDrops { dut: String, dropped: Option<u64> },
    /// The capture could not be read back.
    CaptureUnreadable {
        dut: String,
        capture: String,
        error: String,
    },
    /// The harness could not reach a host over SSH for a while.
    ConnectionLost {
        dut: String,
        host: String,
        seconds: f64,
    },
    /// A drop counter of an interface in the DUT's receive path moved in
    /// a phase: frames lost before any daemon saw them.
    DropsMoved {
        dut: String,
        phase: String,
        interface: String,
        /// `name +delta` of each counter that moved.
        moved: String,
    },
    /// What the analyzer said of a capture.
    Capture {
        dut: String,
        code: String,
        message: String,
    },
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::RunNotComplete(status) => write!(
                f,
                "run status: {status} (the tables hold what was measured before it ended; rerun to complete it)"
            ),
            Self::Invalid { dut, why } => write!(
                f,
                "{dut}: invalid: {why} (its figures judge nothing; rerun on a quieter host)"
            ),
            Self::Failed { dut, why } => write!(f, "{dut}: failed: {why}"),
            Self::Spoiled {
                dut,
                attempt,
                of,
                verdict,
            } => write!(
                f,
                "{dut}: attempt {attempt} of {of} was spoiled by its environment ({verdict}; the run kept it in the DUT's directory)"
            ),
            Self::Steal { dut, ms } => write!(
                f,
                "{dut}: the hypervisor stole {ms:.0} ms from the DUT's CPUs during the run (a gap is excused only by steal inside it; dedicated CPUs remove it)"
            ),
            Self::CaptureDrops { dut, dropped } => match dropped {
                Some(n) => write!(
                    f,
                    "{dut}: the capture dropped {n} packets (gaps may be the capture's: give the observer a CPU of its own)"
                ),
                None => write!(
                    f,
                    "{dut}: the capture did not say whether it dropped packets (tcpdump ended before its statistics)"
                ),
            },
            Self::CaptureUnreadable {
                dut,
                capture,
                error,
            } => write!(f, "{dut}: capture {capture} unreadable: {error}"),
            Self::ConnectionLost { dut, host, seconds } => write!(
                f,
                "{dut}: the harness could not reach the {host} host for {seconds:.1} s; the run's processes ran on there and the verdict is the capture's (a steadier management network avoids it)"
            ),
            Self::DropsMoved {
                dut,
                phase,
                interface,
                moved,
            } => write!(
                f,
                "{dut}: in phase {phase}, {interface} counted drops ({moved}): frames lost on the receive path before any daemon saw them (the manifest's receive_path says what decides it)"
            ),
            Self::Capture { dut, code, message } => write!(f, "{dut}: capture: [{code}] {message}"),
        }
    }
}

impl Serialize for Warning {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_warning_names_its_dut_and_what_to_do() {
        let steal = Warning::Steal {
            dut: "xdp".into(),
            ms: 12.4,
        };
        assert!(steal
            .to_string()
            .starts_with("xdp: the hypervisor stole 12 ms"));
        assert!(steal.to_string().contains("dedicated CPUs"));
        let drops = Warning::CaptureDrops {
            dut: "naive".into(),
            dropped: Some(3),
        };
        assert!(drops.to_string().contains("dropped 3 packets"));
        assert_eq!(
            serde_json::to_value(&drops).unwrap(),
            serde_json::Value::String(drops.to_string())
        );
        let moved = Warning::DropsMoved {
            dut: "xdp".into(),
            phase: "L4#3".into(),
            interface: "lc-dut/eth0".into(),
            moved: "rx_queue_0_drops +4".into(),
        };
        assert!(moved
            .to_string()
            .starts_with("xdp: in phase L4#3, lc-dut/eth0 counted drops (rx_queue_0_drops +4)"));
        let status = Warning::RunNotComplete(RunStatus::Failed("interrupted".into()));
        assert!(status
            .to_string()
            .starts_with("run status: failed: interrupted"));
    }
}
