//! A scenario file read and validated into a [`Scenario`]: every table
//! and key checked, with an error that names the file, the key and the
//! value, before anything starts (loading its stress profiles too).

use super::programs::{self};
use super::{
    parse_fault, session_auth, share_a_directory, slug, three_hosts_can_run,
    three_hosts_share_a_family, DemandAsker, DutSpec, Fault, PeerImplementation, PhaseSpec,
    Profile, ProviderKind, RawDut, RawPeer, RawPhase, RawScenario, RawSessions, Scenario, Sessions,
    DEFAULT_PEER_RT_PRIORITY, MAX_SESSIONS,
};
use linecard_api::InputError;
use std::path::{Path, PathBuf};

impl Scenario {
    pub fn load(path: &Path, profiles: &Path) -> Result<Self, InputError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| InputError::read(&file, e))?;
        let mut scenario = Self::parse(&file, &text, &|name| {
            Profile::load(&profiles.join(format!("{name}.toml"))).map_err(|e| match e {
                InputError::Read { .. } => {
                    format!("no such profile in {} ({e})", profiles.display())
                }
                e => format!("the profile is invalid: {e}"),
            })
        })?;
        scenario.file = path.to_path_buf();
        Ok(scenario)
    }

    /// `profile`: looks a profile up by name (the error says why not).
    /// Each table is read by a function of its own, in the file's order;
    /// the checks across tables follow the tables they join.
    pub fn parse(
        file: &str,
        text: &str,
        profile: &dyn Fn(&str) -> Result<Profile, String>,
    ) -> Result<Self, InputError> {
        let mut raw: RawScenario = toml::from_str(text).map_err(|e| InputError::syntax(file, e))?;
        let at = In { file };
        crate::profile::check_header(
            file,
            raw.schema_version,
            &raw.name,
            "letters, digits, - and _ only (it names the results directory)",
        )?;
        let provider = at.provider(&raw)?;
        let (peer, peer_rt_priority) = at.peer(&raw.peer)?;
        let peer_programs = programs::Programs::read(
            &raw.peer.programs(),
            at.base(),
            programs::peer_keys(peer),
            &format!("peer.implementation = {:?}", raw.peer.implementation),
        )
        .map_err(|(k, v, why)| at.invalid(&format!("peer.{k}"), &v, &why))?;
        let sessions = at.sessions(&raw.sessions.take().unwrap_or_default(), peer)?;
        at.sessions_with_peer(&sessions, peer)?;
        let phases = at.phases(&raw.phase, profile)?;
        at.faults(&phases, &sessions, &raw.dut)?;
        if raw.dut.is_empty() {
            return Err(at.invalid("dut", &"(none)", "a scenario needs at least one [[dut]]"));
        }
        // Driven over SSH (ssh and proxmox): this build's linecardd is
        // staged there, and programs by path are not.
        let remote = raw.ssh.is_some() || raw.proxmox.is_some();
        let mut duts: Vec<DutSpec> = Vec::new();
        for (i, d) in raw.dut.iter().enumerate() {
            if d.label.is_empty() || duts.iter().any(|o| o.label == d.label) {
                return Err(at.invalid(
                    &format!("dut[{i}].label"),
                    &d.label,
                    "each DUT needs a label of its own",
                ));
            }
            if slug(&d.label).is_empty() {
                return Err(at.invalid(
                    &format!("dut[{i}].label"),
                    &d.label,
                    "needs a letter or digit (it names the DUT's directory)",
                ));
            }
            if let Some(other) = duts.iter().find(|o| share_a_directory(&o.label, &d.label)) {
                return Err(at.invalid(
                    &format!("dut[{i}].label"),
                    &d.label,
                    &format!(
                        "its directory ({}) would meet that of the DUT labelled {:?} ({}): \
                         labels differ in more than case and punctuation",
                        slug(&d.label),
                        other.label,
                        slug(&other.label)
                    ),
                ));
            }
            duts.push(at.dut(i, d, &sessions, remote)?);
        }
        if !sessions.steps.is_empty() {
            if let Some(i) = phases.iter().position(|p| p.fault.is_some()) {
                return Err(at.invalid(
                    &format!("phase[{i}].fault"),
                    &"(set)",
                    "a ladder (sessions.steps) runs no faults: they are judged on one session",
                ));
            }
            duts = ladder(&sessions.steps, duts);
        }
        if remote {
            let named = std::iter::once(("peer".to_string(), &peer_programs))
                .chain((duts.iter().enumerate()).map(|(i, d)| (format!("dut[{i}]"), &d.programs)));
            for (table, programs) in named {
                if let Some((key, path)) = programs.named().first() {
                    return Err(at.invalid(
                        &format!("{table}.{key}"),
                        &path.display(),
                        "programs by path run in the local lab only (an ssh run stages this build's linecardd and uses its hosts' FRR and BIRD)",
                    ));
                }
            }
        }
        // A proxmox run is a three-host run on its VMs.
        let three_hosts_ssh = raw.ssh.as_ref().filter(|spec| spec.target.is_none());
        if let Some(spec) = three_hosts_ssh {
            three_hosts_share_a_family(spec)
                .map_err(|(key, value, why)| at.invalid(&key, &value, &why))?;
        }
        if three_hosts_ssh.is_some() || raw.proxmox.is_some() {
            three_hosts_can_run(peer, peer_rt_priority, &sessions, &phases, &duts)
                .map_err(|(key, value, why)| at.invalid(&key, &value, &why))?;
        }
        Ok(Self {
            name: raw.name,
            description: raw.description,
            provider,
            proxmox: raw.proxmox,
            ssh: raw.ssh,
            peer,
            peer_rt_priority,
            peer_programs,
            sessions,
            phases,
            duts,
            file: PathBuf::from(file),
        })
    }

    /// The scenario as `dut` runs it: on a ladder, its step's session
    /// count in place of the largest.
    pub fn for_dut(&self, dut: &DutSpec) -> std::borrow::Cow<'_, Scenario> {
        match &dut.step {
            Some(step) if step.sessions != self.sessions.count => {
                let mut own = self.clone();
                own.sessions.count = step.sessions;
                std::borrow::Cow::Owned(own)
            }
            _ => std::borrow::Cow::Borrowed(self),
        }
    }

    /// Seconds of load per DUT, all phases.
    pub fn seconds_per_dut(&self) -> u64 {
        self.phases.iter().map(|p| p.seconds).sum()
    }
}

/// Where a scenario's values are read from: each error names the file,
/// the key and the value.
pub(super) struct In<'a> {
    file: &'a str,
}

impl In<'_> {
    pub(super) fn invalid(
        &self,
        key: &str,
        value: &dyn std::fmt::Display,
        why: &str,
    ) -> InputError {
        InputError::invalid(self.file, key, value, why)
    }

    /// An interval in ms (10 when absent).
    /// The scenario's directory: relative program paths start there.
    pub(super) fn base(&self) -> &Path {
        Path::new(self.file).parent().unwrap_or(Path::new(""))
    }

    pub(super) fn interval(&self, key: &str, v: Option<i64>) -> Result<u32, InputError> {
        match v.unwrap_or(10) {
            ms @ 1..=60_000 => Ok(ms as u32),
            ms => Err(self.invalid(key, &ms, "must be 1 to 60000 milliseconds")),
        }
    }

    /// `provider`, and the table it needs (`[ssh]`, `[proxmox]`) present
    /// only with it.
    fn provider(&self, raw: &RawScenario) -> Result<ProviderKind, InputError> {
        let provider = match raw.provider.as_deref().unwrap_or("local") {
            "local" => ProviderKind::Local,
            "proxmox" => ProviderKind::Proxmox,
            "ssh" => ProviderKind::Ssh,
            p => return Err(self.invalid("provider", &p, "must be local, ssh or proxmox")),
        };
        match (&provider, &raw.ssh) {
            (ProviderKind::Ssh, None) => {
                return Err(self.invalid(
                    "ssh",
                    &"(missing)",
                    "provider = \"ssh\" needs an [ssh] table (target = \"root@host\")",
                ))
            }
            (ProviderKind::Ssh, Some(spec)) => {
                spec.check().map_err(|(key, value, why)| {
                    self.invalid(&format!("ssh.{key}"), &value, why)
                })?;
            }
            (_, Some(_)) => {
                return Err(self.invalid("ssh", &"(table)", "only read with provider = \"ssh\""))
            }
            (_, None) => {}
        }
        match (&provider, &raw.proxmox) {
            (ProviderKind::Proxmox, None) => Err(self.invalid(
                "proxmox",
                &"(missing)",
                "provider = \"proxmox\" needs a [proxmox] table (host, template_vmid, first_vmid)",
            )),
            (ProviderKind::Local | ProviderKind::Ssh, Some(_)) => Err(self.invalid(
                "proxmox",
                &"(table)",
                "only read with provider = \"proxmox\"",
            )),
            (_, Some(p)) => {
                p.check().map_err(|(key, value, why)| {
                    self.invalid(&format!("proxmox.{key}"), &value, why)
                })?;
                Ok(provider)
            }
            _ => Ok(provider),
        }
    }

    /// `[peer]`: its implementation and real-time priority.
    fn peer(&self, raw: &RawPeer) -> Result<(PeerImplementation, u8), InputError> {
        let peer = match raw.implementation.as_str() {
            "frr" => PeerImplementation::Frr,
            "bird" => PeerImplementation::Bird,
            "linecardd" => PeerImplementation::Linecardd,
            p => {
                return Err(self.invalid(
                    "peer.implementation",
                    &p,
                    "must be frr, bird or linecardd",
                ))
            }
        };
        match raw.rt_priority.unwrap_or(DEFAULT_PEER_RT_PRIORITY) {
            p @ 0..=99 => Ok((peer, p as u8)),
            p => Err(self.invalid("peer.rt_priority", &p, "must be 0 (normal priority) to 99")),
        }
    }

    /// `[sessions]`, each key alone.
    fn sessions(&self, s: &RawSessions, peer: PeerImplementation) -> Result<Sessions, InputError> {
        let (ipv6, dual_stack) = match s.family.as_deref().unwrap_or("ipv4") {
            "ipv4" => (false, false),
            "ipv6" => (true, false),
            "dual" => (false, true),
            f => {
                return Err(self.invalid(
                    "sessions.family",
                    &f,
                    "must be ipv4, ipv6 or dual (each pair in both)",
                ))
            }
        };
        let count = |key: &str, n: i64| -> Result<usize, InputError> {
            if (1..=MAX_SESSIONS).contains(&(n * if dual_stack { 2 } else { 1 })) {
                Ok(n as usize)
            } else {
                Err(self.invalid(
                    key,
                    &n,
                    &format!(
                        "must be 1 to {MAX_SESSIONS} sessions in all (one address pair each; dual: two per count)"
                    ),
                ))
            }
        };
        let steps = match (&s.steps, s.count) {
            (None, _) => Vec::new(),
            (Some(_), Some(n)) => {
                return Err(self.invalid(
                    "sessions.count",
                    &n,
                    "a ladder's rows take their counts from sessions.steps: drop count",
                ))
            }
            (Some(steps), None) => {
                let steps = (steps.iter())
                    .map(|&n| count("sessions.steps", n))
                    .collect::<Result<Vec<usize>, _>>()?;
                if steps.is_empty() || steps.windows(2).any(|w| w[0] >= w[1]) {
                    return Err(self.invalid(
                        "sessions.steps",
                        &format!("{steps:?}"),
                        "must climb: one or more counts, each larger than the one before",
                    ));
                }
                steps
            }
        };
        Ok(Sessions {
            count: match steps.last() {
                Some(&largest) => largest,
                None => count("sessions.count", s.count.unwrap_or(1))?,
            },
            steps,
            ipv6,
            dual_stack,
            tx_interval_ms: self.interval("sessions.tx_interval_ms", s.tx_interval_ms)?,
            rx_interval_ms: self.interval("sessions.rx_interval_ms", s.rx_interval_ms)?,
            multiplier: match s.multiplier.unwrap_or(3) {
                m @ 1..=255 => m as u8,
                m => return Err(self.invalid("sessions.multiplier", &m, "must be 1 to 255")),
            },
            multihop: s.multihop.unwrap_or(false),
            min_ttl: match (s.multihop.unwrap_or(false), s.min_ttl) {
                (_, None) => None,
                (false, Some(t)) => {
                    return Err(self.invalid(
                        "sessions.min_ttl",
                        &t,
                        "applies to multihop sessions only (set sessions.multihop = true)",
                    ))
                }
                (true, Some(t @ 1..=255)) => Some(t as u8),
                (true, Some(t)) => {
                    return Err(self.invalid("sessions.min_ttl", &t, "must be 1 to 255"))
                }
            },
            echo: s.echo.unwrap_or(false),
            demand: match s.demand.as_deref() {
                None => None,
                Some("dut") => Some(DemandAsker::Dut),
                Some("peer") => Some(DemandAsker::Peer),
                Some("both") => Some(DemandAsker::Both),
                Some(other) => {
                    return Err(self.invalid(
                        "sessions.demand",
                        &other,
                        "must be \"dut\", \"peer\" or \"both\": who asks for Demand mode",
                    ))
                }
            },
            auth: match &s.auth {
                None => None,
                Some(a) => Some(session_auth(a, peer).map_err(|(k, v, why)| {
                    self.invalid(&format!("sessions.auth.{k}"), &v, &why)
                })?),
            },
        })
    }

    /// What the sessions ask of the peer, and of each other.
    fn sessions_with_peer(
        &self,
        sessions: &Sessions,
        peer: PeerImplementation,
    ) -> Result<(), InputError> {
        if sessions.demand.is_some_and(DemandAsker::peer_asks)
            && peer != PeerImplementation::Linecardd
        {
            return Err(self.invalid(
                "sessions.demand",
                &"peer",
                "a peer that asks for Demand mode needs peer.implementation = \"linecardd\": FRR bfdd 8.4.4 and BIRD 2.0.12 have no Demand mode",
            ));
        }
        if sessions.echo && sessions.multihop {
            return Err(self.invalid(
                "sessions.echo",
                &true,
                "single-hop sessions only (no echo over multiple hops, RFC 5883)",
            ));
        }
        if sessions.echo && peer == PeerImplementation::Bird {
            return Err(self.invalid(
                "sessions.echo",
                &true,
                "needs peer.implementation = \"frr\" or \"linecardd\" (BIRD has no echo function)",
            ));
        }
        // BIRD sends multihop packets at the system's default TTL (64):
        // the other side's default minimum (254) would never hear it.
        if peer == PeerImplementation::Bird
            && sessions.multihop
            && sessions.min_ttl.is_none_or(|t| t > 64)
        {
            return Err(self.invalid(
                "sessions.min_ttl",
                &sessions
                    .min_ttl
                    .map_or("(default 254)".to_string(), |t| t.to_string()),
                "BIRD sends multihop packets at TTL 64: set sessions.min_ttl = 64 or lower",
            ));
        }
        Ok(())
    }

    /// Every `[[phase]]`: its length, its stress profile, its fault.
    fn phases(
        &self,
        raw: &[RawPhase],
        profile: &dyn Fn(&str) -> Result<Profile, String>,
    ) -> Result<Vec<PhaseSpec>, InputError> {
        if raw.is_empty() {
            return Err(self.invalid(
                "phase",
                &"(none)",
                "a scenario needs at least one [[phase]]",
            ));
        }
        let mut phases = Vec::new();
        for (i, p) in raw.iter().enumerate() {
            if !(1..=86_400).contains(&p.seconds) {
                return Err(self.invalid(
                    &format!("phase[{i}].seconds"),
                    &p.seconds,
                    "must be 1 to 86400",
                ));
            }
            let profile = profile(&p.profile)
                .map_err(|why| self.invalid(&format!("phase[{i}].profile"), &p.profile, &why))?;
            let fault = match &p.fault {
                None => None,
                Some(f) => Some(parse_fault(f, p.seconds as u64).map_err(|(k, v, why)| {
                    self.invalid(&format!("phase[{i}].fault.{k}"), &v, &why)
                })?),
            };
            phases.push(PhaseSpec {
                profile,
                seconds: p.seconds as u64,
                fault,
            });
        }
        Ok(phases)
    }

    /// What the phases' faults ask of the sessions and the DUTs.
    fn faults(
        &self,
        phases: &[PhaseSpec],
        sessions: &Sessions,
        duts: &[RawDut],
    ) -> Result<(), InputError> {
        if let Some(i) = phases
            .iter()
            .position(|p| p.fault == Some(Fault::EngineRestart))
        {
            if let Some(j) = duts
                .iter()
                .position(|d| d.implementation == "frr_dataplane")
            {
                return Err(self.invalid(
                    &format!("phase[{i}].fault.kind"),
                    &"engine_restart",
                    &format!("dut[{j}] is frr_dataplane: its engine's restart under bfdd is hold mode's (--test lab frr_dataplane::)"),
                ));
            }
        }
        if let Some((i, fault)) = phases
            .iter()
            .enumerate()
            .find_map(|(i, p)| Some((i, p.fault.as_ref().filter(|f| f.hands_over())?)))
        {
            if let Some(j) = duts.iter().position(|d| {
                d.implementation != "linecardd" || d.backend.as_deref() != Some("xdp")
            }) {
                return Err(self.invalid(
                    &format!("phase[{i}].fault.kind"),
                    &fault.kind_name(),
                    &format!("dut[{j}] is not linecardd on the xdp backend: only its kernel side answers while one process hands over to the next"),
                ));
            }
        }
        if let Some(i) = phases
            .iter()
            .position(|p| p.fault == Some(Fault::EngineUpgrade))
        {
            if let Some(j) = duts.iter().position(|d| d.linecardd_upgrade.is_none()) {
                return Err(self.invalid(
                    &format!("phase[{i}].fault.kind"),
                    &"engine_upgrade",
                    &format!("dut[{j}] names no linecardd_upgrade: the second build the engine is handed over to"),
                ));
            }
        }
        if let Some(i) = phases
            .iter()
            .position(|p| matches!(p.fault, Some(Fault::Impostor | Fault::Flood { .. })))
        {
            // It sends as the peer over IPv4, signed as the sessions are,
            // with the discriminators linecardd's control socket reports.
            let why = if sessions.auth.is_none() {
                Some(
                    "needs authenticated sessions (sessions.auth): verification is what it tests"
                        .to_string(),
                )
            } else if sessions.ipv6 || sessions.dual_stack {
                Some("sends IPv4: set sessions.family = \"ipv4\"".to_string())
            } else {
                duts.iter()
                    .position(|d| d.implementation != "linecardd")
                    .map(|j| format!("dut[{j}] is not linecardd: the impostor reads the session from linecardd's control socket"))
            };
            if let Some(why) = why {
                return Err(self.invalid(
                    &format!("phase[{i}].fault.kind"),
                    &phases[i]
                        .fault
                        .as_ref()
                        .map_or("impostor", Fault::kind_name),
                    &why,
                ));
            }
        }
        // A handover is judged on every session, each on its own packets;
        // the other faults' rules follow one session.
        if let Some(i) = phases
            .iter()
            .position(|p| p.fault.as_ref().is_some_and(|f| !f.hands_over()))
        {
            if sessions.total() != 1 {
                return Err(self.invalid(
                    &format!("phase[{i}].fault"),
                    &"(set)",
                    "faults are judged on one session: set sessions.count = 1 in one family",
                ));
            }
        }
        Ok(())
    }
}

/// A ladder's rows: every DUT at each step, the steps in order (the
/// smallest first, so that a run stopped half-way holds the lower rungs).
fn ladder(steps: &[usize], duts: Vec<DutSpec>) -> Vec<DutSpec> {
    steps
        .iter()
        .flat_map(|&sessions| {
            duts.iter().map(move |d| DutSpec {
                label: format!("{}@{sessions}", d.label),
                step: Some(super::Step {
                    label: d.label.clone(),
                    sessions,
                }),
                ..d.clone()
            })
        })
        .collect()
}
