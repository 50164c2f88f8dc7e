//! How `linecard run` reaches a scenario's hosts: on another host whole
//! (`[ssh] target`), or through the provider that brings them up here.
//! Above the providers: it names each of them, and they know only the
//! `Provider` trait.

use super::provider::{Local, Provider};
use super::RunOptions;
use crate::scenario::{ProviderKind, Scenario, SshSpec};

/// How `linecard run` reaches a scenario's hosts.
pub(crate) enum Road<'a> {
    /// `[ssh] target`: the whole command runs on one remote host, which
    /// brings its own local lab up; the run directory comes back here
    /// (`ssh.rs`). Nothing here provides hosts.
    Elsewhere(&'a SshSpec),
    /// A provider brings the hosts up here, and this process runs them.
    Here(Box<dyn Provider + 'a>),
}

impl<'a> Road<'a> {
    pub fn for_scenario(scenario: &'a Scenario, options: &'a RunOptions) -> Road<'a> {
        match (scenario.provider, &scenario.ssh, &scenario.proxmox) {
            (ProviderKind::Ssh, Some(spec), _) if spec.target.is_some() => Road::Elsewhere(spec),
            (ProviderKind::Ssh, Some(spec), _) => {
                Road::Here(Box::new(super::hosts::ThreeHosts::new(
                    scenario,
                    spec.clone(),
                    options.clone(),
                    Box::new(|facts| facts),
                )))
            }
            (ProviderKind::Proxmox, _, Some(spec)) => Road::Here(Box::new(
                super::proxmox::Proxmox::new(scenario, spec, options),
            )),
            _ => Road::Here(Box::new(Local::new(scenario, options))),
        }
    }
}
