//! A scenario file read and validated into a [`Scenario`]: every table
//! and key checked, with an error that names the file, the key and the
//! value, before anything starts (loading its stress profiles too).

use super::*;

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
    pub fn parse(
        file: &str,
        text: &str,
        profile: &dyn Fn(&str) -> Result<Profile, String>,
    ) -> Result<Self, InputError> {
        let raw: RawScenario = toml::from_str(text).map_err(|e| InputError::syntax(file, e))?;
        let invalid = |key: &str, value: &dyn std::fmt::Display, why: &str| {
            InputError::invalid(file, key, value, why)
        };
        crate::profile::check_header(
            file,
            raw.schema_version,
            &raw.name,
            "letters, digits, - and _ only (it names the results directory)",
        )?;
        let provider = match raw.provider.as_deref().unwrap_or("local") {
            "local" => ProviderKind::Local,
            "proxmox" => ProviderKind::Proxmox,
            "ssh" => ProviderKind::Ssh,
            p => return Err(invalid("provider", &p, "must be local, ssh or proxmox")),
        };
        match (&provider, &raw.ssh) {
            (ProviderKind::Ssh, None) => {
                return Err(invalid(
                    "ssh",
                    &"(missing)",
                    "provider = \"ssh\" needs an [ssh] table (target = \"root@host\")",
                ))
            }
            (ProviderKind::Ssh, Some(spec)) => {
                spec.check()
                    .map_err(|(key, value, why)| invalid(&format!("ssh.{key}"), &value, why))?;
            }
            (_, Some(_)) => {
                return Err(invalid(
                    "ssh",
                    &"(table)",
                    "only read with provider = \"ssh\"",
                ))
            }
            (_, None) => {}
        }
        match (&provider, &raw.proxmox) {
            (ProviderKind::Proxmox, None) => return Err(invalid(
                "proxmox",
                &"(missing)",
                "provider = \"proxmox\" needs a [proxmox] table (host, template_vmid, first_vmid)",
            )),
            (ProviderKind::Local | ProviderKind::Ssh, Some(_)) => {
                return Err(invalid(
                    "proxmox",
                    &"(table)",
                    "only read with provider = \"proxmox\"",
                ))
            }
            (_, Some(p)) if p.first_vmid < 100 || p.template_vmid < 100 => {
                return Err(invalid(
                    "proxmox.first_vmid",
                    &p.first_vmid,
                    "Proxmox VM IDs start at 100",
                ))
            }
            _ => {}
        }
        let peer = match raw.peer.implementation.as_str() {
            "frr" => PeerImplementation::Frr,
            "bird" => PeerImplementation::Bird,
            "linecardd" => PeerImplementation::Linecardd,
            p => {
                return Err(invalid(
                    "peer.implementation",
                    &p,
                    "must be frr, bird or linecardd",
                ))
            }
        };
        let peer_rt_priority = match raw.peer.rt_priority.unwrap_or(DEFAULT_PEER_RT_PRIORITY) {
            p @ 0..=99 => p as u8,
            p => {
                return Err(invalid(
                    "peer.rt_priority",
                    &p,
                    "must be 0 (normal priority) to 99",
                ))
            }
        };
        let s = raw.sessions.unwrap_or_default();
        let (ipv6, dual_stack) = match s.family.as_deref().unwrap_or("ipv4") {
            "ipv4" => (false, false),
            "ipv6" => (true, false),
            "dual" => (false, true),
            f => {
                return Err(invalid(
                    "sessions.family",
                    &f,
                    "must be ipv4, ipv6 or dual (each pair in both)",
                ))
            }
        };
        let interval = |key: &str, v: Option<i64>| match v.unwrap_or(10) {
            ms @ 1..=60_000 => Ok(ms as u32),
            ms => Err(invalid(key, &ms, "must be 1 to 60000 milliseconds")),
        };
        let sessions = Sessions {
            count: match s.count.unwrap_or(1) {
                n if (1..=MAX_SESSIONS).contains(&(n * if dual_stack { 2 } else { 1 })) => {
                    n as usize
                }
                n => {
                    return Err(invalid(
                        "sessions.count",
                        &n,
                        &format!(
                            "must be 1 to {MAX_SESSIONS} sessions in all (one address pair each; dual: two per count)"
                        ),
                    ))
                }
            },
            ipv6,
            dual_stack,
            tx_interval_ms: interval("sessions.tx_interval_ms", s.tx_interval_ms)?,
            rx_interval_ms: interval("sessions.rx_interval_ms", s.rx_interval_ms)?,
            multiplier: match s.multiplier.unwrap_or(3) {
                m @ 1..=255 => m as u8,
                m => return Err(invalid("sessions.multiplier", &m, "must be 1 to 255")),
            },
            multihop: s.multihop.unwrap_or(false),
            min_ttl: match (s.multihop.unwrap_or(false), s.min_ttl) {
                (_, None) => None,
                (false, Some(t)) => {
                    return Err(invalid(
                        "sessions.min_ttl",
                        &t,
                        "applies to multihop sessions only (set sessions.multihop = true)",
                    ))
                }
                (true, Some(t @ 1..=255)) => Some(t as u8),
                (true, Some(t)) => return Err(invalid("sessions.min_ttl", &t, "must be 1 to 255")),
            },
            echo: s.echo.unwrap_or(false),
            demand: match s.demand.as_deref() {
                None => None,
                Some("dut") => Some(DemandAsker::Dut),
                Some("peer") => Some(DemandAsker::Peer),
                Some("both") => Some(DemandAsker::Both),
                Some(other) => {
                    return Err(invalid(
                        "sessions.demand",
                        &other,
                        "must be \"dut\", \"peer\" or \"both\": who asks for Demand mode",
                    ))
                }
            },
            auth: match &s.auth {
                None => None,
                Some(a) => Some(session_auth(a, peer).map_err(|(k, v, why)| {
                    invalid(&format!("sessions.auth.{k}"), &v, &why)
                })?),
            },
        };
        if sessions.demand.is_some_and(DemandAsker::peer_asks)
            && peer != PeerImplementation::Linecardd
        {
            return Err(invalid(
                "sessions.demand",
                &"peer",
                "a peer that asks for Demand mode needs peer.implementation = \"linecardd\": FRR bfdd 8.4.4 and BIRD 2.0.12 have no Demand mode",
            ));
        }
        if sessions.echo && sessions.multihop {
            return Err(invalid(
                "sessions.echo",
                &true,
                "single-hop sessions only (no echo over multiple hops, RFC 5883)",
            ));
        }
        if sessions.echo && peer == PeerImplementation::Bird {
            return Err(invalid(
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
            return Err(invalid(
                "sessions.min_ttl",
                &sessions
                    .min_ttl
                    .map_or("(default 254)".to_string(), |t| t.to_string()),
                "BIRD sends multihop packets at TTL 64: set sessions.min_ttl = 64 or lower",
            ));
        }
        if raw.phase.is_empty() {
            return Err(invalid(
                "phase",
                &"(none)",
                "a scenario needs at least one [[phase]]",
            ));
        }
        let mut phases = Vec::new();
        for (i, p) in raw.phase.iter().enumerate() {
            if !(1..=86_400).contains(&p.seconds) {
                return Err(invalid(
                    &format!("phase[{i}].seconds"),
                    &p.seconds,
                    "must be 1 to 86400",
                ));
            }
            let profile = profile(&p.profile)
                .map_err(|why| invalid(&format!("phase[{i}].profile"), &p.profile, &why))?;
            let fault =
                match &p.fault {
                    None => None,
                    Some(f) => Some(parse_fault(f, p.seconds as u64).map_err(|(k, v, why)| {
                        invalid(&format!("phase[{i}].fault.{k}"), &v, &why)
                    })?),
                };
            phases.push(PhaseSpec {
                profile,
                seconds: p.seconds as u64,
                fault,
            });
        }
        if let Some(i) = phases
            .iter()
            .position(|p| p.fault == Some(Fault::EngineRestart))
        {
            if let Some(j) = raw
                .dut
                .iter()
                .position(|d| d.implementation == "frr_dataplane")
            {
                return Err(invalid(
                    &format!("phase[{i}].fault.kind"),
                    &"engine_restart",
                    &format!("dut[{j}] is frr_dataplane: its engine's restart under bfdd is hold mode's (--test frr_dataplane)"),
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
                raw.dut
                    .iter()
                    .position(|d| d.implementation != "linecardd")
                    .map(|j| format!("dut[{j}] is not linecardd: the impostor reads the session from linecardd's control socket"))
            };
            if let Some(why) = why {
                return Err(invalid(
                    &format!("phase[{i}].fault.kind"),
                    &phases[i]
                        .fault
                        .as_ref()
                        .map_or("impostor", Fault::kind_name),
                    &why,
                ));
            }
        }
        if let Some(i) = phases.iter().position(|p| p.fault.is_some()) {
            if sessions.total() != 1 {
                return Err(invalid(
                    &format!("phase[{i}].fault"),
                    &"(set)",
                    "faults are judged on one session: set sessions.count = 1 in one family",
                ));
            }
        }
        if raw.dut.is_empty() {
            return Err(invalid(
                "dut",
                &"(none)",
                "a scenario needs at least one [[dut]]",
            ));
        }
        let mut duts: Vec<DutSpec> = Vec::new();
        for (i, d) in raw.dut.iter().enumerate() {
            let key = |k: &str| format!("dut[{i}].{k}");
            if d.label.is_empty() || duts.iter().any(|o| o.label == d.label) {
                return Err(invalid(
                    &key("label"),
                    &d.label,
                    "each DUT needs a label of its own",
                ));
            }
            let implementation = match (d.implementation.as_str(), d.backend.as_deref()) {
                ("frr", None) => DutImplementation::Frr,
                ("frr", Some(b)) => {
                    return Err(invalid(
                        &key("backend"),
                        &b,
                        "FRR bfdd has no backends; drop the key",
                    ))
                }
                ("linecardd", Some(b)) => {
                    if b.parse::<linecard_api::BackendKind>().is_err() {
                        return Err(invalid(
                            &key("backend"),
                            &b,
                            &format!("must be one of {}", linecard_api::BackendKind::names()),
                        ));
                    }
                    DutImplementation::Linecardd {
                        backend: b.to_string(),
                    }
                }
                ("linecardd", None) => {
                    return Err(invalid(
                        &key("backend"),
                        &"(none)",
                        "linecardd needs a backend",
                    ))
                }
                ("frr_dataplane", b) => {
                    let b = b.unwrap_or("xdp");
                    if !matches!(b, "naive" | "rt" | "deadline" | "xdp") {
                        return Err(invalid(
                            &key("backend"),
                            &b,
                            "must be one of naive, rt, deadline, xdp (txtime needs an interface per session, which bfdd does not always send)",
                        ));
                    }
                    DutImplementation::FrrDataplane {
                        backend: b.to_string(),
                    }
                }
                (other, _) => {
                    return Err(invalid(
                        &key("implementation"),
                        &other,
                        "must be frr, linecardd or frr_dataplane",
                    ))
                }
            };
            // Features only linecardd has, each with why FRR cannot.
            let linecardd_only = [
                (
                    sessions.auth.is_some(),
                    "sessions.auth needs linecardd: FRR bfdd 8.4.4 has no BFD authentication, and its dataplane protocol carries no keys",
                ),
                (
                    sessions.demand.is_some(),
                    "sessions.demand needs linecardd: FRR bfdd 8.4.4 has no Demand mode (its dataplane protocol's flag is never set)",
                ),
            ];
            if let Some((_, why)) = linecardd_only.iter().find(|(asked, _)| *asked) {
                if !matches!(implementation, DutImplementation::Linecardd { .. }) {
                    return Err(invalid(&key("implementation"), &d.implementation, why));
                }
            }
            let rt_throttling = match d.rt_throttling.as_deref().unwrap_or("shipped") {
                "shipped" => RtThrottling::Shipped,
                "off" => RtThrottling::Off,
                "half" => RtThrottling::Half,
                t => {
                    return Err(invalid(
                        &key("rt_throttling"),
                        &t,
                        "must be shipped, off or half",
                    ))
                }
            };
            let mut expect = expectation(d.positive_control, d.max_flaps, d.max_gap_ms)
                .map_err(|(k, v, why)| invalid(&key(k), &v, why))?;
            (expect.peer_echo, expect.own_echo) =
                echo_expectation(d.peer_echo.as_deref(), d.own_echo, sessions.echo)
                    .map_err(|(k, v, why)| invalid(&key(k), &v, why))?;
            let mut per_family = Vec::new();
            for (family, limits) in [(Family::Ipv4, &d.ipv4), (Family::Ipv6, &d.ipv6)] {
                let Some(l) = limits else { continue };
                let name = format!("{family:?}").to_lowercase();
                if !sessions.dual_stack {
                    return Err(invalid(
                        &key(&name),
                        &"(table)",
                        "limits per family need sessions.family = \"dual\"",
                    ));
                }
                let mut limits = expectation(l.positive_control, l.max_flaps, l.max_gap_ms)
                    .map_err(|(k, v, why)| invalid(&key(&format!("{name}.{k}")), &v, why))?;
                (limits.peer_echo, limits.own_echo) =
                    echo_expectation(l.peer_echo.as_deref(), l.own_echo, sessions.echo)
                        .map_err(|(k, v, why)| invalid(&key(&format!("{name}.{k}")), &v, why))?;
                per_family.push((family, limits));
            }
            if !per_family.is_empty() && expect != Expectation::default() {
                return Err(invalid(
                    &key("max_flaps"),
                    &"(set)",
                    "with limits per family (ipv4, ipv6), put every limit in them",
                ));
            }
            let offload_only = match (d.offload.as_deref(), &implementation) {
                (None | Some("all"), _) => None,
                (Some(f @ ("ipv4" | "ipv6")), DutImplementation::Linecardd { backend })
                    if backend == "xdp" =>
                {
                    Some(if f == "ipv4" {
                        Family::Ipv4
                    } else {
                        Family::Ipv6
                    })
                }
                (Some("ipv4" | "ipv6"), _) => {
                    return Err(invalid(
                        &key("offload"),
                        &d.offload.as_deref().unwrap_or_default(),
                        "only linecardd's xdp backend offloads sessions",
                    ))
                }
                (Some(other), _) => {
                    return Err(invalid(
                        &key("offload"),
                        &other,
                        "must be all, ipv4 or ipv6 (the family kept on the kernel's fast path)",
                    ))
                }
            };
            let engine = match (&d.engine, &implementation) {
                (None, _) => String::new(),
                (Some(_), DutImplementation::Frr) => {
                    return Err(invalid(
                        &key("engine"),
                        &"(table)",
                        "engine settings are linecardd's; FRR takes none",
                    ))
                }
                (Some(t), _) => {
                    if t.contains_key("control_socket") {
                        return Err(invalid(
                            &key("engine.control_socket"),
                            &"(set)",
                            "the runner places the control socket",
                        ));
                    }
                    t.to_string()
                }
            };
            // Authentication is the sessions', and judged on every DUT.
            let wire_auth = sessions.auth.as_ref().map(WireAuth::of);
            expect.auth = wire_auth;
            expect.demand = sessions.demand;
            for (_, limits) in &mut per_family {
                limits.auth = wire_auth;
                limits.demand = sessions.demand;
            }
            let peer_timers = match &d.peer_timers {
                None => None,
                Some(_) if raw.ssh.is_some() => {
                    return Err(invalid(
                        &key("peer_timers"),
                        &"(set)",
                        "the peer's own timers are the local lab's only",
                    ))
                }
                Some(t) => Some(PeerTimers {
                    tx_interval_ms: interval(
                        &key("peer_timers.tx_interval_ms"),
                        Some(
                            t.tx_interval_ms
                                .unwrap_or(i64::from(sessions.tx_interval_ms)),
                        ),
                    )?,
                    rx_interval_ms: interval(
                        &key("peer_timers.rx_interval_ms"),
                        Some(
                            t.rx_interval_ms
                                .unwrap_or(i64::from(sessions.rx_interval_ms)),
                        ),
                    )?,
                }),
            };
            duts.push(DutSpec {
                peer_timers,
                label: d.label.clone(),
                implementation,
                rt_throttling,
                engine,
                expect,
                offload_only,
                per_family,
            });
        }
        if let Some(spec) = raw.ssh.as_ref().filter(|s| s.target.is_none()) {
            three_hosts_can_run(spec, peer, peer_rt_priority, &sessions, &phases, &duts)
                .map_err(|(key, value, why)| invalid(&key, &value, &why))?;
        }
        Ok(Self {
            name: raw.name,
            description: raw.description,
            provider,
            proxmox: raw.proxmox,
            ssh: raw.ssh,
            peer,
            peer_rt_priority,
            sessions,
            phases,
            duts,
            file: PathBuf::from(file),
        })
    }

    /// Seconds of load per DUT, all phases.
    pub fn seconds_per_dut(&self) -> u64 {
        self.phases.iter().map(|p| p.seconds).sum()
    }
}
