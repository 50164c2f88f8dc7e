//! Per-flow and per-session state, fed one packet at a time in timestamp
//! order. Memory grows with the number of flows, not with the capture.

use crate::decode::{self, Control, Datagram, Malformed, Service, State, MALFORMED_REASONS};
use crate::model::*;
use crate::stats::{GapStats, Timeline};
use rustc_hash::FxHashMap;
use std::collections::VecDeque;

/// RX-clocked replies follow the packet they answer within this window.
const REPLY_WINDOW_NS: i64 = 2_000_000;
/// An echo not back within this long is lost.
const ECHO_TIMEOUT_NS: i64 = 1_000_000_000;
/// Diagnostic 1: Control Detection Time Expired (RFC 5880 section 4.1).
const DIAG_DETECTION_EXPIRED: u8 = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct FlowKey {
    src: [u8; 16],
    dst: [u8; 16],
    src_port: u16,
    dst_port: u16,
}

/// A session: the two directions between one address pair on one service.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct SessionKey {
    low: [u8; 16],
    high: [u8; 16],
    service: Service,
}

#[derive(Default)]
struct Flow {
    /// Index into `sessions` and this flow's direction in it.
    session: usize,
    direction: usize,
    packets: u64,
    /// Lowest and highest TTL or hop limit seen (GTSM on the wire).
    ttl_min: u8,
    ttl_max: u8,
    first_ts: i64,
    last_ts: i64,
    last: Option<Control>,
    /// Whether this flow's last packet has been answered (reply latency).
    last_answered: bool,
    /// Gaps between two packets sent in Up, and all other gaps: each gap
    /// is recorded once; the distribution of all gaps is their union.
    up_gaps: GapStats,
    other_gaps: GapStats,
    flaps: Vec<FlapEvent>,
    over_budget: u64,
    budget_ns: Option<u64>,
    poll_pending_since: Option<i64>,
    polls: u64,
    poll_final: GapStats,
    /// Latency of this flow's packets answering the reverse flow's.
    replies: GapStats,
    detection: GapStats,
    out_of_order: u64,
    timeline: Option<Timeline>,
    auth: Option<FlowAuth>,
    last_auth_sequence: Option<u32>,
    /// Packets sent with D (asking the reverse flow for Demand mode).
    demand_packets: u64,
    /// Since when this flow has asked for Demand mode: the first of its
    /// run of packets sent in Up with D. `None` while it does not ask.
    demand_since: Option<i64>,
    /// The last time it stopped asking (a packet without D, or not Up,
    /// after packets with D).
    demand_ended_at: Option<i64>,
    /// This flow's silences that the reverse flow asked for (Demand mode):
    /// kept out of the gap distributions and the budget.
    demand_silences: GapStats,
    /// The legal interval for the gap this flow's last packet began (RFC
    /// 5880 6.8.7), ns; `None` where none applies.
    interval_ns: Option<u64>,
    interval: IntervalCheck,
}

/// Capture timestamps' slack on the interval's bounds.
const INTERVAL_SLACK_NS: u64 = 500_000;

impl IntervalCheck {
    fn record(&mut self, gap: u64, legal: u64, beside_final: bool) {
        let share = gap as f64 / legal as f64;
        let ms = gap as f64 / 1e6;
        self.gaps += 1;
        self.legal_ms = Some(legal as f64 / 1e6);
        self.shortest_share = Some(self.shortest_share.map_or(share, |s| s.min(share)));
        self.longest_share = Some(self.longest_share.map_or(share, |s| s.max(share)));
        self.shortest_ms = Some(self.shortest_ms.map_or(ms, |s| s.min(ms)));
        self.longest_ms = Some(self.longest_ms.map_or(ms, |s| s.max(ms)));
        if !beside_final && gap + INTERVAL_SLACK_NS < legal * 3 / 4 {
            self.too_soon += 1;
        }
        if gap > legal + INTERVAL_SLACK_NS {
            self.late += 1;
        }
    }
}

impl Flow {
    /// Counts a packet's authentication; sequence steps in capture order.
    fn note_auth(&mut self, seen: decode::AuthSeen) {
        let auth = self.auth.get_or_insert_with(FlowAuth::default);
        auth.packets += 1;
        for (list, value) in [
            (&mut auth.types, seen.auth_type),
            (&mut auth.key_ids, seen.key_id),
        ] {
            if let Err(at) = list.binary_search(&value) {
                list.insert(at, value);
            }
        }
        if let Some(sequence) = seen.sequence {
            match self
                .last_auth_sequence
                .map(|last| sequence.wrapping_sub(last))
            {
                None => {}
                Some(1) => auth.sequence_next += 1,
                Some(0) => auth.sequence_same += 1,
                Some(_) => auth.sequence_other += 1,
            }
            self.last_auth_sequence = Some(sequence);
        }
    }
}

#[derive(Default)]
struct Session {
    /// Current flow per direction: 0 = low -> high address, 1 = high -> low.
    flows: [Option<usize>; 2],
    /// Open downtime episode: (start, index into `episodes`).
    down_since: Option<(i64, usize)>,
    episodes: Vec<Downtime>,
}

#[derive(Default)]
struct EchoSender {
    sent: u64,
    returned: u64,
    lost: u64,
    rtt: GapStats,
    /// When this sender's previous echo first passed, and the gaps between
    /// its consecutive echoes: a stalled originator shows here even when
    /// every echo it did send came back.
    last_sent: Option<i64>,
    send_gap: GapStats,
}

/// One control packet as the analysis saw it, for per-packet exports.
#[derive(Clone, Copy, Debug)]
pub struct PacketRecord {
    pub ts_ns: i64,
    /// Index of the flow in the result's `flows`.
    pub flow: usize,
    pub control: Control,
    /// Gap since the flow's previous packet; `None` for its first.
    pub gap_ns: Option<u64>,
    /// The receiver asked for Demand mode during that gap (RFC 5880 6.6):
    /// the sender's silence was asked for, not a late packet.
    pub demand_silence: bool,
}

/// Receives every control packet of the whole-capture analysis.
pub trait PacketSink {
    fn control(&mut self, record: &PacketRecord);
}

/// Hands every record to each of several sinks (CSV and Parquet at once).
pub struct Tee<'a>(pub Vec<&'a mut dyn PacketSink>);

impl PacketSink for Tee<'_> {
    fn control(&mut self, record: &PacketRecord) {
        for sink in &mut self.0 {
            sink.control(record);
        }
    }
}

/// Streaming analysis of one time window.
pub struct Analyzer {
    window: Option<(i64, i64)>,
    keep_timeline: bool,
    flow_index: FxHashMap<FlowKey, usize>,
    keys: Vec<FlowKey>,
    services: Vec<Service>,
    flows: Vec<Flow>,
    session_index: FxHashMap<SessionKey, usize>,
    session_keys: Vec<SessionKey>,
    sessions: Vec<Session>,
    echo_senders: FxHashMap<[u8; 16], EchoSender>,
    echo_pending: FxHashMap<Vec<u8>, (i64, [u8; 16])>,
    echo_order: VecDeque<(i64, Vec<u8>)>,
    /// Echoes seen in the [`ECHO_TIMEOUT_NS`] before the window and not
    /// back by its start: their return inside the window is neither a
    /// departure nor a loss of it.
    echo_before: FxHashMap<Vec<u8>, ()>,
    pub integrity: Integrity,
}

impl Analyzer {
    /// `window`: only packets with `start <= ts < end` (ns) are analysed.
    /// `keep_timeline`: also keep each flow's bounded gap time series.
    pub fn new(window: Option<(i64, i64)>, keep_timeline: bool) -> Self {
        Self {
            window,
            keep_timeline,
            flow_index: FxHashMap::default(),
            keys: Vec::new(),
            services: Vec::new(),
            flows: Vec::new(),
            session_index: FxHashMap::default(),
            session_keys: Vec::new(),
            sessions: Vec::new(),
            echo_senders: FxHashMap::default(),
            echo_pending: FxHashMap::default(),
            echo_order: VecDeque::new(),
            echo_before: FxHashMap::default(),
            integrity: Integrity {
                malformed: MALFORMED_REASONS.iter().map(|&r| (r, 0)).collect(),
                ..Default::default()
            },
        }
    }

    pub fn in_window(&self, ts: i64) -> bool {
        self.window
            .is_none_or(|(start, end)| ts >= start && ts < end)
    }

    /// Whether `ts` falls in the echo timeout before the window: the
    /// echoes seen then may return inside it.
    pub fn before_window(&self, ts: i64) -> bool {
        self.window
            .is_some_and(|(start, _)| ts < start && ts >= start - ECHO_TIMEOUT_NS)
    }

    /// An echo seen just before the window ([`Analyzer::before_window`]):
    /// its first sighting departs, its second returns, as in the window,
    /// but nothing is counted. (A window that opened between an echo's
    /// departure and its return used to take the return for a departure
    /// never answered: a loss that the capture as a whole did not have.)
    pub fn echo_before_window(&mut self, d: &Datagram<'_>) {
        if d.service != Service::Echo {
            return;
        }
        if self.echo_before.remove(d.payload).is_none() {
            self.echo_before.insert(d.payload.to_vec(), ());
        }
    }

    pub fn malformed(&mut self, reason: Malformed) {
        self.integrity.malformed[reason.index()].1 += 1;
    }

    /// Feeds one BFD datagram captured at `ts` (ns since the epoch).
    pub fn datagram(
        &mut self,
        ts: i64,
        d: &Datagram<'_>,
        sink: Option<&mut (dyn PacketSink + '_)>,
    ) {
        if d.service == Service::Echo {
            self.echo(ts, d);
            return;
        }
        match decode::control(d.payload) {
            Ok(control) => {
                let (flow, gap_ns, demand_silence) = self.control(ts, d, control);
                if let Some(sink) = sink {
                    sink.control(&PacketRecord {
                        ts_ns: ts,
                        flow,
                        control,
                        gap_ns,
                        demand_silence,
                    });
                }
            }
            Err(reason) => self.malformed(reason),
        }
    }

    fn flow_id(&mut self, d: &Datagram<'_>) -> usize {
        let key = FlowKey {
            src: d.src,
            dst: d.dst,
            src_port: d.src_port,
            dst_port: d.dst_port,
        };
        if let Some(&id) = self.flow_index.get(&key) {
            return id;
        }
        let (low, high, direction) = if d.src <= d.dst {
            (d.src, d.dst, 0)
        } else {
            (d.dst, d.src, 1)
        };
        let skey = SessionKey {
            low,
            high,
            service: d.service,
        };
        let session = *self.session_index.entry(skey).or_insert_with(|| {
            self.session_keys.push(skey);
            self.sessions.push(Session::default());
            self.sessions.len() - 1
        });
        let id = self.flows.len();
        self.flow_index.insert(key, id);
        self.keys.push(key);
        self.services.push(d.service);
        let timeline = self.keep_timeline.then(Timeline::default);
        self.flows.push(Flow {
            session,
            direction,
            timeline,
            ..Flow::default()
        });
        id
    }

    /// Returns the flow index, the gap this packet closed, and whether
    /// the receiver had asked for that silence (Demand mode).
    fn control(&mut self, ts: i64, d: &Datagram<'_>, c: Control) -> (usize, Option<u64>, bool) {
        self.integrity.control_packets += 1;
        let f = self.flow_id(d);
        let (s, direction) = (self.flows[f].session, self.flows[f].direction);
        let session = &mut self.sessions[s];
        session.flows[direction] = Some(f);
        let reverse = session.flows[1 - direction];
        let (rev_last_ts, rev_required_rx, rev_answered, rev_demand) = match reverse {
            Some(r) => {
                let rf = &self.flows[r];
                (
                    Some(rf.last_ts),
                    rf.last.map(|l| l.required_min_rx_us),
                    rf.last_answered,
                    (rf.demand_since, rf.demand_ended_at),
                )
            }
            None => (None, None, true, (None, None)),
        };

        let flow = &mut self.flows[f];
        if let Some(seen) = c.auth {
            flow.note_auth(seen);
        }
        let mut gap_closed = None;
        let mut demand_silence = false;
        let first = flow.packets == 0;
        (flow.ttl_min, flow.ttl_max) = if first {
            (d.ttl, d.ttl)
        } else {
            (flow.ttl_min.min(d.ttl), flow.ttl_max.max(d.ttl))
        };
        if first {
            flow.first_ts = ts;
        } else if ts < flow.last_ts {
            // Out of order: no gap can be trusted; time keeps its maximum.
            flow.out_of_order += 1;
            self.integrity.out_of_order += 1;
            flow.packets += 1;
            return (f, None, false);
        } else {
            let (gap, asked) = close_gap(flow, ts, &c, rev_last_ts, rev_demand);
            gap_closed = Some(gap);
            demand_silence = asked;
        }

        // Poll sequence: the first P of a sequence starts the clock.
        if c.poll && flow.poll_pending_since.is_none() {
            flow.poll_pending_since = Some(ts);
            flow.polls += 1;
        }
        // Detect budget for the gap this packet starts: the sender's
        // multiplier times the larger of the receiver's Required Min RX (its
        // latest packet) and the sender's Desired Min TX.
        flow.budget_ns = rev_required_rx
            .map(|rx| u64::from(c.detect_mult) * u64::from(rx.max(c.desired_min_tx_us)) * 1_000);
        // The legal interval for that gap (6.8.7): none to a receiver
        // that asks for no periodic packets.
        flow.interval_ns = rev_required_rx
            .filter(|rx| *rx != 0)
            .map(|rx| u64::from(rx.max(c.desired_min_tx_us)) * 1_000);
        let prev_state = flow.last.map(|l| l.state);
        // 6.8.7: D only while both sides are Up; a D in any other state is
        // not a request anyone may honour.
        let asks = c.demand && c.state == State::Up;
        if c.demand {
            flow.demand_packets += 1;
        }
        match (asks, flow.demand_since) {
            (true, None) => flow.demand_since = Some(ts),
            (false, Some(_)) => {
                flow.demand_since = None;
                flow.demand_ended_at = Some(ts);
            }
            _ => {}
        }
        flow.last = Some(c);
        flow.last_ts = ts;
        flow.last_answered = false;
        flow.packets += 1;

        // Reply latency: this packet answers the reverse flow's last one if
        // it follows within the window and nothing answered it yet.
        if let (Some(r), Some(rev_ts)) = (reverse, rev_last_ts) {
            // Signed, and never negative: the capture's timestamps come from
            // several CPUs and may step back a hair between flows; a reply
            // before its question is no reply (it read 18446744073709 ms).
            if !rev_answered && (0..=REPLY_WINDOW_NS).contains(&(ts - rev_ts)) {
                self.flows[f].replies.record((ts - rev_ts) as u64, ts);
                self.flows[r].last_answered = true;
            }
            if c.final_ {
                if let Some(since) = self.flows[r].poll_pending_since.take() {
                    self.flows[f].poll_final.record((ts - since) as u64, ts);
                }
            }
        }

        self.note_downtime(s, ts, d, &c, prev_state);
        (f, gap_closed, demand_silence)
    }

    /// Downtime episodes of session `s`: from the first side leaving Up
    /// (`c` after `prev_state`) until both are Up again.
    fn note_downtime(
        &mut self,
        s: usize,
        ts: i64,
        d: &Datagram<'_>,
        c: &Control,
        prev_state: Option<State>,
    ) {
        let left_up = prev_state == Some(State::Up) && c.state != State::Up;
        let session = &mut self.sessions[s];
        if left_up && session.down_since.is_none() {
            session.episodes.push(Downtime {
                started_at_ns: ts,
                first_down_sender: decode::format_addr(&d.src),
                diag: c.diag,
                downtime_ms: None,
            });
            session.down_since = Some((ts, session.episodes.len() - 1));
        }
        if let Some((since, episode)) = session.down_since {
            let both_up = session.flows.iter().all(|f| {
                f.is_some_and(|f| self.flows[f].last.is_some_and(|l| l.state == State::Up))
            });
            if both_up {
                session.episodes[episode].downtime_ms = Some((ts - since) as f64 / 1e6);
                session.down_since = None;
            }
        }
    }

    /// Echo packets are self-addressed: the same bytes pass the observer on
    /// the way out and on the way back. First sighting: sent; second: back.
    fn echo(&mut self, ts: i64, d: &Datagram<'_>) {
        self.integrity.echo_packets += 1;
        while let Some((sent_at, _)) = self.echo_order.front() {
            if ts - sent_at <= ECHO_TIMEOUT_NS {
                break;
            }
            let (_, payload) = self
                .echo_order
                .pop_front()
                .expect("checked non-empty above");
            if let Some((_, sender)) = self.echo_pending.remove(&payload) {
                self.echo_senders.entry(sender).or_default().lost += 1;
            }
        }
        if self.echo_before.remove(d.payload).is_some() {
            // The return of an echo that left before the window.
            return;
        }
        match self.echo_pending.remove(d.payload) {
            Some((sent_at, sender)) => {
                let s = self.echo_senders.entry(sender).or_default();
                s.returned += 1;
                s.rtt.record((ts - sent_at).max(0) as u64, ts);
            }
            None => {
                let s = self.echo_senders.entry(d.src).or_default();
                s.sent += 1;
                if let Some(last) = s.last_sent.replace(ts) {
                    s.send_gap.record((ts - last).max(0) as u64, ts);
                }
                self.echo_pending.insert(d.payload.to_vec(), (ts, d.src));
                self.echo_order.push_back((ts, d.payload.to_vec()));
            }
        }
    }

    /// Builds the result model.
    pub fn finish(self) -> WindowResult {
        let flows: Vec<FlowResult> = self
            .flows
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let key = &self.keys[i];
                let last = f.last;
                let all_gaps = GapStats::merged(&f.up_gaps, &f.other_gaps);
                FlowResult {
                    src: decode::format_addr(&key.src),
                    dst: decode::format_addr(&key.dst),
                    src_port: key.src_port,
                    dst_port: key.dst_port,
                    service: self.services[i],
                    packets: f.packets,
                    ttl_min: f.ttl_min,
                    ttl_max: f.ttl_max,
                    first_ts: f.first_ts as f64 / 1e9,
                    last_ts: f.last_ts as f64 / 1e9,
                    first_ts_ns: f.first_ts,
                    last_ts_ns: f.last_ts,
                    gap_ms: all_gaps.summary(),
                    gap_ccdf: all_gaps.ccdf(),
                    gap_timeline: f
                        .timeline
                        .as_ref()
                        .map(Timeline::points)
                        .unwrap_or_default(),
                    up_gap_ms: f.up_gaps.summary(),
                    flaps: f.flaps.len() as u64,
                    flap_events: f.flaps.clone(),
                    over_budget: f.over_budget,
                    budget_ms: f.budget_ns.map(|b| b as f64 / 1e6),
                    polls: f.polls,
                    poll_final_ms: f.poll_final.summary(),
                    reply_latency_ms: f.replies.summary(),
                    detection_latency_ms: f.detection.summary(),
                    out_of_order: f.out_of_order,
                    last_state: last.map(|l| l.state),
                    detect_mult: last.map(|l| l.detect_mult),
                    desired_min_tx_ms: last.map(|l| f64::from(l.desired_min_tx_us) / 1e3),
                    required_min_rx_ms: last.map(|l| f64::from(l.required_min_rx_us) / 1e3),
                    auth: f.auth.clone(),
                    demand_packets: f.demand_packets,
                    demand_silence_ms: f.demand_silences.summary(),
                    interval: f.interval.clone(),
                }
            })
            .collect();
        let sessions: Vec<SessionResult> = self
            .session_keys
            .iter()
            .enumerate()
            .map(|(index, key)| {
                let s = &self.sessions[index];
                let flow_ids: Vec<usize> = self
                    .flows
                    .iter()
                    .enumerate()
                    .filter(|(_, f)| f.session == index)
                    .map(|(i, _)| i)
                    .collect();
                let max_gap_ms = flow_ids
                    .iter()
                    .map(|&i| flows[i].gap_ms.max)
                    .fold(0.0, f64::max);
                SessionResult {
                    a: decode::format_addr(&key.low),
                    b: decode::format_addr(&key.high),
                    service: key.service,
                    flows: flow_ids,
                    flaps: s.episodes.len() as u64,
                    downtimes: s.episodes.clone(),
                    max_gap_ms,
                }
            })
            .collect();
        let mut echo: Vec<EchoResult> = self
            .echo_senders
            .iter()
            .map(|(addr, s)| EchoResult {
                sender: decode::format_addr(addr),
                sent: s.sent,
                returned: s.returned,
                lost: s.lost,
                // Sent less than the timeout before the window closed: its
                // return may lie beyond it, so it is neither.
                pending: self
                    .echo_pending
                    .values()
                    .filter(|(_, a)| a == addr)
                    .count() as u64,
                rtt_ms: s.rtt.summary(),
                send_gap_ms: s.send_gap.summary(),
            })
            .collect();
        echo.sort_by(|a, b| a.sender.cmp(&b.sender));
        let mut maxima = GapStats::default();
        for s in &sessions {
            maxima.record((s.max_gap_ms * 1e6) as u64, 0);
        }
        WindowResult {
            flows,
            sessions,
            echo,
            per_session_max_gap_ms: maxima.summary(),
            integrity: self.integrity,
        }
    }
}

/// The gap `c` closes on `flow` at `ts` (in order): recorded in the
/// distribution it belongs to (Up to Up, other, or a silence Demand mode
/// asked for), held against the detect budget, and a flap when `c` leaves
/// Up. Returns the gap and whether the receiver had asked for it.
fn close_gap(
    flow: &mut Flow,
    ts: i64,
    c: &Control,
    rev_last_ts: Option<i64>,
    rev_demand: (Option<i64>, Option<i64>),
) -> (u64, bool) {
    let gap = (ts - flow.last_ts) as u64;
    if let Some(t) = flow.timeline.as_mut() {
        t.record(ts, gap);
    }
    let prev = flow.last.expect("a flow with packets has a last packet");
    // Demand mode (RFC 5880 6.6, 6.8.7): a sender in Up whose
    // receiver asked for it during the gap (asks still, or stopped
    // after the gap began) sends nothing periodically. The silence
    // goes into its own distribution; if the receiver stopped
    // asking, the time from then on is an ordinary gap: periodic
    // packets were due again.
    let (rev_since, rev_ended) = rev_demand;
    let asked = prev.state == State::Up
        && (rev_since.is_some_and(|since| since <= ts)
            || rev_ended.is_some_and(|end| end > flow.last_ts));
    let judged = match (asked, rev_since, rev_ended) {
        (false, ..) => Some(gap),
        (true, Some(_), _) => None,
        (true, None, Some(end)) => Some((ts - end.max(flow.last_ts)) as u64),
        (true, None, None) => unreachable!("asked implies a start or an end"),
    };
    if asked {
        flow.demand_silences.record(gap, ts);
    }
    if let Some(gap) = judged {
        if prev.state == State::Up && c.state == State::Up {
            flow.up_gaps.record(gap, ts);
            if let (Some(legal), false) = (flow.interval_ns, asked) {
                flow.interval.record(gap, legal, prev.final_ || c.final_);
            }
        } else {
            flow.other_gaps.record(gap, ts);
        }
        // The budget in force while this gap elapsed was set when
        // the gap began (the receiver may advertise slow timers once
        // it has declared us down, which must not excuse the gap
        // that did it).
        if let Some(budget) = flow.budget_ns {
            if gap > budget {
                flow.over_budget += 1;
            }
        }
    }
    if prev.state == State::Up && c.state != State::Up {
        let detection_ms = (c.diag == DIAG_DETECTION_EXPIRED)
            .then_some(rev_last_ts)
            .flatten()
            .map(|rev_ts| (ts - rev_ts) as f64 / 1e6);
        if let Some(ms) = detection_ms {
            flow.detection.record((ms * 1e6) as u64, ts);
        }
        flow.flaps.push(FlapEvent {
            at_ns: ts,
            to_state: c.state,
            diag: c.diag,
            gap_before_ms: gap as f64 / 1e6,
            detection_latency_ms: detection_ms,
        });
    }
    (gap, asked)
}
