//! `linecard bench xdp`: the fast path's cost per packet in the kernel
//! (BPF_PROG_TEST_RUN, mean over many runs) for a reply, a pass to
//! userspace, every drop reason and the verification of every
//! authentication type, beside the reference's figures and beside the
//! same verification in userspace (the engine's `Auth::verify`).

use anyhow::{Context, Result};
use aya::maps::{HashMap, MapData};
use aya::programs::Xdp;
use linecard_api::UserspaceVerifyCost;
use linecard_bpf_objects::{craft, test_run};
use linecard_common::bfd::{auth_type, AuthKeyRef, AuthSecret, SessionConfig};
use linecard_common::names;
use linecard_common::verify::VerifyGuard;
use serde::Serialize;

/// The reference XDP engine's measured costs (docs/measurement.md, "Cost").
pub const REFERENCE_REPLY_NS: u32 = 701;
pub const GOAL_REPLY_NS: u32 = 250;

#[derive(Debug, Serialize)]
pub struct XdpBench {
    pub repeat: u32,
    /// Instructions the kernel's verifier processed loading `lc_bfd`
    /// (`bpf_prog_info.verified_insns`, kernel 5.16+): how close a change
    /// of the fast path brings it to the verifier's limit of one million.
    pub verified_instructions: Option<u32>,
    pub rows: Vec<XdpRow>,
    /// The same packets verified by the engine in userspace.
    pub userspace_auth: Vec<UserspaceVerifyCost>,
    pub reference_reply_ns: u32,
    pub goal_reply_ns: u32,
}

#[derive(Debug, Serialize)]
pub struct XdpRow {
    pub case: String,
    /// `xdp_action` the program returned.
    pub action: u32,
    /// Median over the rounds of the kernel's mean ns per run.
    pub ns_per_packet: u32,
    /// How it was measured: a frame the program rewrites cannot be run
    /// repeatedly in place (the second run would see our reply), so those
    /// cases are single runs, sampled many times.
    pub method: String,
}

/// Single-run samples for cases that rewrite the frame.
const SINGLE_RUN_SAMPLES: usize = 20_001;

const ROUNDS: usize = 5;
const XDP_PASS: u32 = 2;
const XDP_TX: u32 = 3;

pub fn run(repeat: u32) -> Result<XdpBench> {
    crate::sys::require_root("linecard bench xdp")?;
    let mut bpf = linecard_bpf_objects::load()?;
    let program: &mut Xdp = bpf
        .program_mut(names::BFD_PROGRAM)
        .context("no lc_bfd program")?
        .try_into()?;
    program.load().context("loading lc_bfd")?;
    let verified_instructions = program.info()?.verified_instruction_count();
    let mut sessions: HashMap<&mut MapData, u32, linecard_common::bfd::SessionConfig> =
        HashMap::try_from(
            bpf.map_mut(names::SESSIONS_MAP)
                .context("no sessions map")?,
        )?;
    sessions.insert(craft::OUR_DISCR, craft::session(true), 0)?;
    // The same session over IPv6, under a discriminator and slot of its own.
    let v6_discr = craft::OUR_DISCR + 1;
    sessions.insert(
        v6_discr,
        linecard_common::bfd::SessionConfig {
            slot: craft::SLOT + 1,
            ..craft::session6(true)
        },
        0,
    )?;
    let auth_cases = install_authenticated_sessions(&mut bpf)?;
    let states: aya::maps::Array<MapData, linecard_common::bfd::SessionState> =
        aya::maps::Array::try_from(bpf.take_map(names::STATE_MAP).context("no state map")?)?;
    let mut forget_our_last_reply = forgetting(states);
    let mut guards: aya::maps::Array<MapData, VerifyGuard> =
        aya::maps::Array::try_from(bpf.take_map(names::VERIFY_MAP).context("no verify map")?)?;
    // The authenticated sessions' digest budgets and expected digests, as
    // a case needs them (`linecard_common::verify`).
    let mut prepare_guards = |setup: GuardSetup| -> Result<()> {
        let guard = match setup {
            GuardSetup::AsLeft => return Ok(()),
            GuardSetup::Fresh => VerifyGuard::default(),
            GuardSetup::Spent => VerifyGuard {
                // No credit, and none accruing for an hour.
                credit_ns: 0,
                credited_at_ns: test_run::monotonic_ns() + 3_600_000_000_000,
                ..VerifyGuard::default()
            },
        };
        for (kind, _) in AUTH_TYPES {
            for slot in [auth_slot(kind), signed_slot(kind)] {
                guards.set(slot, guard, 0)?;
            }
        }
        Ok(())
    };
    let program: &Xdp = bpf
        .program(names::BFD_PROGRAM)
        .context("lc_bfd in the object")?
        .try_into()?;
    // The meticulous replay case needs its window known: one genuine
    // packet first (its lapse is an hour away: see the sessions).
    let accepted = test_run::run(
        program,
        &auth_frame(auth_type::METICULOUS_KEYED_SHA1, 100),
        1,
    )?;
    anyhow::ensure!(
        accepted.action == XDP_PASS,
        "a genuine meticulous SHA1 packet was not passed ({})",
        accepted.action
    );
    let cases = plain_cases(v6_discr).into_iter().chain(auth_cases);
    let mut rows = Vec::new();
    for (case, frame, setup) in cases {
        forget_our_last_reply()?;
        prepare_guards(setup)?;
        let first = test_run::run(program, &frame, 1)
            .with_context(|| format!("BPF_PROG_TEST_RUN for {case}"))?;
        // A case that needs a fresh guard each run is a single run too.
        let rewrites = first.action == XDP_TX || setup == GuardSetup::Fresh;
        let (rounds, runs) = if rewrites {
            (SINGLE_RUN_SAMPLES, 1)
        } else {
            (ROUNDS, repeat)
        };
        let mut samples = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            if rewrites {
                forget_our_last_reply()?;
            }
            prepare_guards(setup)?;
            let out = test_run::run(program, &frame, runs)?;
            anyhow::ensure!(
                out.action == first.action,
                "{case}: verdict changed between runs ({} then {})",
                first.action,
                out.action
            );
            samples.push(out.mean_ns);
        }
        samples.sort_unstable();
        let method = if rewrites {
            format!("median of {rounds} single runs")
        } else {
            format!("median of {rounds} x {runs} runs")
        };
        rows.push(XdpRow {
            case,
            action: first.action,
            ns_per_packet: samples[rounds / 2],
            method,
        });
    }
    rows.push(reply_without_gaps()?);
    Ok(XdpBench {
        repeat,
        verified_instructions,
        rows,
        userspace_auth: userspace_auth(repeat)?,
        reference_reply_ns: REFERENCE_REPLY_NS,
        goal_reply_ns: GOAL_REPLY_NS,
    })
}

/// Our last reply, pushed an age into the past before each replying run:
/// the fast path hears, not answers, a packet that follows its own sooner
/// than RFC 5880 6.8.7 allows, and the runs follow each other by
/// microseconds. Not forgotten (0): then the reply would record no
/// transmit gap, and the bench would not price it.
fn forgetting(
    mut states: aya::maps::Array<MapData, linecard_common::bfd::SessionState>,
) -> impl FnMut() -> Result<()> {
    move || {
        for slot in 0..craft::SLOT + 0x30 {
            let state = states.get(&slot, 0)?;
            if state.last_tx_ns > 1 {
                let long_ago = linecard_common::bfd::SessionState {
                    last_tx_ns: 1,
                    ..state
                };
                states.set(slot, long_ago, 0)?;
            }
        }
        Ok(())
    }
}

/// The plain reply again, on the program loaded with
/// `names::NO_GAPS_GLOBAL` (no gap recorded), measured as the first row
/// is: the gap histograms' price is the difference, in one run.
fn reply_without_gaps() -> Result<XdpRow> {
    let switches = linecard_bpf_objects::Switches {
        no_gaps: true,
        ..Default::default()
    };
    let mut bpf = linecard_bpf_objects::load_with(switches)?;
    let program: &mut Xdp = bpf
        .program_mut(names::BFD_PROGRAM)
        .context("no lc_bfd program")?
        .try_into()?;
    program.load().context("loading lc_bfd without gaps")?;
    let mut sessions: HashMap<&mut MapData, u32, SessionConfig> = HashMap::try_from(
        bpf.map_mut(names::SESSIONS_MAP)
            .context("no sessions map")?,
    )?;
    sessions.insert(craft::OUR_DISCR, craft::session(true), 0)?;
    let states =
        aya::maps::Array::try_from(bpf.take_map(names::STATE_MAP).context("no state map")?)?;
    let mut forget_our_last_reply = forgetting(states);
    let program: &Xdp = bpf
        .program(names::BFD_PROGRAM)
        .context("lc_bfd in the object")?
        .try_into()?;
    let frame = craft::frame(255, &craft::peer_up());
    let mut samples = Vec::with_capacity(SINGLE_RUN_SAMPLES);
    for _ in 0..SINGLE_RUN_SAMPLES {
        forget_our_last_reply()?;
        let out = test_run::run(program, &frame, 1)?;
        anyhow::ensure!(
            out.action == XDP_TX,
            "no reply without gaps ({})",
            out.action
        );
        samples.push(out.mean_ns);
    }
    samples.sort_unstable();
    Ok(XdpRow {
        case: "reply (Up, XDP_TX), no gap recorded (LC_NO_GAPS)".into(),
        action: XDP_TX,
        ns_per_packet: samples[SINGLE_RUN_SAMPLES / 2],
        method: format!("median of {SINGLE_RUN_SAMPLES} single runs"),
    })
}

/// The cases of an unauthenticated session (IPv4 and, under
/// `v6_discr`, IPv6): the replies, a Poll, a packet for userspace, and
/// every crafted drop; each runs with the guards as they are.
fn plain_cases(v6_discr: u32) -> Vec<(String, Vec<u8>, GuardSetup)> {
    let mut cases: Vec<(String, Vec<u8>)> = vec![
        (
            "reply (Up, XDP_TX)".into(),
            craft::frame(255, &craft::peer_up()),
        ),
        (
            "reply over IPv6 (UDP checksum)".into(),
            craft::frame6(255, 17, &craft::bfd(3, 0, craft::PEER_DISCR, v6_discr)),
        ),
        (
            "Poll answered with Final".into(),
            craft::frame(
                255,
                &craft::bfd(3, 0x20, craft::PEER_DISCR, craft::OUR_DISCR),
            ),
        ),
        (
            "to userspace (Init)".into(),
            craft::frame(255, &craft::bfd(2, 0, craft::PEER_DISCR, craft::OUR_DISCR)),
        ),
    ];
    cases.extend(
        craft::drop_cases()
            .into_iter()
            .map(|(what, _, f)| (format!("drop: {what}"), f)),
    );
    cases
        .into_iter()
        .map(|(case, frame)| (case, frame, GuardSetup::AsLeft))
        .collect()
}

/// What an authenticated case's sessions' `VerifyGuard`s are before each
/// run: as the last run left them (its packet expected if genuine), fresh
/// (a full budget, nothing expected: the digest is computed), or spent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GuardSetup {
    AsLeft,
    Fresh,
    Spent,
}

/// Our discriminator (and slot offset) of the bench's authenticated
/// session of each Auth Type.
fn auth_discr(kind: u8) -> u32 {
    craft::OUR_DISCR + 0x100 + u32::from(kind)
}

fn auth_slot(kind: u8) -> u32 {
    craft::SLOT + 0x10 + u32::from(kind)
}

fn signed_slot(kind: u8) -> u32 {
    craft::SLOT + 0x20 + u32::from(kind)
}

/// Our discriminator of the bench's offloaded authenticated session of
/// each Auth Type (the kernel signs its replies).
fn signed_discr(kind: u8) -> u32 {
    craft::OUR_DISCR + 0x200 + u32::from(kind)
}

/// The peer's Up packet to the authenticated session of `kind`.
fn auth_frame(kind: u8, sequence: u32) -> Vec<u8> {
    auth_frame_to(auth_discr(kind), kind, sequence)
}

fn auth_frame_to(discr: u32, kind: u8, sequence: u32) -> Vec<u8> {
    craft::frame(
        255,
        &craft::authenticated(
            craft::bfd(3, 0, craft::PEER_DISCR, discr),
            kind,
            craft::AUTH_KEY_ID,
            sequence,
            craft::AUTH_SECRET,
        ),
    )
}

const AUTH_TYPES: [(u8, &str); 5] = [
    (auth_type::SIMPLE_PASSWORD, "simple password"),
    (auth_type::KEYED_MD5, "keyed MD5"),
    (auth_type::METICULOUS_KEYED_MD5, "meticulous keyed MD5"),
    (auth_type::KEYED_SHA1, "keyed SHA1"),
    (auth_type::METICULOUS_KEYED_SHA1, "meticulous keyed SHA1"),
];

/// One session per Auth Type, its key installed as the engine installs it,
/// and the cases that run against them. A repeated genuine packet is
/// accepted again by the non-meticulous types only (the window admits
/// the same number), so their rows are the verification's whole cost;
/// a meticulous type's genuine packet costs what its non-meticulous
/// twin's does (one comparison more), and its row is the replay refused.
fn install_authenticated_sessions(
    bpf: &mut aya::Ebpf,
) -> Result<Vec<(String, Vec<u8>, GuardSetup)>> {
    {
        let mut sessions: HashMap<&mut MapData, u32, SessionConfig> = HashMap::try_from(
            bpf.map_mut(names::SESSIONS_MAP)
                .context("no sessions map")?,
        )?;
        for (kind, _) in AUTH_TYPES {
            let config = SessionConfig {
                auth_type: kind,
                slot: auth_slot(kind),
                // An hour: the window must not lapse between rounds.
                detect_ns: 3_600_000_000_000,
                ..craft::session(false)
            };
            sessions.insert(auth_discr(kind), config, 0)?;
            // The same type offloaded: the kernel signs its replies
            // (RFC 5880 6.7.2-6.7.4) with the key the peer's packets name.
            let ours = craft::authenticated(
                craft::bfd(3, 0, signed_discr(kind), craft::PEER_DISCR),
                kind,
                craft::AUTH_KEY_ID,
                0,
                craft::AUTH_SECRET,
            );
            let mut reply = [0u8; 24];
            reply.copy_from_slice(&ours[..24]);
            let signed = SessionConfig {
                slot: signed_slot(kind),
                reply,
                ..config
            };
            let signed = SessionConfig {
                flags: linecard_common::bfd::FLAG_REPLY,
                ..signed
            };
            sessions.insert(signed_discr(kind), signed, 0)?;
        }
    }
    let mut keys: HashMap<&mut MapData, AuthKeyRef, AuthSecret> = HashMap::try_from(
        bpf.map_mut(names::AUTH_KEYS_MAP)
            .context("no auth keys map")?,
    )?;
    for (kind, _) in AUTH_TYPES {
        for discr in [auth_discr(kind), signed_discr(kind)] {
            let (key, value) = craft::auth_key_of(discr, craft::AUTH_KEY_ID, craft::AUTH_SECRET);
            keys.insert(key, value, 0)?;
        }
    }
    let mut cases = Vec::new();
    for (kind, name) in AUTH_TYPES {
        let meticulous =
            kind == auth_type::METICULOUS_KEYED_MD5 || kind == auth_type::METICULOUS_KEYED_SHA1;
        if meticulous {
            // Its non-meticulous twin's rows are its costs (one comparison
            // more); its own row is the replay refused, below.
            continue;
        }
        if kind == auth_type::SIMPLE_PASSWORD {
            cases.push((
                format!("{name} verified, to userspace"),
                auth_frame(kind, 100),
                GuardSetup::AsLeft,
            ));
            cases.push((
                format!("{name} verified, reply signed (XDP_TX)"),
                auth_frame_to(signed_discr(kind), kind, 100),
                GuardSetup::AsLeft,
            ));
            continue;
        }
        cases.push((
            format!("{name} digest computed, to userspace"),
            auth_frame(kind, 100),
            GuardSetup::Fresh,
        ));
        // The same packet again: the non-meticulous window admits its
        // number, and its digest is the one expected for it.
        cases.push((
            format!("{name} digest expected, to userspace"),
            auth_frame(kind, 100),
            GuardSetup::AsLeft,
        ));
        cases.push((
            format!("{name} digest computed, reply signed (XDP_TX)"),
            auth_frame_to(signed_discr(kind), kind, 100),
            GuardSetup::Fresh,
        ));
    }
    let mut forged = auth_frame(auth_type::KEYED_SHA1, 100);
    let last = forged.len() - 1;
    forged[last] ^= 1;
    cases.push((
        "drop: forged SHA1 digest, computed".into(),
        forged.clone(),
        GuardSetup::Fresh,
    ));
    cases.push((
        "drop: forged SHA1 digest, budget spent".into(),
        forged,
        GuardSetup::Spent,
    ));
    cases.push((
        "drop: replay, meticulous SHA1".into(),
        auth_frame(auth_type::METICULOUS_KEYED_SHA1, 100),
        GuardSetup::AsLeft,
    ));
    Ok(cases)
}

/// linecardd's own verification of packets of the same shape, timed by
/// the binary that would run (`linecardd bench --json`).
fn userspace_auth(repeat: u32) -> Result<Vec<UserspaceVerifyCost>> {
    let binary = crate::linecardd::binary();
    let out = std::process::Command::new(&binary)
        .args(["bench", "--json", "--repeat", &repeat.to_string()])
        .output()
        .with_context(|| format!("running {} bench", binary.display()))?;
    anyhow::ensure!(
        out.status.success(),
        "{} bench: {}",
        binary.display(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    serde_json::from_slice(&out.stdout)
        .with_context(|| format!("{} bench --json printed no rows", binary.display()))
}

pub fn render(b: &XdpBench) -> String {
    let action = |a: u32| match a {
        1 => "DROP",
        2 => "PASS",
        3 => "TX",
        _ => "?",
    };
    let mut out = String::from("lc_bfd per packet in the kernel (BPF_PROG_TEST_RUN)\n");
    if let Some(count) = b.verified_instructions {
        out.push_str(&format!(
            "the verifier processed {count} instructions loading it (limit 1000000)\n"
        ));
    }
    for r in &b.rows {
        out.push_str(&format!(
            "{:<44} {:>4} {:>6} ns   ({})\n",
            r.case,
            action(r.action),
            r.ns_per_packet,
            r.method
        ));
    }
    out.push_str("the same verification in userspace (Auth::verify, after the socket)\n");
    for r in &b.userspace_auth {
        out.push_str(&format!(
            "{:<44}      {:>6} ns   ({})\n",
            r.auth_type, r.ns_per_packet, r.method
        ));
    }
    out.push_str(&format!(
        "reference engine: ~{} ns per reply (19-304 ns per dropped frame); goal: at most {} ns\n",
        b.reference_reply_ns, b.goal_reply_ns
    ));
    out
}
