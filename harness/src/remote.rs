//! The remote layer under every provider that reaches hosts over SSH:
//! how to reach a host (`Connection`: batch mode, `~/.ssh/config`
//! honoured, commands, uploads and downloads) and a host of a three-host
//! run (`RemoteHost`: what the run started there, signalled and cleaned
//! by PID only while the PID carries the run's marker). Below the runner
//! and the process helpers (`procs`), which both use it.

use crate::scenario::{HostSpec, SshSpec};
use std::path::PathBuf;

mod connection;
mod host;

pub(crate) use connection::Mode;
pub use host::RemoteHost;
pub(crate) use host::{cpu_list, kill_marked, reaper};

/// How to reach one host: `ssh` in batch mode with these settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Connection {
    pub target: String,
    /// `-p`, only when the scenario names one: otherwise ~/.ssh/config's
    /// `Port` for the target (or 22) stands.
    pub port: Option<u16>,
    pub identity: Option<PathBuf>,
    pub options: Vec<String>,
    /// Commands share one connection to the host (OpenSSH's
    /// `ControlMaster`): a run over three hosts sends hundreds, each a
    /// handshake otherwise (two through a jump host).
    pub multiplex: bool,
}

/// How the runner reaches the hosts a scenario's `[ssh]` names.
impl SshSpec {
    /// The one host of a single-host run.
    pub fn connection(&self) -> Option<Connection> {
        Some(Connection {
            target: self.target.clone()?,
            port: self.port,
            identity: self.identity.clone(),
            options: self.options.clone(),
            // A single host is polled once a second: each poll its own
            // connection, so that a lost host is seen as lost.
            multiplex: false,
        })
    }

    /// One host of a three-host run, with this table's defaults.
    pub fn connection_to(&self, host: &HostSpec) -> Connection {
        let mut options = self.options.clone();
        options.extend(host.options.iter().cloned());
        Connection {
            target: host.target.clone(),
            port: host.port.or(self.port),
            identity: self.identity.clone(),
            options,
            multiplex: true,
        }
    }
}
