//! Reading as leniently as libpcap and tshark: frames whose captured length
//! exceeds the file's snapshot length are read, warned about and counted;
//! `--strict` stops at them. Checked against tshark's frame count.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_offload");

/// A pcap (microseconds, little-endian, Ethernet) with snaplen 128: five
/// 200-byte TCP frames, the 2nd and 4th with their whole 200 bytes captured
/// (above the snaplen), the others cut to 128 as the snaplen says.
fn lying_pcap() -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    f.extend_from_slice(&2u16.to_le_bytes());
    f.extend_from_slice(&4u16.to_le_bytes());
    f.extend_from_slice(&[0; 8]);
    f.extend_from_slice(&128u32.to_le_bytes());
    f.extend_from_slice(&1u32.to_le_bytes());
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
        f.extend_from_slice(&(1_700_000_000 + i).to_le_bytes());
        f.extend_from_slice(&0u32.to_le_bytes());
        f.extend_from_slice(&(caplen as u32).to_le_bytes());
        f.extend_from_slice(&200u32.to_le_bytes());
        f.extend_from_slice(&frame[..caplen]);
    }
    f
}

#[test]
fn caplen_above_snaplen_is_read_warned_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("lying.pcap");
    std::fs::write(&input, lying_pcap()).unwrap();
    let tshark = Command::new("tshark")
        .arg("-r")
        .arg(&input)
        .output()
        .unwrap();
    let tshark_frames = String::from_utf8_lossy(&tshark.stdout).lines().count();
    assert_eq!(tshark_frames, 5);

    let out = Command::new(BIN)
        .args(["analyze", "--json"])
        .arg(&input)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
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
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
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
