//! The receive window's scale on odd handshakes, compared with tshark:
//! a SYN resent without the option (as in a TCP Fast Open fallback), a
//! SYN-ACK captured before its SYN, a SYN-ACK whose options the snap length
//! cut, a SYN without the option, no handshake at all. Per direction, the
//! smallest and largest window of the non-SYN segments must equal tshark's
//! `tcp.window_size`, and the scale `offload analyze --json` states must
//! be the one tshark's `tcp.window_size_scalefactor` names (-1 unknown,
//! -2 not used, else 2^shift). Needs tshark (`.ci/install`).

mod common;

use common::capture::tshark;
use common::pcap::{header, record_header, tcp4, Resolution};
use common::tcp_figures::{offload_directions, tshark_directions, Dir};
use std::collections::BTreeMap;
use std::path::Path;

const CLIENT: [u8; 4] = [10, 0, 0, 1];
const SERVER: [u8; 4] = [10, 0, 0, 2];
const SYN: u8 = 0x02;
const ACK: u8 = 0x10;
const PSH_ACK: u8 = 0x18;

/// Linux's SYN options: MSS, SACK permitted, timestamps, NOP, window
/// scale `shift` (20 bytes; the scale is the last 3).
fn linux_options(shift: u8) -> Vec<u8> {
    let mut o = vec![2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1];
    o.extend_from_slice(&[3, 3, shift]);
    o
}

/// A segment: from the client (else the server), flags, sequence and
/// acknowledgment numbers, window field, options, payload length.
struct Seg(bool, u8, u32, u32, u16, Vec<u8>, usize);

/// The handshake's SYNs (given) then five data segments from the client,
/// each acknowledged by the server, with distinct windows so that min and
/// max differ.
fn conversation(syns: Vec<Seg>) -> Vec<Seg> {
    let mut segs = syns;
    let (mut seq, ack) = (1001, 5001);
    segs.push(Seg(true, ACK, seq, ack, 502, vec![], 0));
    for i in 0..5u16 {
        segs.push(Seg(true, PSH_ACK, seq, ack, 502 + i, vec![], 100));
        seq += 100;
        segs.push(Seg(false, ACK, ack, seq, 300 - i, vec![], 0));
    }
    segs
}

/// Writes `segs` as a pcap whose records keep at most `snaplen` bytes.
fn write(path: &Path, segs: &[Seg], snaplen: usize) {
    let mut f = header(Resolution::Micros, snaplen as u32);
    for (i, s) in segs.iter().enumerate() {
        let (src, sport, dst, dport) = if s.0 {
            (CLIENT, 40000, SERVER, 80)
        } else {
            (SERVER, 80, CLIENT, 40000)
        };
        let frame = tcp4(src, sport, dst, dport, s.1, s.2, s.3, s.4, &s.5, s.6);
        let kept = frame.len().min(snaplen);
        f.extend_from_slice(&record_header(
            1_700_000_000,
            i as u32 * 1000,
            kept as u32,
            frame.len() as u32,
        ));
        f.extend_from_slice(&frame[..kept]);
    }
    std::fs::write(path, f).unwrap();
}

/// tshark's scale factor of each direction's last non-SYN segment.
fn tshark_scale(path: &Path) -> BTreeMap<Dir, i64> {
    let out = tshark(
        path,
        &[
            "-n",
            "-Y",
            "tcp.flags.syn == 0",
            "-T",
            "fields",
            "-E",
            "separator=|",
            "-e",
            "ip.src",
            "-e",
            "tcp.srcport",
            "-e",
            "ip.dst",
            "-e",
            "tcp.dstport",
            "-e",
            "tcp.window_size_scalefactor",
        ],
    );
    let mut scales = BTreeMap::new();
    for line in out.lines() {
        let f: Vec<&str> = line.split('|').collect();
        let dir = (
            f[0].to_string(),
            f[1].parse().unwrap(),
            f[2].to_string(),
            f[3].parse().unwrap(),
        );
        scales.insert(dir, f[4].parse().unwrap());
    }
    scales
}

/// `--json`'s window scale as tshark's factor: -1, -2 or 2^shift.
fn our_scale(window: &serde_json::Value) -> i64 {
    match window["scale"]["state"].as_str() {
        Some("unknown") => -1,
        Some("not-used") => -2,
        Some("shift") => 1 << window["scale"]["shift"].as_u64().unwrap(),
        other => panic!("window scale state {other:?}"),
    }
}

#[test]
fn window_scales_of_odd_handshakes_agree_with_tshark() {
    let dir = tempfile::tempdir().unwrap();
    let no_options = Vec::new;
    // (name, segments, snap length)
    let cases: Vec<(&str, Vec<Seg>, usize)> = vec![
        (
            "syn-resent-without-option",
            conversation(vec![
                Seg(true, SYN, 1000, 0, 65535, linux_options(5), 0),
                Seg(false, SYN | ACK, 5000, 1001, 64980, linux_options(8), 0),
                Seg(true, SYN, 1000, 0, 65535, no_options(), 0),
                Seg(false, SYN | ACK, 5000, 1001, 64980, linux_options(8), 0),
            ]),
            65535,
        ),
        (
            "synack-before-syn",
            conversation(vec![
                Seg(false, SYN | ACK, 5000, 1001, 64980, no_options(), 0),
                Seg(true, SYN, 1000, 0, 65535, linux_options(7), 0),
            ]),
            65535,
        ),
        (
            "synack-options-cut",
            conversation(vec![
                // NOP and the scale only: 58 bytes, kept whole at 70.
                Seg(true, SYN, 1000, 0, 65535, vec![1, 3, 3, 7], 0),
                // 74 bytes: cut at 70, inside the options before the scale.
                Seg(false, SYN | ACK, 5000, 1001, 64980, linux_options(9), 0),
            ]),
            70,
        ),
        (
            "syn-without-option",
            conversation(vec![
                Seg(true, SYN, 1000, 0, 65535, vec![2, 4, 0x05, 0xb4], 0),
                Seg(false, SYN | ACK, 5000, 1001, 64980, linux_options(9), 0),
            ]),
            65535,
        ),
        ("mid-flow", conversation(vec![]), 65535),
    ];
    let mut fails = Vec::new();
    for (name, segs, snaplen) in cases {
        let path = dir.path().join(format!("{name}.pcap"));
        write(&path, &segs, snaplen);
        let report = common::analyze_json(&path);
        let ours = offload_directions(&report, name);
        let theirs = tshark_directions(&path);
        let scales = tshark_scale(&path);
        assert_eq!(ours.len(), 2, "{name}: two directions");
        for (d, flow) in &ours {
            let window = &flow["tcp"]["window"];
            let t = &theirs[d];
            for (ours_key, theirs_key) in [("min", "window_min"), ("max", "window_max")] {
                let (a, b) = (window[ours_key].as_f64().unwrap(), t.get(theirs_key));
                if a != b {
                    fails.push(format!("{name} {d:?}: window {ours_key} {a} vs tshark {b}"));
                }
            }
            let (a, b) = (our_scale(window), scales[d]);
            if a != b {
                fails.push(format!("{name} {d:?}: scale {a} vs tshark {b}"));
            }
        }
    }
    assert!(fails.is_empty(), "{}", fails.join("\n"));
}
