//! Bounded memory whatever the flow count: `offload gso` and `offload gro`
//! on 5 million one-packet flows stay under 500 MB peak resident memory
//! (VmHWM, as `wait4(2)` reports it for the child), and a flow with
//! super-packets that comes after them still gets its MSS from its own
//! handshake.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_offload");

const FLOWS: u32 = 5_000_000;
const LIMIT_KB: i64 = 500 * 1024;

/// An Ethernet + IPv4 + TCP frame (checksums left zero: neither command
/// verifies them here).
fn tcp4(src: [u8; 4], sport: u16, flags: u8, seq: u32, options: &[u8], payload: usize) -> Vec<u8> {
    let tcp_len = 20 + options.len();
    let ip_len = 20 + tcp_len + payload;
    let mut f = vec![0u8; 14 + ip_len];
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = &mut f[14..];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&(ip_len as u16).to_be_bytes());
    ip[6] = 0x40; // DF
    ip[8] = 64;
    ip[9] = 6;
    ip[12..16].copy_from_slice(&src);
    ip[16..20].copy_from_slice(&[10, 200, 0, 1]);
    let t = &mut f[34..];
    t[0..2].copy_from_slice(&sport.to_be_bytes());
    t[2..4].copy_from_slice(&443u16.to_be_bytes());
    t[4..8].copy_from_slice(&seq.to_be_bytes());
    t[12] = ((tcp_len / 4) as u8) << 4;
    t[13] = flags;
    t[14..16].copy_from_slice(&65535u16.to_be_bytes());
    t[20..20 + options.len()].copy_from_slice(options);
    f
}

/// Writes a pcap: `FLOWS` one-packet flows (distinct source address and
/// port), then one flow with a SYN announcing MSS 1000 and three 10-segment
/// super-packets.
fn write_capture(path: &Path) {
    let mut out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path).unwrap());
    // pcap header, microseconds, Ethernet.
    let mut h = Vec::new();
    h.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    h.extend_from_slice(&2u16.to_le_bytes());
    h.extend_from_slice(&4u16.to_le_bytes());
    h.extend_from_slice(&[0; 8]);
    h.extend_from_slice(&262_144u32.to_le_bytes());
    h.extend_from_slice(&1u32.to_le_bytes());
    out.write_all(&h).unwrap();
    let mut record = |i: u32, f: &[u8]| {
        let mut r = [0u8; 16];
        r[0..4].copy_from_slice(&(1_700_000_000 + i / 1_000_000).to_le_bytes());
        r[4..8].copy_from_slice(&(i % 1_000_000).to_le_bytes());
        r[8..12].copy_from_slice(&(f.len() as u32).to_le_bytes());
        r[12..16].copy_from_slice(&(f.len() as u32).to_le_bytes());
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

/// Runs `offload args`, stdout to `json`, and returns the exit code and the
/// child's peak resident set in KiB.
#[allow(clippy::zombie_processes)] // reaped by wait4 below, which also gives its rusage
fn run_peak(args: &[&std::ffi::OsStr], json: &Path) -> (i32, i64) {
    let child = Command::new(BIN)
        .args(args)
        .stdout(std::fs::File::create(json).unwrap())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child (never waited for through `child`),
    // writing into the two locals above.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid);
    assert!(libc::WIFEXITED(status));
    (libc::WEXITSTATUS(status), usage.ru_maxrss)
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
