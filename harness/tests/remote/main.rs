//! The remote providers end to end against real OpenSSH daemons: one ssh
//! host, three ssh hosts, and a stand-in Proxmox VE host (the one part
//! that cannot run here, said so in `standin-pve/README.md`). Lost
//! connections, interrupted runs and teardown leave nothing behind. The
//! tiers are listed in `logic/main.rs`.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure, with its line

// The helpers every tier shares (one copy, outside any tier's folder).
#[path = "../common/mod.rs"]
mod common;

mod proxmox;
mod ssh;
mod ssh_hosts;
