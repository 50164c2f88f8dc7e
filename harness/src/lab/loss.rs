//! A lossy link without netem (this kernel has none): `lc_loss` on an
//! observer's bridge port drops the BFD control frames a host sends into the
//! bridge at a seeded rate and counts what it judged and dropped. Attached
//! to the peer's port it is loss on the peer-to-DUT direction only: the
//! capture on the DUT's port then holds exactly what the DUT received and
//! everything it sent (a drop on the DUT's own port would hide the DUT's
//! packets from that capture, which taps after XDP).

use super::spec::{Host, OBSERVER_NS};
use crate::sys;
use anyhow::{bail, Context, Result};
use aya::maps::{Array, MapData, PerCpuArray};
use linecard_common::loss::{counter, LossConfig};
use linecard_common::names;

/// The program on `host`'s bridge port for as long as this lives (not
/// pinned: dropping it detaches it; `lab down` removes the port anyway).
pub struct LossyLink {
    bpf: aya::Ebpf,
    pub port: &'static str,
    pub config: LossConfig,
}

/// What the program judged since it was attached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct LossCounts {
    /// BFD control frames from the host.
    pub seen: u64,
    pub dropped: u64,
}

impl LossyLink {
    /// Drops `rate` (0-1) of `host`'s BFD control frames, seeded by `seed`.
    pub fn attach(host: &Host, rate: f64, seed: u64) -> Result<Self> {
        if !(0.0..=1.0).contains(&rate) {
            bail!("a loss rate is between 0 and 1, not {rate}");
        }
        let config = LossConfig::new(rate, seed);
        let port = host.bridge_port;
        let bpf = sys::in_netns(OBSERVER_NS, || {
            let mut bpf = linecard_bpf_objects::load()?;
            let mut map: Array<&mut MapData, LossConfig> = Array::try_from(
                bpf.map_mut(names::LOSS_MAP)
                    .context("the XDP object has no LC_LOSS")?,
            )?;
            map.set(0, config, 0)?;
            let program: &mut aya::programs::Xdp = bpf
                .program_mut(names::LOSS_PROGRAM)
                .context("the XDP object has no lc_loss")?
                .try_into()?;
            program.load()?;
            program
                .attach(port, aya::programs::XdpMode::Driver)
                .with_context(|| {
                    format!(
                        "attaching lc_loss to {port} in native mode (a port holds one XDP program: \
                         the DUT's carries the lab's XDP_PASS, so lose frames on the peer's)"
                    )
                })?;
            Ok(bpf)
        })?;
        Ok(Self { bpf, port, config })
    }

    pub fn counts(&self) -> Result<LossCounts> {
        let counts: PerCpuArray<&MapData, u64> = PerCpuArray::try_from(
            self.bpf
                .map(names::LOSS_COUNTS_MAP)
                .context("no LC_LOSS_COUNTS")?,
        )?;
        let sum = |index: u32| -> Result<u64> { Ok(counts.get(&index, 0)?.iter().sum()) };
        Ok(LossCounts {
            seen: sum(counter::SEEN)?,
            dropped: sum(counter::DROPPED)?,
        })
    }
}
