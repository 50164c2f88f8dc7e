//! The fast path handed from one linecardd process to the next, so that
//! the kernel goes on answering and detecting while no process runs
//! (a hitless restart). The running engine pins its maps and its XDP
//! attachments in a folder of its own on the BPF filesystem
//! (`engine.handover_dir`) and exits without AdminDown; the next one loads its
//! program on those maps, swaps it into the attachments atomically
//! (BPF_LINK_UPDATE), and removes the pins once it holds them. The
//! sweep's timer lives in a pinned map and runs on throughout; the
//! heartbeat in `LC_DEAD_MAN` lapses only if the handover outlasts the
//! dead-man limit.

use super::FastPath;
use anyhow::{Context, Result};
use aya::maps::{Map, MapData};
use aya::programs::links::{FdLink, PinnedLink};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

/// Every map of ours is named so; the loader's own (`.rodata`, `.bss`)
/// are not, and are the new program's.
const MAP_PREFIX: &str = "LC_";
/// A pinned attachment: `link-IFACE`.
const LINK_PREFIX: &str = "link-";

/// The data of the map kinds we define.
fn data(map: &Map) -> Option<&MapData> {
    match map {
        Map::Array(d) | Map::HashMap(d) | Map::PerCpuArray(d) | Map::RingBuf(d) => Some(d),
        _ => None,
    }
}

/// A descriptor of each of our maps, taken before the engine hands some
/// to other owners.
pub(super) fn descriptors(bpf: &aya::Ebpf) -> Result<Vec<(String, OwnedFd)>> {
    bpf.maps()
        .filter(|(name, _)| name.starts_with(MAP_PREFIX))
        .map(|(name, map)| {
            let data = data(map).with_context(|| format!("{name}: a map kind we do not define"))?;
            Ok((name.to_string(), data.fd().as_fd().try_clone_to_owned()?))
        })
        .collect()
}

/// LC_SWEEP_LEN as the kernel holds it (0 in a fresh map).
pub(super) fn sweep_len(bpf: &aya::Ebpf) -> u32 {
    bpf.map(linecard_common::names::SWEEP_LEN_MAP)
        .and_then(|map| aya::maps::Array::<&MapData, u32>::try_from(map).ok())
        .and_then(|len| len.get(&0, 0).ok())
        .unwrap_or(0)
}

/// A running engine's pinned fast path, taken over by this one.
#[derive(Debug)]
pub struct Adoption {
    dir: PathBuf,
    /// The running program's identity (`linecard_bpf_objects::identity`),
    /// when the engine that pinned it said.
    program: Option<String>,
}

impl Adoption {
    /// The fast path pinned at `dir`, if any.
    pub fn at(dir: &Path) -> Option<Self> {
        dir.is_dir().then(|| Self {
            dir: dir.to_path_buf(),
            program: None,
        })
    }

    /// The pinned attachments run the program `identity` names.
    pub fn running(mut self, identity: Option<String>) -> Self {
        self.program = identity;
        self
    }

    /// Whether the attachments run the program this engine would load: it
    /// then keeps them as they are, and verifies nothing.
    pub(super) fn runs(&self, identity: &str) -> bool {
        self.program.as_deref() == Some(identity)
    }

    /// Each pinned map, by name.
    pub(super) fn map_pins(&self) -> Vec<(String, PathBuf)> {
        self.entries()
            .into_iter()
            .filter(|(name, _)| name.starts_with(MAP_PREFIX))
            .collect()
    }

    fn entries(&self) -> Vec<(String, PathBuf)> {
        let Ok(read) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        read.flatten()
            .filter_map(|e| Some((e.file_name().into_string().ok()?, e.path())))
            .collect()
    }

    /// The maps are ours now: their pins go (the maps live while a
    /// descriptor or program holds them).
    pub(super) fn maps_held(&self) {
        for (_, path) in self.map_pins() {
            let _ = std::fs::remove_file(path);
        }
    }

    /// The running engine's attachment to `interface`, unpinned.
    pub(super) fn link(&self, interface: &str) -> Option<Result<FdLink>> {
        let path = self.dir.join(format!("{LINK_PREFIX}{interface}"));
        if !path.exists() {
            return None;
        }
        Some((|| {
            let pinned = PinnedLink::from_pin(&path)
                .with_context(|| format!("opening {}", path.display()))?;
            pinned.unpin().context("unpinning the attachment")
        })())
    }

    /// Done: whatever is still pinned (an interface this engine no longer
    /// attaches to) is released with the folder.
    pub fn finish(self) {
        for (_, path) in self.entries() {
            let _ = std::fs::remove_file(path);
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

impl FastPath {
    /// Pins every map at `dir` (made if missing, kept if pinned already):
    /// the first half of a handover, after which this process goes on as
    /// before. How many maps are pinned.
    pub fn pin_maps(&mut self, dir: &Path) -> Result<usize> {
        use std::os::unix::fs::DirBuilderExt;
        if !dir.is_dir() {
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(dir)
                .with_context(|| format!("making {}", dir.display()))?;
        }
        for (name, fd) in &self.maps {
            let path = dir.join(name);
            if path.exists() {
                continue;
            }
            MapData::from_fd(fd.try_clone()?)?
                .pin(&path)
                .with_context(|| format!("pinning {name}"))?;
        }
        Ok(self.maps.len())
    }

    /// Pins every map and attachment at `dir` for the next process. The
    /// responder runs on until [`FastPath::release`].
    pub fn hand_over(&mut self, dir: &Path) -> Result<()> {
        self.pin_maps(dir)?;
        let program: &mut aya::programs::Xdp = self
            .bpf
            .program_mut(linecard_common::names::BFD_PROGRAM)
            .context("lc_bfd in the object")?
            .try_into()?;
        for (interface, id) in std::mem::take(&mut self.links) {
            let link = FdLink::try_from(program.take_link(id)?)
                .context("lc_bfd is attached by netlink, which cannot be handed over")?;
            link.pin(dir.join(format!("{LINK_PREFIX}{interface}")))
                .with_context(|| format!("pinning the attachment to {interface}"))?;
        }
        // Attachments kept from the engine before us, its program in them.
        for (interface, link) in std::mem::take(&mut self.kept_links) {
            link.pin(dir.join(format!("{LINK_PREFIX}{interface}")))
                .with_context(|| format!("pinning the attachment to {interface}"))?;
        }
        Ok(())
    }

    /// The last act of a handing-over process: stops the responder and
    /// gives the dead-man `window_ns` from now, so that the kernel answers
    /// alone until the next process's responder beats (restoring the
    /// limit) or the window lapses.
    pub fn release(&mut self, window_ns: u64) -> Result<()> {
        self.responder.stop();
        let dead_man = self
            .maps
            .iter()
            .find(|(name, _)| name == linecard_common::names::DEAD_MAN_MAP)
            .context("no dead-man map")?;
        let mut dead_man: aya::maps::Array<MapData, linecard_common::bfd::DeadMan> =
            aya::maps::Array::try_from(Map::Array(MapData::from_fd(dead_man.1.try_clone()?)?))?;
        dead_man.set(
            0,
            linecard_common::bfd::DeadMan {
                heartbeat_ns: crate::io::clock_ns(libc::CLOCK_MONOTONIC),
                limit_ns: window_ns,
            },
            0,
        )?;
        Ok(())
    }

    /// The adoption is complete (or there was none): the running engine's
    /// remaining pins go.
    pub fn adopted(&mut self) {
        if let Some(adoption) = self.adoption.take() {
            adoption.finish();
        }
    }

    /// Starts the responder, once the engine that handed over has stopped
    /// its own (at once when there was none).
    pub fn start_responder(&mut self) -> Result<()> {
        self.responder.run()
    }
}
