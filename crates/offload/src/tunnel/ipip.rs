//! IP in IP: IPIP (IPv4 in IPv4), SIT (IPv6 in IPv4), IPv6 in IPv6 and
//! IPv4 in IPv6: `ipip_gro_receive` / `ipip_gro_complete`
//! (`net/ipv4/af_inet.c`) and `sit_ip6ip6_gro_receive`,
//! `ip4ip6_gro_receive`, `sit_gro_complete`, `ip6ip6_gro_complete`,
//! `ip4ip6_gro_complete` (`net/ipv6/ip6_offload.c`), 4.x to 7.x. No
//! header between the two IP headers: nothing to compare or rewrite
//! beyond the network layers'.

use super::{Encap, OuterGso, OuterLayout};
use crate::wire::IpVersion;

/// One level of encapsulation (`encap_mark`, checked by the caller), then
/// the inner IP header at once, of version `inner`.
#[inline]
pub(super) fn parse(l3: usize, ip: IpVersion, at: usize, inner: IpVersion) -> (OuterLayout, u16) {
    let o = OuterLayout {
        l3_off: l3,
        ip,
        encap_off: at,
        encap: Encap::IpInIp,
    };
    (o, inner.ethertype())
}

/// `SKB_GSO_IPXIP4` under an outer IPv4 header, `SKB_GSO_IPXIP6` under
/// IPv6.
#[inline]
pub(super) fn complete(o: &OuterLayout) -> OuterGso {
    match o.ip {
        IpVersion::V4 => OuterGso::IpxIp4,
        IpVersion::V6 => OuterGso::IpxIp6,
    }
}
