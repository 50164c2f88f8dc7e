//! How a run ended: one typed value that `manifest.json`, the `status`
//! file, `summary.md`, `linecard report` and the gate all read, written
//! as the same words they always carried (`complete`, `failed: <why>`,
//! `invalid: <why>`, `running`), so committed runs read back unchanged.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunStatus {
    /// Written while the run goes on (a run directory left `running`
    /// is one that crashed).
    Running,
    /// Every DUT passed, was measured, or cannot run here.
    Complete,
    /// A DUT's run could not be trusted; its numbers judge nothing.
    Invalid(String),
    /// A DUT failed, or the run did (interrupted, a full disk, a lost
    /// connection): what was written is kept.
    Failed(String),
}

impl RunStatus {
    /// Exit code 0 only for a complete run.
    pub fn is_complete(&self) -> bool {
        *self == Self::Complete
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Running => f.write_str("running"),
            Self::Complete => f.write_str("complete"),
            Self::Invalid(why) => write!(f, "invalid: {why}"),
            Self::Failed(why) => write!(f, "failed: {why}"),
        }
    }
}

impl std::str::FromStr for RunStatus {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "running" => Ok(Self::Running),
            "complete" => Ok(Self::Complete),
            _ => {
                if let Some(why) = s.strip_prefix("invalid: ") {
                    Ok(Self::Invalid(why.into()))
                } else if let Some(why) = s.strip_prefix("failed: ") {
                    Ok(Self::Failed(why.into()))
                } else {
                    Err(format!(
                        "unknown run status {s:?} (complete, running, \"failed: <why>\" or \"invalid: <why>\")"
                    ))
                }
            }
        }
    }
}

impl Serialize for RunStatus {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for RunStatus {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::RunStatus;

    #[test]
    fn reads_back_the_words_it_writes() {
        for status in [
            RunStatus::Running,
            RunStatus::Complete,
            RunStatus::Invalid("xdp: INVALID: steal in the gap".into()),
            RunStatus::Failed("interrupted (partial results kept)".into()),
        ] {
            let json = serde_json::to_string(&status).unwrap();
            assert_eq!(serde_json::from_str::<RunStatus>(&json).unwrap(), status);
            assert_eq!(status.to_string().parse::<RunStatus>(), Ok(status));
        }
        assert_eq!(
            serde_json::to_string(&RunStatus::Failed("x".into())).unwrap(),
            "\"failed: x\""
        );
        let unknown = "done".parse::<RunStatus>().unwrap_err();
        assert!(unknown.contains("complete"), "{unknown}");
    }
}
