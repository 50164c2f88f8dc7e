use super::*;

fn spec() -> ProxmoxSpec {
    ProxmoxSpec {
        host: "root@pve".into(),
        port: None,
        identity: None,
        options: Vec::new(),
        template_vmid: 9000,
        first_vmid: 7100,
        bridge: "lcbr0".into(),
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

fn commands(steps: &[Step]) -> Vec<&str> {
    steps.iter().map(|s| s.command.as_str()).collect()
}

#[test]
fn the_plan_clones_three_vms_onto_an_isolated_bridge_with_the_lab_addresses() {
    let steps = bring_up(&spec());
    let commands = commands(&steps);
    for (role, id) in [("dut", 7100), ("peer", 7101), ("spare", 7102)] {
        assert!(
            commands.contains(&format!("qm clone 9000 {id} --name lc-{role} --full 0").as_str())
        );
        assert!(commands.contains(&format!("qm guest cmd {id} network-get-interfaces").as_str()));
    }
    assert!(commands
        .iter()
        .any(|c| c.starts_with("qm set 7100 --cores 4 ")
            && c.contains("virtio=02:1C:00:00:00:01,bridge=lcbr0")
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
        position("ip link add name lcbr0") < position("qm clone"),
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
    let made = everything(&spec());
    assert_eq!(
        made,
        vec![
            Made::Bridge("lcbr0".into()),
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
fn teardown_removes_exactly_what_was_made_last_first() {
    let partial = [Made::Bridge("lcbr0".into()), Made::Vm(7100)];
    let steps = teardown(&partial);
    assert_eq!(
        commands(&steps),
        vec![
            "qm stop 7100 --skiplock 1",
            "qm destroy 7100 --purge 1",
            "ip link del lcbr0"
        ]
    );
}

#[test]
fn the_dry_run_prints_the_steps_the_executor_runs() {
    let p = spec();
    let text = render(&p, "bakeoff");
    assert!(text.contains("dry run: nothing is executed"));
    for s in bring_up(&p).iter().chain(&teardown(&everything(&p))) {
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
