//! Exporters: functions from the result model (or the packet stream) to
//! bytes. CSV is derived from the same model as JSON, never maintained apart.

use crate::analysis::{PacketRecord, PacketSink};
use crate::decode::State;
use crate::model::Analysis;
use std::io::Write;

fn state_name(state: State) -> &'static str {
    match state {
        State::AdminDown => "admin_down",
        State::Down => "down",
        State::Init => "init",
        State::Up => "up",
    }
}

/// One row per flow: identity, counts and the gap distribution.
pub fn flows_csv(analysis: &Analysis) -> String {
    let mut out = String::from(
        "flow,src,src_port,dst,dst_port,service,packets,first_ts_ns,last_ts_ns,gap_p50_ms,gap_p90_ms,gap_p99_ms,gap_p999_ms,gap_max_ms,up_gap_p99_ms,up_gap_max_ms,flaps,over_budget,budget_ms\n",
    );
    for (i, f) in analysis.all.flows.iter().enumerate() {
        let service = serde_json::to_value(f.service).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
        out.push_str(&format!(
            "{i},{},{},{},{},{service},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
            f.src,
            f.src_port,
            f.dst,
            f.dst_port,
            f.packets,
            f.first_ts_ns,
            f.last_ts_ns,
            f.gap_ms.p50,
            f.gap_ms.p90,
            f.gap_ms.p99,
            f.gap_ms.p999,
            f.gap_ms.max,
            f.up_gap_ms.p99,
            f.up_gap_ms.max,
            f.flaps,
            f.over_budget,
            f.budget_ms.map(|b| b.to_string()).unwrap_or_default(),
        ));
    }
    out
}

/// Streams one CSV row per control packet; `flow` indexes `flows.csv`.
pub struct PacketCsv<W: Write> {
    out: W,
    /// The first write error, reported by [`PacketCsv::finish`].
    error: Option<std::io::Error>,
}

impl<W: Write> PacketCsv<W> {
    pub fn new(mut out: W) -> std::io::Result<Self> {
        out.write_all(b"ts_ns,flow,state,diag,poll,final,detect_mult,my_discr,your_discr,desired_min_tx_us,required_min_rx_us,gap_ns\n")?;
        Ok(Self { out, error: None })
    }

    pub fn finish(mut self) -> std::io::Result<W> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.out.flush()?;
        Ok(self.out)
    }
}

impl<W: Write> PacketSink for PacketCsv<W> {
    fn control(&mut self, r: &PacketRecord) {
        if self.error.is_some() {
            return;
        }
        let c = &r.control;
        let gap = r.gap_ns.map(|g| g.to_string()).unwrap_or_default();
        if let Err(e) = writeln!(
            self.out,
            "{},{},{},{},{},{},{},{},{},{},{},{gap}",
            r.ts_ns,
            r.flow,
            state_name(c.state),
            c.diag,
            u8::from(c.poll),
            u8::from(c.final_),
            c.detect_mult,
            c.my_discr,
            c.your_discr,
            c.desired_min_tx_us,
            c.required_min_rx_us,
        ) {
            self.error = Some(e);
        }
    }
}
