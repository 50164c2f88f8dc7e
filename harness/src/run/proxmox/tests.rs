use super::*;

fn spec() -> ProxmoxSpec {
    ProxmoxSpec {
        host: "root@pve".into(),
        port: None,
        identity: None,
        options: Vec::new(),
        template_vmid: 9000,
        first_vmid: 7100,
        bridge: None,
        dut_cores: 4,
        dut_affinity: Some("2-3".into()),
        peer_affinity: None,
        dut_cpus: Vec::new(),
        peer_cpus: Vec::new(),
        guest_user: "root".into(),
        guest_options: Vec::new(),
        agent_timeout_s: 120,
        remote_dir: "/var/tmp/linecard".into(),
    }
}

fn owner() -> Owner {
    Owner {
        run_id: "20261206T190000Z".into(),
        token: "0a1b2c3d".into(),
    }
}

fn commands(steps: &[Step]) -> Vec<&str> {
    steps.iter().map(|s| s.command.as_str()).collect()
}

#[test]
fn the_plan_clones_three_vms_onto_an_isolated_bridge_with_the_lab_addresses() {
    let steps = bring_up(&spec(), &owner());
    let commands = commands(&steps);
    for (role, id) in [("dut", 7100), ("peer", 7101), ("spare", 7102)] {
        assert!(commands.contains(
            &format!(
                "qm clone 9000 {id} --name lc-{role}-0a1b2c3d \
                 --description linecard-0a1b2c3d-run-20261206T190000Z --full 0"
            )
            .as_str()
        ));
        assert!(commands.contains(&format!("qm guest cmd {id} network-get-interfaces").as_str()));
    }
    assert!(commands
        .iter()
        .any(|c| c.starts_with("qm set 7100 --cores 4 ")
            && c.contains("virtio=02:1C:00:00:00:01,bridge=lcbr0a1b2c3d")
            && c.ends_with(" --affinity 2-3")));
    assert!(
        commands
            .iter()
            .any(|c| c.starts_with("qm set 7101 ") && !c.contains("affinity")),
        "a VM the scenario does not pin is left to the host"
    );
    // The lab NIC is named by the guest, found by MAC: no `eth1` guessed.
    assert!(commands.iter().all(|c| !c.contains("eth1")));
    assert!(commands.iter().any(|c| c.starts_with("qm guest exec 7100 ")
        && c.contains(&format!("ip addr add 192.0.2.1/24 dev {LAB_NIC}"))));
    let position = |prefix: &str| commands.iter().position(|c| c.starts_with(prefix)).unwrap();
    assert!(
        position("ip link add name lcbr0a1b2c3d type bridge && ip link set lcbr0a1b2c3d alias linecard-0a1b2c3d-run-20261206T190000Z")
            < position("qm clone"),
        "the bridge first"
    );
    assert!(
        position("pvesh get /cluster/resources") < position("ip link add"),
        "checks first"
    );
    assert_eq!(commands[0], "pveversion");
    // Every wait is bounded: the agent is polled, never waited on forever.
    assert!(steps
        .iter()
        .filter(|s| s.command.contains(" ping"))
        .all(|s| s.effect == Effect::Poll));
}

#[test]
fn everything_made_is_recorded_before_it_is_made_and_nothing_else() {
    let made = everything(&spec(), &owner());
    assert_eq!(
        made,
        vec![
            Made::Bridge("lcbr0a1b2c3d".into()),
            Made::Vm(7100),
            Made::Vm(7101),
            Made::Vm(7102)
        ]
    );
    assert!(
        !made.contains(&Made::Vm(9000)),
        "the template is never the run's"
    );
}

#[test]
fn teardown_reads_each_owner_back_then_removes_it_last_made_first() {
    let partial = [Made::Bridge("lcbr0".into()), Made::Vm(7100)];
    let steps = teardown(&partial);
    assert_eq!(
        commands(&steps),
        vec![
            "qm config 7100",
            "qm stop 7100",
            "qm destroy 7100 --purge 1",
            "ip -d -o link show lcbr0",
            "ip link del lcbr0"
        ]
    );
    assert!(
        steps.iter().all(|s| !s.command.contains("skiplock")),
        "someone else's lock is never overridden"
    );
}

#[test]
fn the_table_refuses_every_value_a_shell_would_interpret() {
    assert_eq!(spec().check(), Ok(()));
    type Set = fn(&mut ProxmoxSpec, String);
    let fields: [(&str, Set); 9] = [
        ("host", |p, v| p.host = v),
        ("bridge", |p, v| p.bridge = Some(v)),
        ("dut_affinity", |p, v| p.dut_affinity = Some(v)),
        ("peer_affinity", |p, v| p.peer_affinity = Some(v)),
        ("guest_user", |p, v| p.guest_user = v),
        ("remote_dir", |p, v| p.remote_dir = format!("/var/tmp/{v}")),
        ("options", |p, v| {
            p.options = vec![format!("Proxy Command={v}")]
        }),
        ("guest_options", |p, v| {
            p.guest_options = vec![format!("X={v}\n")]
        }),
        ("identity", |p, v| {
            p.identity = Some(format!("/k\n{v}").into())
        }),
    ];
    for (key, set) in fields {
        for hostile in crate::scenario::value::HOSTILE {
            let mut p = spec();
            set(&mut p, hostile.to_string());
            let refused = p.check().map_err(|(k, _, _)| k);
            assert_eq!(refused, Err(key.to_string()), "{key} = {hostile:?}");
        }
    }
    type Bump = fn(&mut ProxmoxSpec);
    let numbers: [(&str, Bump); 5] = [
        ("first_vmid", |p| p.first_vmid = u32::MAX),
        ("first_vmid", |p| p.first_vmid = 8999),
        ("template_vmid", |p| p.template_vmid = 99),
        ("agent_timeout_s", |p| p.agent_timeout_s = u64::MAX),
        ("dut_cpus", |p| p.dut_cpus = vec![4]),
    ];
    for (key, set) in numbers {
        let mut p = spec();
        set(&mut p);
        assert_eq!(p.check().map_err(|(k, _, _)| k), Err(key.to_string()));
    }
}

#[test]
fn only_what_carries_the_runs_mark_is_the_runs() {
    let o = owner();
    let ours = "description: linecard-0a1b2c3d-run-20261206T190000Z\nname: lc-dut-0a1b2c3d\n";
    assert!(matches!(
        execute::carries_mark(&Made::Vm(7100), ours, &o),
        execute::Whose::Ours
    ));
    let replaced = "name: lc-dut-99999999\ndescription: linecard-99999999-run-20261206T190001Z\n";
    let execute::Whose::Theirs(why) = execute::carries_mark(&Made::Vm(7100), replaced, &o) else {
        panic!("another run's VM taken for ours")
    };
    assert!(why.contains("lc-dut-99999999"), "{why}");
    assert!(matches!(
        execute::carries_mark(&Made::Vm(7100), "name: webserver\n", &o),
        execute::Whose::Theirs(_)
    ));
    let bridge = "9: lcbr0a1b2c3d: <BROADCAST> mtu 1500 ...\\    link/ether f6:65 ... \\    alias linecard-0a1b2c3d-run-20261206T190000Z";
    assert!(matches!(
        execute::carries_mark(&Made::Bridge("lcbr0a1b2c3d".into()), bridge, &o),
        execute::Whose::Ours
    ));
    assert!(matches!(
        execute::carries_mark(&Made::Bridge("lcbr0".into()), "9: lcbr0: <BROADCAST>", &o),
        execute::Whose::Theirs(_)
    ));
}

#[test]
fn the_dry_run_prints_the_steps_the_executor_runs() {
    let p = spec();
    let text = render(&p, "bakeoff", &owner());
    assert!(text.contains("dry run: nothing is executed"));
    for s in bring_up(&p, &owner())
        .iter()
        .chain(&teardown(&everything(&p, &owner())))
    {
        assert!(
            text.contains(&format!("  {}\n", s.command)),
            "{}",
            s.command
        );
    }
    assert!(text.contains("capturing on tap7100i1"));
    assert!(
        text.contains("CPUs [3] under test"),
        "the DUT's last vCPU by default"
    );
}
