//! `offload gro --kernel 6.18`, the release binary as a user runs it on a
//! capture, against the live kernel's GRO, on kernel-made BIG TCP trains
//! through tunnels (`gro_max_size` = `gro_ipv4_max_size` = 185000). On
//! 6.18 a merge past 64 KiB through a tunnel with an IPv6 outer header is
//! dropped (ip6ip6, ip4ip6, ip6gre) or mangled (VXLAN over IPv6) by
//! `ipv6_gro_complete` (docs/engine.md, "BIG TCP through tunnels with an
//! IPv6 outer header"); IPv4-outer tunnels (ipip, sit, gre, gretap, VXLAN
//! over IPv4) are the controls.
//!
//! Kernel-made: an IPv4 and an IPv6 TCP connection between two namespaces
//! over a veth whose sender has TSO and checksum offload off, so the
//! frames are the kernel's own segments (its MSS, PSH placement, IDs,
//! options, checksums), captured at the receiver with an `AF_PACKET`
//! socket. The host kernel builds no IPIP, SIT, ip6tnl or GRE devices
//! (only VXLAN), so every tunnel carries the captured frames as a tunnel
//! endpoint sends them (`offload_conformance::generate_tunnel::wrap_in_tunnel`).
//!
//! Each tunnel's capture goes, in trains of 150 frames, through the kernel
//! oracle (a TAP's GRO, one NAPI batch per train, two agreeing runs) and,
//! whole, through `offload gro` (frames 1 µs apart and trains 10 ms
//! apart, so the flush timeout ends each train where the kernel's flush
//! did). Per flow, what `offload gro` writes must equal the kernel's
//! sound frames byte for byte; the segments it reports lost must be
//! exactly the capture's segments that are in no sound kernel frame (a
//! mangled frame counts as lost); IPv6-outer tunnels must lose something
//! (else the test proves nothing) and IPv4-outer tunnels nothing. Then
//! `offload analyze --kernel 6.18` must name the affected flows (text and
//! JSON) and nothing else, and `--no-kernel-losses` must write every segment.
//!
//! Needs root: `scripts/test.sh` runs it.

mod common;

use common::netns::bulk_transfer;
use common::{json_of, offload};
use offload::LinkKind;
use offload_capture::{CaptureReader, CaptureWriter, FrameMeta, LinkType};
use offload_conformance::generate_tunnel::{wrap_in_tunnel, BigTcpTunnel};
use offload_lab::oracle::{GroKnobs, KernelGro};
use offload_sys::node::VethPair;
use offload_sys::packet::{CaptureOptions, PacketSocket};
use serde_json::Value;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Frames per oracle train (one NAPI batch).
const TRAIN: usize = 150;
/// Bytes each connection carries.
const BYTES: usize = 8 << 20;
const TITLE: &str = "BIG TCP with an IPv6-outer tunnel on kernel 6.18";

/// The data direction of an IPv4 and an IPv6 connection as the receiver
/// got it: (IPv4 frames, IPv6 frames), TCP only.
fn kernel_made_frames() -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let mut p = VethPair::new("bt").unwrap();
    for n in [&p.client, &p.server] {
        n.sysctl("net/ipv6/conf/all/accept_dad", "0").unwrap();
        // Large buffers from the start: on a link this fast the receive
        // window's autotuning keeps it near 64 KiB, and the sender sets
        // PSH every half window (`forced_push`), which would end every
        // merge below 64 KiB. A bulk sender on a real path has a window
        // of megabytes.
        n.sysctl("net/ipv4/tcp_rmem", "4096 16777216 16777216")
            .unwrap();
        n.sysctl("net/ipv4/tcp_wmem", "4096 16777216 16777216")
            .unwrap();
    }
    let dev = p.client_dev.clone();
    p.client
        .features(&dev, &[("tx-checksum-ip-generic", false)])
        .unwrap();
    p.client.tso_off(&dev).unwrap();
    // The sender of a BIG TCP host: its socket builds packets of up to
    // `gso_max_size` and sets PSH once per packet (`tcp_mark_push`), so at
    // 65536 every merge would end below 64 KiB.
    for (n, d) in [
        (&mut p.client, dev.clone()),
        (&mut p.server, p.server_dev.clone()),
    ] {
        n.set_big_tcp(&d, 185_000).unwrap();
    }
    let index = p.server.index(&p.server_dev.clone()).unwrap();
    let mut sock = p
        .server
        .ns
        .run(move || PacketSocket::open(index, CaptureOptions::default()))
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let (mut v4, mut v6) = (Vec::new(), Vec::new());
            loop {
                match sock.recv(Some(Duration::from_millis(100))).unwrap() {
                    Some(c) => {
                        let f = c.frame;
                        match (f.get(12..14), f.get(23), f.get(20)) {
                            (Some([0x08, 0x00]), Some(6), _) => v4.push(f.to_vec()),
                            (Some([0x86, 0xdd]), _, Some(6)) => v6.push(f.to_vec()),
                            _ => {}
                        }
                    }
                    None if stop.load(Ordering::Relaxed) => break (v4, v6),
                    None => {}
                }
            }
        })
    };
    // One write each: the kernel, not the test, decides where PSH goes.
    for to in [
        SocketAddr::from((VethPair::SERVER4, 5301)),
        SocketAddr::from((VethPair::SERVER6, 5302)),
    ] {
        bulk_transfer(&p.client.ns, &p.server.ns, to, BYTES, BYTES, Duration::ZERO);
    }
    stop.store(true, Ordering::Relaxed);
    let (v4, v6) = reader.join().unwrap();
    assert!(
        v4.len() > 500 && v6.len() > 500,
        "{} {}",
        v4.len(),
        v6.len()
    );
    (v4, v6)
}

/// A VXLAN over IPv6 frame the kernel mangled: the outer IPv6 header is
/// followed by a Hop-by-Hop header (no sound tunnel packet has one there).
fn mangled(f: &[u8]) -> bool {
    f.len() > 20 && f[12..14] == [0x86, 0xdd] && f[20] == 0
}

/// Segments in a sound kernel frame: its TCP payload in `gso_size`
/// pieces, or 1 for a frame GRO left alone.
fn segments(f: &[u8], meta: Option<(u8, u16)>) -> u64 {
    match meta {
        Some((_, gso_size)) if gso_size > 0 => {
            let lay = offload::gso::layout(LinkKind::Ethernet, f, &[4789]).unwrap();
            (f.len() - lay.payload_off()).div_ceil(gso_size as usize) as u64
        }
        _ => 1,
    }
}

fn write_capture(path: &Path, frames: &[Vec<u8>]) {
    let mut w = CaptureWriter::create(path, None).unwrap();
    for (i, f) in frames.iter().enumerate() {
        let ts = 1_000_000_000 + (i / TRAIN) as i64 * 10_000_000 + (i % TRAIN) as i64 * 1_000;
        w.write_frame(&FrameMeta::new(ts, LinkType(1), f.len()), f)
            .unwrap();
    }
    w.finish().unwrap();
}

fn read_capture(path: &Path) -> Vec<Vec<u8>> {
    let mut r = CaptureReader::open(path).unwrap();
    let mut out = Vec::new();
    while let Some(f) = r.next_frame().unwrap() {
        out.push(f.data.to_vec());
    }
    out
}

/// `offload gro INPUT -o OUTPUT --kernel 6.18` at BIG TCP sizes (185000
/// for IPv6 and IPv4), with `extra` arguments: its `--json` summary.
fn gro_json(input: &str, output: &str, extra: &[&str]) -> Value {
    let mut args = vec![
        "gro",
        input,
        "-o",
        output,
        "--kernel",
        "6.18",
        "--gro-max-size",
        "185000",
        "--gro-ipv4-max-size",
        "185000",
        "--json",
    ];
    args.extend_from_slice(extra);
    json_of(&offload(&args))
}

fn lost_segments(j: &Value) -> u64 {
    j["lost"]
        .as_array()
        .map(|l| l.iter().map(|x| x["segments"].as_u64().unwrap()).sum())
        .unwrap_or(0)
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn gro_cli_matches_the_live_kernel_on_kernel_made_big_tcp_tunnel_trains() {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let line = offload::gro::KernelLine::from_release(&release).unwrap();
    let (v4, v6) = kernel_made_frames();
    let dir = tempfile::tempdir().unwrap();
    let mut kernel = KernelGro::new(GroKnobs::default()).expect("the kernel oracle");
    kernel.set_gso_meta(true).unwrap();
    let a = offload_conformance::oracle_addrs(&kernel);
    let mut failures = Vec::new();
    let mut affected_lost = 0u64;
    for tunnel in BigTcpTunnel::ALL {
        kernel.set_knobs(tunnel.oracle_knobs()).unwrap();
        for (inner_v6, inner) in [(false, &v4), (true, &v6)] {
            let name = tunnel.name(inner_v6);
            let frames = wrap_in_tunnel(&a, tunnel, inner);
            // The kernel, train by train.
            let (mut sound, mut k_segments, mut k_mangled) = (Vec::new(), 0u64, 0u64);
            for train in frames.chunks(TRAIN) {
                let o = offload_conformance::agreed_answer(&mut kernel, train)
                    .unwrap_or_else(|n| panic!("{name}: the kernel disagreed with itself: {n:?}"));
                let meta = offload_conformance::kernel_meta(&o);
                for (f, m) in o.frames.into_iter().zip(meta) {
                    if tunnel.outer_v6() && mangled(&f) {
                        k_mangled += 1;
                    } else {
                        k_segments += segments(&f, m);
                        sound.push(f);
                    }
                }
            }
            let k_lost = frames.len() as u64 - k_segments;
            // offload gro, as a user runs it on the capture.
            let input = dir.path().join(format!("{name}.pcap"));
            let output = dir.path().join(format!("{name}-gro.pcap"));
            write_capture(&input, &frames);
            let (i, o) = (input.to_str().unwrap(), output.to_str().unwrap());
            let j = gro_json(i, o, &[]);
            let written = read_capture(&output);
            let e_lost = lost_segments(&j);
            eprintln!(
                "{name:16} {} frames: kernel {} sound ({k_segments} segments), {k_mangled} mangled, {k_lost} segments lost; offload gro {} written, lost {}",
                frames.len(),
                sound.len(),
                written.len(),
                j["lost"]
            );
            assert_eq!(j["frames_in"].as_u64(), Some(frames.len() as u64));
            if let Some(diff) = offload_conformance::compare(&sound, &written) {
                failures.push(format!(
                    "{name}: offload gro differs from the kernel:\n{diff}"
                ));
            }
            if e_lost != k_lost {
                failures.push(format!(
                    "{name}: the kernel lost {k_lost} segments, offload gro reports {e_lost}"
                ));
            }
            if tunnel.outer_v6() && line.breaks_big_tcp_over_ipv6_tunnels() {
                affected_lost += k_lost;
                assert!(
                    k_lost > 0,
                    "{name}: no merge passed 64 KiB; the train proves nothing"
                );
                let reason = if tunnel.vxlan() {
                    "ipv6-tunnel-jumbo-mangled"
                } else {
                    "ipv6-tunnel-jumbo-dropped"
                };
                assert_eq!(j["lost"][0]["reason"], reason, "{name}");
            } else {
                assert_eq!(k_lost, 0, "{name}: a control lost segments");
            }
            // The working behaviour: every segment written.
            if e_lost > 0 {
                let j = gro_json(i, o, &["--no-kernel-losses"]);
                assert_eq!(lost_segments(&j), 0, "{name}");
                assert_eq!(j["settings"]["kernel_losses"], false);
                assert!(read_capture(&output).len() > written.len(), "{name}");
            }
            analyze_names_the_flow(&input, name, inner_v6, tunnel.outer_v6() && e_lost > 0);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    if line.breaks_big_tcp_over_ipv6_tunnels() {
        assert!(affected_lost > 0);
    }
}

/// `offload analyze --kernel 6.18` on `capture`: the finding names the
/// capture's one flow when `affected`, and is absent otherwise.
fn analyze_names_the_flow(capture: &Path, name: &str, inner_v6: bool, affected: bool) {
    let p = capture.to_str().unwrap();
    let j = json_of(&offload(&["analyze", p, "--kernel", "6.18", "--json"]));
    let named: Vec<&Value> = j["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "big-tcp-ipv6-tunnel")
        .collect();
    let text = String::from_utf8(
        common::succeeded(
            offload(&["analyze", p, "--kernel", "6.18"]),
            "offload analyze",
        )
        .stdout,
    )
    .unwrap();
    if !affected {
        assert!(named.is_empty(), "{name}: {named:?}");
        assert!(!text.contains(TITLE), "{name}: {text}");
        return;
    }
    assert_eq!(named.len(), 1, "{name}: {:?}", j["findings"]);
    let f = named[0];
    assert!(
        f["title"].as_str().unwrap().starts_with(TITLE),
        "{name}: {}",
        f["title"]
    );
    // The flow it names is the capture's data flow: its inner endpoints.
    let id = f["flow"]["id"].as_u64().unwrap() as usize;
    let flow = &j["flows"][id];
    let inner: IpAddr = if inner_v6 {
        VethPair::SERVER6.into()
    } else {
        VethPair::SERVER4.into()
    };
    assert!(
        flow.to_string().contains(&inner.to_string()),
        "{name}: {flow}"
    );
    assert!(text.contains(TITLE), "{name}: {text}");
    assert!(text.contains(&inner.to_string()), "{name}: {text}");
}
