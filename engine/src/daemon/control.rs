//! The control socket: one JSON request per connection, one JSON reply.
//!
//! `{"op":"list"}`, `{"op":"add","session":{...}}` (the keys of a
//! `[[session]]` table), `{"op":"remove","local":..,"peer":..}`,
//! `{"op":"set","local":..,"peer":..,"tx_interval_ms":..,"rx_interval_ms":..,"multiplier":..}`,
//! `{"op":"admin","local":..,"peer":..,"down":true}`, `{"op":"drops"}`,
//! `{"op":"reload"}` (the config file read again, as SIGHUP does),
//! `{"op":"readiness"}` (per session only what readiness needs: cheap at
//! thousands of sessions, where `list` is megabytes and a kernel read per
//! offloaded session).
//! Garbage gets `{"error": "..."}`; the daemon keeps running.

use super::Engine;
use crate::config::validate_session;
use crate::reload_plan::Retime;
use crate::session::table::SessionId;
use crate::session::Nanos;
use linecard_api::config::SessionSettings;
use linecard_api::control::{DemandStatus, KernelDigests, SessionReadiness, SessionStatus};

use linecard_api::timers::Timers;
use linecard_common::bfd::DropReason;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::IpAddr;
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::{Duration, Instant};

#[derive(Debug, Deserialize, Serialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    List,
    /// Re-read the config file (as SIGHUP does): `ReloadReport`.
    Reload,
    /// The first half of a take-over (`linecardd --take-over`): pin the
    /// maps for the next process and go on: `{"pinned": N, "format": F,
    /// "layout_version": L}`.
    PrepareHandover,
    /// Hand the sessions to the next process and exit (as SIGUSR2 does):
    /// `{"handed_over": N}`, or the reason it was refused.
    Handover,
    Readiness,
    Drops,
    Add {
        /// Boxed: a session's table is far larger than any other request.
        session: Box<SessionSettings>,
    },
    Remove {
        local: IpAddr,
        peer: IpAddr,
    },
    /// New timers (bounded as in the config file: `linecard_api::timers`).
    Set {
        local: IpAddr,
        peer: IpAddr,
        tx_interval_ms: u32,
        rx_interval_ms: u32,
        multiplier: u8,
    },
    Admin {
        local: IpAddr,
        peer: IpAddr,
        down: bool,
    },
    /// Key rollover (RFC 5880 6.7.1): send with another of the session's
    /// configured keys from the next packet on; all stay accepted.
    SendKey {
        local: IpAddr,
        peer: IpAddr,
        key_id: u8,
    },
}

/// One request line, parsed and its values checked (a session's keys as
/// the config file's, timers within `linecard_api::timers`) before the
/// engine acts on any of it: the error is the reply.
pub fn read_request(line: &[u8]) -> Result<Request, String> {
    let request: Request = serde_json::from_slice(line).map_err(|e| format!("bad request: {e}"))?;
    match &request {
        Request::Add { session } => {
            validate_session(session, "session")
                .map_err(|(k, v, why)| format!("{k} = {v}: {why}"))?;
        }
        Request::Set {
            tx_interval_ms,
            rx_interval_ms,
            multiplier,
            ..
        } => {
            Timers::from_ms(
                i64::from(*tx_interval_ms),
                i64::from(*rx_interval_ms),
                i64::from(*multiplier),
            )
            .map_err(|e| e.to_string())?;
        }
        _ => {}
    }
    Ok(request)
}

fn nonzero(counts: &[u64]) -> Vec<(DropReason, u64)> {
    DropReason::ALL
        .iter()
        .zip(counts)
        .filter(|(_, &n)| n > 0)
        .map(|(&r, &n)| (r, n))
        .collect()
}

impl Engine {
    pub fn readiness(&self) -> Vec<SessionReadiness> {
        self.table
            .ids()
            .filter_map(|id| self.table.get(id))
            .map(|(path, session, peer)| SessionReadiness {
                peer: path.peer,
                state: session.state(),
                polling: session.polling(),
                offloaded: peer.kernel.offloaded(),
                authenticated: session.auth().is_some(),
                demand_configured: session.config().demand,
                demand_active_at_peer: session.remote_demand_active(),
                placed: Some(
                    self.fast.is_none() || {
                        let view = super::offload::SessionView::of(
                            session,
                            super::allowed(&self.config, &peer.spec),
                        );
                        super::offload::placed(&view, &peer.kernel)
                    },
                ),
            })
            .collect()
    }

    pub fn statuses(&self) -> Vec<SessionStatus> {
        let now = self.now();
        self.table
            .ids()
            .filter_map(|id| self.status(id, now))
            .collect()
    }

    /// Session `id` as `ctl list` shows it, at `now`.
    fn status(&self, id: SessionId, now: Nanos) -> Option<SessionStatus> {
        let (path, session, peer) = self.table.get(id)?;
        Some({
            let (desired, required) = session.advertised();
            // The kernel's own view, fresh: the loop may not have
            // passed since.
            let (own_clock_requests, last_own_clock) = match (&self.fast, peer.kernel.offloaded()) {
                (Some(fast), true) => fast.state(id as u32).map_or(
                    (peer.own_clock_requests, peer.last_own_clock),
                    |state| {
                        (
                            state.clock_tx_requests,
                            (state.clock_tx_ns != 0)
                                .then(|| state.clock_tx_ns as i64 - self.epoch_mono_ns),
                        )
                    },
                ),
                _ => (peer.own_clock_requests, peer.last_own_clock),
            };
            let kernel_state = self.fast.as_ref().and_then(|f| f.state(id as u32).ok());
            // Recent: within the last three intervals.
            let own_clock_recent =
                last_own_clock.is_some_and(|t| now - t < 3 * session.tx_interval_ns());
            let clock = match (peer.kernel.offloaded(), own_clock_recent) {
                (false, _) => "own",
                (true, false) => "peer",
                (true, true) => "own: the peer stalled or is RX-clocked too",
            };
            SessionStatus {
                local: path.local,
                peer: path.peer,
                backend: peer.spec.backend.to_string(),
                source_port: peer.tx.source_port,
                state: session.state(),
                diag: session.local_diag(),
                local_discr: session.config().local_discr,
                detect_mult: session.config().detect_mult,
                desired_min_tx_us: desired,
                required_min_rx_us: required,
                polling: session.polling(),
                demand: DemandStatus {
                    configured: session.config().demand,
                    verify_interval_us: session.config().demand_verify_us,
                    active_here: session.local_demand_active(),
                    active_at_peer: session.remote_demand_active(),
                },
                detection_time_us: session.detection_time_ns().map(|n| n / 1000),
                remote: *session.remote(),
                counters: session.counters(),
                drops: nonzero(&peer.drops),
                last_transition: peer.last_transition,
                offloaded: peer.kernel.offloaded(),
                last_transition_unix_ns: peer.last_transition.map(|t| self.unix_ns(t.at_ns)),
                kernel_detection_unix_ns: peer.kernel_detection_unix_ns,
                clock: clock.to_string(),
                own_clock_requests,
                required_min_echo_rx_us: session.config().required_min_echo_rx_us,
                echo: peer.spec.echo_interval_us.and_then(|_| {
                    self.echo
                        .as_ref()
                        .and_then(|e| e.status(session.config().local_discr))
                }),
                auth: session.auth().map(|a| a.status()),
                kernel_digests: match (&self.fast, session.auth()) {
                    (Some(fast), Some(_)) => {
                        fast.verify_guard(id as u32).ok().map(|g| KernelDigests {
                            computed: g.computed,
                            expected_hits: g.expected_hits,
                        })
                    }
                    _ => None,
                },
                multihop: path.multihop,
                interface: peer.spec.interface.clone(),
                passive: peer.spec.passive,
                min_ttl: peer.spec.min_ttl,
                ups: session.telemetry().ups,
                downs: session.telemetry().downs.iter().sum(),
                kernel_packets_in: kernel_state.map(|k| k.rx_packets),
                kernel_packets_out: kernel_state.map(|k| k.tx_packets),
            }
        })
    }

    /// Builds up to [`LIST_SESSIONS_PER_PASS`] more sessions of a `list`
    /// reply in progress: at 4096 sessions the whole reply (a kernel read
    /// per offloaded session, megabytes of JSON) would hold the loop for
    /// milliseconds in one go. Sessions added behind the cursor meanwhile
    /// are in the next `list`.
    fn continue_list(&self, list: &mut ListInProgress) -> bool {
        let now = self.now();
        let ids: Vec<SessionId> = self
            .table
            .ids()
            .filter(|&id| id >= list.next_id)
            .take(LIST_SESSIONS_PER_PASS)
            .collect();
        for &id in &ids {
            if let Some(status) = self.status(id, now) {
                if list.listed > 0 {
                    list.bytes.push(b',');
                }
                // A SessionStatus always serializes.
                let _ = serde_json::to_writer(&mut list.bytes, &status);
                list.listed += 1;
            }
        }
        match ids.last() {
            Some(&last) if ids.len() == LIST_SESSIONS_PER_PASS => {
                list.next_id = last + 1;
                false
            }
            _ => {
                list.bytes.extend_from_slice(b"]}\n");
                true
            }
        }
    }

    fn respond(&mut self, request: Request) -> serde_json::Value {
        let now = self.now();
        // A request may change any session: the next pass sees them all.
        self.full_pass_wanted = true;
        let missing = |local: IpAddr, peer: IpAddr| serde_json::json!({ "error": format!("no session {local} -> {peer}") });
        match request {
            Request::List => serde_json::json!({ "sessions": self.statuses() }),
            Request::Reload => serde_json::json!(self.reload()),
            Request::PrepareHandover => match self.prepare_handover() {
                Ok(reply) => reply,
                Err(e) => serde_json::json!({ "error": format!("handover refused: {e:#}") }),
            },
            Request::Handover => match self.hand_over() {
                Ok(n) => {
                    self.handed_over = true;
                    serde_json::json!({ "handed_over": n })
                }
                Err(e) => serde_json::json!({ "error": format!("handover refused: {e:#}") }),
            },
            Request::Readiness => serde_json::json!({ "sessions": self.readiness() }),
            Request::Drops => {
                serde_json::json!({ "drops": nonzero(&self.drops), "fast_path": self.fast_path_counters() })
            }
            Request::Add { session } => match validate_session(&session, "session") {
                Err((key, value, why)) => {
                    serde_json::json!({ "error": format!("{key} = {value}: {why}") })
                }
                Ok(spec) => match self.add_session(spec) {
                    Ok(_) => serde_json::json!({ "ok": true }),
                    Err(e) => serde_json::json!({ "error": format!("{e:#}") }),
                },
            },
            Request::Remove { local, peer } => match self.find(local, peer) {
                None => missing(local, peer),
                Some(id) => {
                    self.remove_session(id, now);
                    serde_json::json!({ "ok": true })
                }
            },
            Request::Set {
                local,
                peer,
                tx_interval_ms,
                rx_interval_ms,
                multiplier,
            } => {
                // The config file's bounds, checked before any arithmetic:
                // a refused request changes nothing.
                let timers = match Timers::from_ms(
                    i64::from(tx_interval_ms),
                    i64::from(rx_interval_ms),
                    i64::from(multiplier),
                ) {
                    Ok(timers) => timers,
                    Err(e) => return serde_json::json!({ "error": e.to_string() }),
                };
                match self.find(local, peer) {
                    None => missing(local, peer),
                    Some(id) => {
                        // RFC 5880 6.8.3: through a Poll Sequence.
                        self.retime(
                            id,
                            Retime {
                                tx_interval_us: timers.tx_interval_us,
                                rx_interval_us: timers.rx_interval_us,
                                multiplier: timers.multiplier,
                            },
                            now,
                        );
                        serde_json::json!({ "ok": true })
                    }
                }
            }
            Request::SendKey {
                local,
                peer,
                key_id,
            } => match self.find(local, peer) {
                None => missing(local, peer),
                Some(id) => match self.send_with_key(id, key_id) {
                    Ok(()) => serde_json::json!({ "ok": true }),
                    Err(why) => serde_json::json!({ "error": why }),
                },
            },
            Request::Admin { local, peer, down } => match self.find(local, peer) {
                None => missing(local, peer),
                Some(id) => {
                    let (_, session, p) = self.table.get_mut(id).expect("found just above");
                    if let Some(t) = session.set_admin_down(now, down) {
                        p.last_transition = Some(t);
                        super::log_transition(&p.spec, &t);
                    }
                    serde_json::json!({ "ok": true })
                }
            },
        }
    }

    /// Answers the connections waiting on the control socket.
    /// Accepts control connections and answers those whose request line is
    /// complete. Never blocks: a client that is slow to write its line waits
    /// in `pending` (the sessions' timers matter more), and one that has not
    /// finished within a second gets an error.
    pub(super) fn serve_control(&mut self) {
        while let Ok((mut stream, _)) = self.control.accept() {
            if !peer_allowed(&stream) {
                let _ = stream.write_all(
                    b"{\"error\":\"not allowed: linecardd answers root and its own user\"}\n",
                );
                continue;
            }
            if stream.set_nonblocking(true).is_ok() {
                self.pending.push(PendingClient {
                    stream,
                    request: Vec::new(),
                    since: Instant::now(),
                    reply: None,
                    list: None,
                });
            }
        }
        // Lists in progress: a slice each per pass.
        for i in 0..self.pending.len() {
            let Some(mut list) = self.pending[i].list.take() else {
                continue;
            };
            if self.continue_list(&mut list) {
                self.pending[i].reply = Some((list.bytes, 0));
                self.pending[i].since = Instant::now();
            } else {
                self.pending[i].list = Some(list);
            }
        }
        let mut i = 0;
        while i < self.pending.len() {
            let client = &mut self.pending[i];
            if client.list.is_some() {
                i += 1;
                continue;
            }
            if client.reply.is_some() {
                if client.flush() {
                    self.pending.swap_remove(i);
                } else {
                    i += 1;
                }
                continue;
            }
            let mut chunk = [0u8; 4096];
            let mut closed = false;
            loop {
                match client.stream.read(&mut chunk) {
                    Ok(0) => {
                        closed = true;
                        break;
                    }
                    Ok(n) => client.request.extend_from_slice(&chunk[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(_) => {
                        closed = true;
                        break;
                    }
                }
                if client.request.len() > MAX_REQUEST_BYTES {
                    break;
                }
            }
            let line_end = client.request.iter().position(|&b| b == b'\n');
            let expired = client.since.elapsed() > Duration::from_secs(1);
            if line_end.is_none()
                && !closed
                && !expired
                && client.request.len() <= MAX_REQUEST_BYTES
            {
                i += 1;
                continue;
            }
            let mut client = self.pending.swap_remove(i);
            let reply = match line_end {
                Some(end) => match read_request(&client.request[..end]) {
                    Ok(Request::List) => {
                        // Built a slice per pass (`continue_list`).
                        client.list = Some(ListInProgress {
                            bytes: b"{\"sessions\":[".to_vec(),
                            next_id: 0,
                            listed: 0,
                        });
                        self.pending.push(client);
                        continue;
                    }
                    Ok(request) => {
                        let handing_over = matches!(request, Request::Handover);
                        let reply = self.respond(request);
                        if handing_over && self.handed_over {
                            // The successor's connection: our responder
                            // runs until it closes (`handover.rs`).
                            self.successor = client.stream.try_clone().ok();
                        }
                        reply
                    }
                    Err(e) => serde_json::json!({ "error": e }),
                },
                None if client.request.is_empty() => {
                    serde_json::json!({ "error": "empty request" })
                }
                None if client.request.len() > MAX_REQUEST_BYTES => {
                    serde_json::json!({ "error": "request too long" })
                }
                None if expired => {
                    serde_json::json!({ "error": "request line not finished within 1 s" })
                }
                None => serde_json::json!({ "error": "request without a newline" }),
            };
            // Written without blocking, as the client reads: `list` for
            // 4096 sessions is megabytes, and a blocking write with a short
            // timeout truncated it (a client got 2324 bytes of JSON).
            let mut bytes = reply.to_string().into_bytes();
            bytes.push(b'\n');
            client.reply = Some((bytes, 0));
            client.since = Instant::now();
            if !client.flush() {
                self.pending.push(client);
            }
        }
    }

    /// Control clients still writing their request (false) or reading
    /// their reply (true), by descriptor.
    /// A `list` reply is being built a slice per pass.
    pub(super) fn building_a_list(&self) -> bool {
        self.pending.iter().any(|c| c.list.is_some())
    }

    pub(super) fn pending_fds(&self) -> impl Iterator<Item = (std::os::fd::RawFd, bool)> + '_ {
        self.pending.iter().map(|c| {
            (
                std::os::fd::AsRawFd::as_raw_fd(&c.stream),
                c.reply.is_some(),
            )
        })
    }
}

/// Opens the control socket at `path`, which is root's door into the
/// engine. Only a stale socket is ever removed there: a regular file, a
/// directory or a link is refused, never deleted. The socket is created
/// mode 0600 (the umask held around `bind`, so that it never exists with a
/// wider mode), and [`peer_allowed`] checks each client's credentials.
pub(super) fn open_socket(path: &std::path::Path) -> anyhow::Result<UnixListener> {
    use anyhow::{bail, Context};
    use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            if UnixStream::connect(path).is_ok() {
                bail!(
                    "another linecardd answers on {}; set engine.control_socket to run a second one",
                    path.display()
                );
            }
            std::fs::remove_file(path)
                .with_context(|| format!("removing stale control socket {}", path.display()))?;
        }
        Ok(meta) => bail!(
            "{} exists and is not a socket ({:?}): linecardd removes only a stale socket there; move it or set engine.control_socket",
            path.display(),
            meta.file_type()
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // The runtime directory, when no service manager made it: one
            // level only, private to this user and its group.
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                if !parent.exists() {
                    std::fs::DirBuilder::new()
                        .mode(0o750)
                        .create(parent)
                        .with_context(|| format!("making {}", parent.display()))?;
                }
            }
        }
        Err(e) => {
            return Err(e).with_context(|| format!("looking at {}", path.display()));
        }
    }
    // SAFETY: umask only swaps the process's file mode mask; restored
    // right after the bind, before any other thread starts.
    let previous = unsafe { libc::umask(0o177) };
    let bound = UnixListener::bind(path);
    // SAFETY: as above.
    unsafe { libc::umask(previous) };
    let listener = bound.with_context(|| format!("binding control socket {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("making {} mode 0600", path.display()))?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// A client may talk to the engine only as root or as the engine's own
/// user (SO_PEERCRED): the socket's mode says so too, this holds should
/// the mode be widened by hand.
fn peer_allowed(stream: &UnixStream) -> bool {
    let mut cred = libc::ucred {
        pid: 0,
        uid: u32::MAX,
        gid: u32::MAX,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `cred`, a live
    // ucred of that size.
    let rc = unsafe {
        libc::getsockopt(
            std::os::fd::AsRawFd::as_raw_fd(stream),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    // SAFETY: geteuid has no preconditions.
    rc == 0 && (cred.uid == 0 || cred.uid == unsafe { libc::geteuid() })
}

/// How long a client may take to read its reply before it is dropped.
const REPLY_READ_LIMIT: Duration = Duration::from_secs(10);

/// A control connection whose request line is not complete yet, or whose
/// reply is not all written.
pub(super) struct PendingClient {
    stream: UnixStream,
    request: Vec<u8>,
    /// Since the connection came, then since its reply was ready.
    since: Instant,
    /// The reply and how much of it the client has taken.
    reply: Option<(Vec<u8>, usize)>,
    /// A `list` reply still being built.
    list: Option<ListInProgress>,
}

/// A `list` reply built a slice per pass of the loop.
pub(super) struct ListInProgress {
    /// The JSON so far.
    bytes: Vec<u8>,
    /// The table index the next slice starts at.
    next_id: SessionId,
    listed: usize,
}

/// Sessions a `list` reply takes per pass of the loop: about 25 us each
/// in a debug build (4096 sessions in 0.1 s, measured here), so a slice
/// holds the loop some 1.6 ms there and far less in release.
const LIST_SESSIONS_PER_PASS: usize = 64;

impl PendingClient {
    /// Writes what the socket takes now; true when the client is done with
    /// (all written, gone, or too slow to read).
    fn flush(&mut self) -> bool {
        let Some((bytes, written)) = self.reply.as_mut() else {
            return true;
        };
        while *written < bytes.len() {
            match self.stream.write(&bytes[*written..]) {
                Ok(0) => return true,
                Ok(n) => *written += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    return self.since.elapsed() > REPLY_READ_LIMIT
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return true,
            }
        }
        true
    }
}

/// Longest request line accepted.
const MAX_REQUEST_BYTES: usize = 64 * 1024;

/// Client side: sends one request, returns the reply.
pub fn call(socket: &std::path::Path, request: &Request) -> anyhow::Result<serde_json::Value> {
    call_keeping(socket, request).map(|(reply, _)| reply)
}

/// [`call`], the connection kept open: the engine that handed over waits
/// on it until the successor closes it.
pub fn call_keeping(
    socket: &std::path::Path,
    request: &Request,
) -> anyhow::Result<(serde_json::Value, UnixStream)> {
    use anyhow::Context;
    let mut stream = UnixStream::connect(socket)
        .with_context(|| format!("connecting to {} (is linecardd running?)", socket.display()))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    // A refusal may come before the request is written (a client the
    // engine does not answer): its reply is read all the same.
    let sent = writeln!(stream, "{}", serde_json::to_string(request)?);
    let mut line = String::new();
    let read = BufReader::new(&stream).read_line(&mut line);
    if line.is_empty() {
        sent.context("sending the request")?;
        read.context("reading the reply")?;
    }
    let reply: serde_json::Value = serde_json::from_str(&line).context("the reply is not JSON")?;
    if let Some(error) = reply.get("error").and_then(|e| e.as_str()) {
        anyhow::bail!("linecardd refused: {error}");
    }
    Ok((reply, stream))
}
