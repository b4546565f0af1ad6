//! `offload analyze` reads every link type libpcap and tshark read for IP:
//! PPP (9, 50, 51, 166), Cisco HDLC, 802.11 (plain, radiotap, Prism, AVS),
//! FDDI, ARCnet (BSD and Linux), IPoIB, NFLOG, pflog, enc, Juniper
//! Ethernet, PPI, and inside Ethernet MPLS label stacks, PPPoE sessions, 802.1ah
//! (PBB) customer frames, Cisco FabricPath, VN-Tag, 802.1BR E-Tag, Aruba's
//! GRE carrying 802.11, and 802.3 LLC/SNAP.
//!
//! Two sources, each compared with tshark per flow direction:
//! - public captures of those links from tcpdump's test suite
//!   (crates/offload-analyze/tests/data/public/link/, SOURCE.md);
//! - public Ethernet captures of real TCP connections (retransmissions,
//!   D-SACK, header-only frames, IPv6) whose IP packets this test wraps,
//!   at run time, in each link header as the LINKTYPE registry and
//!   Wireshark define it, with one frame that is not IP per link.
//!
//! Per direction: packets, frame bytes, TCP payload and every one of
//! Wireshark's `tcp.analysis` flags, exactly; frames with IP equal to
//! tshark's `ip || ipv6` count, and each frame without IP named in
//! `inputs[].link_skipped`. Needs tshark (`.ci/install`).

mod common;

use common::tcp_figures::{self, Dir, FLAGS};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn public() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../offload-analyze/tests/data/public")
}

/// Frames tshark dissects as IP (the frames that are no ICMP error quoting
/// one count once).
fn tshark_ip_frames(path: &Path) -> u64 {
    common::capture::tshark(path, &["-n", "-Y", "ip || ipv6"])
        .lines()
        .count() as u64
}

/// Compares `path` with tshark; returns the flow directions compared.
fn compare(path: &Path, fails: &mut Vec<String>) -> usize {
    let name = path.file_name().unwrap().to_string_lossy().to_string();
    let v = common::analyze_json(path);
    let input = &v["inputs"][0];
    let frames = input["frames"].as_u64().unwrap();
    let skipped: u64 = input["link_skipped"]
        .as_object()
        .unwrap()
        .values()
        .map(|c| c["frames"].as_u64().unwrap())
        .sum();
    assert_eq!(
        skipped,
        input["unparsed_frames"].as_u64().unwrap()
            + input["unsupported_link_frames"].as_u64().unwrap(),
        "{name}: every frame without IP has a reason: {input}"
    );
    let ip = tshark_ip_frames(path);
    if frames - skipped != ip {
        fails.push(format!(
            "{name}: {} frames with IP, tshark {ip} ({})",
            frames - skipped,
            input["link_skipped"]
        ));
    }
    let ours = tcp_figures::offload_directions(&v, &name);
    let theirs = tcp_figures::tshark_directions(path);
    if ours.len() != theirs.len() {
        fails.push(format!(
            "{name}: {} TCP flow directions, tshark {}",
            ours.len(),
            theirs.len()
        ));
    }
    for (d, t) in &theirs {
        let dir = format!("{name} {}:{} -> {}:{}", d.0, d.1, d.2, d.3);
        let Some(f) = ours.get(d) else {
            fails.push(format!("{dir}: in tshark, not in offload"));
            continue;
        };
        let mut cmp = |what: &str, a: f64, b: f64| {
            if a != b {
                fails.push(format!("{dir}: {what}: offload {a} vs tshark {b}"));
            }
        };
        let n = |x: &Value| x.as_f64().unwrap_or(0.0);
        cmp("packets", n(&f["packets"]), t.get("packets"));
        cmp("bytes", n(&f["bytes"]), t.get("bytes"));
        cmp("payload", n(&f["payload_bytes"]), t.get("payload"));
        for (k, _) in FLAGS {
            cmp(k, n(&f["tcp"]["wireshark"][k]), t.get(k));
        }
    }
    theirs.len()
}

#[test]
fn public_captures_of_other_link_types_agree_with_tshark() {
    let dir = public().join("link");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pcap"))
        .collect();
    files.sort();
    assert!(files.len() >= 8, "captures missing in {}", dir.display());
    let mut fails = Vec::new();
    let mut dirs = 0;
    for f in &files {
        let v = common::analyze_json(f);
        // No frame of these captures is left to "unsupported".
        assert_eq!(
            v["inputs"][0]["unsupported_link_frames"],
            0,
            "{}",
            f.display()
        );
        dirs += compare(f, &mut fails);
    }
    assert!(dirs >= 8, "too few TCP directions: {dirs}");
    assert!(fails.is_empty(), "{}", fails.join("\n"));
}

/// One frame of a classic pcap file.
#[derive(Clone)]
struct Rec {
    sec: u32,
    frac: u32,
    data: Vec<u8>,
    orig_len: u32,
}

/// Reads a classic pcap file (either byte order): nanosecond magic, link
/// type and records.
fn read_pcap(path: &Path) -> (bool, u32, Vec<Rec>) {
    let b = std::fs::read(path).unwrap();
    let (le, nano) = match b[..4] {
        [0xd4, 0xc3, 0xb2, 0xa1] => (true, false),
        [0x4d, 0x3c, 0xb2, 0xa1] => (true, true),
        [0xa1, 0xb2, 0xc3, 0xd4] => (false, false),
        [0xa1, 0xb2, 0x3c, 0x4d] => (false, true),
        _ => panic!("{}: not a pcap file", path.display()),
    };
    let u32_at = |at: usize| {
        let x = [b[at], b[at + 1], b[at + 2], b[at + 3]];
        if le {
            u32::from_le_bytes(x)
        } else {
            u32::from_be_bytes(x)
        }
    };
    let linktype = u32_at(20);
    let mut recs = Vec::new();
    let mut at = 24;
    while at + 16 <= b.len() {
        let caplen = u32_at(at + 8) as usize;
        recs.push(Rec {
            sec: u32_at(at),
            frac: u32_at(at + 4),
            orig_len: u32_at(at + 12),
            data: b[at + 16..at + 16 + caplen].to_vec(),
        });
        at += 16 + caplen;
    }
    (nano, linktype, recs)
}

fn write_pcap(path: &Path, nano: bool, linktype: u32, recs: &[Rec]) {
    let mut f = common::pcap::header(
        if nano {
            common::pcap::Resolution::Nanos
        } else {
            common::pcap::Resolution::Micros
        },
        262_144,
    );
    f[20..24].copy_from_slice(&linktype.to_le_bytes());
    for r in recs {
        f.extend_from_slice(&common::pcap::record_header(
            r.sec,
            r.frac,
            r.data.len() as u32,
            r.orig_len,
        ));
        f.extend_from_slice(&r.data);
    }
    std::fs::write(path, f).unwrap();
}

/// A link header head for an IP packet: given IPv6 or not and the
/// packet's wire length, the bytes before the packet.
type Head = Box<dyn Fn(bool, usize) -> Vec<u8>>;

/// One link type's case: its link type, the header it puts before an IP
/// packet, the bytes after it on the wire given its length (the FCS
/// radiotap announces, NFLOG's padding of its payload TLV to 4 bytes), and
/// a frame of this link that carries no IP with the reason
/// `inputs[].link_skipped` must give for it.
struct Wrap {
    name: &'static str,
    linktype: u32,
    head: Head,
    tail: fn(usize) -> Vec<u8>,
    non_ip: Vec<u8>,
    reason: &'static str,
}

/// A case whose header depends on the IP version and length only.
fn wrap(
    name: &'static str,
    linktype: u32,
    head: impl Fn(bool, usize) -> Vec<u8> + 'static,
    non_ip: Vec<u8>,
    reason: &'static str,
) -> Wrap {
    Wrap {
        name,
        linktype,
        head: Box::new(head),
        tail: |_| Vec::new(),
        non_ip,
        reason,
    }
}

/// A case whose header is fixed and followed by a protocol field naming
/// IPv4 or IPv6 (`proto`).
fn fixed(
    name: &'static str,
    linktype: u32,
    prefix: &'static [u8],
    proto: fn(bool) -> [u8; 2],
    non_ip: Vec<u8>,
    reason: &'static str,
) -> Wrap {
    wrap(
        name,
        linktype,
        move |v6, _| cat(&[prefix, &proto(v6)]),
        non_ip,
        reason,
    )
}

/// An 802.11 case: a capture header (`radio`) before an 802.11 QoS data
/// frame; its non-IP frame is a beacon behind `radio_non_ip`.
fn wlan(
    name: &'static str,
    linktype: u32,
    radio: Vec<u8>,
    radio_non_ip: Vec<u8>,
    fcs: bool,
) -> Wrap {
    let non_ip = cat(&[&radio_non_ip, &beacon()]);
    Wrap {
        tail: if fcs {
            |_| vec![0xde, 0xad, 0xbe, 0xef]
        } else {
            |_| Vec::new()
        },
        ..wrap(
            name,
            linktype,
            move |v6, _| cat(&[&radio, &wifi(v6)]),
            non_ip,
            "not IP: 802.11 management",
        )
    }
}

/// A 144-byte Prism capture header.
fn prism(dev: &[u8]) -> Vec<u8> {
    let mut h = vec![0u8; 144];
    h[0] = 0x44;
    h[4] = 144;
    h[8..8 + dev.len()].copy_from_slice(dev);
    h
}

/// A 32-byte PPI header for 802.11 (DLT 105): one 802.11-common field
/// (TSF, flags with FCS present, rate, channel, signal, noise).
fn ppi() -> Vec<u8> {
    let mut h = vec![0, 0, 32, 0, 105, 0, 0, 0, 2, 0, 20, 0];
    h.extend_from_slice(&[0x63, 0x7e, 0xcd, 0xf3, 0, 0, 0, 0, 0x01, 0x00]);
    h.extend_from_slice(&[0x58, 0x02, 0x76, 0x09, 0xc0, 0, 0, 0, 0xc8, 0xa0]);
    h
}

/// A 64-byte AVS capture header.
fn avs() -> Vec<u8> {
    let mut h = vec![0u8; 64];
    h[..8].copy_from_slice(&[0x80, 0x21, 0x10, 0x01, 0, 0, 0, 64]);
    h
}

/// A 64-byte pflog header of address family `af` and interface `ifname`.
fn pflog(af: u8, ifname: &[u8]) -> Vec<u8> {
    let mut h = vec![0u8; 64];
    h[0] = 61;
    h[1] = af;
    h[4..4 + ifname.len()].copy_from_slice(ifname);
    h
}

/// A 44-byte IPoIB header (a 40-byte GRH-sized address, then `ethertype`
/// and reserved bytes).
fn ipoib(ethertype: [u8; 2]) -> Vec<u8> {
    let mut h = vec![0u8; 40];
    h[20..24].copy_from_slice(&[0x00, 0x00, 0x05, 0x50]);
    h[24] = 0xfe;
    h[25] = 0x80;
    cat(&[&h, &ethertype, &[0, 0]])
}

const SNAP4: [u8; 8] = [0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00];
const SNAP6: [u8; 8] = [0xaa, 0xaa, 0x03, 0, 0, 0, 0x86, 0xdd];
const MACS: [u8; 12] = [2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];

fn snap(v6: bool) -> [u8; 8] {
    if v6 {
        SNAP6
    } else {
        SNAP4
    }
}

fn et(v6: bool) -> [u8; 2] {
    if v6 {
        [0x86, 0xdd]
    } else {
        [0x08, 0x00]
    }
}

fn ppp_proto(v6: bool) -> [u8; 2] {
    if v6 {
        [0x00, 0x57]
    } else {
        [0x00, 0x21]
    }
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// An 802.11 QoS data frame header from the AP (FromDS), sequence 0 of
/// fragment 0, and SNAP.
fn wifi(v6: bool) -> Vec<u8> {
    let mut h = vec![0x88, 0x02, 0, 0];
    h.extend_from_slice(&[2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 3]);
    h.extend_from_slice(&[0x10, 0x00, 0x00, 0x00]); // sequence 1, QoS
    h.extend_from_slice(&snap(v6));
    h
}

/// An 802.11 beacon (management): no IP.
fn beacon() -> Vec<u8> {
    let mut h = vec![0x80, 0x00, 0, 0];
    h.extend_from_slice(&[0xff; 6]);
    h.extend_from_slice(&[2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 1, 0, 0]);
    h.extend_from_slice(&[0; 12]);
    h
}

/// A Juniper capture header with extension TLVs (media type, logical
/// encapsulation, interface indexes), as in tcpdump's bgp-aigp.pcap.
const JUNIPER: &[u8] = &[
    0x4d, 0x47, 0x43, 0x80, 0x00, 0x10, 0x03, 0x01, 0x01, 0x06, 0x01, 0x0e, 0x01, 0x02, 0x8c, 0x00,
    0x04, 0x04, 0x4c, 0x01, 0x00, 0x00,
];

const LCP: [u8; 8] = [0xc0, 0x21, 0x09, 0x01, 0x00, 0x08, 0, 0];
const PPP_CONTROL: &str = "not IP: PPP control protocol";

fn nflog_head(v6: bool, ip_len: usize) -> Vec<u8> {
    let mut h = vec![if v6 { 10 } else { 2 }, 0, 0, 1];
    // NFULA_PREFIX "t\0" (6 bytes, padded to 8), then NFULA_PAYLOAD.
    h.extend_from_slice(&6u16.to_le_bytes());
    h.extend_from_slice(&10u16.to_le_bytes());
    h.extend_from_slice(&[b't', 0, 0, 0]);
    h.extend_from_slice(&((4 + ip_len) as u16).to_le_bytes());
    h.extend_from_slice(&9u16.to_le_bytes());
    h
}

fn wraps() -> Vec<Wrap> {
    const HDLC: &[u8] = &[0xff, 0x03];
    const MPLS2: &[u8] = &[0, 0x01, 0x00, 0x40, 0, 0x02, 0x01, 0x40];
    // An MPLS label with bottom of stack, then a pseudowire's control
    // word: not read as IP.
    const MPLS_CW: &[u8] = &[0, 0x01, 0x01, 0x40, 0, 0, 0, 0];
    let arp = [0, 1, 8, 0, 6, 4, 0, 1];
    vec![
        fixed("ppp", 9, HDLC, ppp_proto, cat(&[HDLC, &LCP]), PPP_CONTROL),
        wrap(
            "ppp-mpls",
            9,
            |_, _| cat(&[HDLC, &[0x02, 0x81], MPLS2]),
            cat(&[HDLC, &[0x02, 0x81], MPLS_CW]),
            "not IP: MPLS payload not IP",
        ),
        fixed(
            "ppp-hdlc",
            50,
            HDLC,
            ppp_proto,
            cat(&[HDLC, &LCP]),
            PPP_CONTROL,
        ),
        wrap(
            "ppp-ether",
            51,
            |v6, n| {
                cat(&[
                    &[0x11, 0x00, 0x12, 0x34],
                    &((n + 2) as u16).to_be_bytes(),
                    &ppp_proto(v6),
                ])
            },
            cat(&[&[0x11, 0x00, 0x12, 0x34, 0, 8], &LCP]),
            PPP_CONTROL,
        ),
        fixed(
            "chdlc",
            104,
            &[0x0f, 0x00],
            et,
            cat(&[&[0x8f, 0x00, 0x80, 0x35], &[0; 14]]),
            "not IP: Cisco SLARP",
        ),
        wlan("ieee802.11", 105, vec![], vec![], false),
        // Radiotap with the flags field present (FCS at end).
        wlan(
            "radiotap",
            127,
            vec![0, 0, 9, 0, 0x02, 0, 0, 0, 0x10],
            vec![0, 0, 8, 0, 0, 0, 0, 0],
            true,
        ),
        wlan("prism", 119, prism(b"wlan0"), prism(b""), false),
        wlan("avs", 163, avs(), avs(), false),
        // PPI with an 802.11-common field whose flags say FCS (libpcap's
        // http_PPI.pcap has the same).
        wlan("ppi", 192, ppi(), ppi(), true),
        wrap(
            "fddi",
            10,
            |v6, _| cat(&[&[0x50], &MACS, &snap(v6)]),
            cat(&[&[0x50], &MACS, &[0x42, 0x42, 0x03, 0, 0, 0, 0, 0]]),
            "not IP: LLC spanning tree",
        ),
        wrap(
            "arcnet-bsd",
            7,
            |v6, _| {
                if v6 {
                    vec![1, 2, 0xc4, 0, 0, 0]
                } else {
                    vec![1, 2, 240]
                }
            },
            cat(&[&[1, 2, 213, 0, 0, 0], &arp]),
            "not IP: ARCnet ARP",
        ),
        wrap(
            "arcnet-linux",
            129,
            |v6, _| vec![1, 2, 0, 0, if v6 { 0xc4 } else { 212 }, 0, 0, 0],
            cat(&[&[1, 2, 0, 0, 213, 0, 0, 0], &arp]),
            "not IP: ARCnet ARP",
        ),
        wrap(
            "ipoib",
            242,
            |v6, _| ipoib(et(v6)),
            cat(&[&[0; 40], &[0x08, 0x06, 0, 0, 0, 32, 8, 0, 20, 4, 0, 1]]),
            "not IP: ARP",
        ),
        Wrap {
            // The kernel pads the payload TLV to 4 bytes (nla_total_size,
            // __build_packet_message in net/netfilter/nfnetlink_log.c);
            // a TLV may follow (NFULA_GID here: the format has no order,
            // and Wireshark's packet-nflog.c reads every TLV).
            tail: |n| {
                let pad = vec![0; n.next_multiple_of(4) - n];
                cat(&[
                    &pad,
                    &8u16.to_le_bytes(),
                    &14u16.to_le_bytes(),
                    &[0, 0, 3, 0xe8],
                ])
            },
            ..wrap(
                "nflog",
                239,
                nflog_head,
                vec![2, 0, 0, 1, 6, 0, 10, 0, b't', 0, 0, 0],
                "not IP: NFLOG without payload",
            )
        },
        wrap(
            "pflog",
            117,
            |v6, _| pflog(if v6 { 24 } else { 2 }, b"em0"),
            pflog(23, b""), // AF_IPX
            "not IP: pflog address family",
        ),
        wrap(
            "enc",
            109,
            |v6, _| vec![0, 0, 0, if v6 { 24 } else { 2 }, 0, 0, 0x10, 0, 0, 0, 0, 1],
            vec![0, 0, 0, 7, 0, 0, 0x10, 0, 0, 0, 0, 1, 0, 0],
            "not IP: enc address family",
        ),
        wrap(
            "ethernet-mpls",
            1,
            |_, _| cat(&[&MACS, &[0x88, 0x47], MPLS2]),
            cat(&[&MACS, &[0x88, 0x47], MPLS_CW]),
            "not IP: MPLS payload not IP",
        ),
        wrap(
            "ethernet-pppoe",
            1,
            |v6, n| {
                cat(&[
                    &MACS,
                    &[0x88, 0x64, 0x11, 0x00, 0x12, 0x34],
                    &((n + 2) as u16).to_be_bytes(),
                    &ppp_proto(v6),
                ])
            },
            cat(&[&MACS, &[0x88, 0x63, 0x11, 0x09, 0, 0, 0, 0]]),
            "not IP: PPPoE discovery",
        ),
        wrap(
            "ethernet-pbb",
            1,
            // 802.1ah: I-TAG (I-SID 2014000), customer addresses, a
            // customer 802.1Q tag.
            |v6, _| {
                cat(&[
                    &MACS,
                    &[0x88, 0xe7, 0, 0x1e, 0xbb, 0x30],
                    &MACS,
                    &[0x81, 0x00, 0, 5],
                    &et(v6),
                ])
            },
            cat(&[
                &MACS,
                &[0x88, 0xe7, 0, 0x1e, 0xbb, 0x30],
                &MACS,
                &[0x08, 0x06],
                &[0; 28],
            ]),
            "not IP: ARP",
        ),
        Wrap {
            // tshark 4.0 takes a FabricPath frame's last 4 bytes as its
            // FCS (packet-cisco-fp-mim.c of that release): the frames
            // carry one, which offload leaves out by the IP length.
            tail: |_| vec![0xde, 0xad, 0xbe, 0xef],
            ..wrap(
                "ethernet-fabricpath",
                1,
                |v6, _| cat(&[&MACS, &[0x89, 0x03, 0x00, 0x3f], &MACS, &et(v6)]),
                cat(&[
                    &MACS,
                    &[0x89, 0x03, 0x00, 0x3f],
                    &MACS,
                    &[0x08, 0x06],
                    &[0; 28],
                ]),
                "not IP: ARP",
            )
        },
        wrap(
            "ethernet-vntag",
            1,
            // A VN-Tag between two 802.1Q tags (Zeek's
            // vntag_vlan_sandwich_clean.pcap).
            |v6, _| {
                cat(&[
                    &MACS,
                    &[0x81, 0x00, 0x00, 0xfa, 0x89, 0x26, 0x00, 0x00, 0x00, 0x33],
                    &[0x81, 0x00, 0x00, 0xfa],
                    &et(v6),
                ])
            },
            cat(&[&MACS, &[0x89, 0x26, 0, 0, 0, 0x33, 0x08, 0x06], &[0; 28]]),
            "not IP: ARP",
        ),
        wrap(
            "ethernet-etag",
            1,
            |v6, _| {
                cat(&[
                    &MACS,
                    &[0x89, 0x3f, 0x20, 0x00, 0x00, 0x05, 0x00, 0x00],
                    &et(v6),
                ])
            },
            cat(&[&MACS, &[0x89, 0x3f, 0, 0, 0, 5, 0, 0, 0x08, 0x06], &[0; 28]]),
            "not IP: ARP",
        ),
        wrap(
            "ethernet-gre-aruba",
            1,
            // An Aruba access point's GRE (protocol 0x8200) to its
            // controller, an 802.11 QoS data frame inside.
            |v6, n| {
                let wifi = wifi(v6);
                cat(&[
                    &MACS,
                    &[0x08, 0x00],
                    &outer4(47, 7, 0, 4 + wifi.len() + n),
                    &[0x00, 0x00, 0x82, 0x00],
                    &wifi,
                ])
            },
            cat(&[&MACS, &[0x08, 0x06], &[0; 28]]),
            "not IP: ARP",
        ),
        wrap(
            "juniper-ether",
            178,
            // Juniper's header as tcpdump's bgp-aigp.pcap has it (flags
            // 0x80: 16 bytes of extension TLVs), then Ethernet.
            |v6, _| cat(&[JUNIPER, &MACS, &et(v6)]),
            cat(&[JUNIPER, &MACS, &[0x08, 0x06], &[0; 28]]),
            "not IP: ARP",
        ),
        wrap(
            "ethernet-llc-snap",
            1,
            |v6, n| cat(&[&MACS, &((n + 8) as u16).to_be_bytes(), &snap(v6)]),
            cat(&[&MACS, &[0, 38, 0x42, 0x42, 0x03], &[0; 35]]),
            "not IP: LLC spanning tree",
        ),
    ]
}

/// The IP packets of the untagged IPv4/IPv6 Ethernet frames of the
/// sources, one after the other in time (each source shifted to start a
/// second after the previous one ends): (record, IPv6, wire length, the
/// source has frames the capture cut).
fn sources() -> (bool, Vec<(Rec, bool, usize, bool)>) {
    let mut out = Vec::new();
    let mut next_sec = 1_000_000u32;
    for name in [
        "ssh.pcap",
        "zeek-tcp__retransmit-fast009.pcap",
        "zeek-ftp__ipv6.pcap",
        "zeek-http__entity_gap.pcap",
    ] {
        let (nano, lt, recs) = read_pcap(&public().join(name));
        assert!(!nano && lt == 1, "{name}: a microsecond Ethernet capture");
        let first = recs[0].sec;
        let cut = recs.iter().any(|r| r.data.len() < r.orig_len as usize);
        let mut last = next_sec;
        for r in recs {
            let v6 = match r.data.get(12..14) {
                Some([0x08, 0x00]) => false,
                Some([0x86, 0xdd]) => true,
                _ => continue,
            };
            let sec = r.sec - first + next_sec;
            last = sec;
            out.push((
                Rec {
                    sec,
                    frac: r.frac,
                    data: r.data[14..].to_vec(),
                    orig_len: r.orig_len - 14,
                },
                v6,
                r.orig_len as usize - 14,
                cut,
            ));
        }
        next_sec = last + 2;
    }
    (false, out)
}

#[test]
fn tcp_connections_wrapped_in_each_link_type_agree_with_tshark() {
    let tmp = tempfile::tempdir().unwrap();
    let keep = std::env::var_os("LINK_TYPES_KEEP");
    let tmp_path = keep.as_ref().map_or(tmp.path(), Path::new);
    let (nano, src) = sources();
    let mut fails = Vec::new();
    // Each link type twice: as captured, and with every cut frame claimed
    // whole (its record's original length its captured length, its link
    // header built for the bytes kept), as a logger that copies a range
    // of each packet writes it (NFLOG's copy range, `--nflog-range`): the
    // IP total length then says more than the packet holds.
    let cases = wraps().into_iter().map(|w| (w, false));
    for (w, lying) in cases.chain(wraps().into_iter().map(|w| (w, true))) {
        // tshark 4.0 cuts 4 bytes (its FCS) from every FabricPath frame,
        // also from a packet whose IP length says more than the frame
        // holds; offload does not (docs/analyze.md).
        if w.name == "ethernet-fabricpath" && lying {
            continue;
        }
        let first = &src[0].0;
        let mut recs = vec![Rec {
            sec: first.sec,
            frac: first.frac,
            data: w.non_ip.clone(),
            orig_len: w.non_ip.len() as u32,
        }];
        for (r, v6, wire, cut) in &src {
            // 802.3's length field holds 1500 at most.
            if w.name == "ethernet-llc-snap" && *wire + 8 > 1500 {
                continue;
            }
            // A payload TLV the capture cut is read neither by tshark nor
            // by offload ("truncated NFLOG payload", a unit test in
            // offload-analyze's link.rs): NFLOG gets the sources captured
            // whole, or cut and claimed whole.
            if w.linktype == 239 && *cut && !lying {
                continue;
            }
            let claimed = if lying { r.data.len() } else { *wire };
            let head = (w.head)(*v6, claimed);
            let mut data = cat(&[&head, &r.data]);
            let tail = (w.tail)(claimed);
            if r.data.len() == claimed {
                data.extend_from_slice(&tail);
            }
            recs.push(Rec {
                sec: r.sec,
                frac: r.frac,
                orig_len: (head.len() + claimed + tail.len()) as u32,
                data,
            });
        }
        let suffix = if lying { "-claimed-whole" } else { "" };
        let path = tmp_path.join(format!("{}{suffix}.pcap", w.name));
        write_pcap(&path, nano, w.linktype, &recs);
        let dirs = compare(&path, &mut fails);
        if dirs < 6 {
            fails.push(format!("{}{suffix}: {dirs} TCP directions only", w.name));
        }
        let v = common::analyze_json(&path);
        let skipped = &v["inputs"][0]["link_skipped"];
        if skipped[w.reason]["frames"] != 1 || skipped[w.reason]["first_frame"] != 1 {
            fails.push(format!(
                "{}{suffix}: link_skipped {skipped}, expected {:?} for frame 1",
                w.name, w.reason
            ));
        }
    }
    assert!(fails.is_empty(), "{}", fails.join("\n"));
}

/// An outer IPv4 header (protocol `proto`, identification `id`, fragment
/// word `frag`) for `len` bytes of payload.
fn outer4(proto: u8, id: u16, frag: u16, len: usize) -> Vec<u8> {
    let mut h = vec![
        0x45, 0, 0, 0, 0, 0, 0, 0, 63, proto, 0, 0, 10, 200, 0, 3, 10, 200, 0, 224,
    ];
    h[2..4].copy_from_slice(&((20 + len) as u16).to_be_bytes());
    h[4..6].copy_from_slice(&id.to_be_bytes());
    h[6..8].copy_from_slice(&frag.to_be_bytes());
    let mut sum: u32 = h
        .chunks(2)
        .map(|w| u16::from_be_bytes([w[0], w[1]]) as u32)
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    h[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    h
}

/// A mirror (a switch's ERSPAN-like session) that tunnels both directions
/// of each connection in gretap from one address to one collector, each
/// direction under its own GRE key (0 and 0x02000000, as Zeek's
/// erspan.pcap), the outer packets above 600 bytes fragmented by the
/// mirror: tshark reassembles the outer IP, reads the inner connection
/// and pairs its directions by the inner 5-tuple; per direction the
/// figures must be tshark's (packets, bytes, payload, every
/// `tcp.analysis` flag, which need the two directions paired).
#[test]
fn mirrored_gretap_with_a_key_per_direction_and_outer_fragments_agrees_with_tshark() {
    let tmp = tempfile::tempdir().unwrap();
    let (nano, src) = sources();
    let mut recs = Vec::new();
    let mut id = 1u16;
    let mut fragmented = 0;
    for (r, v6, wire, _) in &src {
        let (a, b) = if *v6 {
            (8..24, 24..40)
        } else {
            (12..16, 16..20)
        };
        let key: u32 = if r.data[a] < r.data[b] {
            0
        } else {
            0x0200_0000
        };
        let inner_eth = cat(&[&MACS, &et(*v6)]);
        let gre = cat(&[&[0x20, 0x00, 0x65, 0x58], &key.to_be_bytes(), &inner_eth]);
        let payload = cat(&[&gre, &r.data]);
        let wire_payload = gre.len() + wire;
        id = id.wrapping_add(1);
        let whole = r.data.len() == *wire;
        if !whole || wire_payload <= 600 {
            let data = cat(&[
                &MACS,
                &[0x08, 0x00],
                &outer4(47, id, 0, wire_payload),
                &payload,
            ]);
            recs.push(Rec {
                orig_len: (data.len() + wire - r.data.len()) as u32,
                data,
                ..r.clone()
            });
            continue;
        }
        fragmented += 1;
        for (i, piece) in payload.chunks(576).enumerate() {
            let more = (i + 1) * 576 < payload.len();
            let word = (i * 576 / 8) as u16 | if more { 0x2000 } else { 0 };
            let data = cat(&[
                &MACS,
                &[0x08, 0x00],
                &outer4(47, id, word, piece.len()),
                piece,
            ]);
            recs.push(Rec {
                orig_len: data.len() as u32,
                data,
                ..r.clone()
            });
        }
    }
    assert!(fragmented >= 10, "{fragmented} packets fragmented");
    let path = tmp.path().join("mirror-gretap.pcap");
    write_pcap(&path, nano, 1, &recs);
    let mut fails = Vec::new();
    let dirs = compare(&path, &mut fails);
    assert!(dirs >= 6, "{dirs} TCP directions");
    let v = common::analyze_json(&path);
    let frag = &v["inputs"][0]["fragments"];
    assert_eq!(frag["reassembled"].as_u64(), Some(fragmented), "{frag}");
    // Both directions of every connection paired: ACKs seen by the
    // other side give RTT samples in the direction that sends data.
    let rtt: u64 = v["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["tcp"]["rtt"]["samples"].as_u64().unwrap_or(0))
        .sum();
    assert!(rtt > 0, "no RTT sample: directions unpaired");
    assert!(fails.is_empty(), "{}", fails.join("\n"));
}

/// `ip ARGS` inside `ns`, asserted to succeed.
fn ip_in(ns: &offload_sys::NetNs, args: &str) {
    let a: Vec<&str> = args.split_whitespace().collect();
    let out = common::netns::command_in(ns, "ip", &a).output().unwrap();
    assert!(
        out.status.success(),
        "ip {args}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn sysctl_in(ns: &offload_sys::NetNs, setting: &str) {
    let out = common::netns::command_in(ns, "sysctl", &["-qw", setting])
        .output()
        .unwrap();
    assert!(out.status.success(), "sysctl {setting}");
}

/// tshark's UDP datagrams per direction, after its reassembly: (src,
/// sport, dst, dport) -> (datagrams, UDP payload bytes).
fn tshark_udp(path: &Path) -> BTreeMap<Dir, (u64, u64)> {
    let out = common::capture::tshark(
        path,
        &[
            "-n",
            "-Y",
            "udp && !icmp && !icmpv6",
            "-T",
            "fields",
            "-E",
            "separator=|",
            "-e",
            "ip.src",
            "-e",
            "ipv6.src",
            "-e",
            "udp.srcport",
            "-e",
            "ip.dst",
            "-e",
            "ipv6.dst",
            "-e",
            "udp.dstport",
            "-e",
            "udp.length",
        ],
    );
    let mut m: BTreeMap<Dir, (u64, u64)> = BTreeMap::new();
    for l in out.lines() {
        let v: Vec<&str> = l.split('|').collect();
        let pick = |a: &str, b: &str| if a.is_empty() { b } else { a }.to_string();
        let d = (
            pick(v[0], v[1]),
            v[2].parse().unwrap(),
            pick(v[3], v[4]),
            v[5].parse().unwrap(),
        );
        let e = m.entry(d).or_default();
        e.0 += 1;
        e.1 += v[6].parse::<u64>().unwrap() - 8;
    }
    m
}

/// The kernel fragments: a sender without path MTU discovery
/// (`ip_no_pmtu_disc`) sends TCP over a router whose next link has MTU
/// 1280 (IPv6's minimum; IPv4 routers fragment, `ip_fragment`), and UDP datagrams of 3000
/// bytes (IPv4: fragmented by the sender and its fragments again by the
/// router; IPv6: fragmented by the router as a sender, at MTU 1280). Captured at the receiver, the fragments are
/// reassembled as tshark reassembles them: per TCP direction packets,
/// bytes, payload and every `tcp.analysis` flag, and per UDP direction
/// datagrams and payload, equal to tshark's; `inputs[].fragments` counts
/// them, none given up.
#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn kernel_fragmented_tcp_and_udp_agree_with_tshark() {
    use offload_sys::NetNs;
    let (a, r, b) = (
        NetNs::new_anonymous().unwrap(),
        NetNs::new_anonymous().unwrap(),
        NetNs::new_anonymous().unwrap(),
    );
    common::netns::veth_pair(&a, "a0", &r, "r0");
    common::netns::veth_pair(&r, "r1", &b, "b0");
    for (ns, cmds) in [
        (
            &a,
            vec![
                "link set lo up",
                "addr add 10.9.1.1/24 dev a0",
                "-6 addr add fd09:1::1/64 dev a0 nodad",
                "link set a0 up",
                "route add 10.9.2.0/24 via 10.9.1.2",
                "-6 route add fd09:2::/64 via fd09:1::2",
            ],
        ),
        (
            &r,
            vec![
                "addr add 10.9.1.2/24 dev r0",
                "addr add 10.9.2.1/24 dev r1",
                "-6 addr add fd09:1::2/64 dev r0 nodad",
                "-6 addr add fd09:2::1/64 dev r1 nodad",
                "link set r1 mtu 1280",
                "link set r0 up",
                "link set r1 up",
            ],
        ),
        (
            &b,
            vec![
                "link set lo up",
                "addr add 10.9.2.2/24 dev b0",
                "-6 addr add fd09:2::2/64 dev b0 nodad",
                "link set b0 up",
                "route add default via 10.9.2.1",
                "-6 route add default via fd09:2::1",
            ],
        ),
    ] {
        for c in cmds {
            ip_in(ns, c);
        }
    }
    sysctl_in(&r, "net.ipv4.ip_forward=1");
    sysctl_in(&r, "net.ipv6.conf.all.forwarding=1");
    sysctl_in(&a, "net.ipv4.ip_no_pmtu_disc=1");
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("fragments.pcap");
    let cap = common::capture::Tcpdump::start(&b, "b0", &path, &["ip or ip6"]);
    // UDP: 20 datagrams of 3000 bytes each way family.
    let rx4 = b
        .run(|| Ok(std::net::UdpSocket::bind("10.9.2.2:7000")))
        .unwrap()
        .unwrap();
    let rx6 = b
        .run(|| Ok(std::net::UdpSocket::bind("[fd09:2::2]:7000")))
        .unwrap()
        .unwrap();
    // Neighbours resolved first: a fragment train waiting for ARP or
    // neighbour discovery is queued only in part (`unres_qlen_bytes`).
    for (rx, dst) in [(&rx4, "10.9.2.2:7000"), (&rx6, "[fd09:2::2]:7000")] {
        rx.set_read_timeout(Some(std::time::Duration::from_millis(500)))
            .unwrap();
        // IPv6 from the router (routers do not fragment IPv6: the
        // sender does, at the next link's MTU).
        let from = if dst.starts_with('[') { &r } else { &a };
        let warm = (0..20).any(|_| {
            from.run(|| {
                let any = if dst.starts_with('[') {
                    "[::]:0"
                } else {
                    "0.0.0.0:0"
                };
                let s = std::net::UdpSocket::bind(any).unwrap();
                s.send_to(b"warm", dst).unwrap();
                Ok(())
            })
            .unwrap();
            rx.recv(&mut [0u8; 16]).is_ok()
        });
        assert!(warm, "{dst} unreachable");
    }
    a.run(|| {
        let s4 = std::net::UdpSocket::bind("10.9.1.1:0").unwrap();
        for i in 0..20u8 {
            s4.send_to(&[i; 3000], "10.9.2.2:7000").unwrap();
        }
        Ok(())
    })
    .unwrap();
    r.run(|| {
        let s6 = std::net::UdpSocket::bind("[fd09:2::1]:0").unwrap();
        for i in 0..20u8 {
            s6.send_to(&[i; 3000], "[fd09:2::2]:7000").unwrap();
        }
        Ok(())
    })
    .unwrap();
    let mut buf = [0u8; 4000];
    for (fam, s) in [("IPv4", &rx4), ("IPv6", &rx6)] {
        // Warm-up datagrams that came twice.
        while s.peek(&mut buf).is_ok_and(|n| n == 4) {
            s.recv(&mut buf).unwrap();
        }
        s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        for i in 0..20 {
            let n = s
                .recv(&mut buf)
                .unwrap_or_else(|e| panic!("{fam} datagram {i}: {e}"));
            assert_eq!(n, 3000, "{fam} datagram {i}");
        }
    }
    common::netns::bulk_transfer(
        &a,
        &b,
        "10.9.2.2:7001".parse().unwrap(),
        400_000,
        50_000,
        std::time::Duration::ZERO,
    );
    cap.stop();
    let mut fails = Vec::new();
    let dirs = compare(&path, &mut fails);
    assert_eq!(dirs, 2, "one TCP connection");
    let v = common::analyze_json(&path);
    let frag = &v["inputs"][0]["fragments"];
    eprintln!("fragments: {frag}");
    assert!(frag["reassembled"].as_u64().unwrap() >= 40 + 100, "{frag}");
    assert_eq!(frag["given_up"], 0, "{frag}");
    assert_eq!(frag["cut_fragments"], 0, "{frag}");
    let udp = tshark_udp(&path);
    // The two trains of 20 fragmented datagrams (and the warm-up ones).
    assert_eq!(
        udp.values()
            .filter(|(n, p)| *n == 20 && *p == 60_000)
            .count(),
        2,
        "{udp:?}"
    );
    for (d, (n, payload)) in &udp {
        let f = v["flows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| {
                f["protocol"] == "udp"
                    && f["src"] == d.0.as_str()
                    && f["sport"] == d.1
                    && f["dst"] == d.2.as_str()
                    && f["dport"] == d.3
            })
            .unwrap_or_else(|| panic!("{d:?} not in offload's flows"));
        assert_eq!(
            (f["packets"].as_u64(), f["payload_bytes"].as_u64()),
            (Some(*n), Some(*payload)),
            "{d:?}"
        );
    }
    assert!(fails.is_empty(), "{}", fails.join("\n"));
}
