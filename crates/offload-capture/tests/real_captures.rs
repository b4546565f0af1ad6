//! Real captures (tests/data, made by make-fixtures.sh with dumpcap and tcpdump)
//! read the same with our reader as with tshark 4, field by field, and survive
//! a copy through our writer. Requires tshark: fails without it.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use offload_capture::{CaptureFormat, CaptureReader, CaptureWriter, LinkType};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// tshark's view: number, interface id, epoch time, length, captured length.
fn tshark_view(path: &Path) -> Vec<String> {
    let out = Command::new("tshark")
        .arg("-n")
        .arg("-r")
        .arg(path)
        .args(["-T", "fields", "-E", "separator=|"])
        .args([
            "-e",
            "frame.number",
            "-e",
            "frame.interface_id",
            "-e",
            "frame.time_epoch",
        ])
        .args(["-e", "frame.len", "-e", "frame.cap_len"])
        .output()
        .unwrap_or_else(|e| {
            panic!("tshark is required for this test (apt-get install tshark): {e}")
        });
    assert!(
        out.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

fn our_view(path: &Path) -> Vec<String> {
    let mut r = CaptureReader::open(path).unwrap();
    let (frames, err) = read_all(&mut r);
    assert!(err.is_none(), "{}", err.unwrap());
    frames
        .iter()
        .map(|f| {
            // tshark leaves frame.interface_id empty for pcap.
            let iface = if r.format() == CaptureFormat::Pcap {
                String::new()
            } else {
                f.interface.to_string()
            };
            let ts = f.timestamp_ns;
            format!(
                "{}|{iface}|{}.{:09}|{}|{}",
                f.number,
                ts / 1_000_000_000,
                ts % 1_000_000_000,
                f.orig_len,
                f.data.len()
            )
        })
        .collect()
}

#[test]
fn real_captures_read_exactly_as_tshark_reads_them() {
    for name in ["multi.pcapng", "micro.pcap", "nano96.pcap"] {
        let p = data(name);
        let ours = our_view(&p);
        assert!(ours.len() >= 10, "{name}: fixture too small");
        assert_eq!(ours, tshark_view(&p), "{name}");
    }
}

#[test]
fn real_capture_facts() {
    let mut r = CaptureReader::open(data("multi.pcapng")).unwrap();
    let (frames, _) = read_all(&mut r);
    let ifs = r.interfaces();
    assert_eq!(ifs.len(), 2);
    assert_eq!(
        (ifs[0].name.as_deref(), ifs[0].link_type),
        (Some("lo"), LinkType::ETHERNET)
    );
    assert_eq!(
        (ifs[1].name.as_deref(), ifs[1].link_type),
        (Some("any"), LinkType::LINUX_SLL)
    );
    assert!(frames
        .iter()
        .any(|f| f.interface == 1 && f.link_type == LinkType::LINUX_SLL));
    // Loopback GSO/GRO: some frames are larger than the 1500-byte MTU would allow.
    assert!(frames.iter().any(|f| f.data.len() > 9000));

    let mut r = CaptureReader::open(data("nano96.pcap")).unwrap();
    let (frames, _) = read_all(&mut r);
    assert!(frames.iter().all(|f| f.data.len() <= 96));
    assert!(
        frames.iter().any(|f| f.orig_len > 96),
        "snaplen 96 must have cut some frames"
    );
}

#[test]
fn real_captures_survive_a_copy_in_both_formats() {
    for name in ["multi.pcapng", "micro.pcap", "nano96.pcap"] {
        let mut r = CaptureReader::open(data(name)).unwrap();
        let (want, _) = read_all(&mut r);
        for ext in ["pcap", "pcapng"] {
            if name == "multi.pcapng" && ext == "pcap" {
                continue; // two link types cannot go into one pcap (tested in write.rs)
            }
            let out = TempFile::new(&format!("copy-{name}.{ext}"));
            let mut r = CaptureReader::open(data(name)).unwrap();
            let mut w = CaptureWriter::create(&out.0, None).unwrap();
            while let Some(f) = r.next_frame().unwrap() {
                w.write(&f).unwrap();
            }
            w.finish().unwrap();
            let mut r2 = CaptureReader::open(&out.0).unwrap();
            let (got, err) = read_all(&mut r2);
            assert!(err.is_none());
            let key = |f: &Owned| {
                (
                    f.number,
                    f.link_type,
                    f.timestamp_ns,
                    f.orig_len,
                    f.data.clone(),
                )
            };
            assert_eq!(
                got.iter().map(key).collect::<Vec<_>>(),
                want.iter().map(key).collect::<Vec<_>>(),
                "{name} -> {ext}"
            );
        }
    }
}

#[test]
fn copy_frame_keeps_the_input_interfaces() {
    let mut r = CaptureReader::open(data("multi.pcapng")).unwrap();
    let out = TempFile::new("copy-ifaces.pcapng");
    let mut w = CaptureWriter::create(&out.0, None).unwrap();
    let mut n = 0;
    while let Some(f) = r.next_frame().unwrap() {
        assert_eq!(f.interface_info.link_type, f.link_type);
        w.copy_frame(&f).unwrap();
        n += 1;
    }
    w.finish().unwrap();
    // Same interfaces (ids, names, link types) and the same frames on them.
    let mut r1 = CaptureReader::open(data("multi.pcapng")).unwrap();
    let (a, _) = read_all(&mut r1);
    let mut r2 = CaptureReader::open(&out.0).unwrap();
    let (b, _) = read_all(&mut r2);
    assert_eq!(b.len(), n);
    let key = |f: &Owned| (f.interface, f.link_type, f.timestamp_ns, f.data.clone());
    assert_eq!(
        a.iter().map(key).collect::<Vec<_>>(),
        b.iter().map(key).collect::<Vec<_>>()
    );
    let names = |r: &CaptureReader| {
        r.interfaces()
            .iter()
            .map(|i| (i.name.clone(), i.link_type))
            .collect::<Vec<_>>()
    };
    // Interface order follows first use; both fixtures' interfaces appear.
    let mut n1 = names(&r1);
    let mut n2 = names(&r2);
    n1.sort();
    n2.sort();
    assert_eq!(n1, n2);
}
