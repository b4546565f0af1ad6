//! One frame's headers, read once for the flow statistics.
//!
//! ```text
//! link | IPv4/IPv6 | TCP/UDP | payload                     plain flow
//! link | outer IP | UDP | VXLAN | Ethernet | IP | TCP/UDP   tunnelled flow
//! ```
//!
//! The engine's wire views do the bounds checks; this module only gathers
//! the fields analysis needs into one `Copy` value. Nothing here allocates,
//! and nothing panics on short or inconsistent input: a frame that cannot
//! be read is reported as `None` with the reason
//! counted by the caller.

use offload::link::dissect_l2;
use offload::wire::ipv4::Ipv4;
use offload::wire::ipv6::Ipv6;
use offload::wire::tcp::Tcp;
use offload::wire::udp::Udp;
use offload::LinkKind;

/// IP protocol numbers used here.
pub const PROTO_TCP: u8 = 6;
pub const PROTO_UDP: u8 = 17;

/// The network header fields analysis tracks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpFields {
    pub v6: bool,
    /// Addresses; IPv4 in the first 4 bytes.
    pub src: [u8; 16],
    pub dst: [u8; 16],
    /// IPv4 identification (0 for IPv6).
    pub id: u16,
    /// IPv4 DF (false for IPv6).
    pub df: bool,
    /// TTL or hop limit.
    pub ttl: u8,
    /// TOS or traffic class.
    pub tos: u8,
    /// The IP packet's length (header + payload) as the packet says, or
    /// from the captured bytes for BIG TCP's zero length field.
    pub ip_len: u32,
    /// The length field was 0 (IPv4 BIG TCP, IPv6 jumbo or BIG TCP without HBH).
    pub len_zero: bool,
    /// Offset of this header in the frame.
    pub off: usize,
    /// Header length (IPv4 with options; IPv6 with skipped extension headers).
    pub hdr_len: usize,
    /// Upper-layer protocol.
    pub proto: u8,
}

/// TCP fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpFields {
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub window: u16,
    pub hdr_len: u8,
    pub checksum: u16,
    /// A cheap fingerprint of the option bytes without the timestamp values,
    /// to notice option changes other than the ever-changing TSval/TSecr.
    pub opt_sig: u32,
    pub tsval: Option<u32>,
    /// MSS option (SYN segments).
    pub mss_opt: Option<u16>,
    /// Window scale option (SYN segments).
    pub wscale: Option<u8>,
    /// The first two SACK blocks (left, right edges), `nsack` of them.
    pub sack: [(u32, u32); 2],
    pub nsack: u8,
    /// How many SACK blocks the option holds (up to 4).
    pub sack_blocks: u8,
}

/// The transport header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum L4 {
    Tcp(TcpFields),
    Udp { checksum: u16, length: u16 },
    Other,
}

/// The outer headers of a VXLAN-encapsulated frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tunnel {
    pub ip: IpFields,
    pub sport: u16,
    pub dport: u16,
    pub udp_checksum: u16,
    pub udp_off: usize,
    pub vni: u32,
}

/// Everything analysis reads from one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parsed {
    pub tunnel: Option<Tunnel>,
    /// The inner (or only) network header.
    pub ip: IpFields,
    pub sport: u16,
    pub dport: u16,
    pub l4: L4,
    /// Offset of the transport header in the frame.
    pub l4_off: usize,
    /// Transport payload bytes, from the IP length (not the captured bytes).
    pub payload: u32,
    /// The capture kept every byte of the packet.
    pub complete: bool,
    /// Cooked captures: the packet was leaving the capture host.
    pub outgoing: Option<bool>,
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Reads an IP header at `off`; `frame_len` is what was captured and
/// `orig_rest` the bytes the packet had from `off` on the wire.
#[inline]
fn read_ip(frame: &[u8], off: usize, orig_rest: usize) -> Option<IpFields> {
    let b = frame.get(off..)?;
    match b.first()? >> 4 {
        4 => {
            let ip = Ipv4::new_checked(b).ok()?;
            let mut src = [0u8; 16];
            let mut dst = [0u8; 16];
            src[..4].copy_from_slice(&ip.src());
            dst[..4].copy_from_slice(&ip.dst());
            let tl = ip.total_len();
            let proto = if ip.is_fragment() && ip.frag_word() & 0x1fff != 0 {
                // A non-first fragment has no transport header.
                0
            } else {
                ip.protocol()
            };
            Some(IpFields {
                v6: false,
                src,
                dst,
                id: ip.ident(),
                df: ip.dont_fragment(),
                ttl: ip.ttl(),
                tos: ip.tos(),
                ip_len: if tl == 0 { orig_rest as u32 } else { tl as u32 },
                len_zero: tl == 0,
                off,
                hdr_len: ip.header_len(),
                proto,
            })
        }
        6 => {
            let ip = Ipv6::new_checked(b).ok()?;
            let chain = ip.walk_ext().ok()?;
            let pl = ip.payload_len();
            let ip_len = match (pl, chain.jumbo) {
                (0, Some(j)) => 40 + j,
                (0, None) => orig_rest as u32,
                (n, _) => 40 + n as u32,
            };
            Some(IpFields {
                v6: true,
                src: ip.src(),
                dst: ip.dst(),
                id: 0,
                df: false,
                ttl: ip.hop_limit(),
                tos: ip.traffic_class(),
                ip_len,
                len_zero: pl == 0,
                off,
                hdr_len: chain.upper_offset,
                proto: chain.upper,
            })
        }
        _ => None,
    }
}

/// Fingerprint of TCP options with the timestamp values blanked.
/// The TCP options analysis reads, with the option signature.
#[derive(Debug, Default)]
struct TcpOptions {
    sig: u32,
    tsval: Option<u32>,
    mss: Option<u16>,
    wscale: Option<u8>,
    sack: [(u32, u32); 2],
    nsack: u8,
    sack_blocks: u8,
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// FNV-1a start and step of the option signature.
const SIG_START: u32 = 0x811c_9dc5;
const SIG_PRIME: u32 = 0x0100_0193;

/// The signature of NOP, NOP, timestamp: the options of nearly every
/// segment of a Linux bulk flow, recognised without the walk.
const SIG_NOP_NOP_TS: u32 =
    ((((SIG_START ^ 1).wrapping_mul(SIG_PRIME)) ^ 1).wrapping_mul(SIG_PRIME) ^ 8)
        .wrapping_mul(SIG_PRIME);

#[inline]
fn option_signature(opts: &[u8]) -> TcpOptions {
    if let [1, 1, 8, 10, a, b, c, d, _, _, _, _] = *opts {
        return TcpOptions {
            sig: SIG_NOP_NOP_TS,
            tsval: Some(u32::from_be_bytes([a, b, c, d])),
            ..TcpOptions::default()
        };
    }
    option_walk(opts)
}

fn option_walk(opts: &[u8]) -> TcpOptions {
    let mut sig: u32 = SIG_START;
    let mut ts = None;
    let mut mss = None;
    let mut wscale = None;
    let mut sack = [(0u32, 0u32); 2];
    let mut nsack = 0u8;
    let mut sack_blocks = 0u8;
    let mut i = 0;
    while i < opts.len() {
        let kind = opts[i];
        if kind == 0 {
            break;
        }
        if kind == 1 {
            sig = (sig ^ 1).wrapping_mul(SIG_PRIME);
            i += 1;
            continue;
        }
        let Some(&len) = opts.get(i + 1) else { break };
        let len = len as usize;
        if len < 2 || i + len > opts.len() {
            break;
        }
        sig = (sig ^ kind as u32).wrapping_mul(SIG_PRIME);
        match kind {
            8 if len == 10 => {
                ts = Some(u32::from_be_bytes([
                    opts[i + 2],
                    opts[i + 3],
                    opts[i + 4],
                    opts[i + 5],
                ]))
            }
            2 if len == 4 => mss = Some(be16(opts, i + 2)),
            3 if len == 3 => {
                wscale = Some(opts[i + 2].min(14));
                sig = (sig ^ opts[i + 2] as u32).wrapping_mul(SIG_PRIME);
            }
            5 if len >= 10 && (len - 2).is_multiple_of(8) => {
                for &byte in &opts[i + 1..i + len] {
                    sig = (sig ^ byte as u32).wrapping_mul(SIG_PRIME);
                }
                sack_blocks = ((len - 2) / 8) as u8;
                for (b, slot) in sack.iter_mut().enumerate().take((len - 2) / 8) {
                    let at = i + 2 + b * 8;
                    *slot = (be32(opts, at), be32(opts, at + 4));
                    nsack += 1;
                }
            }
            _ => {
                for &byte in &opts[i + 1..i + len] {
                    sig = (sig ^ byte as u32).wrapping_mul(SIG_PRIME);
                }
            }
        }
        i += len;
    }
    TcpOptions {
        sig,
        tsval: ts,
        mss,
        wscale,
        sack,
        nsack,
        sack_blocks,
    }
}

/// Reads the transport header of the IP packet described by `ip`.
#[inline]
fn read_l4(frame: &[u8], ip: &IpFields) -> Option<(u16, u16, L4, usize, u32)> {
    let off = ip.off + ip.hdr_len;
    let b = frame.get(off..)?;
    let l4_room = ip.ip_len.saturating_sub(ip.hdr_len as u32);
    match ip.proto {
        PROTO_TCP => {
            let t = Tcp::new_checked(b).ok()?;
            let o = option_signature(t.options());
            let hl = t.header_len();
            Some((
                t.src_port(),
                t.dst_port(),
                L4::Tcp(TcpFields {
                    seq: t.seq(),
                    ack: t.ack(),
                    flags: t.flags(),
                    window: t.window(),
                    hdr_len: hl as u8,
                    checksum: t.checksum(),
                    opt_sig: o.sig,
                    tsval: o.tsval,
                    mss_opt: o.mss,
                    wscale: o.wscale,
                    sack: o.sack,
                    nsack: o.nsack,
                    sack_blocks: o.sack_blocks,
                }),
                off,
                l4_room.saturating_sub(hl as u32),
            ))
        }
        PROTO_UDP => {
            let u = Udp::new_checked(b).ok()?;
            Some((
                u.src_port(),
                u.dst_port(),
                L4::Udp {
                    checksum: u.checksum(),
                    length: u.length(),
                },
                off,
                l4_room.saturating_sub(8),
            ))
        }
        _ => Some((0, 0, L4::Other, off, l4_room)),
    }
}

/// Dissects one frame. `vxlan_ports` are the UDP destination ports whose
/// payload is read as VXLAN. Returns `None` for frames without an IP header
/// analysis can read.
pub fn parse(link: LinkKind, frame: &[u8], orig_len: u32, vxlan_ports: &[u16]) -> Option<Parsed> {
    let l2 = dissect_l2(link, frame).ok()?;
    let outgoing = matches!(link, LinkKind::LinuxSll | LinkKind::LinuxSll2).then_some(l2.outgoing);
    let orig = (orig_len as usize).max(frame.len());
    let ip = read_ip(frame, l2.l3_offset, orig - l2.l3_offset)?;
    let (sport, dport, l4, l4_off, payload) = read_l4(frame, &ip)?;
    let complete = orig <= frame.len();
    if let L4::Udp { checksum, .. } = l4 {
        if vxlan_ports.contains(&dport) {
            if let Some(p) = parse_vxlan(frame, orig, &ip, sport, dport, checksum, l4_off) {
                return Some(Parsed {
                    outgoing,
                    complete,
                    ..p
                });
            }
        }
    }
    Some(Parsed {
        tunnel: None,
        ip,
        sport,
        dport,
        l4,
        l4_off,
        payload,
        complete,
        outgoing,
    })
}

/// VXLAN: 8-byte header (flags with the I bit, VNI), then an Ethernet frame.
fn parse_vxlan(
    frame: &[u8],
    orig: usize,
    outer: &IpFields,
    sport: u16,
    dport: u16,
    udp_checksum: u16,
    udp_off: usize,
) -> Option<Parsed> {
    let vx = udp_off + 8;
    let h = frame.get(vx..vx + 8)?;
    if h[0] & 0x08 == 0 {
        return None;
    }
    let vni = u32::from_be_bytes([0, h[4], h[5], h[6]]);
    let eth = vx + 8;
    let inner_l2 = dissect_l2(LinkKind::Ethernet, frame.get(eth..)?).ok()?;
    let inner_off = eth + inner_l2.l3_offset;
    let ip = read_ip(frame, inner_off, orig.saturating_sub(inner_off))?;
    let (isport, idport, l4, l4_off, payload) = read_l4(frame, &ip)?;
    Some(Parsed {
        tunnel: Some(Tunnel {
            ip: *outer,
            sport,
            dport,
            udp_checksum,
            udp_off,
            vni,
        }),
        ip,
        sport: isport,
        dport: idport,
        l4,
        l4_off,
        payload,
        complete: true,
        outgoing: None,
    })
}

/// How much of a frame the capture kept, as the GRO what-if sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Snap {
    /// Every byte of the frame.
    Whole,
    /// Cut short (`tcpdump -s N`) after every header GRO reads (link,
    /// network, tunnel, inner network, transport): GRO decides on headers
    /// and lengths, so the frame can be judged from them and its wire
    /// length (`orig_len`).
    HeadersOnly,
    /// Cut inside a header GRO reads. `needed` is a snapshot length that
    /// would have kept that header (a lower bound: a header after it may
    /// need more).
    CutInHeaders { needed: u32 },
}

/// Judges a frame whose capture kept `frame.len()` of its `orig_len`
/// bytes, walking its headers as the engine's segmentation does
/// (`offload::gso::layout`: VXLAN on `vxlan_ports`, Geneve, GRE, IP in IP).
pub fn snap(link: LinkKind, frame: &[u8], orig_len: u32, vxlan_ports: &[u16]) -> Snap {
    use offload::gso::GsoError;
    use offload::wire::WireErrorKind;
    if frame.len() as u64 >= orig_len as u64 {
        return Snap::Whole;
    }
    let cut_at = |needed: usize| Snap::CutInHeaders {
        needed: needed.max(frame.len() + 1).min(u32::MAX as usize) as u32,
    };
    match offload::gso::layout(link, frame, vxlan_ports) {
        Ok(lay) => {
            // The walk reads a VXLAN port's payload as plain UDP when the
            // inner Ethernet header is missing: that is a cut, not UDP.
            if lay.outer.is_none() && lay.l4_proto == offload::wire::Transport::Udp {
                let udp = lay.l4_off;
                let dport = frame
                    .get(udp + 2..udp + 4)
                    .map(|b| u16::from_be_bytes([b[0], b[1]]));
                // VXLAN header, inner Ethernet, inner IPv4 and TCP headers.
                let inner = udp + 8 + 8 + 14 + 20 + 20;
                if dport.is_some_and(|d| vxlan_ports.contains(&d)) && frame.len() < inner {
                    return cut_at(inner);
                }
            }
            Snap::HeadersOnly
        }
        Err(GsoError::Wire(e)) => match e.kind {
            WireErrorKind::Truncated { need, .. } => cut_at(e.offset + need),
            // A header that is wrong where it was captured: the engine
            // passes it for that, as it would the whole frame.
            WireErrorKind::Invalid { .. } => Snap::HeadersOnly,
        },
        Err(GsoError::Unsupported(why)) if why.contains("cut short") => cut_at(0),
        // Not TCP or UDP, a tunnel the engine does not merge: GRO passes
        // such a frame whatever its payload.
        Err(_) => Snap::HeadersOnly,
    }
}

/// Checksum state of a header, as the capture shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CsumState {
    Valid,
    /// UDP checksum 0 (none computed; allowed for IPv4 and tunnels).
    Zero,
    /// The field holds only the pseudo-header sum: the NIC (or GRO's
    /// completion) was to fill it in: `CHECKSUM_PARTIAL`.
    Offloaded,
    Bad,
    /// The capture cut the packet short.
    Unknown,
}

/// Verifies the transport checksum of the IP packet `ip` with the transport
/// header at `l4_off`.
pub fn l4_checksum(frame: &[u8], ip: &IpFields, l4_off: usize, field: u16, udp: bool) -> CsumState {
    use offload::checksum::{fold, pseudo_ipv4, pseudo_ipv6, sum_bytes};
    if udp && field == 0 {
        return CsumState::Zero;
    }
    let end = ip.off + ip.ip_len as usize;
    let Some(l4) = frame.get(l4_off..end) else {
        return CsumState::Unknown;
    };
    let proto = if udp { PROTO_UDP } else { PROTO_TCP };
    let pseudo = if ip.v6 {
        pseudo_ipv6(&ip.src, &ip.dst, proto, l4.len() as u32)
    } else {
        let mut s = [0u8; 4];
        let mut d = [0u8; 4];
        s.copy_from_slice(&ip.src[..4]);
        d.copy_from_slice(&ip.dst[..4]);
        pseudo_ipv4(s, d, proto, l4.len() as u32)
    };
    if fold(sum_bytes(pseudo, l4)) == 0xffff {
        return CsumState::Valid;
    }
    // CHECKSUM_PARTIAL leaves ~csum_tcpudp_magic(..., 0), the folded
    // pseudo-header sum, in the field.
    let p = fold(pseudo);
    if field == p || field == !p {
        CsumState::Offloaded
    } else {
        CsumState::Bad
    }
}

/// Formats an address for people: dotted quad or RFC 5952-ish IPv6.
pub fn fmt_addr(a: &[u8; 16], v6: bool) -> String {
    if v6 {
        std::net::Ipv6Addr::from(*a).to_string()
    } else {
        std::net::Ipv4Addr::new(a[0], a[1], a[2], a[3]).to_string()
    }
}

/// `addr:port`, with brackets for IPv6.
pub fn fmt_endpoint(a: &[u8; 16], v6: bool, port: u16) -> String {
    if v6 {
        format!("[{}]:{}", fmt_addr(a, true), port)
    } else {
        format!("{}:{}", fmt_addr(a, false), port)
    }
}

#[cfg(test)]
mod tests {

    /// The NOP, NOP, timestamp shortcut gives what the option walk gives.
    #[test]
    fn timestamp_shortcut_matches_the_walk() {
        let ts = [1u8, 1, 8, 10, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4];
        let (fast, walk) = (option_signature(&ts), option_walk(&ts));
        assert_eq!(fast.sig, walk.sig);
        assert_eq!(fast.tsval, Some(0xdead_beef));
        assert_eq!(walk.tsval, Some(0xdead_beef));
        assert_eq!(
            (fast.mss, fast.wscale, fast.nsack),
            (walk.mss, walk.wscale, walk.nsack)
        );
        assert_eq!(fast.sack, walk.sack);
        // Anything else takes the walk (a different signature).
        let other = [1u8, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2, 1, 1, 4, 2];
        assert_ne!(option_signature(&other).sig, fast.sig);
    }

    use super::*;
    use offload::build::{FrameSpec, TcpSpec};

    fn tcp4() -> FrameSpec {
        FrameSpec::tcp4(
            [10, 0, 0, 2],
            [10, 0, 0, 1],
            TcpSpec::data(1000, 80, 5).with_timestamps(9, 8),
        )
        .payload(vec![1; 100])
    }

    #[test]
    fn plain_tcp_fields_and_checksum_states() {
        let f = tcp4().build();
        let p = parse(LinkKind::Ethernet, &f, f.len() as u32, &[4789]).unwrap();
        assert!(p.tunnel.is_none());
        assert_eq!((p.sport, p.dport, p.payload), (1000, 80, 100));
        let L4::Tcp(t) = p.l4 else { panic!("not tcp") };
        assert_eq!(t.tsval, Some(9));
        assert_eq!(
            l4_checksum(&f, &p.ip, p.l4_off, t.checksum, false),
            CsumState::Valid
        );
        let mut bad = f.clone();
        let end = bad.len() - 1;
        bad[end] ^= 0xff;
        assert_eq!(
            l4_checksum(&bad, &p.ip, p.l4_off, t.checksum, false),
            CsumState::Bad
        );
        // A capture cut short cannot be judged.
        let cut = &f[..f.len() - 10];
        let pc = parse(LinkKind::Ethernet, cut, f.len() as u32, &[]).unwrap();
        assert!(!pc.complete);
        assert_eq!(
            l4_checksum(cut, &pc.ip, pc.l4_off, t.checksum, false),
            CsumState::Unknown
        );
    }

    #[test]
    fn timestamp_values_do_not_change_the_option_signature() {
        let a = tcp4().build();
        let mut s = tcp4();
        *s.tcp_mut() = TcpSpec::data(1000, 80, 5).with_timestamps(12345, 1);
        let b = s.build();
        let sig = |f: &[u8]| match parse(LinkKind::Ethernet, f, f.len() as u32, &[])
            .unwrap()
            .l4
        {
            L4::Tcp(t) => t.opt_sig,
            _ => 0,
        };
        assert_eq!(sig(&a), sig(&b));
        s.tcp_mut().options = vec![1, 1, 4, 2];
        assert_ne!(sig(&a), sig(&s.build()));
    }

    #[test]
    fn vxlan_gives_inner_flow_and_outer_header() {
        let inner = tcp4().build();
        let mut payload = vec![0x08, 0, 0, 0, 0, 0x12, 0x34, 0];
        payload.extend_from_slice(&inner);
        let mut o =
            FrameSpec::udp4([192, 168, 0, 1], [192, 168, 0, 2], 50000, 4789).payload(payload);
        o.v4_mut().id = 777;
        o.v4_mut().df = false;
        let f = o.build();
        let p = parse(LinkKind::Ethernet, &f, f.len() as u32, &[4789]).unwrap();
        let t = p.tunnel.unwrap();
        assert_eq!(
            (t.vni, t.ip.id, t.ip.df, t.dport),
            (0x1234, 777, false, 4789)
        );
        assert_eq!((p.sport, p.dport, p.payload), (1000, 80, 100));
        // Not a VXLAN port: the outer UDP flow itself.
        let q = parse(LinkKind::Ethernet, &f, f.len() as u32, &[8472]).unwrap();
        assert!(q.tunnel.is_none());
        assert_eq!(q.dport, 4789);
    }

    #[test]
    fn short_or_garbage_frames_are_none_not_panics() {
        let f = tcp4().build();
        for n in 0..60 {
            let _ = parse(LinkKind::Ethernet, &f[..n], f.len() as u32, &[4789]);
        }
        assert!(parse(LinkKind::Ethernet, &[0xff; 40], 40, &[4789]).is_none());
        assert!(parse(LinkKind::RawIp, &[0x45; 10], 10, &[]).is_none());
    }
}
