//! `offload gso` on the bundled header-only samples (cut at 200 bytes by
//! scripts/make-samples.sh): every frame accounted for, super-packets split
//! into header-only segments that tshark reads with the same TCP bytes.

mod common;

use common::BIN;
use std::path::Path;
use std::process::Command;

fn samples(name: &str) -> String {
    format!("{}/../../samples/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// tshark's per-frame (frame.len, frame.cap_len, tcp.len) of `path`.
fn tshark_lengths(path: &Path) -> Vec<(u64, u64, Option<u64>)> {
    common::capture::tshark(
        path,
        &[
            "-T",
            "fields",
            "-e",
            "frame.len",
            "-e",
            "frame.cap_len",
            "-e",
            "tcp.len",
        ],
    )
    .lines()
    .map(|l| {
        let f: Vec<&str> = l.split('\t').collect();
        (
            f[0].parse().unwrap(),
            f[1].parse().unwrap(),
            f.get(2).and_then(|v| v.parse().ok()),
        )
    })
    .collect()
}

#[test]
fn header_only_samples_are_split_and_every_frame_is_accounted_for() {
    for name in [
        "tso-sender.pcapng",
        "gro-receiver.pcapng",
        "bigtcp-sender.pcapng",
    ] {
        let input = samples(name);
        let dir = tempfile::tempdir().unwrap();
        let output = dir.path().join("out.pcapng");
        let out = Command::new(BIN)
            .args(["gso", &input, "-o"])
            .arg(&output)
            .arg("--json")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let n = |k: &str| s[k].as_u64().unwrap();
        assert_eq!(
            n("frames_in"),
            n("super_packets") + n("single_segments") + n("copied_unchanged"),
            "{name}: {s}"
        );
        let reasons: u64 = s["copied_reasons"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["frames"].as_u64().unwrap())
            .sum();
        assert_eq!(reasons, n("copied_unchanged"));
        assert!(n("super_packets") > 0, "{name}: nothing split: {s}");
        assert_eq!(n("header_only_super_packets"), n("super_packets"));
        assert_eq!(
            n("frames_out"),
            n("frames_in") - n("super_packets") + n("segments_out")
        );

        let before = tshark_lengths(Path::new(&input));
        let after = tshark_lengths(&output);
        assert_eq!(after.len() as u64, n("frames_out"));
        // The TCP bytes on the wire are the same, and so is the wire total.
        let tcp = |v: &[(u64, u64, Option<u64>)]| v.iter().filter_map(|f| f.2).sum::<u64>();
        assert_eq!(tcp(&after), tcp(&before), "{name}");
        // Segments are at most an MTU (1500) and the 20-byte Linux cooked
        // v2 header on the wire, and at most 200 bytes (the samples'
        // snapshot length) captured.
        for (i, (len, cap, _)) in after.iter().enumerate() {
            assert!(*cap <= 200, "{name} frame {}: {cap} captured", i + 1);
            assert!(*len <= 1520, "{name} frame {}: {len} on the wire", i + 1);
        }
    }
}
