//! The loop's side of the metrics endpoint (`crate::metrics`): a scrape
//! waiting is answered with a copy of what userspace knows of each
//! session; the endpoint's thread reads the kernel's maps and encodes.

use super::Engine;
use crate::metrics::{SessionRow, Snapshot};
use linecard_api::control::{Diagnostic, ThreadPolicy};
use linecard_common::bfd::{verdict, DropReason};

/// `3x10ms` (`3x500us` below a millisecond's multiple).
fn timer_class(detect_mult: u8, desired_min_tx_us: u32) -> String {
    if desired_min_tx_us.is_multiple_of(1000) {
        format!("{detect_mult}x{}ms", desired_min_tx_us / 1000)
    } else {
        format!("{detect_mult}x{desired_min_tx_us}us")
    }
}

impl Engine {
    /// Answers the scrapes waiting, if any (the loop polls their eventfd).
    pub(super) fn serve_metrics(&mut self) {
        if let Some(metrics) = self.metrics.take() {
            metrics.serve(|| self.metrics_snapshot());
            self.metrics = Some(metrics);
        }
    }

    /// What a scrape shows; it closes each session's scrape window.
    fn metrics_snapshot(&mut self) -> Snapshot {
        let kernel = self.fast_path_counters();
        let ids: Vec<_> = self.table.ids().collect();
        let epoch_unix_ns = self.epoch_unix_ns;
        let fast_path = self.fast.is_some();
        let sessions = ids
            .into_iter()
            .filter_map(|id| {
                let (path, session, peer) = self.table.get_mut(id)?;
                let window = session
                    .close_metrics_window()
                    .map(|w| w.map(|(gap, at)| (gap, epoch_unix_ns + at)));
                let telemetry = session.telemetry();
                let counters = session.counters();
                Some(SessionRow {
                    local: path.local,
                    peer: path.peer,
                    multihop: path.multihop,
                    backend: peer.spec.backend.to_string(),
                    state: session.state(),
                    downs: (telemetry.downs.iter().enumerate())
                        .filter(|(_, &n)| n > 0)
                        .map(|(bits, &n)| (Diagnostic::from_bits(bits as u8), n))
                        .collect(),
                    last_down: telemetry
                        .last_down
                        .map(|t| (epoch_unix_ns + t.at_ns, t.diag)),
                    userspace_in: counters.packets_in,
                    userspace_out: counters.packets_out,
                    userspace_gaps: telemetry.gaps,
                    userspace_window: window,
                    // The slot is the session's index in the kernel's
                    // per-session arrays (`handover::SessionRecord`).
                    kernel_slot: fast_path.then_some(id as u32),
                    timer_class: timer_class(
                        session.config().detect_mult,
                        session.config().desired_min_tx_us,
                    ),
                })
            })
            .collect();
        let mut drops = self.drops;
        if let Some(k) = &kernel {
            for (total, kernel) in drops.iter_mut().zip(&k.drops) {
                *total += kernel;
            }
        }
        for (_, _, peer) in self.table.ids().filter_map(|id| self.table.get(id)) {
            for (total, own) in drops.iter_mut().zip(peer.drops) {
                *total += own;
            }
        }
        Snapshot {
            sessions,
            detailed_sessions: self.config.metrics_sessions,
            drops: (DropReason::ALL.iter().zip(drops))
                .map(|(reason, n)| {
                    (
                        linecard_common::bfd::drop::name(*reason as u32).to_string(),
                        n,
                    )
                })
                .collect(),
            verdicts: kernel
                .as_ref()
                .map(|k| {
                    (verdict::NAMES.iter().enumerate())
                        .map(|(i, name)| {
                            let n = k.verdicts_per_cpu.iter().map(|cpu| cpu[i]).sum();
                            (name.to_string(), n)
                        })
                        .collect()
                })
                .unwrap_or_default(),
            responder: kernel.and_then(|k| k.responder).map(|policy| {
                match policy {
                    ThreadPolicy::Deadline { .. } => "SCHED_DEADLINE",
                    ThreadPolicy::Fifo { .. } => "SCHED_FIFO",
                    ThreadPolicy::Normal { .. } => "SCHED_OTHER",
                }
                .to_string()
            }),
        }
    }
}
