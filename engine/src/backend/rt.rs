//! The `rt` and `deadline` backends: the event loop on a SCHED_FIFO (rt)
//! or SCHED_DEADLINE (deadline) thread, optionally pinned, sleeping to
//! exact deadlines; and the scheduling of every thread that must be timely.
//!
//! Under an RT hog the kernel's RT throttling stops every SCHED_FIFO task
//! for the unreserved part of each second (~50 ms as shipped), longer than
//! a 3 x 10 ms detection time. A SCHED_DEADLINE task is scheduled before
//! every SCHED_FIFO one and is bounded by its own reservation instead.

use super::{Availability, BackendKind, Transmitter, MAX_SLEEP_NS};
use crate::session::Nanos;
use linecard_api::control::ThreadPolicy;

/// The shared loop on a thread that sleeps to the next deadline: at
/// SCHED_FIFO `priority`, or under SCHED_DEADLINE with `deadline`.
pub struct Realtime {
    pub priority: i32,
    pub cpu: Option<usize>,
    pub deadline: Option<Reservation>,
}

impl Transmitter for Realtime {
    fn kind(&self) -> BackendKind {
        if self.deadline.is_some() {
            BackendKind::Deadline
        } else {
            BackendKind::Rt
        }
    }

    fn enter_loop(&mut self) -> std::io::Result<()> {
        if let Some(reservation) = self.deadline {
            // No fallback: this backend is what is being measured.
            return make_current_thread_deadline(reservation, self.cpu).map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!("switching to SCHED_DEADLINE: {}", why_not_deadline(&e)),
                )
            });
        }
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

/// Pins the calling thread to `cpu`.
fn pin_current_thread(cpu: usize) -> std::io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes
    // within it; sched_setaffinity reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// SCHED_DEADLINE is admitted only where the kernel's admission control
/// allows it: probed on a short-lived thread of this process (same CPUs),
/// whose reservation is released when it exits.
pub fn deadline_availability() -> Availability {
    if let Availability::Unavailable { reason } = availability() {
        return Availability::Unavailable { reason };
    }
    let probe = std::thread::spawn(|| make_current_thread_deadline(TIMELY, None));
    match probe.join() {
        Ok(Ok(())) => Availability::Available,
        Ok(Err(e)) => Availability::Unavailable {
            reason: format!(
                "the kernel refused SCHED_DEADLINE: {}",
                why_not_deadline(&e)
            ),
        },
        Err(_) => Availability::Unavailable {
            reason: "the SCHED_DEADLINE probe thread panicked".into(),
        },
    }
}

/// What a refused SCHED_DEADLINE means, with the fix.
fn why_not_deadline(e: &std::io::Error) -> String {
    if e.raw_os_error() == Some(libc::EPERM) {
        format!(
            "{e}: the thread's CPUs do not cover their root domain (make them a cpuset with load balancing off in its parent, as `linecard lab up` does) or we are not root"
        )
    } else {
        e.to_string()
    }
}

/// Puts the calling thread at SCHED_FIFO `priority` and, if given, on `cpu`.
pub fn make_current_thread_realtime(priority: i32, cpu: Option<usize>) -> std::io::Result<()> {
    if let Some(cpu) = cpu {
        pin_current_thread(cpu)?;
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

/// The reservation of every thread of ours that must be timely (the
/// deadline backend's loop, the xdp backend's responder): 2 ms of CPU in
/// every 5 ms. A send costs ~20 us here (the veth and bridge path runs in
/// the sender's softirq), and a peer whose timers fire together makes the
/// own clocks of all its sessions due at once: with 1 ms, 64 sessions at
/// 3 x 10 ms against BIRD spent the budget mid-burst and the rest waited
/// for the next period, our packets 3.6 ms late (13.46 ms gaps; 10.47 and
/// 11.17 ms with 2 ms, the same scenario minutes apart). A 5 ms period
/// bounds the wait of a thread that spent it.
pub const TIMELY: Reservation = Reservation {
    runtime_ns: 2_000_000,
    period_ns: 5_000_000,
};

/// A SCHED_DEADLINE reservation: `runtime` of CPU within every `period`.
#[derive(Clone, Copy, Debug)]
pub struct Reservation {
    pub runtime_ns: u64,
    pub period_ns: u64,
}

/// `SCHED_DEADLINE` from linux/sched.h (absent from the libc crate).
const SCHED_DEADLINE: u32 = 6;

/// Puts the calling thread under SCHED_DEADLINE with `reservation` (its
/// deadline is the end of each period) and, if given, on `cpu`.
///
/// The kernel admits a deadline task only if its CPUs cover its whole root
/// domain (`__sched_setscheduler`, EPERM otherwise): on a box whose DUT
/// CPUs are a cpuset, that cpuset must be a scheduling partition of its own
/// (cgroup v1: `cpuset.sched_load_balance` 0 in the parent; the lab does
/// this).
pub fn make_current_thread_deadline(
    reservation: Reservation,
    cpu: Option<usize>,
) -> std::io::Result<()> {
    if let Some(cpu) = cpu {
        pin_current_thread(cpu)?;
    }
    let attr = libc::sched_attr {
        size: std::mem::size_of::<libc::sched_attr>() as u32,
        sched_policy: SCHED_DEADLINE,
        sched_flags: 0,
        sched_nice: 0,
        sched_priority: 0,
        sched_runtime: reservation.runtime_ns,
        sched_deadline: reservation.period_ns,
        sched_period: reservation.period_ns,
    };
    // SAFETY: sched_setattr reads the attr we pass; 0 is this thread.
    if unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// How a thread that must be timely asks to be scheduled.
#[derive(Clone, Copy, Debug)]
pub struct Timeliness {
    /// SCHED_DEADLINE first, with this reservation (None: not asked).
    pub deadline: Option<Reservation>,
    /// SCHED_FIFO priority otherwise.
    pub priority: i32,
    pub cpu: Option<usize>,
}

/// SCHED_DEADLINE if asked and the kernel admits it, else SCHED_FIFO, else
/// normal priority; says which it got.
pub fn make_current_thread_timely(want: Timeliness) -> ThreadPolicy {
    let Timeliness {
        deadline,
        priority,
        cpu,
    } = want;
    let why_not_deadline = match deadline.map(|r| (r, make_current_thread_deadline(r, cpu))) {
        None => "not asked (engine.sched_deadline = false)".to_string(),
        Some((r, Ok(()))) => {
            return ThreadPolicy::Deadline {
                runtime_us: r.runtime_ns / 1000,
                period_us: r.period_ns / 1000,
            }
        }
        Some((_, Err(e))) => why_not_deadline(&e),
    };
    match make_current_thread_realtime(priority, cpu) {
        Ok(()) => ThreadPolicy::Fifo {
            priority,
            why_not_deadline,
        },
        Err(e) => ThreadPolicy::Normal {
            why: format!("SCHED_DEADLINE: {why_not_deadline}; SCHED_FIFO: {e}"),
        },
    }
}
