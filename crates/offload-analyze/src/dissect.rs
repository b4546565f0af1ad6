//! One frame's headers, read once for the flow statistics.
//!
//! ```text
//! link | IPv4/IPv6 | TCP/UDP | payload                         plain flow
//! link | outer IP | UDP | VXLAN | Ethernet | IP | TCP/UDP       VXLAN
//! link | outer IP | UDP | Geneve (+options) | [Ethernet] | IP   Geneve
//! link | outer IP | GRE (+csum, key, seq) | [Ethernet] | IP    GRE, gretap, WCCP
//! link | outer IP | IP | TCP/UDP                              IPIP, SIT, IP6IP6, IPv4 in IPv6
//! link | outer IP | UDP | GTP-U (+ext) | [Ethernet] | IP       GTP-U (2152, 2123)
//! link | outer IP | UDP | GRE | [Ethernet] | IP               GRE in UDP (4754)
//! link | outer IP | UDP | AYIYA | IP                          AYIYA (5072)
//! link | outer IP | UDP | [Teredo indicators] | IPv6          Teredo (3544)
//! link | outer IP | AH | IP                                   AH tunnel mode
//! link | IP | AH | TCP/UDP                                    AH transport mode
//! link | outer IP | [AH] | IPComp | deflated: IP | TCP         IPComp tunnel mode
//! link | IP | [AH] | IPComp | deflated: TCP/UDP                IPComp transport mode
//! ```
//!
//! IPComp payloads are inflated (the ipcomp module) outside `parse`, which
//! allocates nothing: [`ipcomp_inner`] reads the packet in the inflated
//! bytes.
//!
//! GTP-U, GRE in UDP, AYIYA, Teredo, AH and IPComp are tunnels the kernel's GRO
//! does not open: they are read as tshark reads them, for the TCP
//! analysis, while the GRO what-if keeps the outer packet
//! (`TunnelKind::kernel_gro`, decision 0231).
//!
//! The link may carry VLAN tags (802.1Q, QinQ), outside the tunnel and on
//! an inner Ethernet header alike. A tunnel is read with the engine's
//! header views and offsets (`offload::wire::{vxlan, geneve, gre}`,
//! `offload::layout::OuterLayout`), not with GRO's acceptance rules: a GRE
//! header with a sequence number or a Geneve OAM packet is no GRO
//! candidate, but its inner connection is analysed all the same, as
//! Wireshark dissects it. One tunnel inside another is read to the
//! innermost packet (two levels at most); the flow's tunnel is the
//! outermost one, whose header travelled on the link.
//!
//! The engine's wire views do the bounds checks; this module only gathers
//! the fields analysis needs into one `Copy` value. Nothing here allocates,
//! and nothing panics on short or inconsistent input: a frame that cannot
//! be read is reported as `None` with the reason
//! counted by the caller. A tunnel whose inner packet cannot be read is
//! the outer packet's flow.

use offload::layout::{Encap, OuterLayout};
use offload::link::dissect_l2;
use offload::wire::ethernet::{self, ethertype};
use offload::wire::geneve::Geneve;
use offload::wire::gre::Gre;
use offload::wire::ipv4::Ipv4;
use offload::wire::ipv6::Ipv6;
use offload::wire::tcp::Tcp;
use offload::wire::udp::Udp;
use offload::wire::vxlan::Vxlan;
use offload::wire::{ip_proto, IpVersion};
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
    /// Window scale option (SYN segments; `tcp::scale::WSCALE_CUT` when
    /// the capture cut the options before one was found).
    pub wscale: Option<u8>,
    /// The SACK-permitted option (SYN segments, RFC 2018).
    pub sack_perm: bool,
    /// The first three SACK blocks (left, right edges), `nsack` of them:
    /// as many as tshark 4.0 keeps for bytes in flight (dissect_tcpopt_sack
    /// stores a block while its 1-based count is below
    /// MAX_TCP_SACK_RANGES, 4), and as many as Linux sends beside
    /// timestamps.
    pub sack: [(u32, u32); 3],
    pub nsack: u8,
    /// How many SACK blocks the option holds (up to 4; of a header the
    /// capture cut, those whose left edge it holds): never fewer than
    /// `nsack`, so a segment carries SACK blocks when this is nonzero.
    pub sack_blocks: u8,
    /// tshark stops dissecting this header before it shows the sequence
    /// analysis: a data offset below 5 (dissect_tcp, "Bogus TCP header
    /// length") or a whole SACK option without a whole block (an ACK's
    /// `dissect_tcpopt_sack` then reads a D-SACK edge past the option and
    /// throws: Suricata's tests/tcp-empty-sack). The analysis still runs
    /// on the segment; tshark shows none of its flags and no RTT, and
    /// neither does offload (epan/dissectors/packet-tcp.c, Wireshark 4.0).
    pub tshark_stops: bool,
}

/// The transport header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum L4 {
    Tcp(TcpFields),
    Udp { checksum: u16, length: u16 },
    Other,
}

/// A tunnel kind, named as Linux names the device that makes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TunnelKind {
    /// VXLAN (RFC 7348) on one of the VXLAN ports.
    Vxlan,
    /// Geneve (RFC 8926) on UDP port 6081.
    Geneve,
    /// GRE (RFC 2784, RFC 2890) carrying IPv4 or IPv6.
    Gre,
    /// GRE carrying Ethernet (transparent Ethernet bridging, 0x6558).
    Gretap,
    /// IPv4 in IPv4 (IP protocol 4 under IPv4).
    Ipip,
    /// IPv6 in IPv4 (IP protocol 41 under IPv4).
    Sit,
    /// IPv6 in IPv6 (IP protocol 41 under IPv6).
    Ip6ip6,
    /// IPv4 in IPv6 (IP protocol 4 under IPv6; `ip6tnl mode ipip6`).
    Ipip6,
    /// GTP-U (3GPP TS 29.281) on UDP port 2152 (Linux `gtp` device).
    Gtp,
    /// GRE in UDP (RFC 8086) on UDP port 4754 (Linux `gre` with `encap
    /// fou`).
    GreUdp,
    /// AYIYA, anything in anything (draft-massar-v6ops-ayiya) on UDP
    /// port 5072: IPv6 tunnel brokers.
    Ayiya,
    /// Teredo (RFC 4380), IPv6 in UDP on port 3544 (Miredo, Windows).
    Teredo,
    /// An IPsec AH tunnel-mode SA (RFC 4302): the authentication header,
    /// then an inner IPv4 or IPv6 packet (`xfrm` tunnel mode).
    Ah,
    /// IPComp (RFC 3173) in tunnel mode without AH: a compressed inner
    /// IPv4 or IPv6 packet (`xfrm` `proto comp`), keyed by the CPI. After
    /// an AH the tunnel is the AH's ([`TunnelKind::Ah`]): the SA pair
    /// sends the packets it does not compress as AH tunnel packets.
    IpComp,
}

impl TunnelKind {
    /// The name in reports (`ip link` type names; `ipip6` for IPv4 in IPv6).
    pub fn name(self) -> &'static str {
        match self {
            TunnelKind::Vxlan => "vxlan",
            TunnelKind::Geneve => "geneve",
            TunnelKind::Gre => "gre",
            TunnelKind::Gretap => "gretap",
            TunnelKind::Ipip => "ipip",
            TunnelKind::Sit => "sit",
            TunnelKind::Ip6ip6 => "ip6ip6",
            TunnelKind::Ipip6 => "ipip6",
            TunnelKind::Gtp => "gtp",
            TunnelKind::GreUdp => "gre-in-udp",
            TunnelKind::Ayiya => "ayiya",
            TunnelKind::Teredo => "teredo",
            TunnelKind::Ah => "ah",
            TunnelKind::IpComp => "ipcomp",
        }
    }

    /// The outer header is UDP (VXLAN, Geneve, GTP-U, GRE in UDP, AYIYA):
    /// ports and a UDP checksum.
    pub fn udp(self) -> bool {
        matches!(
            self,
            TunnelKind::Vxlan
                | TunnelKind::Geneve
                | TunnelKind::Gtp
                | TunnelKind::GreUdp
                | TunnelKind::Ayiya
                | TunnelKind::Teredo
        )
    }

    /// The receiver's GRO opens this tunnel by default, as the engine
    /// does (`vxlan_gro_receive`, `geneve_gro_receive`, `gre_gro_receive`,
    /// `ipip_gro_receive`): its frames are the tunnel what-if's. For the
    /// others the kernel passes such frames up as the outer UDP, AH or
    /// IPComp packet, and so does the what-if (decisions 0231, 0232).
    /// Each rule read in the kernel sources of 6.1.192, 6.12.117 and 7.3.4
    /// (Debian's `linux-source-*` packages; 6.18, between them, was not
    /// read: the rules hold at both ends and the files did not change
    /// them in between as far as these three show):
    /// - GTP-U: drivers/net/gtp.c sets only `encap_rcv` on its UDP socket
    ///   (`gtp_encap_enable_socket`), never `gro_receive`: 6.1-7.3.
    /// - GRE in UDP: opened only on a receiver with a fou port configured
    ///   for it (`ip fou add port 4754 ipproto 47`): `fou_create` sets
    ///   `gro_receive = fou_gro_receive` for `FOU_ENCAP_DIRECT`
    ///   (net/ipv4/fou_core.c, already so named in 6.1.192; fou.c in
    ///   older trees): 6.1-7.3. Without one, `udp_gro_receive` finds no
    ///   tunnel socket.
    /// - AYIYA and Teredo: no kernel implementation (user-space daemons on
    ///   a TUN device; no code in net/ names either port): 6.1-7.3.
    /// - AH and IPComp: no `net_offload` for IPPROTO_AH or IPPROTO_COMP
    ///   (`inet_add_offload`/`inet6_add_offload` are called for TCP, UDP,
    ///   GRE, ESP, IPIP, IPv6 and IPv6 extension headers only, net/ipv4
    ///   and net/ipv6): 6.1-7.3.
    pub fn kernel_gro(self) -> bool {
        !matches!(
            self,
            TunnelKind::Gtp
                | TunnelKind::GreUdp
                | TunnelKind::Ayiya
                | TunnelKind::Teredo
                | TunnelKind::Ah
                | TunnelKind::IpComp
        )
    }

    /// GRE or gretap: the key may differ by direction (`ikey`, `okey`).
    pub fn gre(self) -> bool {
        matches!(self, TunnelKind::Gre | TunnelKind::Gretap)
    }

    /// What the tunnel's identifier is called: VNI (VXLAN, Geneve), key
    /// (GRE, GRE in UDP), TEID (GTP-U) or SPI (AH); IP in IP and AYIYA
    /// have none.
    pub fn id_name(self) -> Option<&'static str> {
        match self {
            TunnelKind::Vxlan | TunnelKind::Geneve => Some("VNI"),
            TunnelKind::Gre | TunnelKind::Gretap | TunnelKind::GreUdp => Some("key"),
            TunnelKind::Gtp => Some("TEID"),
            TunnelKind::Ah => Some("SPI"),
            TunnelKind::IpComp => Some("CPI"),
            _ => None,
        }
    }
}

/// The outer headers of a tunnelled frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tunnel {
    pub kind: TunnelKind,
    /// The outer network header.
    pub ip: IpFields,
    /// Outer UDP ports and checksum (VXLAN, Geneve); 0 for the others.
    pub sport: u16,
    pub dport: u16,
    pub udp_checksum: u16,
    /// The header after the outer network header: UDP, GRE or the inner IP.
    pub udp_off: usize,
    /// The VNI (VXLAN, Geneve) or the GRE key, when the header has one.
    pub id: Option<u32>,
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

/// An IPv4 first fragment whose payload (by its total length) is shorter
/// than the TCP or UDP header it starts: its transport header lies
/// across fragments, so only the reassembled datagram has one.
fn tiny_first_fragment(protocol: u8, total_len: u16, header_len: usize) -> bool {
    let payload = (total_len as usize).saturating_sub(header_len);
    match protocol {
        PROTO_TCP => payload < 20,
        PROTO_UDP => payload < 8,
        _ => false,
    }
}

/// Reads an IP header at `off`; `frame_len` is what was captured and
/// `orig_rest` the bytes the packet had from `off` on the wire.
#[inline]
fn read_ip(frame: &[u8], off: usize, orig_rest: usize) -> Option<IpFields> {
    let b = frame.get(off..)?;
    match b.first()? >> 4 {
        4 => {
            let ip = Ipv4::new_checked(b).ok()?;
            let mut dst = [0u8; 16];
            dst[..4].copy_from_slice(&ip.dst());
            if ip.header_len() > 20 {
                if let Some(opts) = b.get(20..ip.header_len()) {
                    source_route_destination(opts, &mut dst[..4]);
                }
            }
            let tl = ip.total_len();
            let proto = if ip.is_fragment()
                && (ip.frag_word() & 0x1fff != 0
                    || tiny_first_fragment(ip.protocol(), tl, ip.header_len()))
            {
                // A non-first fragment has no transport header; a first
                // one too short to hold it has none to read either: both
                // go to reassembly, as tshark takes them (Suricata's
                // tests/defrag/bug-6887-*: a TCP SYN in three 8-byte
                // fragments).
                0
            } else {
                ip.protocol()
            };
            Some(ipv4_fields(
                &ip,
                dst,
                off,
                orig_rest,
                ip.header_len(),
                proto,
            ))
        }
        6 => {
            let ip = Ipv6::new_checked(b).ok()?;
            let chain = ip.walk_ext().ok()?;
            let pl = ip.payload_len();
            let ip_len = match (pl, chain.jumbo) {
                (0, Some(j)) => 40 + j,
                (0, None) => orig_rest as u32,
                (n, _) => (40 + n as usize).min(orig_rest) as u32,
            };
            let (mut src, mut dst) = (ip.src(), ip.dst());
            if chain.upper_offset > 40 {
                endpoint_options(b, chain.upper_offset, &mut src, &mut dst);
            }
            Some(IpFields {
                v6: true,
                src,
                dst,
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

/// The fields of the IPv4 header `ip` at `off` (`dst` as the caller
/// found it: the header's, or a source route's final one; `orig_rest` the
/// bytes the packet had from `off` on the wire), for the full parse and
/// the plain-TCP fast path alike.
#[inline(always)]
fn ipv4_fields(
    ip: &Ipv4<&[u8]>,
    dst: [u8; 16],
    off: usize,
    orig_rest: usize,
    hdr_len: usize,
    proto: u8,
) -> IpFields {
    let mut src = [0u8; 16];
    src[..4].copy_from_slice(&ip.src());
    let tl = ip.total_len();
    IpFields {
        v6: false,
        src,
        dst,
        id: ip.ident(),
        df: ip.dont_fragment(),
        ttl: ip.ttl(),
        tos: ip.tos(),
        // A total length beyond the bytes the packet had on the wire is
        // cut to them, as tshark cuts it ("IPv4 total length exceeds
        // packet length"); Linux drops such a packet (ip_rcv_core,
        // net/ipv4/ip_input.c). Zero (TSO on the sender's capture): the
        // bytes on the wire.
        ip_len: if tl == 0 {
            orig_rest as u32
        } else {
            (tl as usize).min(orig_rest) as u32
        },
        len_zero: tl == 0,
        off,
        hdr_len,
        proto,
    }
}

/// The final destination of an IPv4 packet with a loose or strict source
/// route option (RFC 791 3.1: the header's destination is the next hop,
/// the route's last address the final one) whose route is not complete:
/// Wireshark's conversations and Linux's transport checksum take it (the
/// pseudo-header names the final destination, RFC 1122 3.3.5 and 4.2.2;
/// `ip_options_build` and `opt->faddr` in net/ipv4/ip_options.c, 6.1 to
/// 6.18). As
/// packet-ip.c's `get_dst_offset` reads it: the first such option only,
/// its pointer at least 4, a multiple of 4 and within the option, the
/// address its last 4 bytes. Off the common path (options only).
fn source_route_destination(opts: &[u8], dst: &mut [u8]) {
    const LSRR: u8 = 131;
    const SSRR: u8 = 137;
    let mut at = 0;
    while at < opts.len() {
        let kind = opts[at];
        match kind {
            0 => return,
            1 => at += 1,
            _ => {
                let Some(&len) = opts.get(at + 1) else { return };
                let len = len as usize;
                if len < 2 || at + len > opts.len() {
                    return;
                }
                if kind == LSRR || kind == SSRR {
                    let ptr = opts.get(at + 2).map_or(0, |&p| p as usize);
                    if ptr >= 4 && ptr & 3 == 0 && ptr <= len {
                        dst.copy_from_slice(&opts[at + len - 4..at + len]);
                    }
                    return;
                }
                at += len;
            }
        }
    }
}

/// The connection's own addresses where IPv6 extension headers name them,
/// as Wireshark's packet-ipv6.c takes them for its conversations (and
/// RFC 8200 8.1 and RFC 6275 6.3 for the transport checksum's
/// pseudo-header): a Home Address destination option (type 0xc9) is the
/// source; a Type 0 routing header with segments left names the final
/// destination, its last address. `end` is where the upper layer starts.
/// Read only for packets with extension headers, off the common path.
fn endpoint_options(b: &[u8], end: usize, src: &mut [u8; 16], dst: &mut [u8; 16]) {
    let mut next = b[6];
    let mut off = 40;
    while off < end {
        let (Some(&nh), Some(&len)) = (b.get(off), b.get(off + 1)) else {
            return;
        };
        let size = match next {
            // Hop-by-hop and destination options: TLVs.
            0 | 60 => {
                let size = (len as usize + 1) * 8;
                let mut at = off + 2;
                while at < (off + size).min(end) {
                    let Some(&kind) = b.get(at) else { return };
                    if kind == 0 {
                        at += 1;
                        continue;
                    }
                    let Some(&olen) = b.get(at + 1) else { return };
                    if kind == 0xc9 && olen >= 16 {
                        if let Some(a) = b.get(at + 2..at + 18) {
                            src.copy_from_slice(a);
                        }
                    }
                    at += 2 + olen as usize;
                }
                size
            }
            43 => {
                let size = (len as usize + 1) * 8;
                let (kind, left) = (b.get(off + 2), b.get(off + 3));
                let count = len as usize / 2;
                if kind == Some(&0) && left.is_some_and(|&l| l > 0) && count > 0 {
                    let last = off + 8 + (count - 1) * 16;
                    if let Some(a) = b.get(last..last + 16) {
                        dst.copy_from_slice(a);
                    }
                }
                size
            }
            44 => 8,
            51 => (len as usize + 2) * 4,
            _ => return,
        };
        next = nh;
        off += size;
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
    sack_perm: bool,
    sack: [(u32, u32); 3],
    nsack: u8,
    sack_blocks: u8,
    /// A SACK option, captured whole, too short for one block.
    sack_without_block: bool,
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

#[inline(always)]
fn option_signature(opts: &[u8]) -> TcpOptions {
    if let [1, 1, 8, 10, a, b, c, d, _, _, _, _] = *opts {
        return TcpOptions {
            sig: SIG_NOP_NOP_TS,
            tsval: Some(u32::from_be_bytes([a, b, c, d])),
            ..TcpOptions::default()
        };
    }
    option_walk(opts, opts.len())
}

/// Walks the options `opts`, of which the first `captured` bytes are the
/// segment's (the rest: zeros standing in for bytes the capture cut). A
/// value the capture cut is not read: no timestamp, MSS or scale from
/// padding, and a SACK block is read only when both its edges were
/// captured (a D-SACK or a hole read from zeros would be invented), but
/// the first block's left edge is kept in `sack[0].0` when only it was.
/// `sack_blocks` counts the blocks whose left edge was captured, as
/// tshark shows `tcp.options.sack_le` for them.
fn option_walk(opts: &[u8], captured: usize) -> TcpOptions {
    let mut sig: u32 = SIG_START;
    let mut ts = None;
    let mut mss = None;
    let mut wscale = None;
    let mut sack_perm = false;
    let mut sack = [(0u32, 0u32); 3];
    let mut nsack = 0u8;
    let mut sack_blocks = 0u8;
    let mut sack_without_block = false;
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
                if i + 6 <= captured {
                    ts = Some(u32::from_be_bytes([
                        opts[i + 2],
                        opts[i + 3],
                        opts[i + 4],
                        opts[i + 5],
                    ]))
                }
            }
            2 if len == 4 => {
                if i + 4 <= captured {
                    mss = Some(be16(opts, i + 2))
                }
            }
            4 if len == 2 => {
                sack_perm = true;
                // The signature as for any option: its length byte too.
                sig = (sig ^ 2).wrapping_mul(SIG_PRIME);
            }
            3 if len == 3 => {
                if i + 3 <= captured {
                    wscale = Some(opts[i + 2].min(14));
                }
                sig = (sig ^ opts[i + 2] as u32).wrapping_mul(SIG_PRIME);
            }
            5 if len >= 10 && (len - 2).is_multiple_of(8) => {
                for &byte in &opts[i + 1..i + len] {
                    sig = (sig ^ byte as u32).wrapping_mul(SIG_PRIME);
                }
                let blocks = (len - 2) / 8;
                sack_blocks = (0..blocks)
                    .take_while(|b| i + 2 + b * 8 + 4 <= captured)
                    .count() as u8;
                for (b, slot) in sack.iter_mut().enumerate().take(blocks) {
                    let at = i + 2 + b * 8;
                    if at + 8 > captured {
                        // The first block's left edge alone still tells a
                        // D-SACK (below the ACK) from a hole (above it).
                        if b == 0 && at + 4 <= captured {
                            *slot = (be32(opts, at), 0);
                        }
                        break;
                    }
                    *slot = (be32(opts, at), be32(opts, at + 4));
                    nsack += 1;
                }
            }
            _ => {
                sack_without_block |= kind == 5 && len < 10 && i + len <= captured;
                for &byte in &opts[i + 1..i + len] {
                    sig = (sig ^ byte as u32).wrapping_mul(SIG_PRIME);
                }
            }
        }
        i += len;
    }
    if captured < opts.len() && wscale.is_none() {
        wscale = Some(crate::tcp::scale::WSCALE_CUT);
    }
    TcpOptions {
        sig,
        tsval: ts,
        mss,
        wscale,
        sack_perm,
        sack,
        nsack,
        sack_blocks,
        sack_without_block,
    }
}

/// The fields of the TCP header `t` (`hl` bytes, as read: a bogus data
/// offset below 5 is `bogus`) with its options `o`, for the full parse and
/// the plain-TCP fast path alike.
#[inline(always)]
fn tcp_fields(t: &Tcp<&[u8]>, hl: usize, o: &TcpOptions, bogus: bool) -> TcpFields {
    TcpFields {
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
        sack_perm: o.sack_perm,
        sack: o.sack,
        nsack: o.nsack,
        sack_blocks: o.sack_blocks,
        tshark_stops: bogus || (o.sack_without_block && t.flags() & crate::tcp::ACK != 0),
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
            // A header cut inside its options (a snap length there) still
            // names the segment, as tshark reads it: the missing option
            // bytes read as end-of-options.
            // Zeroed only for such a cut header (not on every frame).
            let mut padded;
            let mut bogus = None;
            let t = match Tcp::new_checked(b) {
                Ok(t) => t,
                Err(_) if b.len() >= 20 => {
                    let hl = (b[12] >> 4) as usize * 4;
                    padded = [0u8; 60];
                    padded[..b.len().min(60)].copy_from_slice(&b[..b.len().min(60)]);
                    if hl < 20 {
                        // A data offset below 5 (bogus, as fuzzers and
                        // scanners send): tshark still counts the segment,
                        // its length the IP payload less that offset, and
                        // runs its sequence analysis before it gives up on
                        // the header (dissect_tcp, "Bogus TCP header
                        // length"); tcptrace counts it alike (Suricata's
                        // drop-protocol-change capture).
                        padded[12] = (padded[12] & 0x0f) | 0x50;
                        bogus = Some(hl);
                    }
                    Tcp::new_checked(&padded[..hl.clamp(20, 60)]).ok()?
                }
                Err(_) => return None,
            };
            // Bytes of options the capture holds (the rest is padding).
            let captured = b.len().min(60).saturating_sub(20);
            let o = if captured < t.options().len() {
                option_walk(t.options(), captured)
            } else {
                option_signature(t.options())
            };
            let hl = bogus.unwrap_or(t.header_len());
            Some((
                t.src_port(),
                t.dst_port(),
                L4::Tcp(tcp_fields(&t, hl, &o, bogus.is_some())),
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
/// payload is read as VXLAN (Geneve: `offload::wire::geneve::PORT`).
/// Returns `None` for frames without an IP header analysis can read.
#[inline(always)]
pub fn parse(link: LinkKind, frame: &[u8], orig_len: u32, vxlan_ports: &[u16]) -> Option<Parsed> {
    if let Some(p) = parse_plain_tcp(link, frame, orig_len) {
        return Some(p);
    }
    parse_full(link, frame, orig_len, vxlan_ports)
}

/// [`parse`] for the shape of nearly every frame of a TCP capture: an
/// untagged Ethernet frame (or a raw IP packet) holding IPv4 without
/// options and unfragmented, or IPv6 without extension headers, then a
/// TCP header captured whole. It reads the same fields with the same
/// accessors as [`parse_full`] but at fixed offsets, without the link
/// walk, the tunnel test and the intermediate values (`read_ip`'s and
/// `read_l4`'s results copied into `Parsed`): a fifth of analyze's
/// per-frame instructions were the dissection. Any other shape returns
/// `None`, and [`parse_full`] reads it (and names what it cannot). The
/// test `plain_tcp_fast_path_equals_the_full_parse` compares both.
#[inline(always)]
fn parse_plain_tcp(link: LinkKind, frame: &[u8], orig_len: u32) -> Option<Parsed> {
    let l3 = match link {
        LinkKind::Ethernet => {
            let et = be16(frame.get(..ethernet::HEADER_LEN)?, 12);
            let version = match et {
                ethertype::IPV4 => 4,
                ethertype::IPV6 => 6,
                _ => return None,
            };
            if frame.get(ethernet::HEADER_LEN)? >> 4 != version {
                return None;
            }
            ethernet::HEADER_LEN
        }
        LinkKind::RawIp => 0,
        LinkKind::Ipv4 if frame.first()? >> 4 == 4 => 0,
        LinkKind::Ipv6 if frame.first()? >> 4 == 6 => 0,
        _ => return None,
    };
    let orig = (orig_len as usize).max(frame.len());
    let orig_rest = orig - l3;
    let b = &frame[l3..];
    let ip = match b.first()? >> 4 {
        4 => {
            // IHL 5, TCP, neither MF nor a fragment offset.
            if b.len() < 20 || b[0] != 0x45 || b[9] != PROTO_TCP || be16(b, 6) & 0x3fff != 0 {
                return None;
            }
            let ip = Ipv4::new_unchecked(b);
            let mut dst = [0u8; 16];
            dst[..4].copy_from_slice(&ip.dst());
            ipv4_fields(&ip, dst, l3, orig_rest, 20, PROTO_TCP)
        }
        6 => {
            // TCP right after the fixed header (no extension header).
            if b.len() < 40 || b[6] != PROTO_TCP {
                return None;
            }
            let ip = Ipv6::new_unchecked(b);
            let pl = ip.payload_len();
            IpFields {
                v6: true,
                src: ip.src(),
                dst: ip.dst(),
                id: 0,
                df: false,
                ttl: ip.hop_limit(),
                tos: ip.traffic_class(),
                // As `read_ip` (no jumbo option without a hop-by-hop header).
                ip_len: match pl {
                    0 => orig_rest as u32,
                    n => (40 + n as usize).min(orig_rest) as u32,
                },
                len_zero: pl == 0,
                off: l3,
                hdr_len: 40,
                proto: PROTO_TCP,
            }
        }
        _ => return None,
    };
    let off = l3 + ip.hdr_len;
    let tb = frame.get(off..)?;
    // The whole TCP header captured (a cut one: `read_l4`'s padding).
    let hl = (*tb.get(12)? >> 4) as usize * 4;
    if hl < 20 || tb.len() < hl {
        return None;
    }
    let t = Tcp::new_unchecked(tb);
    // Every option byte captured: `read_l4` takes `option_signature`.
    let o = option_signature(&tb[20..hl]);
    let l4_room = ip.ip_len.saturating_sub(ip.hdr_len as u32);
    Some(Parsed {
        tunnel: None,
        ip,
        sport: t.src_port(),
        dport: t.dst_port(),
        l4: L4::Tcp(tcp_fields(&t, hl, &o, false)),
        l4_off: off,
        payload: l4_room.saturating_sub(hl as u32),
        complete: orig <= frame.len(),
        outgoing: None,
    })
}

/// [`parse`] for every shape: the link walk, IP, tunnels, the transport.
fn parse_full(link: LinkKind, frame: &[u8], orig_len: u32, vxlan_ports: &[u16]) -> Option<Parsed> {
    let l2 = dissect_l2(link, frame).ok()?;
    let outgoing = matches!(link, LinkKind::LinuxSll | LinkKind::LinuxSll2).then_some(l2.outgoing);
    let orig = (orig_len as usize).max(frame.len());
    // The link layer's type names the network header, as tshark reads it
    // (a frame of another EtherType whose bytes happen to start like an
    // IP header is not IP).
    let (l3, v6, end) = match l2.ethertype {
        ethertype::IPV4 => (l2.l3_offset, false, orig),
        ethertype::IPV6 => (l2.l3_offset, true, orig),
        // MPLS, PPPoE sessions, 802.3 LLC/SNAP: IP further in, as
        // Wireshark reads it (crate::link; raw IP and loopback frames
        // with no IP version say 0 and stop here). A PPPoE session ends
        // at its length field (Ethernet padding follows).
        0 => return None,
        et => {
            let (l3, v6) = crate::link::inner(frame, l2.l3_offset, et).ok()?;
            let end = crate::link::inner_end(frame, l2.l3_offset, et).map_or(orig, |e| e.min(orig));
            (l3, v6, end)
        }
    };
    let mut ip = read_ip(frame, l3, end.checked_sub(l3)?).filter(|ip| ip.v6 == v6)?;
    let complete = orig <= frame.len();
    if may_carry_tunnel(&ip) {
        if ip.proto == ip_proto::AH {
            ah_transport(frame, &mut ip);
        }
        if let Some(p) = parse_tunnel(frame, orig, &ip, vxlan_ports, MAX_TUNNEL_DEPTH) {
            return Some(Parsed {
                outgoing,
                complete,
                ..p
            });
        }
    }
    let (sport, dport, l4, l4_off, payload) = read_l4(frame, &ip)?;
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

/// Tunnels read inside one another: the kernel's GRO takes one level
/// (`encap_mark`); Wireshark dissects any number (its test capture
/// `test/captures/ipoipoip.pcap` holds IPv4 in IPv4 four times over).
/// Eight levels read that and a tunnel in a tunnel (VXLAN over GRE) with
/// bounded work per frame; plain TCP pays nothing for them.
const MAX_TUNNEL_DEPTH: u8 = 8;

/// GRE's protocol type for WCCP redirection (an IPv4 packet).
const WCCP: u16 = 0x883e;

/// GRE's protocol type for ERSPAN types I to III.
const ERSPAN: u16 = 0x88be;

/// A protocol a tunnel rides on (UDP, IPIP, IPv6, GRE): the only frames
/// the tunnel walk looks at, so plain TCP pays one comparison.
#[inline]
fn may_carry_tunnel(ip: &IpFields) -> bool {
    matches!(
        ip.proto,
        PROTO_UDP | ip_proto::IPIP | ip_proto::IPV6 | ip_proto::GRE | ip_proto::AH
    )
}

/// Where a tunnel's inner packet starts.
#[derive(Debug, Clone, Copy)]
enum InnerAt {
    /// As the engine lays out the tunnels it merges (VXLAN, Geneve, GRE,
    /// IP in IP).
    Layout(Encap),
    /// A tunnel the engine does not merge: the inner header's offset, its
    /// EtherType (`TEB`: an Ethernet header) and where the tunnel's
    /// payload ends (GTP-U's length field; else the packet's end).
    At { off: usize, ty: u16, end: usize },
}

/// GTP-U's port (3GPP TS 29.281); tshark reads GTPv1-C's 2123 alike.
pub const GTPU_PORT: u16 = 2152;
pub const GTPC_PORT: u16 = 2123;
/// GRE in UDP (RFC 8086).
pub const GRE_UDP_PORT: u16 = 4754;
/// AYIYA (draft-massar-v6ops-ayiya).
pub const AYIYA_PORT: u16 = 5072;
/// Teredo (RFC 4380).
pub const TEREDO_PORT: u16 = 3544;

/// A tunnel in UDP that the kernel's GRO does not open (GTP-U, GRE in
/// UDP, AYIYA, Teredo), its header at `th`: the kind, identifier and inner
/// packet. tshark's UDP tries the lower port's dissector first, then the
/// higher one's (`decode_udp_ports`, epan/dissectors/packet-udp.c), so a
/// tunnel port on either side is read, the lower first.
fn udp_tunnel(
    frame: &[u8],
    th: usize,
    sport: u16,
    dport: u16,
    orig: usize,
) -> Option<(TunnelKind, Option<u32>, InnerAt)> {
    let (lo, hi) = (sport.min(dport), sport.max(dport));
    let port = [lo, hi].into_iter().find(|p| {
        matches!(
            *p,
            GTPU_PORT | GTPC_PORT | GRE_UDP_PORT | AYIYA_PORT | TEREDO_PORT
        )
    })?;
    match port {
        GTPU_PORT | GTPC_PORT => {
            let (teid, inner) = gtpu(frame, th, orig)?;
            Some((TunnelKind::Gtp, Some(teid), inner))
        }
        GRE_UDP_PORT => {
            let g = Gre::new_checked(frame.get(th..)?).ok()?;
            let inner = InnerAt::At {
                off: th + g.header_len(),
                ty: g.protocol(),
                end: orig,
            };
            Some((TunnelKind::GreUdp, g.key(), inner))
        }
        TEREDO_PORT => Some((TunnelKind::Teredo, None, teredo(frame, th, orig)?)),
        _ => Some((TunnelKind::Ayiya, None, ayiya(frame, th, orig)?)),
    }
}

/// Teredo (RFC 4380 5.1.1) at `at`: an authentication indicator (type
/// 1: ID and authentication value lengths, those bytes, an 8-byte nonce
/// and a confirmation byte) and an origin indication (type 0, 8 bytes)
/// may precede the IPv6 packet, as tshark's `dissect_teredo`
/// (epan/dissectors/packet-teredo.c) skips them on port 3544 (its
/// heuristic on other ports is off by default).
fn teredo(frame: &[u8], at: usize, orig: usize) -> Option<InnerAt> {
    let mut off = at;
    if be16(frame.get(off..off + 2)?, 0) == 1 {
        let h = frame.get(off..off + 4)?;
        off += 4 + h[2] as usize + h[3] as usize + 9;
    }
    if be16(frame.get(off..off + 2)?, 0) == 0 {
        off += 8;
    }
    Some(InnerAt::At {
        off,
        ty: ethertype::IPV6,
        end: orig,
    })
}

/// A GTP-U G-PDU (3GPP TS 29.281 5.1) at `at`: version 1, protocol type
/// GTP, message type T-PDU (255); the optional sequence number, N-PDU
/// number and next-extension-header octets when any of E, S, PN is set;
/// each extension header (its length in 4-octet units, its last octet the
/// next type) skipped. The payload ends with the header's length field
/// (tshark's `set_actual_length`). It is IP as tshark's T-PDU heuristic
/// reads it (`dissect_gtp_common`, epan/dissectors/packet-gtp.c): a first
/// octet 0x45..0x4e is IPv4, 0x6_ IPv6, else Ethernet when more than 14
/// bytes follow and the EtherType says IPv4 or IPv6. Returns the TEID.
fn gtpu(frame: &[u8], at: usize, orig: usize) -> Option<(u32, InnerAt)> {
    const E: u8 = 0x04;
    let h = frame.get(at..at + 8)?;
    let flags = h[0];
    if flags >> 5 != 1 || flags & 0x10 == 0 || h[1] != 0xff {
        return None;
    }
    let end = (at + 8 + be16(h, 2) as usize).min(orig);
    let teid = be32(h, 4);
    let mut off = at + 8;
    if flags & 0x07 != 0 {
        off += 4;
        if flags & E != 0 {
            let mut next = *frame.get(off - 1)?;
            while next != 0 {
                // Each extension header advances 4 bytes at least, and a
                // read past the frame ends the walk.
                let len = *frame.get(off)? as usize * 4;
                if len == 0 {
                    return None;
                }
                next = *frame.get(off + len - 1)?;
                off += len;
            }
        }
    }
    if off >= end {
        return None;
    }
    let ty = match *frame.get(off)? {
        0x45..=0x4e => ethertype::IPV4,
        0x60..=0x6f => ethertype::IPV6,
        _ if end - off > 14 => match frame.get(off + 12..off + 14) {
            Some(&[a, b])
                if matches!(
                    u16::from_be_bytes([a, b]),
                    ethertype::IPV4 | ethertype::IPV6
                ) =>
            {
                ethertype::TEB
            }
            _ => return None,
        },
        _ => return None,
    };
    Some((teid, InnerAt::At { off, ty, end }))
}

/// An AYIYA header at `at` (draft-massar-v6ops-ayiya 5): identity length
/// `2^n`, signature length in 4-octet units, operation code, next header,
/// epoch, identity, signature. Only a Forward (opcode 1) carries a
/// packet, of the IP protocol the next header names (IPv6 or IPv4), as
/// tshark's `dissect_ayiya` (epan/dissectors/packet-ayiya.c) hands it on.
fn ayiya(frame: &[u8], at: usize, orig: usize) -> Option<InnerAt> {
    let h = frame.get(at..at + 8)?;
    if h[2] & 0x0f != 1 {
        return None;
    }
    let ty = match h[3] {
        ip_proto::IPV6 => ethertype::IPV6,
        ip_proto::IPIP => ethertype::IPV4,
        _ => return None,
    };
    let idlen = 1usize << (h[0] >> 4);
    let siglen = (h[1] >> 4) as usize * 4;
    Some(InnerAt::At {
        off: at + 8 + idlen + siglen,
        ty,
        end: orig,
    })
}

/// An IPsec authentication header at `at` (RFC 4302 2): next header,
/// payload length (the header's length in 4-octet units minus 2), SPI.
/// Returns the SPI, the next header and the header's length.
fn ah_header(frame: &[u8], at: usize) -> Option<(u32, u8, usize)> {
    let h = frame.get(at..at + 12)?;
    Some((be32(h, 4), h[0], (h[1] as usize + 2) * 4))
}

/// AH in transport mode: the header sits between the IP header and the
/// transport header, so the packet's own connection follows it, as
/// tshark's `dissect_ah` hands the payload to the next header's
/// dissector. `ip` then takes the AH as part of its header. Tunnel mode
/// (an IP packet follows) is a tunnel ([`TunnelKind::Ah`]); IPComp
/// after it (a compressed payload) is inflated by the ipcomp module.
fn ah_transport(frame: &[u8], ip: &mut IpFields) {
    if let Some((_, next, len)) = ah_header(frame, ip.off + ip.hdr_len) {
        if matches!(next, PROTO_TCP | PROTO_UDP) {
            ip.hdr_len += len;
            ip.proto = next;
        }
    }
}

/// IPComp's IP protocol number (RFC 3173).
pub const PROTO_COMP: u8 = 108;

/// Where an IPComp header (RFC 3173 2.2: next header, flags, CPI) sits
/// in a frame `parse` read as the outer packet: right after the IP
/// header, or after an AH (`ah_spi`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpcompAt {
    /// Offset of the IPComp header; the compressed data follows its 4
    /// bytes.
    pub off: usize,
    pub next: u8,
    pub cpi: u16,
    pub ah_spi: Option<u32>,
}

/// The IPComp header of a frame `parse` returned as `p`, when its
/// packet's payload is IPComp (after the IP header or an AH). A cheap
/// test first: plain TCP and UDP pay one comparison.
#[inline]
pub fn ipcomp_at(frame: &[u8], p: &Parsed) -> Option<IpcompAt> {
    if p.tunnel.is_some() || !matches!(p.ip.proto, ip_proto::AH | PROTO_COMP) {
        return None;
    }
    ipcomp_header(frame, &p.ip)
}

fn ipcomp_header(frame: &[u8], ip: &IpFields) -> Option<IpcompAt> {
    let mut off = ip.off + ip.hdr_len;
    let mut ah_spi = None;
    if ip.proto == ip_proto::AH {
        let (spi, next, len) = ah_header(frame, off)?;
        if next != PROTO_COMP {
            return None;
        }
        (off, ah_spi) = (off + len, Some(spi));
    }
    let h = frame.get(off..off + 4)?;
    Some(IpcompAt {
        off,
        next: h[0],
        cpi: be16(h, 2),
        ah_spi,
    })
}

/// The packet an IPComp payload carried, read from `buf`: the frame's
/// bytes up to the compressed data, then the inflated bytes in its place
/// (the ipcomp module builds it), so every offset of the outer headers holds
/// in `buf` too. `p` is the frame's outer packet as `parse` read it and
/// `at` its IPComp header. In tunnel mode (an IPv4 or IPv6 packet
/// inflated, as the next header says) the tunnel is the AH's, or IPComp
/// keyed by the CPI without one; a tunnel inside is read as `parse` reads
/// one. In transport mode (anything else) the inflated bytes are the
/// packet's own transport header and payload: the IP header then counts
/// the AH and IPComp headers, as `ah_transport` counts an AH, and its
/// length the inflated payload. `None` when the inflated bytes hold no
/// header analysis reads.
pub fn ipcomp_inner(buf: &[u8], p: &Parsed, at: &IpcompAt, vxlan_ports: &[u16]) -> Option<Parsed> {
    let inner_off = at.off + 4;
    let outer = &p.ip;
    let ty = match at.next {
        ip_proto::IPIP => Some(false),
        ip_proto::IPV6 => Some(true),
        _ => None,
    };
    let Some(v6) = ty else {
        let ip = IpFields {
            hdr_len: inner_off - outer.off,
            ip_len: buf.len().checked_sub(outer.off)? as u32,
            proto: at.next,
            len_zero: false,
            ..*outer
        };
        let (sport, dport, l4, l4_off, payload) = read_l4(buf, &ip)?;
        return Some(Parsed {
            ip,
            sport,
            dport,
            l4,
            l4_off,
            payload,
            ..*p
        });
    };
    let ip = read_ip(buf, inner_off, buf.len().checked_sub(inner_off)?).filter(|ip| ip.v6 == v6)?;
    let (kind, id) = match at.ah_spi {
        Some(spi) => (TunnelKind::Ah, spi),
        None => (TunnelKind::IpComp, at.cpi as u32),
    };
    let t = Tunnel {
        kind,
        ip: *outer,
        sport: 0,
        dport: 0,
        udp_checksum: 0,
        udp_off: outer.off + outer.hdr_len,
        id: Some(id),
    };
    if may_carry_tunnel(&ip) {
        if let Some(q) = parse_tunnel(buf, buf.len(), &ip, vxlan_ports, MAX_TUNNEL_DEPTH - 1) {
            return Some(Parsed {
                tunnel: Some(t),
                complete: p.complete,
                outgoing: p.outgoing,
                ..q
            });
        }
    }
    let (sport, dport, l4, l4_off, payload) = read_l4(buf, &ip)?;
    Some(Parsed {
        tunnel: Some(t),
        ip,
        sport,
        dport,
        l4,
        l4_off,
        payload,
        ..*p
    })
}

/// The tunnel after the outer network header `outer`, read with the
/// engine's header views, and the innermost packet in it; `None` when
/// there is no tunnel or its inner packet cannot be read.
fn parse_tunnel(
    frame: &[u8],
    orig: usize,
    outer: &IpFields,
    vxlan_ports: &[u16],
    depth: u8,
) -> Option<Parsed> {
    let at = outer.off + outer.hdr_len;
    let version = if outer.v6 {
        IpVersion::V6
    } else {
        IpVersion::V4
    };
    let mut t = Tunnel {
        kind: TunnelKind::Ipip,
        ip: *outer,
        sport: 0,
        dport: 0,
        udp_checksum: 0,
        udp_off: at,
        id: None,
    };
    // The payload's EtherType for tunnels without an Ethernet header.
    let mut inner_type = 0;
    let encap = match outer.proto {
        PROTO_UDP => {
            let u = Udp::new_checked(frame.get(at..)?).ok()?;
            (t.sport, t.dport, t.udp_checksum) = (u.src_port(), u.dst_port(), u.checksum());
            let th = at + offload::wire::udp::HEADER_LEN;
            if vxlan_ports.contains(&t.dport) {
                let v = Vxlan::new_checked(frame.get(th..)?).ok()?;
                // The I flag: a valid VNI (RFC 7348).
                if v.flags() & offload::wire::vxlan::FLAG_VNI == 0 {
                    return None;
                }
                (t.kind, t.id) = (TunnelKind::Vxlan, Some(v.vni()));
                InnerAt::Layout(Encap::Vxlan)
            } else if t.dport == offload::wire::geneve::PORT {
                let g = Geneve::new_checked(frame.get(th..)?).ok()?;
                (t.kind, t.id, inner_type) = (TunnelKind::Geneve, Some(g.vni()), g.protocol());
                InnerAt::Layout(Encap::Geneve {
                    len: g.header_len() as u16,
                    eth: g.protocol() == ethertype::TEB,
                })
            } else {
                let (kind, id, inner) = udp_tunnel(frame, th, t.sport, t.dport, orig)?;
                (t.kind, t.id) = (kind, id);
                inner
            }
        }
        ip_proto::GRE if frame.get(at + 2..at + 4) == Some(&ERSPAN.to_be_bytes()[..]) => {
            // ERSPAN (a switch mirroring into GRE): type I without a
            // sequence number and header, type II with an 8-byte header,
            // type III with 12 (and an 8-byte platform subheader when its
            // O bit is set); then the mirrored Ethernet frame (Wireshark's
            // packet-erspan.c; Suricata's bug-5437 captures).
            let g = Gre::new_checked(frame.get(at..)?).ok()?;
            let h = at + g.header_len();
            let erspan = if frame[at] & 0x10 == 0 {
                0
            } else {
                match frame.get(h)? >> 4 {
                    1 => 8,
                    2 => 12 + 8 * (frame.get(h + 11)? & 1) as usize,
                    _ => return None,
                }
            };
            (t.kind, t.id) = (TunnelKind::Gre, g.key());
            InnerAt::At {
                off: h + erspan,
                ty: ethertype::TEB,
                end: orig,
            }
        }
        ip_proto::GRE => {
            let g = Gre::new_checked(frame.get(at..)?).ok()?;
            let eth = g.protocol() == ethertype::TEB;
            t.kind = if eth {
                TunnelKind::Gretap
            } else {
                TunnelKind::Gre
            };
            (t.id, inner_type) = (g.key(), g.protocol());
            let mut len = g.header_len();
            if let Some((l3, v6)) = crate::link::aruba_wlan(frame, at + len, g.protocol()) {
                // Aruba: an 802.11 frame from the access point; the
                // tunnel's header runs to the IP packet in it.
                len = l3 - at;
                inner_type = if v6 { ethertype::IPV6 } else { ethertype::IPV4 };
            }
            if g.protocol() == WCCP {
                // WCCP redirection (Cisco's web cache protocol): an IPv4
                // packet, after a 4-byte redirect header unless an IPv4
                // header follows at once (as Wireshark tells them).
                inner_type = ethertype::IPV4;
                if frame.get(at + len).is_some_and(|b| b >> 4 != 4) {
                    len += 4;
                }
            }
            InnerAt::Layout(Encap::Gre {
                len: len as u16,
                eth,
            })
        }
        ip_proto::AH => {
            // Tunnel mode only: transport mode is read in `ah_transport`.
            let (spi, next, len) = ah_header(frame, at)?;
            let ty = match next {
                ip_proto::IPIP => ethertype::IPV4,
                ip_proto::IPV6 => ethertype::IPV6,
                _ => return None,
            };
            (t.kind, t.id) = (TunnelKind::Ah, Some(spi));
            InnerAt::At {
                off: at + len,
                ty,
                end: orig,
            }
        }
        p => {
            let v6_inside = p == ip_proto::IPV6;
            t.kind = match (outer.v6, v6_inside) {
                (false, false) => TunnelKind::Ipip,
                (false, true) => TunnelKind::Sit,
                (true, true) => TunnelKind::Ip6ip6,
                (true, false) => TunnelKind::Ipip6,
            };
            inner_type = if v6_inside {
                ethertype::IPV6
            } else {
                ethertype::IPV4
            };
            InnerAt::Layout(Encap::IpInIp)
        }
    };
    let (inner_off, end) = match encap {
        InnerAt::Layout(encap) => {
            let o = OuterLayout {
                l3_off: outer.off,
                ip: version,
                encap_off: at,
                encap,
            };
            let carries_eth = match encap {
                Encap::Vxlan => true,
                Encap::Geneve { eth, .. } | Encap::Gre { eth, .. } => eth,
                Encap::IpInIp => false,
            };
            let off = if carries_eth {
                let eth_off = o.inner_eth_off();
                let l2 = dissect_l2(LinkKind::Ethernet, frame.get(eth_off..)?).ok()?;
                inner_type = l2.ethertype;
                eth_off + l2.l3_offset
            } else {
                o.inner_l3_off()
            };
            (off, orig)
        }
        InnerAt::At { off, ty, end } if ty == ethertype::TEB => {
            let l2 = dissect_l2(LinkKind::Ethernet, frame.get(off..)?).ok()?;
            inner_type = l2.ethertype;
            (off + l2.l3_offset, end)
        }
        InnerAt::At { off, ty, end } => {
            inner_type = ty;
            (off, end)
        }
    };
    let ip = read_ip(frame, inner_off, end.checked_sub(inner_off)?)?;
    // The payload type the tunnel announced must be the header found.
    let announced_v6 = match inner_type {
        ethertype::IPV4 => false,
        ethertype::IPV6 => true,
        _ => return None,
    };
    if ip.v6 != announced_v6 {
        return None;
    }
    if depth > 1 && may_carry_tunnel(&ip) {
        if let Some(p) = parse_tunnel(frame, orig, &ip, vxlan_ports, depth - 1) {
            return Some(Parsed {
                tunnel: Some(t),
                ..p
            });
        }
    }
    let (sport, dport, l4, l4_off, payload) = read_l4(frame, &ip)?;
    Some(Parsed {
        tunnel: Some(t),
        ip,
        sport,
        dport,
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
    /// A segment without payload cut inside its TCP options: GRO passes
    /// such a segment up whatever its options, so the what-if judges it
    /// as [`Snap::HeadersOnly`], but the TCP analysis loses what the
    /// options said (an ACK's SACK blocks, D-SACKs, timestamps), and with
    /// them where losses happened. `needed` keeps the whole header.
    OptionsCut { needed: u32 },
    /// Cut inside a header GRO reads. `needed` is a snapshot length that
    /// would have kept that header (a lower bound: a header after it may
    /// need more).
    CutInHeaders { needed: u32 },
}

impl Snap {
    /// The same verdict counted in bytes of the captured frame, where the
    /// dissected bytes began `link_header` bytes in (a link type read as
    /// the IP packet it carries, [`crate::link::view`]): a snapshot length
    /// is a length of the whole frame.
    pub fn in_frame(self, link_header: usize) -> Snap {
        match self {
            Snap::CutInHeaders { needed } => Snap::CutInHeaders {
                needed: needed.saturating_add(link_header.min(u32::MAX as usize) as u32),
            },
            Snap::OptionsCut { needed } => Snap::OptionsCut {
                needed: needed.saturating_add(link_header.min(u32::MAX as usize) as u32),
            },
            s => s,
        }
    }

    /// Whether the what-if decides the frame from its headers and wire
    /// length (every header GRO reads was captured).
    pub fn judged_from_headers(self) -> bool {
        matches!(self, Snap::HeadersOnly | Snap::OptionsCut { .. })
    }
}

/// Judges a frame whose capture kept `frame.len()` of its `orig_len`
/// bytes, walking its headers as the engine's segmentation does
/// (`offload::gso::layout`: VXLAN on `vxlan_ports`, Geneve, GRE, IP in IP).
/// Called for every frame: the test for a whole frame is inlined into
/// the caller, the walk of a cut one is not.
#[inline(always)]
pub fn snap(link: LinkKind, frame: &[u8], orig_len: u32, vxlan_ports: &[u16]) -> Snap {
    if frame.len() as u64 >= orig_len as u64 {
        return Snap::Whole;
    }
    snap_cut(link, frame, orig_len, vxlan_ports)
}

/// The TCP header length counted when a capture cut it before its data
/// offset: 20 bytes and the 12-byte timestamp option (RFC 7323), which
/// Linux puts on every segment of a connection that negotiated it
/// (`tcp_established_options`, net/ipv4/tcp_output.c, every line;
/// net.ipv4.tcp_timestamps is 1 by default). Counting only 20 named a
/// snaplen that a new capture would show to be 12 bytes short (a VXLAN
/// frame cut at 96: "needs 104", then at 104 "needs 116"); a header
/// without options is kept by it too. Never more than the TCP bytes the
/// wire held.
const TCP_HEADER_GUESS: usize = 32;

/// Where the headers GRO reads end in a VXLAN frame whose outer UDP
/// header starts at `udp`: the UDP and VXLAN headers, the inner Ethernet
/// header, the inner IP header (IPv6 when the inner Ethernet type that
/// says so was captured, else IPv4 without options) and a TCP header of
/// [`TCP_HEADER_GUESS`] bytes.
fn vxlan_headers_end(frame: &[u8], udp: usize) -> usize {
    let inner_type = udp + 8 + 8 + 12;
    let inner_v6 = frame
        .get(inner_type..inner_type + 2)
        .is_some_and(|t| u16::from_be_bytes([t[0], t[1]]) == ethertype::IPV6);
    udp + 8 + 8 + 14 + if inner_v6 { 40 } else { 20 } + TCP_HEADER_GUESS
}

/// Whether the UDP header at `udp` was captured up to a destination port
/// that is one of `vxlan_ports`.
fn on_vxlan_port(frame: &[u8], udp: usize, vxlan_ports: &[u16]) -> bool {
    frame
        .get(udp + 2..udp + 4)
        .is_some_and(|b| vxlan_ports.contains(&u16::from_be_bytes([b[0], b[1]])))
}

/// [`snap`] for a frame the capture cut.
fn snap_cut(link: LinkKind, frame: &[u8], orig_len: u32, vxlan_ports: &[u16]) -> Snap {
    use offload::gso::GsoError;
    use offload::wire::WireErrorKind;
    let cut_at = |needed: usize| Snap::CutInHeaders {
        needed: needed.max(frame.len() + 1).min(u32::MAX as usize) as u32,
    };
    match offload::gso::layout(link, frame, vxlan_ports) {
        Ok(lay) => {
            // The walk reads a VXLAN port's payload as plain UDP when the
            // inner Ethernet header is missing: that is a cut, not UDP.
            if lay.outer.is_none() && lay.l4_proto == offload::wire::Transport::Udp {
                let udp = lay.l4_off;
                let inner = vxlan_headers_end(frame, udp);
                if on_vxlan_port(frame, udp, vxlan_ports) && frame.len() < inner {
                    return cut_at(inner);
                }
            }
            Snap::HeadersOnly
        }
        Err(GsoError::Wire(e)) => match e.kind {
            WireErrorKind::Truncated { need, .. }
                if (e.header, e.field) == ("TCP", "options")
                    && empty_segment(link, frame, orig_len, e.offset + need, vxlan_ports) =>
            {
                if options_read_in_full(frame, e.offset) {
                    Snap::HeadersOnly
                } else {
                    Snap::OptionsCut {
                        needed: (e.offset + need).min(u32::MAX as usize) as u32,
                    }
                }
            }
            // The TCP header cut before its data offset: its length is
            // unknown, so count the options Linux sends on every segment.
            WireErrorKind::Truncated { need, .. } if (e.header, e.field) == ("TCP", "header") => {
                let on_wire = (orig_len as usize).saturating_sub(e.offset);
                cut_at(e.offset + TCP_HEADER_GUESS.min(on_wire).max(need))
            }
            // An IP header cut: the transport header after it is needed
            // too, by the protocol field when it was captured (TCP when
            // not: the flows GRO merges), so that one new capture keeps
            // every header instead of revealing the next cut one.
            WireErrorKind::Truncated { need, .. } if matches!(e.header, "IPv4" | "IPv6") => {
                let protocol = frame.get(e.offset + if e.header == "IPv4" { 9 } else { 6 });
                let transport = match protocol {
                    None | Some(&PROTO_TCP) => TCP_HEADER_GUESS,
                    Some(&PROTO_UDP) => 8,
                    Some(_) => 0,
                };
                cut_at((e.offset + need + transport).min(orig_len as usize))
            }
            // A UDP header cut after its destination port: a VXLAN port
            // needs the inner headers too.
            WireErrorKind::Truncated { need, .. } if e.header == "UDP" => {
                if on_vxlan_port(frame, e.offset, vxlan_ports) {
                    cut_at(vxlan_headers_end(frame, e.offset).min(orig_len as usize))
                } else {
                    cut_at(e.offset + need)
                }
            }
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

/// True when a TCP segment cut inside its options (its header ending at
/// `header_end`) carries no payload by its IP length. GRO never holds such
/// a segment: `tcp_gro_receive` (net/ipv4/tcp_offload.c, all lines) flushes
/// it at `out_check_final` (`len == 0`), and a held packet of its flow is
/// completed whatever the options say (`(len - 1) >= mss`). So it is judged
/// from its base header and lengths like a frame cut after its headers;
/// only the name of the reason that completes a held packet can depend on
/// the missing option bytes. IPv6 SYNs and SACK-carrying ACKs cut at
/// `tcpdump -s 96` are the common case.
fn empty_segment(
    link: LinkKind,
    frame: &[u8],
    orig_len: u32,
    header_end: usize,
    vxlan_ports: &[u16],
) -> bool {
    if (orig_len as usize) < header_end {
        return false;
    }
    // The header's missing bytes as filler, one byte more where the wire
    // had one: the walk then reads the IP length against the wire's.
    let mut padded = frame.to_vec();
    padded.resize(header_end.saturating_add(1).min(orig_len as usize), 0);
    offload::gso::layout(link, &padded, vxlan_ports)
        .is_ok_and(|l| l.l4_proto == offload::wire::Transport::Tcp && l.end == header_end)
}

/// Whether a segment without payload, its TCP header at `tcp` cut inside
/// its options, still shows what the TCP analysis reads of them: a SYN's
/// options whole (its window scale, SACK permission), or another segment's
/// options up to the first SACK block's left edge (the edge that tells a
/// D-SACK and a hole: an IPv6 ACK with timestamps and SACK cut by `tcpdump
/// -s 96` keeps it, 6 bytes of the block captured), or up to the end of
/// its options.
fn options_read_in_full(frame: &[u8], tcp: usize) -> bool {
    if frame.get(tcp + 13).is_none_or(|flags| flags & 0x02 != 0) {
        return false;
    }
    let mut i = tcp + 20;
    while let Some(&kind) = frame.get(i) {
        match kind {
            0 => return true,
            1 => i += 1,
            5 => return i + 2 + 4 <= frame.len(),
            _ => match frame.get(i + 1) {
                Some(&len) if len >= 2 => i += len as usize,
                _ => return false,
            },
        }
    }
    false
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

/// The GRE header at `gre_off` has a checksum (its C flag).
pub fn gre_has_checksum(frame: &[u8], gre_off: usize) -> bool {
    frame
        .get(gre_off..)
        .and_then(|b| Gre::new_checked(b).ok())
        .is_some_and(|g| g.has_checksum())
}

/// Verifies the checksum of the GRE header at `gre_off` under the outer
/// IP header `outer`: it covers the GRE header and everything after it
/// (RFC 2784), and sums to zero when valid.
pub fn gre_checksum(frame: &[u8], outer: &IpFields, gre_off: usize) -> CsumState {
    let end = outer.off + outer.ip_len as usize;
    match frame.get(gre_off..end) {
        Some(b) if offload::checksum::checksum(b) == 0 => CsumState::Valid,
        Some(_) => CsumState::Bad,
        None => CsumState::Unknown,
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

    /// Options the capture cut (`editcap -s 96` of an IPv6 ACK with two
    /// SACK blocks): the cut block is not read from the zeros standing in
    /// for its bytes, but its left edge counts as tshark shows it.
    #[test]
    fn a_cut_sack_block_is_not_read() {
        let mut o = vec![1u8, 1, 8, 10, 0, 0, 0, 7, 0, 0, 0, 9, 1, 1, 5, 18];
        for edge in [100u32, 200, 40, 80] {
            o.extend(edge.to_be_bytes());
        }
        let whole = option_walk(&o, o.len());
        assert_eq!((whole.nsack, whole.sack_blocks), (2, 2));
        assert_eq!(whole.sack, [(100, 200), (40, 80), (0, 0)]);
        // 96 bytes of a 106-byte frame: 22 of the 32 option bytes, the
        // first block's right edge cut.
        let mut cut = o.clone();
        cut[22..].fill(0);
        let c = option_walk(&cut, 22);
        assert_eq!((c.nsack, c.sack_blocks, c.tsval), (0, 1, Some(7)));
        assert_eq!(c.sack[0].0, 100);
        // The first block whole, the second's left edge only.
        let mut cut = o.clone();
        cut[28..].fill(0);
        let c = option_walk(&cut, 28);
        assert_eq!((c.nsack, c.sack_blocks), (1, 2));
        assert_eq!(c.sack[0], (100, 200));
        // Cut inside the timestamp: no timestamp, no block, and whether a
        // window scale followed is unknown.
        let c = option_walk(&cut, 5);
        assert_eq!(c.wscale, Some(crate::tcp::scale::WSCALE_CUT));
        assert_eq!((c.tsval, c.nsack, c.sack_blocks), (None, 0, 0));
    }

    /// A Linux SYN's options (MSS, SACK-permitted, timestamps, NOP,
    /// window scale): SACK is permitted, also when the capture cut the
    /// options after it.
    #[test]
    fn a_syn_permits_sack() {
        let syn = [
            2u8, 4, 5, 180, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7,
        ];
        let o = option_walk(&syn, syn.len());
        assert!(o.sack_perm);
        assert_eq!((o.mss, o.wscale), (Some(1460), Some(7)));
        // Cut after the SACK-permitted option: still read.
        let mut cut = syn;
        cut[6..].fill(0);
        assert!(option_walk(&cut, 6).sack_perm);
        assert!(!option_walk(&syn[..4], 4).sack_perm);
    }

    /// The NOP, NOP, timestamp shortcut gives what the option walk gives.
    #[test]
    fn timestamp_shortcut_matches_the_walk() {
        let ts = [1u8, 1, 8, 10, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4];
        let (fast, walk) = (option_signature(&ts), option_walk(&ts, ts.len()));
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

    /// An IPv6 segment with 24 option bytes (a SYN's, or timestamps and a
    /// SACK block): 98 bytes of headers in Ethernet, cut by `tcpdump -s
    /// 96`. Without payload GRO flushes it whatever its options say, so it
    /// is judged from its headers; with payload it could merge, and the
    /// missing options decide that.
    #[test]
    fn segment_cut_inside_its_options_is_judged_only_without_payload_and_names_its_length() {
        let mut tcp = TcpSpec::data(40000, 21, 7);
        tcp.options = [
            1u8, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2, 1, 1, 5, 10, 0, 0, 0, 9, 0, 0, 0, 10,
        ]
        .to_vec();
        let spec = |payload: usize| {
            FrameSpec::tcp6([0xfd; 16], [0xfe; 16], tcp.clone()).payload(vec![7; payload])
        };
        let empty = spec(0).build();
        assert_eq!(empty.len(), 98);
        // At 96 bytes the SACK block's left edge (what the TCP analysis
        // reads to tell a D-SACK and a hole) was captured; cut before it,
        // the length that keeps the options is named.
        assert_eq!(
            snap(LinkKind::Ethernet, &empty[..96], 98, &[]),
            Snap::HeadersOnly
        );
        let s = snap(LinkKind::Ethernet, &empty[..88], 98, &[]);
        assert_eq!(s, Snap::OptionsCut { needed: 98 });
        assert!(s.judged_from_headers());
        assert_eq!(s.in_frame(4), Snap::OptionsCut { needed: 102 });
        // A SYN's options (window scale, SACK permission) are read whole.
        let mut syn = empty.clone();
        syn[54 + 13] |= 0x02;
        assert_eq!(
            snap(LinkKind::Ethernet, &syn[..96], 98, &[]),
            Snap::OptionsCut { needed: 98 }
        );
        let data = spec(10).build();
        assert_eq!(
            snap(LinkKind::Ethernet, &data[..96], 108, &[]),
            Snap::CutInHeaders { needed: 98 }
        );
        // Cut inside the base header: the data offset and flags are gone;
        // the header is counted with the timestamp option (54 + 32).
        assert_eq!(
            snap(LinkKind::Ethernet, &empty[..70], 98, &[]),
            Snap::CutInHeaders { needed: 86 }
        );
        // ... but never past the TCP bytes the wire held (a bare header).
        let bare = FrameSpec::tcp6([0xfd; 16], [0xfe; 16], TcpSpec::data(40000, 21, 7)).build();
        assert_eq!(bare.len(), 74);
        assert_eq!(
            snap(LinkKind::Ethernet, &bare[..70], 74, &[]),
            Snap::CutInHeaders { needed: 74 }
        );
    }

    /// A snapshot length is of the whole frame: a link header read past
    /// (IPoIB's 4 bytes, a radiotap header) counts in it.
    #[test]
    fn needed_snaplen_counts_the_link_header() {
        let s = Snap::CutInHeaders { needed: 60 };
        assert_eq!(s.in_frame(44), Snap::CutInHeaders { needed: 104 });
        assert_eq!(Snap::HeadersOnly.in_frame(44), Snap::HeadersOnly);
    }

    fn tcp4() -> FrameSpec {
        FrameSpec::tcp4(
            [10, 0, 0, 2],
            [10, 0, 0, 1],
            TcpSpec::data(1000, 80, 5).with_timestamps(9, 8),
        )
        .payload(vec![1; 100])
    }

    #[test]
    fn pppoe_length_ends_the_packet() {
        // An IPv4/TCP packet whose total length says 6 bytes more than the
        // PPPoE session carries, then Ethernet padding: the payload ends
        // with the PPPoE payload (tshark: tcp.len 0).
        let f = FrameSpec::tcp4([10, 0, 0, 2], [10, 0, 0, 1], TcpSpec::data(1000, 80, 5)).build();
        let ip = &f[14..];
        let mut g = f[..12].to_vec();
        g.extend_from_slice(&[0x88, 0x64, 0x11, 0x00, 0x12, 0x34]);
        g.extend_from_slice(&((ip.len() + 2) as u16).to_be_bytes());
        g.extend_from_slice(&[0x00, 0x21]);
        g.extend_from_slice(ip);
        let tl = u16::from_be_bytes([g[22 + 2], g[22 + 3]]) + 6;
        g[24..26].copy_from_slice(&tl.to_be_bytes());
        g.extend_from_slice(&[0; 6]);
        let p = parse(LinkKind::Ethernet, &g, g.len() as u32, &[]).unwrap();
        assert_eq!((p.sport, p.payload), (1000, 0));
        // Without the padding the frame's end is the same.
        g.truncate(g.len() - 6);
        let p = parse(LinkKind::Ethernet, &g, g.len() as u32, &[]).unwrap();
        assert_eq!(p.payload, 0);
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
            (t.kind, t.id, t.ip.id, t.ip.df, t.dport),
            (TunnelKind::Vxlan, Some(0x1234), 777, false, 4789)
        );
        assert_eq!((p.sport, p.dport, p.payload), (1000, 80, 100));
        // Not a VXLAN port: the outer UDP flow itself.
        let q = parse(LinkKind::Ethernet, &f, f.len() as u32, &[8472]).unwrap();
        assert!(q.tunnel.is_none());
        assert_eq!(q.dport, 4789);
    }

    use offload::build::{IpSpec, L2Spec, L4Spec};

    const OUT4: ([u8; 4], [u8; 4]) = ([192, 168, 0, 1], [192, 168, 0, 2]);
    const OUT6: ([u8; 16], [u8; 16]) = (
        [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
        [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
    );

    /// An outer IPv4 or IPv6 packet of protocol `proto` around `payload`,
    /// with the VLAN tags `vlans` on its Ethernet header.
    fn outer_ip(v6: bool, proto: u8, payload: Vec<u8>, vlans: &[(u16, u16)]) -> Vec<u8> {
        let mut s = if v6 {
            FrameSpec::udp6(OUT6.0, OUT6.1, 0, 0)
        } else {
            FrameSpec::udp4(OUT4.0, OUT4.1, 0, 0)
        };
        s.l4 = L4Spec::Other(proto);
        if let L2Spec::Ethernet { vlans: v, .. } = &mut s.l2 {
            *v = vlans.to_vec();
        }
        if let IpSpec::V4(v4) = &mut s.ip {
            v4.id = 4242;
        }
        s.payload(payload).build()
    }

    fn outer_udp(v6: bool, dport: u16, payload: Vec<u8>) -> Vec<u8> {
        if v6 {
            FrameSpec::udp6(OUT6.0, OUT6.1, 41000, dport)
        } else {
            FrameSpec::udp4(OUT4.0, OUT4.1, 41000, dport)
        }
        .payload(payload)
        .build()
    }

    fn tcp6_inner() -> Vec<u8> {
        let mut a = [0u8; 16];
        a[0] = 0x20;
        a[15] = 2;
        let mut b = a;
        b[15] = 1;
        FrameSpec::tcp6(a, b, TcpSpec::data(1000, 80, 5))
            .payload(vec![1; 100])
            .build()
    }

    /// The inner TCP flow of `f` (1000 -> 80, 100 bytes) and its tunnel.
    fn inner_of(f: &[u8]) -> Tunnel {
        let p = parse(LinkKind::Ethernet, f, f.len() as u32, &[4789]).expect("parsed");
        assert_eq!((p.sport, p.dport, p.payload), (1000, 80, 100));
        assert_eq!(p.ip.proto, PROTO_TCP);
        let L4::Tcp(t) = p.l4 else { panic!("not tcp") };
        assert_eq!(
            l4_checksum(f, &p.ip, p.l4_off, t.checksum, false),
            CsumState::Valid
        );
        p.tunnel.expect("a tunnel")
    }

    #[test]
    fn every_tunnel_kind_gives_its_inner_flow_ipv4_and_ipv6_outer() {
        let inner4 = tcp4().build();
        let inner6 = tcp6_inner();
        for v6 in [false, true] {
            // Geneve with a 8-byte option, inner Ethernet; and IP directly.
            let mut g = vec![
                0x02, 0, 0x65, 0x58, 0, 0, 7, 0, 0x01, 0x02, 0x80, 0x01, 9, 9, 9, 9,
            ];
            g.extend_from_slice(&inner4);
            let t = inner_of(&outer_udp(v6, 6081, g));
            assert_eq!(
                (t.kind, t.id, t.dport, t.ip.v6),
                (TunnelKind::Geneve, Some(7), 6081, v6)
            );
            let mut g = vec![0, 0, 0x86, 0xdd, 0, 0, 8, 0];
            g.extend_from_slice(&inner6[14..]);
            assert_eq!(inner_of(&outer_udp(v6, 6081, g)).id, Some(8));
            // GRE: every combination of checksum, key and sequence number.
            for (c, k, sq) in [
                (false, false, false),
                (true, false, false),
                (false, true, false),
                (true, true, true),
                (false, true, true),
                (false, false, true),
            ] {
                for tap in [false, true] {
                    let flags = (c as u16) << 15 | (k as u16) << 13 | (sq as u16) << 12;
                    let mut h = flags.to_be_bytes().to_vec();
                    h.extend_from_slice(&(if tap { 0x6558u16 } else { 0x0800 }).to_be_bytes());
                    if c {
                        h.extend_from_slice(&[0, 0, 0, 0]);
                    }
                    if k {
                        h.extend_from_slice(&99u32.to_be_bytes());
                    }
                    if sq {
                        h.extend_from_slice(&5u32.to_be_bytes());
                    }
                    h.extend_from_slice(if tap { &inner4[..] } else { &inner4[14..] });
                    let t = inner_of(&outer_ip(v6, 47, h, &[]));
                    let kind = if tap {
                        TunnelKind::Gretap
                    } else {
                        TunnelKind::Gre
                    };
                    assert_eq!(
                        (t.kind, t.id),
                        (kind, k.then_some(99)),
                        "{c} {k} {sq} {tap}"
                    );
                }
            }
            // IP in IP, each of the four.
            let t = inner_of(&outer_ip(v6, 4, inner4[14..].to_vec(), &[]));
            assert_eq!(
                t.kind,
                if v6 {
                    TunnelKind::Ipip6
                } else {
                    TunnelKind::Ipip
                }
            );
            let t = inner_of(&outer_ip(v6, 41, inner6[14..].to_vec(), &[]));
            assert_eq!(
                t.kind,
                if v6 {
                    TunnelKind::Ip6ip6
                } else {
                    TunnelKind::Sit
                }
            );
            assert_eq!(t.id, None);
            // The announced type must be what follows: IPv6 said, IPv4 found.
            let p = parse(
                LinkKind::Ethernet,
                &outer_ip(v6, 41, inner4[14..].to_vec(), &[]),
                200,
                &[],
            )
            .unwrap();
            assert!(p.tunnel.is_none());
        }
    }

    #[test]
    fn erspan_types_one_to_three_give_the_mirrored_flow() {
        let inner = tcp4().build();
        // Type I: no sequence number, no header.
        let mut h = vec![0, 0, 0x88, 0xbe];
        h.extend_from_slice(&inner);
        assert_eq!(inner_of(&outer_ip(false, 47, h, &[])).kind, TunnelKind::Gre);
        // Type II (Suricata's bug-5437-01), type III, type III with the
        // platform subheader.
        for e in [
            vec![0x10, 0x06, 0, 0x06, 0, 0, 0, 0x14],
            vec![0x20, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0],
            vec![
                0x20, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 9, 9, 9, 9, 9, 9, 9, 9,
            ],
        ] {
            let mut h = vec![0x10, 0, 0x88, 0xbe, 0, 0, 0, 0];
            h.extend_from_slice(&e);
            h.extend_from_slice(&inner);
            assert_eq!(inner_of(&outer_ip(true, 47, h, &[])).kind, TunnelKind::Gre);
        }
    }

    #[test]
    fn wccp_over_gre_with_and_without_its_redirect_header() {
        let inner = tcp4().build();
        for redirect in [false, true] {
            let mut h = vec![0, 0, 0x88, 0x3e];
            if redirect {
                h.extend_from_slice(&[0x01, 0x00, 0x00, 0x00]);
            }
            h.extend_from_slice(&inner[14..]);
            let t = inner_of(&outer_ip(false, 47, h, &[]));
            assert_eq!((t.kind, t.id), (TunnelKind::Gre, None));
        }
    }

    #[test]
    fn vlan_tags_outside_and_inside_the_tunnel() {
        let mut inner = tcp4();
        if let L2Spec::Ethernet { vlans, .. } = &mut inner.l2 {
            *vlans = vec![(0x8100, 12)];
        }
        let inner = inner.build();
        let mut vx = vec![0x08, 0, 0, 0, 0, 0, 5, 0];
        vx.extend_from_slice(&inner);
        let mut o = FrameSpec::udp4(OUT4.0, OUT4.1, 40000, 4789).payload(vx);
        if let L2Spec::Ethernet { vlans, .. } = &mut o.l2 {
            *vlans = vec![(0x88a8, 100), (0x8100, 200)];
        }
        let t = inner_of(&o.build());
        assert_eq!((t.kind, t.id), (TunnelKind::Vxlan, Some(5)));
        // GRE under QinQ.
        let plain = tcp4().build();
        let mut h = vec![0, 0, 0x08, 0x00];
        h.extend_from_slice(&plain[14..]);
        let t = inner_of(&outer_ip(false, 47, h, &[(0x88a8, 7), (0x8100, 8)]));
        assert_eq!(t.kind, TunnelKind::Gre);
    }

    #[test]
    fn a_tunnel_in_a_tunnel_gives_the_innermost_flow_and_the_outer_tunnel() {
        let inner = tcp4().build();
        let mut vx = vec![0x08, 0, 0, 0, 0, 0, 5, 0];
        vx.extend_from_slice(&inner);
        // VXLAN over IPv4 inside GRE: the GRE's inner IP header carries UDP.
        let mid = outer_udp(false, 4789, vx);
        let mut h = vec![0x20, 0, 0x08, 0x00, 0, 0, 0, 3];
        h.extend_from_slice(&mid[14..]);
        let t = inner_of(&outer_ip(true, 47, h, &[]));
        assert_eq!((t.kind, t.id, t.ip.v6), (TunnelKind::Gre, Some(3), true));
    }

    #[test]
    fn a_bogus_tcp_header_length_still_counts_the_segment() {
        // Suricata's drop-protocol-change capture, frame 7: a data offset
        // of 2 (8 bytes); tshark's tcp.len and tcptrace take the IP
        // payload less 8 bytes.
        let mut f = tcp4().build();
        assert_eq!(f[34 + 12] >> 4, 8, "32-byte header with timestamps");
        f[34 + 12] = (2 << 4) | (f[34 + 12] & 0x0f);
        let p = parse(LinkKind::Ethernet, &f, f.len() as u32, &[]).expect("counted");
        assert_eq!((p.sport, p.dport, p.payload), (1000, 80, 32 + 100 - 8));
        let L4::Tcp(t) = p.l4 else { panic!("not tcp") };
        assert_eq!(t.hdr_len, 8);
        // Cut inside the 20 bytes a header has at least: not read.
        let cut = &f[..34 + 19];
        assert!(parse(LinkKind::Ethernet, cut, f.len() as u32, &[]).is_none());
    }

    #[test]
    fn a_sack_option_without_a_block_is_where_tshark_stops() {
        // Suricata's tcp-empty-sack: NOP, NOP, SACK of length 2 on an ACK.
        let mut spec = tcp4();
        spec.payload.clear();
        if let L4Spec::Tcp(t) = &mut spec.l4 {
            t.options = vec![1, 1, 5, 2];
        }
        let f = spec.build();
        let p = parse(LinkKind::Ethernet, &f, f.len() as u32, &[]).expect("parsed");
        let L4::Tcp(t) = p.l4 else { panic!("not tcp") };
        assert!(t.tshark_stops);
        assert_eq!(t.sack_blocks, 0);
        // One whole block: read, and tshark shows the analysis.
        let mut spec = tcp4();
        if let L4Spec::Tcp(t) = &mut spec.l4 {
            t.options = vec![1, 1, 5, 10, 0, 0, 0, 1, 0, 0, 0, 2];
        }
        let f = spec.build();
        let p = parse(LinkKind::Ethernet, &f, f.len() as u32, &[]).expect("parsed");
        let L4::Tcp(t) = p.l4 else { panic!("not tcp") };
        assert!(!t.tshark_stops);
        assert_eq!(t.sack_blocks, 1);
        // A data offset below 5 too.
        let mut f = tcp4().build();
        f[34 + 12] = (2 << 4) | (f[34 + 12] & 0x0f);
        let p = parse(LinkKind::Ethernet, &f, f.len() as u32, &[]).expect("counted");
        let L4::Tcp(t) = p.l4 else { panic!("not tcp") };
        assert!(t.tshark_stops);
    }

    #[test]
    fn a_source_route_names_the_final_destination() {
        // Suricata's detect-ipopts: LSRR with pointer 4, next hop 1.2.3.4,
        // final destination 5.6.7.8; the header's destination is the hop.
        let with_options = |options: Vec<u8>| {
            let mut spec = tcp4();
            if let IpSpec::V4(ip) = &mut spec.ip {
                ip.options = options;
            }
            let f = spec.build();
            parse(LinkKind::Ethernet, &f, f.len() as u32, &[]).expect("parsed")
        };
        let lsrr = vec![131, 11, 4, 1, 2, 3, 4, 5, 6, 7, 8, 0];
        assert_eq!(with_options(lsrr.clone()).ip.dst[..4], [5, 6, 7, 8]);
        // Strict source route alike.
        let mut ssrr = lsrr.clone();
        ssrr[0] = 137;
        assert_eq!(with_options(ssrr).ip.dst[..4], [5, 6, 7, 8]);
        // The route complete (pointer past the option): the header's.
        let mut done = lsrr.clone();
        done[2] = 12;
        assert_eq!(with_options(done).ip.dst[..4], [10, 0, 0, 1]);
        // A pointer into the middle of an address: the header's.
        let mut odd = lsrr;
        odd[2] = 5;
        assert_eq!(with_options(odd).ip.dst[..4], [10, 0, 0, 1]);
        // Other options (record route) change nothing.
        let rr = vec![7, 11, 4, 1, 2, 3, 4, 5, 6, 7, 8, 0];
        assert_eq!(with_options(rr).ip.dst[..4], [10, 0, 0, 1]);
    }

    #[test]
    fn four_tunnels_deep_give_the_innermost_flow() {
        // Wireshark's test/captures/ipoipoip.pcap: IPv4 in IPv4 in IPv4 in
        // IPv4 in IPv4; tshark names the innermost TCP connection.
        let mut f = tcp4().build();
        for _ in 0..4 {
            f = outer_ip(false, 4, f[14..].to_vec(), &[]);
        }
        assert_eq!(inner_of(&f).kind, TunnelKind::Ipip);
        // Past the bound, the deepest tunnel read is the flow.
        for _ in 0..=MAX_TUNNEL_DEPTH - 4 {
            f = outer_ip(false, 4, f[14..].to_vec(), &[]);
        }
        let p = parse(LinkKind::Ethernet, &f, f.len() as u32, &[]).expect("parsed");
        assert_eq!(p.ip.proto, 4);
    }

    proptest::proptest! {
        /// Any bytes after an outer header that announces a tunnel (IPIP,
        /// IPv6, GRE, or UDP to a VXLAN or Geneve port), over IPv4 or
        /// IPv6, cut anywhere: no panic, and what is read lies within the
        /// frame.
        #[test]
        fn any_tunnel_payload_is_read_or_refused_never_a_panic(
            v6 in proptest::bool::ANY,
            which in 0usize..11,
            body in proptest::collection::vec(proptest::num::u8::ANY, 0..160),
            cut in 0usize..260,
        ) {
            let f = match which {
                0 => outer_ip(v6, 4, body, &[]),
                1 => outer_ip(v6, 41, body, &[]),
                2 => outer_ip(v6, 47, body, &[(0x8100, 9)]),
                3 => outer_udp(v6, 4789, body),
                4 => outer_udp(v6, GTPU_PORT, body),
                5 => outer_udp(v6, GRE_UDP_PORT, body),
                6 => outer_udp(v6, AYIYA_PORT, body),
                9 => outer_udp(v6, TEREDO_PORT, body),
                7 => outer_ip(v6, 51, body, &[]),
                8 => {
                    // A GTP-U header announcing extension headers.
                    let mut g = vec![0x34, 0xff, 0, 0xff, 0, 0, 0, 1, 0, 0, 0, 0x85];
                    g.extend_from_slice(&body);
                    outer_udp(v6, GTPU_PORT, g)
                }
                _ => outer_udp(v6, 6081, body),
            };
            let f = &f[..cut.min(f.len())];
            if let Some(p) = parse(LinkKind::Ethernet, f, 300, &[4789]) {
                proptest::prop_assert!(p.ip.off + p.ip.hdr_len <= f.len());
                let k = crate::key::FlowKey::of(&p);
                proptest::prop_assert_eq!(k.reverse().reverse(), k);
                let _ = k.describe(Some((1, 2)));
            }
        }
    }

    /// A frame near the plain TCP shape, each header field drawn from
    /// values on both sides of what [`parse_plain_tcp`] accepts: link,
    /// EtherType (VLAN too), IP version, IHL, fragment word, protocol and
    /// lengths, IPv6 next header, TCP data offset and options, the cut.
    #[allow(clippy::too_many_arguments)]
    fn near_plain(
        link: u8,
        et: u16,
        version: u8,
        ihl: u8,
        frag: u16,
        proto: u8,
        len_field: u16,
        doff: u8,
        opts: &[u8],
        payload: usize,
        fill: u8,
    ) -> (LinkKind, Vec<u8>) {
        let mut f = Vec::new();
        let link = match link {
            0 => {
                f.extend_from_slice(&[2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2]);
                f.extend_from_slice(&et.to_be_bytes());
                if et == 0x8100 {
                    f.extend_from_slice(&[0, 7, 0x08, 0]);
                }
                LinkKind::Ethernet
            }
            1 => LinkKind::RawIp,
            2 => LinkKind::Ipv4,
            3 => LinkKind::Ipv6,
            _ => LinkKind::LinuxSll,
        };
        if version == 6 {
            f.extend_from_slice(&[0x60 | (fill >> 4), fill << 4, 0, 1]);
            f.extend_from_slice(&len_field.to_be_bytes());
            f.extend_from_slice(&[proto, 64]);
            f.extend((0..32).map(|i| i as u8 ^ fill));
        } else {
            f.push((version << 4) | ihl);
            f.push(fill);
            f.extend_from_slice(&len_field.to_be_bytes());
            f.extend_from_slice(&[0x12, 0x34]);
            f.extend_from_slice(&frag.to_be_bytes());
            f.extend_from_slice(&[63, proto, 0xab, 0xcd, 10, 0, 0, 1, 10, 0, 0, 2]);
            f.extend(std::iter::repeat_n(
                1u8,
                (ihl as usize * 4).saturating_sub(20),
            ));
        }
        f.extend_from_slice(&[0x9c, 0x40, 0x14, 0x51, 0, 0, 1, 0, 0, 0, 2, 0]);
        f.push(doff << 4);
        f.extend_from_slice(&[0x18 | (fill & 0x27), 0x01, 0xf5, 0x12, 0x34, 0, 0]);
        f.extend_from_slice(opts);
        f.extend(std::iter::repeat_n(fill, payload));
        (link, f)
    }

    proptest::proptest! {
        /// Wherever the plain TCP fast path reads a frame, it reads what
        /// the full parse does (every field of `Parsed`); and it does
        /// read the plain shapes.
        #[test]
        fn plain_tcp_fast_path_equals_the_full_parse(
            link in 0u8..5,
            et in proptest::sample::select(vec![0x0800u16, 0x86dd, 0x8100, 0x0806]),
            version in proptest::sample::select(vec![4u8, 6, 5]),
            ihl in proptest::sample::select(vec![5u8, 6, 4]),
            frag in proptest::sample::select(vec![0u16, 0x4000, 0x2000, 0x0001, 0x8000]),
            proto in proptest::sample::select(vec![6u8, 17, 0, 4, 41, 51]),
            len_field in proptest::sample::select(vec![0u16, 40, 52, 60, 100, 1500, 65535]),
            doff in 0u8..16,
            opts in proptest::sample::select(vec![
                vec![],
                vec![1, 1, 8, 10, 0, 0, 0, 7, 0, 0, 0, 9],
                vec![1, 1, 8, 10, 0, 0, 0, 7, 0, 0, 0, 9, 1, 1, 5, 10, 0, 0, 1, 0, 0, 0, 2, 0],
                vec![2, 4, 5, 180, 4, 2, 8, 10, 0, 0, 0, 7, 0, 0, 0, 0, 1, 3, 3, 7],
                vec![0, 0, 0, 0],
            ]),
            payload in 0usize..80,
            fill in proptest::num::u8::ANY,
            cut in 0usize..200,
            extra in 0u32..3000,
        ) {
            let (link, f) = near_plain(
                link, et, version, ihl, frag, proto, len_field, doff, &opts, payload, fill,
            );
            let whole = f.len();
            let f = &f[..cut.min(whole)];
            let orig = whole as u32 + extra;
            if let Some(p) = parse_plain_tcp(link, f, orig) {
                proptest::prop_assert_eq!(Some(p), parse_full(link, f, orig, &[4789]));
            }
        }
    }

    #[test]
    fn plain_tcp_fast_path_reads_the_plain_shapes() {
        let ts = [1, 1, 8, 10, 0, 0, 0, 7, 0, 0, 0, 9];
        for (link, et, version) in [
            (0, 0x0800, 4),
            (0, 0x86dd, 6),
            (1, 0, 4),
            (1, 0, 6),
            (2, 0, 4),
            (3, 0, 6),
        ] {
            let (link, f) = near_plain(link, et, version, 5, 0x4000, 6, 0, 8, &ts, 100, 3);
            let p = parse_plain_tcp(link, &f, f.len() as u32).expect("the fast path");
            assert_eq!(Some(p), parse_full(link, &f, f.len() as u32, &[]));
            assert_eq!(p.payload, 100);
        }
    }

    /// Every frame of the bundled samples: `parse` (fast path or not)
    /// equals the full parse.
    #[test]
    fn samples_parse_as_the_full_parse() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../samples");
        let mut fast = 0;
        for e in std::fs::read_dir(&dir).expect("samples/") {
            let path = e.expect("entry").path();
            let mut r = offload_capture::CaptureReader::open(&path).expect("opens");
            while let Some(fr) = r.next_frame().expect("reads") {
                let link = LinkKind::from_linktype(fr.link_type.0).expect("link type");
                let full = parse_full(link, fr.data, fr.orig_len, &[4789]);
                if let Some(p) = parse_plain_tcp(link, fr.data, fr.orig_len) {
                    fast += 1;
                    assert_eq!(Some(p), full, "{} frame {}", path.display(), fr.number);
                }
                assert_eq!(parse(link, fr.data, fr.orig_len, &[4789]), full);
            }
        }
        assert!(fast > 1000, "the fast path read {fast} frames");
    }

    /// An IPv6/TCP packet with the extension headers `ext` (their first
    /// next-header value `first`), addresses ::1 -> ::2.
    fn tcp6_ext(first: u8, ext: &[u8]) -> Vec<u8> {
        let mut p = vec![0x60, 0, 0, 0, 0, 0, first, 64];
        p[4..6].copy_from_slice(&((ext.len() + 20) as u16).to_be_bytes());
        p.extend_from_slice(&[0; 15]);
        p.push(1);
        p.extend_from_slice(&[0; 15]);
        p.push(2);
        p.extend_from_slice(ext);
        p.extend_from_slice(&[0x75, 0x30, 0, 80, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 2, 0x20, 0]);
        p.extend_from_slice(&[0; 4]);
        p
    }

    #[test]
    fn home_address_and_type0_routing_name_the_connection_s_addresses() {
        let addr = |last: u8| {
            let mut a = [0u8; 16];
            a[0] = 0x20;
            a[15] = last;
            a
        };
        // Destination options: PadN(2), Home Address (0xc9, 16 bytes).
        let mut d = vec![6, 2, 1, 2, 0, 0, 0xc9, 16];
        d.extend_from_slice(&addr(9));
        let p = parse(LinkKind::Ipv6, &tcp6_ext(60, &d), 100, &[]).unwrap();
        assert_eq!((p.ip.src, p.ip.dst[15], p.dport), (addr(9), 2, 80));
        // Type 0 routing header, two addresses, one segment left: the
        // destination is the last one; none left: the header's own.
        let mut r = vec![6, 4, 0, 1, 0, 0, 0, 0];
        r.extend_from_slice(&addr(7));
        r.extend_from_slice(&addr(8));
        let p = parse(LinkKind::Ipv6, &tcp6_ext(43, &r), 200, &[]).unwrap();
        assert_eq!((p.ip.src[15], p.ip.dst), (1, addr(8)));
        r[3] = 0;
        let p = parse(LinkKind::Ipv6, &tcp6_ext(43, &r), 200, &[]).unwrap();
        assert_eq!(p.ip.dst[15], 2);
        // Lying lengths and every cut: no panic.
        for ext in [&d[..], &r[..]] {
            let mut bad = tcp6_ext(
                if ext[0] == 6 && ext.len() == 24 {
                    60
                } else {
                    43
                },
                ext,
            );
            bad[41] = 0xff;
            for n in 0..bad.len() {
                let _ = parse(LinkKind::Ipv6, &bad[..n], 300, &[]);
            }
        }
    }

    /// A GTP-U G-PDU header: flags, T-PDU, length (of what follows the
    /// first 8 bytes), TEID, then `opt` and `payload`.
    fn gtpu_frame(
        v6: bool,
        sport: u16,
        dport: u16,
        flags: u8,
        opt: &[u8],
        payload: &[u8],
    ) -> Vec<u8> {
        let mut g = vec![flags, 0xff];
        g.extend_from_slice(&((opt.len() + payload.len()) as u16).to_be_bytes());
        g.extend_from_slice(&77u32.to_be_bytes());
        g.extend_from_slice(opt);
        g.extend_from_slice(payload);
        let s = if v6 {
            FrameSpec::udp6(OUT6.0, OUT6.1, sport, dport)
        } else {
            FrameSpec::udp4(OUT4.0, OUT4.1, sport, dport)
        };
        s.payload(g).build()
    }

    #[test]
    fn gtpu_as_tshark_reads_it() {
        let inner4 = tcp4().build();
        for v6 in [false, true] {
            // Plain; from another source port; with sequence number and a
            // PDU session container extension header; IPv6 inside;
            // Ethernet inside.
            let t = inner_of(&gtpu_frame(v6, 2152, 2152, 0x30, &[], &inner4[14..]));
            assert_eq!((t.kind, t.id, t.dport), (TunnelKind::Gtp, Some(77), 2152));
            let t = inner_of(&gtpu_frame(v6, 5906, 2152, 0x30, &[], &inner4[14..]));
            assert_eq!((t.kind, t.sport), (TunnelKind::Gtp, 5906));
            let ext = [0, 9, 0, 0x85, 1, 0x10, 0x09, 0];
            let t = inner_of(&gtpu_frame(v6, 2152, 2152, 0x36, &ext, &inner4[14..]));
            assert_eq!(t.kind, TunnelKind::Gtp);
            inner_of(&gtpu_frame(v6, 2152, 2152, 0x30, &[], &tcp6_inner()[14..]));
            inner_of(&gtpu_frame(v6, 2152, 2152, 0x30, &[], &inner4));
        }
        let none = |f: &[u8]| {
            parse(LinkKind::Ethernet, f, f.len() as u32, &[])
                .unwrap()
                .tunnel
        };
        // A zero extension header length, a control message, GTPv2, GTP'
        // (PT clear), a payload that is not IP (tshark's "too short or
        // unknown"): the outer UDP flow.
        let zero = [0, 9, 0, 0x85, 0, 0x10, 0x09, 0];
        assert_eq!(
            none(&gtpu_frame(false, 2152, 2152, 0x36, &zero, &inner4[14..])),
            None
        );
        for flags in [0x40, 0x20] {
            assert_eq!(
                none(&gtpu_frame(false, 2152, 2152, flags, &[], &inner4[14..])),
                None
            );
        }
        let mut echo = gtpu_frame(false, 2152, 2152, 0x30, &[], &inner4[14..]);
        echo[14 + 20 + 8 + 1] = 1;
        assert_eq!(none(&echo), None);
        assert_eq!(
            none(&gtpu_frame(false, 2152, 2152, 0x30, &[], &[0x7f; 40])),
            None
        );
        // The GTP length ends the payload: an inner IPv4 length beyond it
        // is cut to it, as tshark cuts it.
        let mut short = gtpu_frame(false, 2152, 2152, 0x30, &[], &inner4[14..]);
        let at = 14 + 20 + 8 + 2;
        let len = u16::from_be_bytes([short[at], short[at + 1]]) - 10;
        short[at..at + 2].copy_from_slice(&len.to_be_bytes());
        let p = parse(LinkKind::Ethernet, &short, short.len() as u32, &[]).unwrap();
        assert_eq!(
            (p.tunnel.map(|t| t.kind), p.payload),
            (Some(TunnelKind::Gtp), 90)
        );
    }

    #[test]
    fn gre_in_udp_ayiya_and_ah() {
        let inner4 = tcp4().build();
        let inner6 = tcp6_inner();
        for v6 in [false, true] {
            let mut g = vec![0x20, 0, 0x08, 0x00, 0, 0, 0, 5];
            g.extend_from_slice(&inner4[14..]);
            let t = inner_of(&outer_udp(v6, GRE_UDP_PORT, g));
            assert_eq!((t.kind, t.id), (TunnelKind::GreUdp, Some(5)));
            // AYIYA: identity 2^4, signature 5 x 4 bytes, Forward, IPv6.
            let mut a = vec![0x41, 0x52, 0x11, 41, 0, 0, 0, 0];
            a.extend_from_slice(&[1; 16 + 20]);
            a.extend_from_slice(&inner6[14..]);
            let t = inner_of(&outer_udp(v6, AYIYA_PORT, a.clone()));
            assert_eq!((t.kind, t.id), (TunnelKind::Ayiya, None));
            // Teredo: bare, after an origin indication, after an
            // authentication indicator (ID 2 and value 3 bytes) and one.
            let mut orig = vec![0, 0, 0xa1, 0xb2, 1, 2, 3, 4];
            let mut auth = vec![0, 1, 2, 3, 9, 9, 9, 9, 9];
            auth.extend_from_slice(&[7; 9]);
            for head in [vec![], orig.clone(), auth.clone(), {
                auth.append(&mut orig);
                auth
            }] {
                let mut b = head;
                b.extend_from_slice(&inner6[14..]);
                let t = inner_of(&outer_udp(v6, TEREDO_PORT, b));
                assert_eq!((t.kind, t.id), (TunnelKind::Teredo, None));
            }
            // A heartbeat (opcode 0) carries no packet.
            a[2] = 0x10;
            let f = outer_udp(v6, AYIYA_PORT, a);
            assert!(parse(LinkKind::Ethernet, &f, f.len() as u32, &[])
                .unwrap()
                .tunnel
                .is_none());
            // AH tunnel mode: an SPI, the inner packet.
            let mut h = vec![4, 4, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1];
            h.extend_from_slice(&[0; 12]);
            h.extend_from_slice(&inner4[14..]);
            let t = inner_of(&outer_ip(v6, 51, h, &[]));
            assert_eq!((t.kind, t.id), (TunnelKind::Ah, Some(256)));
        }
        // AH transport mode: the packet's own connection, the AH part of
        // its header; the IPv4 header checksum still over the IHL.
        let mut f = inner4.clone();
        f[14 + 9] = 51;
        let tl = u16::from_be_bytes([f[16], f[17]]) + 24;
        f[16..18].copy_from_slice(&tl.to_be_bytes());
        let mut ah = vec![6, 4, 0, 0, 0, 0, 2, 0, 0, 0, 0, 1];
        ah.extend_from_slice(&[0; 12]);
        f.splice(34..34, ah);
        let p = parse(LinkKind::Ethernet, &f, f.len() as u32, &[]).unwrap();
        assert_eq!(
            (p.tunnel, p.sport, p.dport, p.payload, p.ip.hdr_len),
            (None, 1000, 80, 100, 44)
        );
        let L4::Tcp(t) = p.l4 else { panic!("not tcp") };
        assert_eq!(
            l4_checksum(&f, &p.ip, p.l4_off, t.checksum, false),
            CsumState::Valid
        );
    }

    #[test]
    fn short_or_garbage_frames_are_none_not_panics() {
        let f = tcp4().build();
        for n in 0..60 {
            let _ = parse(LinkKind::Ethernet, &f[..n], f.len() as u32, &[4789]);
        }
        assert!(parse(LinkKind::Ethernet, &[0xff; 40], 40, &[4789]).is_none());
        assert!(parse(LinkKind::RawIp, &[0x45; 10], 10, &[]).is_none());
        // Every cut of a tunnelled frame: no panic, and a tunnel only
        // when its inner transport header is there.
        let mut h = vec![0xb0, 0, 0x65, 0x58, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2];
        h.extend_from_slice(&f);
        let g = outer_ip(true, 47, h, &[(0x8100, 3)]);
        for n in 0..g.len() {
            if let Some(p) = parse(LinkKind::Ethernet, &g[..n], g.len() as u32, &[4789]) {
                assert!(p.tunnel.is_none() || n >= g.len() - 100 - 20 - 12);
            }
        }
    }
}
