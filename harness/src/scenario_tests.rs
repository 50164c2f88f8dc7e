//! Scenario parsing: every key checked, every error naming file, key and value.
use super::*;
use linecard_api::BackendKind;
use linecard_api::InputError;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn every_shipped_scenario_loads() {
    let dir = repo().join("scenarios");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let s = Scenario::load(&path, &repo().join("stress-profiles"))
                .unwrap_or_else(|e| panic!("{e}"));
            assert!(!s.duts.is_empty());
            n += 1;
        }
    }
    assert!(n >= 2, "only {n} scenarios in {}", dir.display());
}

#[test]
fn the_bakeoff_has_the_reference_rows_and_a_positive_control() {
    let s = Scenario::load(
        &repo().join("scenarios/bakeoff.toml"),
        &repo().join("stress-profiles"),
    )
    .unwrap();
    assert_eq!(s.phases[0].profile.name, "L4");
    assert!(s.duts.iter().any(|d| d.expect.positive_control));
    let rt: Vec<_> = s
        .duts
        .iter()
        .filter(|d| {
            d.implementation
                == DutImplementation::Linecardd {
                    backend: BackendKind::Rt,
                }
        })
        .map(|d| d.rt_throttling)
        .collect();
    assert_eq!(rt, [RtThrottling::Shipped, RtThrottling::Off]);
}

#[test]
fn a_ladder_runs_every_dut_at_every_step_the_smallest_first() {
    let with = |sessions: &str| {
        GOOD.replace("[[phase]]\n", &format!("[sessions]\n{sessions}\n[[phase]]\n"))
            .replace("max_flaps = 0\n", "max_flaps = 0\n[[dut]]\nlabel = \"naive\"\nimplementation = \"linecardd\"\nbackend = \"naive\"\npositive_control = true\n")
    };
    let s = parse(&with("steps = [64, 256]")).unwrap();
    let rows: Vec<(&str, usize)> = (s.duts.iter())
        .map(|d| (d.label.as_str(), d.step.as_ref().unwrap().sessions))
        .collect();
    assert_eq!(
        rows,
        [
            ("xdp@64", 64),
            ("naive@64", 64),
            ("xdp@256", 256),
            ("naive@256", 256)
        ]
    );
    assert_eq!(s.sessions.count, 256);
    // Each row runs its own step; --only names a DUT's every step.
    assert_eq!(s.for_dut(&s.duts[0]).sessions.count, 64);
    assert_eq!(s.for_dut(&s.duts[2]).sessions.count, 256);
    assert!(s.duts[0].answers_to("xdp") && s.duts[0].answers_to("xdp@64"));
    assert!(!s.duts[0].answers_to("xdp@256") && !s.duts[1].answers_to("xdp"));
    // Without steps nothing changes.
    let plain = parse(&with("count = 8")).unwrap();
    assert_eq!(plain.duts[0].label, "xdp");
    assert_eq!(plain.for_dut(&plain.duts[0]).sessions.count, 8);
    for (bad, key) in [
        ("steps = [64, 64]", "sessions.steps"),
        ("steps = [128, 64]", "sessions.steps"),
        ("steps = []", "sessions.steps"),
        ("steps = [64, 5000]", "sessions.steps"),
        ("steps = [64]\ncount = 64", "sessions.count"),
    ] {
        assert!(
            error(&with(bad)).contains(key),
            "{bad}: {}",
            error(&with(bad))
        );
    }
}

#[test]
fn ksoftirqd_priority_is_a_fifo_priority_or_zero() {
    let with = |value: &str| {
        GOOD.replace(
            "backend = \"xdp\"",
            &format!("backend = \"xdp\"\nksoftirqd_priority = {value}"),
        )
    };
    let s = parse(&with("60")).unwrap();
    assert_eq!(s.duts[0].ksoftirqd_priority, 60);
    assert_eq!(parse(GOOD).unwrap().duts[0].ksoftirqd_priority, 0);
    for bad in ["100", "-1"] {
        assert!(error(&with(bad)).contains("ksoftirqd_priority"), "{bad}");
    }
}

fn error(text: &str) -> String {
    parse(text).unwrap_err().to_string()
}

fn parse(text: &str) -> Result<Scenario, InputError> {
    parse_at("s.toml", text)
}

/// [`parse`] as if read from `file` (its folder is where relative
/// program paths start).
fn parse_at(file: &str, text: &str) -> Result<Scenario, InputError> {
    let profile = |name: &str| -> Result<Profile, String> {
        if name == "L4" {
            Profile::parse(
                "L4.toml",
                "schema_version = 1\nname = \"L4\"\nwhat = \"x\"\n",
            )
            .map_err(|e| e.to_string())
        } else {
            Err("no such profile".into())
        }
    };
    Scenario::parse(file, text, &profile)
}

const GOOD: &str = r#"
schema_version = 1
name = "t"
description = "t"
[peer]
implementation = "frr"
[[phase]]
profile = "L4"
seconds = 10
[[dut]]
label = "xdp"
implementation = "linecardd"
backend = "xdp"
max_flaps = 0
"#;

#[test]
fn echo_needs_frr_single_hop_ipv4_and_its_expectations_need_echo() {
    let with = |peer: &str, sessions: &str, dut: &str| {
        GOOD.replace(
            "implementation = \"frr\"\n",
            &format!("implementation = \"{peer}\"\n"),
        )
        .replace(
            "[[phase]]\n",
            &format!("[sessions]\n{sessions}\n[[phase]]\n"),
        )
        .replace("max_flaps = 0\n", &format!("max_flaps = 0\n{dut}\n"))
    };
    let ok = with(
        "frr",
        "echo = true",
        "peer_echo = \"reflected\"\nown_echo = true",
    );
    assert!(
        error(&ok.replace("max_flaps = 0\n", "max_flaps = -1\n")).contains("max_flaps = -1"),
        "echo keys accepted, the next error is the planted one"
    );
    assert!(error(&with("bird", "echo = true", "")).contains("BIRD has no echo function"));
    assert!(error(&with("frr", "echo = true\nmultihop = true", ""))
        .contains("single-hop sessions only"));
    assert!(error(&with("frr", "", "own_echo = true")).contains("need sessions.echo = true"));
    assert!(error(&with("frr", "echo = true", "peer_echo = \"maybe\""))
        .contains("must be reflected or absent"));
}

#[test]
fn multihop_keys_are_checked_against_the_peer() {
    let with = |peer: &str, sessions: &str| {
        GOOD.replace(
            "implementation = \"frr\"",
            &format!("implementation = \"{peer}\""),
        )
        .replace("[[phase]]", &format!("[sessions]\n{sessions}\n[[phase]]"))
    };
    assert_eq!(
        error(&with("frr", "min_ttl = 64")),
        "s.toml: sessions.min_ttl = 64: applies to multihop sessions only (set sessions.multihop = true)"
    );
    assert!(
        error(&with("bird", "multihop = true")).contains("BIRD sends multihop packets at TTL 64")
    );
    assert!(error(&with("bird", "multihop = true\nmin_ttl = 100")).contains("= 100: BIRD"));
    assert!(error(&with("frr", "multihop = true\nmin_ttl = 0")).contains("must be 1 to 255"));
}

#[test]
fn dual_stack_keys_are_checked() {
    let dual = |dut: &str| {
        GOOD.replace("[[phase]]", "[sessions]\nfamily = \"dual\"\n[[phase]]")
            .replace("max_flaps = 0\n", dut)
    };
    let split = parse(&dual(
        "offload = \"ipv4\"\nipv4 = { max_flaps = 0 }\nipv6 = { positive_control = true }\n",
    ))
    .unwrap();
    assert!(split.sessions.dual_stack && !split.sessions.ipv6);
    let d = &split.duts[0];
    assert_eq!(d.offload_only, Some(Family::Ipv4));
    assert_eq!(d.expect_for(Family::Ipv4).max_flaps, Some(0));
    assert!(d.expect_for(Family::Ipv6).positive_control);
    assert!(
        error(&GOOD.replace("max_flaps = 0", "ipv4 = { max_flaps = 0 }"))
            .contains("dut[0].ipv4 = (table): limits per family need sessions.family = \"dual\"")
    );
    assert!(error(&dual("max_flaps = 0\nipv6 = { max_flaps = 1 }\n"))
        .contains("put every limit in them"));
    assert!(
        error(&dual("ipv6 = { positive_control = true, max_flaps = 1 }\n"))
            .contains("dut[0].ipv6.positive_control = true")
    );
    assert!(error(&dual("offload = \"ipv5\"\n")).contains("dut[0].offload = ipv5"));
    assert!(
        error(&dual("offload = \"ipv6\"\n").replace("\"xdp\"", "\"rt\""))
            .contains("only linecardd's xdp backend offloads sessions")
    );
    assert!(
        error(&GOOD.replace("[[phase]]", "[sessions]\nfamily = \"ip\"\n[[phase]]"))
            .contains("sessions.family = ip: must be ipv4, ipv6 or dual")
    );
}

#[test]
fn faults_are_checked_key_by_key() {
    let with =
        |fault: &str| GOOD.replace("seconds = 10", &format!("seconds = 10\nfault = {fault}"));
    let ok = parse(&with("{ kind = \"loss\", percent = 30, seed = 3 }")).unwrap();
    assert_eq!(
        ok.phases[0].fault,
        Some(Fault::Loss {
            percent: 30.0,
            seed: 3
        })
    );
    assert_eq!(
        error(&with("{ kind = \"loss\", percent = 130 }")),
        "s.toml: phase[0].fault.percent = 130: must be 0 to 100"
    );
    assert!(
        error(&with("{ kind = \"loss\", percent = 5, down_ms = 3 }"))
            .contains("phase[0].fault.down_ms = (set): not a key of fault loss")
    );
    assert!(
        error(&with("{ kind = \"link_flap\", down_ms = 9000 }")).contains(
            "phase[0].fault.down_ms = 9000: must be 1 to 60000 and end 3 s before the phase does"
        )
    );
    assert!(error(&with("{ kind = \"engine_stop\" }")).contains("needs stop_ms"));
    assert!(error(&with("{ kind = \"meteor\" }")).contains("phase[0].fault.kind = meteor"));
    assert!(error(
        &with("{ kind = \"peer_restart\" }")
            .replace("[[phase]]", "[sessions]\ncount = 2\n[[phase]]")
    )
    .contains("faults are judged on one session"));
    // A handover is judged on every session; only an xdp linecardd DUT
    // has a kernel side to answer meanwhile.
    let handover = with("{ kind = \"engine_handover\" }")
        .replace("[[phase]]", "[sessions]\ncount = 64\n[[phase]]");
    let refused = error(&handover.replace("backend = \"xdp\"", "backend = \"naive\""));
    assert!(
        refused.contains("phase[0].fault.kind = engine_handover")
            && refused.contains("not linecardd on the xdp backend"),
        "{refused}"
    );
    let ok = parse(&handover);
    assert!(
        ok.as_ref()
            .is_ok_and(|s| s.phases[0].fault == Some(Fault::EngineHandover)),
        "{:?}",
        ok.err()
    );
    // An upgrade hands over to the second build the DUT names.
    let upgrade = handover.replace("engine_handover", "engine_upgrade");
    let refused = error(&upgrade);
    assert!(
        refused.contains("phase[0].fault.kind = engine_upgrade")
            && refused.contains("names no linecardd_upgrade"),
        "{refused}"
    );
    let named = upgrade.replace(
        "backend = \"xdp\"",
        "backend = \"xdp\"\nlinecardd_upgrade = \"/opt/second/linecardd\"",
    );
    let ok = parse(&named);
    assert!(
        ok.as_ref()
            .is_ok_and(|s| s.phases[0].fault == Some(Fault::EngineUpgrade)
                && s.duts[0].programs.linecardd_upgrade.as_deref()
                    == Some(std::path::Path::new("/opt/second/linecardd"))),
        "{:?}",
        ok.err()
    );
    // Relative to the scenario's folder, `..` folded away.
    let relative = upgrade.replace(
        "backend = \"xdp\"",
        "backend = \"xdp\"\nlinecardd_upgrade = \"../target/./second/linecardd\"",
    );
    let ok = parse_at("/repo/scenarios/u.toml", &relative);
    assert_eq!(
        ok.map_err(|e| e.to_string())
            .map(|s| s.duts[0].programs.linecardd_upgrade.clone()),
        Ok(Some("/repo/target/second/linecardd".into()))
    );
    let stall = "{ kind = \"peer_stall\", stall_ms = 18, times = 16, every_ms = 308 }";
    let ok = parse(&with(stall)).unwrap();
    assert_eq!(
        ok.phases[0].fault,
        Some(Fault::PeerStall {
            stall_ms: 18,
            times: 16,
            every_ms: 308
        })
    );
    assert!(
        error(&with(&stall.replace("16", "30"))).contains("times x every_ms must end 3 s before")
    );
    assert!(error(&with(
        "{ kind = \"peer_stall\", stall_ms = 18, times = 2, every_ms = 18 }"
    ))
    .contains("every_ms = 18: must be longer than stall_ms"));
    assert!(error(&with("{ kind = \"peer_stall\", stall_ms = 18 }"))
        .contains("needs stall_ms, times and every_ms"));
    // The impostor: authenticated IPv4 sessions and linecardd DUTs.
    let impostor = |sessions: &str| {
        with("{ kind = \"impostor\" }")
            .replace("\"frr\"", "\"bird\"")
            .replace("[[phase]]", &format!("[sessions]\n{sessions}\n[[phase]]"))
    };
    let auth = "auth = { type = \"keyed_md5\", key_id = 1, secret = \"s\" }";
    assert_eq!(
        parse(&impostor(auth)).unwrap().phases[0].fault,
        Some(Fault::Impostor)
    );
    assert!(error(&impostor("")).contains("needs authenticated sessions"));
    assert!(error(&impostor(&format!("family = \"dual\"\n{auth}"))).contains("sends IPv4"));
    assert!(error(
        &impostor(auth).replace("implementation = \"linecardd\"", "implementation = \"frr\"")
    )
    .contains("dut[0] is not linecardd"));
    // The flood: the impostor's rules, and a phase it fits in.
    let flood =
        |fault: &str, sessions: &str| impostor(sessions).replace("{ kind = \"impostor\" }", fault);
    assert_eq!(
        parse(&flood("{ kind = \"flood\", frames = 1000 }", auth))
            .unwrap()
            .phases[0]
            .fault,
        Some(Fault::Flood { frames: 1000 })
    );
    assert!(error(&flood("{ kind = \"flood\", frames = 1000 }", ""))
        .contains("phase[0].fault.kind = flood: needs authenticated sessions"));
    assert!(error(&flood("{ kind = \"flood\", frames = 0 }", auth))
        .contains("frames = 0: must be 1 to 1000000"));
    assert!(
        error(&flood("{ kind = \"flood\", frames = 1000000 }", auth))
            .contains("the phase must last it")
    );
    assert!(error(&flood("{ kind = \"flood\", stop_ms = 5 }", auth))
        .contains("not a key of fault flood"));
}

#[test]
fn errors_name_file_key_and_value() {
    assert!(Scenario::parse("s.toml", GOOD, &|_| Profile::parse(
        "p",
        "schema_version = 1\nname = \"L4\"\nwhat = \"x\"\n"
    )
    .map_err(|e| e.to_string()))
    .is_ok());
    assert_eq!(
        error(&GOOD.replace("\"xdp\"\nmax", "\"turbo\"\nmax")),
        "s.toml: dut[0].backend = turbo: must be one of naive, rt, deadline, txtime, xdp"
    );
    assert_eq!(
        error(&GOOD.replace("\"L4\"", "\"L9\"")),
        "s.toml: phase[0].profile = L9: no such profile"
    );
    assert!(error(&GOOD.replace("seconds = 10", "seconds = 0")).contains("phase[0].seconds = 0"));
    assert!(error(&GOOD.replace("\"frr\"", "\"gobgp\"")).contains("peer.implementation = gobgp"));
    assert!(
        error(&GOOD.replace("max_flaps = 0", "max_flaps = 0\npositive_control = true"))
            .contains("dut[0].positive_control = true")
    );
    assert!(error(&GOOD.replace("name = \"t\"", "name = \"../etc\"")).contains("name = ../etc"));
    assert!(error(&format!("{GOOD}colour = 1\n")).starts_with("s.toml: "));
    let ssh = |table: &str| {
        GOOD.replace("name = \"t\"\n", "name = \"t\"\nprovider = \"ssh\"\n")
            .replace("[peer]", &format!("{table}[peer]"))
    };
    assert!(error(&ssh("")).contains("ssh = (missing): provider = \"ssh\" needs an [ssh] table"));
    assert!(error(&ssh("[ssh]\ntarget = \"root@h; reboot\"\n"))
        .contains("ssh.target = root@h; reboot: must be user@host"));
    assert!(error(&ssh("[ssh]\ntarget = \"root@h\"\nhost = 1\n")).starts_with("s.toml: "));
    assert!(
        error(&GOOD.replace("[peer]", "[ssh]\ntarget = \"root@h\"\n[peer]"))
            .contains("ssh = (table): only read with provider = \"ssh\"")
    );
    // Three hosts: what needs the local lab's plumbing is refused,
    // naming the key.
    let hosts = "[ssh]\n[ssh.dut]\ntarget = \"root@d\"\ninterface = \"eth0\"\naddress = \"192.0.2.1\"\ncpus = [1]\n\
                 [ssh.peer]\ntarget = \"root@p\"\ninterface = \"eth0\"\naddress = \"192.0.2.2\"\n\
                 [ssh.observer]\ntarget = \"root@o\"\ninterface = \"br0\"\n";
    assert!(parse(&ssh(hosts)).is_ok());
    let refused = |from: &str, to: &str| error(&ssh(hosts).replace(from, to));
    assert!(refused("[[phase]]", "[sessions]\ncount = 2\n[[phase]]")
        .contains("sessions.count = 2: one session between the two hosts' addresses"));
    assert!(refused("[[phase]]", "[sessions]\necho = true\n[[phase]]")
        .contains("sessions.echo = true: needs the lab's addresses"));
    assert!(
        refused("implementation = \"frr\"", "implementation = \"linecardd\"")
            .contains("peer.implementation = linecardd")
    );
    assert!(refused(
        "backend = \"xdp\"",
        "backend = \"xdp\"\nrt_throttling = \"off\""
    )
    .contains("dut[0].rt_throttling = off"));
    assert!(refused(
        "backend = \"xdp\"",
        "backend = \"xdp\"\nksoftirqd_priority = 60"
    )
    .contains("dut[0].ksoftirqd_priority = 60"));
    assert!(
        refused("address = \"192.0.2.2\"", "address = \"2001:db8::2\"")
            .contains("ssh.peer.address")
    );
}

#[test]
fn every_value_that_reaches_a_command_refuses_shell_text_naming_its_key() {
    let with = |provider: &str, table: &str| {
        GOOD.replace(
            "name = \"t\"\n",
            &format!("name = \"t\"\nprovider = \"{provider}\"\n"),
        )
        .replace("[peer]", &format!("{table}[peer]"))
    };
    let proxmox = "[proxmox]\nhost = \"root@pve\"\ntemplate_vmid = 9000\nfirst_vmid = 7100\n\
                   dut_cpus = [1]\n";
    let hosts = "[ssh]\n[ssh.dut]\ntarget = \"root@d\"\ninterface = \"eth0\"\naddress = \"192.0.2.1\"\ncpus = [1]\n\
                 [ssh.peer]\ntarget = \"root@p\"\ninterface = \"eth0\"\naddress = \"192.0.2.2\"\n\
                 [ssh.observer]\ntarget = \"root@o\"\ninterface = \"br0\"\n";
    assert!(parse(&with("proxmox", proxmox)).is_ok());
    assert!(parse(&with("ssh", hosts)).is_ok());
    // (provider, table text with VALUE where the hostile value goes, key)
    let cases: &[(&str, String, &str)] = &[
        ("ssh", "[ssh]\ntarget = VALUE\n".into(), "ssh.target"),
        (
            "ssh",
            "[ssh]\ntarget = \"root@h\"\nremote_dir = VALUE\n".into(),
            "ssh.remote_dir",
        ),
        (
            "ssh",
            "[ssh]\ntarget = \"root@h\"\noptions = [VALUE]\n".into(),
            "ssh.options",
        ),
        (
            "ssh",
            hosts.replace("\"root@d\"", "VALUE"),
            "ssh.dut.target",
        ),
        (
            "ssh",
            hosts.replace("\"br0\"", "VALUE"),
            "ssh.observer.interface",
        ),
        (
            "ssh",
            hosts.replace("cpus = [1]\n", "cpus = [1]\noptions = [VALUE]\n"),
            "ssh.dut.options",
        ),
        (
            "proxmox",
            proxmox.replace("\"root@pve\"", "VALUE"),
            "proxmox.host",
        ),
        (
            "proxmox",
            format!("{proxmox}bridge = VALUE\n"),
            "proxmox.bridge",
        ),
        (
            "proxmox",
            format!("{proxmox}dut_affinity = VALUE\n"),
            "proxmox.dut_affinity",
        ),
        (
            "proxmox",
            format!("{proxmox}peer_affinity = VALUE\n"),
            "proxmox.peer_affinity",
        ),
        (
            "proxmox",
            format!("{proxmox}guest_user = VALUE\n"),
            "proxmox.guest_user",
        ),
        (
            "proxmox",
            format!("{proxmox}remote_dir = VALUE\n"),
            "proxmox.remote_dir",
        ),
        (
            "proxmox",
            format!("{proxmox}options = [VALUE]\n"),
            "proxmox.options",
        ),
        (
            "proxmox",
            format!("{proxmox}guest_options = [VALUE]\n"),
            "proxmox.guest_options",
        ),
    ];
    for (provider, table, key) in cases {
        for hostile in crate::scenario::value::HOSTILE {
            // An option's value may be shell text (a ProxyCommand); its
            // key may not, nor may it span lines.
            let hostile = if key.ends_with("options") && !hostile.contains('\n') {
                format!("Bad Key={hostile}")
            } else if key.ends_with("remote_dir") {
                format!("/var/tmp/{hostile}")
            } else {
                hostile.to_string()
            };
            let value = toml::Value::String(hostile.clone()).to_string();
            let said = error(&with(provider, &table.replace("VALUE", &value)));
            assert!(
                said.starts_with(&format!("s.toml: {key} = ")),
                "{key} = {hostile:?}: {said}"
            );
        }
    }
    // A program's path reaches no shell (it is one argument of a
    // command); only a path that cannot be one line is refused.
    let program = GOOD.replace("max_flaps = 0", "max_flaps = 0\nlinecardd = \"a\\nb\"");
    assert!(error(&program).starts_with("s.toml: dut[0].linecardd = "));
}

#[test]
fn labels_whose_directories_would_meet_are_refused() {
    let two = |a: &str, b: &str| {
        let second = GOOD[GOOD.find("[[dut]]").unwrap()..]
            .replace("\"xdp\"\nimpl", &format!("\"{b}\"\nimpl"));
        format!(
            "{}{second}",
            GOOD.replace("label = \"xdp\"", &format!("label = \"{a}\""))
        )
    };
    assert!(parse(&two("xdp", "naive")).is_ok());
    assert!(error(&two("xdp A", "xdp-a"))
        .contains("dut[1].label = xdp-a: its directory (xdp-a) would meet"));
    assert!(error(&two("xdp", "XDP 2")).contains("dut[1].label = XDP 2"));
    assert!(error(&two("!!!", "xdp")).contains("dut[0].label = !!!: needs a letter or digit"));
}

#[test]
fn no_shipped_secret_is_published() {
    let mut secrets = Vec::new();
    for entry in std::fs::read_dir(repo().join("scenarios")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let s = Scenario::load(&path, &repo().join("stress-profiles")).unwrap();
            if let Some(auth) = &s.sessions.auth {
                // Keyed authentication puts no secret on the wire, so the
                // captures need no scan; a simple password would.
                assert_ne!(
                    auth.auth_type(),
                    linecard_api::AuthType::SimplePassword,
                    "{}: a password in clear is in every capture",
                    path.display()
                );
                let json = serde_json::to_string(auth).unwrap();
                assert!(
                    !json.contains(&auth.secret),
                    "a manifest would hold it: {json}"
                );
                assert!(json.contains(&secret_fingerprint(&auth.secret)), "{json}");
                secrets.push(auth.secret.clone());
            }
        }
    }
    assert!(
        !secrets.is_empty(),
        "no shipped scenario has a key: the scan proves nothing"
    );
    let mut files = vec![repo().join("docs/evidence")];
    let mut scanned = 0;
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else if path
            .extension()
            .is_none_or(|e| e != "pcap" && e != "parquet")
        {
            let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
            for secret in &secrets {
                assert!(
                    !text.contains(secret.as_str()),
                    "{} holds a shipped secret",
                    path.display()
                );
            }
            scanned += 1;
        }
    }
    assert!(scanned > 100, "only {scanned} files under docs/evidence");
}

#[test]
fn engine_settings_are_linecardd_s_typed_and_a_misspelt_switch_is_refused() {
    let with = |engine: &str| GOOD.replace("max_flaps = 0", &format!("max_flaps = 0\n{engine}"));
    let scenario = parse(&with("engine = { xdp_sign = false, dead_man_ms = 500 }")).unwrap();
    let engine = &scenario.duts[0].engine;
    assert!(!engine.xdp_sign_on() && engine.xdp_replies_on());
    assert_eq!(engine.dead_man_ms, Some(500));
    let misspelt = error(&with("engine = { xdp_sing = false }"));
    assert!(
        misspelt.starts_with("s.toml: dut[0].engine = ") && misspelt.contains("xdp_sing"),
        "{misspelt}"
    );
    assert!(error(&with("engine = { control_socket = \"/x\" }"))
        .contains("dut[0].engine.control_socket"));
}

#[test]
fn a_manifest_s_engine_settings_read_back_as_a_table_or_as_older_toml_text() {
    let written = serde_json::to_value(&parse(GOOD).unwrap().duts[0]).unwrap();
    let dut = |engine: &str| {
        let mut json = written.clone();
        json["engine"] = serde_json::from_str(engine).unwrap();
        serde_json::from_value::<DutSpec>(json)
    };
    let table = dut(r#"{"xdp_sign": false}"#).unwrap();
    let text = dut(r#""xdp_sign = false\n""#).unwrap();
    assert_eq!(table.engine, text.engine);
    assert!(!text.engine.xdp_sign_on());
    assert_eq!(dut(r#""""#).unwrap().engine, Default::default());
    assert_eq!(
        table.implementation,
        DutImplementation::Linecardd {
            backend: BackendKind::Xdp
        }
    );
}

#[test]
fn a_disturbed_gap_makes_an_excused_pass_unless_the_dut_says_invalid() {
    let dut = |s: Scenario| s.duts[0].expect.excused_gaps;
    assert_eq!(dut(parse(GOOD).unwrap()), ExcusedGaps::Pass);
    let with = |value: &str| {
        GOOD.replace(
            "backend = \"xdp\"",
            &format!("backend = \"xdp\"\nexcused_gaps = \"{value}\""),
        )
    };
    assert_eq!(dut(parse(&with("invalid")).unwrap()), ExcusedGaps::Invalid);
    assert_eq!(dut(parse(&with("pass")).unwrap()), ExcusedGaps::Pass);
    assert_eq!(
        error(&with("maybe")),
        "s.toml: dut[0].excused_gaps = maybe: must be pass or invalid"
    );
}
