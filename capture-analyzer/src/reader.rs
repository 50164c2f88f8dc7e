//! Streaming capture reader: pcap (microsecond and nanosecond) and pcapng.
//!
//! Frames are copied into a caller's buffer one at a time, so captures of any
//! size stream through a fixed amount of memory. A truncated file yields what
//! it holds and a warning, never a panic.

use pcap_parser::pcapng::Block;
use pcap_parser::traits::PcapReaderIterator;
use pcap_parser::{create_reader, Linktype, PcapBlockOwned, PcapError};
use std::io::Read;

/// Link types the decoder understands (values from the tcpdump.org registry).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkType {
    Ethernet,
    LinuxSll,
    LinuxSll2,
    RawIp,
    Other(i32),
}

impl LinkType {
    fn from_pcap(linktype: Linktype) -> Self {
        match linktype.0 {
            1 => Self::Ethernet,
            113 => Self::LinuxSll,
            276 => Self::LinuxSll2,
            // LINKTYPE_RAW, and the DLT_RAW values some systems write.
            101 | 12 | 14 => Self::RawIp,
            other => Self::Other(other),
        }
    }
}

/// One captured frame; its bytes are in the buffer passed to `next_frame`.
#[derive(Clone, Copy, Debug)]
pub struct FrameMeta {
    /// Capture timestamp, nanoseconds since the Unix epoch.
    pub ts_ns: i64,
    pub link: LinkType,
    /// Length on the wire; larger than the captured bytes when snapped.
    pub orig_len: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error("not a pcap or pcapng file")]
    NotACapture,
    #[error("reading failed: {0}")]
    Io(String),
}

/// Facts the capture itself records about its quality.
#[derive(Clone, Debug, Default)]
pub struct ReaderNotes {
    /// The file ended inside a record.
    pub truncated: bool,
    /// A record could not be parsed; reading stopped there.
    pub corrupt_at_byte: Option<u64>,
    /// Drops the capturing side recorded (pcapng interface statistics).
    pub capture_drops: Option<u64>,
}

struct Interface {
    link: LinkType,
    /// Units per second of this interface's timestamps.
    resolution: u64,
    offset_s: i64,
}

pub struct CaptureReader<R: Read> {
    inner: Box<dyn PcapReaderIterator>,
    state: BlockState,
    pub notes: ReaderNotes,
    done: bool,
    _read: std::marker::PhantomData<R>,
}

/// What earlier blocks said about the ones that follow.
struct BlockState {
    legacy_nanos: bool,
    legacy_link: LinkType,
    interfaces: Vec<Interface>,
}

const BUFFER_BYTES: usize = 1 << 20;

impl<R: Read + 'static> CaptureReader<R> {
    pub fn new(read: R) -> Result<Self, CaptureError> {
        let inner = create_reader(BUFFER_BYTES, read).map_err(|e| match e {
            PcapError::HeaderNotRecognized | PcapError::Eof | PcapError::UnexpectedEof | PcapError::Incomplete(_) => {
                CaptureError::NotACapture
            }
            other => CaptureError::Io(format!("{other:?}")),
        })?;
        Ok(Self {
            inner,
            state: BlockState { legacy_nanos: false, legacy_link: LinkType::Ethernet, interfaces: Vec::new() },
            notes: ReaderNotes::default(),
            done: false,
            _read: std::marker::PhantomData,
        })
    }

    /// Copies the next frame into `buf`; `None` at the end of the capture
    /// (including a truncated or corrupt end, recorded in `notes`).
    pub fn next_frame(&mut self, buf: &mut Vec<u8>) -> Result<Option<FrameMeta>, CaptureError> {
        while !self.done {
            let (consumed, frame) = match self.inner.next() {
                Ok((offset, block)) => (offset, self.state.take(block, buf, &mut self.notes)),
                Err(PcapError::Eof) => {
                    self.done = true;
                    return Ok(None);
                }
                Err(PcapError::Incomplete(_)) => {
                    if self.inner.refill().is_err() {
                        self.notes.truncated = true;
                        self.done = true;
                    }
                    continue;
                }
                Err(PcapError::UnexpectedEof) => {
                    self.notes.truncated = true;
                    self.done = true;
                    return Ok(None);
                }
                Err(PcapError::ReadError) => return Err(CaptureError::Io("read error".into())),
                Err(_) => {
                    self.notes.corrupt_at_byte = Some(self.inner.consumed() as u64);
                    self.done = true;
                    return Ok(None);
                }
            };
            self.inner.consume(consumed);
            if let Some(frame) = frame {
                return Ok(Some(frame));
            }
        }
        Ok(None)
    }

}

impl BlockState {
    fn take(&mut self, block: PcapBlockOwned, buf: &mut Vec<u8>, notes: &mut ReaderNotes) -> Option<FrameMeta> {
        match block {
            PcapBlockOwned::LegacyHeader(header) => {
                self.legacy_nanos = header.is_nanosecond_precision();
                self.legacy_link = LinkType::from_pcap(header.network);
                None
            }
            PcapBlockOwned::Legacy(record) => {
                buf.clear();
                buf.extend_from_slice(record.data);
                let frac = i64::from(record.ts_usec) * if self.legacy_nanos { 1 } else { 1_000 };
                Some(FrameMeta {
                    ts_ns: i64::from(record.ts_sec) * 1_000_000_000 + frac,
                    link: self.legacy_link,
                    orig_len: record.origlen,
                })
            }
            PcapBlockOwned::NG(Block::SectionHeader(_)) => {
                // Interface ids restart in every section.
                self.interfaces.clear();
                None
            }
            PcapBlockOwned::NG(Block::InterfaceDescription(idb)) => {
                self.interfaces.push(Interface {
                    link: LinkType::from_pcap(idb.linktype),
                    resolution: pcap_parser::pcapng::build_ts_resolution(idb.if_tsresol).unwrap_or(1_000_000),
                    offset_s: idb.if_tsoffset,
                });
                None
            }
            PcapBlockOwned::NG(Block::EnhancedPacket(epb)) => {
                let interface = self.interfaces.get(epb.if_id as usize)?;
                let units = (u64::from(epb.ts_high) << 32) | u64::from(epb.ts_low);
                let res = interface.resolution.max(1);
                let secs = (units / res) as i64 + interface.offset_s;
                let frac_ns = ((units % res) as u128 * 1_000_000_000 / u128::from(res)) as i64;
                buf.clear();
                buf.extend_from_slice(&epb.data[..(epb.caplen as usize).min(epb.data.len())]);
                Some(FrameMeta { ts_ns: secs * 1_000_000_000 + frac_ns, link: interface.link, orig_len: epb.origlen })
            }
            PcapBlockOwned::NG(Block::SimplePacket(spb)) => {
                // No timestamp: useless for gaps, counted as unusable by the caller.
                let interface = self.interfaces.first()?;
                buf.clear();
                buf.extend_from_slice(spb.data);
                Some(FrameMeta { ts_ns: i64::MIN, link: interface.link, orig_len: spb.origlen })
            }
            PcapBlockOwned::NG(Block::InterfaceStatistics(isb)) => {
                // isb_ifdrop (option 4): packets dropped by the interface.
                for option in &isb.options {
                    if option.code.0 == 4 && option.value.len() >= 8 {
                        let drops = u64::from_le_bytes(option.value[..8].try_into().unwrap());
                        *notes.capture_drops.get_or_insert(0) += drops;
                    }
                }
                None
            }
            PcapBlockOwned::NG(_) => None,
        }
    }
}
