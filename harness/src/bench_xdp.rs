//! `linecard bench xdp`: the fast path's cost per packet in the kernel
//! (BPF_PROG_TEST_RUN, mean over many runs) for a reply, a pass to
//! userspace and every drop reason, beside the reference's figures.

use anyhow::{Context, Result};
use aya::maps::{HashMap, MapData};
use aya::programs::Xdp;
use linecard_bpf_objects::{craft, test_run};
use linecard_common::names;
use serde::Serialize;

/// The reference XDP engine's measured costs (shared/reference/bfd-measurement.md).
pub const REFERENCE_REPLY_NS: u32 = 701;
pub const GOAL_REPLY_NS: u32 = 250;

#[derive(Debug, Serialize)]
pub struct XdpBench {
    pub repeat: u32,
    pub rows: Vec<XdpRow>,
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
const XDP_TX: u32 = 3;

pub fn run(repeat: u32) -> Result<XdpBench> {
    crate::sys::require_root("linecard bench xdp")?;
    let mut bpf = linecard_bpf_objects::load()?;
    let program: &mut Xdp = bpf
        .program_mut(names::BFD_PROGRAM)
        .context("no lc_bfd program")?
        .try_into()?;
    program.load().context("loading lc_bfd")?;
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
    let program: &Xdp = bpf.program(names::BFD_PROGRAM).unwrap().try_into()?;
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
    let mut rows = Vec::new();
    for (case, frame) in cases {
        let first = test_run::run(program, &frame, 1)
            .with_context(|| format!("BPF_PROG_TEST_RUN for {case}"))?;
        let rewrites = first.action == XDP_TX;
        let (rounds, runs) = if rewrites {
            (SINGLE_RUN_SAMPLES, 1)
        } else {
            (ROUNDS, repeat)
        };
        let mut samples = Vec::with_capacity(rounds);
        for _ in 0..rounds {
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
    Ok(XdpBench {
        repeat,
        rows,
        reference_reply_ns: REFERENCE_REPLY_NS,
        goal_reply_ns: GOAL_REPLY_NS,
    })
}

pub fn render(b: &XdpBench) -> String {
    let action = |a: u32| match a {
        1 => "DROP",
        2 => "PASS",
        3 => "TX",
        _ => "?",
    };
    let mut out = String::from("lc_bfd per packet in the kernel (BPF_PROG_TEST_RUN)\n");
    for r in &b.rows {
        out.push_str(&format!(
            "{:<40} {:>4} {:>6} ns   ({})\n",
            r.case,
            action(r.action),
            r.ns_per_packet,
            r.method
        ));
    }
    out.push_str(&format!(
        "reference engine: ~{} ns per reply (19-304 ns per dropped frame); goal: at most {} ns\n",
        b.reference_reply_ns, b.goal_reply_ns
    ));
    out
}
