//! One lab at a time. The local lab's names are fixed (`lc-dut`, the
//! cpusets, the bridge), so two commands that change it would tear down
//! each other's daemons mid-phase: `linecard run` (local provider), `lab
//! up` and `lab down` hold an exclusive `flock(2)` on [`LOCK_FILE`] for as
//! long as they run (a remote run's lab is its hosts', and `teardown` of
//! a proxmox record touches only the hypervisor: neither takes it). A second one waits (`--wait
//! SECONDS`) or fails naming the holder's PID and command line. The
//! kernel releases the lock when its holder exits, however it exits
//! (`kill -9` included): no stale lock to clear by hand.

use anyhow::{bail, Context, Result};
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// Root's: under `/run`, which only root writes and a reboot clears.
pub const LOCK_FILE: &str = "/run/linecard/lab.lock";

/// The lab, held until dropped.
#[derive(Debug)]
pub struct LabLock {
    _file: File,
}

/// Takes the lab for this process, waiting up to `wait` for another
/// holder to finish. The error names the holder.
pub fn take(wait: Duration) -> Result<LabLock> {
    take_at(Path::new(LOCK_FILE), wait)
}

fn take_at(path: &Path, wait: Duration) -> Result<LabLock> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| {
            format!(
                "creating {} (the lab's lock: the lab needs root)",
                dir.display()
            )
        })?;
    }
    // O_NOFOLLOW: a link planted at the path is refused, not written through.
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .with_context(|| format!("opening the lab's lock {}", path.display()))?;
    let deadline = Instant::now() + wait;
    let mut said_waiting = false;
    loop {
        // SAFETY: flock(2) on a descriptor this function owns.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            break;
        }
        let error = std::io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(error).with_context(|| format!("locking {}", path.display()));
        }
        let holder = holder(&mut file);
        if Instant::now() >= deadline {
            bail!(
                "another linecard holds the lab: {holder} (its lock: {}); wait for it with --wait SECONDS, \
                 or stop it (Ctrl-C) first",
                path.display()
            );
        }
        if !said_waiting {
            eprintln!("waiting for the lab: {holder}");
            said_waiting = true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    // The holder's description, for whoever waits next.
    let me = format!(
        "PID {} (`{}`)\n",
        std::process::id(),
        std::env::args().collect::<Vec<_>>().join(" ")
    );
    file.set_len(0)?;
    file.rewind()?;
    file.write_all(me.as_bytes())?;
    Ok(LabLock { _file: file })
}

/// What the lock file says of its holder.
fn holder(file: &mut File) -> String {
    let mut text = String::new();
    let _ = file.rewind().and_then(|()| file.read_to_string(&mut text));
    match text.trim() {
        "" => "a process that has not said who it is yet".into(),
        said => said.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_naming_the_first_and_gets_it_once_released() {
        let dir = std::env::temp_dir().join(format!("linecard-lock-{}", std::process::id()));
        let path = dir.join("lab.lock");
        let first = take_at(&path, Duration::ZERO).unwrap();
        // flock(2) locks belong to the open file description: a second
        // open in this same process contends like another process would.
        let refused = take_at(&path, Duration::ZERO).unwrap_err().to_string();
        assert!(
            refused.contains(&format!(
                "another linecard holds the lab: PID {}",
                std::process::id()
            )),
            "{refused}"
        );
        // A waiter gets it once the holder lets go (the holder's exit).
        let second = std::thread::scope(|s| {
            let waiter = s.spawn(|| take_at(&path, Duration::from_secs(10)));
            drop(first);
            waiter.join().unwrap()
        });
        assert!(second.is_ok(), "{second:?}");
        drop(second);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
