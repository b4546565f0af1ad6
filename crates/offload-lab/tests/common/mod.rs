//! Test scaffolding shared by the integration tests: a root check that fails
//! loudly, and a tiny hand-written frame builder (Ethernet + IPv4/IPv6 + TCP
//! or UDP, optional VXLAN encapsulation) with correct checksums. It exists
//! only to feed the oracle known trains; the engine has the real wire code.

#![allow(dead_code)]

use std::net::{Ipv4Addr, Ipv6Addr};

/// Fails the test (never skips) when it cannot run: the oracle needs root
/// and `/dev/net/tun`, which CI provides.
pub fn require_root() {
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "this test needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN); run it as root"
    );
    assert!(
        std::path::Path::new("/dev/net/tun").exists(),
        "this test needs /dev/net/tun"
    );
}

/// Ones'-complement sum of `data` added to `acc` (not folded).
fn sum(data: &[u8], mut acc: u32) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        acc += u32::from(*last) << 8;
    }
    acc
}

fn fold(mut acc: u32) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

/// Internet checksum of `data`.
pub fn checksum(data: &[u8]) -> u16 {
    fold(sum(data, 0))
}

/// IPv4 header fields a train varies.
#[derive(Clone, Copy, Debug)]
pub struct V4 {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub id: u16,
    pub df: bool,
    pub ttl: u8,
    pub tos: u8,
}

impl V4 {
    pub fn new(src: Ipv4Addr, dst: Ipv4Addr, id: u16, df: bool) -> Self {
        V4 {
            src,
            dst,
            id,
            df,
            ttl: 64,
            tos: 0,
        }
    }
}

/// TCP header fields a train varies (20-byte header, no options).
#[derive(Clone, Copy, Debug)]
pub struct Tcp {
    pub sport: u16,
    pub dport: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
}

pub const ACK: u8 = 0x10;

/// A deterministic payload: byte `i` of the stream is `(i * 7 + i / 251) as u8`,
/// where `i` counts from `offset`, so merged payloads can be compared with
/// the concatenation of the inputs.
pub fn payload(offset: usize, len: usize) -> Vec<u8> {
    (offset..offset + len)
        .map(|i| (i.wrapping_mul(7) + i / 251) as u8)
        .collect()
}

fn eth(dst: [u8; 6], src: [u8; 6], ethertype: u16) -> Vec<u8> {
    let mut f = Vec::with_capacity(1600);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

fn tcp_segment(t: &Tcp, data: &[u8], pseudo: u32) -> Vec<u8> {
    let mut h = Vec::with_capacity(20 + data.len());
    h.extend_from_slice(&t.sport.to_be_bytes());
    h.extend_from_slice(&t.dport.to_be_bytes());
    h.extend_from_slice(&t.seq.to_be_bytes());
    h.extend_from_slice(&t.ack.to_be_bytes());
    h.push(5 << 4);
    h.push(t.flags);
    h.extend_from_slice(&4096u16.to_be_bytes()); // window
    h.extend_from_slice(&[0, 0, 0, 0]); // checksum, urgent pointer
    h.extend_from_slice(data);
    let c = fold(sum(&h, pseudo));
    h[16..18].copy_from_slice(&c.to_be_bytes());
    h
}

fn udp_datagram(sport: u16, dport: u16, data: &[u8], pseudo: Option<u32>) -> Vec<u8> {
    let len = (8 + data.len()) as u16;
    let mut h = Vec::with_capacity(8 + data.len());
    h.extend_from_slice(&sport.to_be_bytes());
    h.extend_from_slice(&dport.to_be_bytes());
    h.extend_from_slice(&len.to_be_bytes());
    h.extend_from_slice(&[0, 0]);
    h.extend_from_slice(data);
    if let Some(p) = pseudo {
        let mut c = fold(sum(&h, p));
        if c == 0 {
            c = 0xffff;
        }
        h[6..8].copy_from_slice(&c.to_be_bytes());
    }
    h
}

fn pseudo4(ip: &V4, proto: u8, len: usize) -> u32 {
    let mut p = Vec::with_capacity(12);
    p.extend_from_slice(&ip.src.octets());
    p.extend_from_slice(&ip.dst.octets());
    p.push(0);
    p.push(proto);
    p.extend_from_slice(&(len as u16).to_be_bytes());
    sum(&p, 0)
}

fn pseudo6(src: Ipv6Addr, dst: Ipv6Addr, proto: u8, len: usize) -> u32 {
    let mut p = Vec::with_capacity(40);
    p.extend_from_slice(&src.octets());
    p.extend_from_slice(&dst.octets());
    p.extend_from_slice(&(len as u32).to_be_bytes());
    p.extend_from_slice(&[0, 0, 0, proto]);
    sum(&p, 0)
}

/// The folded (not complemented) IPv4 pseudo-header sum: what GRO leaves
/// in a merged packet's TCP checksum field.
pub fn pseudo_sum_v4(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, len: usize) -> u16 {
    !fold(pseudo4(&V4::new(src, dst, 0, false), proto, len))
}

/// The folded IPv6 pseudo-header sum (32-bit length, so jumbograms work).
pub fn pseudo_sum_v6(src: Ipv6Addr, dst: Ipv6Addr, proto: u8, len: usize) -> u16 {
    !fold(pseudo6(src, dst, proto, len))
}

fn ipv4_packet(ip: &V4, proto: u8, l4: &[u8]) -> Vec<u8> {
    let mut h = Vec::with_capacity(20 + l4.len());
    h.push(0x45);
    h.push(ip.tos);
    h.extend_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
    h.extend_from_slice(&ip.id.to_be_bytes());
    h.extend_from_slice(&(if ip.df { 0x4000u16 } else { 0 }).to_be_bytes());
    h.push(ip.ttl);
    h.push(proto);
    h.extend_from_slice(&[0, 0]);
    h.extend_from_slice(&ip.src.octets());
    h.extend_from_slice(&ip.dst.octets());
    let c = checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h.extend_from_slice(l4);
    h
}

/// Ethernet + IPv4 + TCP.
pub fn tcp4(dst: [u8; 6], src: [u8; 6], ip: V4, t: Tcp, data: &[u8]) -> Vec<u8> {
    let seg = tcp_segment(&t, data, pseudo4(&ip, 6, 20 + data.len()));
    let mut f = eth(dst, src, 0x0800);
    f.extend_from_slice(&ipv4_packet(&ip, 6, &seg));
    f
}

/// Ethernet + IPv4 + UDP (with checksum).
pub fn udp4(dst: [u8; 6], src: [u8; 6], ip: V4, sport: u16, dport: u16, data: &[u8]) -> Vec<u8> {
    let dg = udp_datagram(sport, dport, data, Some(pseudo4(&ip, 17, 8 + data.len())));
    let mut f = eth(dst, src, 0x0800);
    f.extend_from_slice(&ipv4_packet(&ip, 17, &dg));
    f
}

/// Ethernet + IPv6 + TCP.
pub fn tcp6(dst: [u8; 6], src: [u8; 6], s: Ipv6Addr, d: Ipv6Addr, t: Tcp, data: &[u8]) -> Vec<u8> {
    let seg = tcp_segment(&t, data, pseudo6(s, d, 6, 20 + data.len()));
    let mut f = eth(dst, src, 0x86dd);
    f.extend_from_slice(&0x6000_0000u32.to_be_bytes());
    f.extend_from_slice(&(seg.len() as u16).to_be_bytes());
    f.push(6);
    f.push(64);
    f.extend_from_slice(&s.octets());
    f.extend_from_slice(&d.octets());
    f.extend_from_slice(&seg);
    f
}

/// Ethernet + IPv4 + UDP (checksum 0) + VXLAN around an inner Ethernet frame.
pub fn vxlan4(
    dst: [u8; 6],
    src: [u8; 6],
    outer: V4,
    sport: u16,
    dport: u16,
    vni: u32,
    inner: &[u8],
) -> Vec<u8> {
    let mut vx = Vec::with_capacity(8 + inner.len());
    vx.extend_from_slice(&0x0800_0000u32.to_be_bytes());
    vx.extend_from_slice(&(vni << 8).to_be_bytes());
    vx.extend_from_slice(inner);
    let dg = udp_datagram(sport, dport, &vx, None);
    let mut f = eth(dst, src, 0x0800);
    f.extend_from_slice(&ipv4_packet(&outer, 17, &dg));
    f
}

/// A parsed output frame: enough to check what GRO did.
#[derive(Debug)]
pub struct Parsed {
    /// IPv4 total length or IPv6 payload length, as written in the header.
    pub ip_len: u16,
    /// IPv6: the Jumbo Payload option's length, if a Hop-by-Hop header
    /// carrying it is present.
    pub jumbo: Option<u32>,
    /// IPv6 Hop-by-Hop header length in bytes (0 if absent).
    pub hbh_len: usize,
    /// Offset of the L4 header in the frame.
    pub l4_off: usize,
    /// L4 protocol.
    pub proto: u8,
    /// L4 payload (after the TCP or UDP header).
    pub payload_off: usize,
}

/// Inserts an 802.1Q tag (TPID 0x8100) after the MAC addresses.
pub fn with_vlan(frame: &[u8], tci: u16) -> Vec<u8> {
    let mut f = frame[..12].to_vec();
    f.extend_from_slice(&0x8100u16.to_be_bytes());
    f.extend_from_slice(&tci.to_be_bytes());
    f.extend_from_slice(&frame[12..]);
    f
}

/// Parses Ethernet (+ VLAN tags) + IPv4/IPv6 (+ Hop-by-Hop) + TCP/UDP at `off`.
pub fn parse(frame: &[u8], off: usize) -> Parsed {
    let mut et_off = off + 12;
    while matches!(
        u16::from_be_bytes([frame[et_off], frame[et_off + 1]]),
        0x8100 | 0x88a8
    ) {
        et_off += 4;
    }
    let ethertype = u16::from_be_bytes([frame[et_off], frame[et_off + 1]]);
    let ip = et_off + 2;
    let (ip_len, mut l4, mut proto, mut jumbo, mut hbh_len) = match ethertype {
        0x0800 => {
            let ihl = usize::from(frame[ip] & 0x0f) * 4;
            (
                u16::from_be_bytes([frame[ip + 2], frame[ip + 3]]),
                ip + ihl,
                frame[ip + 9],
                None,
                0,
            )
        }
        0x86dd => (
            u16::from_be_bytes([frame[ip + 4], frame[ip + 5]]),
            ip + 40,
            frame[ip + 6],
            None,
            0,
        ),
        other => panic!("unexpected EtherType {other:#06x}"),
    };
    if ethertype == 0x86dd && proto == 0 {
        let len = (usize::from(frame[l4 + 1]) + 1) * 8;
        // Options start after next-header and length; look for type 0xC2.
        let opts = &frame[l4 + 2..l4 + len];
        let mut i = 0;
        while i + 1 < opts.len() {
            match opts[i] {
                0 => i += 1,
                0xc2 => {
                    jumbo = Some(u32::from_be_bytes([
                        opts[i + 2],
                        opts[i + 3],
                        opts[i + 4],
                        opts[i + 5],
                    ]));
                    i += 2 + usize::from(opts[i + 1]);
                }
                _ => i += 2 + usize::from(opts[i + 1]),
            }
        }
        proto = frame[l4];
        hbh_len = len;
        l4 += len;
    }
    let payload_off = match proto {
        6 => l4 + usize::from(frame[l4 + 12] >> 4) * 4,
        17 => l4 + 8,
        other => panic!("unexpected L4 protocol {other}"),
    };
    Parsed {
        ip_len,
        jumbo,
        hbh_len,
        l4_off: l4,
        proto,
        payload_off,
    }
}

/// Payload sizes of each output frame (plain, not encapsulated).
pub fn payload_sizes(frames: &[Vec<u8>]) -> Vec<usize> {
    frames
        .iter()
        .map(|f| f.len() - parse(f, 0).payload_off)
        .collect()
}
