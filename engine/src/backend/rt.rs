//! The `rt` backend: the event loop on a SCHED_FIFO thread, optionally
//! pinned, sleeping to exact deadlines.

use super::{Availability, BackendKind, Transmitter, MAX_SLEEP_NS};
use crate::session::Nanos;

/// The shared loop on a SCHED_FIFO thread that sleeps to the next deadline.
pub struct Realtime {
    pub priority: i32,
    pub cpu: Option<usize>,
}

impl Transmitter for Realtime {
    fn kind(&self) -> BackendKind {
        BackendKind::Rt
    }

    fn enter_loop(&mut self) -> std::io::Result<()> {
        make_current_thread_realtime(self.priority, self.cpu).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!(
                    "switching to SCHED_FIFO {} (are you root?): {e}",
                    self.priority
                ),
            )
        })
    }

    fn sleep_ns(&self, until_wake: Option<Nanos>, _until_detection: Option<Nanos>) -> Nanos {
        until_wake.map_or(MAX_SLEEP_NS, |d| d.min(MAX_SLEEP_NS))
    }
}

/// SCHED_FIFO needs root (or CAP_SYS_NICE and an RLIMIT_RTPRIO).
pub fn availability() -> Availability {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        return Availability::Available;
    }
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_RTPRIO, &mut limit) } == 0 && limit.rlim_cur > 0 {
        return Availability::Available;
    }
    Availability::Unavailable {
        reason: "SCHED_FIFO needs root or an RLIMIT_RTPRIO above 0 (ulimit -r)".into(),
    }
}

/// Puts the calling thread at SCHED_FIFO `priority` and, if given, on `cpu`.
pub fn make_current_thread_realtime(priority: i32, cpu: Option<usize>) -> std::io::Result<()> {
    if let Some(cpu) = cpu {
        // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes
        // within it; sched_setaffinity reads it.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: sched_setscheduler reads the param we pass; 0 is this thread.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
