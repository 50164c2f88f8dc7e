//! Which transmit backends can run, asked of the linecardd binary that will
//! run them (`linecardd backends --json`), here or on a remote host: the
//! harness never computes it in-process, since the answer belongs to that
//! binary on that kernel (a missing etf qdisc, RT throttling, XDP support).

use anyhow::{Context, Result};
use linecard_api::Availability;
use std::collections::BTreeMap;

/// What `linecardd backends --json` printed: each backend's name and
/// whether it can run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Backends(BTreeMap<String, Availability>);

impl Backends {
    /// Reads what `linecardd backends --json` printed on `host` (named in
    /// the error).
    pub fn parse(stdout: &[u8], host: &str) -> Result<Self> {
        serde_json::from_slice(stdout).map(Self).with_context(|| {
            format!(
                "linecardd backends --json on {host} printed no availability: {}",
                String::from_utf8_lossy(stdout).trim()
            )
        })
    }

    /// Asks the local linecardd (`linecardd::binary`).
    pub fn local() -> Result<Self> {
        let binary = crate::linecardd::binary();
        let out = std::process::Command::new(&binary)
            .args(["backends", "--json"])
            .output()
            .with_context(|| format!("running {} backends --json", binary.display()))?;
        Self::parse(&out.stdout, "this host")
    }

    /// Why `backend` cannot run, if it cannot; a backend the binary does
    /// not know cannot run either.
    pub fn unavailable(&self, backend: &str) -> Option<String> {
        match self.0.get(backend) {
            Some(Availability::Available) => None,
            Some(Availability::Unavailable { reason }) => Some(reason.clone()),
            None => Some(format!(
                "this linecardd has no backend {backend} (it knows {})",
                self.0.keys().cloned().collect::<Vec<_>>().join(", ")
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_availability_linecardd_prints() {
        let printed = br#"{"naive":{"status":"available"},"txtime":{"status":"unavailable","reason":"no etf qdisc"}}"#;
        let backends = Backends::parse(printed, "the test").unwrap();
        assert_eq!(backends.unavailable("naive"), None);
        assert_eq!(
            backends.unavailable("txtime").as_deref(),
            Some("no etf qdisc")
        );
        let unknown = backends.unavailable("xdp").unwrap();
        assert!(unknown.contains("naive, txtime"), "{unknown}");
        let garbage = Backends::parse(b"naive available", "h1").unwrap_err();
        assert!(format!("{garbage:#}").contains("on h1"), "{garbage:#}");
    }
}
