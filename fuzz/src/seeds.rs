//! Seed inputs for every target: valid frames and trains built with
//! `offload::build`, so that the fuzzers start from inputs that reach the
//! merge and segmentation code instead of failing the first header check.
//!
//! `cargo run --example seeds -- DIR` writes them to `DIR/<target>/`;
//! `scripts/fuzz-smoke.sh` does that before every run, so the seed corpus
//! is never stale and never committed.

use crate::encode_records;
use offload::build::{vxlan_payload, FrameSpec, L2Spec, TcpSpec};
use offload::gro::gso_type;
use offload::wire::tcp::flags;
use offload::{Delivered, GroConfig, GroEngine, Input, LinkKind};
use offload_capture::{CaptureFormat, CaptureWriter, FrameMeta, LinkType};
use std::path::Path;

/// A TCP segment `i` of a flow: 1000-byte payloads, incrementing IDs.
fn tcp_seg(v6: bool, i: u32, len: usize, fl: u8) -> FrameSpec {
    let mut t = TcpSpec::data(40000, 5201, 1000 + i * len as u32).with_timestamps(7, 9);
    t.flags |= fl;
    let mut s = if v6 {
        let mut a = [0u8; 16];
        a[0] = 0xfd;
        let mut b = a;
        a[15] = 1;
        b[15] = 2;
        FrameSpec::tcp6(a, b, t)
    } else {
        let mut s = FrameSpec::tcp4([10, 0, 0, 1], [10, 0, 0, 2], t);
        s.v4_mut().id = 100 + i as u16;
        s
    };
    s.payload = vec![i as u8; len];
    s
}

fn udp_dgram(i: u16, len: usize) -> FrameSpec {
    let mut s = FrameSpec::udp4([10, 0, 0, 1], [10, 0, 0, 2], 5000, 443).payload(vec![3; len]);
    s.v4_mut().id = 300 + i;
    s
}

fn vxlan(i: u32) -> FrameSpec {
    let inner = tcp_seg(false, i, 1000, 0).build();
    let mut s = FrameSpec::udp4([10, 9, 0, 1], [10, 9, 0, 2], 40007, 4789)
        .payload(vxlan_payload(42, &inner));
    s.v4_mut().id = 500 + i as u16;
    s.udp_mut().zero_checksum = true;
    s
}

/// Named trains of Ethernet frames.
pub fn trains() -> Vec<(&'static str, Vec<Vec<u8>>)> {
    let tcp4: Vec<_> = (0..6).map(|i| tcp_seg(false, i, 1000, 0).build()).collect();
    let tcp6: Vec<_> = (0..6).map(|i| tcp_seg(true, i, 1000, 0).build()).collect();
    let mut tail4 = tcp4.clone();
    tail4.push(tcp_seg(false, 6, 300, flags::PSH).build());
    let vlan: Vec<_> = (0..4)
        .map(|i| {
            let mut s = tcp_seg(false, i, 1000, 0);
            if let L2Spec::Ethernet { vlans, .. } = &mut s.l2 {
                vlans.push((0x8100, 7));
            }
            s.build()
        })
        .collect();
    let udp: Vec<_> = (0..5).map(|i| udp_dgram(i, 1200).build()).collect();
    let vx: Vec<_> = (0..5).map(|i| vxlan(i).build()).collect();
    // Two flows interleaved, one with a gap in sequence numbers.
    let mut mixed = Vec::new();
    for i in 0..4 {
        mixed.push(tcp_seg(false, i, 1000, 0).build());
        mixed.push(tcp_seg(true, i * 2, 1000, 0).build());
    }
    vec![
        ("tcp4", tcp4),
        ("tcp6", tcp6),
        ("tcp4_tail_psh", tail4),
        ("vlan", vlan),
        ("udp", udp),
        ("vxlan", vx),
        ("mixed", mixed),
    ]
}

/// Super-packets built by GRO from the trains, with their `gso_size` and
/// `gso_type`.
pub fn super_packets() -> Vec<(String, Vec<u8>, u32, u32)> {
    let mut out = Vec::new();
    for (name, frames) in trains() {
        let mut e = GroEngine::new(
            GroConfig::default()
                .flush_timeout_ns(u64::MAX / 4)
                .vlan_gro(true),
        );
        let mut n = 0;
        let mut push = |d: &Delivered<'_>| {
            if d.segments > 1 {
                out.push((
                    format!("{name}_{n}"),
                    d.to_vec(|k| &frames[k as usize - 1]),
                    d.gso_size,
                    d.gso_type,
                ));
                n += 1;
            }
        };
        for (i, f) in frames.iter().enumerate() {
            let input = Input {
                data: f,
                link: LinkKind::Ethernet,
                timestamp_ns: i as u64,
                frame: i as u64 + 1,
                orig_len: f.len() as u32,
            };
            e.receive(input, &mut push);
        }
        e.finish(&mut push);
    }
    out
}

/// Writes the seeds of every target under `dir/<target>/`.
pub fn write_all(dir: &Path) -> std::io::Result<usize> {
    let mut count = 0;
    let mut put = |target: &str, name: &str, bytes: &[u8]| -> std::io::Result<()> {
        let d = dir.join(target);
        std::fs::create_dir_all(&d)?;
        std::fs::write(d.join(name), bytes)?;
        count += 1;
        Ok(())
    };
    let trains = trains();
    for (name, frames) in &trains {
        // verify on/off × VLAN GRO on × long timeout; and timeout 0.
        for (tag, cfg) in [("v", (0x0f, 2)), ("nv", (0x0e, 2)), ("t0", (0x03, 2))] {
            let recs: Vec<_> = frames
                .iter()
                .map(|f| (LinkKind::Ethernet, 1u8, 0u8, f.as_slice()))
                .collect();
            put(
                "gro_engine",
                &format!("{name}_{tag}"),
                &encode_records(cfg, &recs),
            )?;
        }
        // The first frame expanded into 180 copies, checksums unverified:
        // BIG TCP sizes (limit 185 000) and, with a 9 000-byte limit, the
        // size check on a short input.
        let first = [(LinkKind::Ethernet, 1u8, 7u8, frames[0].as_slice())];
        put(
            "gro_engine",
            &format!("{name}_big"),
            &encode_records((0x2e, 2), &first),
        )?;
        put(
            "gro_engine",
            &format!("{name}_small"),
            &encode_records((0x0e, 0x5a), &first),
        )?;
        put("wire_parsers", name, &frames[0])?;
        // `offload analyze` on the train as an Ethernet capture: whole,
        // and header-only (every frame's wire length longer).
        let ether = crate::analyze_linktypes()
            .iter()
            .position(|t| *t == 1)
            .expect("Ethernet is read") as u8;
        for (tag, cut) in [("whole", 0u8), ("cut", 0x7f), ("nocsum", 0x80)] {
            let mut input = vec![ether, cut];
            for f in frames {
                input.extend_from_slice(&(f.len() as u16).to_be_bytes());
                input.extend_from_slice(f);
            }
            put("analyze_capture", &format!("{name}_{tag}"), &input)?;
        }
    }
    // IPComp (docs/decisions/0232): the tcp4 and tcp6 trains with each
    // payload a stored DEFLATE block after an IPComp header, in transport
    // and in tunnel mode, so the fuzzer starts from payloads that inflate.
    let ether = crate::analyze_linktypes()
        .iter()
        .position(|t| *t == 1)
        .expect("Ethernet is read") as u8;
    for (name, frames) in trains.iter().filter(|(n, _)| matches!(*n, "tcp4" | "tcp6")) {
        for (tag, tunnel) in [("transport", false), ("tunnel", true)] {
            let mut input = vec![ether, 0];
            for f in frames {
                let g = ipcomp_stored(f, tunnel);
                input.extend_from_slice(&(g.len() as u16).to_be_bytes());
                input.extend_from_slice(&g);
            }
            put("analyze_capture", &format!("{name}_ipcomp_{tag}"), &input)?;
        }
    }
    for (name, data, gso_size, gso_t) in super_packets() {
        let mut fl = 8u8; // VXLAN port on
        if gso_t & gso_type::TCP_FIXEDID != 0 {
            fl |= 1;
        }
        let mut input = vec![0u8];
        input.extend_from_slice(&(gso_size as u16).to_be_bytes());
        input.push(fl);
        input.extend_from_slice(&data);
        put("gso_segment", &name, &input)?;
        put("wire_parsers", &format!("super_{name}"), &data)?;
    }
    // Captures: one pcap and one pcapng of the TCP train.
    for (ext, fmt) in [
        ("pcap", CaptureFormat::Pcap),
        ("pcapng", CaptureFormat::PcapNg),
    ] {
        let tmp =
            std::env::temp_dir().join(format!("offload-fuzz-seed-{}.{ext}", std::process::id()));
        let mut w = CaptureWriter::create(&tmp, Some(fmt))
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        for (i, f) in trains[0].1.iter().enumerate() {
            let meta = FrameMeta::new(1_000_000 * i as i64, LinkType::ETHERNET, f.len());
            w.write_frame(&meta, f)
                .map_err(|e| std::io::Error::other(e.to_string()))?;
        }
        w.finish()
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        let bytes = std::fs::read(&tmp);
        std::fs::remove_file(&tmp)?;
        put("capture_reader", &format!("tcp4.{ext}"), &bytes?)?;
    }
    // The bench control protocol: whole client exchanges, at both stages.
    for (name, stream) in bench_streams() {
        for mode in [0u8, 1, 3] {
            let mut input = vec![mode];
            input.extend_from_slice(&stream);
            put("bench_control", &format!("{name}_{mode}"), &input)?;
        }
    }
    // Public captures (tcpdump's test suite, fuzz/seeds/tcpdump/SOURCE.md):
    // the files, and their frames for the frame-level targets.
    let public = Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds/tcpdump");
    let mut files: Vec<_> = std::fs::read_dir(&public)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "pcap" || x == "pcapng"))
        .collect();
    files.sort();
    for path in files {
        let bytes = std::fs::read(&path)?;
        let stem = path
            .file_name()
            .map(|n| n.to_string_lossy().replace('.', "_"))
            .unwrap_or_default();
        put("capture_reader", &format!("tcpdump_{stem}"), &bytes)?;
        let frames = capture_frames(&bytes);
        if frames.is_empty() {
            continue;
        }
        let recs: Vec<_> = frames
            .iter()
            .map(|(l, f)| (*l, 1u8, 0u8, f.as_slice()))
            .collect();
        put(
            "gro_engine",
            &format!("tcpdump_{stem}"),
            &encode_records((0x0e, 2), &recs),
        )?;
        for (i, (link, f)) in frames.iter().enumerate().take(8) {
            put("wire_parsers", &format!("tcpdump_{stem}_{i}"), f)?;
            let li = crate::LINKS.iter().position(|k| k == link).unwrap_or(0) as u8;
            let mut g = vec![li];
            g.extend_from_slice(&1448u16.to_be_bytes());
            g.push(8);
            g.extend_from_slice(f);
            put("gso_segment", &format!("tcpdump_{stem}_{i}"), &g)?;
        }
    }
    // `offload analyze` from every public capture here and in the analyze
    // crate's tests/data/public (other projects' suites: link types,
    // tunnels, fragments), as the fuzzer's own capture format.
    let analyze_public =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/offload-analyze/tests/data/public");
    let mut files: Vec<_> = [
        public.clone(),
        analyze_public.clone(),
        analyze_public.join("link"),
    ]
    .iter()
    .filter_map(|d| std::fs::read_dir(d).ok())
    .flatten()
    .filter_map(|e| e.ok().map(|e| e.path()))
    .filter(|p| p.extension().is_some_and(|x| x == "pcap" || x == "pcapng"))
    .collect();
    files.sort();
    for path in files {
        let Some(input) = analyze_input(&std::fs::read(&path)?) else {
            continue;
        };
        let stem = path
            .file_name()
            .map(|n| n.to_string_lossy().replace('.', "_"))
            .unwrap_or_default();
        put("analyze_capture", &format!("public_{stem}"), &input)?;
    }
    Ok(count)
}

/// A capture's first 64 frames as an `analyze_capture` input, when its
/// first frame's link type is one analyze reads (frames of other link
/// types are left out).
fn analyze_input(bytes: &[u8]) -> Option<Vec<u8>> {
    let mut r =
        offload_capture::CaptureReader::from_reader(std::io::Cursor::new(bytes.to_vec()), "seed")
            .ok()?;
    let mut input = Vec::new();
    let mut link = None;
    let mut n = 0;
    while let Ok(Some(f)) = r.next_frame() {
        let t = f.link_type.0;
        let sel =
            *link.get_or_insert_with(|| crate::analyze_linktypes().iter().position(|x| *x == t));
        let Some(sel) = sel else {
            return None;
        };
        if input.is_empty() {
            input.extend_from_slice(&[sel as u8, 0]);
        }
        if crate::analyze_linktypes()[sel] != t || f.data.len() > u16::MAX as usize {
            continue;
        }
        input.extend_from_slice(&(f.data.len() as u16).to_be_bytes());
        input.extend_from_slice(f.data);
        n += 1;
        if n == 64 {
            break;
        }
    }
    (n > 0).then_some(input)
}

/// The frames of a capture (at most 64) with the link kind the engine
/// reads them as; frames of link types the engine does not know are left
/// out.
fn capture_frames(bytes: &[u8]) -> Vec<(LinkKind, Vec<u8>)> {
    let mut out = Vec::new();
    let Ok(mut r) =
        offload_capture::CaptureReader::from_reader(std::io::Cursor::new(bytes.to_vec()), "seed")
    else {
        return out;
    };
    while let Ok(Some(f)) = r.next_frame() {
        let link = match f.link_type {
            LinkType::ETHERNET => LinkKind::Ethernet,
            t if t.is_raw_ip() => LinkKind::RawIp,
            LinkType::IPV4 => LinkKind::Ipv4,
            LinkType::IPV6 => LinkKind::Ipv6,
            LinkType::LINUX_SLL => LinkKind::LinuxSll,
            LinkType::LINUX_SLL2 => LinkKind::LinuxSll2,
            _ => continue,
        };
        out.push((link, f.data.to_vec()));
        if out.len() >= 64 {
            break;
        }
    }
    out
}

/// Client byte streams of the bench control protocol: a hello, an auth
/// answer, a start of every test kind, marks, finish, bye.
pub fn bench_streams() -> Vec<(String, Vec<u8>)> {
    use offload_bench::proto::{self, ClientMsg, Mark};
    use offload_bench::{ClientConfig, TestKind};
    let frame = |m: &ClientMsg| {
        let mut v = Vec::new();
        proto::write_frame(&mut v, m).expect("encodes");
        v
    };
    let hello = frame(&ClientMsg::Hello {
        magic: proto::MAGIC.into(),
        version: proto::PROTOCOL_VERSION,
    });
    let auth = frame(&ClientMsg::Auth {
        nonce: "ab".repeat(32),
        mac: "cd".repeat(32),
    });
    let mut out = vec![
        ("hello".to_string(), hello.clone()),
        ("hello_auth".to_string(), [hello.clone(), auth].concat()),
    ];
    for kind in [
        TestKind::TcpRr,
        TestKind::TcpCrr,
        TestKind::TcpStream,
        TestKind::UdpRr,
        TestKind::UdpStream,
    ] {
        let mut c = ClientConfig::new(kind, "127.0.0.1:1".parse().expect("addr"));
        c.spec.flows = 4;
        c.threads = 2;
        c.spec.server_threads = 2;
        c.spec.server_pin = Some(vec![0, 1]);
        c.validate().expect("valid");
        let mut s = hello.clone();
        for m in [
            ClientMsg::Start {
                spec: c.spec.clone(),
            },
            ClientMsg::Mark {
                mark: Mark::WindowStart,
            },
            ClientMsg::Mark {
                mark: Mark::WindowEnd,
            },
            ClientMsg::Finish,
            ClientMsg::Bye,
        ] {
            s.extend(frame(&m));
        }
        out.push((kind.name().to_string(), s));
    }
    // A udp-rr join datagram with the gate's fuzzing token, as a stream.
    let mut join = proto::UDP_JOIN.to_vec();
    join.extend_from_slice(&[7; proto::TOKEN_LEN]);
    out.push((
        "udp_join".to_string(),
        [join.clone(), b"x".to_vec(), join].concat(),
    ));
    out
}

/// Ethernet frame `f` (IPv4 or IPv6 without extension headers) with its
/// IP payload (transport mode) or its whole IP packet (tunnel mode, the
/// same header outside) in one stored DEFLATE block (RFC 1951 3.2.4)
/// after an IPComp header (RFC 3173, CPI 0x4001).
fn ipcomp_stored(f: &[u8], tunnel: bool) -> Vec<u8> {
    let v6 = f[12..14] == [0x86, 0xdd];
    let hl = if v6 { 40 } else { (f[14] & 0x0f) as usize * 4 };
    let (data, next) = match (tunnel, v6) {
        (true, true) => (&f[14..], 41),
        (true, false) => (&f[14..], 4),
        (false, true) => (&f[14 + hl..], f[14 + 6]),
        (false, false) => (&f[14 + hl..], f[14 + 9]),
    };
    let n = data.len() as u16;
    let mut out = f[..14 + hl].to_vec();
    out.extend_from_slice(&[next, 0, 0x40, 0x01, 0x01]);
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(&(!n).to_le_bytes());
    out.extend_from_slice(data);
    let len = (out.len() - 14) as u16;
    if v6 {
        out[14 + 6] = 108;
        out[18..20].copy_from_slice(&(len - 40).to_be_bytes());
    } else {
        out[14 + 9] = 108;
        out[16..18].copy_from_slice(&len.to_be_bytes());
        out[24..26].copy_from_slice(&[0, 0]);
        let c = offload::checksum::checksum(&out[14..14 + hl]);
        out[24..26].copy_from_slice(&c.to_be_bytes());
    }
    out
}
