//! VXLAN (RFC 7348): `vxlan_gro_receive` / `vxlan_gro_prepare_receive`
//! and `vxlan_gro_complete` (`drivers/net/vxlan/vxlan_core.c`, 4.x to 7.x;
//! the header is 8 bytes and an Ethernet header always follows). Its UDP
//! layer is `udp.rs`'s; the ports are `GroConfig::vxlan_ports`
//! (`crate::wire::vxlan::DEFAULT_PORTS`).

use super::{inner_type, Encap, OuterLayout, Refusal};
use crate::wire::IpVersion;

/// `vxlan_gro_prepare_receive` / `eth_gro_receive` pull the VXLAN header
/// and the inner Ethernet header; the flags are not checked here (a
/// VXLAN socket accepts what its own receive path checks later).
#[inline]
pub(super) fn parse(
    f: &[u8],
    l3: usize,
    ip: IpVersion,
    at: usize,
) -> Result<(OuterLayout, u16), Refusal> {
    let o = OuterLayout {
        l3_off: l3,
        ip,
        encap_off: at,
        encap: Encap::Vxlan,
    };
    inner_type(f, &o, true, 0).map(|t| (o, t))
}

/// `vxlan_gro_receive`: the flags and VNI (`vh->vx_flags`, `vh->vx_vni`)
/// and the inner Ethernet header (`compare_ether_header` in
/// `eth_gro_receive`) are equal.
#[inline]
pub(super) fn same_flow(held: &[u8], f: &[u8], o: &OuterLayout) -> bool {
    let k = o.key_range();
    held[k.clone()] == f[k]
}
