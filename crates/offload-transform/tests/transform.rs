//! `gro_capture` / `gso_capture` on real files: round trips, bad input.

use offload::build::{FrameSpec, TcpSpec};
use offload::GroConfig;
use offload_capture::Control;
use offload_capture::{CaptureReader, CaptureWriter, FrameMeta, LinkType};
use offload_transform::{gro_capture, gso_capture, GsoOptions, MssSource};
use std::path::Path;
use std::sync::atomic::AtomicBool;

/// Two flows (IPv4 and IPv6), `n` full-MTU segments each (1460 and 1440
/// bytes of payload), the last shorter, interleaved, 1 µs apart.
fn train(n: u32) -> Vec<Vec<u8>> {
    let mut frames = Vec::new();
    for i in 0..n {
        let (l4, l6) = if i + 1 == n { (300, 300) } else { (1460, 1440) };
        let mut a = FrameSpec::tcp4(
            [10, 0, 0, 2],
            [10, 0, 0, 1],
            TcpSpec::data(40000, 80, 1 + i * 1460),
        )
        .payload(vec![i as u8; l4]);
        a.v4_mut().id = 1000 + i as u16;
        frames.push(a.build());
        let b = FrameSpec::tcp6(
            [0xfd; 16],
            [0xfe; 16],
            TcpSpec::data(40001, 80, 7 + i * 1440),
        )
        .payload(vec![i as u8; l6]);
        frames.push(b.build());
    }
    frames
}

fn write(path: &Path, frames: &[Vec<u8>]) {
    let mut w = CaptureWriter::create(path, None).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write_frame(
            &FrameMeta::new(1_000_000_000 + i as i64 * 1000, LinkType::ETHERNET, f.len()),
            f,
        )
        .unwrap();
    }
    w.finish().unwrap();
}

fn read(path: &Path) -> Vec<Vec<u8>> {
    let mut r = CaptureReader::open(path).unwrap();
    let mut out = Vec::new();
    while let Some(f) = r.next_frame().unwrap() {
        out.push(f.data.to_vec());
    }
    out
}

fn ctl_parts() -> (AtomicBool, impl FnMut(u64)) {
    (AtomicBool::new(false), |_b: u64| {})
}

#[test]
fn gro_then_gso_gives_the_train_back_through_files() {
    for ext in ["pcap", "pcapng"] {
        let dir = tempfile::tempdir().unwrap();
        let (input, merged, split) = (
            dir.path().join(format!("in.{ext}")),
            dir.path().join(format!("gro.{ext}")),
            dir.path().join(format!("gso.{ext}")),
        );
        let frames = train(12);
        write(&input, &frames);
        let (cancel, mut prog) = ctl_parts();
        let mut ctl = Control {
            on_progress: &mut prog,
            cancel: &cancel,
        };
        let cfg = GroConfig::default().flush_timeout_ns(10_000_000);
        let g = gro_capture(&input, &merged, &cfg, &mut ctl).unwrap();
        assert!(g.input_error.is_none());
        assert_eq!((g.summary.frames_in, g.summary.packets_out), (24, 2));
        assert_eq!(g.summary.flush_reasons[0].reason, "short-segment");
        assert_eq!(read(&merged).len(), 2);

        let s = gso_capture(&merged, &split, &GsoOptions::default(), &mut ctl).unwrap();
        assert_eq!(s.summary.super_packets, 2);
        let mut back = read(&split);
        let mut orig = frames.clone();
        back.sort();
        orig.sort();
        assert!(
            back == orig,
            "{ext}: gso(gro(train)) != train ({} vs {} frames)",
            back.len(),
            orig.len()
        );
        // pcapng carries the GSO metadata; pcap has none, and with no single
        // segment and no later ID to learn from, the MTU gives the MSS.
        let want = if ext == "pcapng" {
            MssSource::Metadata
        } else {
            MssSource::Mtu
        };
        assert!(
            s.summary.mss_sources.iter().all(|(m, _)| *m == want),
            "{ext}: {:?}",
            s.summary.mss_sources
        );
    }
}

#[test]
fn truncated_input_reports_the_frame_and_keeps_everything_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("cut.pcap");
    let out = dir.path().join("out.pcap");
    let frames = train(5);
    write(&input, &frames);
    let bytes = std::fs::read(&input).unwrap();
    std::fs::write(&input, &bytes[..bytes.len() - 100]).unwrap();
    let (cancel, mut prog) = ctl_parts();
    let mut ctl = Control {
        on_progress: &mut prog,
        cancel: &cancel,
    };
    let cfg = GroConfig::default().flush_timeout_ns(10_000_000);
    let g = gro_capture(&input, &out, &cfg, &mut ctl).unwrap();
    let err = g.input_error.expect("the cut must be reported");
    assert_eq!(err.frame, Some(10));
    assert!(err.to_string().contains("cut.pcap"), "{err}");
    assert_eq!(g.summary.frames_in, 9);
    // The 9 good frames were coalesced and written: 5 v4 + 4 v6 segments.
    let written = read(&out);
    let total: usize = written.iter().map(|f| f.len()).sum();
    assert_eq!(written.len(), 2);
    assert!(total > 8 * 1448);
}

#[test]
fn cancellation_still_writes_a_valid_file() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.pcap");
    let out = dir.path().join("out.pcapng");
    write(&input, &train(4));
    let cancel = AtomicBool::new(true);
    let mut prog = |_b: u64| {};
    let mut ctl = Control {
        on_progress: &mut prog,
        cancel: &cancel,
    };
    let g = gro_capture(&input, &out, &GroConfig::default(), &mut ctl).unwrap();
    assert!(g.summary.interrupted);
    assert_eq!(read(&out).len(), 0);
}

/// A fixed-ID IPv4 flow with MSS 1000 (neither the MTU nor observable from
/// singles): pcapng keeps the GSO metadata as packet comments, so gso is
/// exact; pcap has none, and the fixed ID is inferred from the flow.
#[test]
fn gso_uses_metadata_from_pcapng_and_infers_fixed_ids_in_pcap() {
    let frames: Vec<Vec<u8>> = (0..140u32)
        .map(|i| {
            let mut s = FrameSpec::tcp4(
                [10, 0, 0, 2],
                [10, 0, 0, 1],
                TcpSpec::data(40000, 80, 1 + i * 1000),
            )
            .payload(vec![i as u8; 1000]);
            s.v4_mut().id = 4242;
            s.build()
        })
        .collect();
    let cfg = GroConfig::default().flush_timeout_ns(10_000_000);
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.pcapng");
    write(&input, &frames);
    let (cancel, mut prog) = ctl_parts();
    let mut ctl = Control {
        on_progress: &mut prog,
        cancel: &cancel,
    };
    let merged = dir.path().join("gro.pcapng");
    let g = gro_capture(&input, &merged, &cfg, &mut ctl).unwrap();
    assert_eq!(g.summary.super_packets, 3, "{:?}", g.summary);
    let split = dir.path().join("gso.pcapng");
    let s = gso_capture(&merged, &split, &GsoOptions::default(), &mut ctl).unwrap();
    assert_eq!(s.summary.mss_sources, vec![(MssSource::Metadata, 3)]);
    assert!(read(&split) == frames, "pcapng: metadata round trip");

    // The same through pcap, with --mss: the fixed ID is inferred.
    let merged = dir.path().join("gro.pcap");
    gro_capture(&input, &merged, &cfg, &mut ctl).unwrap();
    let split = dir.path().join("gso.pcap");
    let opts = GsoOptions {
        mss: Some(1000),
        ..GsoOptions::default()
    };
    gso_capture(&merged, &split, &opts, &mut ctl).unwrap();
    // Three super-packets with one ID: the flow is fixed-ID.
    assert!(read(&split) == frames, "pcap: fixed-ID inference");
}

/// The bundled sender-side sample holds checksums left to offload: default
/// settings must notice, not verify them, and merge.
#[test]
fn gro_merges_a_capture_whose_checksums_were_left_to_offload() {
    let sample = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../samples/healthy-tcp.pcapng"
    );
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("gro.pcapng");
    let (cancel, mut prog) = ctl_parts();
    let mut ctl = Control {
        on_progress: &mut prog,
        cancel: &cancel,
    };
    let g = gro_capture(Path::new(sample), &out, &GroConfig::default(), &mut ctl).unwrap();
    let s = g.summary;
    assert!(s.settings.checksums_offloaded, "{s:?}");
    assert!(!s.settings.checksum_check);
    // 453 TCP frames (data and ACKs) became 106 packets; 16 super-packets.
    assert!(s.merge_ratio > 3.0 && s.super_packets > 10, "{s:?}");
    assert!(
        s.flush_reasons.iter().all(|r| r.reason != "bad-checksum"),
        "{s:?}"
    );
    assert_eq!(read(&out).len() as u64, s.packets_out);

    // A capture with valid checksums keeps verification on.
    let input = dir.path().join("train.pcap");
    write(&input, &train(8));
    let g = gro_capture(
        &input,
        &dir.path().join("t.pcap"),
        &GroConfig::default(),
        &mut ctl,
    )
    .unwrap();
    assert!(g.summary.settings.checksum_check && !g.summary.settings.checksums_offloaded);
}

/// Frames of `path` with their original lengths.
fn read_with_len(path: &Path) -> Vec<(Vec<u8>, u32)> {
    let mut r = CaptureReader::open(path).unwrap();
    let mut out = Vec::new();
    while let Some(f) = r.next_frame().unwrap() {
        out.push((f.data.to_vec(), f.orig_len));
    }
    out
}

/// Copies `input` to `output` keeping the first `snaplen` bytes of every
/// frame and its original length (what `editcap -s` and `tcpdump -s` do).
fn cut(input: &Path, output: &Path, snaplen: usize) {
    let mut r = CaptureReader::open(input).unwrap();
    let mut w = CaptureWriter::create(output, None).unwrap();
    while let Some(f) = r.next_frame().unwrap() {
        let mut m = FrameMeta::from(&f);
        m.orig_len = f.orig_len;
        w.write_frame(&m, &f.data[..f.data.len().min(snaplen)])
            .unwrap();
    }
    w.finish().unwrap();
}

#[test]
fn header_only_super_packets_give_header_only_segments_with_wire_lengths() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.pcap");
    let merged = dir.path().join("gro.pcap");
    let merged_cut = dir.path().join("gro-cut.pcap");
    write(&input, &train(30));
    let (cancel, mut prog) = ctl_parts();
    let mut ctl = Control {
        on_progress: &mut prog,
        cancel: &cancel,
    };
    let cfg = GroConfig::default().flush_timeout_ns(10_000_000);
    gro_capture(&input, &merged, &cfg, &mut ctl).unwrap();
    for snaplen in [200usize, 96, 54] {
        cut(&merged, &merged_cut, snaplen);
        let full_out = dir.path().join("full.pcap");
        let cut_out = dir.path().join("cut.pcap");
        let opts = GsoOptions {
            mss: Some(1460),
            ..GsoOptions::default()
        };
        let a = gso_capture(&merged, &full_out, &opts, &mut ctl).unwrap();
        let b = gso_capture(&merged_cut, &cut_out, &opts, &mut ctl).unwrap();
        let s = &b.summary;
        // Every frame accounted for.
        assert_eq!(
            s.frames_in,
            s.super_packets + s.single_segments + s.copied_unchanged,
            "{s:?}"
        );
        let full = read_with_len(&full_out);
        let got = read_with_len(&cut_out);
        if snaplen == 54 {
            // 14 + 20 + 20 = 54: the IPv4 flow's headers are whole (its
            // TCP header has no options), the IPv6 flow's are not, and
            // those super-packets are copied with the reason.
            assert!(
                s.copied_reasons
                    .iter()
                    .any(|r| r.reason == "headers cut by the snapshot length" && r.frames > 0),
                "{s:?}"
            );
            assert!(s.header_only_super_packets > 0);
            continue;
        }
        assert_eq!(
            (
                s.super_packets,
                s.header_only_super_packets,
                s.copied_unchanged
            ),
            (a.summary.super_packets, a.summary.super_packets, 0),
            "{s:?}"
        );
        assert_eq!(got.len(), full.len(), "snaplen {snaplen}");
        for (i, ((g, glen), (f, flen))) in got.iter().zip(&full).enumerate() {
            assert_eq!(glen, flen, "frame {i}: wire length");
            assert!(g.len() <= snaplen.max(f.len().min(snaplen)), "frame {i}");
            let n = g.len();
            // The headers (and the payload bytes that were captured) equal
            // the full run's, but the TCP checksum, which covers payload
            // bytes the capture does not hold.
            let l3 = 14;
            let v6 = f[12..14] == [0x86, 0xdd];
            let l4 = l3 + if v6 { 40 } else { 20 };
            let csum = l4 + 16..l4 + 18;
            for j in 0..n {
                if !csum.contains(&j) {
                    assert_eq!(g[j], f[j], "snaplen {snaplen} frame {i} byte {j}");
                }
            }
            // Headers are always whole.
            assert!(n >= l4 + 20, "frame {i}: {n} bytes kept");
        }
    }
}
