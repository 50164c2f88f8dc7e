//! bfd.XmitAuthSeq shared with the kernel: `LC_XMIT_SEQ`, an array of one
//! 64-bit counter per `LC_STATE` slot, mapped into our memory
//! (`BPF_F_MMAPABLE`). The fast path's signed replies and every packet of
//! ours take their number from it with one atomic add each, the same
//! instruction on both sides, so the meticulous types advance by exactly
//! one per packet whoever sends it (RFC 5880 6.7.3).

use crate::session::auth::SequenceCounter;
use anyhow::{bail, Context, Result};
use linecard_common::bfd::MAX_SESSIONS;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The mapping; unmapped when the last counter is dropped (the kernel
/// keeps the map alive while it is mapped).
pub struct Mapping {
    base: *mut AtomicU64,
    bytes: usize,
}

// SAFETY: the mapping is shared memory accessed only through atomics.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps the array behind `map`.
    pub fn of(map: &aya::maps::MapData) -> Result<Arc<Self>> {
        let fd = map.fd().as_fd().as_raw_fd();
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        let bytes = (MAX_SESSIONS as usize * 8).div_ceil(page) * page;
        // SAFETY: a fresh shared mapping of the map's fd; the kernel checks
        // the length against the array's size.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error())
                .context("mapping LC_XMIT_SEQ (BPF_F_MMAPABLE) into memory");
        }
        Ok(Arc::new(Self {
            base: base.cast(),
            bytes,
        }))
    }

    /// The counter of `slot`.
    pub fn counter(self: &Arc<Self>, slot: u32) -> Result<Arc<MappedSequence>> {
        if slot >= MAX_SESSIONS {
            bail!("slot {slot} is past LC_XMIT_SEQ's {MAX_SESSIONS}");
        }
        Ok(Arc::new(MappedSequence {
            mapping: Arc::clone(self),
            slot: slot as usize,
        }))
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `of`, with its length; no counter
        // refers to it any more.
        unsafe { libc::munmap(self.base.cast(), self.bytes) };
    }
}

/// One session's bfd.XmitAuthSeq in the shared array.
pub struct MappedSequence {
    mapping: Arc<Mapping>,
    slot: usize,
}

impl MappedSequence {
    fn cell(&self) -> &AtomicU64 {
        // SAFETY: `slot` < MAX_SESSIONS (checked in `counter`), inside the
        // mapping, 8-aligned; the mapping outlives `self`.
        unsafe { &*self.mapping.base.add(self.slot) }
    }

    /// Starts the sequence at `next` (where the session's own was).
    pub fn set(&self, next: u32) {
        self.cell().store(u64::from(next), Ordering::Relaxed);
    }
}

impl SequenceCounter for MappedSequence {
    fn take(&self) -> u32 {
        self.cell().fetch_add(1, Ordering::Relaxed) as u32
    }

    fn peek(&self) -> u32 {
        self.cell().load(Ordering::Relaxed) as u32
    }
}
