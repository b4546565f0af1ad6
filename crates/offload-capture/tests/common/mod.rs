//! Hand-built capture files for the integration tests.
//!
//! Files are assembled field by field here (not with the crate's writer) so
//! that the reader is tested against the formats' specifications, in both byte
//! orders, and so that lying fields can be placed exactly.

#![allow(dead_code)]

use std::path::PathBuf;

use offload_capture::{CaptureError, CaptureReader, LinkType};

/// A byte builder in one byte order.
pub struct B {
    pub be: bool,
    pub v: Vec<u8>,
}

impl B {
    pub fn new(be: bool) -> B {
        B { be, v: Vec::new() }
    }
    pub fn u16(&mut self, x: u16) -> &mut B {
        let b = if self.be {
            x.to_be_bytes()
        } else {
            x.to_le_bytes()
        };
        self.v.extend_from_slice(&b);
        self
    }
    pub fn u32(&mut self, x: u32) -> &mut B {
        let b = if self.be {
            x.to_be_bytes()
        } else {
            x.to_le_bytes()
        };
        self.v.extend_from_slice(&b);
        self
    }
    pub fn u64(&mut self, x: u64) -> &mut B {
        let b = if self.be {
            x.to_be_bytes()
        } else {
            x.to_le_bytes()
        };
        self.v.extend_from_slice(&b);
        self
    }
    pub fn bytes(&mut self, b: &[u8]) -> &mut B {
        self.v.extend_from_slice(b);
        self
    }
    pub fn pad4(&mut self) -> &mut B {
        while !self.v.len().is_multiple_of(4) {
            self.v.push(0);
        }
        self
    }
}

/// Deterministic frame contents: `n` bytes derived from `seed`.
pub fn frame_bytes(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

pub fn pcap_header(be: bool, nanos: bool, snaplen: u32, lt: u32) -> Vec<u8> {
    let mut b = B::new(be);
    b.u32(if nanos { 0xA1B2_3C4D } else { 0xA1B2_C3D4 })
        .u16(2)
        .u16(4)
        .u32(0)
        .u32(0)
        .u32(snaplen)
        .u32(lt);
    b.v
}

pub fn pcap_record(be: bool, sec: u32, frac: u32, caplen: u32, orig: u32, data: &[u8]) -> Vec<u8> {
    let mut b = B::new(be);
    b.u32(sec).u32(frac).u32(caplen).u32(orig).bytes(data);
    b.v
}

/// A pcapng block: type, length, body (padded to 4), length.
pub fn block(be: bool, btype: u32, body: &[u8]) -> Vec<u8> {
    let padded = body.len().div_ceil(4) * 4;
    let len = (12 + padded) as u32;
    let mut b = B::new(be);
    b.u32(btype).u32(len).bytes(body).pad4().u32(len);
    b.v
}

pub fn shb(be: bool) -> Vec<u8> {
    let mut body = B::new(be);
    body.u32(0x1A2B_3C4D).u16(1).u16(0).u64(u64::MAX);
    block(be, 0x0A0D_0D0A, &body.v)
}

/// An option list (code, value) with the end-of-options marker.
pub fn options(be: bool, opts: &[(u16, Vec<u8>)]) -> Vec<u8> {
    let mut b = B::new(be);
    for (code, val) in opts {
        b.u16(*code).u16(val.len() as u16).bytes(val).pad4();
    }
    if !opts.is_empty() {
        b.u32(0);
    }
    b.v
}

pub fn idb(be: bool, lt: u16, snaplen: u32, opts: &[(u16, Vec<u8>)]) -> Vec<u8> {
    let mut body = B::new(be);
    body.u16(lt).u16(0).u32(snaplen).bytes(&options(be, opts));
    block(be, 1, &body.v)
}

pub fn epb(be: bool, iface: u32, ts_units: u64, orig: u32, data: &[u8]) -> Vec<u8> {
    let mut body = B::new(be);
    body.u32(iface)
        .u32((ts_units >> 32) as u32)
        .u32(ts_units as u32)
        .u32(data.len() as u32)
        .u32(orig)
        .bytes(data)
        .pad4();
    block(be, 6, &body.v)
}

pub fn spb(be: bool, orig: u32, data: &[u8]) -> Vec<u8> {
    let mut body = B::new(be);
    body.u32(orig).bytes(data);
    block(be, 3, &body.v)
}

pub fn pb(be: bool, iface: u16, ts_units: u64, orig: u32, data: &[u8]) -> Vec<u8> {
    let mut body = B::new(be);
    body.u16(iface)
        .u16(0)
        .u32((ts_units >> 32) as u32)
        .u32(ts_units as u32)
        .u32(data.len() as u32)
        .u32(orig)
        .bytes(data);
    block(be, 2, &body.v)
}

/// A frame copied out of the reader's buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owned {
    pub number: u64,
    pub interface: u32,
    pub link_type: LinkType,
    pub timestamp_ns: i64,
    pub orig_len: u32,
    pub data: Vec<u8>,
}

/// Reads every frame; returns them and the error that stopped the reader, if any.
pub fn read_all(r: &mut CaptureReader) -> (Vec<Owned>, Option<CaptureError>) {
    let mut out = Vec::new();
    loop {
        match r.next_frame() {
            Ok(Some(f)) => out.push(Owned {
                number: f.number,
                interface: f.interface,
                link_type: f.link_type,
                timestamp_ns: f.timestamp_ns,
                orig_len: f.orig_len,
                data: f.data.to_vec(),
            }),
            Ok(None) => return (out, None),
            Err(e) => return (out, Some(e)),
        }
    }
}

/// Reads bytes both as a file (known size) and as a stream (unknown size).
pub fn read_bytes_as_stream(
    bytes: &[u8],
    name: &str,
) -> Result<(Vec<Owned>, Option<CaptureError>), CaptureError> {
    let mut r = CaptureReader::from_reader(std::io::Cursor::new(bytes.to_vec()), name)?;
    Ok(read_all(&mut r))
}

/// A file in the temp directory, removed when dropped.
pub struct TempFile(pub PathBuf);

impl TempFile {
    /// A fresh path ending in `name` (the extension matters to the writer);
    /// a counter keeps tests that run in parallel apart.
    pub fn new(name: &str) -> TempFile {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        TempFile(
            std::env::temp_dir().join(format!("ofl-capture-{}-{n}-{name}", std::process::id())),
        )
    }
    pub fn with(name: &str, bytes: &[u8]) -> TempFile {
        let t = TempFile::new(name);
        std::fs::write(&t.0, bytes).expect("write temp file");
        t
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// An Ethernet + IPv6 + TCP frame of exactly `total` bytes (IPv6 payload
/// length 0 with a real jumbo size would need a hop-by-hop header; tshark only
/// needs something to dissect, so lengths above 65535 keep payload length 0).
pub fn eth_ipv6_tcp(total: usize, seq: u32) -> Vec<u8> {
    let mut v = Vec::with_capacity(total);
    v.extend_from_slice(&[0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x86, 0xdd]);
    let plen = total - 14 - 40;
    v.extend_from_slice(&[0x60, 0, 0, 0]);
    v.extend_from_slice(&(if plen <= 0xFFFF { plen as u16 } else { 0 }).to_be_bytes());
    v.extend_from_slice(&[6, 64]);
    v.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    v.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    v.extend_from_slice(&40000u16.to_be_bytes());
    v.extend_from_slice(&5201u16.to_be_bytes());
    v.extend_from_slice(&seq.to_be_bytes());
    v.extend_from_slice(&1u32.to_be_bytes());
    v.extend_from_slice(&[0x50, 0x10, 0xff, 0xff, 0, 0, 0, 0]);
    let base = v.len();
    v.extend((base..total).map(|i| i as u8));
    v
}

/// A raw IPv4 + UDP packet of `total` bytes (no link header).
pub fn ipv4_udp(total: usize) -> Vec<u8> {
    let mut v = vec![
        0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ];
    v[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    v.extend_from_slice(&1234u16.to_be_bytes());
    v.extend_from_slice(&5678u16.to_be_bytes());
    v.extend_from_slice(&((total - 20) as u16).to_be_bytes());
    v.extend_from_slice(&[0, 0]);
    v.resize(total, 0xab);
    v
}
