//! `offload analyze` as a user runs it: exit statuses and what stderr
//! says, beside tshark on the same input.

mod common;

use common::pcap::{self, Resolution};
use common::BIN;
use std::process::Command;

/// A pcap global header (nanoseconds, Ethernet, snaplen 262144) and no
/// record: a valid, empty capture.
fn empty_pcap() -> Vec<u8> {
    pcap::header(Resolution::Nanos, 262_144)
}

/// A pcapng with a section header and one Ethernet interface, no packet.
fn empty_pcapng() -> Vec<u8> {
    let mut f = Vec::new();
    // Section header block: type, length, byte-order magic, version 1.0,
    // section length unknown (-1), length again.
    f.extend_from_slice(&0x0a0d_0d0au32.to_le_bytes());
    f.extend_from_slice(&28u32.to_le_bytes());
    f.extend_from_slice(&0x1a2b_3c4du32.to_le_bytes());
    f.extend_from_slice(&1u16.to_le_bytes());
    f.extend_from_slice(&0u16.to_le_bytes());
    f.extend_from_slice(&u64::MAX.to_le_bytes());
    f.extend_from_slice(&28u32.to_le_bytes());
    // Interface description block: Ethernet, snaplen 0 (none).
    f.extend_from_slice(&1u32.to_le_bytes());
    f.extend_from_slice(&20u32.to_le_bytes());
    f.extend_from_slice(&1u16.to_le_bytes());
    f.extend_from_slice(&0u16.to_le_bytes());
    f.extend_from_slice(&0u32.to_le_bytes());
    f.extend_from_slice(&20u32.to_le_bytes());
    f
}

#[test]
fn an_empty_capture_is_empty_and_exits_0_as_tshark_does() {
    let dir = tempfile::tempdir().unwrap();
    for (name, bytes) in [
        ("empty.pcap", empty_pcap()),
        ("empty.pcapng", empty_pcapng()),
    ] {
        let input = dir.path().join(name);
        std::fs::write(&input, bytes).unwrap();
        let tshark = Command::new("tshark").arg("-r").arg(&input).output();
        if let Ok(t) = tshark {
            // Where tshark runs, it reads the file as empty and valid.
            assert!(t.status.success(), "tshark on {name}: {t:?}");
            assert_eq!(String::from_utf8_lossy(&t.stdout).lines().count(), 0);
        }
        let out = Command::new(BIN)
            .args(["analyze", "--json"])
            .arg(&input)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{name}: {err}");
        assert!(err.contains("no frames"), "{name}: {err}");
        let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(r["inputs"][0]["frames"], 0);
        assert_eq!(r["flows"].as_array().map(Vec::len), Some(0));
        // The text summary too.
        let out = Command::new(BIN)
            .arg("analyze")
            .arg(&input)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{name}");
    }
}

/// With no capture given, every line (text and JSON, findings, notes and
/// hop changes included) names the bundled samples, never the private
/// temporary copies analyze reads them from.
#[test]
fn the_bundled_samples_are_named_as_such_never_by_their_temporary_copy() {
    for json in [false, true] {
        let mut cmd = Command::new(BIN);
        cmd.arg("analyze");
        if json {
            cmd.arg("--json");
        }
        let out = cmd.output().expect("running offload analyze");
        assert!(out.status.success(), "{out:?}");
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            all.contains("(bundled) samples/vxlan-broken.pcapng"),
            "json {json}: {all}"
        );
        let tmp = std::env::temp_dir().display().to_string();
        let leaked: Vec<&str> = all
            .lines()
            .filter(|l| l.contains("offload-") && l.contains(&tmp))
            .collect();
        assert!(
            leaked.is_empty(),
            "json {json}: temporary paths: {leaked:?}"
        );
    }
}

/// A finding that says "rerun with --FLAG" names a flag `offload analyze`
/// has, and rerunning with it clears that finding (public captures with
/// checksums a sender's NIC would fill: tshark shows them bad too).
#[test]
fn a_finding_that_says_rerun_with_a_flag_names_a_flag_that_clears_it() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../offload-analyze/tests/data/public");
    let json = |file: &std::path::Path, extra: &[&str]| -> serde_json::Value {
        let out = Command::new(BIN)
            .args(["analyze", "--json"])
            .args(extra)
            .arg(file)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}: {:?} {out:?}",
            file.display(),
            extra
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let mut checked = 0;
    for name in ["kday4.pcap", "zeek-tcp__retransmit-fast009.pcap"] {
        let file = dir.join(name);
        let v = json(&file, &[]);
        for f in v["findings"].as_array().unwrap() {
            let fix = f["fix"].as_str().unwrap_or("");
            let Some((_, rest)) = fix.split_once("rerun with ") else {
                continue;
            };
            let flag: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            assert!(flag.starts_with("--"), "{name}: {fix}");
            let kind = f["kind"].as_str().unwrap();
            let again = json(&file, &[&flag]);
            assert!(
                !again["findings"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|g| g["kind"] == kind),
                "{name}: {kind} still found with {flag}"
            );
            checked += 1;
        }
    }
    assert!(checked > 0, "no finding named a flag to rerun with");
}

/// The HTML report's TCP table shows every per-flow TCP figure of
/// `--json` (`flows[].tcp`: loss, ECN, RTT, window and zero window, SACK,
/// Wireshark's flags), on the bundled samples.
#[test]
fn the_html_report_shows_every_tcp_figure_of_the_json() {
    let dir = tempfile::tempdir().unwrap();
    let samples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../samples");
    for s in ["healthy-tcp.pcapng", "gro-receiver.pcapng"] {
        let seen = common::report_html::check_report(&samples.join(s), dir.path());
        for k in ["rtt.samples", "window.max", "bytes_in_flight_max"] {
            assert!(
                seen.contains_key(k),
                "{s}: no {k} in the HTML report: {seen:?}"
            );
        }
    }
}
