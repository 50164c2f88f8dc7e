//! `linecardd ctl peers [--counters]` held key for key to a running FRR
//! bfdd's own `show bfd peers [counters] json` (FRR 8.4.4, issue 41): the
//! same keys (ours may add the interface the session is bound to), and
//! each side's figures of the session seen from the other: one's `id` is
//! the other's `remote-id`, one's intervals the other's remote
//! intervals, what one sent the other received.

use crate::common::ctl;
use linecard_harness::procs::vtysh;
use std::collections::BTreeSet;
use std::path::Path;

/// FRR's JSON for `command`, by peer address.
fn frr(vty: &Path, command: &str) -> Vec<serde_json::Value> {
    let out = vtysh(linecard_harness::lab::spec::PEER.namespace, vty, &[command]).unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str::<serde_json::Value>(&text)
        .unwrap_or_else(|e| panic!("vtysh {command}: {e}: {text}"))
        .as_array()
        .cloned()
        .unwrap()
}

fn keys(v: &serde_json::Value) -> BTreeSet<String> {
    v.as_object().unwrap().keys().cloned().collect()
}

/// Checks the DUT's `ctl peers` against the peer FRR's view of each
/// session (all Up, single hop, with traffic flowing between the reads).
pub fn ctl_peers_reads_as_frr_s_own(socket: &Path, frr_vty: &Path) {
    for (ours_args, command) in [
        (&["peers"][..], "show bfd peers json"),
        (&["peers", "--counters"][..], "show bfd peers counters json"),
    ] {
        let ours = ctl(socket, ours_args);
        let ours = ours.as_array().unwrap();
        let theirs = frr(frr_vty, command);
        assert_eq!(ours.len(), theirs.len(), "{ours:#?} {theirs:#?}");
        for o in ours {
            let t = (theirs.iter())
                .find(|t| t["peer"] == o["local"])
                .unwrap_or_else(|| panic!("FRR has no session with {}", o["local"]));
            let (ours_keys, theirs_keys) = (keys(o), keys(t));
            let missing: Vec<_> = theirs_keys.difference(&ours_keys).collect();
            let extra: Vec<_> = (ours_keys.difference(&theirs_keys))
                .filter(|k| *k != "interface")
                .collect();
            assert!(
                missing.is_empty() && extra.is_empty(),
                "{command}: keys FRR prints that we do not: {missing:?}; ours beyond FRR's: {extra:?}\nours {o:#}\nFRR {t:#}"
            );
            if ours_args.len() == 1 {
                assert_eq!(o["status"], "up");
                assert_eq!(t["status"], "up");
                assert_eq!(o["id"], t["remote-id"], "{o:#} {t:#}");
                assert_eq!(o["remote-id"], t["id"]);
                for (mine, seen_there) in [
                    ("receive-interval", "remote-receive-interval"),
                    ("transmit-interval", "remote-transmit-interval"),
                    ("detect-multiplier", "remote-detect-multiplier"),
                ] {
                    assert_eq!(o[mine], t[seen_there], "{mine}: {o:#} {t:#}");
                    assert_eq!(t[mine], o[seen_there], "{mine}: {o:#} {t:#}");
                }
                assert_eq!(o["diagnostic"], t["remote-diagnostic"]);
            } else {
                // Read a moment apart, at 10 packets a second each way.
                let near = |a: &serde_json::Value, b: &serde_json::Value| {
                    let (a, b) = (a.as_i64().unwrap(), b.as_i64().unwrap());
                    a > 0 && (a - b).abs() <= 5
                };
                assert!(
                    near(&o["control-packet-output"], &t["control-packet-input"])
                        && near(&o["control-packet-input"], &t["control-packet-output"]),
                    "packets each way: ours {o:#} FRR {t:#}"
                );
                assert_eq!(
                    (o["session-up"].clone(), o["session-down"].clone()),
                    (1.into(), 0.into())
                );
                assert_eq!(o["session-up"], t["session-up"]);
            }
        }
    }
}
