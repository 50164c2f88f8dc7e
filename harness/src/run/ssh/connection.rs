//! One SSH connection as the runner uses it: batch mode (never a
//! password prompt), failing fast on a dead connection, `~/.ssh/config`
//! honoured for whatever the scenario does not set; commands, uploads and
//! downloads over it.

use super::*;

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
        c.arg(&self.target);
        c
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
    /// be large).
    pub(crate) fn download(&self, remote: &str, local: &Path) -> Result<()> {
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

    /// Writes `bytes` to `path` on the host (mode 0755 when `executable`).
    pub(crate) fn upload(&self, bytes: &[u8], path: &str, executable: bool) -> Result<()> {
        let mode = if executable { 755 } else { 644 };
        self.exec(
            &format!("cat > {path}.part && chmod {mode} {path}.part && mv {path}.part {path}"),
            Some(bytes),
        )
        .with_context(|| format!("copying to {}:{path}", self.target))?;
        Ok(())
    }
}

/// Quotes `s` for a POSIX shell.
pub(crate) fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}
