//! What the scripted remote system saw and did, in order: the suite's
//! capture. Every check is a pure function of it (`checks.rs`), so the
//! judgement is tested with hand-built traces and can be rerun on a
//! recorded one.

use super::packet::Control;

/// The script's steps, in the order it runs them; each check reads the
/// events between its step's mark and the next.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// Silent but for discard probes: the DUT alone, not Up.
    NotUp,
    /// Down, Init, Up (RFC 5880 6.8.6).
    Handshake,
    /// Both at 3 x 50 ms, nothing changing: the DUT's periodic packets.
    Steady,
    /// Polls with nothing changed: each must get its Final.
    Polls,
    /// Malformed AdminDown packets beside the peer's good ones.
    Probes,
    /// Our Required Min RX raised to 200 ms by a Poll.
    RaisedMinRx,
    /// Lowered back to 50 ms by a Poll.
    LoweredMinRx,
    /// Required Min RX 0: no periodic packets, Finals still.
    ZeroMinRx,
    /// Back to 50 ms by a Poll, before the next step.
    RestoredMinRx,
    /// The DUT's operator raises its timers to 100 ms (its Poll, 6.8.3).
    DutSlower,
    /// And lowers them back to 50 ms.
    DutFaster,
    /// Our Desired Min TX raised to 300 ms by a Poll; we send that slowly.
    SlowerPeer,
    /// Detect Mult 3 -> 10 without a Poll, then silences the new
    /// multiplier covers and the old one does not.
    Multiplier,
    /// Desired Min TX back to 50 ms (Poll), then silence: detection.
    FasterPeerThenSilence,
    /// Up again after the detection.
    Rehandshake,
    /// We go AdminDown.
    AdminDown,
    End,
}

/// A malformed packet of the suite's, each breaking one rule the receiver
/// must discard by (RFC 5880 6.8.6, RFC 5881 5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Probe {
    /// State Init with Your Discriminator 0, while the DUT is Down.
    YourDiscrZero,
    Version2,
    LengthBelowMinimum,
    LengthBeyondPayload,
    DetectMultZero,
    Multipoint,
    MyDiscrZero,
    YourDiscrUnknown,
    AuthBitWithoutAuth,
    Ttl254,
}

impl Probe {
    /// The probes sent while the session is Up, as AdminDown packets: a
    /// receiver that takes one goes Down with Diag 3 at once.
    pub const WHILE_UP: [Probe; 9] = [
        Probe::Version2,
        Probe::LengthBelowMinimum,
        Probe::LengthBeyondPayload,
        Probe::DetectMultZero,
        Probe::Multipoint,
        Probe::MyDiscrZero,
        Probe::YourDiscrUnknown,
        Probe::AuthBitWithoutAuth,
        Probe::Ttl254,
    ];

    pub fn name(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    }

    /// The section that says to discard it.
    pub fn section(self) -> &'static str {
        match self {
            Probe::Ttl254 => "RFC 5881 5",
            _ => "RFC 5880 6.8.6",
        }
    }

    /// The rule the probe breaks.
    pub fn rule(self) -> &'static str {
        match self {
            Probe::YourDiscrZero => "Your Discriminator zero and State neither Down nor AdminDown",
            Probe::Version2 => "version not 1",
            Probe::LengthBelowMinimum => "Length below the minimum (24)",
            Probe::LengthBeyondPayload => "Length beyond the UDP payload",
            Probe::DetectMultZero => "Detect Mult zero",
            Probe::Multipoint => "Multipoint (M) bit set",
            Probe::MyDiscrZero => "My Discriminator zero",
            Probe::YourDiscrUnknown => "Your Discriminator selects no session",
            Probe::AuthBitWithoutAuth => "A bit set, no authentication in use",
            Probe::Ttl254 => "TTL not 255 on an unauthenticated session",
        }
    }

    /// `good` broken the probe's way; the datagram's bytes and TTL.
    pub fn apply(self, mut good: Control) -> (Vec<u8>, u8) {
        let mut ttl = 255;
        match self {
            Probe::YourDiscrZero => good.your_discr = 0,
            Probe::Version2 => good.version = 2,
            Probe::LengthBelowMinimum => good.length = 20,
            Probe::LengthBeyondPayload => good.length = 48,
            Probe::DetectMultZero => good.detect_mult = 0,
            Probe::Multipoint => good.multipoint = true,
            Probe::MyDiscrZero => good.my_discr = 0,
            Probe::YourDiscrUnknown => good.your_discr = !good.your_discr,
            Probe::AuthBitWithoutAuth => good.authenticated = true,
            Probe::Ttl254 => ttl = 254,
        }
        (good.to_bytes().to_vec(), ttl)
    }
}

/// One thing that happened, at CLOCK_REALTIME ns (received packets: the
/// kernel's receive timestamp).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// A packet from the DUT, its IP TTL (Hop Limit) and UDP source port.
    Heard {
        at_ns: i64,
        packet: Control,
        ttl: u8,
        source_port: u16,
    },
    /// A packet of ours; `probe` if it was malformed on purpose.
    Sent {
        at_ns: i64,
        packet: Control,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        probe: Option<Probe>,
    },
    /// The script began a step.
    Began { at_ns: i64, step: Step },
    /// The script could not do what a step needs (e.g. no Final to its
    /// Poll): the step's checks cannot pass.
    Stuck { at_ns: i64, why: String },
}

impl Event {
    pub fn at_ns(&self) -> i64 {
        match self {
            Event::Heard { at_ns, .. }
            | Event::Sent { at_ns, .. }
            | Event::Began { at_ns, .. }
            | Event::Stuck { at_ns, .. } => *at_ns,
        }
    }
}

/// The whole record of one run of the script.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Trace {
    pub events: Vec<Event>,
}

impl Trace {
    /// The events of `step`: from its mark to the next mark.
    pub fn step(&self, step: Step) -> &[Event] {
        let Some(start) = self
            .events
            .iter()
            .position(|e| matches!(e, Event::Began { step: s, .. } if *s == step))
        else {
            return &[];
        };
        let end = self.events[start + 1..]
            .iter()
            .position(|e| matches!(e, Event::Began { .. }))
            .map_or(self.events.len(), |n| start + 1 + n);
        &self.events[start..end]
    }

    /// When `step` began, if it did.
    pub fn began(&self, step: Step) -> Option<i64> {
        self.step(step).first().map(Event::at_ns)
    }
}

/// The DUT's packets among `events`, with their arrival times.
pub fn heard(events: &[Event]) -> impl Iterator<Item = (i64, &Control)> {
    events.iter().filter_map(|e| match e {
        Event::Heard { at_ns, packet, .. } => Some((*at_ns, packet)),
        _ => None,
    })
}

/// Our packets among `events` (probes included).
pub fn sent(events: &[Event]) -> impl Iterator<Item = (i64, &Control, Option<Probe>)> {
    events.iter().filter_map(|e| match e {
        Event::Sent {
            at_ns,
            packet,
            probe,
        } => Some((*at_ns, packet, *probe)),
        _ => None,
    })
}

/// Why the script got stuck in `events`, if it did.
pub fn stuck(events: &[Event]) -> Option<&str> {
    events.iter().find_map(|e| match e {
        Event::Stuck { why, .. } => Some(why.as_str()),
        _ => None,
    })
}
