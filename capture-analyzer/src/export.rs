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
        let service = serde_json::to_value(f.service)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
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
        out.write_all(b"ts_ns,flow,state,diag,poll,final,demand,demand_silence,detect_mult,my_discr,your_discr,desired_min_tx_us,required_min_rx_us,gap_ns\n")?;
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
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{gap}",
            r.ts_ns,
            r.flow,
            state_name(c.state),
            c.diag,
            u8::from(c.poll),
            u8::from(c.final_),
            u8::from(c.demand),
            u8::from(r.demand_silence),
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

/// Parquet exports (polars), from the same model and packet stream as CSV.
#[cfg(feature = "parquet")]
pub mod parquet {
    use super::state_name;
    use crate::analysis::{PacketRecord, PacketSink};
    use crate::model::Analysis;
    use polars::prelude::*;
    use std::fs::File;
    use std::path::Path;

    /// Writes the per-flow table.
    pub fn write_flows(analysis: &Analysis, path: &Path) -> PolarsResult<()> {
        let flows = &analysis.all.flows;
        let col_f64 = |name: &str, f: &dyn Fn(&crate::model::FlowResult) -> f64| {
            Column::new(name.into(), flows.iter().map(f).collect::<Vec<f64>>())
        };
        let mut df = DataFrame::new(vec![
            Column::new("flow".into(), (0..flows.len() as u32).collect::<Vec<u32>>()),
            Column::new(
                "src".into(),
                flows.iter().map(|f| f.src.clone()).collect::<Vec<String>>(),
            ),
            Column::new(
                "src_port".into(),
                flows
                    .iter()
                    .map(|f| u32::from(f.src_port))
                    .collect::<Vec<u32>>(),
            ),
            Column::new(
                "dst".into(),
                flows.iter().map(|f| f.dst.clone()).collect::<Vec<String>>(),
            ),
            Column::new(
                "dst_port".into(),
                flows
                    .iter()
                    .map(|f| u32::from(f.dst_port))
                    .collect::<Vec<u32>>(),
            ),
            Column::new(
                "packets".into(),
                flows.iter().map(|f| f.packets).collect::<Vec<u64>>(),
            ),
            Column::new(
                "first_ts_ns".into(),
                flows.iter().map(|f| f.first_ts_ns).collect::<Vec<i64>>(),
            ),
            Column::new(
                "last_ts_ns".into(),
                flows.iter().map(|f| f.last_ts_ns).collect::<Vec<i64>>(),
            ),
            col_f64("gap_p50_ms", &|f| f.gap_ms.p50),
            col_f64("gap_p90_ms", &|f| f.gap_ms.p90),
            col_f64("gap_p99_ms", &|f| f.gap_ms.p99),
            col_f64("gap_p999_ms", &|f| f.gap_ms.p999),
            col_f64("gap_max_ms", &|f| f.gap_ms.max),
            col_f64("up_gap_p99_ms", &|f| f.up_gap_ms.p99),
            col_f64("up_gap_max_ms", &|f| f.up_gap_ms.max),
            Column::new(
                "flaps".into(),
                flows.iter().map(|f| f.flaps).collect::<Vec<u64>>(),
            ),
            Column::new(
                "over_budget".into(),
                flows.iter().map(|f| f.over_budget).collect::<Vec<u64>>(),
            ),
        ])?;
        ParquetWriter::new(File::create(path)?).finish(&mut df)?;
        Ok(())
    }

    /// Rows buffered per Parquet row group: memory stays bounded.
    const BATCH_ROWS: usize = 1 << 16;

    #[derive(Default)]
    struct Columns {
        ts_ns: Vec<i64>,
        flow: Vec<u32>,
        state: Vec<&'static str>,
        diag: Vec<u32>,
        poll: Vec<bool>,
        final_: Vec<bool>,
        /// D: the sender asks for Demand mode (RFC 5880 6.6).
        demand: Vec<bool>,
        /// The gap before this packet was a silence the receiver asked for.
        demand_silence: Vec<bool>,
        detect_mult: Vec<u32>,
        my_discr: Vec<u32>,
        your_discr: Vec<u32>,
        desired_min_tx_us: Vec<u32>,
        required_min_rx_us: Vec<u32>,
        gap_ns: Vec<Option<u64>>,
    }

    impl Columns {
        fn take_frame(&mut self) -> PolarsResult<DataFrame> {
            let c = std::mem::take(self);
            DataFrame::new(vec![
                Column::new("ts_ns".into(), c.ts_ns),
                Column::new("flow".into(), c.flow),
                Column::new("state".into(), c.state),
                Column::new("diag".into(), c.diag),
                Column::new("poll".into(), c.poll),
                Column::new("final".into(), c.final_),
                Column::new("demand".into(), c.demand),
                Column::new("demand_silence".into(), c.demand_silence),
                Column::new("detect_mult".into(), c.detect_mult),
                Column::new("my_discr".into(), c.my_discr),
                Column::new("your_discr".into(), c.your_discr),
                Column::new("desired_min_tx_us".into(), c.desired_min_tx_us),
                Column::new("required_min_rx_us".into(), c.required_min_rx_us),
                Column::new("gap_ns".into(), c.gap_ns),
            ])
        }
    }

    /// Streams control packets into a Parquet file, one row group per batch.
    pub struct PacketParquet {
        file: Option<File>,
        writer: Option<BatchedWriter<File>>,
        columns: Columns,
        error: Option<PolarsError>,
    }

    impl PacketParquet {
        pub fn create(path: &Path) -> PolarsResult<Self> {
            Ok(Self {
                file: Some(File::create(path)?),
                writer: None,
                columns: Columns::default(),
                error: None,
            })
        }

        fn flush(&mut self) -> PolarsResult<()> {
            let df = self.columns.take_frame()?;
            if self.writer.is_none() {
                let file = self
                    .file
                    .take()
                    .expect("file is held until the first batch");
                self.writer = Some(ParquetWriter::new(file).batched(df.schema())?);
            }
            self.writer.as_mut().expect("opened above").write_batch(&df)
        }

        pub fn finish(mut self) -> PolarsResult<()> {
            if let Some(e) = self.error.take() {
                return Err(e);
            }
            self.flush()?;
            self.writer
                .as_mut()
                .expect("opened by the flush")
                .finish()?;
            Ok(())
        }
    }

    impl PacketSink for PacketParquet {
        fn control(&mut self, r: &PacketRecord) {
            let c = &mut self.columns;
            c.ts_ns.push(r.ts_ns);
            c.flow.push(r.flow as u32);
            c.state.push(state_name(r.control.state));
            c.diag.push(u32::from(r.control.diag));
            c.poll.push(r.control.poll);
            c.final_.push(r.control.final_);
            c.demand.push(r.control.demand);
            c.demand_silence.push(r.demand_silence);
            c.detect_mult.push(u32::from(r.control.detect_mult));
            c.my_discr.push(r.control.my_discr);
            c.your_discr.push(r.control.your_discr);
            c.desired_min_tx_us.push(r.control.desired_min_tx_us);
            c.required_min_rx_us.push(r.control.required_min_rx_us);
            c.gap_ns.push(r.gap_ns);
            if c.ts_ns.len() >= BATCH_ROWS && self.error.is_none() {
                if let Err(e) = self.flush() {
                    self.error = Some(e);
                }
            }
        }
    }
}
