//! `offload analyze` follows a TCP connection inside the encapsulations
//! the kernel's GRO does not open, as tshark does: GTP-U (3GPP TS 29.281:
//! plain, with sequence number and extension headers, from another UDP
//! source port, IPv4 and IPv6 outer, the outer datagram fragmented), GRE
//! in UDP (RFC 8086), AYIYA, Teredo (RFC 4380), IPsec AH (RFC 4302)
//! in tunnel and in transport mode, and IPComp (RFC 3173, DEFLATE per
//! RFC 2394) after an AH, alone in tunnel mode and in transport mode, its
//! payloads inflated as tshark inflates them. Decisions 0231, 0232.
//!
//! Public captures of real TCP connections (retransmissions, IPv4 and
//! IPv6; crates/offload-analyze/tests/data/public, SOURCE.md) are wrapped
//! at run time, frame for frame, in each encapsulation, each direction
//! with its own outer addresses and identifier (TEID, key, SPI) as the
//! two tunnel endpoints send them. For each wrapped capture, per
//! connection direction: packets, frame bytes, TCP payload and every one
//! of Wireshark's `tcp.analysis` flags equal tshark's exactly; the whole
//! `tcp` object of `--json` equals that of the bare capture, the two
//! directions paired; the flow names its tunnel; and the GRO what-if is
//! the kernel's view, the outer packets passed up one by one, with no
//! healthy-tunnel figure and no tunnel finding. Needs tshark
//! (`.ci/install`); no root.

mod common;

use common::tcp_figures::{self, FLAGS};
use offload::build::{FrameSpec, L4Spec};
use offload_capture::{CaptureReader, CaptureWriter, FrameMeta, LinkType};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn public() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../offload-analyze/tests/data/public")
}

/// The sources: captures of whole (uncut) Ethernet frames.
const SOURCES: [&str; 3] = [
    "ssh.pcap",
    "zeek-ftp__ipv6.pcap",
    "zeek-tcp__missing-syn.pcap",
];

/// Outer (tunnel endpoint) addresses of the two sides.
const OA4: [u8; 4] = [198, 51, 100, 1];
const OB4: [u8; 4] = [198, 51, 100, 2];
const OA6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const OB6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

#[derive(Debug, Clone, Copy)]
enum Encap {
    /// GTP-U G-PDU; `ext`: the S flag and a PDU session container
    /// extension header; `sport`: A's outer source port (B answers from
    /// 2152); `frag`: outer IPv4 datagrams above 600 bytes go as two
    /// fragments.
    Gtp { ext: bool, sport: u16, frag: bool },
    /// GRE in UDP with a key per direction.
    GreUdp,
    /// AYIYA Forward, 16-byte identity and 20-byte signature.
    Ayiya,
    /// Teredo (IPv6 only: the IPv4 frames stay as they are), with an
    /// origin indication on B's frames.
    Teredo,
    /// AH tunnel mode.
    AhTunnel,
    /// AH transport mode: inserted between the IP and TCP headers.
    AhTransport,
    /// IPComp in tunnel mode: the inner IP packet deflated. `ah`: after
    /// an AH, and a packet that does not shrink sent uncompressed as an
    /// AH tunnel packet, as Linux's `ipcomp_output` leaves it (else always
    /// deflated).
    IpcompTunnel { ah: bool },
    /// IPComp in transport mode: the TCP segment deflated after the IP
    /// header; a segment that does not shrink sent as it is.
    IpcompTransport,
}

#[derive(Debug, Clone, Copy)]
struct Case {
    name: &'static str,
    encap: Encap,
    outer_v6: bool,
    /// `flows[].tunnel.kind`; None: no tunnel.
    kind: Option<&'static str>,
}

fn cases() -> Vec<Case> {
    let gtp = |ext, sport, frag| Encap::Gtp { ext, sport, frag };
    vec![
        Case {
            name: "gtp",
            encap: gtp(false, 2152, false),
            outer_v6: false,
            kind: Some("gtp"),
        },
        Case {
            name: "gtp-ext-other-port-ipv6",
            encap: gtp(true, 5906, false),
            outer_v6: true,
            kind: Some("gtp"),
        },
        Case {
            name: "gtp-fragmented",
            encap: gtp(false, 2152, true),
            outer_v6: false,
            kind: Some("gtp"),
        },
        Case {
            name: "gre-in-udp",
            encap: Encap::GreUdp,
            outer_v6: false,
            kind: Some("gre-in-udp"),
        },
        Case {
            name: "ayiya",
            encap: Encap::Ayiya,
            outer_v6: false,
            kind: Some("ayiya"),
        },
        Case {
            name: "teredo",
            encap: Encap::Teredo,
            outer_v6: false,
            kind: Some("teredo"),
        },
        Case {
            name: "ah-tunnel-ipv6",
            encap: Encap::AhTunnel,
            outer_v6: true,
            kind: Some("ah"),
        },
        Case {
            name: "ah-tunnel",
            encap: Encap::AhTunnel,
            outer_v6: false,
            kind: Some("ah"),
        },
        Case {
            name: "ah-transport",
            encap: Encap::AhTransport,
            outer_v6: false,
            kind: None,
        },
        Case {
            name: "ipcomp-ah-tunnel",
            encap: Encap::IpcompTunnel { ah: true },
            outer_v6: false,
            kind: Some("ah"),
        },
        Case {
            name: "ipcomp-tunnel-ipv6",
            encap: Encap::IpcompTunnel { ah: false },
            outer_v6: true,
            kind: Some("ipcomp"),
        },
        Case {
            name: "ipcomp-transport",
            encap: Encap::IpcompTransport,
            outer_v6: false,
            kind: None,
        },
    ]
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// The outer frame around `payload`: UDP from `sport` to `dport`, or the
/// IP protocol `proto` when `sport` is None.
fn outer(v6: bool, a: bool, udp: Option<(u16, u16)>, proto: u8, payload: Vec<u8>) -> Vec<u8> {
    let (s4, d4) = if a { (OA4, OB4) } else { (OB4, OA4) };
    let (s6, d6) = if a { (OA6, OB6) } else { (OB6, OA6) };
    let (sp, dp) = udp.unwrap_or((0, 0));
    let mut s = if v6 {
        FrameSpec::udp6(s6, d6, sp, dp)
    } else {
        FrameSpec::udp4(s4, d4, sp, dp)
    };
    if udp.is_none() {
        s.l4 = L4Spec::Other(proto);
    }
    s.payload(payload).build()
}

/// An AH header (RFC 4302) with a 12-byte ICV before `next`.
fn ah(next: u8, spi: u32, seq: u32) -> Vec<u8> {
    let mut h = vec![next, 4, 0, 0];
    h.extend_from_slice(&spi.to_be_bytes());
    h.extend_from_slice(&seq.to_be_bytes());
    h.extend_from_slice(&[0xa5; 12]);
    h
}

/// An IPComp header (RFC 3173 2.2) and `data` deflated (raw DEFLATE, RFC
/// 2394), or None when that does not shrink `data`.
fn ipcomp(next: u8, cpi: u16, data: &[u8]) -> Option<Vec<u8>> {
    let z = miniz_oxide::deflate::compress_to_vec(data, 6);
    if z.len() + 4 >= data.len() {
        return None;
    }
    let mut h = vec![next, 0];
    h.extend_from_slice(&cpi.to_be_bytes());
    h.extend_from_slice(&z);
    Some(h)
}

/// Ethernet frame `f` carries IPComp, after its IP header or an AH.
fn carries_ipcomp(f: &[u8]) -> bool {
    let (next, hl) = if be16(f, 12) == 0x86dd {
        (f[14 + 6], 40)
    } else {
        (f[14 + 9], (f[14] & 0x0f) as usize * 4)
    };
    next == 108 || (next == 51 && f[14 + hl] == 108)
}

/// The IPv4 or IPv6 packet of Ethernet frame `f` with its transport
/// header and payload replaced by `l4`, whose protocol is `proto`.
fn with_payload(f: &[u8], proto: u8, l4: &[u8]) -> Vec<u8> {
    let v6 = be16(f, 12) == 0x86dd;
    let hl = if v6 { 40 } else { (f[14] & 0x0f) as usize * 4 };
    let mut g = f[..14 + hl].to_vec();
    g.extend_from_slice(l4);
    if v6 {
        g[14 + 6] = proto;
        g[18..20].copy_from_slice(&(l4.len() as u16).to_be_bytes());
    } else {
        g[14 + 9] = proto;
        g[16..18].copy_from_slice(&((hl + l4.len()) as u16).to_be_bytes());
        g[24..26].copy_from_slice(&[0, 0]);
        let c = offload::checksum::checksum(&g[14..14 + hl]);
        g[24..26].copy_from_slice(&c.to_be_bytes());
    }
    g
}

/// Splits the IPv4 packet of Ethernet frame `f` in two fragments when it
/// is longer than 600 bytes (the first holding 512 payload bytes).
fn fragments(f: Vec<u8>) -> Vec<Vec<u8>> {
    let ip = &f[14..];
    let ihl = (ip[0] & 0x0f) as usize * 4;
    if ip.len() <= 600 {
        return vec![f];
    }
    let payload = &ip[ihl..];
    let mut out = Vec::new();
    for (off, part, more) in [(0, &payload[..512], true), (512, &payload[512..], false)] {
        let mut h = ip[..ihl].to_vec();
        h[2..4].copy_from_slice(&((ihl + part.len()) as u16).to_be_bytes());
        let word = (off / 8) as u16 | if more { 0x2000 } else { 0 };
        h[6..8].copy_from_slice(&word.to_be_bytes());
        h[10..12].copy_from_slice(&[0, 0]);
        let c = offload::checksum::checksum(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        let mut g = f[..14].to_vec();
        g.extend_from_slice(&h);
        g.extend_from_slice(part);
        out.push(g);
    }
    out
}

/// The Ethernet frame `eth` (inner IP packet from A when `a`) in `c`'s
/// encapsulation; `n` numbers the direction's frames.
fn wrap(c: &Case, eth: &[u8], a: bool, n: u32) -> Vec<Vec<u8>> {
    let ip = &eth[14..];
    let inner_v6 = be16(eth, 12) == 0x86dd;
    let ip_proto = if inner_v6 { 41 } else { 4 };
    let f = match c.encap {
        Encap::Gtp { ext, sport, frag } => {
            let flags = if ext { 0x36 } else { 0x30 };
            let mut h = vec![flags, 0xff];
            let opt = if ext { 4 + 4 } else { 0 };
            h.extend_from_slice(&((ip.len() + opt) as u16).to_be_bytes());
            h.extend_from_slice(&(if a { 0x1000_0001u32 } else { 0x2000_0002 }).to_be_bytes());
            if ext {
                // Sequence number, N-PDU number, next type: PDU session
                // container (0x85), 4 bytes, then no more.
                h.extend_from_slice(&(n as u16).to_be_bytes());
                h.extend_from_slice(&[0, 0x85, 1, 0x10, 0x09, 0]);
            }
            h.extend_from_slice(ip);
            let ports = if a { (sport, 2152) } else { (2152, sport) };
            let f = outer(c.outer_v6, a, Some(ports), 17, h);
            if frag {
                return fragments(f);
            }
            f
        }
        Encap::GreUdp => {
            let mut h = vec![0x20, 0];
            h.extend_from_slice(&eth[12..14]);
            h.extend_from_slice(&(if a { 7u32 } else { 8 }).to_be_bytes());
            h.extend_from_slice(ip);
            let ports = if a { (40_001, 4754) } else { (40_002, 4754) };
            outer(c.outer_v6, a, Some(ports), 17, h)
        }
        Encap::Ayiya => {
            // Identity 2^4 bytes (type integer), signature 5 x 4 bytes
            // (SHA1), shared-secret hash, opcode Forward.
            let mut h = vec![0x41, 0x52, 0x11, ip_proto];
            h.extend_from_slice(&1_300_000_000u32.to_be_bytes());
            h.extend_from_slice(&[if a { 0x11 } else { 0x22 }; 16]);
            h.extend_from_slice(&[0x5a; 20]);
            h.extend_from_slice(ip);
            let ports = if a { (53_859, 5072) } else { (5072, 53_859) };
            outer(c.outer_v6, a, Some(ports), 17, h)
        }
        Encap::Teredo if !inner_v6 => eth.to_vec(),
        Encap::Teredo => {
            let mut h = if a {
                vec![]
            } else {
                vec![0, 0, 0xf0, 0x0f, 0x3f, 0xff, 0xff, 0xfe]
            };
            h.extend_from_slice(ip);
            let ports = if a { (50_001, 3544) } else { (3544, 50_001) };
            outer(c.outer_v6, a, Some(ports), 17, h)
        }
        Encap::AhTunnel => {
            let mut h = ah(ip_proto, if a { 0x100 } else { 0x200 }, n);
            h.extend_from_slice(ip);
            outer(c.outer_v6, a, None, 51, h)
        }
        Encap::IpcompTunnel { ah } => {
            let spi = if a { 0x100 } else { 0x200 };
            let cpi = if a { 0x4001 } else { 0x4002 };
            let h = match (ah, ipcomp(ip_proto, cpi, ip)) {
                (true, Some(c)) => {
                    let mut h = self::ah(108, spi, n);
                    h.extend_from_slice(&c);
                    h
                }
                (true, None) => {
                    let mut h = self::ah(ip_proto, spi, n);
                    h.extend_from_slice(ip);
                    h
                }
                (false, c) => c.unwrap_or_else(|| {
                    // Always deflated, even when that does not shrink it.
                    let mut h = vec![ip_proto, 0];
                    h.extend_from_slice(&cpi.to_be_bytes());
                    h.extend_from_slice(&miniz_oxide::deflate::compress_to_vec(ip, 6));
                    h
                }),
            };
            outer(c.outer_v6, a, None, if ah { 51 } else { 108 }, h)
        }
        Encap::IpcompTransport => {
            let hl = if inner_v6 {
                40
            } else {
                (eth[14] & 0x0f) as usize * 4
            };
            let next = if inner_v6 { eth[14 + 6] } else { eth[14 + 9] };
            let cpi = if a { 0x4001 } else { 0x4002 };
            match ipcomp(next, cpi, &ip[hl..]) {
                Some(c) => with_payload(eth, 108, &c),
                None => eth.to_vec(),
            }
        }
        Encap::AhTransport => {
            let mut f = eth.to_vec();
            if inner_v6 {
                let next = f[14 + 6];
                f[14 + 6] = 51;
                let pl = be16(&f, 14 + 4) + 24;
                f[18..20].copy_from_slice(&pl.to_be_bytes());
                let h = ah(next, if a { 0x100 } else { 0x200 }, n);
                f.splice(14 + 40..14 + 40, h);
            } else {
                let ihl = (f[14] & 0x0f) as usize * 4;
                let next = f[14 + 9];
                f[14 + 9] = 51;
                let tl = be16(&f, 16) + 24;
                f[16..18].copy_from_slice(&tl.to_be_bytes());
                f[24..26].copy_from_slice(&[0, 0]);
                let c = offload::checksum::checksum(&f[14..14 + ihl]);
                f[24..26].copy_from_slice(&c.to_be_bytes());
                let h = ah(next, if a { 0x100 } else { 0x200 }, n);
                f.splice(14 + ihl..14 + ihl, h);
            }
            f
        }
    };
    vec![f]
}

/// The sources' IPv4 and IPv6 frames, one after the other (each a second
/// after the previous ends): (timestamp ns, frame).
fn sources() -> Vec<(i64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut next = 1_000_000_000_000i64;
    for name in SOURCES {
        let path = public().join(name);
        let mut r = CaptureReader::open(&path).unwrap();
        let mut first = None;
        let mut last = next;
        while let Some(f) = r.next_frame().unwrap() {
            assert_eq!(f.data.len(), f.orig_len as usize, "{name}: a whole frame");
            if !matches!(be16(f.data, 12), 0x0800 | 0x86dd) {
                continue;
            }
            let t0 = *first.get_or_insert(f.timestamp_ns);
            last = f.timestamp_ns - t0 + next;
            out.push((last, f.data.to_vec()));
        }
        next = last + 1_000_000_000;
    }
    out
}

fn write(path: &Path, frames: &[(i64, Vec<u8>)]) {
    let mut w = CaptureWriter::create(path, None).unwrap();
    for (ts, data) in frames {
        let meta = FrameMeta::new(*ts, LinkType::ETHERNET, data.len());
        w.write_frame(&meta, data).unwrap();
    }
    w.finish().unwrap();
}

/// The inner source address of Ethernet frame `eth`, as text.
fn inner_src(eth: &[u8]) -> Vec<u8> {
    if be16(eth, 12) == 0x86dd {
        eth[22..38].to_vec()
    } else {
        eth[26..30].to_vec()
    }
}

#[test]
fn tcp_in_encapsulations_gro_does_not_open_agrees_with_tshark() {
    let tmp = tempfile::tempdir().unwrap();
    let src = sources();
    assert!(src.len() > 100, "sources: {} frames", src.len());
    let bare = tmp.path().join("bare.pcap");
    write(&bare, &src);
    let bare_v = common::analyze_json(&bare);
    let bare_dirs = tcp_figures::offload_directions(&bare_v, "bare");
    assert!(bare_dirs.len() >= 6, "bare: {} directions", bare_dirs.len());
    let mut fails = Vec::new();
    for c in cases() {
        // Side A: the inner source of each source connection's first frame.
        let mut a_srcs: Vec<Vec<u8>> = Vec::new();
        let mut counts = [0u32; 2];
        let mut frames = Vec::new();
        for (ts, eth) in &src {
            let s = inner_src(eth);
            let peer = if be16(eth, 12) == 0x86dd {
                eth[38..54].to_vec()
            } else {
                eth[30..34].to_vec()
            };
            if !a_srcs.contains(&s) && !a_srcs.contains(&peer) {
                a_srcs.push(s.clone());
            }
            let a = a_srcs.contains(&s);
            counts[a as usize] += 1;
            for (k, f) in wrap(&c, eth, a, counts[a as usize]).into_iter().enumerate() {
                frames.push((ts + k as i64 * 1000, f));
            }
        }
        let path = tmp.path().join(format!("{}.pcap", c.name));
        write(&path, &frames);
        let v = common::analyze_json(&path);
        if matches!(c.encap, Encap::IpcompTunnel { .. } | Encap::IpcompTransport) {
            // Every IPComp payload inflated and read.
            let n = frames.iter().filter(|(_, f)| carries_ipcomp(f)).count() as u64;
            let ic = &v["inputs"][0]["ipcomp"];
            if n == 0 || ic["frames"] != n || ic["inflated"] != n || !ic["first_noted"].is_null() {
                fails.push(format!("{}: {n} IPComp frames, ipcomp {ic}", c.name));
            }
        }
        let ours = tcp_figures::offload_directions(&v, c.name);
        let theirs = tcp_figures::tshark_directions(&path);
        if ours.len() != theirs.len() || ours.len() != bare_dirs.len() {
            fails.push(format!(
                "{}: {} TCP directions, tshark {}, bare {}",
                c.name,
                ours.len(),
                theirs.len(),
                bare_dirs.len()
            ));
        }
        let fragmented = matches!(c.encap, Encap::Gtp { frag: true, .. });
        for (d, t) in &theirs {
            let dir = format!("{} {}:{} -> {}:{}", c.name, d.0, d.1, d.2, d.3);
            let Some(f) = ours.get(d) else {
                fails.push(format!("{dir}: in tshark, not in offload"));
                continue;
            };
            let n = |x: &Value| x.as_f64().unwrap_or(0.0);
            let mut cmp = |what: &str, a: f64, b: f64| {
                if a != b {
                    fails.push(format!("{dir}: {what}: offload {a} vs tshark {b}"));
                }
            };
            cmp("packets", n(&f["packets"]), t.get("packets"));
            cmp("bytes", n(&f["bytes"]), t.get("bytes"));
            cmp("payload", n(&f["payload_bytes"]), t.get("payload"));
            for (k, _) in FLAGS {
                cmp(k, n(&f["tcp"]["wireshark"][k]), t.get(k));
            }
            // The tunnel named; no healthy-tunnel figure (the kernel's GRO
            // does not open the tunnel); AH passes GRO unmerged (no
            // offload for IP protocol 51).
            let kind = f["tunnel"]["kind"].as_str();
            let plain = matches!(c.encap, Encap::Teredo) && !d.0.contains(':');
            if kind != c.kind.filter(|_| !plain) {
                fails.push(format!(
                    "{dir}: tunnel kind {kind:?}, expected {:?}",
                    c.kind
                ));
            }
            if c.kind.is_some() && !plain && f["tunnel"]["kernel_gro"] != false {
                fails.push(format!("{dir}: kernel_gro {}", f["tunnel"]["kernel_gro"]));
            }
            for w in f["what_if"].as_array().unwrap() {
                let ah = matches!(c.encap, Encap::AhTunnel | Encap::IpcompTunnel { .. });
                if c.kind.is_some()
                    && (!w["healthy_tunnel_packets"].is_null()
                        || (ah && w["stack_packets"] != w["frames"]))
                {
                    fails.push(format!("{dir}: what-if {w}"));
                }
            }
            if f["tcp"]["peer_captured"] != true {
                fails.push(format!("{dir}: not paired with its other direction"));
            }
            // Frame for frame (no fragment frames added): the TCP analysis
            // is the bare capture's.
            if !fragmented && bare_dirs.get(d).map(|b| &b["tcp"]) != Some(&f["tcp"]) {
                fails.push(format!(
                    "{dir}: the tcp object differs from the bare capture's"
                ));
            }
        }
        // The what-if is the engine's on the frames as captured: the
        // outer UDP datagrams as `offload gro` coalesces them (its default
        // `--udp-gro all` is the what-if's), not the inner connection.
        for w in v["what_if"].as_array().unwrap() {
            let out = tmp.path().join(format!("{}-gro.pcap", c.name));
            let size = w["gro_max_size"].to_string();
            let size4 = w["gro_ipv4_max_size"].to_string();
            let kernel = w["kernel"].as_str().unwrap();
            common::succeeded(
                common::offload(&[
                    "gro",
                    path.to_str().unwrap(),
                    "-o",
                    out.to_str().unwrap(),
                    "--kernel",
                    kernel,
                    "--gro-max-size",
                    &size,
                    "--gro-ipv4-max-size",
                    &size4,
                ]),
                "offload gro",
            );
            let mut r = CaptureReader::open(&out).unwrap();
            let mut n = 0u64;
            while r.next_frame().unwrap().is_some() {
                n += 1;
            }
            if w["stack_packets"] != n || w["frames_in"] != frames.len() as u64 {
                fails.push(format!("{}: what-if {w}, offload gro {n} packets", c.name));
            }
        }
        if let Some(x) = v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x.to_string().contains("IP ID rule stops GRO"))
        {
            fails.push(format!("{}: a tunnel finding: {x}", c.name));
        }
    }
    assert!(fails.is_empty(), "{}", fails.join("\n"));
}

/// IPComp payloads that are hostile or cut short cost bounded work and
/// never a panic, and each is counted: a "zip bomb" (a TCP packet, then a
/// megabyte of zeros, deflated to about a kilobyte) is read up to 65,535
/// bytes, where its packet has ended; bytes that are no DEFLATE data and
/// an LZS CPI (RFC 2395) are not inflated; a payload the capture cut
/// short inflates to what it holds; a zlib-wrapped stream inflates. The
/// TCP frames are tshark's but for the LZS one (tshark tries DEFLATE on
/// every CPI: docs/analyze.md). Needs tshark; no root.
#[test]
fn ipcomp_bomb_bad_and_cut_payloads() {
    let inner = |seq: u32, payload: Vec<u8>| {
        FrameSpec::tcp4(
            [10, 1, 0, 1],
            [10, 1, 0, 2],
            offload::build::TcpSpec::data(40_000, 80, seq),
        )
        .payload(payload)
        .build()[14..]
            .to_vec()
    };
    let comp = |cpi: u16, data: Vec<u8>| {
        let mut h = vec![4, 0];
        h.extend_from_slice(&cpi.to_be_bytes());
        h.extend_from_slice(&data);
        outer(false, true, None, 108, h)
    };
    let deflate = |d: &[u8]| miniz_oxide::deflate::compress_to_vec(d, 6);
    // Bytes a deflater cannot shrink much (a linear congruential series).
    let noise: Vec<u8> = (0..1200u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let mut bomb = inner(1, vec![b'a'; 100]);
    bomb.resize(bomb.len() + (1 << 20), 0);
    let frames: Vec<(Vec<u8>, usize)> = vec![
        (comp(0x4001, deflate(&bomb)), 0),
        (comp(0x4001, vec![0x07; 40]), 0),
        (comp(3, deflate(&inner(101, vec![b'b'; 100]))), 0),
        (comp(0x4001, deflate(&inner(201, noise))), 4),
        (
            comp(
                2,
                miniz_oxide::deflate::compress_to_vec_zlib(&inner(1401, vec![b'c'; 100]), 6),
            ),
            0,
        ),
    ];
    assert!(frames[0].0.len() < 3000, "bomb frame {}", frames[0].0.len());
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("ipcomp-hostile.pcap");
    let mut w = CaptureWriter::create(&path, None).unwrap();
    for (i, (f, cut)) in frames.iter().enumerate() {
        let meta = FrameMeta::new(1_000_000_000 * (i as i64 + 1), LinkType::ETHERNET, f.len());
        w.write_frame(&meta, &f[..f.len() - cut]).unwrap();
    }
    w.finish().unwrap();
    let v = common::analyze_json(&path);
    let ic = &v["inputs"][0]["ipcomp"];
    let want = serde_json::json!({
        "frames": 5, "inflated": 3, "cut_at_bound": 1, "other_algorithm": 1,
        "bad_data": 1, "unreadable": 0, "first_noted": 1
    });
    assert_eq!(ic, &want);
    let tcp: u64 = v["flows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["protocol"] == "tcp")
        .map(|f| f["packets"].as_u64().unwrap())
        .sum();
    let theirs =
        common::capture::tshark(&path, &["-Y", "tcp", "-T", "fields", "-e", "frame.number"]);
    let theirs: Vec<&str> = theirs.lines().collect();
    assert_eq!(theirs, ["1", "3", "4", "5"], "tshark's TCP frames");
    assert_eq!(
        tcp,
        theirs.len() as u64 - 1,
        "TCP frames: tshark's but the LZS one"
    );
}
