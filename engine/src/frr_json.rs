//! `linecardd ctl peers [--counters]`: the sessions in the shapes FRR's
//! bfdd prints for `show bfd peers json` and `show bfd peers counters
//! json` (FRR 8.4: the same keys, units and words), so that what already
//! parses FRR (frr_exporter, MetalLB's collector, operators' scripts)
//! reads linecardd too. Built from `ctl list`'s reply; held key for key to
//! a running FRR bfdd's own output by `harness/tests/lab/frr_json.rs`.
//!
//! Where FRR has no concept of ours (the backend, the fast path, the
//! gaps), `ctl list --json` and the metrics endpoint say it; where we have
//! none of FRR's, the value is the one FRR prints for it: `vrf` is
//! `default` (no VRFs here), `zebra-notifications` 0 (no zebra).

use linecard_api::control::{Diagnostic, SessionStatus, State};
use serde_json::{json, Map, Value};

/// FRR's words for a diagnostic (`diag2str`, RFC 5880 4.1's codes).
fn diagnostic(diag: Diagnostic) -> &'static str {
    match diag {
        Diagnostic::NoDiagnostic => "ok",
        Diagnostic::ControlDetectionTimeExpired => "control detection time expired",
        Diagnostic::EchoFunctionFailed => "echo function failed",
        Diagnostic::NeighborSignaledSessionDown => "neighbor signaled session down",
        Diagnostic::ForwardingPlaneReset => "forwarding plane reset",
        Diagnostic::PathDown => "path down",
        Diagnostic::ConcatenatedPathDown => "concatenated path down",
        Diagnostic::AdministrativelyDown => "administratively down",
        Diagnostic::ReverseConcatenatedPathDown => "reverse concatenated path down",
        Diagnostic::Reserved(_) => "unknown",
    }
}

/// µs as FRR prints intervals: whole ms.
fn ms(us: impl Into<u64>) -> u64 {
    us.into() / 1000
}

/// The keys both shapes open with (FRR's `_peer_json_header`).
fn header(s: &SessionStatus) -> Map<String, Value> {
    let mut o = Map::new();
    o.insert("multihop".into(), json!(s.multihop));
    o.insert("peer".into(), json!(s.peer.to_string()));
    o.insert("local".into(), json!(s.local.to_string()));
    o.insert("vrf".into(), json!("default"));
    if let Some(interface) = &s.interface {
        o.insert("interface".into(), json!(interface));
    }
    o
}

/// One session as `show bfd peers json` prints it; `now_unix_ns` dates
/// its `uptime` or `downtime` (whole seconds since its last transition).
pub fn peer(s: &SessionStatus, now_unix_ns: i64) -> Value {
    let mut o = header(s);
    o.insert("id".into(), json!(s.local_discr));
    o.insert("remote-id".into(), json!(s.remote.discr));
    o.insert("passive-mode".into(), json!(s.passive));
    if s.multihop {
        o.insert("minimum-ttl".into(), json!(s.min_ttl));
    }
    let since_s = s
        .last_transition_unix_ns
        .map_or(0, |at| (now_unix_ns - at).max(0) / 1_000_000_000);
    let status = match s.state {
        State::AdminDown => "shutdown",
        State::Down => {
            o.insert("downtime".into(), json!(since_s));
            "down"
        }
        State::Init => "init",
        State::Up => {
            o.insert("uptime".into(), json!(since_s));
            "up"
        }
    };
    o.insert("status".into(), json!(status));
    o.insert("diagnostic".into(), json!(diagnostic(s.diag)));
    o.insert("remote-diagnostic".into(), json!(diagnostic(s.remote.diag)));
    let echo_tx = s.echo.as_ref().map_or(0, |e| ms(e.interval_us));
    for (key, value) in [
        ("receive-interval", ms(s.required_min_rx_us)),
        ("transmit-interval", ms(s.desired_min_tx_us)),
        ("echo-receive-interval", ms(s.required_min_echo_rx_us)),
        ("echo-transmit-interval", echo_tx),
        ("detect-multiplier", u64::from(s.detect_mult)),
        ("remote-receive-interval", ms(s.remote.min_rx_us)),
        ("remote-transmit-interval", ms(s.remote.desired_min_tx_us)),
        ("remote-echo-receive-interval", ms(s.remote.min_echo_rx_us)),
        ("remote-detect-multiplier", u64::from(s.remote.detect_mult)),
    ] {
        o.insert(key.into(), json!(value));
    }
    // Our echoes' round trips, µs as FRR counts them; 0 without any.
    let echo = s.echo.as_ref();
    for (key, value) in [
        ("rtt-min", echo.and_then(|e| e.rtt_min_us)),
        ("rtt-avg", echo.and_then(|e| e.rtt_avg_us)),
        ("rtt-max", echo.and_then(|e| e.rtt_max_us)),
    ] {
        o.insert(key.into(), json!(value.unwrap_or(0)));
    }
    Value::Object(o)
}

/// One session as `show bfd peers counters json` prints it. On the xdp
/// backend the kernel hears every valid packet first and sends the
/// RX-clocked replies: its counts are the session's (userspace's sends
/// added, which the kernel never sees).
pub fn counters(s: &SessionStatus) -> Value {
    let mut o = header(s);
    let input = s.counters.packets_in.max(s.kernel_packets_in.unwrap_or(0));
    let output = s.counters.packets_out + s.kernel_packets_out.unwrap_or(0);
    let (echo_in, echo_out) = s.echo.as_ref().map_or((0, 0), |e| (e.returned, e.sent));
    for (key, value) in [
        ("control-packet-input", input),
        ("control-packet-output", output),
        ("echo-packet-input", echo_in),
        ("echo-packet-output", echo_out),
        ("session-up", s.ups),
        ("session-down", s.downs),
        ("zebra-notifications", 0),
    ] {
        o.insert(key.into(), json!(value));
    }
    Value::Object(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A session as `ctl list` gives it: Up 42 s, 3 x 10 ms both ways.
    fn status() -> SessionStatus {
        let text = r#"{"local":"192.0.2.1","peer":"192.0.2.2","backend":"xdp","source_port":49152,
            "state":"up","diag":"control_detection_time_expired","local_discr":7,"detect_mult":3,
            "desired_min_tx_us":10000,"required_min_rx_us":10000,"polling":false,
            "demand":{"configured":false,"verify_interval_us":0,"active_here":false,"active_at_peer":false},
            "detection_time_us":30000,
            "remote":{"discr":9,"state":"up","min_rx_us":20000,"desired_min_tx_us":10000,"detect_mult":5,
                "min_echo_rx_us":0,"demand":false,"diag":"no_diagnostic"},
            "counters":{"packets_in":10,"packets_out":12,"polls_started":0,"finals_sent":0,"transitions":4},
            "drops":[],"last_transition":null,"offloaded":true,"last_transition_unix_ns":1000000000,
            "kernel_detection_unix_ns":null,"clock":"peer","own_clock_requests":0,
            "required_min_echo_rx_us":0,"echo":null,"auth":null,"kernel_digests":null,
            "interface":"eth0","ups":2,"downs":1,"kernel_packets_in":4000,"kernel_packets_out":3990}"#;
        serde_json::from_str(text).expect("a ctl list row")
    }

    #[test]
    fn a_session_reads_as_frr_prints_one() {
        let p = peer(&status(), 43_500_000_000);
        assert_eq!(p["status"], "up");
        assert_eq!(p["uptime"], 42);
        assert!(p.get("downtime").is_none());
        assert_eq!(
            (p["id"].clone(), p["remote-id"].clone()),
            (json!(7), json!(9))
        );
        assert_eq!(p["diagnostic"], "control detection time expired");
        assert_eq!(p["remote-diagnostic"], "ok");
        assert_eq!(
            (
                p["receive-interval"].clone(),
                p["remote-receive-interval"].clone()
            ),
            (json!(10), json!(20))
        );
        assert_eq!(p["remote-detect-multiplier"], 5);
        assert_eq!(
            (p["vrf"].clone(), p["interface"].clone()),
            (json!("default"), json!("eth0"))
        );
        assert!(p.get("minimum-ttl").is_none(), "single hop");

        let c = counters(&status());
        // The kernel heard every packet; userspace's sends add to its
        // replies.
        assert_eq!(c["control-packet-input"], 4000);
        assert_eq!(c["control-packet-output"], 4002);
        assert_eq!(
            (c["session-up"].clone(), c["session-down"].clone()),
            (json!(2), json!(1))
        );
    }

    #[test]
    fn a_session_down_or_shut_reads_as_frr_prints_it() {
        let mut s = status();
        s.state = State::Down;
        s.multihop = true;
        s.min_ttl = 254;
        let p = peer(&s, 11_000_000_000);
        assert_eq!(
            (p["status"].clone(), p["downtime"].clone()),
            (json!("down"), json!(10))
        );
        assert_eq!(p["minimum-ttl"], 254);
        s.state = State::AdminDown;
        assert_eq!(peer(&s, 0)["status"], "shutdown");
    }
}
