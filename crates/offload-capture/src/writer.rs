//! pcap and pcapng writer with nanosecond timestamps and frames up to 16 MiB.
//!
//! The format is chosen by the caller or from the output file's extension
//! (`.pcap`/`.cap` → pcap, `.pcapng` → pcapng). Both formats are written
//! little-endian with nanosecond timestamps (pcap: magic `0xA1B23C4D`; pcapng:
//! `if_tsresol = 9` on every interface).
//!
//! **Interfaces.** pcap holds one link type: the first frame (or
//! [`CaptureWriter::add_interface`]) fixes it and a frame of another link type
//! is an error. pcapng writes one Interface Description Block per distinct link
//! type of the frames given with `interface: None`, created on first use, or
//! exactly the interfaces the caller declared with `add_interface` when frames
//! name one (`interface: Some(id)`). [`CaptureWriter::copy_frame`] does the
//! latter for frames from a reader: one output interface per input interface.
//!
//! **Large frames** (see `docs/decisions/0011-large-frames.md`). With
//! [`Oversize::Keep`] (the default) every byte is written: frames above
//! [`WIRESHARK_MAX_CAPLEN`] stay lossless, and this crate reads them back, but
//! tshark 4 and tcpdump stop at the first of them. The header's snapshot length
//! always covers what was written (files are patched in [`CaptureWriter::finish`];
//! a non-seekable stream announces [`MAX_FRAME_LEN`]). pcapng interfaces then say
//! snaplen 0, "no limit". With [`Oversize::Truncate`] frames are cut to the given
//! length and keep their original length, as a capture with that snaplen would.
//! [`WriterStats`] counts the frames above the Wireshark limit so that a command
//! can warn.
//!
//! The per-frame path gathers a stack header, the caller's slice or slices
//! ([`CaptureWriter::write_frame_parts`]: a zero-copy GRO super-packet's
//! head and payload ranges) and the record's trailer into one vectored
//! write to a `BufWriter`: no allocation, and a record larger than the
//! buffer goes to the file in one `writev` without being copied into it.

use std::fs::File;
use std::io::{self, BufWriter, IoSlice, Seek, SeekFrom, Write};
use std::path::Path;

use crate::error::{CaptureError, ErrorDetail, ErrorKind};
use crate::format::{CaptureFormat, MAX_FRAME_LEN, WIRESHARK_MAX_CAPLEN};
use crate::reader::{Frame, Interface};
use crate::LinkType;

/// What the writer does with a frame longer than a limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Oversize {
    /// Write every byte (up to [`MAX_FRAME_LEN`]; longer frames are an error).
    Keep,
    /// Cut frames to this many bytes, keeping their original length, like a
    /// capture with this snapshot length. `Truncate(WIRESHARK_MAX_CAPLEN)` makes
    /// every file readable by tshark 4 and tcpdump.
    Truncate(u32),
}

/// An interface declared to the writer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InterfaceDesc {
    /// Link type of the interface's frames.
    pub link_type: LinkType,
    /// Written as `if_name` (pcapng only) when present.
    pub name: Option<String>,
}

impl InterfaceDesc {
    /// An unnamed interface of this link type.
    pub fn new(link_type: LinkType) -> InterfaceDesc {
        InterfaceDesc {
            link_type,
            name: None,
        }
    }
}

impl From<&Interface> for InterfaceDesc {
    /// The same link type and name, to copy a reader's interfaces.
    fn from(i: &Interface) -> InterfaceDesc {
        InterfaceDesc {
            link_type: i.link_type,
            name: i.name.clone(),
        }
    }
}

/// Everything about a frame except its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameMeta {
    /// Nanoseconds since 1970-01-01 UTC. A time before 1970, or in pcap
    /// from 2^32 s on, is written as the nearest one the format holds and
    /// counted ([`WriterStats::timestamps_clamped`]).
    pub timestamp_ns: i64,
    /// Length on the wire. Raised to the captured length if smaller.
    pub orig_len: u32,
    /// Link type of the frame (checked against the interface when one is named).
    pub link_type: LinkType,
    /// An interface id returned by [`CaptureWriter::add_interface`], or `None`
    /// to use one interface per link type.
    pub interface: Option<u32>,
}

impl FrameMeta {
    /// Metadata of a complete frame of `len` bytes.
    pub fn new(timestamp_ns: i64, link_type: LinkType, len: usize) -> FrameMeta {
        FrameMeta {
            timestamp_ns,
            orig_len: u32::try_from(len).unwrap_or(u32::MAX),
            link_type,
            interface: None,
        }
    }
}

impl From<&Frame<'_>> for FrameMeta {
    /// Copies time, lengths and link type; the interface is left to the writer.
    fn from(f: &Frame<'_>) -> FrameMeta {
        FrameMeta {
            timestamp_ns: f.timestamp_ns,
            orig_len: f.orig_len,
            link_type: f.link_type,
            interface: None,
        }
    }
}

/// Counters of what a writer wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriterStats {
    /// Frames written.
    pub frames: u64,
    /// Bytes written to the output, headers included.
    pub bytes: u64,
    /// Largest captured length written.
    pub max_caplen: u32,
    /// Frames written with more than [`WIRESHARK_MAX_CAPLEN`] bytes (tshark 4
    /// and tcpdump cannot read them).
    pub over_wireshark_limit: u64,
    /// Number of the first such frame.
    pub first_over_wireshark_limit: Option<u64>,
    /// Frames cut by [`Oversize::Truncate`].
    pub truncated: u64,
    /// Frames whose timestamp the format cannot hold, written with the
    /// nearest one it can: before 1970 (both formats) as 1970-01-01, at or
    /// after 2^32 s (2106-02-07, pcap's 32-bit seconds) as 2^32 s less
    /// 1 ns. pcapng holds every later time a frame can carry.
    pub timestamps_clamped: u64,
    /// Number of the first such frame.
    pub first_timestamp_clamped: Option<u64>,
}

enum Sink {
    File(BufWriter<File>),
    Stream(BufWriter<Box<dyn Write + Send>>),
}

impl Sink {
    fn out(&mut self) -> &mut dyn Write {
        match self {
            Sink::File(w) => w,
            Sink::Stream(w) => w,
        }
    }
}

/// Writes frames to a pcap or pcapng file. See the module documentation.
pub struct CaptureWriter {
    sink: Sink,
    name: String,
    format: CaptureFormat,
    oversize: Oversize,
    /// pcap: link type of the file once the header is written.
    pcap_link: Option<LinkType>,
    /// pcap: snapshot length written in the header.
    pcap_snaplen: u32,
    /// pcapng: link type of each IDB written, by interface id.
    ifaces: Vec<LinkType>,
    /// pcapng: interface used for `interface: None` frames, per link type.
    auto: Vec<(LinkType, u32)>,
    /// Writer interface of each reader interface, for `copy_frame`.
    copied: Vec<Option<u32>>,
    stats: WriterStats,
}

impl std::fmt::Debug for CaptureWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaptureWriter")
            .field("name", &self.name)
            .field("format", &self.format)
            .field("oversize", &self.oversize)
            .field("stats", &self.stats)
            .finish()
    }
}

const PCAP_NANO_MAGIC: u32 = 0xA1B2_3C4D;

/// Slices gathered per `write_vectored` call: a record header, a 64 KiB
/// GRO super-packet's head and 44 payload ranges, padding, options and
/// trailer fit in one call (and under any `IOV_MAX`, 1024 on Linux).
const PARTS_PER_WRITE: usize = 64;

impl CaptureWriter {
    /// Creates (truncates) `path`; `format: None` takes it from the extension.
    /// `-` writes standard output; a FIFO or device is streamed to, never
    /// sought. Without an extension those two get pcapng.
    pub fn create(
        path: impl AsRef<Path>,
        format: Option<CaptureFormat>,
    ) -> Result<CaptureWriter, CaptureError> {
        let path = path.as_ref();
        let stdout = crate::stdio::is_stdio(path);
        let name = if stdout {
            "stdout".to_string()
        } else {
            path.display().to_string()
        };
        let err = |field, kind| {
            CaptureError::from(ErrorDetail {
                file: name.clone(),
                frame: None,
                last_frame: 0,
                offset: 0,
                structure: "output file",
                field,
                kind,
            })
        };
        // Not a regular file (stdout, a FIFO, /dev/stdout): stream, no seek.
        let stream = stdout || std::fs::metadata(path).is_ok_and(|m| !m.is_file());
        let format = match format.or_else(|| CaptureFormat::from_path(path)) {
            Some(f) => f,
            None if stream => CaptureFormat::PcapNg,
            None => return Err(err("extension", ErrorKind::UnknownExtension)),
        };
        if stream {
            let f = if stdout {
                crate::stdio::stdout_file()
            } else {
                std::fs::OpenOptions::new().write(true).open(path)
            }
            .map_err(|e| err("create", ErrorKind::Io(e)))?;
            return CaptureWriter::from_writer(f, name, format);
        }
        let f = File::create(path).map_err(|e| err("create", ErrorKind::Io(e)))?;
        CaptureWriter::start(
            Sink::File(BufWriter::with_capacity(1 << 20, f)),
            name,
            format,
        )
    }

    /// Writes to any byte stream (stdout, a pipe, a `Vec<u8>`); `name` is used in
    /// error messages. Without seeking, a pcap header written in
    /// [`Oversize::Keep`] mode announces [`MAX_FRAME_LEN`] as snapshot length.
    pub fn from_writer(
        out: impl Write + Send + 'static,
        name: impl Into<String>,
        format: CaptureFormat,
    ) -> Result<CaptureWriter, CaptureError> {
        let sink: Box<dyn Write + Send> = Box::new(out);
        CaptureWriter::start(
            Sink::Stream(BufWriter::with_capacity(1 << 20, sink)),
            name.into(),
            format,
        )
    }

    fn start(
        sink: Sink,
        name: String,
        format: CaptureFormat,
    ) -> Result<CaptureWriter, CaptureError> {
        let mut w = CaptureWriter {
            sink,
            name,
            format,
            oversize: Oversize::Keep,
            pcap_link: None,
            pcap_snaplen: 0,
            ifaces: Vec::new(),
            auto: Vec::new(),
            copied: Vec::new(),
            stats: WriterStats::default(),
        };
        if format == CaptureFormat::PcapNg {
            w.write_shb()?;
        }
        Ok(w)
    }

    /// The output format.
    pub fn format(&self) -> CaptureFormat {
        self.format
    }

    /// What to do with frames above a length; call before the first frame
    /// (pcap writes the snapshot length in its header).
    pub fn set_oversize(&mut self, oversize: Oversize) {
        self.oversize = oversize;
    }

    /// Counters so far.
    pub fn stats(&self) -> &WriterStats {
        &self.stats
    }

    fn err(
        &self,
        frame: Option<u64>,
        structure: &'static str,
        field: &'static str,
        kind: ErrorKind,
    ) -> CaptureError {
        // Say that the error is about the output, not the input.
        let structure = match structure {
            "frame" => "output frame",
            "record header" => "output record header",
            "interface description block" => "output interface description block",
            s => s,
        };
        CaptureError::from(ErrorDetail {
            file: self.name.clone(),
            frame,
            last_frame: self.stats.frames,
            offset: self.stats.bytes,
            structure,
            field,
            kind,
        })
    }

    fn put(&mut self, bytes: &[u8], frame: Option<u64>) -> Result<(), CaptureError> {
        match self.sink.out().write_all(bytes) {
            Ok(()) => {
                self.stats.bytes += bytes.len() as u64;
                Ok(())
            }
            Err(e) => Err(self.err(frame, "output", "write", ErrorKind::Io(e))),
        }
    }

    /// Writes one record: `head`, the first `caplen` bytes of `parts`
    /// joined, then `tail`, with vectored writes (`write_vectored` on the
    /// `BufWriter`: a record that fits its spare room is gathered into it,
    /// a larger one goes to the file in one `writev` without passing
    /// through the buffer). Parts beyond [`PARTS_PER_WRITE`] are written
    /// in further calls; the bytes are the same either way.
    fn put_record(
        &mut self,
        head: &[u8],
        parts: &[&[u8]],
        caplen: usize,
        tail: &[&[u8]],
        frame: Option<u64>,
    ) -> Result<(), CaptureError> {
        let mut slices: [IoSlice<'_>; PARTS_PER_WRITE] = [IoSlice::new(&[]); PARTS_PER_WRITE];
        let mut n = 0;
        let mut total = 0u64;
        let mut left = caplen;
        let body = parts.iter().map_while(|p| {
            let take = p.len().min(left);
            left -= take;
            (take > 0 || left > 0).then(|| &p[..take])
        });
        for s in std::iter::once(head)
            .chain(body)
            .chain(tail.iter().copied())
        {
            if s.is_empty() {
                continue;
            }
            if n == PARTS_PER_WRITE {
                self.put_slices(&mut slices[..n], frame)?;
                n = 0;
            }
            slices[n] = IoSlice::new(s);
            n += 1;
            total += s.len() as u64;
        }
        self.put_slices(&mut slices[..n], frame)?;
        self.stats.bytes += total;
        Ok(())
    }

    /// `write_all` for vectored writes (std's `write_all_vectored` is
    /// unstable): writes every byte of `slices`, retrying on `Interrupted`.
    fn put_slices(
        &mut self,
        mut slices: &mut [IoSlice<'_>],
        frame: Option<u64>,
    ) -> Result<(), CaptureError> {
        while !slices.is_empty() {
            let r = self.sink.out().write_vectored(slices);
            match r {
                Ok(0) => {
                    return Err(self.err(
                        frame,
                        "output",
                        "write",
                        ErrorKind::Io(io::ErrorKind::WriteZero.into()),
                    ))
                }
                Ok(k) => IoSlice::advance_slices(&mut slices, k),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.err(frame, "output", "write", ErrorKind::Io(e))),
            }
        }
        Ok(())
    }

    /// Declares an interface and returns its id for [`FrameMeta::interface`].
    /// pcapng writes its IDB now; pcap accepts one link type only.
    pub fn add_interface(&mut self, desc: &InterfaceDesc) -> Result<u32, CaptureError> {
        match self.format {
            CaptureFormat::Pcap => {
                self.pcap_header(desc.link_type, None)?;
                Ok(0)
            }
            CaptureFormat::PcapNg => self.write_idb(desc.link_type, desc.name.as_deref(), None),
        }
    }

    fn write_shb(&mut self) -> Result<(), CaptureError> {
        // SHB: type, length, byte-order magic, version 1.0, section length -1
        // (unknown), option shb_userappl, end of options, length.
        const APP: &[u8] = b"offload-capture";
        let opt_len = 4 + APP.len().div_ceil(4) * 4 + 4;
        let len = (28 + opt_len) as u32;
        let mut b = Vec::with_capacity(len as usize);
        b.extend_from_slice(&0x0A0D_0D0Au32.to_le_bytes());
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(&0x1A2B_3C4Du32.to_le_bytes());
        b.extend_from_slice(&1u16.to_le_bytes());
        b.extend_from_slice(&0u16.to_le_bytes());
        b.extend_from_slice(&(-1i64).to_le_bytes());
        push_option(&mut b, 4, APP);
        b.extend_from_slice(&[0; 4]);
        b.extend_from_slice(&len.to_le_bytes());
        self.put(&b, None)
    }

    fn write_idb(
        &mut self,
        lt: LinkType,
        name: Option<&str>,
        frame: Option<u64>,
    ) -> Result<u32, CaptureError> {
        let Ok(lt16) = u16::try_from(lt.0) else {
            return Err(self.err(
                frame,
                "interface description block",
                "linktype",
                ErrorKind::InvalidValue {
                    value: lt.0.into(),
                    reason: "pcapng link types are 16-bit",
                },
            ));
        };
        let snaplen = match self.oversize {
            Oversize::Keep => 0, // "no limit": our frames may be any size up to MAX_FRAME_LEN
            Oversize::Truncate(n) => n,
        };
        let mut b = Vec::with_capacity(64);
        b.extend_from_slice(&1u32.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes()); // length, patched below
        b.extend_from_slice(&lt16.to_le_bytes());
        b.extend_from_slice(&0u16.to_le_bytes());
        b.extend_from_slice(&snaplen.to_le_bytes());
        if let Some(n) = name {
            let n = n.as_bytes();
            push_option(&mut b, 2, &n[..n.len().min(0xFFFF - 3)]);
        }
        push_option(&mut b, 9, &[9]); // if_tsresol: nanoseconds
        b.extend_from_slice(&[0; 4]); // opt_endofopt
        let len = (b.len() + 4) as u32;
        b[4..8].copy_from_slice(&len.to_le_bytes());
        b.extend_from_slice(&len.to_le_bytes());
        self.put(&b, frame)?;
        let id = self.ifaces.len() as u32;
        self.ifaces.push(lt);
        Ok(id)
    }

    fn pcap_header(&mut self, lt: LinkType, frame: Option<u64>) -> Result<(), CaptureError> {
        if let Some(file) = self.pcap_link {
            if file != lt {
                return Err(self.err(
                    frame,
                    "frame",
                    "link_type",
                    ErrorKind::LinkTypeMismatch { file, frame: lt },
                ));
            }
            return Ok(());
        }
        let snaplen = match (self.oversize, &self.sink) {
            (Oversize::Truncate(n), _) => n,
            // Patched to the largest frame in finish().
            (Oversize::Keep, Sink::File(_)) => WIRESHARK_MAX_CAPLEN,
            (Oversize::Keep, Sink::Stream(_)) => MAX_FRAME_LEN,
        };
        let mut h = [0u8; 24];
        h[0..4].copy_from_slice(&PCAP_NANO_MAGIC.to_le_bytes());
        h[4..6].copy_from_slice(&2u16.to_le_bytes());
        h[6..8].copy_from_slice(&4u16.to_le_bytes());
        // thiszone and sigfigs stay 0.
        h[16..20].copy_from_slice(&snaplen.to_le_bytes());
        h[20..24].copy_from_slice(&lt.0.to_le_bytes());
        self.put(&h, frame)?;
        self.pcap_link = Some(lt);
        self.pcap_snaplen = snaplen;
        Ok(())
    }

    /// Writes one frame. `data` starts with the link-layer header.
    pub fn write_frame(&mut self, meta: &FrameMeta, data: &[u8]) -> Result<(), CaptureError> {
        self.write_frame_with_comment(meta, data, None)
    }

    /// Like [`CaptureWriter::write_frame`], with a super-packet's GSO
    /// metadata (pcapng keeps it, readable with [`Frame::gso`]; pcap drops it).
    pub fn write_frame_with_gso(
        &mut self,
        meta: &FrameMeta,
        data: &[u8],
        gso: Option<&crate::GsoMeta>,
    ) -> Result<(), CaptureError> {
        let comment = gso.map(crate::GsoMeta::to_comment);
        self.write_frame_with_comment(meta, data, comment.as_deref())
    }

    /// Like [`CaptureWriter::write_frame`], with a packet comment
    /// (`opt_comment`, shown by Wireshark) in pcapng; pcap has no place for
    /// it and drops it.
    pub fn write_frame_with_comment(
        &mut self,
        meta: &FrameMeta,
        data: &[u8],
        comment: Option<&str>,
    ) -> Result<(), CaptureError> {
        self.write_frame_parts(meta, &[data], comment)
    }

    /// Writes one frame made of `parts`, in order, without assembling it:
    /// a GRO super-packet delivered zero-copy (rewritten headers, then the
    /// payload ranges it borrows from the input frames) goes straight into
    /// the output buffer. The record is byte for byte what
    /// [`CaptureWriter::write_frame_with_comment`] writes for the parts
    /// joined (truncation with [`Oversize::Truncate`] included).
    pub fn write_frame_parts(
        &mut self,
        meta: &FrameMeta,
        parts: &[&[u8]],
        comment: Option<&str>,
    ) -> Result<(), CaptureError> {
        let number = self.stats.frames + 1;
        let nf = Some(number);
        // The nearest time the format holds (counted in WriterStats).
        let max_ns = match self.format {
            CaptureFormat::Pcap => (1i64 << 32) * 1_000_000_000 - 1,
            CaptureFormat::PcapNg => i64::MAX,
        };
        let timestamp_ns = meta.timestamp_ns.clamp(0, max_ns);
        if timestamp_ns != meta.timestamp_ns {
            self.stats.timestamps_clamped += 1;
            self.stats.first_timestamp_clamped.get_or_insert(number);
        }
        let mut caplen: usize = parts.iter().map(|p| p.len()).sum();
        if let Oversize::Truncate(n) = self.oversize {
            if caplen > n as usize {
                caplen = n as usize;
                self.stats.truncated += 1;
            }
        }
        if caplen > MAX_FRAME_LEN as usize {
            return Err(self.err(
                nf,
                "frame",
                "caplen",
                ErrorKind::TooLarge {
                    value: caplen as u64,
                    max: MAX_FRAME_LEN.into(),
                },
            ));
        }
        let caplen32 = caplen as u32;
        let orig_len = meta.orig_len.max(caplen32);
        match self.format {
            CaptureFormat::Pcap => {
                self.pcap_header(meta.link_type, nf)?;
                if let Some(i) = meta.interface.filter(|&i| i != 0) {
                    return Err(self.err(
                        nf,
                        "frame",
                        "interface",
                        ErrorKind::UnknownInterface {
                            interface: i,
                            declared: 1,
                        },
                    ));
                }
                // In range: clamped above.
                let secs = (timestamp_ns / 1_000_000_000) as u32;
                let nanos = (timestamp_ns % 1_000_000_000) as u32;
                let mut h = [0u8; 16];
                h[0..4].copy_from_slice(&secs.to_le_bytes());
                h[4..8].copy_from_slice(&nanos.to_le_bytes());
                h[8..12].copy_from_slice(&caplen32.to_le_bytes());
                h[12..16].copy_from_slice(&orig_len.to_le_bytes());
                self.put_record(&h, parts, caplen, &[], nf)?;
            }
            CaptureFormat::PcapNg => {
                let id = self.interface_for(meta, nf)?;
                let ts = timestamp_ns as u64;
                let pad = (4 - caplen % 4) % 4;
                // opt_comment + opt_endofopt, each option padded to 4 bytes.
                let comment = comment.map(|c| &c.as_bytes()[..c.len().min(u16::MAX as usize - 3)]);
                let opts_len = comment.map_or(0, |c| 4 + c.len().div_ceil(4) * 4 + 4);
                let len = (32 + caplen + pad + opts_len) as u32;
                let mut h = [0u8; 28];
                h[0..4].copy_from_slice(&6u32.to_le_bytes());
                h[4..8].copy_from_slice(&len.to_le_bytes());
                h[8..12].copy_from_slice(&id.to_le_bytes());
                h[12..16].copy_from_slice(&((ts >> 32) as u32).to_le_bytes());
                h[16..20].copy_from_slice(&(ts as u32).to_le_bytes());
                h[20..24].copy_from_slice(&caplen32.to_le_bytes());
                h[24..28].copy_from_slice(&orig_len.to_le_bytes());
                // Padding, opt_comment, its padding, opt_endofopt, length.
                let mut oh = [0u8; 4];
                let comment = comment.unwrap_or_default();
                oh[0..2].copy_from_slice(&1u16.to_le_bytes());
                oh[2..4].copy_from_slice(&(comment.len() as u16).to_le_bytes());
                let trailer = len.to_le_bytes();
                let zeros = [0u8; 4];
                let comment_pad = (4 - comment.len() % 4) % 4;
                let with_comment = [
                    &zeros[..pad],
                    &oh[..],
                    comment,
                    &zeros[..comment_pad],
                    &zeros[..],
                    &trailer[..],
                ];
                let tail: &[&[u8]] = if opts_len > 0 {
                    &with_comment
                } else {
                    &[&zeros[..pad], &trailer[..]]
                };
                self.put_record(&h, parts, caplen, tail, nf)?;
            }
        }
        let s = &mut self.stats;
        s.frames = number;
        s.max_caplen = s.max_caplen.max(caplen32);
        if caplen32 > WIRESHARK_MAX_CAPLEN {
            s.over_wireshark_limit += 1;
            s.first_over_wireshark_limit.get_or_insert(number);
        }
        Ok(())
    }

    /// The pcapng interface id a frame goes to, writing an IDB if needed.
    #[inline]
    fn interface_for(&mut self, meta: &FrameMeta, nf: Option<u64>) -> Result<u32, CaptureError> {
        if let Some(id) = meta.interface {
            return match self.ifaces.get(id as usize) {
                Some(&lt) if lt == meta.link_type => Ok(id),
                Some(&lt) => Err(self.err(
                    nf,
                    "frame",
                    "link_type",
                    ErrorKind::LinkTypeMismatch {
                        file: lt,
                        frame: meta.link_type,
                    },
                )),
                None => Err(self.err(
                    nf,
                    "frame",
                    "interface",
                    ErrorKind::UnknownInterface {
                        interface: id,
                        declared: self.ifaces.len() as u32,
                    },
                )),
            };
        }
        if let Some(&(_, id)) = self.auto.iter().find(|(lt, _)| *lt == meta.link_type) {
            return Ok(id);
        }
        let id = self.write_idb(meta.link_type, None, nf)?;
        self.auto.push((meta.link_type, id));
        Ok(id)
    }

    /// Copies a frame read by [`crate::CaptureReader`] (time, lengths, link
    /// type, bytes) into the interface of its link type.
    pub fn write(&mut self, frame: &Frame<'_>) -> Result<(), CaptureError> {
        self.write_frame(&FrameMeta::from(frame), frame.data)
    }

    /// Copies a frame keeping its input interface: the first frame of each
    /// reader interface declares a writer interface with the same link type
    /// and name (pcapng: one IDB per input interface; pcap: one link type).
    pub fn copy_frame(&mut self, frame: &Frame<'_>) -> Result<(), CaptureError> {
        let idx = frame.interface as usize;
        let id = match self.copied.get(idx).copied().flatten() {
            Some(id) => id,
            None => {
                let id = self.add_interface(&InterfaceDesc::from(frame.interface_info))?;
                // idx indexes the reader's interface list, so it is small.
                if self.copied.len() <= idx {
                    self.copied.resize(idx + 1, None);
                }
                self.copied[idx] = Some(id);
                id
            }
        };
        let meta = FrameMeta {
            interface: Some(id),
            ..FrameMeta::from(frame)
        };
        self.write_frame(&meta, frame.data)
    }

    /// Flushes the output (and, for a pcap file, writes the final snapshot
    /// length); returns the counters. Dropping a writer without `finish` loses
    /// write errors and may leave a pcap header's snapshot length too small.
    pub fn finish(mut self) -> Result<WriterStats, CaptureError> {
        if self.format == CaptureFormat::Pcap && self.pcap_link.is_none() {
            // An empty pcap still needs a header; Ethernet is the usual default.
            self.pcap_header(LinkType::ETHERNET, None)?;
        }
        let need_patch =
            self.format == CaptureFormat::Pcap && self.stats.max_caplen > self.pcap_snaplen;
        let max = self.stats.max_caplen;
        let r = match &mut self.sink {
            Sink::File(w) => (|| -> io::Result<()> {
                w.flush()?;
                if need_patch {
                    let f = w.get_mut();
                    f.seek(SeekFrom::Start(16))?;
                    f.write_all(&max.to_le_bytes())?;
                    f.seek(SeekFrom::End(0))?;
                }
                Ok(())
            })(),
            Sink::Stream(w) => w.flush(),
        };
        match r {
            Ok(()) => Ok(self.stats),
            Err(e) => Err(self.err(None, "output", "flush", ErrorKind::Io(e))),
        }
    }
}

/// Appends a pcapng option (code, length, value padded to 4 bytes).
fn push_option(b: &mut Vec<u8>, code: u16, value: &[u8]) {
    b.extend_from_slice(&code.to_le_bytes());
    b.extend_from_slice(&(value.len() as u16).to_le_bytes());
    b.extend_from_slice(value);
    b.resize(b.len() + (4 - value.len() % 4) % 4, 0);
}
