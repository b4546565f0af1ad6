//! Reading as leniently as libpcap and tshark: frames whose captured length
//! exceeds the file's snapshot length are read, warned about and counted;
//! `--strict` stops at them. Checked against tshark's frame count.

mod common;

use common::capture::tshark;
use common::pcap::{self, Resolution};
use common::{json_of, BIN};
use std::process::Command;

/// A pcap (microseconds, little-endian, Ethernet) with snaplen 128: five
/// 200-byte TCP frames, the 2nd and 4th with their whole 200 bytes captured
/// (above the snaplen), the others cut to 128 as the snaplen says.
fn lying_pcap() -> Vec<u8> {
    let mut f = pcap::header(Resolution::Micros, 128);
    for i in 0..5u32 {
        let frame = offload::build::FrameSpec::tcp4(
            [10, 0, 0, 1],
            [10, 0, 0, 2],
            offload::build::TcpSpec::data(1000, 80, 1 + i * 146),
        )
        .payload(vec![i as u8; 146])
        .build();
        assert_eq!(frame.len(), 200);
        let caplen = if i % 2 == 1 { 200 } else { 128 };
        f.extend_from_slice(&pcap::record_header(
            1_700_000_000 + i,
            0,
            caplen as u32,
            200,
        ));
        f.extend_from_slice(&frame[..caplen]);
    }
    f
}

#[test]
fn caplen_above_snaplen_is_read_warned_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("lying.pcap");
    std::fs::write(&input, lying_pcap()).unwrap();
    let tshark_frames = tshark(&input, &[]).lines().count();
    assert_eq!(tshark_frames, 5);

    let out = Command::new(BIN)
        .args(["analyze", "--json"])
        .arg(&input)
        .output()
        .unwrap();
    let r = json_of(&out);
    assert_eq!(r["inputs"][0]["frames"], tshark_frames);
    assert_eq!(r["inputs"][0]["frames_above_snaplen"], 2);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("2 frame(s) have a captured length above")
    );

    let output = dir.path().join("gro.pcap");
    let out = Command::new(BIN)
        .args(["gro", "--json", "-o"])
        .arg(&output)
        .arg(&input)
        .output()
        .unwrap();
    let s = json_of(&out);
    assert_eq!(
        (s["frames_in"].as_u64(), s["frames_above_snaplen"].as_u64()),
        (Some(5), Some(2))
    );
    assert_eq!(s["first_above_snaplen"], 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("(first: frame 2)"));

    // --strict: the old behaviour, an error at frame 2 after frame 1.
    for cmd in [
        &["analyze", "--strict"][..],
        &["gso", "--strict", "-o", "/dev/null"][..],
    ] {
        let out = Command::new(BIN).args(cmd).arg(&input).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{cmd:?}: {err}");
        assert!(
            err.contains("frame 2") && err.contains("exceeds the snapshot length 128"),
            "{cmd:?}: {err}"
        );
    }
}
