//! `-` for standard input and output, FIFOs and process substitution, for
//! gro, gso and analyze, with tshark reading our standard output.

mod common;

use common::capture::tshark_frames_of;
use common::{json_of, output_with_stdin, BIN};
use std::io::Write;
use std::process::Command;
const SAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../samples/healthy-tcp.pcapng"
);

/// Runs `offload args` with `input` on standard input.
fn run_with_stdin(args: &[&str], input: &[u8]) -> std::process::Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args);
    output_with_stdin(cmd, input)
}

#[test]
fn analyze_reads_standard_input() {
    let sample = std::fs::read(SAMPLE).unwrap();
    let from_file = json_of(
        &Command::new(BIN)
            .args(["analyze", "--json", SAMPLE])
            .output()
            .unwrap(),
    );
    let from_pipe = json_of(&run_with_stdin(&["analyze", "--json", "-"], &sample));
    assert_eq!(from_pipe["inputs"][0]["path"], "stdin");
    assert_eq!(
        from_pipe["inputs"][0]["frames"],
        from_file["inputs"][0]["frames"]
    );
    assert_eq!(
        from_pipe["flows"].as_array().unwrap().len(),
        from_file["flows"].as_array().unwrap().len()
    );
    assert!(from_pipe["inputs"][0]["frames"].as_u64().unwrap() > 100);
}

#[test]
fn gro_and_gso_pipe_into_tshark() {
    let sample = std::fs::read(SAMPLE).unwrap();
    // Summary on stderr, capture on stdout.
    let gro = run_with_stdin(&["gro", "-", "-o", "-", "--json"], &sample);
    assert!(
        gro.status.success(),
        "{}",
        String::from_utf8_lossy(&gro.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&gro.stderr).expect("JSON on stderr");
    assert_eq!(summary["input"], "stdin");
    let out = summary["packets_out"].as_u64().unwrap() as usize;
    assert!(
        out < summary["frames_in"].as_u64().unwrap() as usize,
        "merged"
    );
    assert_eq!(tshark_frames_of(&gro.stdout), out);

    // And back: gso from a pipe (two passes over a copy of the stream).
    let gso = run_with_stdin(&["gso", "-", "-o", "-", "--json"], &gro.stdout);
    assert!(
        gso.status.success(),
        "{}",
        String::from_utf8_lossy(&gso.stderr)
    );
    let s: serde_json::Value = serde_json::from_slice(&gso.stderr).unwrap();
    assert_eq!(s["mss_sources"][0][0], "metadata");
    assert_eq!(
        tshark_frames_of(&gso.stdout),
        s["frames_out"].as_u64().unwrap() as usize
    );
    assert_eq!(s["frames_out"], summary["frames_in"]);
}

#[test]
fn fifo_and_process_substitution() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("in.pcapng");
    let st = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(st.success());
    let f2 = fifo.clone();
    let writer = std::thread::spawn(move || {
        let data = std::fs::read(SAMPLE).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&f2)
            .unwrap()
            .write_all(&data)
            .unwrap();
    });
    let out = json_of(
        &Command::new(BIN)
            .args(["analyze", "--json"])
            .arg(&fifo)
            .output()
            .unwrap(),
    );
    writer.join().unwrap();
    assert_eq!(out["inputs"][0]["path"], fifo.display().to_string());
    assert!(out["inputs"][0]["error"].is_null(), "{}", out["inputs"][0]);

    // In a $TMPDIR of its own, so that what is left there is the binary's.
    let tmp = tempfile::tempdir().unwrap();
    let sh = format!("'{BIN}' analyze --json <(cat '{SAMPLE}')");
    let out = json_of(
        &Command::new("bash")
            .args(["-c", &sh])
            .env("TMPDIR", tmp.path())
            .output()
            .unwrap(),
    );
    assert!(out["inputs"][0]["path"]
        .as_str()
        .unwrap()
        .starts_with("/dev/fd/"));
    assert!(out["inputs"][0]["frames"].as_u64().unwrap() > 100);
    // No temporary copy is left behind.
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn errors_name_the_file_once() {
    let out = Command::new(BIN)
        .args(["gro", "/nonexistent/in.pcap", "-o", "x.pcap"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("/nonexistent/in.pcap").count(), 1, "{err}");
    assert!(!err.contains("at byte 0"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["gro", SAMPLE, "-o", "/nonexistent/dir/out.pcap"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("output file") && err.contains("/nonexistent/dir/out.pcap"),
        "{err}"
    );
    let empty = dir.path().join("empty.pcap");
    std::fs::write(&empty, b"").unwrap();
    let out = Command::new(BIN)
        .arg("analyze")
        .arg(&empty)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains(&empty.display().to_string()), "{err}");
}

#[test]
fn analyze_names_an_unsupported_link_type() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("user0.pcap");
    // pcap header (link type 147, USER0) and one 4-byte record.
    let mut f = Vec::new();
    f.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    f.extend_from_slice(&[2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    f.extend_from_slice(&65535u32.to_le_bytes());
    f.extend_from_slice(&147u32.to_le_bytes());
    f.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 1, 2, 3, 4]);
    std::fs::write(&input, f).unwrap();
    let out = Command::new(BIN)
        .arg("analyze")
        .arg(&input)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("link type 147") && err.contains(&input.display().to_string()),
        "{err}"
    );
}
