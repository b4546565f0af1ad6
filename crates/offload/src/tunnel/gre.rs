//! GRE and gretap (RFC 2784, RFC 2890): `gre_gro_receive`,
//! `gre_gro_complete` and `gre_gso_segment` (`net/ipv4/gre_offload.c`,
//! unchanged in substance from 4.x to 7.x).

use super::{carries_ethernet, inner_type, Encap, OuterGso, OuterLayout, Refusal};
use crate::checksum;
use crate::wire::gre::{self, Gre};
use crate::wire::{be16, be32, put16, IpVersion};

/// `gre_gro_receive`: version 0 with no flag but key and checksum (a
/// sequence number makes the packet pass: GSO could not rebuild it); a
/// known payload type (IPv4, IPv6, Ethernet for gretap); a GRE checksum,
/// if present, must verify over the GRE header and payload (checked only
/// when `verify_checksum`: GRO with validation on, never GSO).
#[inline]
pub(super) fn parse(
    f: &[u8],
    l3: usize,
    ip: IpVersion,
    at: usize,
    verify_checksum: bool,
) -> Result<(OuterLayout, u16), Refusal> {
    if f.len() < at + gre::BASE_LEN {
        return Err(Refusal::Truncated);
    }
    let g = Gre::new_unchecked(&f[at..]);
    if g.flags() & !(gre::flags::KEY | gre::flags::CSUM) != 0 {
        return Err(Refusal::GreFlags);
    }
    let eth = carries_ethernet(g.protocol(), "GRE payload is not IP or Ethernet")?;
    let len = g.header_len();
    if f.len() < at + len {
        return Err(Refusal::Truncated);
    }
    if verify_checksum && g.has_checksum() && checksum::checksum(&f[at..]) != 0 {
        return Err(Refusal::GreChecksum);
    }
    let o = OuterLayout {
        l3_off: l3,
        ip,
        encap_off: at,
        encap: Encap::Gre {
            len: len as u16,
            eth,
        },
    };
    inner_type(f, &o, eth, g.protocol()).map(|t| (o, t))
}

/// `gre_gro_receive` (every line since 3.x): flags and protocol, and when
/// the key flag is set, "the key" as `*(__be32 *)(greh + 1)`: the word
/// right after the base header. With the checksum flag also set that word
/// is the checksum and reserved field, not the key: the key is never
/// compared and packets whose GRE checksums differ (their inner lengths
/// differ: a valid inner IP and TCP header fold to the pseudo-header) are
/// different flows. For gretap, the inner Ethernet header
/// (`eth_gro_receive`).
#[inline]
pub(super) fn same_flow(held: &[u8], f: &[u8], o: &OuterLayout) -> bool {
    let Encap::Gre { eth, .. } = o.encap else {
        return false;
    };
    let at = o.encap_off;
    let word = gre::BASE_LEN;
    if be32(held, at) != be32(f, at)
        || (Gre::new_unchecked(&f[at..]).has_key() && be32(held, at + word) != be32(f, at + word))
    {
        return false;
    }
    if eth {
        let e = o.inner_eth_off()..o.inner_l3_off();
        if held[e.clone()] != f[e] {
            return false;
        }
    }
    true
}

/// `gre_gro_complete`: the GRE header is left as the first segment had it
/// (its checksum field included); `SKB_GSO_GRE_CSUM` when it has a
/// checksum.
#[inline]
pub(super) fn complete(data: &[u8], o: &OuterLayout) -> OuterGso {
    if be16(data, o.encap_off) & gre::flags::CSUM != 0 {
        OuterGso::GreCsum
    } else {
        OuterGso::Gre
    }
}

/// `gre_gso_segment`: each segment's GRE checksum, over the GRE header
/// and everything after it.
pub(super) fn fix_segment(seg: &mut [u8], o: &OuterLayout) {
    let g = o.encap_off;
    if be16(seg, g) & gre::flags::CSUM != 0 {
        put16(seg, g + 4, 0);
        let c = checksum::checksum(&seg[g..]);
        put16(seg, g + 4, c);
    }
}
