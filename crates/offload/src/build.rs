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
use crate::wire::ethernet::{self, Ethernet};
use crate::wire::ipv4::{self, Ipv4};
use crate::wire::ipv6::{self, Ipv6};
use crate::wire::tcp::{self, Tcp};
use crate::wire::udp::{self, Udp};
use crate::wire::vxlan::{self, Vxlan};
use crate::wire::{ip_proto, put16, IpVersion, Transport};

/// Link layer of a built frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum L2Spec {
    /// Ethernet II with optional VLAN tags `(tpid, tci)`, outer first.
    Ethernet {
        /// Source MAC.
        src: [u8; 6],
        /// Destination MAC.
        dst: [u8; 6],
        /// VLAN tags `(tpid, tci)`, outer first.
        vlans: Vec<(u16, u16)>,
    },
    /// No link header (raw IP).
    None,
}

/// IPv4 header fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv4Spec {
    /// Source address.
    pub src: [u8; 4],
    /// Destination address.
    pub dst: [u8; 4],
    /// Time to live.
    pub ttl: u8,
    /// Type of service.
    pub tos: u8,
    /// Identification.
    pub id: u16,
    /// Set DF.
    pub df: bool,
    /// Extra flag bits OR-ed into the flags/fragment word (MF, offset, reserved).
    pub frag_extra: u16,
    /// Option bytes (padded with zeros to a multiple of 4).
    pub options: Vec<u8>,
    /// Write this total length instead of the real one (0 for BIG TCP).
    pub total_len_override: Option<u16>,
    /// Write a wrong header checksum.
    pub corrupt_checksum: bool,
}

/// IPv6 header fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv6Spec {
    /// Source address.
    pub src: [u8; 16],
    /// Destination address.
    pub dst: [u8; 16],
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
    /// Extension headers `(type, body)`; the body is padded so the header
    /// is a multiple of 8 bytes; next-header and length bytes are filled in.
    pub ext: Vec<(u8, Vec<u8>)>,
    /// Write this payload length instead of the real one (0 for BIG TCP).
    pub payload_len_override: Option<u16>,
}

/// Network layer of a built frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IpSpec {
    /// IPv4.
    V4(Ipv4Spec),
    /// IPv6.
    V6(Ipv6Spec),
}

/// TCP header fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpSpec {
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgment number.
    pub ack: u32,
    /// Flag byte ([`crate::wire::tcp::flags`]).
    pub flags: u8,
    /// Window.
    pub window: u16,
    /// Urgent pointer.
    pub urgent: u16,
    /// Option bytes (padded with NOPs... no: with zeros/EOL to a multiple of 4).
    pub options: Vec<u8>,
    /// Write a wrong checksum.
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
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// Leave the checksum 0 (allowed for IPv4 and for tunnels).
    pub zero_checksum: bool,
    /// Write a wrong checksum.
    pub corrupt_checksum: bool,
    /// Write this length instead of the real one.
    pub length_override: Option<u16>,
}

/// Transport layer of a built frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum L4Spec {
    /// TCP.
    Tcp(TcpSpec),
    /// UDP.
    Udp(UdpSpec),
    /// Raw bytes after the IP header with this protocol number.
    Other(u8),
}

/// A whole frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameSpec {
    /// Link layer.
    pub l2: L2Spec,
    /// Network layer.
    pub ip: IpSpec,
    /// Transport layer.
    pub l4: L4Spec,
    /// Transport payload.
    pub payload: Vec<u8>,
    /// Bytes appended after the IP packet (Ethernet padding).
    pub trailer: Vec<u8>,
}

/// Default MAC addresses of built frames.
pub const SRC_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x02];
/// Default destination MAC.
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

    /// Sets the transport payload.
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

    /// Serialises the frame. Every header is written through its wire
    /// view ([`crate::wire`]), so the builder and the parsers share one
    /// description of each header.
    pub fn build(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.payload.len());
        if let L2Spec::Ethernet { src, dst, vlans } = &self.l2 {
            let mut h = [0u8; ethernet::HEADER_LEN];
            let mut eth = Ethernet::new_unchecked(&mut h[..]);
            eth.set_dst(*dst);
            eth.set_src(*src);
            let et = self.ip_version().ethertype();
            eth.set_ethertype(vlans.first().map_or(et, |v| v.0));
            out.extend_from_slice(&h);
            for (i, (_, tci)) in vlans.iter().enumerate() {
                let next = vlans.get(i + 1).map_or(et, |v| v.0);
                let mut tag = [0u8; ethernet::VLAN_TAG_LEN];
                ethernet::put_vlan_tag(&mut tag, *tci, next);
                out.extend_from_slice(&tag);
            }
        }
        let l3 = out.len();
        let l4 = self.build_l4();
        let proto = self.l4_proto();
        match &self.ip {
            IpSpec::V4(v) => {
                let mut opts = v.options.clone();
                while opts.len() % 4 != 0 {
                    opts.push(0);
                }
                let ihl = ipv4::MIN_HEADER_LEN + opts.len();
                let total = ihl + l4.len();
                let mut h = vec![0u8; ihl];
                h[ipv4::MIN_HEADER_LEN..].copy_from_slice(&opts);
                let mut ip = Ipv4::new_unchecked(&mut h[..]);
                ip.set_version_and_header_len(ihl);
                ip.set_tos(v.tos);
                ip.set_total_len(v.total_len_override.unwrap_or(total.min(0xffff) as u16));
                ip.set_ident(v.id);
                ip.set_frag_word(if v.df { ipv4::DF } else { 0 } | v.frag_extra);
                ip.set_ttl(v.ttl);
                ip.set_protocol(proto);
                ip.set_src(v.src);
                ip.set_dst(v.dst);
                ip.fill_header_checksum();
                if v.corrupt_checksum {
                    let c = ip.header_checksum();
                    ip.set_header_checksum(c ^ 0x5555);
                }
                out.extend_from_slice(&h);
            }
            IpSpec::V6(v) => {
                let mut ext = Vec::new();
                for (i, (_, body)) in v.ext.iter().enumerate() {
                    let next = v.ext.get(i + 1).map(|e| e.0).unwrap_or(proto);
                    let mut hdr = vec![next, 0];
                    hdr.extend_from_slice(body);
                    while hdr.len() % 8 != 0 || hdr.len() < 8 {
                        hdr.push(0);
                    }
                    hdr[ipv6::ext_field::LEN] = (hdr.len() / 8 - 1) as u8;
                    ext.extend_from_slice(&hdr);
                }
                let first_next = v.ext.first().map(|e| e.0).unwrap_or(proto);
                let plen = ext.len() + l4.len();
                let mut h = [0u8; ipv6::HEADER_LEN];
                let mut ip = Ipv6::new_unchecked(&mut h[..]);
                ip.set_first_word(v.traffic_class, v.flow_label);
                ip.set_payload_len(v.payload_len_override.unwrap_or(plen.min(0xffff) as u16));
                ip.set_next_header(first_next);
                ip.set_hop_limit(v.hop_limit);
                ip.set_src(&v.src);
                ip.set_dst(&v.dst);
                out.extend_from_slice(&h);
                out.extend_from_slice(&ext);
            }
        }
        let l4_at = out.len();
        out.extend_from_slice(&l4);
        self.fill_l4_checksum(&mut out, l3, l4_at);
        out.extend_from_slice(&self.trailer);
        out
    }

    fn ip_version(&self) -> IpVersion {
        match self.ip {
            IpSpec::V4(_) => IpVersion::V4,
            IpSpec::V6(_) => IpVersion::V6,
        }
    }

    fn l4_proto(&self) -> u8 {
        match &self.l4 {
            L4Spec::Tcp(_) => ip_proto::TCP,
            L4Spec::Udp(_) => ip_proto::UDP,
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
                let doff = tcp::MIN_HEADER_LEN + opts.len();
                h.resize(doff, 0);
                h[tcp::field::OPTIONS..].copy_from_slice(&opts);
                let mut th = Tcp::new_unchecked(&mut h[..]);
                th.set_ports(t.sport, t.dport);
                th.set_seq(t.seq);
                th.set_ack(t.ack);
                th.set_header_len(doff);
                th.set_flags(t.flags);
                th.set_window(t.window);
                th.set_urgent(t.urgent);
            }
            L4Spec::Udp(u) => {
                let len = u
                    .length_override
                    .unwrap_or((udp::HEADER_LEN + self.payload.len()).min(0xffff) as u16);
                h.resize(udp::HEADER_LEN, 0);
                let mut uh = Udp::new_unchecked(&mut h[..]);
                uh.set_ports(u.sport, u.dport);
                uh.set_length(len);
            }
            L4Spec::Other(_) => {}
        }
        h.extend_from_slice(&self.payload);
        h
    }

    fn fill_l4_checksum(&self, out: &mut [u8], l3: usize, l4: usize) {
        let (transport, corrupt, zero) = match &self.l4 {
            L4Spec::Tcp(t) => (Transport::Tcp, t.corrupt_checksum, false),
            L4Spec::Udp(u) => (Transport::Udp, u.corrupt_checksum, u.zero_checksum),
            L4Spec::Other(_) => return,
        };
        if zero {
            return;
        }
        let seg_len = (out.len() - l4) as u32;
        let pseudo = self
            .ip_version()
            .pseudo_header(&out[l3..], transport.protocol(), seg_len);
        let mut c = !checksum::fold(checksum::sum_bytes(pseudo, &out[l4..]));
        if transport == Transport::Udp && c == 0 {
            c = 0xffff; // RFC 768: a computed zero is sent as all ones
        }
        if corrupt {
            c ^= 0x00ff;
        }
        put16(out, l4 + transport.checksum_offset(), c);
    }
}

/// The UDP payload of a VXLAN packet: the 8-byte VXLAN header (I flag,
/// `vni`) followed by the inner Ethernet frame.
pub fn vxlan_payload(vni: u32, inner_frame: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; vxlan::HEADER_LEN];
    Vxlan::new_unchecked(&mut p[..]).set_vni(vni);
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
