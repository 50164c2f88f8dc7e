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
    /// A block whose fields cannot be taken as they are (a timestamp that
    /// does not fit, a resolution no clock has): named with its byte
    /// offset, so that it can be found in the file.
    #[error("{block} at byte {offset}: {why}")]
    BadBlock {
        block: &'static str,
        offset: u64,
        why: String,
    },
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

/// A stream of frames. The slice a call returns is valid until the next call.
pub trait FrameSource {
    fn next_frame(&mut self) -> Result<Option<(FrameMeta, &[u8])>, CaptureError>;
    /// What the capture recorded about its own quality (complete at the end).
    fn notes(&self) -> &ReaderNotes;
}

const PCAP_MAGIC_MICROS: u32 = 0xa1b2_c3d4;
const PCAP_MAGIC_NANOS: u32 = 0xa1b2_3c4d;

/// Opens a capture: classic pcap takes a fast path that hands out records in
/// place; pcapng (and anything else) goes through pcap-parser.
pub fn open(mut read: Box<dyn Read>) -> Result<Box<dyn FrameSource>, CaptureError> {
    let mut magic = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match read.read(&mut magic[got..]) {
            Ok(0) => return Err(CaptureError::NotACapture),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(CaptureError::Io(e.to_string())),
        }
    }
    let le = u32::from_le_bytes(magic);
    let be = u32::from_be_bytes(magic);
    let classic = [PCAP_MAGIC_MICROS, PCAP_MAGIC_NANOS];
    if classic.contains(&le) || classic.contains(&be) {
        return Ok(Box::new(ClassicPcap::new(read, magic)?));
    }
    // pcap-parser recognises the format from its first fill: hand it a
    // whole first chunk, not just the four bytes already read.
    let mut head = magic.to_vec();
    head.resize(64 * 1024, 0);
    let mut filled = 4;
    while filled < head.len() {
        match read.read(&mut head[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(CaptureError::Io(e.to_string())),
        }
    }
    head.truncate(filled);
    let rejoined: Box<dyn Read> = Box::new(std::io::Cursor::new(head).chain(read));
    Ok(Box::new(CaptureReader::new(rejoined)?))
}

/// Classic pcap, either byte order, microsecond or nanosecond timestamps.
pub struct ClassicPcap {
    read: Box<dyn Read>,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    swapped: bool,
    nanos: bool,
    link: LinkType,
    eof: bool,
    notes: ReaderNotes,
    consumed: u64,
}

/// The classic-pcap read buffer grows to this size.
const READ_CHUNK_MAX: usize = 4 << 20;

/// A record larger than this is corruption, not a packet.
const MAX_RECORD: usize = 1 << 24;

impl ClassicPcap {
    fn new(read: Box<dyn Read>, magic: [u8; 4]) -> Result<Self, CaptureError> {
        let le = u32::from_le_bytes(magic);
        let swapped = !(le == PCAP_MAGIC_MICROS || le == PCAP_MAGIC_NANOS);
        let canonical = if swapped {
            u32::from_be_bytes(magic)
        } else {
            le
        };
        let mut reader = Self {
            read,
            // Starts small (cheap for small inputs) and doubles up to
            // READ_CHUNK_MAX as the capture proves large.
            buf: vec![0; 64 << 10],
            start: 0,
            end: 0,
            swapped,
            nanos: canonical == PCAP_MAGIC_NANOS,
            link: LinkType::Ethernet,
            eof: false,
            notes: ReaderNotes::default(),
            consumed: 4,
        };
        // The rest of the 24-byte global header: version, zone, sigfigs,
        // snaplen, link type.
        if !reader.fill(20)? {
            return Err(CaptureError::NotACapture);
        }
        let link = reader.u32_at(reader.start + 16);
        reader.link = LinkType::from_pcap(Linktype(link as i32));
        reader.start += 20;
        reader.consumed += 20;
        Ok(reader)
    }

    #[inline]
    fn u32_at(&self, at: usize) -> u32 {
        let bytes: [u8; 4] = self.buf[at..at + 4].try_into().expect("a 4-byte slice");
        if self.swapped {
            u32::from_be_bytes(bytes)
        } else {
            u32::from_le_bytes(bytes)
        }
    }

    /// Ensures `need` bytes are buffered; false at end of input.
    fn fill(&mut self, need: usize) -> Result<bool, CaptureError> {
        if self.end - self.start >= need {
            return Ok(true);
        }
        self.buf.copy_within(self.start..self.end, 0);
        self.end -= self.start;
        self.start = 0;
        if self.buf.len() < READ_CHUNK_MAX {
            // A capture that keeps coming proves large: bigger reads.
            self.buf.resize(self.buf.len() * 2, 0);
        }
        while self.end < need && !self.eof {
            if self.end == self.buf.len() {
                // A record larger than the buffer grows it as its bytes
                // arrive: a header claiming 16 MiB in a 1 KiB file costs
                // a few KiB, not 16 MiB zeroed (a crafted capture's price).
                let grown = (self.buf.len() * 2).min(need.next_power_of_two());
                self.buf.resize(grown, 0);
            }
            match self.read.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(n) => self.end += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(CaptureError::Io(e.to_string())),
            }
        }
        Ok(self.end >= need)
    }
}

impl ClassicPcap {
    /// Slow path: refills the buffer so that a whole record is available.
    /// Returns false (with the reason in `notes`) at the end of the capture.
    #[cold]
    fn refill_record(&mut self) -> Result<bool, CaptureError> {
        if !self.fill(16)? {
            self.notes.truncated |= self.end > self.start;
            return Ok(false);
        }
        let caplen = self.u32_at(self.start + 8) as usize;
        if caplen > MAX_RECORD {
            self.notes.corrupt_at_byte = Some(self.consumed);
            return Ok(false);
        }
        if !self.fill(16 + caplen)? {
            self.notes.truncated = true;
            return Ok(false);
        }
        Ok(true)
    }
}

impl FrameSource for ClassicPcap {
    #[inline]
    fn next_frame(&mut self) -> Result<Option<(FrameMeta, &[u8])>, CaptureError> {
        let available = self.end - self.start;
        let whole = available >= 16 && {
            let caplen = self.u32_at(self.start + 8) as usize;
            caplen <= MAX_RECORD && available >= 16 + caplen
        };
        if !whole && !self.refill_record()? {
            return Ok(None);
        }
        let at = self.start;
        let caplen = self.u32_at(at + 8) as usize;
        let secs = i64::from(self.u32_at(at));
        let frac = i64::from(self.u32_at(at + 4));
        let meta = FrameMeta {
            ts_ns: secs * 1_000_000_000 + if self.nanos { frac } else { frac * 1_000 },
            link: self.link,
            orig_len: self.u32_at(at + 12),
        };
        self.start += 16 + caplen;
        self.consumed += (16 + caplen) as u64;
        Ok(Some((meta, &self.buf[at + 16..at + 16 + caplen])))
    }

    fn notes(&self) -> &ReaderNotes {
        &self.notes
    }
}

/// pcapng (and classic pcap, if handed one) through pcap-parser.
pub struct CaptureReader<R: Read> {
    inner: Box<dyn PcapReaderIterator>,
    state: BlockState,
    pub notes: ReaderNotes,
    done: bool,
    frame: Vec<u8>,
    /// Bytes of the file before the next block.
    offset: u64,
    _read: std::marker::PhantomData<R>,
}

impl<R: Read + 'static> FrameSource for CaptureReader<R> {
    fn next_frame(&mut self) -> Result<Option<(FrameMeta, &[u8])>, CaptureError> {
        let mut frame = std::mem::take(&mut self.frame);
        let meta = self.next_into(&mut frame);
        self.frame = frame;
        Ok(meta?.map(|m| (m, self.frame.as_slice())))
    }

    fn notes(&self) -> &ReaderNotes {
        &self.notes
    }
}

/// What earlier blocks said about the ones that follow.
struct BlockState {
    legacy_nanos: bool,
    legacy_link: LinkType,
    interfaces: Vec<Interface>,
}

const BUFFER_BYTES: usize = 256 << 10;

impl<R: Read + 'static> CaptureReader<R> {
    pub fn new(read: R) -> Result<Self, CaptureError> {
        let inner = create_reader(BUFFER_BYTES, read).map_err(|e| match e {
            PcapError::HeaderNotRecognized
            | PcapError::Eof
            | PcapError::UnexpectedEof
            | PcapError::Incomplete(_) => CaptureError::NotACapture,
            other => CaptureError::Io(format!("{other:?}")),
        })?;
        Ok(Self {
            inner,
            state: BlockState {
                legacy_nanos: false,
                legacy_link: LinkType::Ethernet,
                interfaces: Vec::new(),
            },
            notes: ReaderNotes::default(),
            done: false,
            frame: Vec::with_capacity(256),
            offset: 0,
            _read: std::marker::PhantomData,
        })
    }

    /// Copies the next frame into `buf`; `None` at the end of the capture
    /// (including a truncated or corrupt end, recorded in `notes`).
    fn next_into(&mut self, buf: &mut Vec<u8>) -> Result<Option<FrameMeta>, CaptureError> {
        while !self.done {
            let (consumed, frame) = match self.inner.next() {
                Ok((length, block)) => (length, self.state.take(block, buf, &mut self.notes)),
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
            let at = self.offset;
            self.offset += consumed as u64;
            let frame = frame.map_err(|(block, why)| {
                self.done = true;
                CaptureError::BadBlock {
                    block,
                    offset: at,
                    why,
                }
            })?;
            if let Some(frame) = frame {
                return Ok(Some(frame));
            }
        }
        Ok(None)
    }
}

impl BlockState {
    fn take(
        &mut self,
        block: PcapBlockOwned,
        buf: &mut Vec<u8>,
        notes: &mut ReaderNotes,
    ) -> Result<Option<FrameMeta>, (&'static str, String)> {
        Ok(match block {
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
                // if_tsresol (pcapng 4.2): 10^-n or 2^-n s per unit; past
                // 10^-19 or 2^-63 no u64 counts it.
                let resolution = units_per_second(idb.if_tsresol).ok_or((
                    "interface description block",
                    format!("if_tsresol {:#04x}: no such clock", idb.if_tsresol),
                ))?;
                self.interfaces.push(Interface {
                    link: LinkType::from_pcap(idb.linktype),
                    resolution,
                    offset_s: idb.if_tsoffset,
                });
                None
            }
            PcapBlockOwned::NG(Block::EnhancedPacket(epb)) => {
                let Some(interface) = self.interfaces.get(epb.if_id as usize) else {
                    return Ok(None);
                };
                let units = (u64::from(epb.ts_high) << 32) | u64::from(epb.ts_low);
                let ts_ns = unix_ns(units, interface.resolution, interface.offset_s).ok_or((
                    "enhanced packet block",
                    format!(
                        "timestamp {units} at {} units/s plus if_tsoffset {} s is not a time in i64 nanoseconds",
                        interface.resolution, interface.offset_s
                    ),
                ))?;
                buf.clear();
                buf.extend_from_slice(&epb.data[..(epb.caplen as usize).min(epb.data.len())]);
                Some(FrameMeta {
                    ts_ns,
                    link: interface.link,
                    orig_len: epb.origlen,
                })
            }
            PcapBlockOwned::NG(Block::SimplePacket(spb)) => {
                // No timestamp: useless for gaps, counted as unusable by the caller.
                let Some(interface) = self.interfaces.first() else {
                    return Ok(None);
                };
                buf.clear();
                buf.extend_from_slice(spb.data);
                Some(FrameMeta {
                    ts_ns: i64::MIN,
                    link: interface.link,
                    orig_len: spb.origlen,
                })
            }
            PcapBlockOwned::NG(Block::InterfaceStatistics(isb)) => {
                // isb_ifdrop (option 4): packets dropped by the interface.
                for option in &isb.options {
                    if option.code.0 == 4 && option.value.len() >= 8 {
                        let drops = u64::from_le_bytes(
                            option.value[..8].try_into().expect("an 8-byte slice"),
                        );
                        *notes.capture_drops.get_or_insert(0) += drops;
                    }
                }
                None
            }
            PcapBlockOwned::NG(_) => None,
        })
    }
}

/// if_tsresol's units per second (pcapng 4.2): 10^n, or 2^n with the top
/// bit set; `None` past what a u64 counts. (pcap-parser 0.16's
/// `build_ts_resolution` refuses every power of two.)
fn units_per_second(tsresol: u8) -> Option<u64> {
    let exponent = u32::from(tsresol & 0x7f);
    if tsresol & 0x80 == 0 {
        10u64.checked_pow(exponent)
    } else {
        1u64.checked_shl(exponent)
    }
}

/// A pcapng timestamp (`units` at `resolution` per second, plus the
/// interface's whole-second offset) in ns since the epoch; `None` where
/// any step leaves i64, never a wrapped time.
fn unix_ns(units: u64, resolution: u64, offset_s: i64) -> Option<i64> {
    let secs = i64::try_from(units / resolution)
        .ok()?
        .checked_add(offset_s)?;
    // Below 10^9 after the division: fits.
    let frac_ns = (u128::from(units % resolution) * 1_000_000_000 / u128::from(resolution)) as i64;
    secs.checked_mul(1_000_000_000)?.checked_add(frac_ns)
}
