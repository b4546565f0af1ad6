//! Streaming pcap/pcapng reader: one reusable buffer, zero-copy frames.
//!
//! [`CaptureReader::next_frame`] returns a [`Frame`] that borrows the reader's
//! buffer, so the per-frame path does no allocation and no copy beyond the one
//! `read` into the buffer. Memory stays constant whatever the file size: the
//! buffer holds 1 MiB, and grows only for a single record larger than that
//! (up to [`MAX_FRAME_LEN`](crate::MAX_FRAME_LEN) plus the record header).
//!
//! Validation happens before anything is buffered: a length field is checked
//! against the format's minimum, against [`MAX_FRAME_LEN`](crate::MAX_FRAME_LEN),
//! against the snapshot length and, when the file size is known (files opened by
//! path), against the bytes left in the file. The first bad record ends the
//! stream with a [`CaptureError`]; every frame before it has been returned. After
//! an error (or the end of input) `next_frame` keeps returning `Ok(None)`.
//!
//! Frame numbers are 1-based and count what tshark 4.0 counts as frames: in
//! pcapng that is Enhanced, Simple and obsolete Packet blocks, and also systemd
//! Journal Export blocks and Custom blocks, which this reader skips (so the
//! numbers it returns can have gaps, and stay equal to Wireshark's).

use std::io::Read;
use std::path::Path;

use crate::buffer::{ReadBuf, DEFAULT_CAPACITY};
use crate::error::{CaptureError, ErrorDetail, ErrorKind};
use crate::format::{u16_at, u32_at, u64_at, CaptureFormat, Endian, MAX_BLOCK_LEN, MAX_FRAME_LEN};
use crate::LinkType;

/// Files at least this large get a read buffer on a transparent huge page
/// (`buffer.rs`, decision 0233).
const HUGE_BUFFER_MIN_FILE: u64 = 16 << 20;

/// One captured frame, borrowed from the reader's buffer until the next call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    /// 1-based frame number, as Wireshark numbers it.
    pub number: u64,
    /// Index into [`CaptureReader::interfaces`] (0 for pcap). In pcapng this is
    /// global across sections: the n-th Interface Description Block of the file.
    pub interface: u32,
    /// Link type of the frame's interface.
    pub link_type: LinkType,
    /// Nanoseconds since 1970-01-01 UTC, `if_tsoffset` applied. Simple Packet
    /// Blocks carry no time and give 0.
    pub timestamp_ns: i64,
    /// Length of the frame on the wire; larger than `data.len()` when the
    /// capture truncated it to the snapshot length.
    pub orig_len: u32,
    /// Captured bytes, starting with the link-layer header.
    pub data: &'a [u8],
    /// Byte offset of the frame's record (pcap) or block (pcapng) in the file.
    pub offset: u64,
    /// The packet's `opt_comment` (pcapng Enhanced Packet Blocks only).
    /// `offload gro` stores GSO metadata there (`gso_size=… gso_type=…`).
    pub comment: Option<&'a [u8]>,
    /// The interface `interface` refers to (the same as
    /// `reader.interfaces()[interface]`, reachable while the frame borrows the reader).
    pub interface_info: &'a Interface,
}

impl Frame<'_> {
    /// Captured length (`data.len()`).
    #[inline]
    pub fn caplen(&self) -> u32 {
        // data.len() <= MAX_FRAME_LEN, checked when read.
        u32::try_from(self.data.len()).unwrap_or(u32::MAX)
    }

    /// The GSO metadata `offload gro` stored with this super-packet, if any.
    pub fn gso(&self) -> Option<crate::GsoMeta> {
        self.comment.and_then(crate::GsoMeta::from_comment)
    }

    /// True when fewer bytes were captured than were on the wire (snaplen cut).
    #[inline]
    pub fn is_truncated(&self) -> bool {
        (self.data.len() as u64) < u64::from(self.orig_len)
    }
}

/// The `if_tsresol` byte of a pcapng interface: `0..=127` means units of
/// 10^-n s, `0x80 | n` means units of 2^-n s. pcap files give 6 or 9.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TsResolution(pub u8);

impl TsResolution {
    /// Microseconds, the pcapng default and classic pcap.
    pub const MICRO: TsResolution = TsResolution(6);
    /// Nanoseconds.
    pub const NANO: TsResolution = TsResolution(9);

    /// Number of timestamp units per second, `None` when it does not fit in a
    /// `u128` (an exponent above 38 for decimal or 127 for binary).
    pub fn units_per_second(self) -> Option<u128> {
        let n = u32::from(self.0 & 0x7f);
        if self.0 & 0x80 != 0 {
            1u128.checked_shl(n).filter(|_| n < 128)
        } else {
            10u128.checked_pow(n)
        }
    }
}

/// An interface of the capture (pcap files have exactly one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interface {
    /// Link type of its frames.
    pub link_type: LinkType,
    /// Snapshot length, 0 meaning "no limit" (pcapng).
    pub snaplen: u32,
    /// Timestamp resolution of its frames in the file.
    pub ts_resolution: TsResolution,
    /// `if_tsoffset`: seconds added to every timestamp.
    pub ts_offset_s: i64,
    /// `if_name`, when the file gives one.
    pub name: Option<String>,
    /// `if_fcslen` (pcapng) or the FCS length bits of the pcap link type field.
    pub fcs_len: Option<u8>,
    /// 0-based pcapng section the interface belongs to (0 for pcap).
    pub section: u32,
}

/// Stands in for an interface that cannot be missing (the parsers check the
/// id first); it only spares an `unwrap` on the per-frame path.
static NO_INTERFACE: Interface = Interface {
    link_type: LinkType(u32::MAX),
    snaplen: 0,
    ts_resolution: TsResolution::MICRO,
    ts_offset_s: 0,
    name: None,
    fcs_len: None,
    section: 0,
};

/// Converts raw timestamp units of one interface to nanoseconds.
#[derive(Clone, Copy, Debug)]
struct TsConv {
    /// Nanoseconds per unit when that is an integer, else 0 (use `per_second`).
    mul: u64,
    /// Units per second, for resolutions finer than a nanosecond or not dividing it.
    per_second: u128,
    /// `if_tsoffset` in nanoseconds.
    offset_ns: i128,
}

impl TsConv {
    fn new(res: TsResolution, offset_s: i64) -> Option<TsConv> {
        let per_second = res.units_per_second()?;
        let mul = if 1_000_000_000 % per_second == 0 {
            (1_000_000_000 / per_second) as u64
        } else {
            0
        };
        Some(TsConv {
            mul,
            per_second,
            offset_ns: i128::from(offset_s) * 1_000_000_000,
        })
    }

    /// Nanoseconds since 1970 of `units`, and whether the value had to be
    /// clamped to the `i64` range (years 1677 to 2262): a pcapng timestamp
    /// of up to 2^64 units plus an `if_tsoffset` of up to 2^63 seconds can
    /// lie far outside it. tshark keeps such times (64-bit seconds) and
    /// libpcap reads the frames too; we read them with the nearest time we
    /// can hold, and count them ([`CaptureReader::timestamps_clamped`]).
    #[inline]
    fn to_ns(self, units: u64) -> (i64, bool) {
        if self.mul != 0 && self.offset_ns == 0 {
            if let Some(v) = units.checked_mul(self.mul) {
                if let Ok(v) = i64::try_from(v) {
                    return (v, false);
                }
            }
        }
        self.to_ns_slow(units)
    }

    #[cold]
    fn to_ns_slow(self, units: u64) -> (i64, bool) {
        // units < 2^64 and 10^9 < 2^30: the product fits in u128.
        let ns = (u128::from(units) * 1_000_000_000) / self.per_second;
        // ns < 2^94 fits i128, as does the sum with an offset below 2^94.
        let t = ns as i128 + self.offset_ns;
        match i64::try_from(t) {
            Ok(v) => (v, false),
            Err(_) if t > 0 => (i64::MAX, true),
            Err(_) => (i64::MIN, true),
        }
    }
}

/// What the per-frame path needs to know about an interface.
#[derive(Clone, Copy, Debug)]
struct IfFast {
    link_type: LinkType,
    snaplen: u32,
    conv: TsConv,
}

#[derive(Clone, Copy, Debug)]
struct PcapState {
    order: Endian,
    nanos: bool,
    /// The largest captured length read without a note or a check: the
    /// file's snapshot length (when not 0) and [`MAX_FRAME_LEN`]
    /// (`next_pcap`'s buffered fast path).
    quiet_caplen: u32,
}

#[derive(Clone, Copy, Debug)]
struct NgSection {
    order: Endian,
    /// Index in `interfaces` of the section's interface 0.
    first_iface: u32,
    /// Interfaces the section declared so far.
    count: u32,
    /// 0-based section number.
    index: u32,
}

#[derive(Clone, Copy, Debug)]
enum State {
    Pcap(PcapState),
    PcapNg(NgSection),
}

const SHB: u32 = 0x0A0D_0D0A;
const IDB: u32 = 1;
const PB: u32 = 2;
const SPB: u32 = 3;
const EPB: u32 = 6;
const JEB: u32 = 9;
const CB_COPY: u32 = 0x0000_0BAD;
const CB_NOCOPY: u32 = 0x4000_0BAD;
const BYTE_ORDER_MAGIC: u32 = 0x1A2B_3C4D;

/// Streaming reader of pcap and pcapng captures. See the module documentation.
#[derive(Debug)]
pub struct CaptureReader {
    buf: ReadBuf,
    name: String,
    file_len: Option<u64>,
    format: CaptureFormat,
    state: State,
    interfaces: Vec<Interface>,
    fast: Vec<IfFast>,
    /// Number of the last frame counted (Wireshark numbering).
    number: u64,
    check_snaplen: bool,
    /// Frames whose captured length exceeded the snapshot length, and the
    /// first of them (read anyway unless `check_snaplen`).
    above_snaplen: u64,
    first_above_snaplen: u64,
    /// Frames whose timestamp was clamped to the `i64` nanosecond range,
    /// and the first of them.
    clamped_timestamps: u64,
    first_clamped_timestamp: u64,
    done: bool,
}

/// The four fields of a pcap record header (seconds, fraction, captured
/// and original length) from its first 16 bytes, zeros when fewer (the
/// caller checks the length first). One byte-order decision and one bounds
/// check for the four, rather than one of each per field: this runs once a
/// frame.
#[inline(always)]
fn record_header(b: &[u8], order: Endian) -> [u32; 4] {
    let Some(h) = b.first_chunk::<16>() else {
        return [0; 4];
    };
    let (a, b, c, d) = (
        [h[0], h[1], h[2], h[3]],
        [h[4], h[5], h[6], h[7]],
        [h[8], h[9], h[10], h[11]],
        [h[12], h[13], h[14], h[15]],
    );
    match order {
        Endian::Little => [
            u32::from_le_bytes(a),
            u32::from_le_bytes(b),
            u32::from_le_bytes(c),
            u32::from_le_bytes(d),
        ],
        Endian::Big => [
            u32::from_be_bytes(a),
            u32::from_be_bytes(b),
            u32::from_be_bytes(c),
            u32::from_be_bytes(d),
        ],
    }
}

/// Location of the structure an error is about.
#[derive(Clone, Copy)]
struct At {
    frame: Option<u64>,
    offset: u64,
    structure: &'static str,
}

impl CaptureReader {
    /// Opens a capture file; the format is recognised by its magic number, not
    /// by its name. Reads the file header (and the first pcapng section header).
    /// `-` reads standard input; FIFOs and `/dev/fd/N` are read once, in order.
    pub fn open(path: impl AsRef<Path>) -> Result<CaptureReader, CaptureError> {
        let path = path.as_ref();
        CaptureReader::open_as(path, crate::stdio::input_name(path))
    }

    /// Like [`CaptureReader::open`], naming the input `name` in errors (a
    /// [`SpooledInput`](crate::SpooledInput)'s copy keeps its input's name).
    pub fn open_as(path: &Path, name: String) -> Result<CaptureReader, CaptureError> {
        let io_err = |e, field| crate::stdio::input_io_error(&name, field, e);
        let f = crate::stdio::open_input(path, &name)?;
        if crate::stdio::is_stdio(path) {
            return CaptureReader::build(Box::new(f), name, None);
        }
        let meta = f.metadata().map_err(|e| io_err(e, "metadata"))?;
        // Only a regular file has a size we can trust for "remaining bytes" checks.
        let len = meta.is_file().then_some(meta.len());
        CaptureReader::build(Box::new(f), name, len)
    }

    /// Reads a capture from any byte stream (a pipe, stdin, a decompressor);
    /// `name` is used in error messages. Reads the file header now.
    pub fn from_reader(
        src: impl Read + Send + 'static,
        name: impl Into<String>,
    ) -> Result<CaptureReader, CaptureError> {
        CaptureReader::build(Box::new(src), name.into(), None)
    }

    /// A reader over `src` (for [`crate::CaptureInput`]), with the file's
    /// size when known.
    pub(crate) fn from_source(
        src: Box<dyn Read + Send>,
        name: String,
        file_len: Option<u64>,
    ) -> Result<CaptureReader, CaptureError> {
        CaptureReader::build(src, name, file_len)
    }

    fn build(
        src: Box<dyn Read + Send>,
        name: String,
        file_len: Option<u64>,
    ) -> Result<CaptureReader, CaptureError> {
        // A huge page is worth its 2 MiB of zeroing only for a file that is
        // read for a while (the checksum probe and small captures are not).
        let huge = file_len.is_some_and(|len| len >= HUGE_BUFFER_MIN_FILE);
        let buf = ReadBuf::new(src, DEFAULT_CAPACITY, huge)
            .map_err(|e| crate::stdio::input_io_error(&name, "read buffer", e))?;
        let mut r = CaptureReader {
            buf,
            name,
            file_len,
            format: CaptureFormat::Pcap,
            state: State::Pcap(PcapState {
                order: Endian::Little,
                nanos: false,
                quiet_caplen: 0,
            }),
            interfaces: Vec::new(),
            fast: Vec::new(),
            number: 0,
            // libpcap and tshark read such frames; so do we unless strict.
            check_snaplen: false,
            above_snaplen: 0,
            first_above_snaplen: 0,
            clamped_timestamps: 0,
            first_clamped_timestamp: 0,
            done: false,
        };
        let at = At {
            frame: None,
            offset: 0,
            structure: "file header",
        };
        let have = r.fill(4, at, "magic")?;
        if have < 4 {
            return Err(r.err(
                at,
                "magic",
                ErrorKind::Truncated {
                    needed: 4,
                    available: have as u64,
                },
            ));
        }
        let magic = u32_at(r.buf.data(), 0, Endian::Big);
        if magic == SHB {
            r.format = CaptureFormat::PcapNg;
            r.state = State::PcapNg(NgSection {
                order: Endian::Little,
                first_iface: 0,
                count: 0,
                index: 0,
            });
            r.read_shb(true)?;
        } else {
            r.read_pcap_header()?;
        }
        Ok(r)
    }

    /// The file's format.
    pub fn format(&self) -> CaptureFormat {
        self.format
    }

    /// The name used in error messages (the path for files).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Bytes consumed so far (the offset of the next record), for progress bars.
    pub fn bytes_read(&self) -> u64 {
        self.buf.offset()
    }

    /// Size of the file when known (files opened by path), for progress bars.
    pub fn file_len(&self) -> Option<u64> {
        self.file_len
    }

    /// Interfaces declared so far (pcapng declares them as the file goes on;
    /// a frame's `interface` is always an index into this slice).
    pub fn interfaces(&self) -> &[Interface] {
        &self.interfaces
    }

    /// Number of the last frame read (Wireshark numbering), 0 before the first.
    pub fn last_frame_number(&self) -> u64 {
        self.number
    }

    /// Whether a captured length above the snapshot length is an error
    /// (`--strict`). By default such frames are read whole and counted
    /// ([`CaptureReader::above_snaplen`]), as tshark reads them (libpcap
    /// reads them too, cut to the snapshot length): files from writers that
    /// lie about their snapshot length are common (tcpdump's own
    /// tests/pim-packet-assortment.pcap). A snapshot length of 0 never limits.
    pub fn set_snaplen_check(&mut self, on: bool) {
        self.check_snaplen = on;
    }

    /// Frames read so far whose captured length exceeded their snapshot
    /// length, and the number of the first (0 when none).
    pub fn above_snaplen(&self) -> (u64, u64) {
        (self.above_snaplen, self.first_above_snaplen)
    }

    /// Frames read so far whose timestamp lay outside the nanosecond range
    /// a [`Frame`] holds (1677 to 2262: a huge pcapng timestamp or
    /// `if_tsoffset`) and was clamped to its nearest end, and the number of
    /// the first (0 when none). tshark shows such times; libpcap and
    /// tshark read the frames, and so do we.
    pub fn timestamps_clamped(&self) -> (u64, u64) {
        (self.clamped_timestamps, self.first_clamped_timestamp)
    }

    fn note_above_snaplen(&mut self) {
        if self.above_snaplen == 0 {
            self.first_above_snaplen = self.number + 1;
        }
        self.above_snaplen += 1;
    }

    /// The next frame, `Ok(None)` at the end of the capture. The frame borrows
    /// the reader's buffer. On error the reader stops: later calls give `Ok(None)`.
    #[inline(always)]
    pub fn next_frame(&mut self) -> Result<Option<Frame<'_>>, CaptureError> {
        if self.done {
            return Ok(None);
        }
        // Stop pessimistically: only a successfully returned frame clears the
        // flag (inside the parsers, because the returned frame keeps `self`
        // borrowed, so nothing can be done here after the call).
        self.done = true;
        match self.state {
            State::Pcap(p) => self.next_pcap(p),
            State::PcapNg(_) => self.next_pcapng(),
        }
    }

    // ----- helpers -----

    fn err(&self, at: At, field: &'static str, kind: ErrorKind) -> CaptureError {
        CaptureError::from(ErrorDetail {
            file: self.name.clone(),
            frame: at.frame,
            last_frame: self.number,
            offset: at.offset,
            structure: at.structure,
            field,
            kind,
        })
    }

    /// `fill` with I/O errors turned into a located error.
    #[inline]
    fn fill(&mut self, n: usize, at: At, field: &'static str) -> Result<usize, CaptureError> {
        match self.buf.fill(n) {
            Ok(k) => Ok(k),
            Err(e) => Err(self.err(at, field, ErrorKind::Io(e))),
        }
    }

    /// Fills `n` bytes or reports the structure as truncated.
    #[inline]
    fn need(&mut self, n: usize, at: At, field: &'static str) -> Result<(), CaptureError> {
        let have = self.fill(n, at, field)?;
        if have < n {
            return Err(self.err(
                at,
                field,
                ErrorKind::Truncated {
                    needed: n as u64,
                    available: have as u64,
                },
            ));
        }
        Ok(())
    }

    /// Bytes of the file after `pos`, when the size is known.
    #[inline]
    fn remaining_after(&self, pos: u64) -> Option<u64> {
        self.file_len.map(|l| l.saturating_sub(pos))
    }

    // ----- pcap -----

    fn read_pcap_header(&mut self) -> Result<(), CaptureError> {
        let at = At {
            frame: None,
            offset: 0,
            structure: "file header",
        };
        let magic_le = u32_at(self.buf.data(), 0, Endian::Little);
        let (order, nanos) = match magic_le {
            0xA1B2_C3D4 => (Endian::Little, false),
            0xA1B2_3C4D => (Endian::Little, true),
            0xD4C3_B2A1 => (Endian::Big, false),
            0x4D3C_B2A1 => (Endian::Big, true),
            _ => {
                let magic = u32_at(self.buf.data(), 0, Endian::Big);
                return Err(self.err(at, "magic", ErrorKind::UnknownMagic { magic }));
            }
        };
        self.need(
            24,
            At {
                structure: "file",
                ..at
            },
            "header",
        )?;
        let h = self.buf.data();
        let major = u16_at(h, 4, order);
        let minor = u16_at(h, 6, order);
        let snaplen = u32_at(h, 16, order);
        let lt_field = u32_at(h, 20, order);
        if major != 2 {
            return Err(self.err(
                at,
                "version",
                ErrorKind::UnsupportedVersion { major, minor },
            ));
        }
        // Bits 26..31 carry the FCS length (draft-ietf-opsawg-pcap, libpcap's
        // LT_FCS_LENGTH); the link type proper is the low 26 bits.
        let link_type = LinkType(lt_field & 0x03FF_FFFF);
        let fcs_len = (lt_field & 0x0400_0000 != 0).then(|| ((lt_field >> 28) as u8) * 2);
        let res = if nanos {
            TsResolution::NANO
        } else {
            TsResolution::MICRO
        };
        self.interfaces.push(Interface {
            link_type,
            snaplen,
            ts_resolution: res,
            ts_offset_s: 0,
            name: None,
            fcs_len,
            section: 0,
        });
        // The pcap path converts its two fields itself; `conv` only keeps the
        // interface table uniform. 10^6 and 10^9 always convert.
        let conv = TsConv::new(res, 0).unwrap_or(TsConv {
            mul: 1000,
            per_second: 1_000_000,
            offset_ns: 0,
        });
        self.fast.push(IfFast {
            link_type,
            snaplen,
            conv,
        });
        self.buf.consume(24);
        let quiet_caplen = match snaplen {
            0 => MAX_FRAME_LEN,
            n => n.min(MAX_FRAME_LEN),
        };
        self.state = State::Pcap(PcapState {
            order,
            nanos,
            quiet_caplen,
        });
        Ok(())
    }

    #[inline]
    fn next_pcap(&mut self, p: PcapState) -> Result<Option<Frame<'_>>, CaptureError> {
        let offset = self.buf.offset();
        // Nearly every record: buffered whole, its captured length within
        // the snapshot length and `MAX_FRAME_LEN`, inside the file's
        // length. Every check below passes for it, with nothing to note,
        // so it is read here without them (the same frame; the property
        // test `pcap_fast_path_equals_checked_read` compares both).
        let data = self.buf.data();
        if let Some(h) = data.first_chunk::<16>() {
            let [ts_sec, ts_frac, caplen, orig_len] = record_header(h, p.order);
            let total = 16 + caplen as usize;
            if caplen <= p.quiet_caplen
                && data.len() >= total
                && self
                    .file_len
                    .is_none_or(|l| offset.saturating_add(total as u64) <= l)
            {
                return Ok(Some(self.pcap_frame(
                    p,
                    offset,
                    [ts_sec, ts_frac, orig_len],
                    total,
                )));
            }
        }
        self.next_pcap_checked(p, offset)
    }

    /// The frame of the pcap record at `offset`, `total` bytes buffered
    /// with its header (`[seconds, fraction, orig_len]`), every check
    /// passed: counts and returns it.
    #[inline(always)]
    fn pcap_frame(
        &mut self,
        p: PcapState,
        offset: u64,
        [ts_sec, ts_frac, orig_len]: [u32; 3],
        total: usize,
    ) -> Frame<'_> {
        // u32 seconds * 1e9 + u32 fraction * 1000 < 4.3e18 + 4.3e12 < i64::MAX.
        let frac_ns = if p.nanos {
            i64::from(ts_frac)
        } else {
            i64::from(ts_frac) * 1000
        };
        let timestamp_ns = i64::from(ts_sec) * 1_000_000_000 + frac_ns;
        let link_type = self
            .fast
            .first()
            .map_or(LinkType::ETHERNET, |i| i.link_type);
        self.number += 1;
        self.done = false;
        let rec = self.buf.take(total);
        Frame {
            number: self.number,
            interface: 0,
            link_type,
            timestamp_ns,
            orig_len,
            data: rec.get(16..).unwrap_or(&[]),
            offset,
            interface_info: self.interfaces.first().unwrap_or(&NO_INTERFACE),
            comment: None,
        }
    }

    /// [`Self::next_pcap`] with every check: a record not buffered whole
    /// (read more), cut by the end of the file, or whose captured length
    /// is above the snapshot length or `MAX_FRAME_LEN`.
    #[cold]
    #[inline(never)]
    fn next_pcap_checked(
        &mut self,
        p: PcapState,
        offset: u64,
    ) -> Result<Option<Frame<'_>>, CaptureError> {
        let number = self.number + 1;
        let at = At {
            frame: Some(number),
            offset,
            structure: "record header",
        };
        let have = self.fill(16, at, "header")?;
        if have == 0 {
            return Ok(None);
        }
        if have < 16 {
            return Err(self.err(
                At {
                    structure: "record",
                    ..at
                },
                "header",
                ErrorKind::Truncated {
                    needed: 16,
                    available: have as u64,
                },
            ));
        }
        let [ts_sec, ts_frac, caplen, orig_len] = record_header(self.buf.data(), p.order);
        let snaplen = self.fast.first().map_or(0, |i| i.snaplen);
        if let Some(rem) = self.remaining_after(offset + 16) {
            if u64::from(caplen) > rem {
                return Err(self.err(
                    at,
                    "caplen",
                    ErrorKind::ExceedsRemaining {
                        value: caplen.into(),
                        remaining: rem,
                    },
                ));
            }
        }
        if caplen > MAX_FRAME_LEN {
            return Err(self.err(
                at,
                "caplen",
                ErrorKind::TooLarge {
                    value: caplen.into(),
                    max: MAX_FRAME_LEN.into(),
                },
            ));
        }
        if snaplen != 0 && caplen > snaplen {
            self.note_above_snaplen();
        }
        if self.check_snaplen && snaplen != 0 && caplen > snaplen {
            return Err(self.err(
                at,
                "caplen",
                ErrorKind::ExceedsSnaplen {
                    value: caplen.into(),
                    snaplen,
                },
            ));
        }
        let total = 16 + caplen as usize;
        let have = self.fill(total, at, "packet data")?;
        if have < total {
            let at = At {
                structure: "record",
                ..at
            };
            return Err(self.err(
                at,
                "packet data",
                ErrorKind::Truncated {
                    needed: caplen.into(),
                    available: (have - 16) as u64,
                },
            ));
        }
        Ok(Some(self.pcap_frame(
            p,
            offset,
            [ts_sec, ts_frac, orig_len],
            total,
        )))
    }

    // ----- pcapng -----

    fn section(&self) -> NgSection {
        match self.state {
            State::PcapNg(s) => s,
            State::Pcap(_) => NgSection {
                order: Endian::Little,
                first_iface: 0,
                count: 0,
                index: 0,
            },
        }
    }

    /// Checks a block length read at `offset` for a block that will be buffered whole.
    fn check_block_len(&self, at: At, len: u32, min: u32, max: u32) -> Result<(), CaptureError> {
        const F: &str = "block_total_length";
        if len < min {
            return Err(self.err(
                at,
                F,
                ErrorKind::TooSmall {
                    value: len.into(),
                    min: min.into(),
                },
            ));
        }
        if !len.is_multiple_of(4) {
            return Err(self.err(at, F, ErrorKind::NotMultipleOf4 { value: len.into() }));
        }
        if let Some(rem) = self.remaining_after(at.offset) {
            if u64::from(len) > rem {
                return Err(self.err(
                    at,
                    F,
                    ErrorKind::ExceedsRemaining {
                        value: len.into(),
                        remaining: rem,
                    },
                ));
            }
        }
        if len > max {
            return Err(self.err(
                at,
                F,
                ErrorKind::TooLarge {
                    value: len.into(),
                    max: max.into(),
                },
            ));
        }
        Ok(())
    }

    /// Buffers a whole block of `len` bytes (already checked) and verifies its
    /// trailing length.
    fn load_block(&mut self, at: At, len: u32, order: Endian) -> Result<(), CaptureError> {
        let n = len as usize;
        let have = self.fill(n, at, "body")?;
        if have < n {
            return Err(self.err(
                at,
                "body",
                ErrorKind::Truncated {
                    needed: n as u64,
                    available: have as u64,
                },
            ));
        }
        let trailing = u32_at(self.buf.data(), n - 4, order);
        if trailing != len {
            let at = At {
                offset: at.offset + u64::from(len) - 4,
                ..at
            };
            return Err(self.err(
                at,
                "trailing block_total_length",
                ErrorKind::TrailingLengthMismatch {
                    leading: len,
                    trailing,
                },
            ));
        }
        Ok(())
    }

    /// Reads a Section Header Block at the current position (its type already seen).
    fn read_shb(&mut self, first: bool) -> Result<(), CaptureError> {
        let offset = self.buf.offset();
        let at = At {
            frame: None,
            offset,
            structure: "section header block",
        };
        self.need(12, at, "byte_order_magic")?;
        let h = self.buf.data();
        let order = match u32_at(h, 8, Endian::Little) {
            BYTE_ORDER_MAGIC => Endian::Little,
            0x4D3C_2B1A => Endian::Big,
            other => {
                return Err(self.err(
                    at,
                    "byte_order_magic",
                    ErrorKind::InvalidValue {
                        value: other.into(),
                        reason: "not 0x1A2B3C4D in either byte order",
                    },
                ));
            }
        };
        let len = u32_at(h, 4, order);
        self.check_block_len(at, len, 28, MAX_BLOCK_LEN)?;
        self.load_block(at, len, order)?;
        let h = self.buf.data();
        let major = u16_at(h, 12, order);
        let minor = u16_at(h, 14, order);
        // 1.0 is the version everyone writes; Wireshark also reads 1.2.
        if major != 1 || !(minor == 0 || minor == 2) {
            return Err(self.err(
                at,
                "version",
                ErrorKind::UnsupportedVersion { major, minor },
            ));
        }
        let index = if first { 0 } else { self.section().index + 1 };
        let first_iface = u32::try_from(self.interfaces.len()).unwrap_or(u32::MAX);
        self.state = State::PcapNg(NgSection {
            order,
            first_iface,
            count: 0,
            index,
        });
        self.buf.consume(len as usize);
        Ok(())
    }

    fn next_pcapng(&mut self) -> Result<Option<Frame<'_>>, CaptureError> {
        loop {
            let sec = self.section();
            let offset = self.buf.offset();
            let at = At {
                frame: None,
                offset,
                structure: "block",
            };
            let have = self.fill(8, at, "header")?;
            if have == 0 {
                return Ok(None);
            }
            if have < 8 {
                return Err(self.err(
                    at,
                    "header",
                    ErrorKind::Truncated {
                        needed: 8,
                        available: have as u64,
                    },
                ));
            }
            let btype = u32_at(self.buf.data(), 0, sec.order);
            let len = u32_at(self.buf.data(), 4, sec.order);
            match btype {
                EPB | PB | SPB => return self.read_packet_block(btype, len, sec),
                SHB => self.read_shb(false)?,
                IDB => self.read_idb(len, sec)?,
                _ => {
                    if matches!(btype, JEB | CB_COPY | CB_NOCOPY) {
                        // tshark 4.0 shows these as frames; keep its numbering.
                        self.number += 1;
                    }
                    self.skip_block(len, sec)?;
                }
            }
        }
    }

    /// Skips a block of any size without buffering it whole.
    fn skip_block(&mut self, len: u32, sec: NgSection) -> Result<(), CaptureError> {
        let offset = self.buf.offset();
        let at = At {
            frame: None,
            offset,
            structure: "block",
        };
        // No upper bound: skipped blocks are streamed, never buffered.
        self.check_block_len(at, len, 12, u32::MAX)?;
        let body = u64::from(len) - 4;
        let skipped = match self.buf.skip(body) {
            Ok(k) => k,
            Err(e) => return Err(self.err(at, "body", ErrorKind::Io(e))),
        };
        if skipped < body {
            return Err(self.err(
                at,
                "body",
                ErrorKind::Truncated {
                    needed: len.into(),
                    available: skipped,
                },
            ));
        }
        let tat = At {
            offset: offset + body,
            ..at
        };
        let have = self.fill(4, tat, "trailing block_total_length")?;
        if have < 4 {
            return Err(self.err(
                at,
                "body",
                ErrorKind::Truncated {
                    needed: len.into(),
                    available: body + have as u64,
                },
            ));
        }
        let trailing = u32_at(self.buf.data(), 0, sec.order);
        if trailing != len {
            return Err(self.err(
                tat,
                "trailing block_total_length",
                ErrorKind::TrailingLengthMismatch {
                    leading: len,
                    trailing,
                },
            ));
        }
        self.buf.consume(4);
        Ok(())
    }

    fn read_idb(&mut self, len: u32, sec: NgSection) -> Result<(), CaptureError> {
        let offset = self.buf.offset();
        let at = At {
            frame: None,
            offset,
            structure: "interface description block",
        };
        let o = sec.order;
        self.check_block_len(at, len, 20, MAX_BLOCK_LEN)?;
        self.load_block(at, len, o)?;
        let b = self.buf.data().get(..len as usize).unwrap_or(&[]);
        let link_type = LinkType(u32::from(u16_at(b, 8, o)));
        let snaplen = u32_at(b, 12, o);
        let mut res = TsResolution::MICRO;
        let mut ts_offset_s = 0i64;
        let mut name = None;
        let mut fcs_len = None;
        // Options: code u16, length u16, value padded to 4 bytes; code 0 ends.
        let end = len as usize - 4;
        let mut pos = 16usize;
        while pos + 4 <= end {
            let code = u16_at(b, pos, o);
            let olen = usize::from(u16_at(b, pos + 2, o));
            if code == 0 {
                break;
            }
            let vstart = pos + 4;
            let Some(val) = b
                .get(vstart..vstart + olen)
                .filter(|_| vstart + olen <= end)
            else {
                let at = At {
                    offset: offset + pos as u64,
                    ..at
                };
                return Err(self.err(
                    at,
                    "option_length",
                    ErrorKind::InvalidValue {
                        value: olen as u64,
                        reason: "option runs past the end of the block",
                    },
                ));
            };
            match (code, olen) {
                (9, 1..) => res = TsResolution(val[0]),
                (14, 8) => ts_offset_s = u64_at(val, 0, o) as i64,
                (2, _) => name = Some(String::from_utf8_lossy(val).into_owned()),
                (13, 1..) => fcs_len = Some(val[0]),
                _ => {}
            }
            pos = vstart + olen.div_ceil(4) * 4;
        }
        let Some(conv) = TsConv::new(res, ts_offset_s) else {
            return Err(self.err(
                at,
                "if_tsresol",
                ErrorKind::InvalidValue {
                    value: res.0.into(),
                    reason: "resolution finer than 10^-38 or 2^-127 s",
                },
            ));
        };
        self.interfaces.push(Interface {
            link_type,
            snaplen,
            ts_resolution: res,
            ts_offset_s,
            name,
            fcs_len,
            section: sec.index,
        });
        self.fast.push(IfFast {
            link_type,
            snaplen,
            conv,
        });
        self.state = State::PcapNg(NgSection {
            count: sec.count + 1,
            ..sec
        });
        self.buf.consume(len as usize);
        Ok(())
    }

    #[inline]
    fn read_packet_block(
        &mut self,
        btype: u32,
        len: u32,
        sec: NgSection,
    ) -> Result<Option<Frame<'_>>, CaptureError> {
        let offset = self.buf.offset();
        let number = self.number + 1;
        let structure = match btype {
            EPB => "enhanced packet block",
            SPB => "simple packet block",
            _ => "packet block",
        };
        let at = At {
            frame: Some(number),
            offset,
            structure,
        };
        let o = sec.order;
        let fixed: u32 = if btype == SPB { 16 } else { 32 };
        self.check_block_len(at, len, fixed, MAX_BLOCK_LEN)?;
        self.load_block(at, len, o)?;
        let b = self.buf.data();
        let (local_if, ts_hi, ts_lo, caplen, orig_len) = if btype == SPB {
            let orig = u32_at(b, 8, o);
            (0, 0, 0, orig, orig)
        } else {
            let iface = if btype == EPB {
                u32_at(b, 8, o)
            } else {
                u32::from(u16_at(b, 8, o))
            };
            (
                iface,
                u32_at(b, 12, o),
                u32_at(b, 16, o),
                u32_at(b, 20, o),
                u32_at(b, 24, o),
            )
        };
        if local_if >= sec.count {
            return Err(self.err(
                at,
                "interface_id",
                ErrorKind::UnknownInterface {
                    interface: local_if,
                    declared: sec.count,
                },
            ));
        }
        let gi = sec.first_iface + local_if;
        let Some(iface) = self.fast.get(gi as usize).copied() else {
            return Err(self.err(
                at,
                "interface_id",
                ErrorKind::UnknownInterface {
                    interface: local_if,
                    declared: sec.count,
                },
            ));
        };
        let room = len - fixed;
        let caplen = if btype == SPB {
            // The SPB has no captured length: it is the original length cut to
            // the snapshot length and to the block (RFC draft, section 4.4).
            let mut c = caplen.min(room);
            if iface.snaplen != 0 {
                c = c.min(iface.snaplen);
            }
            c
        } else {
            if caplen > MAX_FRAME_LEN {
                return Err(self.err(
                    at,
                    "caplen",
                    ErrorKind::TooLarge {
                        value: caplen.into(),
                        max: MAX_FRAME_LEN.into(),
                    },
                ));
            }
            if caplen > room {
                return Err(self.err(
                    at,
                    "caplen",
                    ErrorKind::ExceedsBlock {
                        value: caplen.into(),
                        room: room.into(),
                    },
                ));
            }
            if iface.snaplen != 0 && caplen > iface.snaplen {
                self.note_above_snaplen();
            }
            if self.check_snaplen && iface.snaplen != 0 && caplen > iface.snaplen {
                return Err(self.err(
                    at,
                    "caplen",
                    ErrorKind::ExceedsSnaplen {
                        value: caplen.into(),
                        snaplen: iface.snaplen,
                    },
                ));
            }
            caplen
        };
        let timestamp_ns = if btype == SPB {
            0
        } else {
            let units = (u64::from(ts_hi) << 32) | u64::from(ts_lo);
            let (t, clamped) = iface.conv.to_ns(units);
            if clamped {
                if self.clamped_timestamps == 0 {
                    self.first_clamped_timestamp = number;
                }
                self.clamped_timestamps += 1;
            }
            t
        };
        let data_at = (fixed - 4) as usize;
        self.number = number;
        self.done = false;
        let blk = self.buf.take(len as usize);
        let data = blk.get(data_at..data_at + caplen as usize).unwrap_or(&[]);
        let opts_at = data_at + (caplen as usize).div_ceil(4) * 4;
        let comment = if btype == SPB {
            None
        } else {
            blk.get(opts_at..(len as usize).saturating_sub(4))
                .and_then(|opts| find_comment(opts, o))
        };
        Ok(Some(Frame {
            number,
            interface: gi,
            link_type: iface.link_type,
            timestamp_ns,
            orig_len,
            data,
            offset,
            interface_info: self.interfaces.get(gi as usize).unwrap_or(&NO_INTERFACE),
            comment,
        }))
    }
}

/// The first `opt_comment` (code 1) of a packet block's options; malformed
/// options are ignored (they never make a frame unreadable).
fn find_comment(mut opts: &[u8], o: Endian) -> Option<&[u8]> {
    while opts.len() >= 4 {
        let code = u16_at(opts, 0, o);
        let len = u16_at(opts, 2, o) as usize;
        if code == 0 {
            return None;
        }
        let value = opts.get(4..4 + len)?;
        if code == 1 {
            return Some(value);
        }
        opts = opts.get(4 + len.div_ceil(4) * 4..)?;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolutions_convert_exactly() {
        let us = TsConv::new(TsResolution(6), 0).unwrap();
        assert_eq!(us.to_ns(1_500_000), (1_500_000_000, false));
        let ps = TsConv::new(TsResolution(12), 0).unwrap();
        assert_eq!(ps.to_ns(1_234_567), (1_234, false));
        // 2^-10 s units: 1024 units is one second.
        let bin = TsConv::new(TsResolution(0x80 | 10), 0).unwrap();
        assert_eq!(bin.to_ns(1024 * 3 + 512), (3_500_000_000, false));
        // 2^-30 s: 1 unit is 0.93 ns, rounded down.
        let bin30 = TsConv::new(TsResolution(0x80 | 30), 0).unwrap();
        assert_eq!(bin30.to_ns(1 << 30), (1_000_000_000, false));
        assert_eq!(bin30.to_ns(1), (0, false));
        let off = TsConv::new(TsResolution(9), -10).unwrap();
        assert_eq!(off.to_ns(5), (-9_999_999_995, false));
    }

    #[test]
    fn out_of_range_timestamps_are_clamped_not_wrapped() {
        let s = TsConv::new(TsResolution(0), 0).unwrap();
        assert_eq!(s.to_ns(u64::MAX), (i64::MAX, true));
        let ns = TsConv::new(TsResolution(9), 0).unwrap();
        assert_eq!(ns.to_ns(u64::MAX), (i64::MAX, true));
        assert_eq!(ns.to_ns(i64::MAX as u64), (i64::MAX, false));
        let far_back = TsConv::new(TsResolution(6), -(1 << 62)).unwrap();
        assert_eq!(far_back.to_ns(1), (i64::MIN, true));
        let far_ahead = TsConv::new(TsResolution(6), i64::MAX).unwrap();
        assert_eq!(far_ahead.to_ns(0), (i64::MAX, true));
    }

    /// A source that hands out one byte per read: the reader never holds
    /// a record with a captured length ahead of its header, so
    /// `next_pcap` takes its checked path for every record with data.
    struct OneByte(std::io::Cursor<Vec<u8>>);

    impl Read for OneByte {
        fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
            let n = b.len().min(1);
            self.0.read(&mut b[..n])
        }
    }

    type Read1 = (u64, u32, LinkType, i64, u32, Vec<u8>, u64);

    /// Every frame's fields, the error that ended the read, the frames
    /// above the snapshot length.
    fn read_all(mut r: CaptureReader) -> (Vec<Read1>, Option<String>, (u64, u64)) {
        let mut frames = Vec::new();
        let err = loop {
            match r.next_frame() {
                Ok(Some(f)) => frames.push((
                    f.number,
                    f.interface,
                    f.link_type,
                    f.timestamp_ns,
                    f.orig_len,
                    f.data.to_vec(),
                    f.offset,
                )),
                Ok(None) => break None,
                Err(e) => break Some(e.to_string()),
            }
        };
        (frames, err, r.above_snaplen())
    }

    /// A pcap file: byte order, nanosecond magic, snapshot length, link
    /// type, records `(seconds, fraction, captured bytes, orig_len)`.
    fn pcap_bytes(
        big: bool,
        nanos: bool,
        snaplen: u32,
        link: u32,
        recs: &[(u32, u32, u16, u32)],
    ) -> Vec<u8> {
        let w32 = |v: u32| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let w16 = |v: u16| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let mut b = Vec::new();
        b.extend(w32(if nanos { 0xA1B2_3C4D } else { 0xA1B2_C3D4 }));
        b.extend(w16(2));
        b.extend(w16(4));
        b.extend([0u8; 8]);
        b.extend(w32(snaplen));
        b.extend(w32(link));
        for (i, &(sec, frac, cap, orig)) in recs.iter().enumerate() {
            b.extend(w32(sec));
            b.extend(w32(frac));
            b.extend(w32(cap as u32));
            b.extend(w32(orig));
            b.extend((0..cap).map(|k| (k as usize * 7 + i) as u8));
        }
        b
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 1000,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// `next_pcap`'s fast path (a record buffered whole, within the
        /// snapshot length, `MAX_FRAME_LEN` and the file's length) gives
        /// exactly what the checked path gives: the same frames, the same
        /// error at the same frame, the same count of frames above the
        /// snapshot length. Files of both byte orders and resolutions,
        /// snapshot lengths 0 and below, at and above the records'
        /// lengths, strict or not, with the file's length known (right,
        /// or shorter as for a file cut after it was opened) or not,
        /// mutated and cut.
        #[test]
        fn pcap_fast_path_equals_checked_read(
            big in proptest::prelude::any::<bool>(),
            nanos in proptest::prelude::any::<bool>(),
            snaplen in proptest::prelude::prop_oneof![
                proptest::prelude::Just(0u32), 40u32..120, proptest::prelude::Just(65535u32)
            ],
            link in proptest::prelude::prop_oneof![
                proptest::prelude::Just(1u32), proptest::prelude::Just(101u32)
            ],
            recs in proptest::collection::vec(
                (proptest::prelude::any::<u32>(), 0u32..2_000_000, 0u16..160, 0u32..400),
                0..8,
            ),
            edits in proptest::collection::vec(
                (proptest::prelude::any::<proptest::sample::Index>(), proptest::prelude::any::<u8>()),
                0..3,
            ),
            cut in proptest::prelude::any::<proptest::sample::Index>(),
            do_cut in proptest::prelude::any::<bool>(),
            known_len in 0u8..3,
            strict in proptest::prelude::any::<bool>(),
        ) {
            let mut b = pcap_bytes(big, nanos, snaplen, link, &recs);
            // Mutate records only (a broken file header stops both alike).
            for (at, v) in edits {
                if b.len() > 24 {
                    let i = 24 + at.index(b.len() - 24);
                    b[i] = v;
                }
            }
            if do_cut {
                let n = cut.index(b.len() + 1);
                b.truncate(n.max(24));
            }
            let file_len = match known_len {
                0 => None,
                1 => Some(b.len() as u64),
                _ => Some((b.len() as u64).saturating_sub(20)),
            };
            let open = |src: Box<dyn Read + Send>| {
                let mut r = CaptureReader::from_source(src, "t.pcap".into(), file_len)
                    .expect("a valid file header");
                r.set_snaplen_check(strict);
                r
            };
            let whole = read_all(open(Box::new(std::io::Cursor::new(b.clone()))));
            let bytewise = read_all(open(Box::new(OneByte(std::io::Cursor::new(b)))));
            proptest::prop_assert_eq!(whole, bytewise);
        }
    }

    #[test]
    fn absurd_resolutions_are_rejected() {
        assert!(TsConv::new(TsResolution(39), 0).is_none());
        assert!(TsConv::new(TsResolution(38), 0).is_some());
        assert!(TsConv::new(TsResolution(0x80 | 127), 0).is_some());
        assert_eq!(TsResolution(0x80).units_per_second(), Some(1));
    }
}
