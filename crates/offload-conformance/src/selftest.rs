//! The Linux kernel's own GRO conformance cases
//! (`tools/testing/selftests/net/lib/gro.c`), rebuilt from their
//! description: the same packets (ports 1500 → 8000, sequence and
//! acknowledgement numbers from 100, TTL / hop limit 8, DF set, IP ID 0,
//! window 65535, payload bytes `'a'`, 100-byte segments, a FIN segment at
//! sequence 300 to end each case) for IPv4, IPv6, IPIP (IPv4 in IPv4) and
//! IPv6 in IPv6, addressed to the oracle's TAP.
//!
//! Where the selftest's sender sleeps (100 ms before the FIN of some
//! cases, 1 s inside `ip_frag6` and `data_burst`), a case is split into
//! *parts*: each part is one train, and every held packet is flushed
//! between parts, as the sleep does on the kernel.
//!
//! As in the selftest, the IP-level perturbations (`ip_ecn`, `ip_tos`,
//! `ip_ttl`, the `ip_id_*` cases) change the header right after the
//! Ethernet header: the *outer* header of an encapsulated case.

use offload::checksum;

use crate::generate::Addrs;

const SPORT: u16 = 1500;
const DPORT: u16 = 8000;
const PAYLOAD_LEN: usize = 100;
const START_SEQ: u32 = 100;
const START_ACK: u32 = 100;
const ASSUMED_MTU: usize = 4096;
const CAPACITY_PAYLOAD_LEN: usize = 200;
const CAPACITY_FLOWS: u16 = 4;
const IP_MAXPACKET: usize = 65535;
/// The Geneve header of [`Family::Geneve`]: version 0, 8 bytes of
/// options, Ethernet payload, VNI 5, one option (class 0x0102, type 0x80).
const GENEVE: [u8; 16] = [
    0x02, 0x00, 0x65, 0x58, 0x00, 0x00, 0x05, 0x00, 0x01, 0x02, 0x80, 0x01, 0xde, 0xad, 0xbe, 0xef,
];

/// The network layers of a case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    Ipv4,
    Ipv6,
    /// IPv4 in IPv4 (`ipip_gro_receive`).
    Ipip,
    /// IPv6 in IPv6 (`sit_ip6ip6_gro_receive`).
    Ip6ip6,
    /// IPv4 in GRE in IPv4, no optional field (`gre_gro_receive`). Not in
    /// the selftest: the same cases, carried by GRE.
    Gre,
    /// As [`Family::Gre`] with a key (42).
    GreKey,
    /// As [`Family::Gre`] with a checksum.
    GreCsum,
    /// As [`Family::Gre`] with a checksum and a key (where
    /// `gre_gro_receive` compares the checksum word as "the key").
    GreCsumKey,
    /// Ethernet + IPv4 in Geneve (UDP 6081, zero outer checksum, one
    /// 8-byte option) in IPv4 (`geneve_gro_receive`). Needs a Geneve
    /// device: checked on the kernels booted in the VM.
    Geneve,
}

impl Family {
    pub const ALL: [Family; 9] = [
        Family::Ipv4,
        Family::Ipv6,
        Family::Ipip,
        Family::Ip6ip6,
        Family::Gre,
        Family::GreKey,
        Family::GreCsum,
        Family::GreCsumKey,
        Family::Geneve,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Family::Ipv4 => "ipv4",
            Family::Ipv6 => "ipv6",
            Family::Ipip => "ipip",
            Family::Ip6ip6 => "ip6ip6",
            Family::Gre => "gre",
            Family::GreKey => "gre-key",
            Family::GreCsum => "gre-csum",
            Family::GreCsumKey => "gre-csum-key",
            Family::Geneve => "geneve",
        }
    }

    fn v6(self) -> bool {
        matches!(self, Family::Ipv6 | Family::Ip6ip6)
    }

    fn encapsulated(self) -> bool {
        !matches!(self, Family::Ipv4 | Family::Ipv6)
    }

    /// The GRE header of the GRE families (flags, protocol IPv4, then
    /// checksum (filled in later) and key).
    fn gre_header(self) -> Option<Vec<u8>> {
        match self {
            Family::Gre => Some(vec![0x00, 0x00, 0x08, 0x00]),
            Family::GreKey => Some(vec![0x20, 0x00, 0x08, 0x00, 0, 0, 0, 42]),
            Family::GreCsum => Some(vec![0x80, 0x00, 0x08, 0x00, 0, 0, 0, 0]),
            Family::GreCsumKey => Some(vec![0xa0, 0x00, 0x08, 0x00, 0, 0, 0, 0, 0, 0, 0, 42]),
            _ => None,
        }
    }

    fn ip_len(self) -> usize {
        if self.v6() {
            40
        } else {
            20
        }
    }

    /// Ethernet + IP header(s) (+ GRE) + TCP header without options.
    fn total_hdr_len(self) -> usize {
        14 + self.ip_len() * (1 + usize::from(self.encapsulated()))
            + self.gre_header().map_or(0, |g| g.len())
            + if self == Family::Geneve {
                8 + GENEVE.len() + 14
            } else {
                0
            }
            + 20
    }
}

/// One selftest case: its name and the trains to send.
#[derive(Debug, Clone)]
pub struct Case {
    pub name: &'static str,
    pub family: Family,
    /// Trains, each sent after everything held before it was flushed.
    pub parts: Vec<Vec<Vec<u8>>>,
}

/// Every case name the selftest defines for `family`.
pub fn case_names(family: Family) -> Vec<&'static str> {
    let mut names = vec![
        "data_same",
        "data_lrg_sml",
        "data_lrg_1byte",
        "data_sml_lrg",
        "data_burst",
        "ack",
        "flags_psh",
        "flags_syn",
        "flags_rst",
        "flags_urg",
        "flags_cwr",
        "tcp_csum",
        "tcp_seq",
        "tcp_ts",
        "tcp_opt",
        "ip_ecn",
        "ip_tos",
    ];
    if !family.v6() {
        names.push("ip_ttl");
        if !family.encapsulated() {
            // Options and fragments go on the first IP header; the
            // selftest does not run them encapsulated.
            names.extend(["ip_opt", "ip_frag4"]);
        }
        names.extend([
            "ip_id_df1_inc",
            "ip_id_df1_fixed",
            "ip_id_df0_inc",
            "ip_id_df0_fixed",
            "ip_id_df1_inc_fixed",
            "ip_id_df1_fixed_inc",
        ]);
    } else if !family.encapsulated() {
        names.extend(["ip_frag6", "ip_v6ext_same", "ip_v6ext_diff"]);
    }
    names.extend(["large_max", "large_rem", "single", "capacity"]);
    names
}

/// Every case of every family the engine is held to (Geneve apart: it
/// needs a Geneve device, which only the guests' kernels can make).
pub fn all_cases(a: &Addrs) -> Vec<Case> {
    Family::ALL
        .iter()
        .filter(|&&f| f != Family::Geneve)
        .flat_map(|&f| case_names(f).into_iter().map(move |n| (f, n)))
        .map(|(f, n)| case(a, f, n).expect("listed case"))
        .collect()
}

/// A segment being built.
#[derive(Debug, Clone)]
struct Seg {
    seq_off: u32,
    ack_off: u32,
    payload: Vec<u8>,
    /// TCP flag byte (ACK always).
    flags: u8,
    sport: u16,
    tcp_options: Vec<u8>,
    /// Changes to the first IP header (outer when encapsulated):
    /// `(tos / traffic class byte0-1 xor, ttl, id, df)`.
    first_ip: IpChange,
    /// IPv4 options on the (only) IP header.
    ip_options: Vec<u8>,
    /// IPv6 extension header (type, 8 bytes) before TCP.
    v6_ext: Option<(u8, [u8; 8])>,
    /// Extra flags/offset bits in the IPv4 fragment word (besides DF).
    frag_bits: u16,
    /// TCP checksum computed as if the payload were this many bytes of `'a'`.
    checksum_payload: Option<usize>,
    /// Subtract one from the TCP checksum after computing it.
    corrupt_checksum: bool,
}

#[derive(Debug, Clone, Copy, Default)]
struct IpChange {
    /// XOR into byte 1 (IPv4 TOS, IPv6 traffic class low nibble / flow label).
    byte1_xor: u8,
    /// IPv6: set the priority (top 4 bits of the traffic class).
    v6_priority: Option<u8>,
    /// IPv4: replace the TOS byte.
    tos: Option<u8>,
    ttl: Option<u8>,
    id: Option<u16>,
    df: Option<bool>,
}

impl Seg {
    fn data(seq_off: u32, len: usize) -> Seg {
        Seg {
            seq_off,
            ack_off: 0,
            payload: vec![b'a'; len],
            flags: TCP_ACK,
            sport: SPORT,
            tcp_options: Vec::new(),
            first_ip: IpChange::default(),
            ip_options: Vec::new(),
            v6_ext: None,
            frag_bits: 0,
            checksum_payload: None,
            corrupt_checksum: false,
        }
    }

    fn fin() -> Seg {
        let mut s = Seg::data(PAYLOAD_LEN as u32 * 2, 0);
        s.flags |= TCP_FIN;
        s
    }
}

const TCP_FIN: u8 = 0x01;
const TCP_SYN: u8 = 0x02;
const TCP_RST: u8 = 0x04;
const TCP_PSH: u8 = 0x08;
const TCP_ACK: u8 = 0x10;
const TCP_URG: u8 = 0x20;
const TCP_CWR: u8 = 0x80;

/// Writes one frame of `family` for `s`.
fn frame(a: &Addrs, family: Family, s: &Seg) -> Vec<u8> {
    let v6 = family.v6();
    // TCP header + payload.
    let thlen = 20 + s.tcp_options.len();
    let mut tcp = vec![0u8; thlen];
    tcp[0..2].copy_from_slice(&s.sport.to_be_bytes());
    tcp[2..4].copy_from_slice(&DPORT.to_be_bytes());
    tcp[4..8].copy_from_slice(&(START_SEQ + s.seq_off).to_be_bytes());
    tcp[8..12].copy_from_slice(&(START_ACK + s.ack_off).to_be_bytes());
    tcp[12] = ((thlen / 4) as u8) << 4;
    tcp[13] = s.flags;
    tcp[14..16].copy_from_slice(&65535u16.to_be_bytes());
    tcp[20..].copy_from_slice(&s.tcp_options);
    // The checksum, possibly over a payload that is not the one sent.
    let ck_payload = match s.checksum_payload {
        Some(n) => vec![b'a'; n],
        None => s.payload.clone(),
    };
    let l4_len = (thlen + ck_payload.len()) as u32;
    let pseudo = if v6 {
        checksum::pseudo_ipv6(&a.src6, &a.dst6, 6, l4_len)
    } else {
        checksum::pseudo_ipv4(a.src4, a.dst4, 6, l4_len)
    };
    let sum = checksum::sum_bytes(checksum::sum_bytes(pseudo, &tcp), &ck_payload);
    let mut check = !checksum::fold(sum);
    if s.corrupt_checksum {
        check = check.wrapping_sub(1);
    }
    tcp[16..18].copy_from_slice(&check.to_be_bytes());
    let mut l4 = tcp;
    l4.extend_from_slice(&s.payload);

    // Inner (or only) IP header.
    let mut packet = if v6 {
        ipv6_header(a, &l4, s.v6_ext, 6)
    } else {
        ipv4_header(a, &l4, &s.ip_options, s.frag_bits, 6)
    };
    packet.extend_from_slice(&l4);
    if family == Family::Geneve {
        let mut udp = vec![0u8; 8];
        udp[0..2].copy_from_slice(&49152u16.to_be_bytes());
        udp[2..4].copy_from_slice(&6081u16.to_be_bytes());
        udp.extend_from_slice(&GENEVE);
        udp.extend_from_slice(&[2, 0, 0, 0, 0, 0xa1, 2, 0, 0, 0, 0, 0xa2, 0x08, 0x00]);
        udp.extend_from_slice(&packet);
        let ul = udp.len() as u16;
        udp[4..6].copy_from_slice(&ul.to_be_bytes());
        let mut outer = ipv4_header(a, &udp, &[], 0, 17);
        outer.extend_from_slice(&udp);
        packet = outer;
    } else if let Some(mut gre) = family.gre_header() {
        gre.extend_from_slice(&packet);
        if gre[0] & 0x80 != 0 {
            let c = checksum::checksum(&gre);
            gre[4..6].copy_from_slice(&c.to_be_bytes());
        }
        let mut outer = ipv4_header(a, &gre, &[], 0, 47);
        outer.extend_from_slice(&gre);
        packet = outer;
    } else if family.encapsulated() {
        let mut outer = if v6 {
            ipv6_header(a, &packet, None, 41)
        } else {
            ipv4_header(a, &packet, &[], 0, 4)
        };
        outer.extend_from_slice(&packet);
        packet = outer;
    }
    apply_first_ip(&mut packet, v6, s.first_ip);

    let mut f = Vec::with_capacity(14 + packet.len());
    f.extend_from_slice(&a.dst_mac);
    f.extend_from_slice(&a.src_mac);
    f.extend_from_slice(if v6 { &[0x86, 0xdd] } else { &[0x08, 0x00] });
    f.extend_from_slice(&packet);
    f
}

/// An IPv4 header for `payload` (TTL 8, DF, ID 0).
fn ipv4_header(a: &Addrs, payload: &[u8], options: &[u8], frag_bits: u16, proto: u8) -> Vec<u8> {
    let ihl = 20 + options.len();
    let mut h = vec![0u8; ihl];
    h[0] = 0x40 | (ihl / 4) as u8;
    h[2..4].copy_from_slice(&((ihl + payload.len()) as u16).to_be_bytes());
    h[6..8].copy_from_slice(&(0x4000 | frag_bits).to_be_bytes());
    h[8] = 8;
    h[9] = proto;
    h[12..16].copy_from_slice(&a.src4);
    h[16..20].copy_from_slice(&a.dst4);
    h[20..].copy_from_slice(options);
    let c = checksum::checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h
}

/// An IPv6 header for `payload` (hop limit 8), optionally with one
/// 8-byte extension header before it.
fn ipv6_header(a: &Addrs, payload: &[u8], ext: Option<(u8, [u8; 8])>, proto: u8) -> Vec<u8> {
    let mut h = vec![0u8; 40];
    h[0] = 0x60;
    let ext_len = if ext.is_some() { 8 } else { 0 };
    h[4..6].copy_from_slice(&((payload.len() + ext_len) as u16).to_be_bytes());
    h[6] = proto;
    h[7] = 8;
    h[8..24].copy_from_slice(&a.src6);
    h[24..40].copy_from_slice(&a.dst6);
    if let Some((kind, body)) = ext {
        h[6] = kind;
        let mut e = body;
        e[0] = proto;
        h.extend_from_slice(&e);
    }
    h
}

/// The selftest's changes to the IP header right after Ethernet.
fn apply_first_ip(p: &mut [u8], v6: bool, c: IpChange) {
    if v6 {
        if let Some(prio) = c.v6_priority {
            p[0] = 0x60 | (prio & 0x0f);
        }
        p[1] ^= c.byte1_xor;
        return;
    }
    if let Some(t) = c.tos {
        p[1] = t;
    }
    p[1] ^= c.byte1_xor;
    if let Some(t) = c.ttl {
        p[8] = t;
    }
    if let Some(id) = c.id {
        p[4..6].copy_from_slice(&id.to_be_bytes());
    }
    if let Some(df) = c.df {
        let word = u16::from_be_bytes([p[6], p[7]]);
        let word = if df { word | 0x4000 } else { word & !0x4000 };
        p[6..8].copy_from_slice(&word.to_be_bytes());
    }
    let ihl = (p[0] & 0x0f) as usize * 4;
    p[10] = 0;
    p[11] = 0;
    let c = checksum::checksum(&p[..ihl]);
    p[10..12].copy_from_slice(&c.to_be_bytes());
}

/// NOP, NOP, timestamp; or the other two orders of the same 12 bytes.
/// The selftest stores `tsval` in host order (little-endian here).
fn ts_options(ts: u32, order: u8) -> Vec<u8> {
    let mut t = vec![8u8, 10];
    t.extend_from_slice(&ts.to_le_bytes());
    t.extend_from_slice(&[0; 4]);
    match order {
        0 => [vec![1, 1], t].concat(),
        1 => [vec![1], t, vec![1]].concat(),
        _ => [t, vec![1, 1]].concat(),
    }
}

/// Builds the named case, or `None` if the selftest has no such case for
/// this family.
pub fn case(a: &Addrs, family: Family, name: &'static str) -> Option<Case> {
    if !case_names(family).contains(&name) {
        return None;
    }
    let p = PAYLOAD_LEN;
    let f = |s: &Seg| frame(a, family, s);
    let fin = f(&Seg::fin());
    let data = |seq: usize, len: usize| f(&Seg::data(seq as u32, len));
    let parts: Vec<Vec<Vec<u8>>> = match name {
        "data_same" => vec![vec![data(0, p), data(p, p), fin]],
        "data_lrg_sml" => vec![vec![data(0, p), data(p, p / 2), fin]],
        "data_lrg_1byte" => vec![vec![data(0, p), data(p, 1), fin]],
        "data_sml_lrg" => vec![vec![data(0, p / 2), data(p / 2, p), fin]],
        "data_burst" => vec![
            vec![data(0, p), data(p, p)],
            vec![data(2 * p, p), data(3 * p, p), fin],
        ],
        "ack" => {
            let ack0 = data(0, 0);
            let mut s = Seg::data(0, 0);
            s.ack_off = 1;
            vec![vec![ack0.clone(), ack0, f(&s), fin]]
        }
        "flags_psh" | "flags_syn" | "flags_rst" | "flags_urg" | "flags_cwr" => {
            let flag = match name {
                "flags_psh" => TCP_PSH,
                "flags_syn" => TCP_SYN,
                "flags_rst" => TCP_RST,
                "flags_urg" => TCP_URG,
                _ => TCP_CWR,
            };
            let with_data = flag == TCP_PSH || flag == TCP_CWR;
            let flen = if with_data { p } else { 0 };
            let flagged = |i: usize| {
                let mut s = Seg::data((i * flen) as u32, flen);
                s.flags |= flag;
                f(&s)
            };
            let mut t = Vec::new();
            for i in 0..5 {
                if i == 2 || (i == 1 && flag == TCP_CWR) {
                    t.push(flagged(i));
                } else {
                    t.push(data(i * p, p));
                }
            }
            t.push(fin);
            vec![t]
        }
        "tcp_csum" => {
            let mut s = Seg::data(p as u32, p);
            s.corrupt_checksum = true;
            vec![vec![data(0, p), f(&s)], vec![fin]]
        }
        "tcp_seq" => {
            let s = Seg::data(p as u32 + 1, p);
            vec![vec![data(0, p), f(&s)], vec![fin]]
        }
        "tcp_ts" => {
            let opts = |seq: usize, ts: u32, order: u8| {
                let mut s = Seg::data(seq as u32, p);
                s.tcp_options = ts_options(ts, order);
                f(&s)
            };
            vec![
                vec![
                    opts(0, 0, 0),
                    opts(p, 0, 0),
                    opts(2 * p, 100, 0),
                    opts(3 * p, 100, 1),
                    opts(4 * p, 100, 2),
                ],
                vec![fin],
            ]
        }
        "tcp_opt" => {
            let mut s1 = Seg::data(0, p);
            s1.tcp_options = ts_options(0, 0);
            let mut s2 = s1.clone();
            s2.seq_off = p as u32;
            let mut s3 = Seg::data(2 * p as u32, p);
            s3.tcp_options = vec![1, 3, 3, 0];
            vec![vec![f(&s1), f(&s2), f(&s3)], vec![fin]]
        }
        "ip_ecn" | "ip_tos" | "ip_ttl" => {
            let mut s = Seg::data(p as u32, p);
            match (name, family.v6()) {
                ("ip_ecn", false) => s.first_ip.byte1_xor = 0x02,
                ("ip_ecn", true) => s.first_ip.byte1_xor = 0x20,
                ("ip_tos", false) => s.first_ip.tos = Some(1),
                ("ip_tos", true) => s.first_ip.v6_priority = Some(0xf),
                _ => s.first_ip.ttl = Some(7),
            }
            vec![vec![data(0, p), f(&s), fin]]
        }
        "ip_opt" => {
            // An IPv4 timestamp option (IPOPT_TS, length 8, pointer 5,
            // timestamps only) on the middle segment.
            let mut s = Seg::data(p as u32, p);
            s.ip_options = vec![0x44, 8, 5, 0, 0, 0, 0, 0];
            vec![vec![data(0, p), f(&s), data(2 * p, p)], vec![fin]]
        }
        "ip_frag4" => {
            // DF and MF set; the TCP header is made for 200 bytes of
            // payload, of which 100 are sent.
            let mut s = Seg::data(p as u32, p);
            s.frag_bits = 0x2000;
            s.checksum_payload = Some(2 * p);
            vec![vec![data(0, p), f(&s)], vec![fin]]
        }
        name if name.starts_with("ip_id_") => {
            let (ids, df): (&[u16], bool) = match name {
                "ip_id_df1_inc" => (&[8, 9], true),
                "ip_id_df1_fixed" => (&[8, 8], true),
                "ip_id_df0_inc" => (&[8, 9], false),
                "ip_id_df0_fixed" => (&[8, 8], false),
                "ip_id_df1_inc_fixed" => (&[8, 9, 9], true),
                _ => (&[8, 8, 9], true),
            };
            let t = ids
                .iter()
                .enumerate()
                .map(|(i, &id)| {
                    let mut s = Seg::data((i * p) as u32, p);
                    s.first_ip.id = Some(id);
                    s.first_ip.df = Some(df);
                    f(&s)
                })
                .collect();
            vec![t, vec![fin]]
        }
        "ip_frag6" => {
            let mut frag = Seg::data(2 * p as u32, p);
            frag.v6_ext = Some((44, [0; 8]));
            vec![
                vec![data(0, p), data(p, p)],
                vec![f(&frag), data(3 * p, p)],
                vec![fin],
            ]
        }
        "ip_v6ext_same" | "ip_v6ext_diff" => {
            let ext = |seq: usize, fill: u8| {
                let mut s = Seg::data(seq as u32, p);
                let mut body = [fill; 8];
                body[1] = 0; // hdrlen 0: 8 bytes
                s.v6_ext = Some((60, body));
                f(&s)
            };
            let second = if name == "ip_v6ext_same" { 0x00 } else { 0x11 };
            vec![vec![ext(0, 0x00), ext(p, second)], vec![fin]]
        }
        "large_max" | "large_rem" => {
            let hdr = family.total_hdr_len() - 14;
            let mss = ASSUMED_MTU - hdr;
            let max_payload = IP_MAXPACKET - hdr;
            let n = max_payload / mss;
            let rem = max_payload % mss + usize::from(name == "large_rem");
            let mut t: Vec<_> = (0..n).map(|i| data(i * mss, mss)).collect();
            t.push(data(n * mss, rem));
            t.push(data((n + 1) * mss, rem));
            t.push(fin);
            vec![t]
        }
        "single" => vec![vec![data(0, p), fin]],
        "capacity" => {
            let seg = |flow: u16, idx: usize, psh: bool| {
                let mut s = Seg::data((idx * CAPACITY_PAYLOAD_LEN) as u32, CAPACITY_PAYLOAD_LEN);
                s.payload = vec![b'a' + flow as u8; CAPACITY_PAYLOAD_LEN];
                s.sport = SPORT + flow;
                if psh {
                    s.flags |= TCP_PSH;
                }
                f(&s)
            };
            let mut t: Vec<_> = (0..CAPACITY_FLOWS).map(|i| seg(i, 0, false)).collect();
            t.extend((0..CAPACITY_FLOWS).map(|i| seg(i, 1, true)));
            vec![t, vec![fin]]
        }
        _ => return None,
    };
    Some(Case {
        name,
        family,
        parts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs() -> Addrs {
        Addrs {
            dst_mac: [2, 0, 0, 0, 0, 1],
            src_mac: [2, 0, 0, 0, 0, 2],
            dst4: [192, 0, 2, 1],
            src4: [192, 0, 2, 2],
            dst6: [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            src6: [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
        }
    }

    /// Every built frame has valid IP lengths and checksums unless the case
    /// is about breaking them.
    #[test]
    fn frames_are_well_formed() {
        let a = addrs();
        for c in all_cases(&a) {
            for f in c.parts.iter().flatten() {
                let et = u16::from_be_bytes([f[12], f[13]]);
                if et == 0x0800 {
                    let ihl = (f[14] & 0x0f) as usize * 4;
                    assert_eq!(checksum::checksum(&f[14..14 + ihl]), 0, "{}", c.name);
                    let tot = u16::from_be_bytes([f[16], f[17]]) as usize;
                    assert_eq!(tot, f.len() - 14, "{} {}", c.family.name(), c.name);
                } else {
                    let plen = u16::from_be_bytes([f[18], f[19]]) as usize;
                    assert_eq!(plen, f.len() - 54, "{} {}", c.family.name(), c.name);
                }
            }
        }
    }

    #[test]
    fn case_counts_follow_the_selftest() {
        assert_eq!(case_names(Family::Ipv4).len(), 30);
        assert_eq!(case_names(Family::Ipv6).len(), 24);
        assert_eq!(case_names(Family::Ipip).len(), 28);
        assert_eq!(case_names(Family::Ip6ip6).len(), 21);
        let a = addrs();
        assert!(case(&a, Family::Ipip, "ip_frag6").is_none());
        // IPIP large: 16 full segments of 4036 bytes, then the remainder.
        let c = case(&a, Family::Ipip, "large_max").unwrap();
        assert_eq!(c.parts[0].len(), 16 + 2 + 1);
        assert_eq!(c.parts[0][0].len(), 14 + 20 + 20 + 20 + 4036);
    }
}
