//! Timestamps tshark and libpcap read and we cannot hold exactly: a 2^62 us
//! pcapng timestamp, an interface with a huge `if_tsoffset` either way, and
//! times at or after 2^32 s written to pcap. Every frame is read (as tshark
//! reads them all), in-range times agree with tshark's to the nanosecond,
//! the others are clamped and the warning says so; nothing stops.

use std::path::Path;
use std::process::Command;

mod common;

use common::capture::tshark;
use common::BIN;

fn block(kind: u32, body: &[u8]) -> Vec<u8> {
    let mut body = body.to_vec();
    body.resize(body.len().div_ceil(4) * 4, 0);
    let n = (12 + body.len()) as u32;
    let mut b = Vec::new();
    b.extend_from_slice(&kind.to_le_bytes());
    b.extend_from_slice(&n.to_le_bytes());
    b.extend_from_slice(&body);
    b.extend_from_slice(&n.to_le_bytes());
    b
}

/// A little-endian pcapng: one Ethernet interface (microseconds, optional
/// `if_tsoffset` seconds) and one 42-byte UDP frame per timestamp.
fn pcapng(tsoffset: Option<i64>, stamps: &[u64]) -> Vec<u8> {
    let mut f = Vec::new();
    let mut shb = Vec::new();
    shb.extend_from_slice(&0x1A2B_3C4Du32.to_le_bytes());
    shb.extend_from_slice(&1u16.to_le_bytes());
    shb.extend_from_slice(&0u16.to_le_bytes());
    shb.extend_from_slice(&(-1i64).to_le_bytes());
    f.extend(block(0x0A0D_0D0A, &shb));
    let mut idb = vec![1, 0, 0, 0, 0, 0, 0, 0];
    if let Some(o) = tsoffset {
        idb.extend_from_slice(&14u16.to_le_bytes());
        idb.extend_from_slice(&8u16.to_le_bytes());
        idb.extend_from_slice(&o.to_le_bytes());
        idb.extend_from_slice(&[0; 4]);
    }
    f.extend(block(1, &idb));
    let mut pkt = vec![0xff; 6];
    pkt.extend_from_slice(&[0, 0, 0, 0, 0, 1, 0x08, 0x00]);
    pkt.extend_from_slice(&[
        0x45, 0, 0, 28, 0, 1, 0, 0, 64, 17, 0xf9, 0xc8, 10, 0, 0, 1, 10, 0, 0, 2,
    ]);
    pkt.extend_from_slice(&[0, 53, 0, 53, 0, 8, 0, 0]);
    for &ts in stamps {
        let mut epb = Vec::new();
        epb.extend_from_slice(&0u32.to_le_bytes());
        epb.extend_from_slice(&((ts >> 32) as u32).to_le_bytes());
        epb.extend_from_slice(&(ts as u32).to_le_bytes());
        epb.extend_from_slice(&(pkt.len() as u32).to_le_bytes());
        epb.extend_from_slice(&(pkt.len() as u32).to_le_bytes());
        epb.extend_from_slice(&pkt);
        f.extend(block(6, &epb));
    }
    f
}

/// tshark's `frame.time_epoch` of each frame, in nanoseconds when it fits.
fn tshark_times(path: &Path) -> Vec<Option<i128>> {
    tshark(path, &["-T", "fields", "-e", "frame.time_epoch"])
        .lines()
        .map(|l| {
            let (s, frac) = l.split_once('.').unwrap_or((l, "0"));
            let s: i128 = s.parse().ok()?;
            let frac = format!("{frac:0<9}");
            let ns: i128 = frac[..9].parse().ok()?;
            Some(if s < 0 {
                s * 1_000_000_000 - ns
            } else {
                s * 1_000_000_000 + ns
            })
        })
        .collect()
}

const T0_US: u64 = 1_700_000_000 * 1_000_000;
const MAX_NS: i128 = i64::MAX as i128;
const LAST_PCAP_NS: i128 = (1 << 32) * 1_000_000_000 - 1;

#[test]
fn times_beyond_range_are_read_clamped_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    // (name, offset, stamps, clamped on reading, expected ns per frame
    // after a pcapng round trip)
    type Case = (&'static str, Option<i64>, Vec<u64>, u64, Vec<i128>);
    let cases: Vec<Case> = vec![
        (
            "ts62",
            None,
            vec![T0_US, 1 << 62, T0_US + 1],
            1,
            vec![
                i128::from(T0_US) * 1000,
                MAX_NS,
                i128::from(T0_US + 1) * 1000,
            ],
        ),
        (
            "tsoffset",
            Some(1 << 62),
            vec![T0_US, T0_US + 1, T0_US + 2],
            3,
            vec![MAX_NS; 3],
        ),
        (
            "tsoffset-negative",
            Some(-(1 << 62)),
            vec![T0_US, T0_US + 1, T0_US + 2],
            3,
            // Before 1970: pcapng output holds no negative time either.
            vec![0; 3],
        ),
        (
            "after-2106",
            None,
            vec![T0_US, (1 << 32) * 1_000_000 + 5, 5_000_000_000 * 1_000_000],
            0,
            vec![
                i128::from(T0_US) * 1000,
                (1 << 32) * 1_000_000_000 + 5000,
                5_000_000_000 * 1_000_000_000,
            ],
        ),
    ];
    for (name, offset, stamps, clamped_in, want) in cases {
        let input = dir.path().join(format!("{name}.pcapng"));
        std::fs::write(&input, pcapng(offset, &stamps)).unwrap();
        let theirs = tshark_times(&input);
        assert_eq!(theirs.len(), 3, "{name}: tshark reads every frame");
        // analyze reads every frame, warns naming the file and the count,
        // and puts the count in --json.
        let out = Command::new(BIN)
            .args(["analyze", "--json"])
            .arg(&input)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name}: analyze: {err}");
        let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let i = &s["inputs"][0];
        assert_eq!(i["frames"], 3, "{name}");
        assert_eq!(i["timestamps_clamped"], clamped_in, "{name}: {i}");
        let warning = format!(
            "{}: {clamped_in} frame(s) have a timestamp outside the years 1677 to 2262",
            input.display()
        );
        assert_eq!(clamped_in > 0, err.contains(&warning), "{name}: {err}");
        if clamped_in > 0 {
            let first = stamps
                .iter()
                .position(|s| *s == 1 << 62)
                .map_or(1, |p| p + 1);
            assert_eq!(i["first_timestamp_clamped_frame"], first, "{name}: {i}");
        } else {
            assert!(i["first_timestamp_clamped_frame"].is_null(), "{name}: {i}");
        }
        for ext in ["pcapng", "pcap"] {
            let output = dir.path().join(format!("{name}-out.{ext}"));
            let out = Command::new(BIN)
                .args(["gso", "--json"])
                .arg(&input)
                .arg("-o")
                .arg(&output)
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{name} -> {ext}: {err}");
            let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(s["frames_in"], 3, "{name}");
            assert_eq!(s["frames_out"], 3, "{name}");
            let t = &s["timestamps_clamped"];
            assert_eq!(t["input"], clamped_in, "{name}: {t}");
            assert_eq!(
                clamped_in > 0,
                err.contains("outside the years 1677 to 2262"),
                "{name}: {err}"
            );
            let want: Vec<i128> = if ext == "pcap" {
                want.iter().map(|w| (*w).min(LAST_PCAP_NS)).collect()
            } else {
                want.clone()
            };
            let got = tshark_times(&output);
            let got: Vec<i128> = got.into_iter().map(|g| g.unwrap()).collect();
            assert_eq!(got, want, "{name} -> {ext}");
            // Where tshark read a time we hold, ours is the same.
            let held = if ext == "pcap" { LAST_PCAP_NS } else { MAX_NS };
            for (i, (ours, theirs)) in got.iter().zip(&theirs).enumerate() {
                match theirs {
                    Some(th) if (0..=held).contains(th) => {
                        assert_eq!(ours, th, "{name} -> {ext} frame {}", i + 1)
                    }
                    // Out of what we hold: the nearest end of it.
                    Some(th) => assert_eq!(*ours, (*th).clamp(0, held), "{name} frame {}", i + 1),
                    None => assert!(*ours == held || *ours == 0),
                }
            }
            assert_eq!(
                t["output"].as_u64().unwrap() > 0,
                err.contains("the output format cannot hold"),
                "{name} -> {ext}: {err}"
            );
        }
    }
}
