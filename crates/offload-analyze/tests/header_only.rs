//! Header-only captures (`tcpdump -s N`, `editcap -s N`): GRO decides on
//! headers, so wherever a flow's headers were all captured, the what-if,
//! the BIG TCP verdict and the findings must be those of the whole capture;
//! below that, the flow is named with the snapshot length it needs.
//! Checked on every bundled sample and the kernel-made capture in
//! tests/data, each cut to many lengths from 96 to 1514 bytes (the cut is
//! made here, frame by frame, as editcap makes it: data cut, wire length
//! kept); one run also goes through editcap itself.

#[path = "support/snaplen.rs"]
mod snaplen;

use offload_analyze::{analyze, Analysis, Options};
use offload_capture::Control;
use offload_report::Severity;
use snaplen::{cut, verdicts};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

fn sample(name: &str) -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    if name.ends_with(".pcap") {
        root.join("tests/data").join(name)
    } else {
        root.join("../../samples").join(name)
    }
}

fn run(path: &Path) -> Analysis {
    let cancel = AtomicBool::new(false);
    let mut progress = |_| {};
    let mut ctl = Control {
        on_progress: &mut progress,
        cancel: &cancel,
    };
    analyze(&[path.to_path_buf()], &Options::default(), &mut ctl).unwrap()
}

/// The lengths tried: every 4 bytes through the header range, then wider.
fn lengths() -> Vec<usize> {
    let mut v: Vec<usize> = (96..=260).step_by(4).collect();
    v.extend([300, 400, 512, 700, 1000, 1200, 1400, 1450, 1500, 1514]);
    v
}

fn check(name: &str) {
    let dir = tempfile::tempdir().unwrap();
    let whole = run(&sample(name)).report;
    let whole_cut = whole.inputs[0].snap.snaplen_seen;
    let mut compared = 0;
    for n in lengths() {
        // A sample already cut (the three header-only samples are cut at
        // 200) is compared with itself above its own cut only.
        if whole_cut.is_some_and(|c| n as u32 >= c) {
            continue;
        }
        let p = dir.path().join(format!("{n}-{name}"));
        cut(&sample(name), &p, n);
        let r = run(&p).report;
        let cut_flows: Vec<usize> = r
            .flows
            .iter()
            .filter(|f| f.snap.cut_in_headers_frames + f.snap.options_cut_frames > 0)
            .map(|f| f.id)
            .collect();
        let cut = r.inputs[0].snap.cut_in_headers_frames + r.inputs[0].snap.options_cut_frames;
        if cut_flows.is_empty() && cut == 0 {
            compared += 1;
            assert_eq!(
                verdicts(&r, &[]),
                verdicts(&whole, &[]),
                "{name} cut at {n}: what-if, verdicts or findings differ from the whole capture"
            );
            if r.inputs[0].snap.header_only_frames > 0 {
                let note = &r.what_if[0].notes;
                assert!(
                    note.iter().any(|x| x.contains("captured header-only")),
                    "{name} at {n}: {note:?}"
                );
            }
        } else {
            // Each flow cut inside its headers (or an ACK's options) is
            // named with a snaplen above the cut.
            for id in &cut_flows {
                let f = &r.flows[*id];
                assert!(f.snap.snaplen_needed.unwrap() > n as u32, "{name} at {n}");
                assert!(
                    r.findings.iter().any(|x| x.kind == "snaplen"
                        && x.flow.as_ref().is_some_and(|fl| fl.id == *id)
                        && x.title.contains("needs at least")),
                    "{name} at {n}: flow {} not named",
                    f.description
                );
            }
        }
    }
    // Most lengths keep every header (a VXLAN frame's reach 116-128 bytes).
    eprintln!("{name}: {compared} lengths compared with the whole capture");
    assert!(
        compared >= 10,
        "{name}: only {compared} lengths kept the headers"
    );
}

#[test]
fn healthy_tcp_cut_anywhere_keeps_its_verdicts() {
    check("healthy-tcp.pcapng");
}

#[test]
fn bigtcp_cut_anywhere_keeps_its_verdicts() {
    check("bigtcp.pcapng");
}

#[test]
fn vxlan_broken_cut_anywhere_keeps_its_verdicts() {
    check("vxlan-broken.pcapng");
}

#[test]
fn header_only_samples_cut_shorter_keep_their_verdicts() {
    for s in [
        "tso-sender.pcapng",
        "gro-receiver.pcapng",
        "bigtcp-sender.pcapng",
    ] {
        check(s);
    }
}

#[test]
fn kernel_gro_receiver_capture_cut_anywhere_keeps_its_verdicts() {
    check("veth-gro-receiver-full.pcap");
}

/// The broken VXLAN sample through editcap itself: its HIGH finding at
/// every snapshot length from 128 to 1400.
#[test]
fn editcap_cut_vxlan_keeps_its_high_finding() {
    let dir = tempfile::tempdir().unwrap();
    for n in [128, 150, 200, 256, 512, 1000, 1400] {
        let p = dir.path().join(format!("vx-{n}.pcapng"));
        let st = std::process::Command::new("editcap")
            .args(["-s", &n.to_string()])
            .arg(sample("vxlan-broken.pcapng"))
            .arg(&p)
            .status()
            .expect("editcap (.ci/install installs tshark's tools)");
        assert!(st.success());
        let r = run(&p).report;
        let high = r
            .findings
            .iter()
            .find(|f| f.severity == Severity::High && f.kind == "ip-id-rule")
            .unwrap_or_else(|| panic!("no HIGH ip-id-rule finding at snaplen {n}"));
        assert!(high.detail.contains("outer IPv4 DF=0"), "{}", high.detail);
    }
}

/// Outside material: every public capture in tests/data/public and its
/// link/ directory (other projects' test suites, SOURCE.md) cut to 96, 128
/// and 256 bytes (`tcpdump -s 96` is the old default, 256 what line-rate
/// captures use) keeps the whole capture's what-if and findings whenever
/// every header GRO reads was captured. Checksums are left unverified on
/// both sides (`--no-checksum-check`): a cut frame cannot show them, and
/// many of these captures were taken on a sender. Where a header was cut
/// (inside it, or an IP fragment the reassembly needs whole), the capture
/// must name a snapshot length, of the whole frame, longer than the cut.
/// NFLOG is the documented exception (docs/analyze.md): a cut payload TLV
/// is skipped, as tshark skips it.
#[test]
fn public_captures_cut_short_keep_their_verdicts() {
    let dir = tempfile::tempdir().unwrap();
    let public = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/public");
    let opts = Options {
        verify_checksums: false,
        ..Options::default()
    };
    let run = |p: &Path| {
        let cancel = AtomicBool::new(false);
        let mut progress = |_| {};
        let mut ctl = Control {
            on_progress: &mut progress,
            cancel: &cancel,
        };
        analyze(&[p.to_path_buf()], &opts, &mut ctl).unwrap().report
    };
    let mut files: Vec<PathBuf> = [public.clone(), public.join("link")]
        .iter()
        .flat_map(|d| std::fs::read_dir(d).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pcap" || e == "pcapng"))
        .filter(|p| {
            !p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("nflog")
        })
        .collect();
    files.sort();
    for snaplen in [96, 128, 256] {
        let mut compared = 0;
        for src in &files {
            let name = src.file_name().unwrap().to_string_lossy().to_string();
            let whole = run(src);
            // As scripts/header-only-sweep.py: captures with a TCP flow.
            if !whole.flows.iter().any(|f| f.protocol == "tcp") {
                continue;
            }
            let p = dir.path().join(&name);
            cut(src, &p, snaplen);
            let r = run(&p);
            let i = &r.inputs[0];
            // Cut inside a header, or inside the options of a segment
            // without payload (GRO's figures stand there, the TCP
            // analysis' SACK and timestamps do not).
            let cut_here = i.snap.cut_in_headers_frames + i.snap.options_cut_frames;
            let w = &whole.inputs[0].snap;
            if cut_here > 0 {
                let needed = i.snap.snaplen_needed.unwrap();
                // Frames the source capture itself cut shorter than this
                // (zeek's truncated-header.pcap) need less.
                assert!(
                    cut_here > w.cut_in_headers_frames + w.options_cut_frames
                        || needed == w.snaplen_needed.unwrap_or(0),
                    "{name} cut at {snaplen}: no more frames cut than in the source, yet another length named"
                );
                if cut_here == w.cut_in_headers_frames + w.options_cut_frames {
                    continue;
                }
                assert!(
                    needed > snaplen as u32,
                    "{name} cut at {snaplen}: frames cut inside their headers, yet a snaplen of {needed} is said to keep them"
                );
                continue;
            }
            if i.fragments.cut_fragments > 0 {
                assert!(
                    i.fragments.snaplen_needed_for_fragments.unwrap() > snaplen as u32,
                    "{name}: cut fragments without the length that keeps them"
                );
                continue;
            }
            assert_eq!(
                verdicts(&r, &[]),
                verdicts(&whole, &[]),
                "{name} cut at {snaplen}: what-if, verdicts or findings differ from the whole capture"
            );
            compared += 1;
        }
        eprintln!(
            "cut at {snaplen}: {compared} of {} public captures compared",
            files.len()
        );
        assert!(
            compared >= 30,
            "cut at {snaplen}: only {compared} public captures compared"
        );
    }
}

/// A frame cut inside its link header (tcpdump's radiotap capture of an
/// 802.11 QoS data frame, cut at 64 bytes: the radiotap and 802.11
/// headers end past the cut) is counted as cut inside its headers, with a
/// whole-frame snapshot length above the cut, though no IP packet could
/// be read from it.
#[test]
fn a_frame_cut_inside_its_link_header_is_counted_as_cut() {
    let dir = tempfile::tempdir().unwrap();
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/public/link/ieee802.11_htc.pcap");
    let p = dir.path().join("cut.pcap");
    cut(&src, &p, 64);
    let r = run(&p).report;
    let i = &r.inputs[0];
    assert_eq!(i.snap.cut_in_headers_frames, 1, "{:?}", i.snap);
    assert!(i.snap.snaplen_needed.unwrap() > 64, "{:?}", i.snap);
    assert_eq!(i.snap.snaplen_seen, Some(64), "{:?}", i.snap);
}
