//! A packet builder: frames from a description, with correct lengths and
//! checksums unless told to break them.
//!
//! Used by the tests, the kernel conformance generator, the benchmarks and
//! the sample-capture script, so that none of them hand-assembles bytes.
//!
//! ```
//! use offload::build::{FrameSpec, TcpSpec};
//! let frame = FrameSpec::tcp4([10, 0, 0, 1], [10, 0, 0, 2], TcpSpec::data(40000, 80, 1000))
//!     .payload(vec![0xab; 1448])
//!     .build();
//! assert_eq!(frame.len(), 14 + 20 + 20 + 1448);
//! ```

use crate::checksum;

/// Link layer of a built frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum L2Spec {
    /// Ethernet II with optional VLAN tags `(tpid, tci)`, outer first.
    Ethernet {
        src: [u8; 6],
        dst: [u8; 6],
        vlans: Vec<(u16, u16)>,
    },
    /// No link header (raw IP).
    None,
}

/// IPv4 header fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv4Spec {
    pub src: [u8; 4],
    pub dst: [u8; 4],
    pub ttl: u8,
    pub tos: u8,
    pub id: u16,
    pub df: bool,
    /// Extra flag bits OR-ed into the flags/fragment word (MF, offset, reserved).
    pub frag_extra: u16,
    /// Option bytes (padded with zeros to a multiple of 4).
    pub options: Vec<u8>,
    /// Write this total length instead of the real one (0 for BIG TCP).
    pub total_len_override: Option<u16>,
    pub corrupt_checksum: bool,
}

/// IPv6 header fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv6Spec {
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub flow_label: u32,
    /// Extension headers `(type, body)`; the body is padded so the header
    /// is a multiple of 8 bytes; next-header and length bytes are filled in.
    pub ext: Vec<(u8, Vec<u8>)>,
    pub payload_len_override: Option<u16>,
}

/// Network layer of a built frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IpSpec {
    V4(Ipv4Spec),
    V6(Ipv6Spec),
}

/// TCP header fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpSpec {
    pub sport: u16,
    pub dport: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub window: u16,
    pub urgent: u16,
    /// Option bytes (padded with NOPs... no: with zeros/EOL to a multiple of 4).
    pub options: Vec<u8>,
    pub corrupt_checksum: bool,
}

impl TcpSpec {
    /// An ACK-carrying data segment with window 512 and no options.
    pub fn data(sport: u16, dport: u16, seq: u32) -> Self {
        TcpSpec {
            sport,
            dport,
            seq,
            ack: 1,
            flags: crate::wire::tcp::flags::ACK,
            window: 512,
            urgent: 0,
            options: Vec::new(),
            corrupt_checksum: false,
        }
    }

    /// Adds a timestamp option (NOP, NOP, TS) as Linux sends it.
    pub fn with_timestamps(mut self, tsval: u32, tsecr: u32) -> Self {
        self.options = timestamp_option(tsval, tsecr).to_vec();
        self
    }
}

/// The 12 option bytes Linux puts on every segment of a connection with timestamps.
pub fn timestamp_option(tsval: u32, tsecr: u32) -> [u8; 12] {
    let mut o = [1, 1, 8, 10, 0, 0, 0, 0, 0, 0, 0, 0];
    o[4..8].copy_from_slice(&tsval.to_be_bytes());
    o[8..12].copy_from_slice(&tsecr.to_be_bytes());
    o
}

/// UDP header fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpSpec {
    pub sport: u16,
    pub dport: u16,
    /// Leave the checksum 0 (allowed for IPv4 and for tunnels).
    pub zero_checksum: bool,
    pub corrupt_checksum: bool,
    pub length_override: Option<u16>,
}

/// Transport layer of a built frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum L4Spec {
    Tcp(TcpSpec),
    Udp(UdpSpec),
    /// Raw bytes after the IP header with this protocol number.
    Other(u8),
}

/// A whole frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameSpec {
    pub l2: L2Spec,
    pub ip: IpSpec,
    pub l4: L4Spec,
    pub payload: Vec<u8>,
    /// Bytes appended after the IP packet (Ethernet padding).
    pub trailer: Vec<u8>,
}

/// Default MAC addresses of built frames.
pub const SRC_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x02];
pub const DST_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x01];

impl FrameSpec {
    /// Ethernet + IPv4 (DF, TTL 64, ID 0) + the TCP header.
    pub fn tcp4(src: [u8; 4], dst: [u8; 4], tcp: TcpSpec) -> Self {
        FrameSpec {
            l2: ethernet(),
            ip: IpSpec::V4(ipv4(src, dst)),
            l4: L4Spec::Tcp(tcp),
            payload: Vec::new(),
            trailer: Vec::new(),
        }
    }

    /// Ethernet + IPv6 (hop limit 64) + the TCP header.
    pub fn tcp6(src: [u8; 16], dst: [u8; 16], tcp: TcpSpec) -> Self {
        FrameSpec {
            l2: ethernet(),
            ip: IpSpec::V6(ipv6(src, dst)),
            l4: L4Spec::Tcp(tcp),
            payload: Vec::new(),
            trailer: Vec::new(),
        }
    }

    /// Ethernet + IPv4 + UDP.
    pub fn udp4(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Self {
        FrameSpec {
            l2: ethernet(),
            ip: IpSpec::V4(ipv4(src, dst)),
            l4: L4Spec::Udp(udp(sport, dport)),
            payload: Vec::new(),
            trailer: Vec::new(),
        }
    }

    /// Ethernet + IPv6 + UDP.
    pub fn udp6(src: [u8; 16], dst: [u8; 16], sport: u16, dport: u16) -> Self {
        FrameSpec {
            l2: ethernet(),
            ip: IpSpec::V6(ipv6(src, dst)),
            l4: L4Spec::Udp(udp(sport, dport)),
            payload: Vec::new(),
            trailer: Vec::new(),
        }
    }

    pub fn payload(mut self, payload: Vec<u8>) -> Self {
        self.payload = payload;
        self
    }

    /// The IPv4 fields (panics on an IPv6 spec: a programming error in a test).
    pub fn v4_mut(&mut self) -> &mut Ipv4Spec {
        match &mut self.ip {
            IpSpec::V4(v) => v,
            IpSpec::V6(_) => panic!("not an IPv4 frame spec"),
        }
    }

    /// The IPv6 fields (panics on an IPv4 spec).
    pub fn v6_mut(&mut self) -> &mut Ipv6Spec {
        match &mut self.ip {
            IpSpec::V6(v) => v,
            IpSpec::V4(_) => panic!("not an IPv6 frame spec"),
        }
    }

    /// The TCP fields (panics on a UDP spec).
    pub fn tcp_mut(&mut self) -> &mut TcpSpec {
        match &mut self.l4 {
            L4Spec::Tcp(t) => t,
            _ => panic!("not a TCP frame spec"),
        }
    }

    /// Serialises the frame.
    pub fn build(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.payload.len());
        if let L2Spec::Ethernet { src, dst, vlans } = &self.l2 {
            out.extend_from_slice(dst);
            out.extend_from_slice(src);
            for (tpid, tci) in vlans {
                out.extend_from_slice(&tpid.to_be_bytes());
                out.extend_from_slice(&tci.to_be_bytes());
            }
            let et: u16 = match self.ip {
                IpSpec::V4(_) => 0x0800,
                IpSpec::V6(_) => 0x86dd,
            };
            out.extend_from_slice(&et.to_be_bytes());
        }
        let l3 = out.len();
        let l4 = self.build_l4();
        match &self.ip {
            IpSpec::V4(v) => {
                let mut opts = v.options.clone();
                while opts.len() % 4 != 0 {
                    opts.push(0);
                }
                let ihl = 20 + opts.len();
                let total = ihl + l4.len();
                let mut h = vec![0u8; 20];
                h[0] = 0x40 | (ihl / 4) as u8;
                h[1] = v.tos;
                let tl = v.total_len_override.unwrap_or(total.min(0xffff) as u16);
                h[2..4].copy_from_slice(&tl.to_be_bytes());
                h[4..6].copy_from_slice(&v.id.to_be_bytes());
                let frag = if v.df { 0x4000 } else { 0 } | v.frag_extra;
                h[6..8].copy_from_slice(&frag.to_be_bytes());
                h[8] = v.ttl;
                h[9] = self.l4_proto();
                h[12..16].copy_from_slice(&v.src);
                h[16..20].copy_from_slice(&v.dst);
                h.extend_from_slice(&opts);
                let mut c = checksum::checksum(&h);
                if v.corrupt_checksum {
                    c ^= 0x5555;
                }
                h[10..12].copy_from_slice(&c.to_be_bytes());
                out.extend_from_slice(&h);
            }
            IpSpec::V6(v) => {
                let mut ext = Vec::new();
                for (i, (_, body)) in v.ext.iter().enumerate() {
                    let next = v.ext.get(i + 1).map(|e| e.0).unwrap_or(self.l4_proto());
                    let mut hdr = vec![next, 0];
                    hdr.extend_from_slice(body);
                    while hdr.len() % 8 != 0 || hdr.len() < 8 {
                        hdr.push(0);
                    }
                    hdr[1] = (hdr.len() / 8 - 1) as u8;
                    ext.extend_from_slice(&hdr);
                }
                let first_next = v.ext.first().map(|e| e.0).unwrap_or(self.l4_proto());
                let plen = ext.len() + l4.len();
                let word =
                    (6u32 << 28) | ((v.traffic_class as u32) << 20) | (v.flow_label & 0xfffff);
                out.extend_from_slice(&word.to_be_bytes());
                let pl = v.payload_len_override.unwrap_or(plen.min(0xffff) as u16);
                out.extend_from_slice(&pl.to_be_bytes());
                out.push(first_next);
                out.push(v.hop_limit);
                out.extend_from_slice(&v.src);
                out.extend_from_slice(&v.dst);
                out.extend_from_slice(&ext);
            }
        }
        let l4_at = out.len();
        out.extend_from_slice(&l4);
        self.fill_l4_checksum(&mut out, l3, l4_at);
        out.extend_from_slice(&self.trailer);
        out
    }

    fn l4_proto(&self) -> u8 {
        match &self.l4 {
            L4Spec::Tcp(_) => 6,
            L4Spec::Udp(_) => 17,
            L4Spec::Other(p) => *p,
        }
    }

    fn build_l4(&self) -> Vec<u8> {
        let mut h = Vec::with_capacity(60 + self.payload.len());
        match &self.l4 {
            L4Spec::Tcp(t) => {
                let mut opts = t.options.clone();
                while opts.len() % 4 != 0 {
                    opts.push(0);
                }
                let doff = 20 + opts.len();
                h.extend_from_slice(&t.sport.to_be_bytes());
                h.extend_from_slice(&t.dport.to_be_bytes());
                h.extend_from_slice(&t.seq.to_be_bytes());
                h.extend_from_slice(&t.ack.to_be_bytes());
                h.push(((doff / 4) as u8) << 4);
                h.push(t.flags);
                h.extend_from_slice(&t.window.to_be_bytes());
                h.extend_from_slice(&[0, 0]);
                h.extend_from_slice(&t.urgent.to_be_bytes());
                h.extend_from_slice(&opts);
            }
            L4Spec::Udp(u) => {
                let len = u
                    .length_override
                    .unwrap_or((8 + self.payload.len()).min(0xffff) as u16);
                h.extend_from_slice(&u.sport.to_be_bytes());
                h.extend_from_slice(&u.dport.to_be_bytes());
                h.extend_from_slice(&len.to_be_bytes());
                h.extend_from_slice(&[0, 0]);
            }
            L4Spec::Other(_) => {}
        }
        h.extend_from_slice(&self.payload);
        h
    }

    fn fill_l4_checksum(&self, out: &mut [u8], l3: usize, l4: usize) {
        let (field, corrupt, zero) = match &self.l4 {
            L4Spec::Tcp(t) => (16, t.corrupt_checksum, false),
            L4Spec::Udp(u) => (6, u.corrupt_checksum, u.zero_checksum),
            L4Spec::Other(_) => return,
        };
        if zero {
            return;
        }
        let seg_len = (out.len() - l4) as u32;
        let pseudo = match &self.ip {
            IpSpec::V4(_) => checksum::pseudo_ipv4(
                out[l3 + 12..l3 + 16].try_into().expect("built header"),
                out[l3 + 16..l3 + 20].try_into().expect("built header"),
                self.l4_proto(),
                seg_len,
            ),
            IpSpec::V6(_) => checksum::pseudo_ipv6(
                out[l3 + 8..l3 + 24].try_into().expect("built header"),
                out[l3 + 24..l3 + 40].try_into().expect("built header"),
                self.l4_proto(),
                seg_len,
            ),
        };
        let mut c = !checksum::fold(checksum::sum_bytes(pseudo, &out[l4..]));
        if matches!(self.l4, L4Spec::Udp(_)) && c == 0 {
            c = 0xffff; // RFC 768: a computed zero is sent as all ones
        }
        if corrupt {
            c ^= 0x00ff;
        }
        out[l4 + field..l4 + field + 2].copy_from_slice(&c.to_be_bytes());
    }
}

/// The UDP payload of a VXLAN packet: the 8-byte VXLAN header (I flag,
/// `vni`) followed by the inner Ethernet frame.
pub fn vxlan_payload(vni: u32, inner_frame: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(8 + inner_frame.len());
    p.extend_from_slice(&[0x08, 0, 0, 0]);
    p.extend_from_slice(&(vni << 8).to_be_bytes());
    p.extend_from_slice(inner_frame);
    p
}

impl FrameSpec {
    /// The UDP fields (panics on a TCP spec).
    pub fn udp_mut(&mut self) -> &mut UdpSpec {
        match &mut self.l4 {
            L4Spec::Udp(u) => u,
            _ => panic!("not a UDP frame spec"),
        }
    }
}

fn ethernet() -> L2Spec {
    L2Spec::Ethernet {
        src: SRC_MAC,
        dst: DST_MAC,
        vlans: Vec::new(),
    }
}

fn ipv4(src: [u8; 4], dst: [u8; 4]) -> Ipv4Spec {
    Ipv4Spec {
        src,
        dst,
        ttl: 64,
        tos: 0,
        id: 0,
        df: true,
        frag_extra: 0,
        options: Vec::new(),
        total_len_override: None,
        corrupt_checksum: false,
    }
}

fn ipv6(src: [u8; 16], dst: [u8; 16]) -> Ipv6Spec {
    Ipv6Spec {
        src,
        dst,
        hop_limit: 64,
        traffic_class: 0,
        flow_label: 0,
        ext: Vec::new(),
        payload_len_override: None,
    }
}

fn udp(sport: u16, dport: u16) -> UdpSpec {
    UdpSpec {
        sport,
        dport,
        zero_checksum: false,
        corrupt_checksum: false,
        length_override: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{ipv4::Ipv4, ipv6::Ipv6, tcp::Tcp};

    #[test]
    fn tcp4_frame_has_valid_checksums() {
        let f = FrameSpec::tcp4([10, 0, 0, 1], [10, 0, 0, 2], TcpSpec::data(1, 2, 3))
            .payload(vec![7; 100])
            .build();
        let ip = Ipv4::new_checked(&f[14..]).unwrap();
        assert!(ip.header_checksum_ok());
        assert_eq!(ip.total_len() as usize, f.len() - 14);
        let seg = &f[34..];
        let pseudo = checksum::pseudo_ipv4(ip.src(), ip.dst(), 6, seg.len() as u32);
        assert!(checksum::verify(pseudo, seg));
    }

    #[test]
    fn tcp6_with_dest_options_has_valid_checksum() {
        let mut s = FrameSpec::tcp6(
            [1; 16],
            [2; 16],
            TcpSpec::data(1, 2, 3).with_timestamps(5, 6),
        );
        s.v6_mut().ext.push((60, vec![1, 4, 0, 0, 0, 0]));
        let f = s.payload(vec![1; 10]).build();
        let ip = Ipv6::new_checked(&f[14..]).unwrap();
        let chain = ip.walk_ext().unwrap();
        assert_eq!((chain.upper, chain.upper_offset), (6, 48));
        let seg = &f[14 + 48..];
        let tcp = Tcp::new_checked(seg).unwrap();
        assert_eq!(tcp.timestamps(), Some((5, 6)));
        let pseudo = checksum::pseudo_ipv6(&ip.src(), &ip.dst(), 6, seg.len() as u32);
        assert!(checksum::verify(pseudo, seg));
    }
}
