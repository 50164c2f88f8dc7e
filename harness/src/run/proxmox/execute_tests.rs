//! The executor's readings of qm, the guest agent and the host's records.
use super::*;

const AGENT: &str = r#"[
   {"hardware-address": "00:00:00:00:00:00", "ip-addresses": [{"ip-address": "127.0.0.1", "ip-address-type": "ipv4", "prefix": 8}], "name": "lo"},
   {"hardware-address": "bc:24:11:00:1b:bc", "ip-addresses": [
  {"ip-address": "fe80::be24:11ff:fe00:1bbc", "ip-address-type": "ipv6", "prefix": 64},
  {"ip-address": "10.0.0.7", "ip-address-type": "ipv4", "prefix": 24}], "name": "ens18"},
   {"hardware-address": "02:1c:00:00:00:01", "ip-addresses": [], "name": "ens19"}
]"#;

#[test]
fn the_guest_is_found_by_its_macs_not_by_interface_names() {
    let config = "agent: enabled=1\nname: lc-dut\nnet0: virtio=BC:24:11:00:1B:BC,bridge=vmbr0\nnet1: virtio=02:1C:00:00:00:01,bridge=lcbr0,firewall=0\n";
    let mac = net0_mac(config).unwrap();
    assert_eq!(mac, "bc:24:11:00:1b:bc");
    let (address, nic) = interfaces(AGENT, &mac, "02:1c:00:00:00:01").unwrap();
    assert_eq!(address.to_string(), "10.0.0.7", "IPv4, never link-local");
    assert_eq!(nic, "ens19");
    let missing = interfaces(AGENT, &mac, "02:1c:00:00:00:09").unwrap_err();
    assert!(format!("{missing:#}").contains("no interface with the lab MAC"));
}

#[test]
fn a_guest_command_that_failed_fails_the_step() {
    assert!(guest_exit("{\n   \"exitcode\": 0,\n   \"exited\": 1\n}").is_ok());
    let e = guest_exit(r#"{"exitcode": 2, "exited": 1, "err-data": "Cannot find device"}"#)
        .unwrap_err();
    assert!(format!("{e}").contains("exited 2: Cannot find device"));
    assert!(
        guest_exit(r#"{"pid": 1234}"#).is_err(),
        "a timed-out exec is no success"
    );
}

#[test]
fn a_removal_with_nothing_to_remove_is_not_a_leftover() {
    let missing = anyhow::anyhow!(
        "ssh root@pve (exit status: 2): Configuration file 'nodes/pve/qemu-server/7101.conf' does not exist"
    );
    assert!(already_gone(&missing), "a clone that never happened");
    assert!(already_gone(&anyhow::anyhow!(
        "Cannot find device \"lcbr0\""
    )));
    assert!(!already_gone(&anyhow::anyhow!(
        "VM 7101 is running - destroy failed"
    )));
}

#[test]
fn vm_ids_in_use_anywhere_in_the_cluster_are_refused() {
    let rows = r#"[{"id":"qemu/7101","node":"pve2","type":"qemu","vmid":7101}]"#;
    let e = verify(&Check::VmidsFree(vec![7100, 7101, 7102]), rows).unwrap_err();
    assert!(format!("{e}").contains("[7101]"));
    assert!(verify(&Check::VmidsFree(vec![7100]), rows).is_ok());
    assert!(verify(&Check::ProxmoxVe, "Linux 6.1").is_err());
}

#[test]
fn guests_go_through_the_host_unless_the_scenario_names_a_route() {
    let mut p: ProxmoxSpec = toml::from_str(
        "host = \"root@pve\"\ntemplate_vmid = 9000\nfirst_vmid = 7100\ndut_cpus = [1]\n",
    )
    .unwrap();
    let guests: Vec<Guest> = ["ens19", "ens20", "ens21"]
        .iter()
        .enumerate()
        .map(|(i, nic)| Guest {
            net0_mac: None,
            management: Some(format!("10.0.0.{}", i + 7).parse().unwrap()),
            lab_nic: Some(nic.to_string()),
        })
        .collect();
    let spec = three_hosts(&p, &guests).unwrap();
    let dut = spec.dut.unwrap();
    assert_eq!(dut.target, "root@10.0.0.7");
    assert_eq!(dut.interface, "ens19");
    assert_eq!(dut.cpus, vec![1]);
    assert!(dut.options[0].ends_with("-W %h:%p root@pve"));
    assert_eq!(spec.observer.unwrap().interface, "tap7100i1");
    p.guest_options = vec!["ProxyJump=bastion".into()];
    let peer = three_hosts(&p, &guests).unwrap().peer.unwrap();
    assert_eq!(peer.options, vec!["ProxyJump=bastion".to_string()]);
    assert_eq!(peer.address, Some("192.0.2.2".parse().unwrap()));
}

#[test]
fn guests_are_reached_through_the_host_with_its_own_settings() {
    let host = Connection {
        target: "root@pve".into(),
        port: Some(2222),
        identity: Some("/k ey".into()),
        options: vec!["ProxyCommand=ip netns exec lc-pve nc 127.0.0.1 22".into()],
        multiplex: false,
    };
    assert_eq!(
        through(&host),
        "ProxyCommand=ssh -o BatchMode=yes -o 'ProxyCommand=ip netns exec lc-pve nc 127.0.0.1 22' \
         -i '/k ey' -p 2222 -W %h:%p root@pve"
    );
}
