//! Geneve (RFC 8926): `geneve_gro_receive` and `geneve_gro_complete`
//! (`drivers/net/geneve.c`, 4.x to 7.x). Its UDP layer is `udp.rs`'s; the
//! ports are `GroConfig::geneve_ports` (`crate::wire::geneve::PORT`).

use super::{carries_ethernet, inner_type, Encap, OuterLayout, Refusal};
use crate::wire::geneve::{self, Geneve};
use crate::wire::{udp, IpVersion};

/// `geneve_gro_receive`: the whole header (options included) present,
/// version 0 and no OAM bit, a payload type with a GRO handler (Ethernet,
/// IPv4, IPv6).
#[inline]
pub(super) fn parse(
    f: &[u8],
    l3: usize,
    ip: IpVersion,
    at: usize,
) -> Result<(OuterLayout, u16), Refusal> {
    let gh = at + udp::HEADER_LEN;
    if f.len() < gh + geneve::BASE_LEN {
        return Err(Refusal::Truncated);
    }
    let g = Geneve::new_unchecked(&f[gh..]);
    if f.len() < gh + g.header_len() {
        return Err(Refusal::Truncated);
    }
    if g.version() != 0 || g.oam() {
        return Err(Refusal::GeneveVersionOrOam);
    }
    let eth = carries_ethernet(g.protocol(), "Geneve payload is not IP or Ethernet")?;
    let o = OuterLayout {
        l3_off: l3,
        ip,
        encap_off: at,
        encap: Encap::Geneve {
            len: g.header_len() as u16,
            eth,
        },
    };
    inner_type(f, &o, eth, g.protocol()).map(|t| (o, t))
}

/// `geneve_gro_receive`: the whole header, options included, is equal
/// (`memcmp(gh, gh2, gh_len)`), and so is the inner Ethernet header when
/// there is one.
#[inline]
pub(super) fn same_flow(held: &[u8], f: &[u8], o: &OuterLayout) -> bool {
    let k = o.key_range();
    held[k.clone()] == f[k]
}
