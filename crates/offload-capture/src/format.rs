//! Capture file formats, byte-order helpers and the limits shared by reader and writer.

use std::path::Path;

/// The largest captured frame length this crate reads or writes: 16 MiB.
///
/// BIG TCP super-packets reach 512 KiB (524280 bytes of IP packet plus the link
/// header); the cap leaves room for other producers while bounding what a lying
/// length field can make the reader buffer.
pub const MAX_FRAME_LEN: u32 = 16 << 20;

/// The largest captured length that Wireshark/tshark 4 and libpcap 1.10 read
/// for every link type this crate names (`WTAP_MAX_PACKET_SIZE_STANDARD`,
/// libpcap's `MAXIMUM_SNAPLEN`). Measured: a 262145-byte frame makes tshark
/// 4.0.17 stop with "File has 262145-byte packet, bigger than maximum of 262144".
pub const WIRESHARK_MAX_CAPLEN: u32 = 262_144;

/// Largest non-packet block the pcapng reader buffers whole (interface and
/// section headers with their options); packet blocks may be
/// [`MAX_FRAME_LEN`] plus their fixed part and options.
pub(crate) const MAX_BLOCK_LEN: u32 = MAX_FRAME_LEN + (64 << 10);

/// A capture file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CaptureFormat {
    /// Classic libpcap format (one link type, microsecond or nanosecond timestamps).
    Pcap,
    /// pcapng (sections, several interfaces, per-interface resolution).
    PcapNg,
}

impl CaptureFormat {
    /// The format named by a file's extension: `.pcap` and `.cap` are pcap,
    /// `.pcapng` is pcapng (case-insensitive); anything else is `None`.
    pub fn from_path(path: &Path) -> Option<CaptureFormat> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "pcap" | "cap" => Some(CaptureFormat::Pcap),
            "pcapng" => Some(CaptureFormat::PcapNg),
            _ => None,
        }
    }
}

impl std::fmt::Display for CaptureFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CaptureFormat::Pcap => "pcap",
            CaptureFormat::PcapNg => "pcapng",
        })
    }
}

/// Byte order of a pcap file or a pcapng section.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Endian {
    Little,
    Big,
}

/// Reads a `u32` at `at`; returns 0 rather than panicking when out of range
/// (callers check lengths first, this only keeps the reader panic-free).
#[inline(always)]
pub(crate) fn u32_at(b: &[u8], at: usize, e: Endian) -> u32 {
    let mut a = [0u8; 4];
    if let Some(s) = at.checked_add(4).and_then(|end| b.get(at..end)) {
        a.copy_from_slice(s);
    }
    match e {
        Endian::Little => u32::from_le_bytes(a),
        Endian::Big => u32::from_be_bytes(a),
    }
}

/// Reads a `u16` at `at`, 0 when out of range (see [`u32_at`]).
#[inline(always)]
pub(crate) fn u16_at(b: &[u8], at: usize, e: Endian) -> u16 {
    let mut a = [0u8; 2];
    if let Some(s) = at.checked_add(2).and_then(|end| b.get(at..end)) {
        a.copy_from_slice(s);
    }
    match e {
        Endian::Little => u16::from_le_bytes(a),
        Endian::Big => u16::from_be_bytes(a),
    }
}

/// Reads a `u64` at `at`, 0 when out of range (see [`u32_at`]).
#[inline(always)]
pub(crate) fn u64_at(b: &[u8], at: usize, e: Endian) -> u64 {
    let mut a = [0u8; 8];
    if let Some(s) = at.checked_add(8).and_then(|end| b.get(at..end)) {
        a.copy_from_slice(s);
    }
    match e {
        Endian::Little => u64::from_le_bytes(a),
        Endian::Big => u64::from_be_bytes(a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_from_extension() {
        assert_eq!(
            CaptureFormat::from_path(Path::new("a/b.pcap")),
            Some(CaptureFormat::Pcap)
        );
        assert_eq!(
            CaptureFormat::from_path(Path::new("b.CAP")),
            Some(CaptureFormat::Pcap)
        );
        assert_eq!(
            CaptureFormat::from_path(Path::new("b.PcapNg")),
            Some(CaptureFormat::PcapNg)
        );
        assert_eq!(CaptureFormat::from_path(Path::new("b.txt")), None);
        assert_eq!(CaptureFormat::from_path(Path::new("pcap")), None);
    }

    #[test]
    fn out_of_range_reads_are_zero_not_panics() {
        let b = [1u8, 2, 3];
        assert_eq!(u32_at(&b, 0, Endian::Little), 0);
        assert_eq!(u16_at(&b, 1, Endian::Big), 0x0203);
        assert_eq!(u64_at(&b, usize::MAX - 2, Endian::Big), 0);
    }
}
