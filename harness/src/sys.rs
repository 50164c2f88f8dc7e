//! Running other tools, entering network namespaces, and the preconditions
//! every privileged command checks first.
//!
//! Errors name the cause and the fix (the package to install, the command to
//! run), never a bare errno.

use anyhow::{bail, Context, Result};
use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// A tool the harness runs, and the Debian package that provides it.
#[derive(Clone, Copy, Debug)]
pub struct Tool {
    pub program: &'static str,
    pub package: &'static str,
}

pub const IP: Tool = Tool {
    program: "ip",
    package: "iproute2",
};
pub const PING: Tool = Tool {
    program: "ping",
    package: "iputils-ping",
};

/// Fails with an install hint when `tool` is not on PATH.
pub fn require_tool(tool: Tool) -> Result<()> {
    let found = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|dir| dir.join(tool.program).is_file()))
        .unwrap_or(false);
    if !found {
        bail!(
            "`{}` is not installed; install it with `apt-get install {}` (or run `bash scripts/install-deps.sh`)",
            tool.program,
            tool.package
        );
    }
    Ok(())
}

/// Fails with a clear message unless running as root.
pub fn require_root(what: &str) -> Result<()> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        bail!("{what} needs root (network namespaces, cgroups and XDP are privileged): run it as root or with sudo");
    }
    Ok(())
}

/// Runs a command to completion; on failure the error shows the command line,
/// its exit status and its stderr.
pub fn run<I, S>(program: &str, args: I) -> Result<String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let output = output(program, args)?;
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Like [`run`], but returns the raw output and does not treat a non-zero
/// exit as an error.
pub fn try_output<I, S>(program: &str, args: I) -> Result<Output>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let args: Vec<_> = args.into_iter().map(|a| a.as_ref().to_owned()).collect();
    Command::new(program)
        .args(&args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("could not start `{program}`; is it installed?"))
}

fn output<I, S>(program: &str, args: I) -> Result<Output>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let args: Vec<_> = args.into_iter().map(|a| a.as_ref().to_owned()).collect();
    let output = try_output(program, &args)?;
    if !output.status.success() {
        let line = std::iter::once(program.to_string())
            .chain(args.iter().map(|a| a.to_string_lossy().into_owned()))
            .collect::<Vec<_>>()
            .join(" ");
        bail!(
            "`{line}` failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(output)
}

/// Runs `f` on a thread that has entered network namespace `ns` (as created
/// by `ip netns add`). Only that thread changes namespace; the caller's stays.
pub fn in_netns<T, F>(ns: &str, f: F) -> Result<T>
where
    T: Send,
    F: FnOnce() -> Result<T> + Send,
{
    let path = Path::new("/var/run/netns").join(ns);
    let handle = File::open(&path).with_context(|| {
        format!("network namespace {ns} does not exist (run `linecard lab up`)")
    })?;
    std::thread::scope(|scope| {
        scope
            .spawn(move || {
                // SAFETY: `handle` is an open namespace file for the duration
                // of the call; setns only affects this (scoped) thread.
                if unsafe { libc::setns(handle.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                    bail!(
                        "entering network namespace {ns}: {}",
                        std::io::Error::last_os_error()
                    );
                }
                f()
            })
            .join()
            .unwrap_or_else(|_| bail!("thread working in namespace {ns} panicked"))
    })
}

/// Makes `cmd` join the cpuset cgroup at `cpuset_dir` before it executes, so
/// that it never runs a single instruction on the wrong CPUs.
pub fn join_cpuset_on_exec(cmd: &mut Command, cpuset_dir: &Path) {
    use std::os::unix::process::CommandExt;
    let tasks = std::ffi::CString::new(
        cpuset_dir
            .join("tasks")
            .into_os_string()
            .into_encoded_bytes(),
    )
    .expect("cgroup path has no NUL");
    // SAFETY: the closure only calls async-signal-safe functions (open,
    // write, close) on memory allocated before fork.
    unsafe {
        cmd.pre_exec(move || {
            let fd = libc::open(tasks.as_ptr(), libc::O_WRONLY);
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // cgroup v1: writing "0" moves the writing task itself.
            let written = libc::write(fd, b"0".as_ptr().cast(), 1);
            libc::close(fd);
            if written != 1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// CLOCK_REALTIME in ns: the captures' clock, for phase boundaries.
/// Writes `bytes` to `path`, readable and writable by its owner only
/// (0600) from the moment it exists: for every file that may hold a key
/// (a daemon's configuration, a staged scenario). An existing file is
/// made 0600 before it is overwritten.
pub fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    file.write_all(bytes)
        .with_context(|| format!("writing {}", path.display()))
}

/// The SHA-256 of `bytes`, as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Writes `value` as pretty JSON to `path` through `path.part`, synced
/// and renamed: a reader (or a killed writer) sees the old file or the
/// new one, never half of one.
pub fn write_json_atomically(path: &Path, value: &impl serde::Serialize) -> Result<()> {
    let mut part = path.as_os_str().to_owned();
    part.push(".part");
    let part = std::path::PathBuf::from(part);
    std::fs::write(&part, serde_json::to_vec_pretty(value)?)
        .and_then(|()| File::open(&part)?.sync_all())
        .and_then(|()| std::fs::rename(&part, path))
        .with_context(|| format!("writing {}", path.display()))
}

pub fn unix_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}
