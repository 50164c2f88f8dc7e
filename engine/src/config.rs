//! `linecardd --config FILE`: TOML read as `linecard_api::config`, the
//! file's shape the harness writes too, then validated
//! into typed configuration with errors that name the file, key and value.

use crate::session::auth::{AuthConfig, AuthKey};
use crate::wire::Construction;
use linecard_api::config::{AuthSettings, ConfigFile, SessionSettings};
use linecard_api::BackendKind;
use linecard_api::{auth_type_named, InputError};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

/// Default path of the control socket: in the service's runtime
/// directory (systemd's `RuntimeDirectory=linecardd`; linecardd makes the
/// directory when it is missing).
pub const DEFAULT_CONTROL_SOCKET: &str = "/run/linecardd/linecardd.sock";

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct EngineConfig {
    /// SCHED_FIFO priority of the `rt` backend's thread (default 90, above
    /// the L4 stress hogs at 50).
    pub rt_priority: i32,
    /// CPU the transmit thread is pinned to (`rt`), if any.
    pub cpu: Option<usize>,
    pub control_socket: PathBuf,
    /// How many periodic packets per session the `txtime` backend hands to
    /// the kernel ahead of their departure (1: one in flight).
    pub txtime_depth: usize,
    /// The xdp backend answers steady sessions from the kernel. `false`
    /// keeps validation and detection in the kernel but transmits from
    /// userspace: a deliberately degraded engine, to prove that a
    /// regression gate catches the loss of the fast path.
    pub xdp_replies: bool,
    /// The xdp backend's own clock in the kernel's sweep: a packet of ours
    /// when none left for 1.1 intervals (RFC 5880 6.8.7: we send on our
    /// own schedule whatever the peer does). `false` is the negative
    /// control: replies then follow the peer alone, and a stalled peer's
    /// silence becomes ours.
    pub xdp_own_clock: bool,
    /// The xdp backend signs authenticated sessions' replies in the kernel
    /// (RFC 5880 6.7.2-6.7.4, one bfd.XmitAuthSeq shared by every sender).
    /// `false` is the negative control: authenticated sessions are then
    /// answered from the userspace loop, at normal priority, which L4
    /// starves (the auth scenario's xdp row flaps with it).
    pub xdp_sign: bool,
    /// The xdp backend's detection sweep re-armed on its fixed 0.5 ms
    /// period instead of at the next deadline. `true` is the negative
    /// control: the Down then leaves up to 0.5 ms after the detection time
    /// expires (the detection test fails with it).
    pub xdp_sweep_fixed_period: bool,
    /// `true` is the negative control only: every session stops at Init
    /// (RFC 5880 6.8.6's handshake never completes), so that a build that
    /// never brings a session Up is shown to fail the suite.
    pub never_leave_init: bool,
    /// Authenticated sessions' packets verified (RFC 5880 6.7), in the
    /// kernel and in userspace. `false` is the negative control only: any
    /// section of the configured type is taken as genuine (the forgery
    /// test must fail with it); linecardd says so loudly at start.
    pub verify_authentication: bool,
    /// The xdp backend's responder asks for SCHED_DEADLINE before
    /// SCHED_FIFO (default). `false`: SCHED_FIFO only, as the reference
    /// engine ran: RT throttling then holds it with the RT hogs.
    pub sched_deadline: bool,
    /// xdp backend: the kernel stops answering for the engine once the
    /// responder's heartbeat is older than this (default 1000 ms; 0: off).
    /// A stopped engine (SIGSTOP, a debugger) then goes Down at the peer
    /// after this plus the detection time, instead of never.
    pub dead_man_ms: u32,
    /// Where a handover (SIGUSR2) pins the fast path for the next process:
    /// a folder on a BPF filesystem, made by linecardd (default
    /// `/sys/fs/bpf/linecardd-HASH`, HASH of the control socket's path).
    pub handover_dir: PathBuf,
    /// xdp backend: how long the kernel answers alone after a handover
    /// before the dead-man stops it, ms (default 10000): the next process
    /// must load its program (a second of verifier here, more on a busy
    /// CPU) and adopt within it.
    pub handover_window_ms: u32,
    /// `false` is the negative control only: a handover record is not
    /// adopted; its sessions are sent AdminDown and start afresh (the
    /// restart scenario's handover phases must fail with it).
    pub handover_adopt: bool,
    /// Where the OpenMetrics endpoint listens (`[engine] metrics =
    /// "127.0.0.1:9788"`, issue 41); `None` (the default): no endpoint.
    pub metrics: Option<std::net::SocketAddr>,
    /// How many sessions get gap histograms of their own at the endpoint
    /// (default 1024); the rest are summed per timer class.
    pub metrics_sessions: usize,
    /// FRR bfdd's dataplane listener (`bfdd --dplaneaddr ipv4:ADDR:PORT`):
    /// the engine connects and runs the sessions bfdd hands it.
    pub frr_dataplane: Option<std::net::SocketAddr>,
    /// The backend of the sessions FRR creates (default `xdp`).
    pub frr_backend: BackendKind,
    /// Hold mode: when bfdd goes away, its sessions stay Up on the wire
    /// this long for it to come back and re-add them (0: drop them at once,
    /// the protocol's own behaviour).
    pub frr_hold_seconds: u32,
    pub sessions: Vec<SessionSpec>,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct SessionSpec {
    pub peer: IpAddr,
    pub local: IpAddr,
    pub tx_interval_us: u32,
    pub rx_interval_us: u32,
    pub multiplier: u8,
    pub backend: BackendKind,
    pub interface: Option<String>,
    pub passive: bool,
    /// RFC 5883: UDP 4784, and the TTL check is this session's minimum
    /// instead of single-hop's 255.
    pub multihop: bool,
    /// Lowest TTL or hop limit accepted on a multihop session (default 254,
    /// FRR's); single-hop sessions require 255 (RFC 5881 section 5).
    pub min_ttl: u8,
    /// xdp backend: the fast path may answer this session while it is
    /// steady (default). `false` keeps its transmission in userspace, with
    /// validation and detection still in the kernel: one engine can then
    /// run the same load through both paths at once (issue 6's controlled
    /// experiment).
    pub offload: bool,
    /// The echo function (RFC 5880 6.4): our desired interval between
    /// echoes we originate, µs; `None`: we originate none. The interval
    /// used is the larger of this and the peer's Required Min Echo RX.
    pub echo_interval_us: Option<u32>,
    /// Required Min Echo RX we advertise, µs: non-zero only when we reflect
    /// the peer's echoes (the xdp backend's fast path does), since a peer
    /// may send echoes as soon as it sees it (RFC 5880 6.8.9).
    pub echo_rx_us: u32,
    /// Authentication (RFC 5880 section 6.7); `None`: none.
    pub auth: Option<AuthConfig>,
    /// Demand mode (RFC 5880 6.6): once both sides are Up we ask the peer
    /// to stop its periodic packets, and verify the path with a Poll
    /// Sequence every `demand_verify_us`. Served from userspace on every
    /// backend (the fast path answers RX-clocked, which Demand mode rules
    /// out).
    pub demand: bool,
    /// Between the end of one verification Poll and the start of the
    /// next, µs (default 1 s); 0: never, and nothing detects a dead peer.
    pub demand_verify_us: u32,
}

/// Where the engine answering on `control_socket` pins its fast path for
/// a handover unless `engine.handover_dir` says: one folder per engine
/// instance on the BPF filesystem, named by its socket (two engines never
/// share a socket), under the `linecardd-` prefix.
pub fn default_handover_dir(control_socket: &Path) -> PathBuf {
    // FNV-1a: stable across builds and processes, unlike std's hasher.
    let hash = control_socket
        .as_os_str()
        .as_encoded_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    PathBuf::from(format!("/sys/fs/bpf/linecardd-{hash:016x}"))
}

/// Default interval between Demand mode's verification Polls.
pub const DEFAULT_DEMAND_VERIFY_MS: i64 = 1000;

/// Default echo interval: FRR's (`echo transmit-interval`, 50 ms).
pub const DEFAULT_ECHO_INTERVAL_MS: i64 = 50;

/// FRR bfdd's default minimum TTL for multihop peers.
pub const DEFAULT_MULTIHOP_MIN_TTL: u8 = 254;

impl EngineConfig {
    /// How the xdp backend's responder thread asks to be scheduled.
    pub fn responder_scheduling(&self) -> crate::backend::rt::Timeliness {
        crate::backend::rt::Timeliness {
            deadline: self.sched_deadline.then_some(crate::backend::rt::TIMELY),
            priority: self.rt_priority,
            cpu: self.cpu,
        }
    }

    pub fn load(path: &Path) -> Result<Self, InputError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| InputError::Read {
            file: file.clone(),
            source,
        })?;
        Self::parse(&file, &text)
    }

    pub fn parse(file: &str, text: &str) -> Result<Self, InputError> {
        let raw: ConfigFile = toml::from_str(text).map_err(|e| InputError::Syntax {
            file: file.into(),
            message: e.to_string(),
        })?;
        let invalid = |key: &str, value: &dyn std::fmt::Display, why: &str| InputError::Invalid {
            file: file.into(),
            key: key.into(),
            value: value.to_string(),
            why: why.into(),
        };
        let rt_priority = raw.engine.rt_priority.unwrap_or(90);
        if !(1..=99).contains(&rt_priority) {
            return Err(invalid(
                "engine.rt_priority",
                &rt_priority,
                "SCHED_FIFO priorities are 1-99",
            ));
        }
        let cpu = match raw.engine.cpu {
            Some(c) if c < 0 => {
                return Err(invalid("engine.cpu", &c, "a CPU number is not negative"))
            }
            c => c.map(|c| c as usize),
        };
        let txtime_depth = raw.engine.txtime_depth.unwrap_or(1);
        if !(1..=64).contains(&txtime_depth) {
            return Err(invalid(
                "engine.txtime_depth",
                &txtime_depth,
                "must be 1 (one packet in flight) to 64",
            ));
        }
        let frr_dataplane = match raw.engine.frr_dataplane {
            None => None,
            Some(addr) => Some(addr.parse().map_err(|_| {
                invalid(
                    "engine.frr_dataplane",
                    &addr,
                    "must be ADDRESS:PORT, the TCP listener of `bfdd --dplaneaddr ipv4:ADDRESS:PORT` \
                     (bfdd 8.4.4's client mode is broken: bfdd listens, linecardd connects)",
                )
            })?),
        };
        let metrics = match raw.engine.metrics {
            None => None,
            Some(addr) => Some(addr.parse().map_err(|_| {
                invalid(
                    "engine.metrics",
                    &addr,
                    "must be ADDRESS:PORT for the OpenMetrics endpoint, e.g. 127.0.0.1:9788",
                )
            })?),
        };
        let metrics_sessions = raw.engine.metrics_sessions.unwrap_or(1024);
        if !(0..=65_536).contains(&metrics_sessions) {
            return Err(invalid(
                "engine.metrics_sessions",
                &metrics_sessions,
                "must be 0 to 65536: how many sessions get gap histograms of their own",
            ));
        }
        let frr_backend_name = raw.engine.frr_backend.as_deref().unwrap_or("xdp");
        let frr_backend: BackendKind = frr_backend_name.parse().map_err(|_| {
            invalid(
                "engine.frr_backend",
                &frr_backend_name,
                "must be one of naive, rt, deadline, txtime, xdp",
            )
        })?;
        let frr_hold_seconds = raw.engine.frr_hold_seconds.unwrap_or(0);
        if !(0..=3600).contains(&frr_hold_seconds) {
            return Err(invalid(
                "engine.frr_hold_seconds",
                &frr_hold_seconds,
                "must be 0 (no hold) to 3600",
            ));
        }
        let dead_man_ms = raw.engine.dead_man_ms.unwrap_or(1000);
        if dead_man_ms != 0 && !(20..=60_000).contains(&dead_man_ms) {
            return Err(invalid(
                "engine.dead_man_ms",
                &dead_man_ms,
                "must be 0 (off) or 20-60000: the heartbeat beats every quarter of it, at most every 100 ms",
            ));
        }
        let dead_man_ms = dead_man_ms as u32;
        let handover_window_ms = raw.engine.handover_window_ms.unwrap_or(10_000);
        if !(1_000..=600_000).contains(&handover_window_ms) {
            return Err(invalid(
                "engine.handover_window_ms",
                &handover_window_ms,
                "must be 1000-600000: the next process loads its program within it",
            ));
        }
        if frr_backend == BackendKind::Txtime {
            return Err(invalid(
                "engine.frr_backend",
                &frr_backend_name,
                "txtime needs an interface per session, which bfdd does not always send",
            ));
        }
        let sessions = raw
            .session
            .iter()
            .enumerate()
            .map(|(i, s)| {
                validate_session(s, &format!("session[{i}]"))
                    .map_err(|(k, v, w)| invalid(&k, &v, &w))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            rt_priority: rt_priority as i32,
            cpu,
            control_socket: raw
                .engine
                .control_socket
                .clone()
                .unwrap_or_else(|| DEFAULT_CONTROL_SOCKET.into()),
            txtime_depth: txtime_depth as usize,
            // Off only in a build with the deliberate regression compiled
            // in (Cargo.toml, `regress-xdp-replies`).
            xdp_replies: raw
                .engine
                .xdp_replies
                .unwrap_or(!cfg!(feature = "regress-xdp-replies")),
            xdp_own_clock: raw.engine.xdp_own_clock.unwrap_or(true),
            xdp_sign: raw.engine.xdp_sign.unwrap_or(true),
            xdp_sweep_fixed_period: raw.engine.xdp_sweep_fixed_period.unwrap_or(false),
            never_leave_init: raw.engine.never_leave_init.unwrap_or(false),
            verify_authentication: raw.engine.verify_authentication.unwrap_or(true),
            sched_deadline: raw.engine.sched_deadline.unwrap_or(true),
            dead_man_ms,
            handover_window_ms: handover_window_ms as u32,
            handover_adopt: raw.engine.handover_adopt.unwrap_or(true),
            handover_dir: match raw.engine.handover_dir {
                Some(dir) => dir,
                None => default_handover_dir(
                    raw.engine
                        .control_socket
                        .as_deref()
                        .unwrap_or(Path::new(DEFAULT_CONTROL_SOCKET)),
                ),
            },
            metrics,
            metrics_sessions: metrics_sessions as usize,
            frr_dataplane,
            frr_backend,
            frr_hold_seconds: frr_hold_seconds as u32,
            sessions,
        })
    }
}

/// Validates one session; the error is (key, value, why).
pub fn validate_session(
    s: &SessionSettings,
    prefix: &str,
) -> Result<SessionSpec, (String, String, String)> {
    let err = |key: &str, value: &dyn std::fmt::Display, why: &str| {
        (
            format!("{prefix}.{key}"),
            value.to_string(),
            why.to_string(),
        )
    };
    let peer: IpAddr = s
        .peer
        .parse()
        .map_err(|_| err("peer", &s.peer, "not an IP address"))?;
    let local: IpAddr = s
        .local
        .parse()
        .map_err(|_| err("local", &s.local, "not an IP address"))?;
    if peer.is_ipv4() != local.is_ipv4() {
        return Err(err(
            "local",
            &s.local,
            "must be the same address family as peer",
        ));
    }
    let timers = linecard_api::timers::Timers::from_ms(
        s.tx_interval_ms.unwrap_or(1000),
        s.rx_interval_ms.unwrap_or(1000),
        s.multiplier.unwrap_or(3),
    )
    .map_err(|e| err(e.key, &e.value, &e.why))?;
    let backend_name = s.backend.as_deref().unwrap_or("naive");
    let backend: BackendKind = backend_name.parse().map_err(|_| {
        err(
            "backend",
            &backend_name,
            "must be one of naive, rt, deadline, txtime, xdp",
        )
    })?;
    if matches!(backend, BackendKind::Xdp | BackendKind::Txtime) && s.interface.is_none() {
        return Err(err(
            "interface",
            &"(none)",
            &format!("the {backend} backend attaches to an interface: name it"),
        ));
    }
    let multihop = s.multihop.unwrap_or(false);
    let min_ttl =
        match (multihop, s.min_ttl) {
            (false, Some(ttl)) => return Err(err(
                "min_ttl",
                &ttl,
                "applies to multihop sessions only (single-hop requires 255, RFC 5881 section 5)",
            )),
            (false, None) => 255,
            (true, None) => DEFAULT_MULTIHOP_MIN_TTL,
            (true, Some(ttl @ 1..=255)) => ttl as u8,
            (true, Some(ttl)) => return Err(err("min_ttl", &ttl, "must be 1 to 255")),
        };
    if s.offload.is_some() && backend != BackendKind::Xdp {
        return Err(err(
            "offload",
            &s.offload.unwrap_or_default(),
            "applies to the xdp backend only (the others never offload)",
        ));
    }
    let echo = s.echo.unwrap_or(false);
    if echo && multihop {
        return Err(err(
            "echo",
            &true,
            "single-hop sessions only (RFC 5883 section 3: no echo over multiple hops)",
        ));
    }
    if echo && s.interface.is_none() {
        return Err(err(
            "echo",
            &true,
            "needs `interface`: echoes are sent to the peer's MAC on it",
        ));
    }
    if s.echo_interval_ms.is_some() && !echo {
        return Err(err(
            "echo_interval_ms",
            &s.echo_interval_ms.unwrap_or_default(),
            "applies with echo = true only",
        ));
    }
    let echo_interval_us = match s.echo_interval_ms {
        _ if !echo => None,
        None => Some(DEFAULT_ECHO_INTERVAL_MS as u32 * 1000),
        Some(ms) => Some(
            linecard_api::timers::interval_ms("echo_interval_ms", ms)
                .map_err(|e| err(e.key, &e.value, &e.why))?,
        ),
    };
    let demand = s.demand.unwrap_or(false);
    let demand_verify_us = match s.demand_verify_ms {
        Some(ms) if !demand => {
            return Err(err(
                "demand_verify_ms",
                &ms,
                "applies with demand = true only",
            ))
        }
        None => DEFAULT_DEMAND_VERIFY_MS as u32 * 1000,
        Some(ms @ 0..=3_600_000) => ms as u32 * 1000,
        Some(ms) => {
            return Err(err(
                "demand_verify_ms",
                &ms,
                "must be 0 (never verify) to 3600000",
            ))
        }
    };
    Ok(SessionSpec {
        peer,
        local,
        tx_interval_us: timers.tx_interval_us,
        rx_interval_us: timers.rx_interval_us,
        multiplier: timers.multiplier,
        backend,
        interface: s.interface.clone(),
        passive: s.passive.unwrap_or(false),
        multihop,
        min_ttl,
        offload: s.offload.unwrap_or(true),
        echo_interval_us,
        echo_rx_us: match echo_interval_us {
            Some(us) if backend == BackendKind::Xdp => us,
            _ => 0,
        },
        auth: s
            .auth
            .as_ref()
            .map(validate_auth)
            .transpose()
            .map_err(|(key, value, why)| err(&format!("auth.{key}"), &value, &why))?,
        demand,
        demand_verify_us: if demand { demand_verify_us } else { 0 },
    })
}

/// Validates `auth`; the error is (key under `auth`, value, why).
fn validate_auth(raw: &AuthSettings) -> Result<AuthConfig, (String, String, String)> {
    let err = |key: &str, value: &dyn std::fmt::Display, why: &str| {
        (key.to_string(), value.to_string(), why.to_string())
    };
    let auth_type = auth_type_named(&raw.kind).map_err(|why| err("type", &raw.kind, &why))?;
    let mut keys = Vec::new();
    for (i, key) in raw.keys.iter().enumerate() {
        let id = u8::try_from(key.id)
            .map_err(|_| err(&format!("keys[{i}].id"), &key.id, "must be 0 to 255"))?;
        keys.push(AuthKey {
            id,
            secret: key.secret.as_bytes().to_vec(),
        });
    }
    let send_key = match raw.send_key {
        None => keys.first().map_or(0, |k| k.id),
        Some(id) => u8::try_from(id).map_err(|_| err("send_key", &id, "must be 0 to 255"))?,
    };
    let construction = match raw.digest.as_deref() {
        None | Some("rfc5880") => Construction::Rfc5880,
        Some("frr-hmac-sha1") => Construction::FrrHmacSha1,
        Some(other) => {
            return Err(err(
                "digest",
                &other,
                "must be rfc5880 (RFC 5880 6.7.3-6.7.4, the default) or frr-hmac-sha1 \
                 (FRR bfdd's keyed SHA1: HMAC-SHA1 over the packet with the digest zeroed)",
            ))
        }
    };
    let config = AuthConfig {
        auth_type,
        keys,
        send_key,
        construction,
    };
    // The secret itself never goes into an error message.
    config
        .check()
        .map_err(|why| err("keys", &format!("({} keys)", raw.keys.len()), &why))?;
    Ok(config)
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
