use serde::{Deserialize, Serialize};

/// The transmit designs under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BackendKind {
    /// One thread whose clock is a 2 ms receive timeout.
    Naive,
    /// A SCHED_FIFO thread, optionally pinned, sleeping to exact deadlines.
    Rt,
    /// The same loop under SCHED_DEADLINE: ahead of every SCHED_FIFO task
    /// and out of RT throttling's reach, within its own reservation.
    Deadline,
    /// SO_TXTIME with the etf qdisc: packets handed to the kernel ahead of
    /// their departure time.
    Txtime,
    /// RX-clocked replies from XDP.
    Xdp,
}

impl BackendKind {
    pub const ALL: [BackendKind; 5] = [
        Self::Naive,
        Self::Rt,
        Self::Deadline,
        Self::Txtime,
        Self::Xdp,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Naive => "naive",
            Self::Rt => "rt",
            Self::Deadline => "deadline",
            Self::Txtime => "txtime",
            Self::Xdp => "xdp",
        }
    }

    /// "naive, rt, deadline, txtime, xdp": for an error that names them.
    pub fn names() -> String {
        Self::ALL.map(Self::name).join(", ")
    }
}

impl std::str::FromStr for BackendKind {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        Self::ALL.into_iter().find(|k| k.name() == s).ok_or(())
    }
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether a backend can run on a host, and if not, why and what fixes it:
/// one value of the object `linecardd backends --json` prints, keyed by
/// [`BackendKind::name`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Availability {
    Available,
    Unavailable { reason: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_backend_parses_from_its_own_name_and_nothing_else_does() {
        for kind in BackendKind::ALL {
            assert_eq!(kind.name().parse::<BackendKind>(), Ok(kind));
            assert_eq!(kind.to_string(), kind.name());
        }
        assert!("fifo".parse::<BackendKind>().is_err());
        assert!("Deadline".parse::<BackendKind>().is_err());
        assert_eq!(BackendKind::names(), "naive, rt, deadline, txtime, xdp");
    }

    #[test]
    fn availability_reads_back_what_linecardd_backends_json_prints() {
        let printed = r#"{"naive":{"status":"available"},"txtime":{"status":"unavailable","reason":"no etf qdisc"}}"#;
        let parsed: std::collections::BTreeMap<String, Availability> =
            serde_json::from_str(printed).unwrap();
        assert_eq!(parsed["naive"], Availability::Available);
        assert_eq!(
            parsed["txtime"],
            Availability::Unavailable {
                reason: "no etf qdisc".into()
            }
        );
    }
}
