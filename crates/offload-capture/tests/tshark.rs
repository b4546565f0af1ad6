//! tshark 4 reads what we write. Requires `tshark` (Debian package `tshark`,
//! installed by `.ci/install`): these tests fail, they do not skip, without it.

mod common;

use std::process::Command;

use common::*;
use offload_capture::{
    CaptureWriter, FrameMeta, InterfaceDesc, LinkType, Oversize, WIRESHARK_MAX_CAPLEN,
};

/// Runs `tshark -r path -T fields -e ...`; returns (success, stdout lines, stderr).
fn tshark(path: &std::path::Path, fields: &[&str]) -> (bool, Vec<Vec<String>>, String) {
    let mut cmd = Command::new("tshark");
    cmd.arg("-n")
        .arg("-r")
        .arg(path)
        .args(["-T", "fields", "-E", "separator=|"]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().unwrap_or_else(|e| {
        panic!("tshark is required for this test (apt-get install tshark): cannot run it: {e}")
    });
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines = stdout
        .lines()
        .map(|l| l.split('|').map(str::to_owned).collect())
        .collect();
    (
        out.status.success(),
        lines,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Nanosecond epoch time as tshark prints `frame.time_epoch`.
fn epoch(ns: i64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

#[test]
fn tshark_reads_our_pcap_and_pcapng_with_a_200kb_frame_and_nanoseconds() {
    let sizes = [
        74usize,
        1514,
        65535,
        200_000,
        WIRESHARK_MAX_CAPLEN as usize,
        1514,
    ];
    for name in ["ts.pcap", "ts.pcapng"] {
        let t = TempFile::new(name);
        let mut w = CaptureWriter::create(&t.0, None).unwrap();
        let mut want = Vec::new();
        for (i, n) in sizes.iter().enumerate() {
            let d = eth_ipv6_tcp(*n, 1000 * i as u32);
            let ts = 1_700_000_000_000_000_001 + i as i64 * 123_456_789;
            w.write_frame(&FrameMeta::new(ts, LinkType::ETHERNET, d.len()), &d)
                .unwrap();
            want.push(vec![
                (i + 1).to_string(),
                n.to_string(),
                n.to_string(),
                epoch(ts),
                "tcp".into(),
            ]);
        }
        // And one frame cut by a snaplen of 96: caplen 96 < orig_len 1514.
        let d = eth_ipv6_tcp(1514, 7);
        let ts = 1_700_000_100_999_999_999;
        w.write_frame(
            &FrameMeta {
                orig_len: 1514,
                ..FrameMeta::new(ts, LinkType::ETHERNET, 96)
            },
            &d[..96],
        )
        .unwrap();
        want.push(vec![
            (sizes.len() + 1).to_string(),
            "1514".into(),
            "96".into(),
            epoch(ts),
            "tcp".into(),
        ]);
        w.finish().unwrap();

        let (ok, mut lines, err) = tshark(
            &t.0,
            &[
                "frame.number",
                "frame.len",
                "frame.cap_len",
                "frame.time_epoch",
                "frame.protocols",
            ],
        );
        assert!(ok, "{name}: tshark failed: {err}");
        // The protocol stack must be Ethernet/IPv6/TCP; what follows TCP depends
        // on tshark's payload heuristics.
        for l in &mut lines {
            if let Some(p) = l.get_mut(4) {
                assert!(p.starts_with("eth:ethertype:ipv6:tcp"), "{name}: {p}");
                *p = "tcp".into();
            }
        }
        assert_eq!(lines, want, "{name}");
    }
}

#[test]
fn tshark_sees_each_pcapng_interface_with_its_link_type() {
    let t = TempFile::new("ifs.pcapng");
    let mut w = CaptureWriter::create(&t.0, None).unwrap();
    w.write_frame(
        &FrameMeta::new(1_000, LinkType::ETHERNET, 100),
        &eth_ipv6_tcp(100, 1),
    )
    .unwrap();
    w.write_frame(&FrameMeta::new(2_000, LinkType::RAW, 48), &ipv4_udp(48))
        .unwrap();
    let v4 = w
        .add_interface(&InterfaceDesc {
            link_type: LinkType::IPV4,
            name: Some("tun0".into()),
        })
        .unwrap();
    w.write_frame(
        &FrameMeta {
            interface: Some(v4),
            ..FrameMeta::new(3_000, LinkType::IPV4, 40)
        },
        &ipv4_udp(40),
    )
    .unwrap();
    w.finish().unwrap();
    let (ok, lines, err) = tshark(
        &t.0,
        &[
            "frame.interface_id",
            "frame.interface_name",
            "frame.protocols",
            "frame.time_epoch",
        ],
    );
    assert!(ok, "tshark failed: {err}");
    assert_eq!(
        lines,
        vec![
            vec!["0", "unknown", "eth:ethertype:ipv6:tcp:data", "0.000001000"],
            vec!["1", "unknown", "raw:ip:udp:data", "0.000002000"],
            vec!["2", "tun0", "ip:udp:data", "0.000003000"],
        ]
    );
}

#[test]
fn big_tcp_frames_above_262144_bytes_need_truncate_mode_for_tshark() {
    let big = eth_ipv6_tcp(524_294, 1);
    let small = eth_ipv6_tcp(1514, 2);
    for name in ["big.pcap", "big.pcapng"] {
        // Lossless (default): tshark 4.0 shows the frames before the big one,
        // then stops with "bigger than maximum of 262144" (measured on 4.0.17).
        // A later tshark that reads it all would also satisfy this test.
        let t = TempFile::new(name);
        let mut w = CaptureWriter::create(&t.0, None).unwrap();
        w.write_frame(&FrameMeta::new(1, LinkType::ETHERNET, 1514), &small)
            .unwrap();
        w.write_frame(&FrameMeta::new(2, LinkType::ETHERNET, big.len()), &big)
            .unwrap();
        let s = w.finish().unwrap();
        assert_eq!(s.first_over_wireshark_limit, Some(2));
        let (ok, lines, err) = tshark(&t.0, &["frame.number", "frame.cap_len"]);
        assert_eq!(
            lines.first(),
            Some(&vec!["1".to_string(), "1514".to_string()]),
            "{name}: {err}"
        );
        if !ok {
            assert!(
                err.contains("262144"),
                "{name}: unexpected tshark error: {err}"
            );
        } else {
            assert_eq!(
                lines.get(1),
                Some(&vec!["2".to_string(), "524294".to_string()])
            );
        }

        // Truncate mode: every frame readable, original length kept.
        let t = TempFile::new(&format!("cut-{name}"));
        let mut w = CaptureWriter::create(&t.0, None).unwrap();
        w.set_oversize(Oversize::Truncate(WIRESHARK_MAX_CAPLEN));
        w.write_frame(&FrameMeta::new(1, LinkType::ETHERNET, 1514), &small)
            .unwrap();
        w.write_frame(&FrameMeta::new(2, LinkType::ETHERNET, big.len()), &big)
            .unwrap();
        w.write_frame(&FrameMeta::new(3, LinkType::ETHERNET, 1514), &small)
            .unwrap();
        w.finish().unwrap();
        let (ok, lines, err) = tshark(&t.0, &["frame.number", "frame.len", "frame.cap_len"]);
        assert!(ok, "{name}: tshark failed on the truncated file: {err}");
        assert_eq!(
            lines,
            vec![
                vec!["1", "1514", "1514"],
                vec!["2", "524294", "262144"],
                vec!["3", "1514", "1514"]
            ],
            "{name}"
        );
    }
}

/// A GRO super-packet written zero-copy (its 74 header bytes, then 45
/// payload ranges of 1448 bytes, as `write_frame_parts` gets them) reads in
/// tshark as the same frame written whole: lengths, TCP payload length,
/// the packet comment, and the bytes themselves (`-x` hex dump).
#[test]
fn tshark_reads_frames_written_as_parts_like_frames_written_whole() {
    let d = eth_ipv6_tcp(74 + 45 * 1448, 1);
    let mut parts: Vec<&[u8]> = vec![&d[..74]];
    parts.extend(d[74..].chunks(1448));
    for ext in ["pcap", "pcapng"] {
        let whole = TempFile::new(&format!("whole.{ext}"));
        let split = TempFile::new(&format!("parts.{ext}"));
        for (t, as_parts) in [(&whole, false), (&split, true)] {
            let mut w = CaptureWriter::create(&t.0, None).unwrap();
            let meta = FrameMeta::new(1_000_000_007, LinkType::ETHERNET, d.len());
            for _ in 0..3 {
                if as_parts {
                    w.write_frame_parts(&meta, &parts, Some("gso_size=1448"))
                        .unwrap();
                } else {
                    w.write_frame_with_comment(&meta, &d, Some("gso_size=1448"))
                        .unwrap();
                }
            }
            w.finish().unwrap();
        }
        let fields = [
            "frame.number",
            "frame.len",
            "frame.cap_len",
            "tcp.len",
            "frame.time_epoch",
        ];
        let (ok, lines, err) = tshark(&split.0, &fields);
        assert!(ok, "{ext}: tshark failed: {err}");
        let want: Vec<Vec<String>> = (1..=3)
            .map(|i| {
                [i.to_string(), d.len().to_string(), d.len().to_string()]
                    .into_iter()
                    .chain(["65160".into(), "1.000000007".into()])
                    .collect()
            })
            .collect();
        assert_eq!(lines, want, "{ext}");
        let dump = |p: &std::path::Path| {
            let out = Command::new("tshark")
                .arg("-n")
                .arg("-x")
                .arg("-r")
                .arg(p)
                .output()
                .expect("tshark must be installed (.ci/install)");
            assert!(out.status.success(), "{ext}: tshark -x failed");
            out.stdout
        };
        let (a, b) = (dump(&whole.0), dump(&split.0));
        assert!(!a.is_empty() && a == b, "{ext}: tshark -x output differs");
    }
}
