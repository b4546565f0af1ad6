//! IPComp payloads (RFC 3173) inflated, so the connection inside is
//! analysed as tshark 4.0 analyses it.
//!
//! tshark's `dissect_ipcomp` (epan/dissectors/packet-ipsec.c) tries to
//! inflate every IPComp payload, whatever its CPI (a negotiated CPI does
//! not name the algorithm), with `tvb_child_uncompress`
//! (epan/tvbuff_zlib.c: a zlib stream first, raw DEFLATE when that fails
//! at once; what a capture cut short inflates to is kept), and hands the
//! result to the next header's dissector. The same here, with
//! `miniz_oxide`'s inflate (decision 0232), except that a well-known CPI
//! naming another algorithm (RFC 3173 3.3 and IANA's IPComp transform
//! identifiers: 1 OUI, 3 LZS per RFC 2395, 4 LZJH per RFC 3051) is not
//! inflated: DEFLATE read from LZS data is noise.
//!
//! The output is bounded: an IP datagram holds at most 65,535 bytes (the
//! IPv4 total length and the IPv6 payload length are 16-bit), so
//! inflating stops there: a payload that inflates further (a "zip
//! bomb") is read up to the bound, where the datagram inside has ended
//! (tshark inflates it all, up to 10 MB per pass, and reads the same
//! packet at its start). Memory is at most that bound per frame, and the
//! work is linear in it. A payload that is not DEFLATE data or inflates
//! to bytes without a readable packet leaves the frame the outer
//! packet's, as before; each is counted with the first such frame in
//! [`IpcompCounts`] (`--json`: `inputs[].ipcomp`).

use crate::dissect::{self, Parsed};
use miniz_oxide::inflate::core::{decompress, inflate_flags, DecompressorOxide};
use miniz_oxide::inflate::TINFLStatus;
use serde::Serialize;

/// The largest payload inflated: an IP datagram's length field is 16-bit.
pub const MAX_INFLATED: usize = 65_535;

/// What inflating IPComp payloads did in one input.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct IpcompCounts {
    /// Frames whose IP payload (after the IP header or an AH) is IPComp.
    pub frames: u64,
    /// Payloads inflated and read as the packet they carried.
    pub inflated: u64,
    /// Of those, payloads that inflate past 65,535 bytes: read up to
    /// there (the IP datagram inside ends before; tshark inflates on).
    pub cut_at_bound: u64,
    /// Not inflated: the CPI names another algorithm (LZS, LZJH, OUI).
    pub other_algorithm: u64,
    /// Not inflated: not DEFLATE data (or a zlib stream whose checksum
    /// fails).
    pub bad_data: u64,
    /// Inflated, but to no packet analysis reads (cut too short by the
    /// capture, or not the IP version the next header names).
    pub unreadable: u64,
    /// The first frame counted in one of the four above.
    pub first_noted: Option<u64>,
}

/// Why a payload was not inflated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotInflated {
    OtherAlgorithm,
    BadData,
    Unreadable,
}

/// A payload inflated: its bytes, and whether inflating stopped at
/// [`MAX_INFLATED`] with more to come.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inflated {
    pub bytes: Vec<u8>,
    pub cut_at_bound: bool,
}

impl IpcompCounts {
    /// Counts one IPComp frame, `number`, and how it went (`Ok(cut at
    /// the bound)`).
    pub fn add(&mut self, outcome: Result<bool, NotInflated>, number: u64) {
        self.frames += 1;
        let slot = match outcome {
            Ok(false) => {
                self.inflated += 1;
                return;
            }
            Ok(true) => {
                self.inflated += 1;
                &mut self.cut_at_bound
            }
            Err(NotInflated::OtherAlgorithm) => &mut self.other_algorithm,
            Err(NotInflated::BadData) => &mut self.bad_data,
            Err(NotInflated::Unreadable) => &mut self.unreadable,
        };
        *slot += 1;
        self.first_noted.get_or_insert(number);
    }
}

/// CPIs of algorithms other than DEFLATE (RFC 3173 3.3: 0-63 are the
/// well-known transform identifiers; 2 is DEFLATE, RFC 2394).
fn other_algorithm(cpi: u16) -> bool {
    matches!(cpi, 1 | 3 | 4)
}

/// Inflates `data` as tshark's `tvb_uncompress` does: a zlib stream
/// (RFC 1950) when its header says so, else (or when that fails) raw
/// DEFLATE (RFC 1951, as RFC 2394 sends it). Input that ends early gives
/// what it inflated to; output stops at [`MAX_INFLATED`] bytes.
pub fn inflate(data: &[u8]) -> Result<Inflated, NotInflated> {
    let zlib_header = data.len() >= 2
        && data[0] & 0x0f == 8
        && data[0] >> 4 <= 7
        && u16::from_be_bytes([data[0], data[1]]).is_multiple_of(31);
    if zlib_header {
        if let Ok(out) = inflate_with(data, inflate_flags::TINFL_FLAG_PARSE_ZLIB_HEADER) {
            return Ok(out);
        }
    }
    inflate_with(data, 0)
}

/// One pass of the inflater over all of `data` into a buffer of the
/// bound (the whole buffer is the window, so no copying between passes).
fn inflate_with(data: &[u8], flags: u32) -> Result<Inflated, NotInflated> {
    let mut out = vec![0u8; MAX_INFLATED];
    let mut state = Box::<DecompressorOxide>::default();
    let flags = flags | inflate_flags::TINFL_FLAG_USING_NON_WRAPPING_OUTPUT_BUF;
    let (status, _, n) = decompress(&mut state, data, &mut out, 0, flags);
    out.truncate(n);
    let cut_at_bound = match status {
        TINFLStatus::Done => false,
        TINFLStatus::HasMoreOutput => true,
        // Input cut short (a snap length): what was inflated so far.
        TINFLStatus::FailedCannotMakeProgress | TINFLStatus::NeedsMoreInput if n > 0 => false,
        _ => return Err(NotInflated::BadData),
    };
    Ok(Inflated {
        bytes: out,
        cut_at_bound,
    })
}

/// The packet in the IPComp payload of `frame` (whose outer packet
/// `parse` read as `p`, its IPComp header at `at`), and the buffer its
/// offsets refer to: the frame up to the compressed data, then the
/// inflated bytes (`dissect::ipcomp_inner`). The compressed data ends
/// with the outer packet's IP length or the captured bytes.
pub fn expand(
    frame: &[u8],
    p: &Parsed,
    at: &dissect::IpcompAt,
    vxlan_ports: &[u16],
) -> Result<(Parsed, Vec<u8>, bool), NotInflated> {
    if other_algorithm(at.cpi) {
        return Err(NotInflated::OtherAlgorithm);
    }
    let start = at.off + 4;
    let end = (p.ip.off + p.ip.ip_len as usize).min(frame.len());
    let data = frame.get(start..end).ok_or(NotInflated::Unreadable)?;
    let out = inflate(data)?;
    let mut buf = Vec::with_capacity(start + out.bytes.len());
    buf.extend_from_slice(&frame[..start]);
    buf.extend_from_slice(&out.bytes);
    let q = dissect::ipcomp_inner(&buf, p, at, vxlan_ports).ok_or(NotInflated::Unreadable)?;
    Ok((q, buf, out.cut_at_bound))
}

/// `dissect::parse` of a whole packet, and the packet in its IPComp
/// payload when it has one (nothing counted): how the what-if finds the
/// flow of a packet whose first frame it no longer holds.
pub fn parse_inflated(link: offload::LinkKind, data: &[u8], vxlan_ports: &[u16]) -> Option<Parsed> {
    let p = dissect::parse(link, data, data.len() as u32, vxlan_ports)?;
    match dissect::ipcomp_at(data, &p) {
        Some(at) => Some(expand(data, &p, &at, vxlan_ports).map_or(p, |(q, _, _)| q)),
        None => Some(p),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use miniz_oxide::deflate::{compress_to_vec, compress_to_vec_zlib};

    #[test]
    fn raw_and_zlib_streams_inflate() {
        let data: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
        let whole = |bytes| {
            Ok(Inflated {
                bytes,
                cut_at_bound: false,
            })
        };
        assert_eq!(inflate(&compress_to_vec(&data, 6)), whole(data.clone()));
        assert_eq!(inflate(&compress_to_vec_zlib(&data, 6)), whole(data));
    }

    #[test]
    fn a_bomb_stops_at_the_bound() {
        // 1 MB of zeros deflates to about a kilobyte.
        let z = compress_to_vec(&vec![0u8; 1 << 20], 9);
        assert!(z.len() < 2000, "{}", z.len());
        let out = inflate(&z).unwrap();
        assert!(out.cut_at_bound);
        assert_eq!(out.bytes.len(), MAX_INFLATED);
        // Exactly the bound still fits.
        let z = compress_to_vec(&vec![0u8; MAX_INFLATED], 9);
        let out = inflate(&z).unwrap();
        assert_eq!((out.bytes.len(), out.cut_at_bound), (MAX_INFLATED, false));
    }

    #[test]
    fn cut_and_bad_streams() {
        let data: Vec<u8> = (0..3000u32).map(|i| (i * 7 % 253) as u8).collect();
        let z = compress_to_vec(&data, 1);
        // Cut in the middle: a prefix of the data.
        let cut = inflate(&z[..z.len() / 2]).unwrap().bytes;
        assert!(!cut.is_empty() && data.starts_with(&cut), "{}", cut.len());
        // A reserved block type (BTYPE 11) is no DEFLATE data.
        assert_eq!(inflate(&[0x07, 0, 0, 0]), Err(NotInflated::BadData));
        assert_eq!(inflate(&[]), Err(NotInflated::BadData));
        // A zlib stream whose Adler-32 is wrong, and whose bytes are no
        // raw DEFLATE stream either.
        let mut zl = compress_to_vec_zlib(&data, 6);
        let n = zl.len();
        zl[n - 1] ^= 0xff;
        assert_ne!(inflate(&zl).map(|o| o.bytes), Ok(data));
    }

    /// Frames `parse` reads, with an IPComp payload (after AH when `ah`),
    /// through `expand`: the outcome, never a panic.
    fn run(ah: bool, ipcomp: &[u8], cut: usize) -> Result<Parsed, NotInflated> {
        use offload::build::{FrameSpec, L4Spec};
        let mut payload = Vec::new();
        if ah {
            payload.extend_from_slice(&[108, 4, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1]);
            payload.extend_from_slice(&[0; 12]);
        }
        payload.extend_from_slice(ipcomp);
        let mut s = FrameSpec::udp4([192, 0, 2, 1], [192, 0, 2, 2], 0, 0);
        s.l4 = L4Spec::Other(if ah { 51 } else { 108 });
        let f = s.payload(payload).build();
        let f = &f[..f.len() - cut];
        let p = dissect::parse(offload::LinkKind::Ethernet, f, f.len() as u32, &[])
            .expect("the outer packet reads");
        let Some(at) = dissect::ipcomp_at(f, &p) else {
            return Err(NotInflated::Unreadable);
        };
        expand(f, &p, &at, &[]).map(|(q, buf, _)| {
            // Every offset the packet names lies in its buffer.
            assert!(q.l4_off <= buf.len() && q.ip.off + q.ip.hdr_len <= buf.len());
            q
        })
    }

    #[test]
    fn short_and_lying_headers() {
        let tcp = offload::build::FrameSpec::tcp4(
            [10, 0, 0, 1],
            [10, 0, 0, 2],
            offload::build::TcpSpec::data(1, 2, 3),
        )
        .payload(vec![7; 50])
        .build();
        let ip = &tcp[14..];
        let hdr = |next: u8, cpi: u16, data: &[u8]| {
            let mut h = vec![next, 0];
            h.extend_from_slice(&cpi.to_be_bytes());
            h.extend_from_slice(data);
            h
        };
        // A whole packet, alone and after AH: the inner TCP segment.
        for ah in [false, true] {
            let q = run(ah, &hdr(4, 0x4001, &compress_to_vec(ip, 6)), 0).unwrap();
            assert_eq!((q.sport, q.dport, q.payload), (1, 2, 50));
            let kind = q.tunnel.map(|t| (t.kind, t.id));
            let want = if ah {
                (dissect::TunnelKind::Ah, Some(0x100))
            } else {
                (dissect::TunnelKind::IpComp, Some(0x4001))
            };
            assert_eq!(kind, Some(want));
        }
        // Transport mode: the TCP segment alone.
        let q = run(false, &hdr(6, 2, &compress_to_vec(&ip[20..], 6)), 0).unwrap();
        assert!(q.tunnel.is_none());
        assert_eq!((q.sport, q.payload, q.ip.proto), (1, 50, 6));
        // The IPComp header cut: no IPComp; cut inside the AH likewise.
        assert_eq!(run(false, &[4, 0], 0).err(), Some(NotInflated::Unreadable));
        assert!(run(true, &[], 14).is_err());
        // The next header says IPv6, the bytes are IPv4; too few bytes
        // for an IP header; an empty payload; another algorithm.
        let z = compress_to_vec(ip, 6);
        assert_eq!(
            run(false, &hdr(41, 0x4001, &z), 0).err(),
            Some(NotInflated::Unreadable)
        );
        let short = compress_to_vec(&ip[..12], 6);
        assert_eq!(
            run(false, &hdr(4, 0x4001, &short), 0).err(),
            Some(NotInflated::Unreadable)
        );
        assert_eq!(
            run(false, &hdr(4, 0x4001, &[]), 0).err(),
            Some(NotInflated::BadData)
        );
        assert_eq!(
            run(false, &hdr(4, 3, &z), 0).err(),
            Some(NotInflated::OtherAlgorithm)
        );
        // Transport mode whose inflated segment is shorter than a TCP
        // header.
        let short = compress_to_vec(&ip[20..30], 6);
        assert_eq!(
            run(false, &hdr(6, 2, &short), 0).err(),
            Some(NotInflated::Unreadable)
        );
    }
}
