//! Each encapsulation's rules in one place: one file per tunnel kind, read
//! by GRO and GSO alike.
//!
//! A tunnel kind is an [`Encap`] variant (its header lengths and offsets,
//! in `layout`) plus one file here holding every rule the engine applies
//! to it, each citing the kernel function it follows:
//!
//! - `parse`: the checks its `*_gro_receive` makes on the header after
//!   the outer network header, giving the [`OuterLayout`] and the inner
//!   EtherType, or a [`Refusal`] (GSO reads the header the same way);
//! - `same_flow`: the header bytes GRO compares for "same flow";
//! - `complete`: what `*_gro_complete` writes into the outer headers of a
//!   merged packet, and the `SKB_GSO_*` type it sets ([`OuterGso`]);
//! - `fix_segment`: what GSO rewrites in each segment's tunnel header.
//!
//! | kind | file | kernel |
//! |---|---|---|
//! | VXLAN | `vxlan.rs` (+ `udp.rs`) | `drivers/net/vxlan/vxlan_core.c`, `net/ipv4/udp_offload.c` |
//! | Geneve | `geneve.rs` (+ `udp.rs`) | `drivers/net/geneve.c`, `net/ipv4/udp_offload.c` |
//! | GRE, gretap | `gre.rs` | `net/ipv4/gre_offload.c` |
//! | IPIP, SIT, IPv4/IPv6 in IPv6 | `ipip.rs` | `net/ipv4/af_inet.c`, `net/ipv6/ip6_offload.c` |
//!
//! The functions below dispatch on the kind with a `match` the compiler
//! inlines: no indirect call on the receive path, and plain TCP and UDP
//! never reach this module (the engine's fast path handles them before).
//! Nothing here depends on `gro` or `gso`: both depend on this module, and
//! each translates a [`Refusal`] and an [`OuterGso`] into its own
//! vocabulary (`FlushReason`, `GsoError`, `SKB_GSO_*` bits).

mod geneve;
mod gre;
mod ipip;
mod udp;
mod vxlan;

use crate::layout::{Encap, OuterLayout};
use crate::wire::{be16, ethernet, ip_proto, IpVersion};

/// Why a tunnel header stops GRO (the packet passes) or GSO (an error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The tunnel header, its options or the inner Ethernet header run
    /// past the frame.
    Truncated,
    /// Geneve version other than 0, or the OAM bit (`geneve_gro_receive`).
    GeneveVersionOrOam,
    /// GRE flags other than key and checksum: a sequence number, routing,
    /// a version other than 0 (`gre_gro_receive`).
    GreFlags,
    /// A GRE checksum that does not verify (GRO only).
    GreChecksum,
    /// A payload type that is neither Ethernet nor IPv4/IPv6: no GRO
    /// handler for it, no GSO either (the message names the tunnel).
    Payload(&'static str),
}

impl Refusal {
    /// What GSO says when it cannot segment because of this.
    pub(crate) fn gso_message(self) -> &'static str {
        match self {
            Refusal::Truncated => "tunnel header cut short",
            Refusal::GeneveVersionOrOam => "Geneve OAM or version other than 0",
            Refusal::GreFlags => "GRE with a sequence number or routing (no GSO for it)",
            Refusal::GreChecksum => "GRE checksum does not verify",
            Refusal::Payload(what) => what,
        }
    }
}

/// The `SKB_GSO_*` type a tunnel's `*_gro_complete` sets for its outer
/// headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OuterGso {
    /// `SKB_GSO_UDP_TUNNEL`: outer UDP checksum zero.
    UdpTunnel,
    /// `SKB_GSO_UDP_TUNNEL_CSUM`: outer UDP checksum set.
    UdpTunnelCsum,
    /// `SKB_GSO_GRE`.
    Gre,
    /// `SKB_GSO_GRE_CSUM`: GRE checksum present.
    GreCsum,
    /// `SKB_GSO_IPXIP4`: an IP packet inside IPv4.
    IpxIp4,
    /// `SKB_GSO_IPXIP6`: an IP packet inside IPv6.
    IpxIp6,
}

/// A UDP tunnel recognised by its destination port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UdpTunnel {
    /// VXLAN (`vxlan_gro_receive`).
    Vxlan,
    /// Geneve (`geneve_gro_receive`).
    Geneve,
}

/// The UDP tunnel whose socket listens on `dport`, if any: the kernel
/// looks inside a UDP packet only when a tunnel socket is bound to its
/// destination port (`udp_gro_receive` → `udp_sk(sk)->gro_receive`).
#[inline]
pub(crate) fn udp_tunnel_on(
    dport: u16,
    vxlan_ports: &[u16],
    geneve_ports: &[u16],
) -> Option<UdpTunnel> {
    if vxlan_ports.contains(&dport) {
        Some(UdpTunnel::Vxlan)
    } else if geneve_ports.contains(&dport) {
        Some(UdpTunnel::Geneve)
    } else {
        None
    }
}

/// Reads the UDP tunnel `kind` whose outer UDP header is at `at`, after
/// the outer network header at `l3` of version `ip`.
#[inline]
pub(crate) fn parse_udp(
    kind: UdpTunnel,
    f: &[u8],
    l3: usize,
    ip: IpVersion,
    at: usize,
) -> Result<(OuterLayout, u16), Refusal> {
    match kind {
        UdpTunnel::Vxlan => vxlan::parse(f, l3, ip, at),
        UdpTunnel::Geneve => geneve::parse(f, l3, ip, at),
    }
}

/// Reads the tunnel whose IP protocol number is `proto` (IPIP, IPv6, GRE)
/// at `at`, after the outer network header at `l3` of version `ip`;
/// `None` when `proto` is no tunnel. `verify_gre_checksum`: check a GRE
/// checksum (GRO with checksum validation on; GSO never does).
#[inline]
pub(crate) fn parse_ip(
    proto: u8,
    f: &[u8],
    l3: usize,
    ip: IpVersion,
    at: usize,
    verify_gre_checksum: bool,
) -> Option<Result<(OuterLayout, u16), Refusal>> {
    match proto {
        ip_proto::IPIP => Some(Ok(ipip::parse(l3, ip, at, IpVersion::V4))),
        ip_proto::IPV6 => Some(Ok(ipip::parse(l3, ip, at, IpVersion::V6))),
        ip_proto::GRE => Some(gre::parse(f, l3, ip, at, verify_gre_checksum)),
        _ => None,
    }
}

/// The tunnel part of GRO's "same flow" test for a held packet's bytes
/// `held` and a new frame `f` with the same layout `o` (the outer network
/// header is compared by the caller).
#[inline]
pub(crate) fn same_flow(held: &[u8], f: &[u8], o: &OuterLayout) -> bool {
    match o.encap {
        Encap::Vxlan => udp::same_flow(held, f, o) && vxlan::same_flow(held, f, o),
        Encap::Geneve { .. } => udp::same_flow(held, f, o) && geneve::same_flow(held, f, o),
        Encap::Gre { .. } => gre::same_flow(held, f, o),
        Encap::IpInIp => true,
    }
}

/// The tunnel's `*_gro_complete` for a merged packet whose header bytes
/// are `data` and whose length is `total_len` (payload included): rewrites
/// the outer headers beyond the outer IP header and says which `SKB_GSO_*`
/// type the tunnel sets. `inner_l3`: the inner network header, still as
/// the first segment had it. `udp_csum_from_inner`: the outer UDP
/// checksum's pseudo-header is read at the inner header (lines before 6.9,
/// `KernelLine::udp_tunnel_csum_from_inner_header`).
#[inline]
pub(crate) fn complete(
    data: &mut [u8],
    total_len: usize,
    o: &OuterLayout,
    inner_l3: usize,
    udp_csum_from_inner: bool,
) -> OuterGso {
    match o.encap {
        Encap::Vxlan | Encap::Geneve { .. } => {
            udp::complete(data, total_len, o, inner_l3, udp_csum_from_inner)
        }
        Encap::Gre { .. } => gre::complete(data, o),
        Encap::IpInIp => ipip::complete(o),
    }
}

/// GSO: rewrites the tunnel header of one segment `seg` (the outer IP
/// header is the caller's).
#[inline]
pub(crate) fn fix_segment(seg: &mut [u8], o: &OuterLayout) {
    match o.encap {
        Encap::Vxlan | Encap::Geneve { .. } => udp::fix_segment(seg, o),
        Encap::Gre { .. } => gre::fix_segment(seg, o),
        Encap::IpInIp => {}
    }
}

/// GSO's sanity check of a layout handed in by a caller: the tunnel's
/// fixed header fits between `o.encap_off` and the inner network header.
pub(crate) fn fixed_header_fits(o: &OuterLayout) -> bool {
    let room = o.inner_l3_off().saturating_sub(o.encap_off);
    match o.encap {
        Encap::Vxlan | Encap::Geneve { .. } => room >= crate::wire::udp::HEADER_LEN,
        // The base header and the checksum word `fix_segment` may write.
        Encap::Gre { .. } => room >= crate::wire::gre::BASE_LEN + 2,
        Encap::IpInIp => true,
    }
}

/// The inner network header's EtherType: the inner Ethernet header's when
/// the tunnel carries Ethernet (`eth`), else `protocol` (the tunnel
/// header's own payload type). The inner Ethernet header must fit
/// (`eth_gro_receive` pulls it).
#[inline]
fn inner_type(f: &[u8], o: &OuterLayout, eth: bool, protocol: u16) -> Result<u16, Refusal> {
    if f.len() < o.inner_l3_off() {
        return Err(Refusal::Truncated);
    }
    Ok(if eth {
        be16(f, o.inner_eth_off() + ethernet::field::ETHERTYPE.start)
    } else {
        protocol
    })
}

/// The payload type after a Geneve or GRE header: `true` for Ethernet
/// (`ETH_P_TEB`), `false` for IPv4 or IPv6, else the refusal.
#[inline]
fn carries_ethernet(protocol: u16, what: &'static str) -> Result<bool, Refusal> {
    match protocol {
        ethernet::ethertype::TEB => Ok(true),
        ethernet::ethertype::IPV4 | ethernet::ethertype::IPV6 => Ok(false),
        _ => Err(Refusal::Payload(what)),
    }
}
