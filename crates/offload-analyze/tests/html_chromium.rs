//! The HTML report in a real browser: headless Chromium (Debian's
//! `chromium`, installed by .ci/install) loads the file offline, runs its
//! script, and the test reads back the DOM and a screenshot. The capture
//! has everything the time-sequence graph marks: retransmissions, SACK
//! blocks, duplicate ACKs, a zero window, and an ACK-only direction.

use offload::build::{FrameSpec, TcpSpec};
use offload_analyze::{analyze, Options};
use offload_capture::Control;
use offload_capture::{CaptureWriter, FrameMeta, LinkType};
use std::process::Command;
use std::sync::atomic::AtomicBool;

const A: [u8; 4] = [10, 0, 0, 2];
const B: [u8; 4] = [10, 0, 0, 1];

fn data(seq: u32, id: u16) -> Vec<u8> {
    let mut s = FrameSpec::tcp4(A, B, TcpSpec::data(40000, 5201, seq)).payload(vec![7; 1448]);
    s.v4_mut().id = id;
    s.build()
}

/// An ACK from B with an optional SACK block and the given window.
fn ack(ack: u32, window: u16, sack: Option<(u32, u32)>, id: u16) -> Vec<u8> {
    let mut t = TcpSpec::data(5201, 40000, 9000);
    t.ack = ack;
    t.window = window;
    if let Some((l, r)) = sack {
        let mut o = vec![1, 1, 5, 10];
        o.extend_from_slice(&l.to_be_bytes());
        o.extend_from_slice(&r.to_be_bytes());
        t.options = o;
    }
    let mut s = FrameSpec::tcp4(B, A, t);
    s.v4_mut().id = id;
    s.build()
}

fn chromium() -> &'static str {
    for c in ["chromium", "chromium-browser", "google-chrome"] {
        if Command::new(c).arg("--version").output().is_ok() {
            return c;
        }
    }
    panic!("headless Chromium is required (apt-get install chromium; .ci/install does)");
}

#[test]
fn the_report_draws_every_graph_in_headless_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("c.pcap");
    let mut w = CaptureWriter::create(&cap, None).unwrap();
    let mut frames: Vec<Vec<u8>> = Vec::new();
    let mut id = 0u16;
    for i in 0..400u32 {
        let seq = 1 + i * 1448;
        if i != 200 {
            frames.push(data(seq, i as u16));
        }
        if i % 2 == 1 {
            id += 1;
            let (a, sack) = if (201..210).contains(&i) {
                (1 + 200 * 1448, Some((1 + 201 * 1448, seq + 1448)))
            } else {
                (seq + 1448, None)
            };
            let win = if i == 301 { 0 } else { 8000 };
            frames.push(ack(a, win, sack, id));
            if sack.is_some() {
                // The same ACK again: a duplicate.
                frames.push(ack(a, win, None, id + 1000));
            }
        }
        if i == 212 {
            // The lost segment arrives late; an acknowledged one is sent
            // again: a retransmission.
            frames.push(data(1 + 200 * 1448, 9999));
            frames.push(data(1 + 150 * 1448, 9998));
        }
    }
    for (k, f) in frames.iter().enumerate() {
        w.write_frame(
            &FrameMeta::new(1_000_000_000 + k as i64 * 20_000, LinkType(1), f.len()),
            f,
        )
        .unwrap();
    }
    w.finish().unwrap();
    let cancel = AtomicBool::new(false);
    let mut progress = |_| {};
    let mut ctl = Control {
        on_progress: &mut progress,
        cancel: &cancel,
    };
    let a = analyze(&[cap], &Options::default(), &mut ctl).unwrap();
    let data_flow = a.report.flows.iter().position(|f| f.dport == 5201).unwrap();
    let g = &a.graphs[data_flow];
    assert!(g.seq.iter().any(|p| p.retrans));
    assert!(g.acks.iter().any(|p| p.dup));
    assert!(g.acks.iter().any(|p| p.zero_window));
    assert!(g.acks.iter().any(|p| !p.sack.is_empty()));
    assert!(!g.rtt.is_empty());
    // Every point names its frame, for the hover (as Wireshark jumps to it).
    assert!(g.seq.iter().all(|p| p.frame > 0) && g.acks.iter().all(|a| a.frame > 0));
    assert!(g.rtt.iter().all(|r| r.frame > r.data_frame));
    assert!(!g.gro.is_empty());
    let ack_flow = a.report.flows.iter().position(|f| f.sport == 5201).unwrap();
    assert!(a.graphs[ack_flow].ack_only);
    assert!(!a.graphs[ack_flow].acks.is_empty());

    let html = dir.path().join("r.html");
    std::fs::write(&html, offload_analyze::html::render(&a)).unwrap();
    let url = format!("file://{}", html.display());
    let base = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--window-size=1250,2600",
    ];
    let out = Command::new(chromium())
        .args(base)
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    let body = dom
        .split("<body")
        .nth(1)
        .and_then(|b| b.split('>').next())
        .unwrap_or_default();
    assert!(!body.contains("data-js-error"), "{body}");
    assert!(body.contains("data-ready=\"1\""), "{body}");
    // Two flows graphed: the data flow with five graphs, the ACK-only
    // direction with three (no RTT, window or bytes in flight: it sends
    // no data).
    assert!(body.contains("data-charts=\"8\""), "{body}");
    // Every canvas drew points; the legends name every mark.
    let drawn: Vec<u64> = dom
        .split("data-points=\"")
        .skip(1)
        .filter_map(|s| s.split('"').next()?.parse().ok())
        .collect();
    assert_eq!(drawn.len(), 8, "{drawn:?}");
    assert!(drawn.iter().all(|&n| n > 0), "{drawn:?}");
    for name in [
        "retransmission",
        "ACK line",
        "receive window edge",
        "SACK block",
        "duplicate ACK",
        "zero window",
        "RTT sample",
        "bytes in flight",
        "Receive window advertised by the peer",
        "moving average",
        "segments per packet",
    ] {
        assert!(dom.contains(name), "legend/title lacks {name}");
    }

    let shot = dir.path().join("shot.png");
    let st = Command::new(chromium())
        .args(base)
        .arg(format!("--screenshot={}", shot.display()))
        .arg(&url)
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let png = std::fs::read(&shot).unwrap();
    assert_eq!(&png[1..4], b"PNG");
    // Graphs make a busy image: a blank page compresses to a few kB.
    assert!(png.len() > 60_000, "{}", png.len());
}
