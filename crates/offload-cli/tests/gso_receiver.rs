//! `offload gso` on a bare receiver-side capture of real kernel GRO output
//! (scripts/gso-receiver-check.sh: two namespaces, veth at MTU 1500 and
//! 9000, IPv4 and IPv6 transfers, tcpdump on both ends). Needs root; fails
//! (never skips) without it.

use std::process::Command;

/// The "wire frames reproduced a/b" figure and the excess of one line.
fn score(out: &str, name: &str) -> (u64, u64, u64) {
    let line = out
        .lines()
        .find(|l| l.starts_with(name))
        .unwrap_or_else(|| panic!("no `{name}` line in:\n{out}"));
    let frac = line
        .split("reproduced ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .expect("a/b");
    let (a, b) = frac.split_once('/').expect("a/b");
    let excess = line.rsplit("excess ").next().expect("excess");
    (
        a.parse().unwrap(),
        b.parse().unwrap(),
        excess.trim().parse().unwrap(),
    )
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn gso_reproduces_the_wire_from_a_bare_receiver_capture() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new("bash")
        .arg(format!("{root}/scripts/gso-receiver-check.sh"))
        .arg(dir.path())
        .arg("1500000")
        .env("OFFLOAD", env!("CARGO_BIN_EXE_offload"))
        .output()
        .expect("bash runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "script failed:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // GRO merged: the receiver's capture alone matches little of the wire.
    let (rx, total, _) = score(&text, "receiver.pcap");
    assert!(total > 1000 && rx * 2 < total, "{text}");
    for name in ["gso.pcap", "gso-nosyn.pcap"] {
        let (hit, total, excess) = score(&text, name);
        assert!(hit * 100 >= total * 95, "{name}: {hit}/{total}\n{text}");
        assert!(excess * 100 <= total, "{name}: {excess} excess\n{text}");
    }
    // Each of the four flows (v4/v6 x MTU 1500/9000) used its true MSS.
    let summary = std::fs::read_to_string(dir.path().join("gso-nosyn-summary.txt")).unwrap();
    for mss in [" 1448 ", " 1428 ", " 8948 ", " 8928 "] {
        assert!(summary.contains(mss), "no flow cut at{mss}:\n{summary}");
    }
}
