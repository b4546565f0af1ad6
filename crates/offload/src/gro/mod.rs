//! Generic Receive Offload, as Linux does it on each modelled kernel line
//! (6.1, 6.12, 6.18, 7.x; [`KernelLine`], 6.18 by default).
//!
//! [`GroEngine::receive`] takes one frame at a time and delivers packets
//! through a callback in the order the kernel would hand them to the stack:
//! a held packet completed by this frame first, then this frame if it went
//! up alone. Every delivery carries a [`FlushReason`].
//!
//! The decision procedure follows the kernel layer by layer:
//! `dev_gro_receive` (`net/core/gro.c`) → `inet_gro_receive`
//! (`net/ipv4/af_inet.c`) / `ipv6_gro_receive` (`net/ipv6/ip6_offload.c`) →
//! `tcp4_gro_receive`/`tcp6_gro_receive` → `tcp_gro_receive`
//! (`net/ipv4/tcp_offload.c`), with the network-layer checks of
//! `gro_receive_network_flush` (`include/net/gro.h`). The order of checks
//! is the kernel's, because it decides which packets pass untouched and
//! which complete the held packet. See `docs/engine.md` for the rule list.
//!
//! # Use
//!
//! One engine per receive queue; feed it every frame of a receive batch,
//! then [`GroEngine::finish`] it (the kernel's flush at the end of a NAPI
//! poll). This plain use takes the engine's fast path: a segment that is
//! the next one of its flow's held packet is checked against the held
//! head's header template and merged without classification
//! (`fast.rs`); nothing has to be switched on.
//!
//! ```
//! use offload::build::{FrameSpec, TcpSpec};
//! use offload::{GroConfig, GroEngine, Input, LinkKind};
//!
//! // Two back-to-back segments of one TCP flow (checksums filled in).
//! let seg = |seq: u32| {
//!     let tcp = TcpSpec::data(40000, 5201, seq);
//!     FrameSpec::tcp4([10, 0, 0, 1], [10, 0, 0, 2], tcp).payload(vec![7; 1000]).build()
//! };
//! let frames = [seg(1), seg(1001)];
//!
//! let mut gro = GroEngine::new(GroConfig::default()); // checksums verified
//! let mut out = Vec::new();
//! let mut deliver = |d: &offload::Delivered<'_>| {
//!     // Zero-copy delivery: `d.data` holds the rewritten headers and
//!     // `d.frags` the payload ranges left in the input frames, which are
//!     // named by their `Input::frame` numbers.
//!     let packet = d.to_vec(|n| &frames[n as usize - 1]);
//!     out.push((d.segments, d.data.len(), packet.len(), d.reason));
//! };
//! for (i, f) in frames.iter().enumerate() {
//!     let input = Input {
//!         data: f,
//!         link: LinkKind::Ethernet,
//!         timestamp_ns: 0,
//!         frame: i as u64 + 1,
//!         orig_len: f.len() as u32,
//!     };
//!     gro.receive(input, &mut deliver);
//! }
//! gro.finish(&mut deliver);
//! assert_eq!(out.len(), 1);
//! assert_eq!(out[0].0, 2); // one super-packet of two segments
//! assert_eq!(out[0].1, 14 + 20 + 20); // its headers
//! assert_eq!(out[0].2, 14 + 20 + 20 + 2000); // the whole packet
//! ```
//!
//! # Delivery: zero-copy by default
//!
//! Like the kernel's `napi_gro_frags` skbs, a held packet keeps only its
//! headers; every segment's payload, the first one's too, stays in the
//! caller's frame and is delivered as a [`Frag`] of [`Delivered::frags`].
//! A super-packet therefore costs no payload copy: a TUN device or a pcap
//! writer takes it as `data` then `frags` in one vectored write, and
//! [`Delivered::copy_to`] / [`Delivered::to_vec`] join it where one buffer
//! is wanted. The caller keeps every frame it passed in until the packet
//! containing it is delivered (at the latest by [`GroEngine::finish`]).
//! A caller that cannot keep its frames (a reader that reuses one buffer)
//! asks for contiguous packets with `set_zero_copy(false)`: `data` is then
//! the whole packet and `frags` is empty. Both deliveries give the same
//! bytes (tests and the kernel conformance suites check it). Why this is
//! the default: `docs/decisions/0097-zero-copy-delivery-by-default.md`.
//!
//! [`GroEngine::receive_with_checksum`] takes a checksum verdict the
//! receiver already has (a NIC's, a vnet header's `DATA_VALID`) so that it
//! is not verified twice. Figures: `docs/performance.md`, "GRO beside its
//! peers".
//!
//! Model choices (not kernel behaviour, documented in
//! `docs/decisions/0002-gro-time-and-buckets.md`): one GRO bucket (the RSS
//! hash of a TAP or a NIC without hash is 0), a flush of everything when
//! the capture shows an idle gap longer than the flush timeout, and no
//! jiffy boundaries inside a burst.

mod buf;
mod complete;
mod fast;
#[cfg(test)]
mod fast_tests;
mod profile;
mod reason;
mod rx;
mod table;
mod tcp;
mod template;
#[cfg(test)]
mod tests;
mod udp;

pub use buf::Frag;
pub use profile::{IpIdPattern, KernelLine};
pub use reason::{FlushReason, LossReason};
pub use udp::UDP_GRO_CNT_MAX;

use crate::layout::Layout;
use crate::link::{L2Info, LinkKind};
use crate::wire::ethernet::ethertype;
use crate::wire::{IpVersion, Transport};

/// `MAX_GRO_SKBS`: held packets per bucket.
pub const MAX_GRO_SKBS: usize = 8;
/// `GRO_LEGACY_MAX_SIZE`: above this only TCP may grow (BIG TCP).
pub const GRO_LEGACY_MAX_SIZE: u32 = 65536;
/// `GRO_MAX_SIZE`: the largest `gro_max_size` the kernel accepts (8 × 65535).
pub const GRO_MAX_SIZE: u32 = 524_280;

/// `SKB_GSO_*` bits the engine reports for delivered super-packets,
/// numbered as `include/linux/skbuff.h` of 6.18 numbers them (bit 3, the
/// old `SKB_GSO_TCP_FIXEDID`, became `__SKB_GSO_TCP_FIXEDID`; the fixed-ID
/// bits moved to 30 and 31 with the 6.18 IP-ID series).
pub mod gso_type {
    /// TCP over IPv4.
    pub const TCPV4: u32 = 1 << 0;
    /// The packet comes from an untrusted source (virtio, TUN).
    pub const DODGY: u32 = 1 << 1;
    /// ECN CWR seen (classic ECN; what 6.1 and 6.12 `tcp_gro_complete` set).
    pub const TCP_ECN: u32 = 1 << 2;
    /// TCP over IPv6.
    pub const TCPV6: u32 = 1 << 4;
    /// GRE tunnel without checksum.
    pub const GRE: u32 = 1 << 6;
    /// GRE tunnel with checksum.
    pub const GRE_CSUM: u32 = 1 << 7;
    /// IP in IP with an outer IPv4 header (IPIP, SIT).
    pub const IPXIP4: u32 = 1 << 8;
    /// IP in IP with an outer IPv6 header (IPv6 in IPv6, IPv4 in IPv6).
    pub const IPXIP6: u32 = 1 << 9;
    /// UDP tunnel (VXLAN, Geneve) without outer checksum.
    pub const UDP_TUNNEL: u32 = 1 << 10;
    /// UDP tunnel with outer checksum.
    pub const UDP_TUNNEL_CSUM: u32 = 1 << 11;
    /// UDP segmentation (USO / UDP GRO).
    pub const UDP_L4: u32 = 1 << 17;
    /// AccECN: CWR is kept on every segment (`include/linux/skbuff.h` since
    /// 6.15, 023af5a72ab1; set by `tcp_gro_complete` since 6.15, 4e4f7cefb130).
    pub const TCP_ACCECN: u32 = 1 << 19;
    /// Outer (or only) IPv4 header kept a fixed ID (6.18: bit 30).
    pub const TCP_FIXEDID: u32 = 1 << 30;
    /// Inner IPv4 header kept a fixed ID (6.18: bit 31).
    pub const TCP_FIXEDID_INNER: u32 = 1 << 31;
}

/// The knobs of a GRO run.
///
/// New knobs are added as the kernel grows them, so the struct is
/// `#[non_exhaustive]`: start from [`GroConfig::default`] (or
/// [`GroConfig::for_kernel`]) and set what differs, with the builder
/// methods or the public fields:
///
/// ```
/// use offload::gro::{GroConfig, KernelLine};
///
/// let cfg = GroConfig::for_kernel(KernelLine::V6_12)
///     .gro_max_size(185_000)
///     .flush_timeout_ns(20_000);
/// assert_eq!(cfg.gro_max_size, 185_000);
/// let mut cfg = cfg;
/// cfg.verify_checksums = false;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroConfig {
    /// `gro_max_size` (IFLA_GRO_MAX_SIZE): limit for IPv6 packets.
    pub gro_max_size: u32,
    /// `gro_ipv4_max_size` (IFLA_GRO_IPV4_MAX_SIZE): limit for everything
    /// whose outer protocol is not IPv6 (including VLAN-tagged frames).
    pub gro_ipv4_max_size: u32,
    /// Idle gap after which every held packet is completed. 0 means every
    /// frame is its own NAPI poll (nothing stays held).
    pub flush_timeout_ns: u64,
    /// Verify TCP/UDP checksums in software, as the kernel does for a device
    /// that gives no hardware verdict. Off for captures taken on a sender
    /// whose checksums were still to be filled in by the NIC.
    pub verify_checksums: bool,
    /// Which plain UDP datagrams are coalesced.
    pub udp: UdpGro,
    /// UDP destination ports on which a VXLAN socket listens: GRO looks
    /// inside only those ([`crate::wire::vxlan::DEFAULT_PORTS`], 4789 and
    /// 8472, by default).
    pub vxlan_ports: Vec<u16>,
    /// Coalesce in-band 802.1Q/802.1ad tagged frames (`vlan_gro_receive`).
    /// Off by default because the reference kernel is built without
    /// `CONFIG_VLAN_8021Q`, which registers that handler; most distribution
    /// kernels have it on.
    pub vlan_gro: bool,
    /// UDP destination ports on which a Geneve socket listens (6081 by
    /// default): GRO looks inside Geneve only there.
    pub geneve_ports: Vec<u16>,
    /// The kernel line whose rules apply ([`KernelLine`]: IP ID, CWR,
    /// IPv6 BIG TCP and size-limit rules differ between 6.1, 6.12, 6.18
    /// and 7.x). Default 6.18.
    pub kernel: KernelLine,
    /// Reproduce the losses of the kernel line (default on): a packet
    /// that line's GRO completes into something the stack never gets
    /// sound is delivered with [`Delivered::lost`] set, and its segments
    /// count as lost ([`GroStats::lost_segments`]). Today that is BIG TCP
    /// through a tunnel with an IPv6 outer header on 5.19–6.19
    /// ([`KernelLine::breaks_big_tcp_over_ipv6_tunnels`]). Off, the engine
    /// delivers what a working kernel would (the merged packet, sound),
    /// which is what a datapath that coalesces for its own use (a VPN, a
    /// userspace stack) wants.
    pub kernel_losses: bool,
}

impl Default for GroConfig {
    fn default() -> Self {
        GroConfig {
            gro_max_size: GRO_LEGACY_MAX_SIZE,
            gro_ipv4_max_size: GRO_LEGACY_MAX_SIZE,
            flush_timeout_ns: DEFAULT_FLUSH_TIMEOUT_NS,
            verify_checksums: true,
            udp: UdpGro::AllPorts,
            vxlan_ports: crate::wire::vxlan::DEFAULT_PORTS.to_vec(),
            vlan_gro: false,
            kernel: KernelLine::default(),
            geneve_ports: vec![crate::wire::geneve::PORT],
            kernel_losses: true,
        }
    }
}

impl GroConfig {
    /// The defaults with the rules of kernel line `kernel`.
    pub fn for_kernel(kernel: KernelLine) -> Self {
        GroConfig::default().kernel(kernel)
    }

    /// Sets [`GroConfig::gro_max_size`].
    pub fn gro_max_size(mut self, v: u32) -> Self {
        self.gro_max_size = v;
        self
    }

    /// Sets [`GroConfig::gro_ipv4_max_size`].
    pub fn gro_ipv4_max_size(mut self, v: u32) -> Self {
        self.gro_ipv4_max_size = v;
        self
    }

    /// Sets [`GroConfig::flush_timeout_ns`].
    pub fn flush_timeout_ns(mut self, v: u64) -> Self {
        self.flush_timeout_ns = v;
        self
    }

    /// Sets [`GroConfig::verify_checksums`].
    pub fn verify_checksums(mut self, v: bool) -> Self {
        self.verify_checksums = v;
        self
    }

    /// Sets [`GroConfig::udp`].
    pub fn udp(mut self, v: UdpGro) -> Self {
        self.udp = v;
        self
    }

    /// Sets [`GroConfig::vxlan_ports`].
    pub fn vxlan_ports(mut self, v: Vec<u16>) -> Self {
        self.vxlan_ports = v;
        self
    }

    /// Sets [`GroConfig::geneve_ports`].
    pub fn geneve_ports(mut self, v: Vec<u16>) -> Self {
        self.geneve_ports = v;
        self
    }

    /// Sets [`GroConfig::vlan_gro`].
    pub fn vlan_gro(mut self, v: bool) -> Self {
        self.vlan_gro = v;
        self
    }

    /// Sets [`GroConfig::kernel`].
    pub fn kernel(mut self, v: KernelLine) -> Self {
        self.kernel = v;
        self
    }

    /// Sets [`GroConfig::kernel_losses`].
    pub fn kernel_losses(mut self, v: bool) -> Self {
        self.kernel_losses = v;
        self
    }
}

/// When the kernel runs `udp_gro_receive_segment` for plain UDP.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum UdpGro {
    /// Never (no `UDP_GRO` socket, no `rx-udp-gro-forwarding`): UDP passes.
    Off,
    /// For every destination port: the forwarding path
    /// (`rx-udp-gro-forwarding` with no local socket), which coalesces
    /// exactly like a `UDP_GRO` socket on each port.
    AllPorts,
    /// Only for these destination ports: local sockets with `UDP_GRO`.
    Ports(Vec<u16>),
}

/// `off`, `all`, or the ports joined by commas (what `--udp-gro` takes).
impl core::fmt::Display for UdpGro {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            UdpGro::Off => f.write_str("off"),
            UdpGro::AllPorts => f.write_str("all"),
            UdpGro::Ports(p) => {
                for (i, port) in p.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{port}")?;
                }
                Ok(())
            }
        }
    }
}

impl UdpGro {
    /// True when a datagram to `port` is coalesced.
    pub fn applies_to(&self, port: u16) -> bool {
        match self {
            UdpGro::Off => false,
            UdpGro::AllPorts => true,
            UdpGro::Ports(p) => p.contains(&port),
        }
    }
}

/// Default flush timeout: 50 µs, the order of a NIC's interrupt
/// moderation window (`rx-usecs`), which is what decides the size of a NAPI
/// poll on a stock kernel (`gro_flush_timeout` 0). See
/// `docs/decisions/0002-gro-time-and-buckets.md`.
pub const DEFAULT_FLUSH_TIMEOUT_NS: u64 = 50_000;

/// One frame handed to the engine.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    /// The bytes, starting with the link header.
    pub data: &'a [u8],
    /// How `data` is framed.
    pub link: LinkKind,
    /// Capture timestamp in nanoseconds.
    pub timestamp_ns: u64,
    /// The frame's number in its capture (1-based), for evidence.
    pub frame: u64,
    /// The frame's length on the wire; more than `data.len()` when the
    /// capture cut it short.
    pub orig_len: u32,
}

/// What the receiver already knows about a frame's TCP/UDP checksums: the
/// kernel's `skb->ip_summed` and `csum_level` when the frame reaches GRO.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum RxChecksum {
    /// Nothing (`CHECKSUM_NONE`): GRO verifies each checksum in software
    /// when [`GroConfig::verify_checksums`] is on.
    #[default]
    None,
    /// `CHECKSUM_UNNECESSARY`: the outermost `level + 1` transport
    /// checksums were already verified (a NIC, a virtio `DATA_VALID`
    /// header, a capture checked before). Each checksum GRO meets, outer
    /// UDP of a tunnel first, uses one level (`skb_gro_incr_csum_unnecessary`,
    /// `include/net/gro.h`); deeper ones are verified in software.
    Unnecessary {
        /// `csum_level`: 0 for the outermost checksum only.
        level: u8,
    },
}

impl RxChecksum {
    /// `NAPI_GRO_CB(skb)->csum_cnt` at the start of GRO.
    #[inline]
    fn csum_cnt(self) -> u16 {
        match self {
            RxChecksum::None => 0,
            RxChecksum::Unnecessary { level } => level as u16 + 1,
        }
    }
}

/// The transport seen by the engine, for per-protocol statistics (a
/// new tunnel adds a variant, hence `#[non_exhaustive]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Proto {
    /// TCP over IPv4.
    Tcp4,
    /// TCP over IPv6.
    Tcp6,
    /// UDP over IPv4.
    Udp4,
    /// UDP over IPv6.
    Udp6,
    /// VXLAN-encapsulated traffic (counted apart from plain UDP).
    Vxlan,
    /// IP in IP: IPIP, SIT, IPv6 in IPv6, IPv4 in IPv6.
    IpInIp,
    /// GRE-encapsulated traffic.
    Gre,
    /// Geneve-encapsulated traffic.
    Geneve,
    /// Anything else (passes GRO untouched).
    Other,
}

impl Proto {
    /// The bucket of a packet of IP version `ip` carrying `transport`.
    #[inline]
    pub fn of(ip: IpVersion, transport: Option<Transport>) -> Proto {
        match (transport, ip) {
            (Some(Transport::Tcp), IpVersion::V4) => Proto::Tcp4,
            (Some(Transport::Tcp), IpVersion::V6) => Proto::Tcp6,
            (Some(Transport::Udp), IpVersion::V4) => Proto::Udp4,
            (Some(Transport::Udp), IpVersion::V6) => Proto::Udp6,
            (None, _) => Proto::Other,
        }
    }

    /// Every bucket, in index order.
    pub const ALL: [Proto; 9] = [
        Proto::Tcp4,
        Proto::Tcp6,
        Proto::Udp4,
        Proto::Udp6,
        Proto::Vxlan,
        Proto::IpInIp,
        Proto::Gre,
        Proto::Geneve,
        Proto::Other,
    ];

    /// The bucket of tunnelled traffic.
    #[inline]
    pub fn of_encap(encap: crate::layout::Encap) -> Proto {
        use crate::layout::Encap;
        match encap {
            Encap::Vxlan => Proto::Vxlan,
            Encap::Geneve { .. } => Proto::Geneve,
            Encap::Gre { .. } => Proto::Gre,
            Encap::IpInIp => Proto::IpInIp,
        }
    }

    /// The short name used in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Proto::Tcp4 => "tcp4",
            Proto::Tcp6 => "tcp6",
            Proto::Udp4 => "udp4",
            Proto::Udp6 => "udp6",
            Proto::Vxlan => "vxlan",
            Proto::IpInIp => "ip-in-ip",
            Proto::Gre => "gre",
            Proto::Geneve => "geneve",
            Proto::Other => "other",
        }
    }
}

/// A packet the engine hands up the stack: `data`, then the payload
/// ranges of `frags` ([`Delivered::len`], [`Delivered::to_vec`]).
#[derive(Debug, Clone, Copy)]
pub struct Delivered<'a> {
    /// The packet's first bytes, with the same link header as its first
    /// frame: its headers (rewritten for the whole packet) when `frags` is
    /// not empty, else the whole packet.
    pub data: &'a [u8],
    /// How `data` is framed.
    pub link: LinkKind,
    /// Timestamp of the last frame it contains.
    pub timestamp_ns: u64,
    /// Frames merged into it (`NAPI_GRO_CB(skb)->count`).
    pub segments: u32,
    /// `gso_size` when `segments > 1`, else 0.
    pub gso_size: u32,
    /// `SKB_GSO_*` bits when `segments > 1`, else 0.
    pub gso_type: u32,
    /// Why it was delivered now.
    pub reason: FlushReason,
    /// Number of the first frame in it.
    pub first_frame: u64,
    /// Number of the last frame in it.
    pub last_frame: u64,
    /// Its statistics bucket.
    pub proto: Proto,
    /// Payload ranges that follow `data` and stayed in their input frames
    /// (zero-copy delivery, the default, [`GroEngine::set_zero_copy`]);
    /// empty for contiguous delivery and for frames that passed untouched.
    /// The packet is `data` followed by these ranges, in order; the headers
    /// in `data` already describe the whole packet. With zero-copy on,
    /// every held packet, a single segment too, has its payload here and
    /// only its headers in `data`.
    pub frags: &'a [Frag],
    /// Set when the kernel line loses this packet ([`GroConfig::kernel_losses`]):
    /// a receiver on that line drops it or gets it mangled, so its
    /// `segments` never reach the stack sound. `data` and `frags` still
    /// hold the packet a working kernel would deliver. A caller that
    /// forwards packets skips these (or turns `kernel_losses` off).
    pub lost: Option<LossReason>,
}

impl Delivered<'_> {
    /// The packet's length, frags included.
    pub fn len(&self) -> usize {
        self.data.len() + self.frags.iter().map(|f| f.len as usize).sum::<usize>()
    }

    /// True for an empty packet (never delivered by the engine).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends the whole packet to `out`, copying each frag from the frame
    /// `frame_bytes(number)` returns (the caller kept the input frames).
    ///
    /// # Panics
    ///
    /// If `frame_bytes` returns a slice shorter than the frame the engine
    /// was given under that number (the caller broke the zero-copy
    /// contract of [`GroEngine::set_zero_copy`]).
    pub fn copy_to<'f>(&self, mut frame_bytes: impl FnMut(u64) -> &'f [u8], out: &mut Vec<u8>) {
        out.reserve(self.len());
        out.extend_from_slice(self.data);
        for f in self.frags {
            let at = f.offset as usize;
            out.extend_from_slice(&frame_bytes(f.frame)[at..at + f.len as usize]);
        }
    }

    /// The whole packet in one new buffer ([`Self::copy_to`], which says
    /// when it panics).
    pub fn to_vec<'f>(&self, frame_bytes: impl FnMut(u64) -> &'f [u8]) -> Vec<u8> {
        let mut out = Vec::new();
        self.copy_to(frame_bytes, &mut out);
        out
    }
}

/// Counters of a GRO run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroStats {
    /// Frames fed to the engine.
    pub frames_in: u64,
    /// Packets delivered.
    pub packets_out: u64,
    /// Bytes fed to the engine.
    pub bytes_in: u64,
    /// Per [`Proto`] (index of `Proto::ALL`): frames in, packets out.
    pub proto_in: [u64; Proto::ALL.len()],
    /// Packets out per [`Proto`] (index of `Proto::ALL`).
    pub proto_out: [u64; Proto::ALL.len()],
    /// Per [`FlushReason::index`].
    pub reasons: Vec<u64>,
    /// Packets the kernel line loses ([`Delivered::lost`]); not counted
    /// in `packets_out`, `proto_out` or `reasons`.
    pub lost_packets: u64,
    /// The segments of those packets.
    pub lost_segments: u64,
}

impl GroStats {
    fn new() -> Self {
        GroStats {
            reasons: vec![0; FlushReason::ALL.len()],
            ..Default::default()
        }
    }

    /// Count of one reason.
    pub fn reason_count(&self, r: FlushReason) -> u64 {
        self.reasons[r.index()]
    }
}

/// A held packet: the head of a super-packet in the making.
#[derive(Debug)]
pub(crate) struct Held {
    pub data: buf::PacketBuf,
    pub link: LinkKind,
    /// Bytes of link header that form the flow key.
    pub l2_key_len: usize,
    /// Bytes the kernel's `skb->data` is past the frame start (the MAC header it pulled).
    pub mac_len: usize,
    pub outer_protocol: u16,
    /// Where the headers are (as classified; completion may shift them).
    pub lay: Layout,
    pub proto: Proto,
    pub count: u32,
    /// `gso_size`: the first segment's payload length.
    pub mss: u32,
    /// `NAPI_GRO_CB(p)->ip_fixedid` (bit 0 outer/only header, bit 1 inner).
    pub fixedid: u8,
    /// `NAPI_GRO_CB(p)->is_atomic` of the ≤ 6.9 IP-ID rule (6.1 profile):
    /// the head's innermost DF, cleared when the flow turns incrementing.
    pub atomic: bool,
    /// Payload bytes held (`skb_gro_len(p)`).
    pub payload: u32,
    pub first_frame: u64,
    pub last_frame: u64,
    pub last_ts: u64,
    /// When it was held (`NAPI_GRO_CB(p)->age`): the timestamp of its
    /// first frame.
    pub held_ts: u64,
}

impl Default for Held {
    /// An empty slot's packet (never delivered: a slot is filled when it
    /// is taken).
    fn default() -> Self {
        Held {
            data: buf::PacketBuf::default(),
            link: LinkKind::Ethernet,
            l2_key_len: 0,
            mac_len: 0,
            outer_protocol: 0,
            lay: Layout {
                l3_off: 0,
                ip: IpVersion::V4,
                l4_off: 0,
                l4_proto: Transport::Tcp,
                l4_header_len: 0,
                end: 0,
                jumbo_hbh: false,
                outer: None,
            },
            proto: Proto::Other,
            count: 0,
            mss: 0,
            fixedid: 0,
            atomic: false,
            payload: 0,
            first_frame: 0,
            last_frame: 0,
            last_ts: 0,
            held_ts: 0,
        }
    }
}

impl Held {
    /// Makes this slot's packet a copy of `o` (its buffer recycled).
    fn copy_from(&mut self, o: &Held) {
        let Held {
            data: _,
            link,
            l2_key_len,
            mac_len,
            outer_protocol,
            lay,
            proto,
            count,
            mss,
            fixedid,
            atomic,
            payload,
            first_frame,
            last_frame,
            last_ts,
            held_ts,
        } = *o;
        self.data.copy_from(&o.data);
        self.link = link;
        self.l2_key_len = l2_key_len;
        self.mac_len = mac_len;
        self.outer_protocol = outer_protocol;
        self.lay = lay;
        self.proto = proto;
        self.count = count;
        self.mss = mss;
        self.fixedid = fixedid;
        self.atomic = atomic;
        self.payload = payload;
        self.first_frame = first_frame;
        self.last_frame = last_frame;
        self.last_ts = last_ts;
        self.held_ts = held_ts;
    }

    /// `p->len`: the packet's length from the kernel's `skb->data`.
    pub(crate) fn skb_len(&self) -> usize {
        self.data.total_len() - self.mac_len
    }
}

/// The GRO engine: a flow table of held packets and the kernel's rules.
#[derive(Debug)]
pub struct GroEngine {
    cfg: GroConfig,
    /// Held packets, oldest first (the kernel keeps youngest first and
    /// completes from the tail; the order is the same).
    held: table::Table,
    last_ts: Option<u64>,
    stats: GroStats,
    /// Merged payloads stay in their input frames ([`Delivered::frags`]);
    /// on unless the caller asks for contiguous packets.
    zero_copy: bool,
    /// The "same flow, next segment" path (`fast.rs`) is tried first.
    /// Always on outside the differential tests, which turn it off to
    /// compare both paths.
    fast_path: bool,
    /// Frames merged by the fast path (tests check that the plain use of
    /// the public API takes it).
    #[cfg(test)]
    fast_merges: u64,
    /// Frames held as new heads by the fast path.
    #[cfg(test)]
    fast_holds: u64,
    /// Frames whose held packet the fast path found under its second
    /// hint index only.
    #[cfg(test)]
    second_probes: u64,
}

impl GroEngine {
    /// An engine with an empty table.
    pub fn new(cfg: GroConfig) -> Self {
        GroEngine {
            cfg,
            held: table::Table::new(),
            last_ts: None,
            stats: GroStats::new(),
            zero_copy: true,
            fast_path: true,
            #[cfg(test)]
            fast_merges: 0,
            #[cfg(test)]
            fast_holds: 0,
            #[cfg(test)]
            second_probes: 0,
        }
    }

    /// Chooses the delivery. On (the default), zero-copy coalescing: a
    /// held packet keeps only its first segment's headers (link header to
    /// the end of the TCP or UDP header); the payload of every segment, the
    /// first included, stays in its input frame and is delivered as a
    /// [`Frag`] of [`Delivered::frags`] (the kernel's `frags`), instead of
    /// being copied. A new flow's head then costs a copy of its headers,
    /// not of its payload. The caller must keep every frame it passed in
    /// available until the packet containing it has been delivered (frame
    /// numbers identify them), and must read every delivery as `data`
    /// followed by `frags` ([`Delivered::len`], [`Delivered::copy_to`],
    /// [`Delivered::to_vec`]): a held packet of one segment comes as its
    /// headers plus one frag, its bytes those of its frame, unchanged.
    /// Frames that pass GRO untouched come whole in `data`.
    ///
    /// Off: contiguous delivery, for callers that cannot keep their frames
    /// (a capture reader that reuses its buffer). Each merged payload is
    /// copied into the held packet, `data` holds the whole packet and
    /// `frags` is empty. Same bytes, more CPU per frame
    /// (`docs/performance.md`, "GRO beside its peers": the `offload-copy`
    /// arms).
    pub fn set_zero_copy(&mut self, on: bool) {
        self.zero_copy = on;
    }

    /// Turns the "same flow, next segment" fast path off (tests compare
    /// both paths; the answers are the same by design).
    #[cfg(test)]
    pub(crate) fn set_fast_path(&mut self, on: bool) {
        self.fast_path = on;
    }

    /// The configuration it runs with.
    pub fn config(&self) -> &GroConfig {
        &self.cfg
    }

    /// Counters so far.
    pub fn stats(&self) -> &GroStats {
        &self.stats
    }

    /// Number of packets currently held.
    pub fn held_count(&self) -> usize {
        self.held.len()
    }

    /// The length of the longest held packet (`p->len`, from the network
    /// header for Ethernet), 0 when nothing is held. Every size rule
    /// (`skb_gro_receive`'s `gro_max_size` / `gro_ipv4_max_size` and the
    /// 64 KiB limit, in `tcp.rs`, `udp.rs` and the fast path) compares a
    /// held packet's length plus the incoming payload with a limit: while
    /// this plus the incoming frame's length stays below the smallest
    /// limit of several engines that differ only in their sizes, none of
    /// them can decide differently, which is how the what-if runs one
    /// engine for every size (`offload-analyze`, decision 0230).
    pub fn longest_held_len(&self) -> usize {
        self.held.iter().map(Held::skb_len).max().unwrap_or(0)
    }

    /// Takes `leader`'s state: its held packets (headers, frags, counters,
    /// age order), the fast path's templates and hints, and its clock
    /// (the last frame's timestamp, for the flush timeout). `leader` must
    /// have been fed the same frames and differ from this engine at most
    /// in its size limits ([`GroConfig::gro_max_size`],
    /// [`GroConfig::gro_ipv4_max_size`]); each held packet's limit is
    /// then set to this engine's (`netif_get_gro_max_size`), as if this
    /// engine had held it. Counters ([`Self::stats`]) stay this engine's
    /// own: they count only the frames it was fed. With zero-copy
    /// delivery the frames held packets refer to must stay available, as
    /// for the leader.
    pub fn catch_up(&mut self, leader: &GroEngine) {
        self.held.copy_from(&leader.held);
        self.last_ts = leader.last_ts;
        let slots: Vec<_> = self.held.occupied().collect();
        for s in slots {
            let limit = max_size(&self.cfg, self.held.get(s).outer_protocol);
            self.held.template_mut(s).set_limit(limit);
        }
    }

    /// True when this engine holds the same packets as `other`, in the
    /// same age order, with the same clock: each made of the same frames
    /// (first and last frame, segment count, payload bytes). Two engines
    /// fed the same frames that differ only in their size limits are then
    /// in the same state: what a held packet is follows from the frames
    /// merged into it.
    pub fn holds_same(&self, other: &GroEngine) -> bool {
        self.last_ts == other.last_ts
            && self.held.len() == other.held.len()
            && self.held.iter().zip(other.held.iter()).all(|(a, b)| {
                a.first_frame == b.first_frame
                    && a.last_frame == b.last_frame
                    && a.count == b.count
                    && a.payload == b.payload
            })
    }

    /// Feeds one frame. Deliveries (completed held packets, then the frame
    /// itself if it was not held or merged) go to `out`, in kernel order.
    pub fn receive<F: FnMut(&Delivered<'_>)>(&mut self, input: Input<'_>, out: &mut F) {
        self.receive_with_checksum(input, RxChecksum::None, out)
    }

    /// [`GroEngine::receive`] for a frame whose checksums the caller has
    /// already judged (`csum`), so that they are not verified twice.
    pub fn receive_with_checksum<F: FnMut(&Delivered<'_>)>(
        &mut self,
        input: Input<'_>,
        csum: RxChecksum,
        out: &mut F,
    ) {
        self.stats.frames_in += 1;
        self.stats.bytes_in += input.data.len() as u64;
        if let Some(last) = self.last_ts {
            if input.timestamp_ns.saturating_sub(last) > self.cfg.flush_timeout_ns
                && !self.held.is_empty()
            {
                self.flush_all(FlushReason::Timeout, out);
            }
        }
        self.last_ts = Some(input.timestamp_ns);

        if self.fast_receive(&input, csum, out) {
            if self.cfg.flush_timeout_ns == 0 {
                self.flush_all(FlushReason::Timeout, out);
            }
            return;
        }
        let (verdict, proto) = self.classify(&input, csum.csum_cnt(), out);
        self.stats.proto_in[proto as usize] += 1;
        if let Verdict::Pass(reason) = verdict {
            self.pass(&input, reason, proto, out);
        }
        if self.cfg.flush_timeout_ns == 0 {
            self.flush_all(FlushReason::Timeout, out);
        }
    }

    /// Receives a batch of frames in order ([`Self::receive`] each), as
    /// a NAPI poll hands its budget to GRO. Held packets stay held after
    /// the batch, as they do with `gro_flush_timeout` set: complete them
    /// with [`Self::handle_timeout`] when [`Self::poll_timeout`] says, or
    /// with [`Self::flush_all`] / [`Self::finish`] (the end of a poll
    /// without a flush timeout).
    pub fn receive_batch<'a, F: FnMut(&Delivered<'_>)>(
        &mut self,
        batch: impl IntoIterator<Item = Input<'a>>,
        out: &mut F,
    ) {
        for input in batch {
            self.receive(input, out);
        }
    }

    /// When the oldest held packet reaches the flush timeout
    /// ([`GroConfig::flush_timeout_ns`] after its first frame's
    /// timestamp, in the caller's clock): the deadline to wake up at and
    /// call [`Self::handle_timeout`]. `None` when nothing is held. A
    /// long-lived user (a VPN, a userspace stack) waits for its next
    /// frames with this deadline, as the kernel arms its
    /// `gro_flush_timeout` hrtimer (`napi_complete_done`,
    /// `net/core/dev.c`).
    pub fn poll_timeout(&self) -> Option<u64> {
        let oldest = self.held.oldest()?;
        Some(
            self.held
                .get(oldest)
                .held_ts
                .saturating_add(self.cfg.flush_timeout_ns),
        )
    }

    /// Completes, oldest first, every held packet held for at least the
    /// flush timeout at time `now_ns` ([`FlushReason::Timeout`]); younger
    /// ones stay held. This is the kernel's `napi_gro_flush(napi, true)`
    /// after the `gro_flush_timeout` timer fired, which completes only the
    /// packets older than the current tick (the engine measures age in
    /// the caller's nanoseconds, not in jiffies).
    pub fn handle_timeout<F: FnMut(&Delivered<'_>)>(&mut self, now_ns: u64, out: &mut F) {
        while let Some(s) = self.held.oldest() {
            let age = now_ns.saturating_sub(self.held.get(s).held_ts);
            if age < self.cfg.flush_timeout_ns {
                break;
            }
            self.complete(s, FlushReason::Timeout, out);
        }
    }

    /// Completes every held packet, oldest first (`__gro_flush`).
    pub fn flush_all<F: FnMut(&Delivered<'_>)>(&mut self, reason: FlushReason, out: &mut F) {
        while let Some(s) = self.held.oldest() {
            self.complete(s, reason, out);
        }
    }

    /// Completes everything at the end of the input.
    pub fn finish<F: FnMut(&Delivered<'_>)>(&mut self, out: &mut F) {
        self.flush_all(FlushReason::EndOfInput, out);
    }

    /// Delivers `input` unchanged.
    fn pass<F: FnMut(&Delivered<'_>)>(
        &mut self,
        input: &Input<'_>,
        reason: FlushReason,
        proto: Proto,
        out: &mut F,
    ) {
        self.stats.packets_out += 1;
        self.stats.proto_out[proto as usize] += 1;
        self.stats.reasons[reason.index()] += 1;
        out(&Delivered {
            data: input.data,
            link: input.link,
            timestamp_ns: input.timestamp_ns,
            segments: 1,
            gso_size: 0,
            gso_type: 0,
            reason,
            first_frame: input.frame,
            last_frame: input.frame,
            proto,
            frags: &[],
            lost: None,
        });
    }

    /// `gro_complete`: takes held packet `s` out of the table, finishes
    /// its headers and delivers it. The packet is completed in its slot
    /// (nothing moves; the slot's buffer serves its next packet).
    fn complete<F: FnMut(&Delivered<'_>)>(
        &mut self,
        s: table::Slot,
        reason: FlushReason,
        out: &mut F,
    ) {
        self.complete_inline(s, reason, out)
    }

    /// [`Self::complete`], inlined where a new flow evicts the oldest
    /// held packet (every frame of a train with more flows than slots).
    #[inline(always)]
    fn complete_inline<F: FnMut(&Delivered<'_>)>(
        &mut self,
        s: table::Slot,
        reason: FlushReason,
        out: &mut F,
    ) {
        let p = self.held.unlink(s);
        let mut gso = 0;
        let mut lost = None;
        if p.count > 1 {
            if self.cfg.kernel_losses {
                lost = kernel_loss(p, self.cfg.kernel);
            }
            gso = complete::complete(p, self.cfg.kernel);
        }
        let stats = &mut self.stats;
        if lost.is_some() {
            stats.lost_packets += 1;
            stats.lost_segments += p.count as u64;
        } else {
            stats.packets_out += 1;
            stats.proto_out[p.proto as usize] += 1;
            stats.reasons[reason.index()] += 1;
        }
        out(&Delivered {
            data: &p.data,
            link: p.link,
            timestamp_ns: p.last_ts,
            segments: p.count,
            gso_size: if p.count > 1 { p.mss } else { 0 },
            gso_type: gso,
            reason,
            first_frame: p.first_frame,
            last_frame: p.last_frame,
            proto: p.proto,
            frags: p.data.frags(),
            lost,
        });
    }

    /// Holds `skb` as the head of a new run (`dev_gro_receive`: after
    /// completing the bucket's oldest packet if the bucket is full).
    /// `payload` becomes the run's `gso_size`; `header_end` is where the
    /// payload starts (zero-copy keeps only the bytes before it).
    fn hold<F: FnMut(&Delivered<'_>)>(
        &mut self,
        skb: &rx::Skb<'_>,
        payload: u32,
        header_end: usize,
        out: &mut F,
    ) -> table::Slot {
        self.hold_hashed(skb, rx::flow_hash(skb), payload, header_end, out)
    }

    /// [`Self::hold`] for a frame whose flow hash is already known.
    #[inline(always)]
    fn hold_hashed<F: FnMut(&Delivered<'_>)>(
        &mut self,
        skb: &rx::Skb<'_>,
        hash: u32,
        payload: u32,
        header_end: usize,
        out: &mut F,
    ) -> table::Slot {
        // `gro_flush_oldest` (net/core/gro.c): a full bucket completes its
        // oldest packet before the new one is linked in.
        if self.held.len() >= MAX_GRO_SKBS {
            if let Some(oldest) = self.held.oldest() {
                self.complete_inline(oldest, FlushReason::TableFull, out);
            }
        }
        let proto = match skb.lay.outer {
            Some(o) => Proto::of_encap(o.encap),
            None => skb.proto(),
        };
        let f = skb.frame();
        let zero_copy = self.zero_copy;
        let s = self.held.alloc(hash);
        let p = self.held.get_mut(s);
        if zero_copy {
            // The headers only; the payload stays in the caller's frame as
            // the packet's first frag (a driver's `napi_gro_frags` skb has
            // its headers pulled and its payload in a page frag alike).
            p.data.reset_headers(f, header_end, skb.input.frame);
        } else {
            p.data.reset(f);
        }
        p.link = skb.input.link;
        p.l2_key_len = skb.l2.key_len;
        p.mac_len = skb.mac_len;
        p.outer_protocol = skb.l2.outer_protocol;
        p.lay = skb.lay;
        p.proto = proto;
        p.count = 1;
        p.mss = payload;
        p.fixedid = 0;
        // Read by the ≤ 6.9 IP-ID rule only (`profile::ip_id_flush_6_1`).
        p.atomic =
            self.cfg.kernel.tracks_atomic() && profile::is_atomic(&f[skb.lay.l3_off..], skb.lay.ip);
        p.payload = payload;
        p.first_frame = skb.input.frame;
        p.last_frame = skb.input.frame;
        p.last_ts = skb.input.timestamp_ns;
        p.held_ts = skb.input.timestamp_ns;
        s
    }
}

/// The outcome of classifying a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The frame was merged or held; nothing more to deliver.
    Consumed,
    /// The frame goes up alone, unchanged.
    Pass(FlushReason),
}

/// The maximum merged size for a held packet (`netif_get_gro_max_size`).
#[inline]
fn max_size(cfg: &GroConfig, outer_protocol: u16) -> u32 {
    if outer_protocol == ethertype::IPV6 {
        cfg.gro_max_size
    } else if !cfg.kernel.has_ipv4_max_size() {
        // Before 6.3 (`skb_gro_receive`): `gro_max_size` for every
        // protocol, and only IPv6 TCP may pass 64 KiB.
        cfg.gro_max_size.min(GRO_LEGACY_MAX_SIZE)
    } else {
        cfg.gro_ipv4_max_size
    }
}

/// What the kernel line loses of held packet `p` (more than one segment)
/// when it completes it: BIG TCP through an IPv6-outer tunnel whose outer
/// payload passes `IPV6_MAXPLEN` (`ipv6_gro_complete`,
/// [`KernelLine::ipv6_outer_tunnel_loss`]).
#[cold]
fn kernel_loss_slow(
    p: &Held,
    o: crate::layout::OuterLayout,
    line: KernelLine,
) -> Option<LossReason> {
    let outer_payload = p.data.total_len() - o.l3_off - crate::wire::ipv6::HEADER_LEN;
    if outer_payload <= 65535 {
        return None;
    }
    line.ipv6_outer_tunnel_loss(o.encap, p.lay.ip)
}

#[inline(always)]
fn kernel_loss(p: &Held, line: KernelLine) -> Option<LossReason> {
    match p.lay.outer {
        Some(o) if o.ip == IpVersion::V6 => kernel_loss_slow(p, o, line),
        _ => None,
    }
}

/// The MAC header length the kernel pulls before GRO (`eth_type_trans`).
fn mac_len(link: LinkKind, l2: &L2Info) -> usize {
    match link {
        LinkKind::Ethernet => crate::wire::ethernet::HEADER_LEN,
        LinkKind::LinuxSll | LinkKind::LinuxSll2 => l2.l3_offset - 4 * l2.vlan_tags as usize,
        _ => 0,
    }
}
