//! Applying a reload (SIGHUP, `ctl reload`): the config file read again,
//! compared with what runs (`crate::reload_plan`), and only the sessions
//! it changed touched. Sessions added over the control socket or by FRR
//! are not the file's and are left alone.

use super::{log, Engine};
use crate::config::EngineConfig;
use crate::reload_plan::{plan, Retime};
use crate::session::table::{PathKey, SessionId};
use crate::session::Nanos;
use linecard_api::control::ReloadReport;

fn named(path: &PathKey) -> String {
    format!("{} -> {}", path.local, path.peer)
}

impl Engine {
    /// Re-reads the config file the engine started from. A file that does
    /// not read, does not validate or changes `[engine]` changes nothing.
    pub fn reload(&mut self) -> ReloadReport {
        let report = match self.config_path.clone() {
            None => ReloadReport {
                refused: Some("this engine was not started from a config file".into()),
                ..ReloadReport::default()
            },
            Some(path) => match EngineConfig::load(&path) {
                Err(e) => ReloadReport {
                    refused: Some(format!("{e}: nothing was reloaded")),
                    ..ReloadReport::default()
                },
                Ok(new) => self.apply(new),
            },
        };
        log(&report.to_string());
        report
    }

    fn apply(&mut self, new: EngineConfig) -> ReloadReport {
        let plan = match plan(&self.config, &new) {
            Ok(plan) => plan,
            Err(refused) => {
                return ReloadReport {
                    refused: Some(refused.to_string()),
                    ..ReloadReport::default()
                }
            }
        };
        self.full_pass_wanted = true;
        let now = self.now();
        let mut report = ReloadReport {
            unchanged: plan.unchanged,
            ..ReloadReport::default()
        };
        for path in &plan.remove {
            if let Some(id) = self.table.by_path(path) {
                self.remove_session(id, now);
            }
            report.removed.push(named(path));
        }
        for spec in &plan.restart {
            let path = PathKey {
                local: spec.local,
                peer: spec.peer,
                multihop: spec.multihop,
            };
            if let Some(id) = self.table.by_path(&path) {
                self.remove_session(id, now);
            }
        }
        for (path, timers) in &plan.retime {
            if let Some(id) = self.table.by_path(path) {
                self.retime(id, *timers, now);
                report.retimed.push(named(path));
            }
        }
        for (path, key) in &plan.send_key {
            let Some(id) = self.table.by_path(path) else {
                continue;
            };
            match self.send_with_key(id, *key) {
                Ok(()) => report.rekeyed.push(named(path)),
                Err(why) => report.errors.push(format!("{}: {why}", named(path))),
            }
        }
        // Added last, so that a restarted session's path is free again.
        let mut failed = Vec::new();
        for (spec, restarted) in
            (plan.add.iter().map(|s| (s, false))).chain(plan.restart.iter().map(|s| (s, true)))
        {
            let path = named(&PathKey {
                local: spec.local,
                peer: spec.peer,
                multihop: spec.multihop,
            });
            match self.add_session(spec.clone()) {
                Ok(_) if restarted => report.restarted.push(path),
                Ok(_) => report.added.push(path),
                Err(e) => {
                    report.errors.push(format!("{path}: {e:#}"));
                    failed.push((spec.local, spec.peer, spec.multihop));
                }
            }
        }
        // What runs now is the new file, less what could not be added (a
        // later reload tries those again) and less what was removed.
        self.config = EngineConfig {
            sessions: new
                .sessions
                .into_iter()
                .filter(|s| !failed.contains(&(s.local, s.peer, s.multihop)))
                .collect(),
            ..new
        };
        report
    }

    /// New timers for a running session: announced by a Poll Sequence
    /// while Up (RFC 5880 6.8.3), taken at once otherwise.
    pub(super) fn retime(&mut self, id: SessionId, timers: Retime, now: Nanos) {
        let Some((_, session, peer)) = self.table.get_mut(id) else {
            return;
        };
        session.set_timers(
            now,
            timers.tx_interval_us,
            timers.rx_interval_us,
            timers.multiplier,
        );
        peer.spec.tx_interval_us = timers.tx_interval_us;
        peer.spec.rx_interval_us = timers.rx_interval_us;
        peer.spec.multiplier = timers.multiplier;
    }

    /// Key rollover (RFC 5880 6.7.1): send with another configured key
    /// from the next packet on; every configured key stays accepted.
    pub(super) fn send_with_key(&mut self, id: SessionId, key_id: u8) -> Result<(), String> {
        let Some((path, session, peer)) = self.table.get_mut(id) else {
            return Err("no such session".into());
        };
        let auth = session
            .auth_mut()
            .ok_or("the session has no authentication")?;
        auth.set_send_key(key_id)?;
        if let Some(config) = peer.spec.auth.as_mut() {
            config.send_key = key_id;
        }
        log(&format!(
            "session {} -> {}: sending with key {key_id}",
            path.local, path.peer
        ));
        Ok(())
    }
}
