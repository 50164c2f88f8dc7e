//! BPF_PROG_TEST_RUN: runs a loaded program on a crafted frame in the
//! kernel, without a network, and reports the verdict, the frame as the
//! program left it, and the mean time per run.

use std::os::fd::{AsFd, AsRawFd};

/// The `test` member of `union bpf_attr` (include/uapi/linux/bpf.h).
#[repr(C)]
#[derive(Default)]
struct TestAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    _pad: u32,
}

const BPF_PROG_TEST_RUN: libc::c_long = 10;

#[derive(Debug, Clone)]
pub struct TestRun {
    /// The program's return value (an `xdp_action`).
    pub action: u32,
    /// The frame after the program ran (length as the program left it).
    pub frame: Vec<u8>,
    /// Mean nanoseconds per run over `repeat` runs, as the kernel measured.
    pub mean_ns: u32,
}

/// Runs `program` on `frame` `repeat` times (at least 1).
pub fn run(program: &aya::programs::Xdp, frame: &[u8], repeat: u32) -> std::io::Result<TestRun> {
    let fd = program.fd().map_err(std::io::Error::other)?;
    let mut out = vec![0u8; frame.len() + 256];
    let mut attr = TestAttr {
        prog_fd: fd.as_fd().as_raw_fd() as u32,
        data_size_in: frame.len() as u32,
        data_size_out: out.len() as u32,
        data_in: frame.as_ptr() as u64,
        data_out: out.as_mut_ptr() as u64,
        repeat: repeat.max(1),
        ..TestAttr::default()
    };
    // SAFETY: the attr points at live buffers with their true sizes; the
    // kernel writes at most data_size_out bytes into `out`.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_PROG_TEST_RUN,
            &mut attr as *mut TestAttr,
            std::mem::size_of::<TestAttr>() as u32,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    out.truncate(attr.data_size_out as usize);
    Ok(TestRun {
        action: attr.retval,
        frame: out,
        mean_ns: attr.duration,
    })
}

/// Whether this process may load programs and run them: root. Without
/// root, a printed skip; under `LINECARD_REQUIRE_PRIVILEGED=1` (CI) a
/// panic, since a skipped test is not a passed one.
pub fn privileged(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    assert!(
        std::env::var_os("LINECARD_REQUIRE_PRIVILEGED").is_none_or(|v| v != "1"),
        "{test}: LINECARD_REQUIRE_PRIVILEGED=1 but not running as root"
    );
    eprintln!("skipped {test}: BPF_PROG_TEST_RUN needs root");
    false
}
