//! The configuration's parsing and validation, key by key.
use super::*;
use linecard_api::AuthType;

const GOOD: &str = r#"
[engine]
rt_priority = 90
cpu = 1
control_socket = "/run/lc.sock"

[[session]]
peer = "192.0.2.2"
local = "192.0.2.1"
tx_interval_ms = 10
rx_interval_ms = 10
multiplier = 3
backend = "rt"
interface = "eth0"
"#;

#[test]
fn a_full_file_parses() {
    let c = EngineConfig::parse("t.toml", GOOD).unwrap();
    assert_eq!((c.rt_priority, c.cpu), (90, Some(1)));
    let s = &c.sessions[0];
    assert_eq!(
        (s.tx_interval_us, s.rx_interval_us, s.multiplier, s.backend),
        (10_000, 10_000, 3, BackendKind::Rt)
    );
}

fn error_of(text: &str) -> String {
    EngineConfig::parse("t.toml", text).unwrap_err().to_string()
}

#[test]
fn errors_name_file_key_and_value() {
    let e = error_of(&GOOD.replace("tx_interval_ms = 10", "tx_interval_ms = 0"));
    assert_eq!(
        e,
        "t.toml: session[0].tx_interval_ms = 0: must be 1 to 60000 milliseconds"
    );
    let e = error_of(&GOOD.replace("\"rt\"", "\"turbo\""));
    assert!(e.contains("session[0].backend = turbo"), "{e}");
    let e = error_of(&GOOD.replace("192.0.2.1", "2001:db8::1"));
    assert!(
        e.contains("session[0].local = 2001:db8::1: must be the same address family"),
        "{e}"
    );
    let e = error_of(&GOOD.replace("rt_priority = 90", "rt_priority = 120"));
    assert!(e.contains("engine.rt_priority = 120"), "{e}");
}

#[test]
fn the_dead_man_is_on_by_default_and_bounded() {
    assert_eq!(
        EngineConfig::parse("t.toml", GOOD).unwrap().dead_man_ms,
        1000
    );
    let off = GOOD.replace("rt_priority = 90", "rt_priority = 90\ndead_man_ms = 0");
    assert_eq!(EngineConfig::parse("t.toml", &off).unwrap().dead_man_ms, 0);
    let e = error_of(&GOOD.replace("rt_priority = 90", "rt_priority = 90\ndead_man_ms = 5"));
    assert!(
        e.contains("engine.dead_man_ms = 5: must be 0 (off) or 20-60000"),
        "{e}"
    );
}

#[test]
fn demand_mode_verifies_every_second_unless_told_otherwise() {
    let with = |extra: &str| GOOD.replace("multiplier = 3", &format!("multiplier = 3\n{extra}"));
    let c = EngineConfig::parse("t.toml", &with("demand = true")).unwrap();
    assert!(c.sessions[0].demand);
    assert_eq!(c.sessions[0].demand_verify_us, 1_000_000);
    let c = EngineConfig::parse("t.toml", &with("demand = true\ndemand_verify_ms = 0")).unwrap();
    assert_eq!(c.sessions[0].demand_verify_us, 0);
    let plain = EngineConfig::parse("t.toml", GOOD).unwrap();
    assert!(!plain.sessions[0].demand);
    let e = error_of(&with("demand_verify_ms = 500"));
    assert!(
        e.contains("demand_verify_ms = 500: applies with demand = true only"),
        "{e}"
    );
    let e = error_of(&with("demand = true\ndemand_verify_ms = -1"));
    assert!(e.contains("must be 0 (never verify) to 3600000"), "{e}");
}

#[test]
fn unknown_keys_and_bad_syntax_are_errors() {
    assert!(error_of(&GOOD.replace("multiplier = 3", "multiplyer = 3")).contains("multiplyer"));
    assert!(error_of("[[session]\n").starts_with("t.toml: "));
}

#[test]
fn echo_is_single_hop_on_an_interface_and_reflected_only_by_xdp() {
    let c = EngineConfig::parse(
        "t.toml",
        &GOOD.replace("multiplier = 3", "multiplier = 3\necho = true"),
    )
    .unwrap();
    let s = &c.sessions[0];
    assert_eq!(s.echo_interval_us, Some(50_000), "FRR's default");
    let advertised = if s.backend == BackendKind::Xdp {
        50_000
    } else {
        0
    };
    assert_eq!(s.echo_rx_us, advertised, "RMERx only where we reflect");
    let e = error_of(&GOOD.replace("interface = \"eth0\"", "echo = true"));
    assert!(e.contains("echo = true: needs `interface`"), "{e}");
    let e = error_of(&GOOD.replace(
        "multiplier = 3",
        "multiplier = 3\necho = true\nmultihop = true",
    ));
    assert!(e.contains("single-hop sessions only"), "{e}");
    let e = error_of(&GOOD.replace("multiplier = 3", "multiplier = 3\necho_interval_ms = 10"));
    assert!(e.contains("applies with echo = true only"), "{e}");
    let e = error_of(&GOOD.replace(
        "multiplier = 3",
        "multiplier = 3\necho = true\necho_interval_ms = 0",
    ));
    assert!(e.contains("must be 1 to 60000"), "{e}");
}

#[test]
fn multihop_takes_a_minimum_ttl_and_single_hop_does_not() {
    let c = EngineConfig::parse(
        "t.toml",
        &GOOD.replace("multiplier = 3", "multiplier = 3\nmultihop = true"),
    )
    .unwrap();
    assert_eq!((c.sessions[0].multihop, c.sessions[0].min_ttl), (true, 254));
    let c = EngineConfig::parse(
        "t.toml",
        &GOOD.replace(
            "multiplier = 3",
            "multiplier = 3\nmultihop = true\nmin_ttl = 64",
        ),
    )
    .unwrap();
    assert_eq!(c.sessions[0].min_ttl, 64);
    assert_eq!(
        EngineConfig::parse("t.toml", GOOD).unwrap().sessions[0].min_ttl,
        255
    );
    let e = error_of(&GOOD.replace("multiplier = 3", "multiplier = 3\nmin_ttl = 64"));
    assert!(
        e.contains("min_ttl = 64: applies to multihop sessions only"),
        "{e}"
    );
    let e = error_of(&GOOD.replace(
        "multiplier = 3",
        "multiplier = 3\nmultihop = true\nmin_ttl = 0",
    ));
    assert!(e.contains("must be 1 to 255"), "{e}");
}

#[test]
fn authentication_takes_a_type_and_keys_and_never_echoes_a_secret() {
    let with = |auth: &str| {
        GOOD.replace(
            "interface = \"eth0\"",
            &format!("interface = \"eth0\"\n{auth}"),
        )
    };
    let file = with(
        r#"auth = { type = "meticulous_keyed_sha1", send_key = 2, keys = [{ id = 1, secret = "old" }, { id = 2, secret = "new" }] }"#,
    );
    let auth = EngineConfig::parse("t.toml", &file).unwrap().sessions[0]
        .auth
        .clone()
        .unwrap();
    assert_eq!(
        (auth.auth_type, auth.send_key, auth.keys.len()),
        (AuthType::MeticulousKeyedSha1, 2, 2)
    );
    assert_eq!(auth.keys[1].secret, b"new");
    // The first key sends unless told otherwise.
    let one = with(r#"auth = { type = "simple_password", keys = [{ id = 7, secret = "pw" }] }"#);
    assert_eq!(
        EngineConfig::parse("t.toml", &one).unwrap().sessions[0]
            .auth
            .as_ref()
            .unwrap()
            .send_key,
        7
    );
    let e = error_of(&with(
        r#"auth = { type = "md5", keys = [{ id = 1, secret = "x" }] }"#,
    ));
    assert!(
        e.contains("session[0].auth.type = md5: must be one of simple_password, keyed_md5"),
        "{e}"
    );
    let e = error_of(&with(
        r#"auth = { type = "keyed_md5", keys = [{ id = 1, secret = "seventeen-bytes!!" }] }"#,
    ));
    assert!(
        e.contains("session[0].auth.keys = (1 keys): key 1: 17 bytes"),
        "{e}"
    );
    assert!(!e.contains("seventeen"), "the secret leaked: {e}");
    let e = error_of(&with(
        r#"auth = { type = "keyed_sha1", send_key = 3, keys = [{ id = 1, secret = "x" }] }"#,
    ));
    assert!(e.contains("send_key 3 is not among the keys"), "{e}");
    let e = error_of(&with(
        r#"auth = { type = "keyed_sha1", keys = [{ id = 256, secret = "x" }] }"#,
    ));
    assert!(e.contains("session[0].auth.keys[0].id = 256"), "{e}");
    // No more keys than the kernel's map holds per session.
    let e = error_of(&with(
        r#"auth = { type = "keyed_sha1", keys = [{ id = 1, secret = "a" }, { id = 2, secret = "b" }, { id = 3, secret = "c" }] }"#,
    ));
    assert!(
        e.contains("session[0].auth.keys = (3 keys): 3 keys; a session holds at most 2"),
        "{e}"
    );
}

#[test]
fn timers_are_bounded_before_any_arithmetic() {
    for (key, good, value) in [
        ("tx_interval_ms", 10, "4294968"),
        ("tx_interval_ms", 10, "0"),
        ("rx_interval_ms", 10, "60001"),
        ("multiplier", 3, "256"),
    ] {
        let e =
            error_of(&GOOD.replace(&format!("{key} = {good}\n"), &format!("{key} = {value}\n")));
        assert!(
            e.contains(&format!("session[0].{key} = {value}: must be")),
            "{e}"
        );
    }
}

#[test]
fn offload_is_the_xdp_backends_to_refuse() {
    let c = EngineConfig::parse("t.toml", GOOD).unwrap();
    assert!(c.sessions[0].offload, "offloaded by default");
    let e = error_of(&GOOD.replace("multiplier = 3", "multiplier = 3\noffload = false"));
    assert!(
        e.contains("offload = false: applies to the xdp backend only"),
        "{e}"
    );
    let xdp = GOOD
        .replace("backend = \"rt\"", "backend = \"xdp\"")
        .replace("multiplier = 3", "multiplier = 3\noffload = false");
    let c = EngineConfig::parse("t.toml", &xdp).unwrap();
    assert_eq!(
        (c.sessions[0].backend, c.sessions[0].offload),
        (BackendKind::Xdp, false)
    );
}
