//! Which sessions a loop pass visits: those heard from or touched since
//! their last visit, and those whose deadline has come. A pass then costs
//! what those sessions cost, not the size of the table: at 4096 sessions
//! the loop wakes for ~30 000 packets a second, and a scan of every session
//! at each wake was a third of a linecardd peer's CPU (perf, 2026-12-03).
//!
//! Deadlines sit in two min-heaps (transmission and detection) that are
//! never searched: a session's entry goes stale when a later visit gives it
//! another deadline, and the caller's `current` check drops such entries
//! when they surface. A stale entry can only wake the loop early, never
//! late.

use crate::session::table::SessionId;
use crate::session::Nanos;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Which of a session's two deadlines an entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deadline {
    /// The next thing to transmit or re-check (`Peer::due_next`).
    Next,
    /// The detection deadline (`Peer::due_detection`).
    Detection,
}

#[derive(Default)]
pub struct DueQueue {
    touched: Vec<SessionId>,
    next: BinaryHeap<Reverse<(Nanos, SessionId)>>,
    detection: BinaryHeap<Reverse<(Nanos, SessionId)>>,
}

impl DueQueue {
    /// Session `id` must be visited at the next pass (a packet, a kernel
    /// event, a new session). The caller pushes each id once per visit.
    pub fn touch(&mut self, id: SessionId) {
        self.touched.push(id);
    }

    /// Session `id` must be visited at `at` for `which` deadline.
    pub fn schedule(&mut self, id: SessionId, which: Deadline, at: Nanos) {
        self.heap(which).push(Reverse((at, id)));
    }

    /// The sessions to visit at `now`, sorted, each once: every touched
    /// one and every one with a current deadline at or before `now`.
    /// `current(id, which, at)` says whether an entry is still the
    /// session's deadline.
    pub fn take_due(
        &mut self,
        now: Nanos,
        current: impl Fn(SessionId, Deadline, Nanos) -> bool,
    ) -> Vec<SessionId> {
        let mut due = std::mem::take(&mut self.touched);
        for which in [Deadline::Next, Deadline::Detection] {
            let heap = self.heap(which);
            while let Some(&Reverse((at, id))) = heap.peek() {
                if at > now {
                    break;
                }
                heap.pop();
                if current(id, which, at) {
                    due.push(id);
                }
            }
        }
        due.sort_unstable();
        due.dedup();
        due
    }

    /// Forgets what was touched: a full pass visits every session anyway.
    pub fn clear_touched(&mut self) {
        self.touched.clear();
    }

    /// The earliest current deadline of `which`, dropping the stale
    /// entries in front of it.
    pub fn earliest(
        &mut self,
        which: Deadline,
        current: impl Fn(SessionId, Deadline, Nanos) -> bool,
    ) -> Option<Nanos> {
        let heap = self.heap(which);
        while let Some(&Reverse((at, id))) = heap.peek() {
            if current(id, which, at) {
                return Some(at);
            }
            heap.pop();
        }
        None
    }

    fn heap(&mut self, which: Deadline) -> &mut BinaryHeap<Reverse<(Nanos, SessionId)>> {
        match which {
            Deadline::Next => &mut self.next,
            Deadline::Detection => &mut self.detection,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn touched_and_due_sessions_come_once_and_stale_entries_never() {
        let mut q = DueQueue::default();
        q.schedule(3, Deadline::Next, 10);
        q.schedule(1, Deadline::Detection, 20);
        q.schedule(2, Deadline::Next, 30);
        // Session 3 was visited again and now has 40, not 10.
        q.schedule(3, Deadline::Next, 40);
        q.touch(2);
        q.touch(2);
        let current = |id: SessionId, _: Deadline, at: Nanos| !(id == 3 && at == 10);
        assert_eq!(q.take_due(5, current), vec![2], "touched only");
        assert_eq!(q.take_due(25, current), vec![1], "3's 10 is stale");
        assert_eq!(q.earliest(Deadline::Next, current), Some(30));
        assert_eq!(q.earliest(Deadline::Detection, current), None);
        assert_eq!(q.take_due(40, current), vec![2, 3]);
        assert!(q.take_due(1_000, current).is_empty());
    }

    #[test]
    fn a_stale_entry_in_front_does_not_hide_the_current_one() {
        let mut q = DueQueue::default();
        q.schedule(7, Deadline::Detection, 5);
        q.schedule(8, Deadline::Detection, 9);
        let current = |id: SessionId, _: Deadline, _: Nanos| id == 8;
        assert_eq!(q.earliest(Deadline::Detection, current), Some(9));
    }
}
