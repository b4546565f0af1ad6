//! `--kernel` of gro, gso and analyze: the same train gives different
//! merge counts under the rules of different kernel lines, and each
//! command reports the line it ran.

use offload::build::{FrameSpec, TcpSpec};
use offload::wire::tcp::flags;
use std::path::Path;

mod common;

use common::pcap::{self, Resolution};
use common::{json_of, offload, BIN};
use std::process::Command;

/// A classic pcap (Ethernet) of `frames`, 1 µs apart.
fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let mut out = pcap::header(Resolution::Micros, 262_144);
    for (i, f) in frames.iter().enumerate() {
        let len = f.len() as u32;
        out.extend_from_slice(&pcap::record_header(1, i as u32, len, len));
        out.extend_from_slice(f);
    }
    std::fs::write(path, out).unwrap();
}

/// `n` full-sized IPv4 TCP segments of one flow, DF clear and one fixed
/// IP ID: 6.18 merges them (`inet_gro_flush` accepts fixed IDs whatever
/// DF says), 6.1 and 6.12 flush at every segment (fixed IDs need DF).
fn df0_fixed_id_train(n: u32) -> Vec<Vec<u8>> {
    let mss = 1448u32;
    (0..n)
        .map(|i| {
            let tcp = TcpSpec::data(40000, 5201, 1 + i * mss).with_timestamps(1, 2);
            let mut s = FrameSpec::tcp4([10, 0, 0, 1], [10, 0, 0, 2], tcp);
            let v4 = s.v4_mut();
            v4.df = false;
            v4.id = 777;
            if i + 1 == n {
                s.tcp_mut().flags |= flags::PSH;
            }
            s.payload(vec![i as u8; mss as usize]).build()
        })
        .collect()
}

fn run_json(args: &[&str]) -> serde_json::Value {
    json_of(&offload(args))
}

#[test]
fn gro_and_analyze_follow_the_kernel_line_on_df0_fixed_ids() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("df0-fixed.pcap");
    let n = 8;
    write_pcap(&input, &df0_fixed_id_train(n));
    let input = input.to_str().unwrap();
    let gro = |line: &str| {
        let out = dir.path().join(format!("gro-{line}.pcap"));
        let j = run_json(&[
            "gro",
            input,
            "-o",
            out.to_str().unwrap(),
            "--kernel",
            line,
            "--no-checksum-check",
            "--json",
        ]);
        assert_eq!(j["settings"]["kernel"], line, "{j}");
        j["packets_out"].as_u64().unwrap()
    };
    let analyze = |line: &str| {
        let j = run_json(&["analyze", input, "--kernel", line, "--json"]);
        let w = &j["what_if"][0];
        assert_eq!(w["kernel"], line, "{w}");
        w["stack_packets"].as_u64().unwrap()
    };
    for line in ["6.1", "6.12"] {
        assert_eq!(gro(line), n as u64, "kernel {line}: no merge");
        assert_eq!(analyze(line), n as u64, "kernel {line}: no merge");
    }
    for line in ["6.18", "7.x"] {
        assert_eq!(gro(line), 1, "kernel {line}: one super-packet");
        assert_eq!(analyze(line), 1, "kernel {line}: one super-packet");
    }
}

#[test]
fn gso_reports_its_line_and_all_reject_unknown_lines() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.pcap");
    write_pcap(&input, &df0_fixed_id_train(4));
    let input = input.to_str().unwrap();
    let out = dir.path().join("out.pcap");
    let out = out.to_str().unwrap();
    for line in ["6.1", "6.12", "6.18", "7.x"] {
        let j = run_json(&["gso", input, "-o", out, "--kernel", line, "--json"]);
        assert_eq!(j["kernel"], line, "{j}");
    }
    for cmd in [
        vec!["gro", input, "-o", out],
        vec!["gso", input, "-o", out],
        vec!["analyze", input],
    ] {
        let res = Command::new(BIN)
            .args(&cmd)
            .args(["--kernel", "6.6"])
            .output()
            .unwrap();
        assert!(!res.status.success(), "{cmd:?} --kernel 6.6 accepted");
        let err = String::from_utf8_lossy(&res.stderr);
        assert!(err.contains("6.12"), "{cmd:?}: {err}");
    }
}
