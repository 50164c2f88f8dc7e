//! One SSH connection as the runner uses it: batch mode (never a
//! password prompt), failing fast on a dead connection, `~/.ssh/config`
//! honoured for whatever the scenario does not set; commands, uploads and
//! downloads over it.

use super::Connection;
use crate::scenario::value::quote;
use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Where this user's shared connections' sockets live: `~/.ssh/linecard`
/// (0700; a socket path holds at most 107 bytes, a name takes 20), made
/// once; `None` (no sharing) when it cannot be.
fn control_dir() -> Option<PathBuf> {
    static DIR: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
        let dir = PathBuf::from(std::env::var_os("HOME")?).join(".ssh/linecard");
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .ok()?;
        let meta = std::fs::symlink_metadata(&dir).ok()?;
        // Ours and private, or no sharing: a socket there is a way in.
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        (meta.is_dir()
            && meta.uid() == me
            && meta.permissions().mode() & 0o077 == 0
            && dir.as_os_str().len() < 60)
            .then_some(dir)
    })
    .clone()
}

/// The mode of a file copied to a host.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Mode {
    /// A program root runs: root's only.
    Program = 0o700,
    /// Anything that may hold a secret (a scenario, a daemon's keys): root's
    /// only.
    Private = 0o600,
    /// A configuration a daemon that drops its privileges reads (FRR's
    /// daemons run as `frr`); it holds no secret.
    Readable = 0o644,
}

impl Connection {
    /// `ssh` to the host, in batch mode (never a password prompt) and
    /// failing fast on a dead connection.
    pub(crate) fn command(&self) -> Command {
        let mut c = Command::new("ssh");
        for o in [
            "BatchMode=yes",
            "ConnectTimeout=5",
            "ServerAliveInterval=2",
            "ServerAliveCountMax=3",
        ] {
            c.arg("-o").arg(o);
        }
        for o in self.sharing() {
            c.arg("-o").arg(o);
        }
        for o in &self.options {
            c.arg("-o").arg(o);
        }
        if let Some(key) = &self.identity {
            c.arg("-i").arg(key);
        }
        // No -p unless asked: it would override a configured `Port`.
        if let Some(port) = self.port {
            c.arg("-p").arg(port.to_string());
        }
        // `--`: the target is never read as an option (it is validated
        // not to start with `-` too).
        c.arg("--").arg(&self.target);
        c
    }

    /// The `-o` options that make commands share one connection, when
    /// this one does ([`Connection::multiplex`]). The socket is named by
    /// everything that makes the connection (target, port, key, options:
    /// ssh's own `%C` leaves out a `ProxyCommand`, and two routes to one
    /// name are two hosts). Each master ends 10 s after its last command;
    /// one that lost its connection ends with it, and the next command
    /// makes a new one.
    pub(crate) fn sharing(&self) -> Vec<String> {
        let Some(dir) = self.multiplex.then(control_dir).flatten() else {
            return Vec::new();
        };
        use sha2::Digest as _;
        let mut identity = sha2::Sha256::new();
        for part in [
            self.target.clone(),
            format!("{:?}", self.port),
            format!("{:?}", self.identity),
        ]
        .iter()
        .chain(&self.options)
        {
            identity.update(part.as_bytes());
            identity.update([0]);
        }
        let name: String = identity
            .finalize()
            .iter()
            .take(10)
            .map(|b| format!("{b:02x}"))
            .collect();
        vec![
            "ControlMaster=auto".into(),
            format!("ControlPath={}/{name}", dir.display()),
            "ControlPersist=10".into(),
        ]
    }

    /// Runs `script` with the host's shell, `input` on its stdin; its
    /// stdout, or why not (ssh's or the script's stderr).
    pub(crate) fn exec(&self, script: &str, input: Option<&[u8]>) -> Result<Vec<u8>> {
        let mut child = self
            .command()
            .arg(script)
            .stdin(if input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("running ssh (is openssh-client installed?)")?;
        if let Some(bytes) = input {
            let mut stdin = child.stdin.take().expect("piped");
            // A closed connection shows in ssh's exit status below.
            let _ = stdin.write_all(bytes);
        }
        let out = child.wait_with_output()?;
        // 255: ssh's own failure (no connection, no login), not the script's.
        if out.status.code() == Some(255) {
            bail!(
                "ssh could not reach or log in to {}: {}",
                self.target,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        if !out.status.success() {
            bail!(
                "ssh {} ({}): {}",
                self.target,
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(out.stdout)
    }

    /// Runs `script` with the host's shell; its output whatever its exit
    /// status (an error only when ssh could not run).
    pub(crate) fn output(&self, script: &str) -> Result<std::process::Output> {
        self.command()
            .arg(script)
            .stdin(Stdio::null())
            .output()
            .context("running ssh (is openssh-client installed?)")
    }

    /// Copies `remote` on the host to `local` here, streamed (a capture may
    /// be large), and proves the copy whole: its size and SHA-256 are the
    /// host's. Only then may the host's copy go.
    pub(crate) fn download(&self, remote: &str, local: &Path) -> Result<()> {
        self.download_unverified(remote, local)?;
        let said = self.exec(
            &format!("wc -c < {r} && sha256sum < {r}", r = quote(remote)),
            None,
        )?;
        let said = String::from_utf8_lossy(&said);
        let mut words = said.split_whitespace();
        let (size, digest) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
        let bytes = std::fs::read(local).with_context(|| format!("reading {}", local.display()))?;
        let here = crate::sys::sha256_hex(&bytes);
        if size != bytes.len().to_string() || digest != here {
            bail!(
                "the copy of {}:{remote} differs from the host's ({} bytes, sha256 {here}; the host's: {size} bytes, sha256 {digest})",
                self.target,
                bytes.len()
            );
        }
        Ok(())
    }

    fn download_unverified(&self, remote: &str, local: &Path) -> Result<()> {
        let file = std::fs::File::create(local)
            .with_context(|| format!("creating {}", local.display()))?;
        let out = self
            .command()
            .arg(format!("cat {}", quote(remote)))
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(Stdio::piped())
            .output()
            .context("running ssh (is openssh-client installed?)")?;
        if !out.status.success() {
            bail!(
                "copying {}:{remote} here: {}",
                self.target,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(())
    }

    /// Makes this run's own directory on the host under `parent` and
    /// returns it, with what `then` (a shell snippet run in the same
    /// connection, the directory in `$d`) printed: `mktemp -d` (a name
    /// nobody can guess), mode 0711 (root's; others may only pass
    /// through, as FRR's daemons, which drop to user frr, must to reach
    /// their sockets in it). `parent` and each directory above it must be
    /// root's or the SSH user's and writable by nobody else unless sticky
    /// (as `/var/tmp`): whoever can rename the run's directory could swap
    /// the binaries root is about to run.
    pub(crate) fn private_dir(&self, parent: &str, then: &str) -> Result<(String, String)> {
        let p = quote(parent);
        let said = self
            .exec(
                &format!(
                    "set -e; u=$(id -u); \
                     if [ ! -e {p} ]; then (umask 077 && mkdir -p {p} && chmod 0711 {p}); fi; \
                     if [ ! -d {p} ] || [ -L {p} ]; then echo \"{parent} is not a directory\" >&2; exit 3; fi; \
                     a={p}; while :; do set -- $(stat -c '%u %a' \"$a\"); \
                       if [ \"$1\" != 0 ] && [ \"$1\" != \"$u\" ]; then \
                         echo \"$a belongs to uid $1, neither root nor the SSH user: whoever owns it could swap what the run stages; choose another remote_dir\" >&2; exit 3; fi; \
                       if [ $(( 0$2 & 022 )) -ne 0 ] && [ $(( 0$2 & 01000 )) -eq 0 ]; then \
                         echo \"$a is writable by others (mode $2): whoever can write it could swap what the run stages; choose another remote_dir\" >&2; exit 3; fi; \
                       [ \"$a\" = / ] && break; a=$(dirname \"$a\"); done; \
                     d=$(mktemp -d {p}/linecard.XXXXXXXX); chmod 0711 \"$d\"; echo \"$d\"; {then}"
                ),
                None,
            )
            .with_context(|| format!("making the run's directory in {parent} on {}", self.target))?;
        let said = String::from_utf8_lossy(&said);
        let (made, rest) = said.split_once('\n').unwrap_or((&said, ""));
        let made = made.trim().to_string();
        let name = made.strip_prefix(&format!("{}/", parent.trim_end_matches('/')));
        if !name.is_some_and(|n| n.starts_with("linecard.") && !n.contains('/')) {
            bail!(
                "{}: mktemp made {made:?}, not a directory in {parent}",
                self.target
            );
        }
        Ok((made, rest.to_string()))
    }

    /// Writes `bytes` to `path` on the host with `mode`: the file is
    /// created with it (umask 077, then `chmod`), so a secret it holds is
    /// never readable by others, not even for an instant.
    pub(crate) fn upload(&self, bytes: &[u8], path: &str, mode: Mode) -> Result<()> {
        let (part, path_q) = (quote(&format!("{path}.part")), quote(path));
        let mode = mode as u32;
        self.exec(
            &format!("umask 077 && cat > {part} && chmod {mode:o} {part} && mv {part} {path_q}"),
            Some(bytes),
        )
        .with_context(|| format!("copying to {}:{path}", self.target))?;
        Ok(())
    }
}
