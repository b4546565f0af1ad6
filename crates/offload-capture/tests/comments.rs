//! Packet comments (pcapng opt_comment): written, read back, shown by tshark.

use offload_capture::{CaptureReader, CaptureWriter, FrameMeta, LinkType};
use std::process::Command;

#[test]
fn comments_round_trip_and_tshark_reads_them() {
    let dir = std::env::temp_dir().join(format!("ofl-comments-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("c.pcapng");
    let mut w = CaptureWriter::create(&path, None).unwrap();
    let frame = [0u8; 61];
    w.write_frame_with_comment(
        &FrameMeta::new(1_000, LinkType::ETHERNET, 61),
        &frame,
        Some("gso_size=1448 gso_type=0x1"),
    )
    .unwrap();
    w.write_frame(&FrameMeta::new(2_000, LinkType::ETHERNET, 61), &frame)
        .unwrap();
    w.write_frame_with_comment(
        &FrameMeta::new(3_000, LinkType::ETHERNET, 60),
        &frame[..60],
        Some("abc"),
    )
    .unwrap();
    w.finish().unwrap();

    let mut r = CaptureReader::open(&path).unwrap();
    let mut got = Vec::new();
    while let Some(f) = r.next_frame().unwrap() {
        got.push((
            f.data.len(),
            f.comment.map(|c| String::from_utf8_lossy(c).into_owned()),
        ));
    }
    assert_eq!(
        got,
        vec![
            (61, Some("gso_size=1448 gso_type=0x1".into())),
            (61, None),
            (60, Some("abc".into()))
        ]
    );

    let out = Command::new("tshark")
        .args([
            "-r",
            path.to_str().unwrap(),
            "-T",
            "fields",
            "-e",
            "frame.comment",
        ])
        .output()
        .expect("tshark must be installed (.ci/install)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("gso_size=1448 gso_type=0x1"),
        "tshark printed: {text}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
