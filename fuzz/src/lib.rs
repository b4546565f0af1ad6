//! The bodies of the fuzz targets, as plain functions.
//!
//! Each `fuzz_targets/*.rs` is a one-line `fuzz_target!` around one of
//! these, so that the same code also runs without libFuzzer: the `replay`
//! example feeds it seed files and random mutations on a stable toolchain
//! (`scripts/fuzz-smoke.sh` falls back to it when nightly or cargo-fuzz is
//! missing; see `docs/decisions/0050-fuzzing-toolchain.md`).
//!
//! Every body panics on a broken invariant, never on bad input: a panic is a
//! finding.

pub mod seeds;

use offload::gro::{KernelLine, UdpGro};
use offload::gso::{self, GsoParams};
use offload::link::{self, LinkKind};
use offload::wire::{ethernet, ipv4, ipv6, sll, tcp, udp, IpVersion, Transport};
use offload::{Delivered, GroConfig, GroEngine, Input};
use offload_capture::{CaptureReader, MAX_FRAME_LEN};

/// Every link kind, indexed by the selector bytes of the input formats.
pub const LINKS: [LinkKind; 6] = [
    LinkKind::Ethernet,
    LinkKind::RawIp,
    LinkKind::Ipv4,
    LinkKind::Ipv6,
    LinkKind::LinuxSll,
    LinkKind::LinuxSll2,
];

/// The names of the targets, as `fuzz_targets/<name>.rs` and for `replay`.
pub const TARGETS: [&str; 6] = [
    "analyze_capture",
    "capture_reader",
    "wire_parsers",
    "gro_engine",
    "gso_segment",
    "bench_control",
];

/// Runs the target called `name`; `None` for an unknown name.
pub fn run(name: &str, data: &[u8]) -> Option<()> {
    match name {
        "analyze_capture" => analyze_capture(data),
        "capture_reader" => capture_reader(data),
        "wire_parsers" => wire_parsers(data),
        "gro_engine" => gro_engine(data),
        "gso_segment" => gso_segment(data),
        "bench_control" => bench_control(data),
        _ => return None,
    }
    Some(())
}

/// The link types `offload analyze` reads: the engine's and those
/// `offload_analyze::link` opens (worked out once, so a link type added
/// there is fuzzed too).
pub fn analyze_linktypes() -> &'static [u32] {
    static TYPES: std::sync::OnceLock<Vec<u32>> = std::sync::OnceLock::new();
    TYPES.get_or_init(|| {
        (0..=300)
            .filter(|t| {
                LinkKind::from_linktype(*t).is_some()
                    || offload_analyze::link::linktype_name(*t).is_some()
            })
            .collect()
    })
}

/// `offload analyze`'s whole pass (link types, dissection of every
/// tunnel, IP fragment reassembly, the TCP analysis, the GRO what-if, the
/// findings) and its JSON and text reports, on a pcap built from the input:
/// byte 0 picks the link type, byte 1 which frames the capture cut short
/// (their wire length longer than their bytes) and whether checksums are
/// verified; the rest is frames, each a 2-byte length and its bytes (at most
/// 256). Invariants: the pass succeeds on a well-formed capture, reads every
/// frame, and its report serialises.
pub fn analyze_capture(data: &[u8]) {
    let [sel, cut, rest @ ..] = data else {
        return;
    };
    let types = analyze_linktypes();
    let linktype = types[*sel as usize % types.len()];
    let mut pcap = Vec::with_capacity(24 + rest.len() + 16 * 256);
    for v in [0xa1b2_c3d4u32] {
        pcap.extend_from_slice(&v.to_le_bytes());
    }
    pcap.extend_from_slice(&2u16.to_le_bytes());
    pcap.extend_from_slice(&4u16.to_le_bytes());
    for v in [0u32, 0, 262_144, linktype] {
        pcap.extend_from_slice(&v.to_le_bytes());
    }
    let mut frames = 0u64;
    let mut at = 0;
    while at + 2 <= rest.len() && frames < 256 {
        let n = u16::from_be_bytes([rest[at], rest[at + 1]]) as usize;
        at += 2;
        let f = &rest[at..(at + n).min(rest.len())];
        at += f.len();
        let extra = if (cut >> (frames % 7)) & 1 == 1 {
            1 + (n as u32 % 9000)
        } else {
            0
        };
        // 50 us apart, every 16th frame 1 ms back in time.
        let us = 1_000_000 + frames * 50 - if frames % 16 == 15 { 1000 } else { 0 };
        for v in [
            1_700_000_000 + (us / 1_000_000) as u32,
            (us % 1_000_000) as u32,
            f.len() as u32,
            f.len() as u32 + extra,
        ] {
            pcap.extend_from_slice(&v.to_le_bytes());
        }
        pcap.extend_from_slice(f);
        frames += 1;
    }
    let path = memfd_path(&pcap);
    let opts = offload_analyze::Options {
        verify_checksums: cut & 0x80 == 0,
        ..offload_analyze::Options::default()
    };
    let cancel = std::sync::atomic::AtomicBool::new(false);
    let mut progress = |_| {};
    let mut ctl = offload_capture::Control {
        on_progress: &mut progress,
        cancel: &cancel,
    };
    let a = offload_analyze::analyze(&[path], &opts, &mut ctl)
        .unwrap_or_else(|e| panic!("analyze refused a well-formed capture: {e}"));
    let input = &a.report.inputs[0];
    assert_eq!(input.frames, frames, "frames read");
    assert!(input.error.is_none(), "{:?}", input.error);
    serde_json::to_string(&a.report).expect("the report serialises");
    let _ = offload_analyze::text::render(&a.report, 10);
}

/// Writes `bytes` to this process's one anonymous in-memory file and
/// returns a path that opens it: nothing on disk to leave behind, whatever
/// way the fuzzer ends.
fn memfd_path(bytes: &[u8]) -> std::path::PathBuf {
    use std::io::{Seek, Write};
    static FILE: std::sync::OnceLock<std::sync::Mutex<std::fs::File>> = std::sync::OnceLock::new();
    let file = FILE.get_or_init(|| {
        let fd = rustix::fs::memfd_create("offload-fuzz-analyze", rustix::fs::MemfdFlags::CLOEXEC)
            .expect("memfd_create");
        std::sync::Mutex::new(std::fs::File::from(fd))
    });
    let mut f = file.lock().unwrap_or_else(|e| e.into_inner());
    f.set_len(0).expect("truncate the memfd");
    f.rewind().expect("rewind the memfd");
    f.write_all(bytes).expect("write the memfd");
    use std::os::fd::AsRawFd;
    std::path::PathBuf::from(format!("/proc/self/fd/{}", f.as_raw_fd()))
}

/// The pcap/pcapng reader on arbitrary bytes. Invariants: frame numbers
/// increase, a frame's interface exists, caplen stays within the reader's
/// limit, and error offsets and bytes read stay within the input.
pub fn capture_reader(data: &[u8]) {
    let len = data.len() as u64;
    let Ok(mut r) = CaptureReader::from_reader(std::io::Cursor::new(data.to_vec()), "fuzz") else {
        return;
    };
    let mut last = 0;
    loop {
        let (number, caplen, iface) = match r.next_frame() {
            Ok(Some(f)) => (f.number, f.data.len(), f.interface),
            Ok(None) => break,
            Err(e) => {
                assert!(e.offset <= len, "error offset {} past {len}", e.offset);
                let _ = e.to_string();
                break;
            }
        };
        assert!(number > last, "frame number {number} after {last}");
        last = number;
        assert!(caplen <= MAX_FRAME_LEN as usize);
        assert!((iface as usize) < r.interfaces().len());
    }
    assert!(r.bytes_read() <= len);
}

/// Every wire view, `link::dissect_l2` and the GSO layout finder on the
/// input and on each of its first 64 suffixes (every offset is a header
/// boundary for some layer). Invariant: offsets a parser reports lie
/// within the bytes it was given.
pub fn wire_parsers(data: &[u8]) {
    for skip in 0..data.len().min(64) {
        touch_views(&data[skip..]);
    }
}

fn touch_views(b: &[u8]) {
    if let Ok(e) = ethernet::Ethernet::new_checked(b) {
        let _ = (e.dst(), e.src(), e.ethertype());
        if let Ok(t) = e.walk_tags() {
            assert!(t.l3_offset <= b.len(), "VLAN walk past the end");
        }
    }
    if let Ok(ip) = ipv4::Ipv4::new_checked(b) {
        let _ = (
            ip.tos(),
            ip.total_len(),
            ip.ident(),
            ip.frag_word(),
            ip.dont_fragment(),
            ip.is_fragment(),
            ip.ttl(),
            ip.protocol(),
            ip.header_checksum(),
            ip.src(),
            ip.dst(),
            ip.header_checksum_ok(),
            ip.effective_len(b.len()),
        );
        assert!(ip.header_len() <= b.len());
        let mut copy = b.to_vec();
        let mut w = ipv4::Ipv4::new_checked(&mut copy[..]).expect("same bytes as above");
        w.set_total_len_incremental(0xffff);
        w.fill_header_checksum();
        assert!(
            w.header_checksum_ok(),
            "fill_header_checksum left a bad checksum"
        );
    }
    if let Ok(ip) = ipv6::Ipv6::new_checked(b) {
        let _ = (
            ip.first_word(),
            ip.traffic_class(),
            ip.flow_label(),
            ip.payload_len(),
            ip.next_header(),
            ip.hop_limit(),
            ip.src(),
            ip.dst(),
        );
        if let Ok(chain) = ip.walk_ext() {
            assert!(
                chain.upper_offset <= b.len(),
                "extension chain past the end"
            );
        }
    }
    if let Ok(t) = tcp::Tcp::new_checked(b) {
        let _ = (
            t.src_port(),
            t.dst_port(),
            t.port_word(),
            t.seq(),
            t.ack(),
            t.flags(),
            t.flag_word(),
            t.window(),
            t.checksum(),
            t.urgent(),
            t.options(),
            t.timestamps(),
        );
        assert!(t.header_len() <= b.len());
    }
    if let Ok(u) = udp::Udp::new_checked(b) {
        let _ = (u.src_port(), u.dst_port(), u.length(), u.checksum());
    }
    for c in [sll::parse_sll(b), sll::parse_sll2(b)]
        .into_iter()
        .flatten()
    {
        assert!(c.header_len <= b.len());
    }
    for l in LINKS {
        if let Ok(info) = link::dissect_l2(l, b) {
            assert!(info.l3_offset <= b.len(), "{l:?}: L3 offset past the end");
            assert!(info.key_len <= b.len());
        }
        if let Ok(lay) = gso::layout(l, b, &[4789]) {
            assert!(lay.end <= b.len(), "{l:?}: layout end past the end");
            assert!(lay.l4_off + lay.l4_header_len <= b.len().max(lay.end));
        }
    }
}

/// Reads the GRO knobs from two selector bytes.
///
/// `a`: bit 0 verify checksums, bit 1 VLAN GRO, bits 2–3 flush timeout
/// (0, 50 µs, ∞), bits 4–5 size limit (64 KiB, 185 000, `GRO_MAX_SIZE`),
/// bit 6 IPv4 limit 64 KiB whatever the IPv6 one, bit 7 with `b`'s bit 7
/// the kernel line (6.18, 6.1, 6.12, 7.x). `b`: bits 0–1 UDP GRO
/// (off, a few ports, all), bit 2 no VXLAN or Geneve port, bit 3 a small size limit
/// (4 000 + 1 000 × `b >> 4` bytes) so that short inputs reach the size
/// check too.
pub fn config_from(a: u8, b: u8) -> GroConfig {
    let size = if b & 8 != 0 {
        4_000 + 1_000 * u32::from(b >> 4)
    } else {
        match (a >> 4) & 3 {
            0 | 1 => 65_536,
            2 => 185_000,
            _ => offload::gro::GRO_MAX_SIZE,
        }
    };
    GroConfig::default()
        .gro_max_size(size)
        .gro_ipv4_max_size(if a & 0x40 != 0 { 65_536 } else { size })
        .flush_timeout_ns(match (a >> 2) & 3 {
            0 => 0,
            1 => 50_000,
            _ => u64::MAX / 4,
        })
        .verify_checksums(a & 1 != 0)
        .vlan_gro(a & 2 != 0)
        .udp(match b & 3 {
            0 => UdpGro::Off,
            1 => UdpGro::Ports(vec![443, 4789, u16::from(b)]),
            _ => UdpGro::AllPorts,
        })
        .vxlan_ports(if b & 4 != 0 { vec![] } else { vec![4789] })
        .geneve_ports(if b & 4 != 0 { vec![] } else { vec![6081] })
        // Every kernel line's rules, so that no profile can reorder the
        // per-packet checks into a panic; 0 is the reference line.
        .kernel(
            [
                KernelLine::V6_18,
                KernelLine::V6_1,
                KernelLine::V6_12,
                KernelLine::V7,
            ][usize::from(a >> 7) | usize::from((b >> 6) & 2)],
        )
        // The kernel-loss model on and off (bit 4 of b also sizes the
        // small limit).
        .kernel_losses(b & 0x10 != 0)
}

/// Copies a record expands to (`flags` bits 3–5): long trains, up to BIG
/// TCP sizes, from short inputs.
const COPIES: [usize; 8] = [1, 2, 4, 8, 16, 45, 90, 180];

/// One frame of a `gro_engine` input.
#[derive(Debug, Clone, Copy)]
pub struct Record<'a> {
    pub link: LinkKind,
    /// Nanoseconds since the previous frame.
    pub gap_ns: u64,
    /// Bytes the capture cut off (`orig_len - data.len()`).
    pub cut: u32,
    /// How many frames this record stands for (see [`expand`]).
    pub copies: usize,
    pub data: &'a [u8],
}

/// Splits a `gro_engine` input: 2 config bytes ([`config_from`]), then
/// records of `[flags][gap µs][len hi][len lo]` + `len` bytes (fewer if the
/// input ends). Flags: bits 0–2 link (`% 6`), bits 3–5 copies
/// ([`COPIES`]), bit 7 the capture cut 64 bytes.
pub fn split_records(data: &[u8]) -> (GroConfig, Vec<Record<'_>>) {
    let (a, b) = (
        data.first().copied().unwrap_or(0),
        data.get(1).copied().unwrap_or(0),
    );
    let cfg = config_from(a, b);
    let mut recs = Vec::new();
    let mut rest = data.get(2..).unwrap_or(&[]);
    while rest.len() >= 4 {
        let flags = rest[0];
        let len = usize::from(u16::from_be_bytes([rest[2], rest[3]]));
        let body = &rest[4..];
        let take = len.min(body.len());
        recs.push(Record {
            link: LINKS[usize::from(flags & 7) % LINKS.len()],
            gap_ns: u64::from(rest[1]) * 1_000,
            cut: if flags & 0x80 != 0 { 64 } else { 0 },
            copies: COPIES[usize::from((flags >> 3) & 7)],
            data: &body[..take],
        });
        rest = &body[take..];
    }
    (cfg, recs)
}

/// Encodes records in the `gro_engine` input format (for seeds): link,
/// gap in µs, copies index (0 = one frame), bytes.
pub fn encode_records(cfg: (u8, u8), frames: &[(LinkKind, u8, u8, &[u8])]) -> Vec<u8> {
    let mut out = vec![cfg.0, cfg.1];
    for (link, gap_us, copies, data) in frames {
        let idx = LINKS.iter().position(|l| l == link).expect("a known link") as u8;
        out.push(idx | (copies & 7) << 3);
        out.push(*gap_us);
        out.extend_from_slice(&(data.len().min(0xffff) as u16).to_be_bytes());
        out.extend_from_slice(&data[..data.len().min(0xffff)]);
    }
    out
}

/// The frames a record stands for: the frame itself, then copies that
/// continue its flow the way a sender would (TCP sequence advanced by the
/// payload, IPv4 IDs, inner and outer, incremented, IPv4 header checksums
/// refreshed). Transport checksums are left stale, so copies merge only
/// with checksum verification off; with it on they exercise the
/// bad-checksum path.
pub fn expand(r: &Record<'_>, vxlan_ports: &[u16]) -> Vec<Vec<u8>> {
    let mut out = vec![r.data.to_vec()];
    if r.copies == 1 {
        return out;
    }
    let Ok(lay) = gso::layout(r.link, r.data, vxlan_ports) else {
        return out;
    };
    let step = lay.payload_len() as u32;
    for i in 1..r.copies {
        let mut f = r.data.to_vec();
        if lay.l4_proto == Transport::Tcp && f.len() >= lay.l4_off + 8 {
            let at = lay.l4_off + 4;
            let seq = u32::from_be_bytes([f[at], f[at + 1], f[at + 2], f[at + 3]]);
            let seq = seq.wrapping_add(step.wrapping_mul(i as u32));
            f[at..at + 4].copy_from_slice(&seq.to_be_bytes());
        }
        // The IPv4 header checksum is always verified (`inet_gro_receive`),
        // so it is refreshed; the transport checksum is not.
        let mut bump_id = |l3: usize| {
            if let Ok(mut ip) = ipv4::Ipv4::new_checked(&mut f[l3..]) {
                let id = ip.ident().wrapping_add(i as u16);
                ip.set_ident(id);
                ip.fill_header_checksum();
            }
        };
        if !lay.is_v6() {
            bump_id(lay.l3_off);
        }
        if let Some(o) = lay.outer.filter(|o| o.ip == IpVersion::V4) {
            bump_id(o.l3_off);
        }
        out.push(f);
    }
    out
}

/// The GRO engine on a sequence of frames split from the input.
/// Invariants: every frame comes out exactly once (alone or inside a
/// super-packet), nothing stays held after `finish`, the statistics agree
/// with the deliveries, GSO splits every super-packet back into as many
/// segments as GRO merged, and the zero-copy delivery (the default) and the
/// contiguous one give the same packets.
pub fn gro_engine(data: &[u8]) {
    let (cfg, recs) = split_records(data);
    // Every frame is kept: zero-copy deliveries borrow payloads from them.
    let mut frames = Vec::new();
    let mut ts = 0u64;
    for r in &recs {
        ts += r.gap_ns;
        for f in expand(r, &cfg.vxlan_ports) {
            let orig_len = f.len() as u32 + r.cut;
            frames.push(KeptFrame {
                bytes: f,
                link: r.link,
                timestamp_ns: ts,
                orig_len,
            });
        }
    }
    let zero_copy = gro_engine_delivering(&cfg, &frames, true);
    let copied = gro_engine_delivering(&cfg, &frames, false);
    assert!(
        zero_copy == copied,
        "zero-copy and contiguous deliveries differ"
    );
}

/// A frame of a [`gro_engine`] input, kept for the whole run.
struct KeptFrame {
    bytes: Vec<u8>,
    link: LinkKind,
    timestamp_ns: u64,
    orig_len: u32,
}

/// One run of [`gro_engine`]: the packets delivered, made contiguous.
fn gro_engine_delivering(cfg: &GroConfig, frames: &[KeptFrame], zero_copy: bool) -> Vec<Vec<u8>> {
    let mut engine = GroEngine::new(cfg.clone());
    engine.set_zero_copy(zero_copy);
    let mut segments = 0u64;
    let mut deliveries = 0u64;
    let mut packets = Vec::new();
    let mut out = |d: &Delivered<'_>| {
        deliveries += 1;
        segments += u64::from(d.segments);
        assert!(d.segments >= 1);
        assert_eq!(d.segments == 1, d.gso_size == 0, "gso_size {}", d.gso_size);
        assert!(d.first_frame <= d.last_frame);
        let packet = d.to_vec(|n| &frames[n as usize - 1].bytes);
        if d.segments > 1 {
            let p = GsoParams::from_gso(d.gso_size, d.gso_type);
            let mut emitted = 0usize;
            let r = gso::segment(d.link, &packet, &p, &cfg.vxlan_ports, &mut |_s: &[u8]| {
                emitted += 1
            });
            assert_eq!(
                r,
                Ok(d.segments as usize),
                "GSO of a {}-segment super-packet (gso_size {}, type {:#x})",
                d.segments,
                d.gso_size,
                d.gso_type
            );
            assert_eq!(emitted, d.segments as usize);
        }
        packets.push(packet);
    };
    for (i, f) in frames.iter().enumerate() {
        let input = Input {
            data: &f.bytes,
            link: f.link,
            timestamp_ns: f.timestamp_ns,
            frame: i as u64 + 1,
            orig_len: f.orig_len,
        };
        engine.receive(input, &mut out);
    }
    engine.finish(&mut out);
    let n = frames.len() as u64;
    assert_eq!(segments, n, "frames in != segments out");
    assert_eq!(engine.held_count(), 0);
    let stats = engine.stats();
    assert_eq!(stats.frames_in, n);
    assert_eq!(stats.packets_out, deliveries);
    packets
}

/// Segmentation of one frame: `[link][mss hi][mss lo][flags]` + frame.
/// MSS 0 is kept (an error case); flags select fixed IDs, AccECN and
/// whether port 4789 is VXLAN. Invariants: the count returned is the count
/// emitted; a segmented packet's pieces each carry at most `mss` payload
/// bytes and together carry exactly the original payload.
pub fn gso_segment(data: &[u8]) {
    if data.len() < 4 {
        return;
    }
    let link = LINKS[usize::from(data[0]) % LINKS.len()];
    let mss = u32::from(u16::from_be_bytes([data[1], data[2]]));
    let fl = data[3];
    let frame = &data[4..];
    let mut p = GsoParams::new(mss);
    p.fixed_id = fl & 1 != 0;
    p.fixed_id_inner = fl & 2 != 0;
    p.accecn = fl & 4 != 0;
    let ports: &[u16] = if fl & 8 != 0 { &[4789] } else { &[] };

    let mut emitted = 0usize;
    if let Ok(n) = gso::segment_tcp(link, frame, &p, &mut |_s: &[u8]| emitted += 1) {
        assert_eq!(n, emitted);
    }

    let Ok(lay) = gso::layout(link, frame, ports) else {
        return;
    };
    let payload = &frame[lay.payload_off().min(lay.end)..lay.end];
    let mut segs: Vec<Vec<u8>> = Vec::new();
    let r = gso::segment_layout(frame, &lay, &p, &mut |s: &[u8]| segs.push(s.to_vec()));
    let Ok(n) = r else { return };
    assert_eq!(n, segs.len());
    if n == 1 && segs[0] == frame {
        return; // passed through unchanged
    }
    // Every piece has the same header length (the Jumbo HBH removed), so
    // its payload is what follows the headers of the first piece.
    let hdr = lay.payload_off() - if lay.jumbo_hbh { 8 } else { 0 };
    let mut joined = Vec::with_capacity(payload.len());
    for s in &segs {
        assert!(s.len() >= hdr, "segment shorter than its headers");
        let body = &s[hdr..];
        assert!(
            body.len() <= mss as usize,
            "segment payload {} > mss {mss}",
            body.len()
        );
        joined.extend_from_slice(body);
    }
    assert!(
        joined == payload,
        "segments do not carry the original payload"
    );
}

/// The bench server's control-protocol decoder and everything a server does
/// with a decoded frame before it allocates: the input is a byte stream as
/// a client would send it. The first byte picks the stage: even, the
/// handshake (frames of at most `MAX_HELLO_FRAME`); odd, after it (at most
/// `MAX_CLIENT_FRAME`); bit 1 also reads the stream as server frames, as a
/// client would. Invariants: a frame above the stage's limit is refused on
/// its length; every decoded frame encodes and decodes to the same frame
/// (floating-point seconds within one ULP); a Start that passes
/// `check_spec` is costed without overflow, and a reservation the default
/// limits grant stays within them; the udp-rr gate answers a datagram only
/// from a joined source and admits a join only with the test's token.
pub fn bench_control(data: &[u8]) {
    use offload_bench::auth::{self, Secret};
    use offload_bench::engine::{GateVerdict, UdpGate};
    use offload_bench::limits::{self, Budget, ServerLimits};
    use offload_bench::proto::{self, ClientMsg, ServerMsg};
    use offload_bench::server::check_spec;

    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let max = if mode & 1 == 0 {
        proto::MAX_HELLO_FRAME
    } else {
        proto::MAX_CLIENT_FRAME
    };
    let budget = Budget::new(ServerLimits::default());
    let mut held = Vec::new();
    let mut r = rest;
    for _ in 0..16 {
        let before = r.len();
        let msg = match proto::read_frame_limited::<_, ClientMsg>(&mut r, max) {
            Ok(m) => m,
            Err(proto::ProtoError::FrameTooLarge { len, max: m }) => {
                assert!(len > m && m <= max, "refused {len} under the limit {m}");
                break;
            }
            Err(proto::ProtoError::Json(_)) => {
                // A bad frame consumed exactly its announced length.
                assert!(before - r.len() <= max as usize + 4);
                continue;
            }
            Err(_) => break,
        };
        assert!(before - r.len() <= max as usize + 4, "read past the frame");
        let mut enc = Vec::new();
        proto::write_frame(&mut enc, &msg).expect("a decoded frame encodes");
        let again: ClientMsg = proto::read_frame(&mut &enc[..]).expect("and decodes");
        match (&msg, &again) {
            (ClientMsg::Start { spec: a }, ClientMsg::Start { spec: b }) => {
                let (x, y) = (a.expected_seconds, b.expected_seconds);
                assert!(
                    x == y || (x - y).abs() <= x.abs().max(y.abs()) * f64::EPSILON * 2.0,
                    "seconds {x} came back as {y}"
                );
                let (mut a, mut b) = (a.clone(), b.clone());
                a.expected_seconds = 0.0;
                b.expected_seconds = 0.0;
                assert_eq!(a, b, "a start frame changed in a round trip");
            }
            _ => assert_eq!(msg, again, "a frame changed in a round trip"),
        }
        match &msg {
            ClientMsg::Hello { .. } => {
                let _ = proto::check_hello(&msg);
            }
            ClientMsg::Auth { nonce, mac } => {
                let k = Secret::new(b"fuzzing secret, sixteen+".to_vec()).expect("secret");
                let n = auth::unhex(nonce).unwrap_or_default();
                // Nothing a fuzzer writes is the right answer to a
                // challenge it never saw.
                assert!(
                    !k.check_client_mac(&[0x5a; 32], &n, mac),
                    "a guessed answer verified"
                );
            }
            ClientMsg::Start { spec } => {
                let mem = limits::test_memory(spec);
                if check_spec(spec).is_ok() {
                    if let Ok(res) = budget.reserve(spec) {
                        let l = budget.limits();
                        assert!(mem <= l.max_test_memory);
                        let u = budget.usage();
                        assert!(u.memory <= l.max_memory && u.threads <= l.max_threads);
                        assert!(u.flows <= l.max_flows && u.tests <= l.max_tests);
                        held.push(res);
                    }
                }
            }
            _ => {}
        }
    }
    drop(held);
    assert_eq!(
        budget.usage(),
        Default::default(),
        "reservations given back"
    );
    // The same bytes as datagrams at a udp-rr gate.
    let gate = UdpGate::new([7; proto::TOKEN_LEN]);
    let mut seen = std::collections::HashSet::new();
    let joined: std::net::SocketAddr = "127.0.0.1:1000".parse().expect("addr");
    let stranger: std::net::SocketAddr = "127.0.0.2:1000".parse().expect("addr");
    for chunk in rest.chunks(proto::JOIN_LEN) {
        let v = gate.judge(&mut seen, chunk, stranger);
        let is_join = chunk.len() == proto::JOIN_LEN
            && chunk[..4] == proto::UDP_JOIN
            && chunk[4..] == [7; proto::TOKEN_LEN];
        assert_eq!(
            v == GateVerdict::Join,
            is_join,
            "join verdict for {chunk:?}"
        );
        if !is_join && !seen.contains(&stranger) {
            assert_eq!(v, GateVerdict::Drop, "a stranger was answered");
        }
        let _ = gate.judge(&mut seen, chunk, joined);
    }
    if mode & 2 != 0 {
        let mut r = rest;
        for _ in 0..16 {
            match proto::read_frame::<_, ServerMsg>(&mut r) {
                Ok(ServerMsg::Ready { token: Some(t), .. }) => {
                    let _ = auth::unhex(&t);
                }
                Ok(_) | Err(proto::ProtoError::Json(_)) => {}
                Err(_) => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use offload::FlushReason;

    /// Runs a `gro_engine` input and returns (bytes, segments, reason) per delivery.
    fn deliveries(input: &[u8]) -> Vec<(usize, u32, FlushReason)> {
        let (cfg, recs) = split_records(input);
        let ports = cfg.vxlan_ports.clone();
        let mut e = GroEngine::new(cfg);
        let mut v = Vec::new();
        let mut out = |d: &Delivered<'_>| v.push((d.len(), d.segments, d.reason));
        let mut n = 0;
        for r in &recs {
            for f in expand(r, &ports) {
                n += 1;
                let input = Input {
                    data: &f,
                    link: r.link,
                    timestamp_ns: n,
                    frame: n,
                    orig_len: f.len() as u32,
                };
                e.receive(input, &mut out);
            }
        }
        e.finish(&mut out);
        v
    }

    #[test]
    fn expanded_seeds_reach_big_tcp_and_the_size_check() {
        let trains = seeds::trains();
        let tcp4 = &trains[0].1[0];
        let one = [(LinkKind::Ethernet, 1u8, 7u8, tcp4.as_slice())];
        let big = deliveries(&encode_records((0x2e, 2), &one));
        assert!(big.iter().any(|d| d.0 > 65_536 && d.1 > 45), "{big:?}");
        let small = deliveries(&encode_records((0x0e, 0x5a), &one));
        assert!(
            small.iter().any(|d| d.2 == FlushReason::SizeLimit),
            "{small:?}"
        );
        // Every input of every seed passes the target's own invariants.
        let dir = std::env::temp_dir().join(format!("offload-fuzz-test-{}", std::process::id()));
        seeds::write_all(&dir).expect("seeds written");
        for t in TARGETS {
            for e in std::fs::read_dir(dir.join(t)).expect("target dir") {
                let bytes = std::fs::read(e.expect("entry").path()).expect("seed");
                run(t, &bytes).expect("known target");
            }
        }
        std::fs::remove_dir_all(&dir).expect("clean up");
    }
}
