//! Every kind of bad input gives a located, typed error after all good frames.

mod common;

use common::*;
use offload_capture::{CaptureError, CaptureReader, ErrorKind};

/// How to feed the bytes: as a file (size known) or a stream (size unknown).
#[derive(Clone, Copy, Debug)]
enum Via {
    File,
    Stream,
}

/// Reads `bytes`; asserts that `good` frames came first (numbered 1..=good)
/// and returns the error, which must exist. Also checks the reader is fused.
fn fails(bytes: &[u8], name: &str, via: Via, good: usize) -> CaptureError {
    let t = TempFile::with(name, bytes);
    let opened = match via {
        Via::File => CaptureReader::open(&t.0),
        Via::Stream => CaptureReader::from_reader(
            std::io::Cursor::new(bytes.to_vec()),
            t.0.display().to_string(),
        ),
    };
    let mut r = match opened {
        Ok(r) => r,
        Err(e) => {
            assert_eq!(
                good, 0,
                "open failed but {good} frames were expected first: {e}"
            );
            return e;
        }
    };
    // Strict, as `--strict`: a caplen above the snaplen is an error too.
    r.set_snaplen_check(true);
    let (frames, err) = read_all(&mut r);
    let err = err.unwrap_or_else(|| panic!("{via:?}: no error after {} frames", frames.len()));
    assert_eq!(
        frames.len(),
        good,
        "{via:?}: frames before the error ({err})"
    );
    for (i, f) in frames.iter().enumerate() {
        assert_eq!(f.number, i as u64 + 1);
    }
    assert!(
        r.next_frame().unwrap().is_none(),
        "reader must stop after an error"
    );
    assert!(err.file.ends_with(name), "file name in {err}");
    err
}

/// Two good Ethernet frames in a little-endian nanosecond pcap.
fn good_pcap(snaplen: u32) -> Vec<u8> {
    let mut f = pcap_header(false, true, snaplen, 1);
    f.extend(pcap_record(false, 1, 0, 60, 60, &frame_bytes(60, 1)));
    f.extend(pcap_record(false, 2, 0, 100, 100, &frame_bytes(100, 2)));
    f
}

/// Two good frames in a pcapng of the given byte order.
fn good_pcapng(be: bool) -> Vec<u8> {
    let mut f = shb(be);
    f.extend(idb(be, 1, 0, &[(9, vec![9])]));
    f.extend(epb(be, 0, 1, 60, &frame_bytes(60, 1)));
    f.extend(epb(be, 0, 2, 100, &frame_bytes(100, 2)));
    f
}

fn le32(x: u32) -> [u8; 4] {
    x.to_le_bytes()
}

#[test]
fn empty_file_and_unknown_magic_and_short_header() {
    for via in [Via::File, Via::Stream] {
        let e = fails(&[], "empty.pcap", via, 0);
        assert!(
            matches!(
                e.kind,
                ErrorKind::Truncated {
                    needed: 4,
                    available: 0
                }
            ),
            "{e}"
        );
        assert_eq!((e.frame, e.offset, e.field), (None, 0, "magic"));

        let e = fails(b"GIF89a-not-a-capture-file", "x.pcap", via, 0);
        assert!(
            matches!(e.kind, ErrorKind::UnknownMagic { magic: 0x4749_4638 }),
            "{e}"
        );
        assert!(
            e.to_string()
                .contains("0x47494638 is not a pcap or pcapng magic"),
            "{e}"
        );

        let e = fails(&pcap_header(false, false, 0, 1)[..10], "short.pcap", via, 0);
        assert!(
            matches!(
                e.kind,
                ErrorKind::Truncated {
                    needed: 24,
                    available: 10
                }
            ),
            "{e}"
        );

        let mut v = pcap_header(false, false, 0, 1);
        v[4] = 3; // version 3.4
        let e = fails(&v, "v3.pcap", via, 0);
        assert!(
            matches!(e.kind, ErrorKind::UnsupportedVersion { major: 3, minor: 4 }),
            "{e}"
        );
    }
}

#[test]
fn pcap_truncated_record_header() {
    let mut f = good_pcap(65535);
    let off = f.len() as u64;
    f.extend_from_slice(&[1, 2, 3, 4, 5]);
    for via in [Via::File, Via::Stream] {
        let e = fails(&f, "th.pcap", via, 2);
        assert_eq!((e.frame, e.offset, e.field), (Some(3), off, "header"));
        assert!(
            matches!(
                e.kind,
                ErrorKind::Truncated {
                    needed: 16,
                    available: 5
                }
            ),
            "{e}"
        );
    }
}

#[test]
fn pcap_caplen_exceeding_the_rest_of_the_file() {
    let mut f = good_pcap(0);
    let off = f.len() as u64;
    f.extend(pcap_record(false, 3, 0, u32::MAX, 60, &[0u8; 80]));
    // File: the size is known, so the message is the documented one.
    let e = fails(&f, "in.pcap", Via::File, 2);
    assert!(
        matches!(
            e.kind,
            ErrorKind::ExceedsRemaining {
                value: 4294967295,
                remaining: 80
            }
        ),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        format!("{}: frame 3 at byte {off}: record header field caplen = 4294967295 exceeds the remaining 80 bytes", e.file)
    );
    // Stream: no size, the absurd length is refused before anything is buffered.
    let e = fails(&f, "in.pcap", Via::Stream, 2);
    assert!(
        matches!(
            e.kind,
            ErrorKind::TooLarge {
                value: 4294967295,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!((e.frame, e.offset, e.field), (Some(3), off, "caplen"));

    // A plausible length that still runs past the end of a stream.
    let mut g = good_pcap(0);
    g.extend(pcap_record(false, 3, 0, 1000, 1000, &[0u8; 80]));
    let e = fails(&g, "in.pcap", Via::Stream, 2);
    assert!(
        matches!(
            e.kind,
            ErrorKind::Truncated {
                needed: 1000,
                available: 80
            }
        ),
        "{e}"
    );
    assert_eq!((e.frame, e.field), (Some(3), "packet data"));
}

#[test]
fn pcap_absurd_two_gib_caplen_in_a_stream_is_refused_without_allocating() {
    let mut f = good_pcap(0);
    f.extend(pcap_record(false, 3, 0, 2 << 30, 60, &[0u8; 16]));
    let e = fails(&f, "abs.pcap", Via::Stream, 2);
    assert!(
        matches!(
            e.kind,
            ErrorKind::TooLarge {
                value: 2147483648,
                max: 16777216
            }
        ),
        "{e}"
    );
}

#[test]
fn pcap_caplen_above_snaplen() {
    let mut f = good_pcap(100);
    let off = f.len() as u64;
    f.extend(pcap_record(false, 3, 0, 101, 101, &frame_bytes(101, 3)));
    for via in [Via::File, Via::Stream] {
        let e = fails(&f, "snap.pcap", via, 2);
        assert!(
            matches!(
                e.kind,
                ErrorKind::ExceedsSnaplen {
                    value: 101,
                    snaplen: 100
                }
            ),
            "{e}"
        );
        assert_eq!((e.frame, e.offset, e.field), (Some(3), off, "caplen"));
    }
    // By default (as libpcap and tshark) the frame is read whole and counted.
    f.extend(pcap_record(false, 4, 0, 60, 60, &frame_bytes(60, 4)));
    f.extend(pcap_record(false, 5, 0, 120, 120, &frame_bytes(120, 5)));
    let mut r = CaptureReader::from_reader(std::io::Cursor::new(f), "snap.pcap").unwrap();
    let (frames, err) = read_all(&mut r);
    assert!(err.is_none());
    assert_eq!(frames.len(), 5);
    assert_eq!((frames[2].data.len(), frames[4].data.len()), (101, 120));
    assert_eq!(r.above_snaplen(), (2, 3));
}

#[test]
fn pcapng_block_length_not_a_multiple_of_4() {
    for be in [false, true] {
        let mut f = good_pcapng(be);
        let off = f.len() as u64;
        let mut bad = epb(be, 0, 3, 8, &[0; 8]);
        let len = bad.len() as u32 - 2;
        let lb = if be {
            len.to_be_bytes()
        } else {
            len.to_le_bytes()
        };
        bad[4..8].copy_from_slice(&lb);
        f.extend(bad);
        for via in [Via::File, Via::Stream] {
            let e = fails(&f, "m4.pcapng", via, 2);
            assert!(
                matches!(e.kind, ErrorKind::NotMultipleOf4 { value } if value == u64::from(len)),
                "{e}"
            );
            assert_eq!(
                (e.frame, e.offset, e.field),
                (Some(3), off, "block_total_length")
            );
        }
    }
}

#[test]
fn pcapng_trailing_length_mismatch() {
    let mut f = good_pcapng(false);
    let off = f.len() as u64;
    let mut bad = epb(false, 0, 3, 8, &[0; 8]);
    let n = bad.len();
    bad[n - 4..].copy_from_slice(&le32(44));
    f.extend(bad);
    f.extend(epb(false, 0, 4, 8, &[0; 8]));
    for via in [Via::File, Via::Stream] {
        let e = fails(&f, "tl.pcapng", via, 2);
        assert!(
            matches!(
                e.kind,
                ErrorKind::TrailingLengthMismatch {
                    leading: 40,
                    trailing: 44
                }
            ),
            "{e}"
        );
        assert_eq!(
            (e.frame, e.offset, e.field),
            (Some(3), off + 36, "trailing block_total_length")
        );
    }
    // The same on a skipped (unknown) block, which is streamed, not buffered.
    let mut g = good_pcapng(false);
    let mut unk = block(false, 0x7777, &[0; 20]);
    let n = unk.len();
    unk[n - 4..].copy_from_slice(&le32(8));
    g.extend(unk);
    let e = fails(&g, "tl2.pcapng", Via::Stream, 2);
    assert!(
        matches!(
            e.kind,
            ErrorKind::TrailingLengthMismatch {
                leading: 32,
                trailing: 8
            }
        ),
        "{e}"
    );
    assert_eq!(e.frame, None);
    assert!(e.to_string().contains("(after frame 2)"), "{e}");
}

#[test]
fn pcapng_absurd_block_lengths() {
    let mut f = good_pcapng(false);
    let off = f.len() as u64;
    f.extend_from_slice(&le32(6));
    f.extend_from_slice(&le32(2 << 30));
    f.extend_from_slice(&[0; 64]);
    let e = fails(&f, "abs.pcapng", Via::File, 2);
    assert!(
        matches!(
            e.kind,
            ErrorKind::ExceedsRemaining {
                value: 2147483648,
                remaining: 72
            }
        ),
        "{e}"
    );
    assert_eq!(
        (e.frame, e.offset, e.field),
        (Some(3), off, "block_total_length")
    );
    let e = fails(&f, "abs.pcapng", Via::Stream, 2);
    assert!(
        matches!(
            e.kind,
            ErrorKind::TooLarge {
                value: 2147483648,
                ..
            }
        ),
        "{e}"
    );

    // An unknown block claiming 2 GiB in a stream: skipped to the end, then truncated.
    let mut g = good_pcapng(false);
    g.extend_from_slice(&le32(0x7777));
    g.extend_from_slice(&le32(2 << 30));
    g.extend_from_slice(&[0; 64]);
    let e = fails(&g, "abs2.pcapng", Via::Stream, 2);
    assert!(
        matches!(
            e.kind,
            ErrorKind::Truncated {
                needed: 2147483648,
                available: 72
            }
        ),
        "{e}"
    );

    // Too small to hold its own header.
    let mut h = good_pcapng(false);
    h.extend_from_slice(&le32(6));
    h.extend_from_slice(&le32(8));
    h.extend_from_slice(&[0; 32]);
    for via in [Via::File, Via::Stream] {
        let e = fails(&h, "small.pcapng", via, 2);
        assert!(
            matches!(e.kind, ErrorKind::TooSmall { value: 8, min: 32 }),
            "{e}"
        );
    }
}

#[test]
fn pcapng_captured_length_beyond_its_block_or_snaplen() {
    let mut f = good_pcapng(true);
    let off = f.len() as u64;
    let mut bad = epb(true, 0, 3, 8, &[0; 8]);
    bad[20..24].copy_from_slice(&1000u32.to_be_bytes()); // caplen
    f.extend(bad);
    for via in [Via::File, Via::Stream] {
        let e = fails(&f, "cl.pcapng", via, 2);
        assert!(
            matches!(
                e.kind,
                ErrorKind::ExceedsBlock {
                    value: 1000,
                    room: 8
                }
            ),
            "{e}"
        );
        assert_eq!((e.frame, e.offset, e.field), (Some(3), off, "caplen"));
    }

    let mut g = shb(false);
    g.extend(idb(false, 1, 64, &[]));
    g.extend(epb(false, 0, 1, 64, &[0; 64]));
    g.extend(epb(false, 0, 2, 65, &[0; 65]));
    let e = fails(&g, "sl.pcapng", Via::Stream, 1);
    assert!(
        matches!(
            e.kind,
            ErrorKind::ExceedsSnaplen {
                value: 65,
                snaplen: 64
            }
        ),
        "{e}"
    );
    assert_eq!(e.frame, Some(2));
}

#[test]
fn pcapng_packet_for_an_undeclared_interface() {
    let mut f = good_pcapng(false);
    let off = f.len() as u64;
    f.extend(epb(false, 1, 3, 4, &[0; 4]));
    for via in [Via::File, Via::Stream] {
        let e = fails(&f, "if.pcapng", via, 2);
        assert!(
            matches!(
                e.kind,
                ErrorKind::UnknownInterface {
                    interface: 1,
                    declared: 1
                }
            ),
            "{e}"
        );
        assert_eq!((e.frame, e.offset, e.field), (Some(3), off, "interface_id"));
    }
    // A new section forgets the interfaces of the previous one.
    let mut g = good_pcapng(false);
    g.extend(shb(true));
    g.extend(epb(true, 0, 3, 4, &[0; 4]));
    let e = fails(&g, "if2.pcapng", Via::Stream, 2);
    assert!(
        matches!(
            e.kind,
            ErrorKind::UnknownInterface {
                interface: 0,
                declared: 0
            }
        ),
        "{e}"
    );
    // A simple packet block before any interface.
    let mut h = shb(false);
    h.extend(spb(false, 4, &[0; 4]));
    let e = fails(&h, "if3.pcapng", Via::Stream, 0);
    assert!(
        matches!(
            e.kind,
            ErrorKind::UnknownInterface {
                interface: 0,
                declared: 0
            }
        ),
        "{e}"
    );
    assert_eq!(e.frame, Some(1));
}

#[test]
fn pcapng_truncated_inside_a_block() {
    let mut f = good_pcapng(false);
    let off = f.len() as u64;
    let b = epb(false, 0, 3, 100, &[0; 100]);
    f.extend_from_slice(&b[..50]);
    let e = fails(&f, "tb.pcapng", Via::File, 2);
    assert!(
        matches!(
            e.kind,
            ErrorKind::ExceedsRemaining {
                value: 132,
                remaining: 50
            }
        ),
        "{e}"
    );
    let e = fails(&f, "tb.pcapng", Via::Stream, 2);
    assert!(
        matches!(
            e.kind,
            ErrorKind::Truncated {
                needed: 132,
                available: 50
            }
        ),
        "{e}"
    );
    assert_eq!((e.frame, e.offset), (Some(3), off));
    // Cut inside the 8-byte block header.
    let mut g = good_pcapng(false);
    g.extend_from_slice(&b[..6]);
    let e = fails(&g, "tb2.pcapng", Via::Stream, 2);
    assert!(
        matches!(
            e.kind,
            ErrorKind::Truncated {
                needed: 8,
                available: 6
            }
        ),
        "{e}"
    );
}

#[test]
fn pcapng_bad_section_headers_and_options() {
    // Byte-order magic that is neither order, in a second section.
    let mut f = good_pcapng(false);
    let off = f.len() as u64;
    let mut s = shb(false);
    s[8..12].copy_from_slice(&le32(0xDEAD_BEEF));
    f.extend(s);
    let e = fails(&f, "bom.pcapng", Via::Stream, 2);
    assert!(
        matches!(
            e.kind,
            ErrorKind::InvalidValue {
                value: 0xDEAD_BEEF,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(
        (e.frame, e.offset, e.field),
        (None, off, "byte_order_magic")
    );

    // Version 2.0.
    let mut v = shb(false);
    v[12] = 2;
    let e = fails(&v, "ver.pcapng", Via::File, 0);
    assert!(
        matches!(e.kind, ErrorKind::UnsupportedVersion { major: 2, minor: 0 }),
        "{e}"
    );

    // An IDB option whose length runs past the block.
    let mut g = shb(false);
    let mut i = idb(false, 1, 0, &[(2, b"eth0".to_vec())]);
    i[18..20].copy_from_slice(&200u16.to_le_bytes()); // option length of if_name
    g.extend(i);
    let e = fails(&g, "opt.pcapng", Via::Stream, 0);
    assert!(
        matches!(e.kind, ErrorKind::InvalidValue { value: 200, .. }),
        "{e}"
    );
    assert_eq!(e.field, "option_length");

    // A resolution no integer type can hold.
    let mut h = shb(false);
    h.extend(idb(false, 1, 0, &[(9, vec![100])]));
    let e = fails(&h, "res.pcapng", Via::Stream, 0);
    assert!(
        matches!(e.kind, ErrorKind::InvalidValue { value: 100, .. }),
        "{e}"
    );
    assert_eq!(e.field, "if_tsresol");
}

#[test]
fn pcapng_timestamp_outside_the_nanosecond_range_is_clamped_and_counted() {
    let mut f = shb(false);
    f.extend(idb(false, 1, 0, &[(9, vec![0])])); // units of seconds
    f.extend(epb(false, 0, 1, 1, &[1]));
    f.extend(epb(false, 0, u64::MAX, 1, &[2]));
    f.extend(epb(false, 0, 2, 1, &[3]));
    let mut r = CaptureReader::from_reader(std::io::Cursor::new(f), "ts.pcapng").unwrap();
    let mut times = Vec::new();
    while let Some(fr) = r.next_frame().unwrap() {
        times.push(fr.timestamp_ns);
    }
    assert_eq!(times, [1_000_000_000, i64::MAX, 2_000_000_000]);
    assert_eq!(r.timestamps_clamped(), (1, 2));
}
