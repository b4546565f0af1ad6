//! The link layers `offload analyze` reads beyond the engine's, and why a
//! frame carries no IP packet.
//!
//! The engine (`offload::LinkKind`) reads the link layers a Linux GRO
//! device sees: Ethernet, raw IP, cooked captures, BSD loopback. Captures
//! come from other links too, and where libpcap and tshark read a capture,
//! analyze reads it. Each header below is read as the LINKTYPE registry
//! (<https://www.tcpdump.org/linktypes.html>) and Wireshark's dissector of
//! the same name define it:
//!
//! ```text
//! LINKTYPE_PPP 9            [ff 03] protocol (1 or 2 bytes, RFC 1661 PFC)
//! LINKTYPE_PPP_HDLC 50      ff 03 protocol, or Cisco HDLC (0f/8f first)
//! LINKTYPE_PPP_ETHER 51     PPPoE session header (RFC 2516), PPP protocol
//! LINKTYPE_PPP_PPPD 166     direction byte, 03, PPP protocol
//! LINKTYPE_C_HDLC 104       address, control, EtherType (Cisco HDLC)
//! LINKTYPE_IEEE802_11 105   802.11 MAC header, LLC/SNAP
//! LINKTYPE_..._RADIOTAP 127 radiotap (length field, data-pad flag), 802.11
//! LINKTYPE_..._PRISM 119    144-byte Prism header (or AVS), 802.11
//! LINKTYPE_..._AVS 163      AVS header (its length field), 802.11
//! LINKTYPE_FDDI 10          frame control, addresses (13 bytes), LLC/SNAP
//! LINKTYPE_ARCNET_BSD 7     RFC 1051 (3 bytes) or RFC 1201 (6 or 10)
//! LINKTYPE_ARCNET_LINUX 129 Linux: an offset field more (5 or 8 bytes)
//! LINKTYPE_IPOIB 242        20 + 20 address bytes, EtherType, reserved
//! LINKTYPE_NFLOG 239        family, version, resource; TLVs, payload TLV 9
//!                           (not read when the capture cut it, as tshark)
//! LINKTYPE_PFLOG 117        header of its own length (61..100, to 4), af
//! LINKTYPE_ENC 109          af (writer's byte order), SPI, flags
//! LINKTYPE_JUNIPER_ETHER 178 "MGC", flags, [extension TLVs], Ethernet
//! LINKTYPE_PPI 192          version, flags, length, DLT (little-endian),
//!                           fields (802.11-common's FCS flag), then a frame
//!                           of that DLT
//! ```
//!
//! Inside an EtherType (Ethernet, cooked captures, Cisco HDLC, IPoIB, 802.11
//! and FDDI's SNAP): MPLS label stacks (the payload after the bottom label
//! read by its first nibble, as Wireshark does), PPPoE sessions, 802.1ah
//! (PBB) customer frames, Cisco FabricPath frames, VN-Tag and 802.1BR
//! E-Tag, and 802.3 length fields followed by LLC (SNAP with an EtherType,
//! or the IP SAP). Aruba's GRE protocol types carry 802.11 frames
//! ([`aruba_wlan`], read by the tunnel walk).
//!
//! Frames of the engine's link types reach the engine unchanged; a frame of
//! another link type reaches the statistics and the what-if as the IP
//! packet it carries ([`View`]; decision 0250 says what the what-if answers
//! for those). Nothing here allocates or panics: a frame without an IP
//! packet gets a [`Skip`] naming the header and field, counted per input
//! in `--json` (`inputs[].link_skipped`).

use offload::link::dissect_l2;
use offload::wire::ethernet::ethertype;
use offload::wire::WireErrorKind;
use offload::LinkKind;

/// Why a frame gives analysis no IP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Skip {
    /// The frame ends inside a header: the header and the field.
    Truncated {
        header: &'static str,
        field: &'static str,
    },
    /// A header field holds a value the header cannot hold.
    Invalid {
        header: &'static str,
        field: &'static str,
    },
    /// The frame carries something other than IP, named.
    NotIp(&'static str),
    /// A link type neither the engine nor this module reads.
    UnsupportedLinkType(u32),
}

impl std::fmt::Display for Skip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Skip::Truncated { header, field } => write!(f, "truncated {header} {field}"),
            Skip::Invalid { header, field } => write!(f, "invalid {header} {field}"),
            Skip::NotIp(what) => write!(f, "not IP: {what}"),
            Skip::UnsupportedLinkType(t) => write!(f, "unsupported link type {t}"),
        }
    }
}

impl From<offload::wire::WireError> for Skip {
    fn from(e: offload::wire::WireError) -> Self {
        match e.kind {
            WireErrorKind::Truncated { .. } => Skip::Truncated {
                header: e.header,
                field: e.field,
            },
            WireErrorKind::Invalid { .. } => Skip::Invalid {
                header: e.header,
                field: e.field,
            },
        }
    }
}

/// A frame as analysis reads it: the engine's link kind, the bytes it
/// reads and the length those bytes had on the wire.
#[derive(Debug, Clone, Copy)]
pub struct View<'a> {
    pub link: LinkKind,
    pub data: &'a [u8],
    pub orig_len: u32,
}

impl View<'_> {
    /// Bytes of `frame` (the frame this view was made from) before
    /// [`View::data`]: the link header the view skipped.
    pub fn link_header_len(&self, frame: &[u8]) -> usize {
        // `data` is always a subslice of the frame (every path slices it).
        (self.data.as_ptr() as usize)
            .checked_sub(frame.as_ptr() as usize)
            .filter(|&lead| lead <= frame.len())
            .unwrap_or(0)
    }
}

/// `LINKTYPE_*` numbers read here (the registry's names).
pub mod linktype {
    pub const ARCNET_BSD: u32 = 7;
    pub const PPP: u32 = 9;
    pub const FDDI: u32 = 10;
    pub const PPP_HDLC: u32 = 50;
    pub const PPP_ETHER: u32 = 51;
    pub const C_HDLC: u32 = 104;
    pub const IEEE802_11: u32 = 105;
    pub const ENC: u32 = 109;
    pub const PFLOG: u32 = 117;
    pub const IEEE802_11_PRISM: u32 = 119;
    pub const IEEE802_11_RADIOTAP: u32 = 127;
    pub const ARCNET_LINUX: u32 = 129;
    pub const IEEE802_11_AVS: u32 = 163;
    pub const PPP_PPPD: u32 = 166;
    pub const NFLOG: u32 = 239;
    pub const JUNIPER_ETHER: u32 = 178;
    pub const PPI: u32 = 192;
    pub const IPOIB: u32 = 242;
}

/// The registry name of a link type read here (for messages).
pub fn linktype_name(t: u32) -> Option<&'static str> {
    use linktype::*;
    Some(match t {
        ARCNET_BSD => "ARCNET_BSD",
        PPP => "PPP",
        FDDI => "FDDI",
        PPP_HDLC => "PPP_HDLC",
        PPP_ETHER => "PPP_ETHER",
        C_HDLC => "C_HDLC",
        IEEE802_11 => "IEEE802_11",
        ENC => "ENC",
        PFLOG => "PFLOG",
        IEEE802_11_PRISM => "IEEE802_11_PRISM",
        IEEE802_11_RADIOTAP => "IEEE802_11_RADIOTAP",
        ARCNET_LINUX => "ARCNET_LINUX",
        IEEE802_11_AVS => "IEEE802_11_AVS",
        PPP_PPPD => "PPP_PPPD",
        NFLOG => "NFLOG",
        JUNIPER_ETHER => "JUNIPER_ETHER",
        PPI => "PPI",
        IPOIB => "IPOIB",
        _ => return None,
    })
}

/// True when analysis reads frames of link type `t` (the engine's or this
/// module's).
pub fn readable(t: u32) -> bool {
    LinkKind::from_linktype(t).is_some() || linktype_name(t).is_some()
}

/// The frame of link type `linktype` as analysis reads it: unchanged for
/// the engine's link types, else the IP packet it carries.
#[inline(always)]
pub fn view(linktype: u32, data: &[u8], orig_len: u32) -> Result<View<'_>, Skip> {
    if let Some(link) = LinkKind::from_linktype(linktype) {
        return Ok(View {
            link,
            data,
            orig_len,
        });
    }
    view_other(linktype, data, orig_len)
}

/// [`view`] for a link type the engine does not read: called, not
/// inlined into the frame loop.
#[inline(never)]
fn view_other(linktype: u32, data: &[u8], orig_len: u32) -> Result<View<'_>, Skip> {
    // The packet ends where the link says it ends, not at the frame's
    // last byte: an NFLOG payload TLV is followed by its padding (to 4
    // bytes) and maybe more TLVs, radiotap's FCS flag puts 4 bytes of
    // FCS after it, and a PPPoE session's length ends it before padding. Wireshark hands IP exactly the packet (packet-nflog.c:
    // a subset of the TLV's value length; packet-ieee80211.c: the
    // reported length less the FCS), and an IP total length beyond it is
    // "IPv4 total length exceeds packet length" (packet-ip.c), the packet
    // read to its end and no further.
    let wire = orig_len.max(data.len() as u32) as usize;
    if linktype == linktype::PPI {
        return ppi_view(data, wire);
    }
    let (off, v6, end, wire_end) = match linktype {
        linktype::NFLOG => {
            let (off, v6, len) = nflog_payload(data)?;
            (off, v6, off + len, off + len)
        }
        linktype::IEEE802_11_RADIOTAP => {
            let ((off, v6), fcs) = radiotap_fcs(data)?;
            let tail = if fcs { 4 } else { 0 };
            let wire_end = wire.saturating_sub(tail).max(off);
            (off, v6, data.len().min(wire_end), wire_end)
        }
        linktype::PPP_ETHER => {
            let (off, v6) = ip_offset(linktype, data)?;
            let end = inner_end(data, 0, 0x8864).map_or(wire, |e| e.min(wire).max(off));
            (off, v6, data.len().min(end), end)
        }
        _ => {
            let (off, v6) = ip_offset(linktype, data)?;
            (off, v6, data.len(), wire)
        }
    };
    Ok(View {
        link: if v6 { LinkKind::Ipv6 } else { LinkKind::Ipv4 },
        data: data.get(off..end).ok_or(trunc("link", "header"))?,
        orig_len: (wire_end - off) as u32,
    })
}

/// A PPI frame (the Per-Packet Information header, CACE Technologies'
/// specification, Wireshark's packet-ppi.c): version 0, flags, its length
/// and the DLT of the frame after it (both little-endian), then fields;
/// the 802.11-common field (type 2) has flags whose bit 0 says the frame
/// ends in a 4-byte FCS, left out of the packet as radiotap's is. The
/// frame after the header is read as its own link type (PPI in PPI is
/// refused). `wire` is the frame's length on the wire.
fn ppi_view(data: &[u8], wire: usize) -> Result<View<'_>, Skip> {
    const H: &str = "PPI";
    if byte(data, 0, H, "version")? != 0 {
        return Err(invalid(H, "version"));
    }
    let len = le16(data, 2, H, "length")? as usize;
    let dlt = match data.get(4..8) {
        Some(s) => u32::from_le_bytes([s[0], s[1], s[2], s[3]]),
        None => return Err(trunc(H, "DLT")),
    };
    if len < 8 {
        return Err(invalid(H, "length"));
    }
    if data.len() < len {
        return Err(trunc(H, "header"));
    }
    if dlt == linktype::PPI {
        return Err(invalid(H, "DLT"));
    }
    let mut fcs = false;
    let mut at = 8;
    while at + 4 <= len {
        let kind = u16::from_le_bytes([data[at], data[at + 1]]);
        let flen = u16::from_le_bytes([data[at + 2], data[at + 3]]) as usize;
        if kind == 2 && flen >= 10 && at + 4 + 10 <= len {
            fcs = data[at + 4 + 8] & 0x01 != 0;
        }
        at += 4 + flen;
    }
    let wire_end = wire.saturating_sub(if fcs { 4 } else { 0 }).max(len);
    let inner = &data[len..data.len().min(wire_end)];
    view(dlt, inner, (wire_end - len) as u32)
}

/// Where the IP packet starts, and whether it is IPv6 (the link's own
/// protocol field says which, as Wireshark dispatches on it).
type Net = (usize, bool);

fn trunc(header: &'static str, field: &'static str) -> Skip {
    Skip::Truncated { header, field }
}

fn invalid(header: &'static str, field: &'static str) -> Skip {
    Skip::Invalid { header, field }
}

fn byte(b: &[u8], at: usize, header: &'static str, field: &'static str) -> Result<u8, Skip> {
    b.get(at).copied().ok_or(trunc(header, field))
}

fn be16(b: &[u8], at: usize, header: &'static str, field: &'static str) -> Result<u16, Skip> {
    match b.get(at..at + 2) {
        Some(s) => Ok(u16::from_be_bytes([s[0], s[1]])),
        None => Err(trunc(header, field)),
    }
}

fn le16(b: &[u8], at: usize, header: &'static str, field: &'static str) -> Result<u16, Skip> {
    be16(b, at, header, field).map(u16::swap_bytes)
}

fn be32(b: &[u8], at: usize, header: &'static str, field: &'static str) -> Result<u32, Skip> {
    match b.get(at..at + 4) {
        Some(s) => Ok(u32::from_be_bytes([s[0], s[1], s[2], s[3]])),
        None => Err(trunc(header, field)),
    }
}

fn ip_offset(linktype: u32, b: &[u8]) -> Result<Net, Skip> {
    use linktype::*;
    match linktype {
        PPP => {
            // RFC 1662 framing when the frame starts ff 03, else none
            // (the registry's definition of LINKTYPE_PPP). Wireshark reads
            // a Cisco HDLC address here as Cisco HDLC.
            match b.first() {
                Some(0xff) if b.get(1) == Some(&0x03) => ppp(b, 2),
                Some(0x0f | 0x8f) => chdlc(b),
                _ => ppp(b, 0),
            }
        }
        PPP_HDLC => match byte(b, 0, "PPP", "address")? {
            0x0f | 0x8f => chdlc(b),
            _ => ppp(b, 2),
        },
        // The direction byte replaces the address (0x00 in, 0x01 out).
        PPP_PPPD => ppp(b, 2),
        PPP_ETHER => pppoe_session(b, 0),
        C_HDLC => chdlc(b),
        IEEE802_11 => ieee80211(b, 0),
        IEEE802_11_RADIOTAP => radiotap(b),
        IEEE802_11_PRISM => {
            // Wireshark hands a Prism frame that starts with the AVS magic
            // to the AVS dissector; a Prism header is 144 bytes (message
            // code, length, device name, ten 12-byte items).
            if avs_magic(b) {
                avs(b)
            } else if b.len() < PRISM_LEN {
                Err(trunc("Prism", "header"))
            } else {
                ieee80211(b, PRISM_LEN)
            }
        }
        IEEE802_11_AVS => avs(b),
        FDDI => {
            if b.len() < FDDI_LEN {
                return Err(trunc("FDDI", "header"));
            }
            llc(b, FDDI_LEN)
        }
        ARCNET_BSD => arcnet(b, false),
        ARCNET_LINUX => arcnet(b, true),
        IPOIB => {
            let et = be16(b, 40, "IPoIB", "type")?;
            if b.len() < IPOIB_LEN {
                return Err(trunc("IPoIB", "reserved"));
            }
            by_ethertype(b, IPOIB_LEN, et)
        }
        NFLOG => nflog(b),
        JUNIPER_ETHER => juniper_ether(b),
        PFLOG => {
            let len = byte(b, 0, "pflog", "length")?;
            if !(61..=100).contains(&len) {
                return Err(invalid("pflog", "length"));
            }
            let af = byte(b, 1, "pflog", "af")? as u32;
            let hl = (len as usize).next_multiple_of(4);
            if b.len() < hl {
                return Err(trunc("pflog", "header"));
            }
            bsd_family(af, hl, "pflog")
        }
        ENC => {
            // The family in the byte order of the host that wrote it: bits
            // above the low 16 mean the other order (tcpdump's print-enc.c).
            let mut af = be32(b, 0, "enc", "af")?;
            if af & 0xffff_0000 != 0 {
                af = af.swap_bytes();
            }
            if b.len() < ENC_LEN {
                return Err(trunc("enc", "flags"));
            }
            bsd_family(af, ENC_LEN, "enc")
        }
        t => Err(Skip::UnsupportedLinkType(t)),
    }
}

const PRISM_LEN: usize = 144;
const FDDI_LEN: usize = 13;
const IPOIB_LEN: usize = 44;
const ENC_LEN: usize = 12;

/// BSD address families: AF_INET is 2 everywhere; AF_INET6 is 24 (NetBSD,
/// OpenBSD), 28 (FreeBSD) or 30 (Darwin).
fn bsd_family(af: u32, off: usize, header: &'static str) -> Result<Net, Skip> {
    match af {
        2 => Ok((off, false)),
        24 | 28 | 30 => Ok((off, true)),
        _ => Err(Skip::NotIp(match header {
            "pflog" => "pflog address family",
            _ => "enc address family",
        })),
    }
}

/// A PPP protocol field at `at` (RFC 1661: one byte when its low bit is
/// set, protocol-field compression) and what it carries.
fn ppp(b: &[u8], at: usize) -> Result<Net, Skip> {
    let first = byte(b, at, "PPP", "protocol")?;
    let (proto, off) = if first & 1 == 1 {
        (first as u16, at + 1)
    } else {
        (be16(b, at, "PPP", "protocol")?, at + 2)
    };
    match proto {
        0x0021 => Ok((off, false)),
        0x0057 => Ok((off, true)),
        0x0281 | 0x0283 => mpls(b, off),
        // Network and link control protocols (IPCP, IPV6CP, LCP, PAP,
        // CHAP, ...): RFC 1661's 0x8000-0xbfff and 0xc000-0xffff.
        p if p >= 0x8000 => Err(Skip::NotIp("PPP control protocol")),
        _ => Err(Skip::NotIp("PPP protocol not IP")),
    }
}

/// Cisco HDLC: address (0x0f unicast, 0x8f broadcast), control, and an
/// EtherType.
fn chdlc(b: &[u8]) -> Result<Net, Skip> {
    let et = be16(b, 2, "Cisco HDLC", "protocol")?;
    match et {
        0x8035 => Err(Skip::NotIp("Cisco SLARP")),
        0x2000 => Err(Skip::NotIp("Cisco CDP")),
        _ => by_ethertype(b, 4, et),
    }
}

/// The protocol an EtherType names at `off`: IP, or read on.
fn by_ethertype(b: &[u8], off: usize, et: u16) -> Result<Net, Skip> {
    match et {
        ethertype::IPV4 => Ok((off, false)),
        ethertype::IPV6 => Ok((off, true)),
        et => inner(b, off, et),
    }
}

/// What follows a non-IP EtherType at `off`: MPLS, a PPPoE session, or
/// LLC after an 802.3 length; else the reason there is no IP. The caller
/// has an EtherType other than IPv4 and IPv6.
pub fn inner(b: &[u8], off: usize, et: u16) -> Result<Net, Skip> {
    match et {
        0x8847 | 0x8848 => mpls(b, off),
        0x8864 => pppoe_session(b, off),
        PBB => pbb(b, off),
        FABRICPATH => ethernet_in(b, off + 2),
        VNTAG => tagged(b, off + 4),
        ETAG => tagged(b, off + 6),
        0x8863 => Err(Skip::NotIp("PPPoE discovery")),
        ethertype::ARP => Err(Skip::NotIp("ARP")),
        0x8035 => Err(Skip::NotIp("RARP")),
        0x88cc => Err(Skip::NotIp("LLDP")),
        0x888e => Err(Skip::NotIp("EAPOL")),
        0x88e5 => Err(Skip::NotIp("MACsec")),
        // An 802.3 length field (or a cooked capture's ETH_P_802_2, 4):
        // an LLC header follows.
        0..=1500 => llc(b, off),
        _ => Err(Skip::NotIp("EtherType not IP")),
    }
}

/// Where the packet inside a non-IP EtherType at `off` ends, when that
/// header says so: a PPPoE session's length field (RFC 2516). Wireshark
/// hands PPP exactly that many bytes (packet-pppoe.c), so an IP length
/// beyond it is cut there, not at the Ethernet padding after it.
pub fn inner_end(b: &[u8], off: usize, et: u16) -> Option<usize> {
    match et {
        0x8864 => Some(off + 6 + be16(b, off + 4, "PPPoE", "length").ok()? as usize),
        _ => None,
    }
}

/// 802.1ah Provider Backbone Bridging's EtherType (the I-TAG).
const PBB: u16 = 0x88e7;

/// Cisco FabricPath's EtherType (Wireshark's ETHERTYPE_DCE): a 2-byte
/// FTag/TTL, then the whole customer Ethernet frame (packet-cisco-fp-mim.c
/// finds it by this EtherType, before the Ethernet dissector's table).
const FABRICPATH: u16 = 0x8903;
/// Cisco VN-Tag (packet-vntag.c): 4 bytes of tag, then an EtherType.
const VNTAG: u16 = 0x8926;
/// 802.1BR E-Tag (packet-etag.c): 6 bytes of tag, then an EtherType.
const ETAG: u16 = 0x893f;

/// An 802.1ah I-TAG at `off` (flags and the 24-bit I-SID, 4 bytes), then
/// the customer frame, as Wireshark reads it (packet-ieee8021ah.c hands
/// the rest to the EtherType table, whose VLAN dissector takes the tags).
fn pbb(b: &[u8], off: usize) -> Result<Net, Skip> {
    if b.len() < off + 4 + 14 {
        return Err(trunc("802.1ah", "type"));
    }
    ethernet_in(b, off + 4)
}

/// An Ethernet frame at `off` inside another header (802.1ah, FabricPath,
/// Juniper): destination and source addresses (12 bytes), then an
/// EtherType after any 802.1Q/802.1ad tags.
fn ethernet_in(b: &[u8], off: usize) -> Result<Net, Skip> {
    if b.len() < off + 14 {
        return Err(trunc("Ethernet", "type"));
    }
    tagged(b, off + 12)
}

/// An EtherType at `at` after any 802.1Q/802.1ad tags (a customer frame's,
/// or the one after a VN-Tag or E-Tag), and what it carries.
fn tagged(b: &[u8], mut at: usize) -> Result<Net, Skip> {
    let mut et = be16(b, at, "802.1Q", "type")?;
    // A bounded number of tags: a frame cannot loop here.
    for _ in 0..8 {
        if !matches!(et, 0x8100 | 0x88a8 | 0x9100) {
            break;
        }
        at += 4;
        et = be16(b, at, "802.1Q", "type")?;
    }
    match et {
        // Tags inside tags (a VN-Tag between two VLAN tags, Zeek's
        // vntag_vlan_sandwich_clean.pcap) are read once each, not again.
        VNTAG | ETAG | FABRICPATH | PBB => Err(Skip::NotIp("tag inside a tag")),
        et => by_ethertype(b, at + 2, et),
    }
}

/// Juniper's capture header ("MGC", flags; extension TLVs of a total
/// length when flag 0x80 is set), then an Ethernet frame, as
/// packet-juniper.c reads LINKTYPE_JUNIPER_ETHER. A header that says no
/// L2 header follows (flag 0x02) carries a payload type this module does
/// not read; it is named.
fn juniper_ether(b: &[u8]) -> Result<Net, Skip> {
    const H: &str = "Juniper";
    match b.get(..4) {
        Some([b'M', b'G', b'C', _]) => {}
        Some(_) => return Err(invalid(H, "magic")),
        None => return Err(trunc(H, "magic")),
    }
    let flags = b[3];
    let hdr = if flags & 0x80 != 0 {
        6 + be16(b, 4, H, "extension length")? as usize
    } else {
        4
    };
    if flags & 0x02 != 0 {
        return Err(Skip::NotIp("Juniper without L2 header"));
    }
    if b.len() < hdr {
        return Err(trunc(H, "extensions"));
    }
    ethernet_in(b, hdr)
}

/// The 802.11 frame an Aruba access point tunnels to its controller in
/// GRE, protocol types 0x8200 to 0x8370 in steps of 0x10 (Wireshark's
/// packet-gre.h GRE_ARUBA_*, dissected as 802.11 without FCS): the IP
/// packet's offset and version, when it is a data frame with one. `gre`
/// is the GRE protocol type.
pub fn aruba_wlan(b: &[u8], off: usize, gre: u16) -> Option<Net> {
    if !(0x8200..=0x8370).contains(&gre) || gre & 0xf != 0 {
        return None;
    }
    ieee80211(b, off).ok()
}

/// MPLS label stack entries from `off` to the one with the bottom-of-stack
/// bit; the payload is IP when its first nibble says 4 or 6 (Wireshark's
/// default; a pseudowire's control word starts 0).
fn mpls(b: &[u8], mut off: usize) -> Result<Net, Skip> {
    loop {
        let entry = be32(b, off, "MPLS", "label")?;
        off += 4;
        if entry & 0x100 != 0 {
            break;
        }
    }
    match byte(b, off, "MPLS", "payload")? >> 4 {
        4 => Ok((off, false)),
        6 => Ok((off, true)),
        _ => Err(Skip::NotIp("MPLS payload not IP")),
    }
}

/// A PPPoE session header (RFC 2516: version/type, code, session,
/// length) and its PPP protocol.
fn pppoe_session(b: &[u8], off: usize) -> Result<Net, Skip> {
    if b.len() < off + 6 {
        return Err(trunc("PPPoE", "header"));
    }
    ppp(b, off + 6)
}

/// 802.2 LLC at `off`: SNAP (aa aa 03, an OUI of 00 00 00 or 00 00 f8,
/// an EtherType), or the IP SAP (06 06 03) carrying IPv4.
fn llc(b: &[u8], off: usize) -> Result<Net, Skip> {
    let dsap = byte(b, off, "LLC", "DSAP")?;
    let ssap = byte(b, off + 1, "LLC", "SSAP")?;
    let control = byte(b, off + 2, "LLC", "control")?;
    match (dsap, ssap, control) {
        (0xaa, 0xaa, 0x03) => {
            let oui = b.get(off + 3..off + 6).ok_or(trunc("SNAP", "OUI"))?;
            let et = be16(b, off + 6, "SNAP", "type")?;
            if oui != [0, 0, 0] && oui != [0, 0, 0xf8] {
                return Err(Skip::NotIp("SNAP with an organisation's protocol"));
            }
            // A length where the EtherType belongs would start LLC again:
            // not followed, so no frame recurses here without bound.
            if et <= 1500 {
                return Err(Skip::NotIp("LLC not IP"));
            }
            by_ethertype(b, off + 8, et)
        }
        (0x06, 0x06, 0x03) => Ok((off + 3, false)),
        (0x42, 0x42, _) => Err(Skip::NotIp("LLC spanning tree")),
        _ => Err(Skip::NotIp("LLC not IP")),
    }
}

/// An 802.11 MAC header at `off` (IEEE 802.11-2020 9.2.4) and the LLC in
/// its body.
fn ieee80211(b: &[u8], off: usize) -> Result<Net, Skip> {
    ieee80211_padded(b, off, false)
}

fn ieee80211_padded(b: &[u8], off: usize, data_pad: bool) -> Result<Net, Skip> {
    const H: &str = "802.11";
    let fc0 = byte(b, off, H, "frame control")?;
    let fc1 = byte(b, off + 1, H, "frame control")?;
    if fc0 & 0x03 != 0 {
        return Err(invalid(H, "protocol version"));
    }
    match (fc0 >> 2) & 0x03 {
        0 => return Err(Skip::NotIp("802.11 management")),
        1 => return Err(Skip::NotIp("802.11 control")),
        2 => {}
        _ => return Err(Skip::NotIp("802.11 extension")),
    }
    let subtype = fc0 >> 4;
    if subtype & 0x04 != 0 {
        return Err(Skip::NotIp("802.11 null data"));
    }
    let mut len = 24;
    if fc1 & 0x03 == 0x03 {
        len += 6;
    }
    let qos = subtype & 0x08 != 0;
    if qos {
        let qc = byte(b, off + len, H, "QoS control")?;
        if qc & 0x80 != 0 {
            return Err(Skip::NotIp("802.11 A-MSDU"));
        }
        len += 2;
        // The Order bit of a QoS data frame announces an HT Control field.
        if fc1 & 0x80 != 0 {
            len += 4;
        }
    }
    if b.len() < off + len {
        return Err(trunc(H, "header"));
    }
    let seq = u16::from_le_bytes([b[off + 22], b[off + 23]]);
    if fc1 & 0x04 != 0 || seq & 0x000f != 0 {
        return Err(Skip::NotIp("802.11 fragment"));
    }
    if fc1 & 0x40 != 0 {
        return Err(Skip::NotIp("802.11 protected"));
    }
    // Radiotap's data-pad flag: the body starts on a 4-byte boundary.
    if data_pad {
        len = len.next_multiple_of(4);
    }
    llc(b, off + len)
}

/// Radiotap (radiotap.org): version 0, a length (little-endian), present
/// bitmaps; the Flags field (present bit 1, after the 8-byte aligned TSFT
/// when bit 0 is set) may say the 802.11 body is padded.
fn radiotap(b: &[u8]) -> Result<Net, Skip> {
    radiotap_fcs(b).map(|(net, _)| net)
}

/// [`radiotap`], and whether its Flags field says the frame ends in a
/// 4-byte FCS (flag 0x10, radiotap.org's Flags field).
fn radiotap_fcs(b: &[u8]) -> Result<(Net, bool), Skip> {
    const H: &str = "radiotap";
    if byte(b, 0, H, "version")? != 0 {
        return Err(invalid(H, "version"));
    }
    let len = le16(b, 2, H, "length")? as usize;
    if len < 8 {
        return Err(invalid(H, "length"));
    }
    if b.len() < len {
        return Err(trunc(H, "header"));
    }
    let present = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    let mut at = 8;
    let mut word = present;
    while word & 0x8000_0000 != 0 {
        if at + 4 > len {
            return Err(invalid(H, "present"));
        }
        word = u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        at += 4;
    }
    let (mut data_pad, mut fcs) = (false, false);
    if present & 0x02 != 0 {
        if present & 0x01 != 0 {
            at = at.next_multiple_of(8) + 8;
        }
        if at >= len {
            return Err(invalid(H, "flags"));
        }
        data_pad = b[at] & 0x20 != 0;
        fcs = b[at] & 0x10 != 0;
    }
    Ok((ieee80211_padded(b, len, data_pad)?, fcs))
}

/// The AVS capture header's magic (version 1 or 2, big-endian).
fn avs_magic(b: &[u8]) -> bool {
    matches!(b.get(..4), Some([0x80, 0x21, 0x10, 0x01 | 0x02]))
}

/// AVS: magic, header length (big-endian), then the 802.11 frame.
fn avs(b: &[u8]) -> Result<Net, Skip> {
    if !avs_magic(b) {
        return Err(if b.len() < 4 {
            trunc("AVS", "version")
        } else {
            invalid("AVS", "version")
        });
    }
    let len = be32(b, 4, "AVS", "length")? as usize;
    if len < 8 {
        return Err(invalid("AVS", "length"));
    }
    if b.len() < len {
        return Err(trunc("AVS", "header"));
    }
    ieee80211(b, len)
}

/// ARCnet (RFC 1051, RFC 1201) as tcpdump's print-arcnet.c and Wireshark
/// read it: source, destination, [Linux: a 2-byte offset], protocol ID;
/// RFC 1201 protocols add a split flag and sequence number (and in BSD
/// captures an exception packet, flag 0xff, repeats them). Protocol 240
/// (RFC 1051) and 212 (RFC 1201) carry IPv4, 0xc4 IPv6.
fn arcnet(b: &[u8], linux: bool) -> Result<Net, Skip> {
    const H: &str = "ARCnet";
    let base = if linux { 4 } else { 2 };
    let proto = byte(b, base, H, "protocol")?;
    let old = matches!(proto, 240 | 241 | 0x80);
    let mut off = base + 1;
    if !old {
        let flag = byte(b, off, H, "split flag")?;
        off += 3;
        if !linux && flag == 0xff {
            off += 4;
        }
        if b.len() < off {
            return Err(trunc(H, "sequence"));
        }
    }
    match proto {
        240 | 212 => Ok((off, false)),
        0xc4 => Ok((off, true)),
        241 | 213 => Err(Skip::NotIp("ARCnet ARP")),
        _ => Err(Skip::NotIp("ARCnet protocol not IP")),
    }
}

/// NFLOG: family, version, resource ID, then TLVs (length and type in the
/// writer's byte order, each padded to 4 bytes); the packet is the
/// payload TLV (type 9). The family says IPv4 (2) or IPv6 (10), as
/// Wireshark dispatches on it.
fn nflog(b: &[u8]) -> Result<Net, Skip> {
    nflog_payload(b).map(|(off, v6, _)| (off, v6))
}

/// [`nflog`], and the payload TLV's value length (the packet's length).
fn nflog_payload(b: &[u8]) -> Result<(usize, bool, usize), Skip> {
    const H: &str = "NFLOG";
    let family = byte(b, 0, H, "family")?;
    if b.len() < 4 {
        return Err(trunc(H, "resource id"));
    }
    // The first TLV's length tells the byte order: read as written it is
    // 4 or more and fits the frame.
    let first = match b.get(4..6) {
        Some(s) => [s[0], s[1]],
        None => return Err(trunc(H, "TLV length")),
    };
    let fits = |n: u16| n >= 4 && 4 + n as usize <= b.len();
    let le = fits(u16::from_le_bytes(first)) || !fits(u16::from_be_bytes(first));
    let rd = |at: usize| -> u16 {
        let s = [b[at], b[at + 1]];
        if le {
            u16::from_le_bytes(s)
        } else {
            u16::from_be_bytes(s)
        }
    };
    let mut at = 4;
    while at + 4 <= b.len() {
        let len = rd(at) as usize;
        let kind = rd(at + 2) & 0x7fff;
        if len < 4 {
            return Err(invalid(H, "TLV length"));
        }
        if kind == 9 {
            // A payload the capture cut is not read, as Wireshark and
            // tcpdump stop at a TLV that ends past the captured bytes
            // ("NFLOG truncated"). NFLOG's own size limit (`--nflog-size`)
            // writes a shorter TLV, read whole.
            if at + len > b.len() {
                return Err(trunc(H, "payload"));
            }
            return match family {
                2 => Ok((at + 4, false, len - 4)),
                10 => Ok((at + 4, true, len - 4)),
                _ => Err(Skip::NotIp("NFLOG family not IP")),
            };
        }
        at += len.next_multiple_of(4);
    }
    if at < b.len() {
        Err(trunc(H, "TLV"))
    } else {
        Err(Skip::NotIp("NFLOG without payload"))
    }
}

/// Why `parse` found no packet in a frame of the engine's link kind
/// `link` (or a [`View`]): the link layer's reason, or the IP header's.
/// Called for such frames only, off the per-frame path.
pub fn why_not_ip(link: LinkKind, b: &[u8]) -> Skip {
    let l2 = match dissect_l2(link, b) {
        Ok(l2) => l2,
        Err(e) => return e.into(),
    };
    let (off, v6) = match l2.ethertype {
        ethertype::IPV4 => (l2.l3_offset, false),
        ethertype::IPV6 => (l2.l3_offset, true),
        0 if matches!(link, LinkKind::RawIp | LinkKind::Null | LinkKind::Loop) => {
            return if b.len() <= l2.l3_offset {
                trunc("IP", "version")
            } else if link == LinkKind::RawIp {
                invalid("IP", "version")
            } else {
                Skip::NotIp("loopback address family not IP")
            };
        }
        et => match inner(b, l2.l3_offset, et) {
            Ok(n) => n,
            Err(s) => return s,
        },
    };
    let ip = &b[off.min(b.len())..];
    let r = if v6 {
        offload::wire::ipv6::Ipv6::new_checked(ip)
            .and_then(|h| h.walk_ext())
            .map(|_| ())
    } else {
        offload::wire::ipv4::Ipv4::new_checked(ip).map(|_| ())
    };
    match r {
        Err(e) => e.into(),
        Ok(()) if ip.first().map(|v| v >> 4) != Some(if v6 { 6 } else { 4 }) => {
            invalid(if v6 { "IPv6" } else { "IPv4" }, "version")
        }
        // The IP header reads; the transport header does not.
        Ok(()) => trunc("transport", "header"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IP4: [u8; 20] = [
        0x45, 0, 0, 20, 0, 0, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ];

    fn with(prefix: &[u8]) -> Vec<u8> {
        let mut v = prefix.to_vec();
        v.extend_from_slice(&IP4);
        v
    }

    fn at(linktype: u32, f: &[u8]) -> Result<Net, Skip> {
        ip_offset(linktype, f)
    }

    #[test]
    fn ppp_framings() {
        use linktype::*;
        assert_eq!(at(PPP, &with(&[0xff, 0x03, 0x00, 0x21])), Ok((4, false)));
        assert_eq!(at(PPP, &with(&[0x00, 0x57])), Ok((2, true)));
        assert_eq!(at(PPP, &with(&[0x21])), Ok((1, false)));
        assert_eq!(
            at(PPP_HDLC, &with(&[0xff, 0x03, 0x00, 0x21])),
            Ok((4, false))
        );
        assert_eq!(
            at(PPP_HDLC, &with(&[0x0f, 0x00, 0x08, 0x00])),
            Ok((4, false))
        );
        assert_eq!(
            at(PPP_PPPD, &with(&[0x01, 0x03, 0x00, 0x21])),
            Ok((4, false))
        );
        assert_eq!(
            at(PPP, &[0xff, 0x03, 0xc0, 0x21, 1, 1, 0, 4]),
            Err(Skip::NotIp("PPP control protocol"))
        );
        // PPP carrying MPLS: two labels, the second at the bottom.
        let f = with(&[0xff, 0x03, 0x02, 0x81, 0, 1, 0, 64, 0, 2, 1, 64]);
        assert_eq!(at(PPP, &f), Ok((12, false)));
        assert_eq!(
            at(PPP_ETHER, &with(&[0x11, 0, 0, 1, 0, 22, 0, 0x21])),
            Ok((8, false))
        );
    }

    #[test]
    fn ethernet_inner_encapsulations() {
        // 802.3 length, SNAP, IPv4.
        let f = with(&[0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00]);
        assert_eq!(inner(&f, 0, 60), Ok((8, false)));
        assert_eq!(inner(&with(&[0x06, 0x06, 0x03]), 0, 40), Ok((3, false)));
        assert_eq!(
            inner(&[0x42, 0x42, 0x03, 0, 0], 0, 40),
            Err(Skip::NotIp("LLC spanning tree"))
        );
        // An MPLS stack that never ends runs out of frame, not forever.
        assert_eq!(inner(&[0u8; 4096], 0, 0x8847), Err(trunc("MPLS", "label")));
    }

    #[test]
    fn wifi_headers() {
        use linktype::*;
        // QoS data, ToDS, sequence 0, then SNAP IPv4.
        let mut h = vec![0x88, 0x01];
        h.extend_from_slice(&[0; 22]);
        h.extend_from_slice(&[0, 0]);
        h.extend_from_slice(&[0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00]);
        assert_eq!(at(IEEE802_11, &with(&h)), Ok((34, false)));
        // Radiotap with Flags (data pad) and TSFT: 8 + 8 TSFT + 1 flags.
        let mut r = vec![0, 0, 17, 0, 0x03, 0, 0, 0];
        r.extend_from_slice(&[0; 8]);
        r.push(0x20);
        let mut f = r.clone();
        f.extend_from_slice(&h[..26]);
        f.extend_from_slice(&[0, 0]); // pad 26 -> 28
        f.extend_from_slice(&h[26..]);
        assert_eq!(at(IEEE802_11_RADIOTAP, &with(&f)), Ok((17 + 36, false)));
        // Protected and management frames are named.
        let mut p = h.clone();
        p[1] |= 0x40;
        assert_eq!(
            at(IEEE802_11, &with(&p)),
            Err(Skip::NotIp("802.11 protected"))
        );
        assert_eq!(
            at(IEEE802_11, &[0x80, 0, 0, 0]),
            Err(Skip::NotIp("802.11 management"))
        );
        // A radiotap length beyond the frame.
        assert_eq!(
            at(IEEE802_11_RADIOTAP, &[0, 0, 0xff, 0, 0, 0, 0, 0]),
            Err(trunc("radiotap", "header"))
        );
    }

    #[test]
    fn bsd_and_linux_logging_headers() {
        use linktype::*;
        let mut pf = vec![61, 2];
        pf.resize(64, 0);
        assert_eq!(at(PFLOG, &with(&pf)), Ok((64, false)));
        pf[0] = 7;
        assert_eq!(at(PFLOG, &with(&pf)), Err(invalid("pflog", "length")));
        assert_eq!(
            at(ENC, &with(&[0, 0, 0, 24, 0, 0, 0, 1, 0, 0, 0, 0])),
            Ok((12, true))
        );
        assert_eq!(
            at(ENC, &with(&[2, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0])),
            Ok((12, false))
        );
        // NFLOG: a prefix TLV (8 bytes), then the payload TLV.
        let mut n = vec![2, 0, 0, 0, 8, 0, 10, 0, b'a', b'b', b'c', 0];
        n.extend_from_slice(&((4 + IP4.len()) as u16).to_le_bytes());
        n.extend_from_slice(&9u16.to_le_bytes());
        assert_eq!(at(NFLOG, &with(&n)), Ok((16, false)));
        // The payload TLV cut by the capture: not read, as tshark.
        assert_eq!(at(NFLOG, &with(&n)[..30]), Err(trunc("NFLOG", "payload")));
        assert_eq!(
            at(NFLOG, &[2, 0, 0, 0, 0, 0, 9, 0]),
            Err(invalid("NFLOG", "TLV length"))
        );
    }

    #[test]
    fn view_keeps_engine_frames_and_cuts_others() {
        let f = with(&[0xff, 0x03, 0x00, 0x21]);
        let v = view(linktype::PPP, &f, f.len() as u32 + 10).unwrap();
        assert_eq!((v.link, v.data.len(), v.orig_len), (LinkKind::Ipv4, 20, 30));
        let v = view(1, &f, 99).unwrap();
        assert_eq!(
            (v.link, v.data.len(), v.orig_len),
            (LinkKind::Ethernet, 24, 99)
        );
        assert_eq!(
            view(147, &f, 24).unwrap_err(),
            Skip::UnsupportedLinkType(147)
        );
    }

    #[test]
    fn pbb_customer_frames() {
        // Outer Ethernet, 802.1ah I-TAG, customer addresses, a customer
        // 802.1Q tag, IPv4.
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x88, 0xe7, 0, 0x1e, 0xbb, 0x30]);
        f.extend_from_slice(&[0; 12]);
        f.extend_from_slice(&[0x81, 0x00, 0, 5, 0x08, 0x00]);
        assert_eq!(inner(&with(&f), 14, PBB), Ok((36, false)));
        // Untagged; ARP inside; cut inside the customer header.
        let mut g = f[..30].to_vec();
        g.extend_from_slice(&[0x86, 0xdd]);
        assert_eq!(inner(&g, 14, PBB), Ok((32, true)));
        g[30..32].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(inner(&g, 14, PBB), Err(Skip::NotIp("ARP")));
        assert_eq!(inner(&f[..20], 14, PBB), Err(trunc("802.1ah", "type")));
    }

    #[test]
    fn fabricpath_vntag_etag_juniper_and_aruba() {
        let macs = [0u8; 12];
        // FabricPath: FTag/TTL, then the customer frame (tagged).
        let mut f = macs.to_vec();
        f.extend_from_slice(&[0x89, 0x03, 0, 0x3f]);
        f.extend_from_slice(&macs);
        f.extend_from_slice(&[0x81, 0x00, 0, 5, 0x08, 0x00]);
        assert_eq!(inner(&with(&f), 14, FABRICPATH), Ok((34, false)));
        // VN-Tag between two VLAN tags; E-Tag; a tag in a tag is refused.
        let v = [0, 0, 0, 0x33, 0x81, 0x00, 0, 0xfa, 0x86, 0xdd];
        assert_eq!(inner(&v, 0, VNTAG), Ok((10, true)));
        let e = [0x20, 0, 0, 5, 0, 0, 0x08, 0x00];
        assert_eq!(inner(&e, 0, ETAG), Ok((8, false)));
        let nested = [0, 0, 0, 0, 0x89, 0x26, 0, 0, 0, 0, 0x08, 0x00];
        assert_eq!(
            inner(&nested, 0, VNTAG),
            Err(Skip::NotIp("tag inside a tag"))
        );
        // Juniper: magic, flags with extensions (2 bytes of TLV), Ethernet.
        let mut j = vec![b'M', b'G', b'C', 0x80, 0, 2, 3, 0];
        j.extend_from_slice(&macs);
        j.extend_from_slice(&[0x08, 0x00]);
        assert_eq!(at(linktype::JUNIPER_ETHER, &with(&j)), Ok((22, false)));
        j[3] = 0x82;
        assert_eq!(
            at(linktype::JUNIPER_ETHER, &j),
            Err(Skip::NotIp("Juniper without L2 header"))
        );
        assert_eq!(
            at(linktype::JUNIPER_ETHER, b"MGX\x80"),
            Err(invalid("Juniper", "magic"))
        );
        // Aruba: only its protocol types, and only a data frame with IP.
        let mut w = vec![0x88, 0x01];
        w.extend_from_slice(&[0; 22]);
        w.extend_from_slice(&[0, 0, 0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00]);
        assert_eq!(aruba_wlan(&w, 0, 0x8200), Some((34, false)));
        assert_eq!(aruba_wlan(&w, 0, 0x8370), Some((34, false)));
        assert_eq!(aruba_wlan(&w, 0, 0x8205), None);
        assert_eq!(aruba_wlan(&w, 0, 0x8380), None);
        assert_eq!(aruba_wlan(&w[..20], 0, 0x8200), None);
        // Every cut of each: an answer, never a panic.
        for b in [&f[..], &v[..], &e[..], &j[..], &w[..]] {
            for n in 0..=b.len() {
                for et in [FABRICPATH, VNTAG, ETAG, PBB] {
                    let _ = inner(&b[..n], 0, et);
                }
                let _ = at(linktype::JUNIPER_ETHER, &b[..n]);
                let _ = aruba_wlan(&b[..n], 0, 0x8200);
            }
        }
    }

    proptest::proptest! {
        /// Any bytes behind any link type read here, and behind an
        /// Ethernet header of each EtherType read inside one: an answer,
        /// never a panic, and a packet within the frame.
        #[test]
        fn any_frame_is_read_or_named_never_a_panic(
            which in 0usize..25,
            body in proptest::collection::vec(proptest::num::u8::ANY, 0..200),
        ) {
            const TYPES: [u32; 18] = [7, 9, 10, 50, 51, 104, 105, 109, 117, 119, 127, 129, 163, 166, 178, 192, 239, 242];
            const ETS: [u16; 7] = [0x8847, 0x8864, PBB, FABRICPATH, VNTAG, ETAG, 40];
            if which < TYPES.len() {
                if let Ok(v) = view(TYPES[which], &body, body.len() as u32) {
                    proptest::prop_assert!(v.data.len() <= body.len());
                }
            } else {
                let et = ETS[which - TYPES.len()];
                if let Ok((off, _)) = inner(&body, 0, et) {
                    proptest::prop_assert!(off <= body.len());
                }
                let _ = aruba_wlan(&body, 0, 0x8200);
            }
        }
    }

    #[test]
    fn view_ends_at_the_packet_the_link_delimits() {
        // NFLOG: a 21-byte payload (an IPv4 header and one byte), its 3
        // padding bytes, then another TLV: the packet is the 21 bytes.
        let mut f = vec![2, 0, 0, 1, 25, 0, 9, 0];
        f.extend_from_slice(&IP4);
        f.extend_from_slice(&[0xaa, 0, 0, 0, 8, 0, 10, 0, 1, 2, 3, 4]);
        let v = view(linktype::NFLOG, &f, f.len() as u32).unwrap();
        assert_eq!((v.data.len(), v.orig_len), (21, 21));
        assert_eq!(v.data[20], 0xaa);
        // Radiotap whose Flags say FCS: the last 4 bytes are not the
        // packet's, captured whole or cut.
        let mut f = vec![0, 0, 9, 0, 0x02, 0, 0, 0, 0x10];
        f.extend_from_slice(&[0x08, 0x02, 0, 0]);
        f.extend_from_slice(&[0; 20]);
        f.extend_from_slice(&[0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00]);
        let ip = f.len();
        f.extend_from_slice(&IP4);
        f.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
        let v = view(linktype::IEEE802_11_RADIOTAP, &f, f.len() as u32).unwrap();
        assert_eq!((v.data.len(), v.orig_len), (20, 20));
        let v = view(linktype::IEEE802_11_RADIOTAP, &f[..ip + 10], f.len() as u32).unwrap();
        assert_eq!((v.data.len(), v.orig_len), (10, 20));
        let v = view(linktype::IEEE802_11_RADIOTAP, &f[..ip + 22], f.len() as u32).unwrap();
        assert_eq!((v.data.len(), v.orig_len), (20, 20));
        // PPP_ETHER: the PPPoE length (22: PPP's 2 bytes and 20 of IP)
        // ends the packet before 4 bytes of padding.
        let mut p = vec![0x11, 0x00, 0x12, 0x34, 0, 22, 0x00, 0x21];
        p.extend_from_slice(&IP4);
        p.extend_from_slice(&[0; 4]);
        let v = view(linktype::PPP_ETHER, &p, p.len() as u32).unwrap();
        assert_eq!((v.data.len(), v.orig_len), (20, 20));
        // Without the flag the frame's end is the packet's.
        f[8] = 0;
        let v = view(linktype::IEEE802_11_RADIOTAP, &f, f.len() as u32).unwrap();
        assert_eq!((v.data.len(), v.orig_len), (24, 24));
    }
}
