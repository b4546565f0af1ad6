//! Bounded memory whatever the flow count: `offload gso` and `offload gro`
//! on 5 million one-packet flows stay under 500 MB peak resident memory
//! (VmHWM, as `wait4(2)` reports it for the child), and a flow with
//! super-packets that comes after them still gets its MSS from its own
//! handshake.

use std::io::Write;
use std::path::Path;
mod common;

use common::pcap::{self, Resolution};
use common::run_peak;

const FLOWS: u32 = 5_000_000;
const LIMIT_KB: i64 = 500 * 1024;

/// An Ethernet + IPv4 + TCP frame to 10.200.0.1:443, window 65535
/// (checksums left zero: neither command verifies them here).
fn tcp4(src: [u8; 4], sport: u16, flags: u8, seq: u32, options: &[u8], payload: usize) -> Vec<u8> {
    pcap::tcp4(
        src,
        sport,
        [10, 200, 0, 1],
        443,
        flags,
        seq,
        0,
        65535,
        options,
        payload,
    )
}

/// Writes a pcap: `FLOWS` one-packet flows (distinct source address and
/// port), then one flow with a SYN announcing MSS 1000 and three 10-segment
/// super-packets.
fn write_capture(path: &Path) {
    let mut out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path).unwrap());
    out.write_all(&pcap::header(Resolution::Micros, 262_144))
        .unwrap();
    let mut record = |i: u32, f: &[u8]| {
        let len = f.len() as u32;
        let r = pcap::record_header(1_700_000_000 + i / 1_000_000, i % 1_000_000, len, len);
        out.write_all(&r).unwrap();
        out.write_all(f).unwrap();
    };
    let mut frame = tcp4([10, 0, 0, 0], 0, 0x10, 1, &[], 10);
    for i in 0..FLOWS {
        let src = (0x0a00_0000 | (i >> 8)).to_be_bytes();
        frame[26..30].copy_from_slice(&src);
        frame[34..36].copy_from_slice(&(1024 + (i & 0xff) as u16).to_be_bytes());
        record(i, &frame);
    }
    let src = [10, 250, 0, 9];
    record(FLOWS, &tcp4(src, 5555, 0x02, 0, &[2, 4, 0x03, 0xe8], 0));
    let mut syn_ack = tcp4([10, 200, 0, 1], 443, 0x12, 0, &[2, 4, 0x03, 0xe8], 0);
    // The reply goes the other way.
    syn_ack[26..30].copy_from_slice(&[10, 200, 0, 1]);
    syn_ack[30..34].copy_from_slice(&src);
    syn_ack[34..36].copy_from_slice(&443u16.to_be_bytes());
    syn_ack[36..38].copy_from_slice(&5555u16.to_be_bytes());
    record(FLOWS + 1, &syn_ack);
    for k in 0..3u32 {
        record(
            FLOWS + 2 + k,
            &tcp4(src, 5555, 0x10, 1 + k * 10_000, &[], 10_000),
        );
    }
    out.flush().unwrap();
}

#[test]
fn gso_and_gro_stay_bounded_on_five_million_flows() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("flows.pcap");
    write_capture(&input);
    let out = dir.path().join("out.pcap");
    let json = dir.path().join("summary.json");

    let (code, peak_kb) = run_peak(
        &[
            "gso".as_ref(),
            input.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
            "--json".as_ref(),
        ],
        &json,
    );
    assert_eq!(code, 0);
    let s: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    eprintln!(
        "gso: peak {} MB, flow table {}",
        peak_kb / 1024,
        s["flow_table"]
    );
    assert!(peak_kb < LIMIT_KB, "gso peak {peak_kb} KiB");
    assert_eq!(s["frames_in"], u64::from(FLOWS) + 5);
    assert_eq!(s["super_packets"], 3);
    assert_eq!(s["segments_out"], 30);
    assert_eq!(s["frames_out"], u64::from(FLOWS) + 2 + 30);
    let t = &s["flow_table"];
    let cap = offload_transform::DEFAULT_MAX_FLOWS as u64;
    assert_eq!(t["max_flows"], cap);
    assert_eq!(t["peak_flows"], cap);
    assert!(t["forgotten_flows"].as_u64().unwrap() >= u64::from(FLOWS) - cap);
    assert_eq!(t["untracked_frames"], 0);
    // The late flow still learned its MSS from its handshake.
    assert_eq!(s["mss_sources"], serde_json::json!([["syn", 3]]));

    let (code, peak_kb) = run_peak(
        &[
            "gro".as_ref(),
            input.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
            "--json".as_ref(),
            "--no-checksum-check".as_ref(),
        ],
        &json,
    );
    assert_eq!(code, 0);
    let s: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    eprintln!("gro: peak {} MB", peak_kb / 1024);
    assert!(peak_kb < LIMIT_KB, "gro peak {peak_kb} KiB");
    assert_eq!(s["frames_in"], u64::from(FLOWS) + 5);
}
