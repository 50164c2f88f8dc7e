//! What a reload changes (SIGHUP, `ctl reload`): the config file as it was
//! read last and as it reads now, compared session by session. Pure: the
//! daemon applies the plan (`daemon/reload.rs`).
//!
//! A session is the same session while its path (local, peer, multihop)
//! is; what it may change without leaving Up:
//! - its timers, through a Poll Sequence (RFC 5880 6.8.3);
//! - the key it sends with, among keys both files configure (6.7.1: the
//!   Auth Key ID lets several keys be valid at once, so the peer keeps
//!   accepting either while it rolls over).
//!
//! Any other change (backend, interface, key set, Demand mode...) makes
//! it another session: the old one is sent AdminDown (6.8.16) and the new
//! one brought up. The `[engine]` table is read at start only: a reload
//! that changes it is refused whole, and changes nothing.

use crate::config::{EngineConfig, SessionSpec};
use crate::session::table::PathKey;

/// A session's new timers (the config file's, already bounded).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retime {
    pub tx_interval_us: u32,
    pub rx_interval_us: u32,
    pub multiplier: u8,
}

#[derive(Debug, Default, PartialEq, Eq)]
pub struct ReloadPlan {
    /// In the new file only: brought up.
    pub add: Vec<SessionSpec>,
    /// In the old file only: sent AdminDown and removed.
    pub remove: Vec<PathKey>,
    /// Same session, new timers (and possibly a new send key).
    pub retime: Vec<(PathKey, Retime)>,
    /// Same session, another of its configured keys to send with.
    pub send_key: Vec<(PathKey, u8)>,
    /// Same path, a change no running session can take: removed, then
    /// added as the new file says.
    pub restart: Vec<SessionSpec>,
    /// Untouched: nothing of theirs goes on the wire differently.
    pub unchanged: usize,
}

/// Why a reload changes nothing: the `[engine]` keys that differ.
#[derive(Debug, PartialEq, Eq)]
pub struct EngineChanged(pub Vec<String>);

impl std::fmt::Display for EngineChanged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "[engine] changed ({}): read at start only, so nothing was reloaded; restart linecardd to apply it",
            self.0
                .iter()
                .map(|k| format!("engine.{k}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

fn path_of(spec: &SessionSpec) -> PathKey {
    PathKey {
        local: spec.local,
        peer: spec.peer,
        multihop: spec.multihop,
    }
}

/// The `[engine]` keys whose values differ between `old` and `new`.
fn engine_keys_changed(old: &EngineConfig, new: &EngineConfig) -> Vec<String> {
    let table = |c: &EngineConfig| match serde_json::to_value(c) {
        Ok(serde_json::Value::Object(mut map)) => {
            map.remove("sessions");
            map
        }
        _ => serde_json::Map::new(),
    };
    let (old, new) = (table(old), table(new));
    old.iter()
        .filter(|(key, value)| new.get(*key) != Some(*value))
        .map(|(key, _)| key.clone())
        .collect()
}

/// The reload from `old` (what the engine runs) to `new` (the file now).
pub fn plan(old: &EngineConfig, new: &EngineConfig) -> Result<ReloadPlan, EngineChanged> {
    let changed = engine_keys_changed(old, new);
    if !changed.is_empty() {
        return Err(EngineChanged(changed));
    }
    let before: std::collections::HashMap<PathKey, &SessionSpec> =
        old.sessions.iter().map(|s| (path_of(s), s)).collect();
    let mut plan = ReloadPlan::default();
    for spec in &new.sessions {
        let path = path_of(spec);
        let Some(was) = before.get(&path) else {
            plan.add.push(spec.clone());
            continue;
        };
        if *was == spec {
            plan.unchanged += 1;
            continue;
        }
        let timers = |s: &SessionSpec| (s.tx_interval_us, s.rx_interval_us, s.multiplier);
        let send_key = |s: &SessionSpec| s.auth.as_ref().map(|a| a.send_key);
        // What is left once the changes a running session can take are
        // undone: equal means only those changed.
        let mut rest = (*spec).clone();
        (rest.tx_interval_us, rest.rx_interval_us, rest.multiplier) = timers(was);
        if let (Some(auth), Some(old_key)) = (rest.auth.as_mut(), send_key(was)) {
            auth.send_key = old_key;
        }
        if rest != **was {
            plan.restart.push(spec.clone());
            continue;
        }
        if timers(was) != timers(spec) {
            plan.retime.push((
                path,
                Retime {
                    tx_interval_us: spec.tx_interval_us,
                    rx_interval_us: spec.rx_interval_us,
                    multiplier: spec.multiplier,
                },
            ));
        }
        if let (Some(key), true) = (send_key(spec), send_key(was) != send_key(spec)) {
            plan.send_key.push((path, key));
        }
    }
    let after: std::collections::HashSet<PathKey> = new.sessions.iter().map(path_of).collect();
    plan.remove = old
        .sessions
        .iter()
        .map(path_of)
        .filter(|p| !after.contains(p))
        .collect();
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ENGINE: &str = "[engine]\ncontrol_socket = \"/tmp/t.sock\"\n";

    fn session(peer: u8, tx_ms: u32, extra: &str) -> String {
        format!(
            "[[session]]\nlocal = \"192.0.2.1\"\npeer = \"192.0.2.{peer}\"\n\
             tx_interval_ms = {tx_ms}\nrx_interval_ms = 10\nmultiplier = 3\n{extra}\n"
        )
    }

    fn config(text: &str) -> EngineConfig {
        EngineConfig::parse("t.toml", text).unwrap()
    }

    fn key(peer: u8) -> PathKey {
        PathKey {
            local: "192.0.2.1".parse().unwrap(),
            peer: format!("192.0.2.{peer}").parse().unwrap(),
            multihop: false,
        }
    }

    #[test]
    fn one_added_one_removed_one_retimed_and_the_rest_untouched() {
        let old: String = std::iter::once(ENGINE.to_string())
            .chain((10..74).map(|p| session(p, 10, "")))
            .collect();
        let new: String = std::iter::once(ENGINE.to_string())
            .chain((11..75).map(|p| session(p, if p == 20 { 50 } else { 10 }, "")))
            .collect();
        let plan = plan(&config(&old), &config(&new)).unwrap();
        assert_eq!(plan.add.len(), 1);
        assert_eq!(path_of(&plan.add[0]), key(74));
        assert_eq!(plan.remove, vec![key(10)]);
        assert_eq!(
            plan.retime,
            vec![(
                key(20),
                Retime {
                    tx_interval_us: 50_000,
                    rx_interval_us: 10_000,
                    multiplier: 3
                }
            )]
        );
        assert!(plan.restart.is_empty() && plan.send_key.is_empty());
        assert_eq!(plan.unchanged, 62);
    }

    #[test]
    fn the_same_file_changes_nothing() {
        let text = format!("{ENGINE}{}{}", session(2, 10, ""), session(3, 10, ""));
        let plan = plan(&config(&text), &config(&text)).unwrap();
        assert_eq!(
            plan,
            ReloadPlan {
                unchanged: 2,
                ..ReloadPlan::default()
            }
        );
    }

    #[test]
    fn a_send_key_among_the_configured_keys_rolls_over_in_place() {
        let auth = |send: u8| {
            format!(
                "auth = {{ type = \"keyed_sha1\", send_key = {send}, keys = [\
                 {{ id = 1, secret = \"one\" }}, {{ id = 2, secret = \"two\" }}] }}"
            )
        };
        let old = config(&format!("{ENGINE}{}", session(2, 10, &auth(1))));
        let new = config(&format!("{ENGINE}{}", session(2, 10, &auth(2))));
        let plan = plan(&old, &new).unwrap();
        assert_eq!(plan.send_key, vec![(key(2), 2)]);
        assert!(plan.restart.is_empty() && plan.retime.is_empty());
    }

    #[test]
    fn a_change_a_running_session_cannot_take_restarts_it() {
        let old = config(&format!("{ENGINE}{}", session(2, 10, "")));
        let new = config(&format!("{ENGINE}{}", session(2, 50, "passive = true")));
        let plan = plan(&old, &new).unwrap();
        assert_eq!(plan.restart.len(), 1);
        assert!(plan.retime.is_empty() && plan.add.is_empty() && plan.remove.is_empty());
    }

    #[test]
    fn a_changed_engine_table_is_refused_whole_naming_the_keys() {
        let old = config(&format!("{ENGINE}{}", session(2, 10, "")));
        let new = config(&format!(
            "{ENGINE}cpu = 1\ndead_man_ms = 500\n{}",
            session(3, 10, "")
        ));
        let refused = plan(&old, &new).unwrap_err();
        assert_eq!(refused.0, vec!["cpu", "dead_man_ms"]);
        assert!(refused
            .to_string()
            .contains("engine.cpu, engine.dead_man_ms"));
    }
}
