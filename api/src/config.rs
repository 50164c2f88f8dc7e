//! `linecardd --config FILE`: the file's shape, as linecardd reads it and
//! as the harness writes it (by serializing these types, never by
//! assembling text). Values are kept as the file spells them; linecardd
//! validates them into its own configuration, with errors that name the
//! key. A key linecardd does not know is refused (`deny_unknown_fields`),
//! so a misspelt switch in a scenario fails when the scenario is read,
//! and in the harness's code it does not compile.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The whole file: `[engine]` and any number of `[[session]]`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    #[serde(default)]
    pub engine: EngineSettings,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub session: Vec<SessionSettings>,
}

/// `[engine]`: the process's settings. Every key is optional; linecardd
/// documents each default (`engine/src/config.rs`, `EngineConfig`). The
/// `Option<bool>` switches other than `sched_deadline` exist for negative
/// controls: each turns one guarantee off so that a test can show it
/// fails without it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineSettings {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rt_priority: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control_socket: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frr_dataplane: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frr_backend: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// Where linecardd serves OpenMetrics text (`ADDRESS:PORT`, GET
    /// /metrics); unset: no endpoint.
    pub metrics: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// How many sessions get gap histograms of their own (default 1024).
    pub metrics_sessions: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frr_hold_seconds: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub txtime_depth: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub xdp_replies: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub xdp_own_clock: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub xdp_sign: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub xdp_sweep_fixed_period: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub never_leave_init: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verify_authentication: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sched_deadline: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dead_man_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// Where a handover pins the fast path: a folder linecardd makes, on
    /// a BPF filesystem (default `/sys/fs/bpf/linecardd-HASH`).
    pub handover_dir: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// How long the kernel answers alone after a handover, ms.
    pub handover_window_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// `false` is the negative control only: a handed-over record is not
    /// adopted (its sessions are sent AdminDown and start afresh).
    pub handover_adopt: Option<bool>,
}

impl EngineSettings {
    /// The xdp backend answers steady sessions from the kernel (a switch
    /// left unset is on, as linecardd's default is).
    pub fn xdp_replies_on(&self) -> bool {
        self.xdp_replies != Some(false)
    }

    /// The xdp backend signs authenticated replies in the kernel.
    pub fn xdp_sign_on(&self) -> bool {
        self.xdp_sign != Some(false)
    }
}

/// One `[[session]]` table, also the payload of the control socket's
/// `add`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionSettings {
    pub peer: String,
    pub local: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_interval_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_interval_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub multiplier: Option<i64>,
    /// A `BackendKind`'s name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interface: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub multihop: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_ttl: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offload: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub echo: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub echo_interval_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub passive: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub demand: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub demand_verify_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth: Option<AuthSettings>,
}

/// `auth = { type = "keyed_sha1", keys = [{ id = 1, secret = "..." }] }`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthSettings {
    /// An `AuthType`'s name.
    #[serde(rename = "type")]
    pub kind: String,
    pub keys: Vec<AuthKeySettings>,
    /// Default: the first key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub send_key: Option<i64>,
    /// The keyed digest's construction: `rfc5880` (default) or
    /// `frr-hmac-sha1` (FRR bfdd's keyed SHA1, not RFC 5880 6.7.4).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthKeySettings {
    pub id: i64,
    pub secret: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_reads_back_as_it_was_written_and_unset_keys_stay_out_of_it() {
        let file = ConfigFile {
            engine: EngineSettings {
                control_socket: Some("/run/lc.sock".into()),
                sched_deadline: Some(false),
                ..EngineSettings::default()
            },
            session: vec![SessionSettings {
                peer: "192.0.2.2".into(),
                local: "192.0.2.1".into(),
                backend: Some("xdp".into()),
                auth: Some(AuthSettings {
                    kind: "keyed_sha1".into(),
                    keys: vec![AuthKeySettings {
                        id: 1,
                        secret: "s".into(),
                    }],
                    send_key: None,
                    digest: None,
                }),
                ..SessionSettings::default()
            }],
        };
        let text = toml::to_string(&file).unwrap();
        assert!(
            !text.contains("rt_priority") && !text.contains("send_key"),
            "{text}"
        );
        assert_eq!(toml::from_str::<ConfigFile>(&text).unwrap(), file);
    }

    #[test]
    fn a_misspelt_switch_is_refused_naming_it() {
        let err = toml::from_str::<ConfigFile>("[engine]\nxdp_reply = false\n").unwrap_err();
        assert!(err.to_string().contains("xdp_reply"), "{err}");
        assert!(
            EngineSettings::default().xdp_replies_on() && EngineSettings::default().xdp_sign_on()
        );
        let off = EngineSettings {
            xdp_replies: Some(false),
            xdp_sign: Some(false),
            ..EngineSettings::default()
        };
        assert!(!off.xdp_replies_on() && !off.xdp_sign_on());
    }
}
