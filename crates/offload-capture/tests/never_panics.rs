//! Property: whatever the bytes, the reader returns frames or an error; it
//! never panics, never loops, and frames always lie within the input.

mod common;

use common::*;
use offload_capture::{CaptureReader, MAX_FRAME_LEN};
use proptest::prelude::*;

/// Reads everything; checks the invariants a caller relies on.
fn drain(bytes: Vec<u8>) {
    let len = bytes.len() as u64;
    let Ok(mut r) = CaptureReader::from_reader(std::io::Cursor::new(bytes), "fuzz") else {
        return;
    };
    let mut last = 0u64;
    let mut count = 0u64;
    loop {
        let (number, caplen, iface) = match r.next_frame() {
            Ok(Some(f)) => (f.number, f.data.len() as u64, f.interface),
            Ok(None) => break,
            Err(e) => {
                // Errors must render and point inside (or at the end of) the input.
                let s = e.to_string();
                assert!(s.starts_with("fuzz: "), "{s}");
                assert!(e.offset <= len, "{s}");
                break;
            }
        };
        assert!(number > last, "frame numbers must increase");
        last = number;
        assert!(caplen <= u64::from(MAX_FRAME_LEN));
        assert!(
            (iface as usize) < r.interfaces().len(),
            "frame names a missing interface"
        );
        count += 1;
        // Each frame takes at least a 16-byte record header or 16-byte block.
        assert!(count * 16 <= len, "more frames than the input can hold");
    }
    assert!(r.bytes_read() <= len);
    assert!(r.next_frame().unwrap().is_none());
}

/// A valid pcapng with two interfaces and a few packets, to mutate.
fn valid_pcapng() -> Vec<u8> {
    let mut f = shb(false);
    f.extend(idb(false, 1, 0, &[(9, vec![9]), (2, b"eth0".to_vec())]));
    f.extend(idb(false, 101, 128, &[(9, vec![0x80 | 10])]));
    f.extend(epb(false, 0, 1, 60, &frame_bytes(60, 1)));
    f.extend(epb(false, 1, 2, 200, &frame_bytes(100, 2)));
    f.extend(spb(false, 30, &frame_bytes(30, 3)));
    f.extend(block(false, 0x0BAD, &[1, 2, 3, 4, 5]));
    f.extend(shb(true));
    f.extend(idb(true, 113, 0, &[]));
    f.extend(pb(true, 0, 9, 20, &frame_bytes(20, 4)));
    f
}

fn valid_pcap() -> Vec<u8> {
    let mut f = pcap_header(true, true, 200, 1);
    f.extend(pcap_record(true, 1, 2, 60, 60, &frame_bytes(60, 1)));
    f.extend(pcap_record(true, 3, 4, 100, 1500, &frame_bytes(100, 2)));
    f
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        drain(bytes);
    }

    #[test]
    fn arbitrary_bytes_after_a_valid_magic_never_panic(
        magic in prop::sample::select(vec![
            vec![0xd4u8, 0xc3, 0xb2, 0xa1], vec![0xa1, 0xb2, 0xc3, 0xd4],
            vec![0x4d, 0x3c, 0xb2, 0xa1], vec![0xa1, 0xb2, 0x3c, 0x4d],
            vec![0x0a, 0x0d, 0x0d, 0x0a],
        ]),
        rest in proptest::collection::vec(any::<u8>(), 0..512),
    ) {
        let mut b = magic;
        b.extend(rest);
        drain(b);
    }

    #[test]
    fn mutated_valid_files_never_panic(
        ng in any::<bool>(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
        do_cut in any::<bool>(),
    ) {
        let mut b = if ng { valid_pcapng() } else { valid_pcap() };
        for (at, v) in edits {
            let i = at.index(b.len());
            b[i] = v;
        }
        if do_cut {
            let n = cut.index(b.len());
            b.truncate(n);
        }
        drain(b);
    }
}

#[test]
fn the_unmutated_seeds_read_completely() {
    let (frames, err) = read_bytes_as_stream(&valid_pcapng(), "seed.pcapng").unwrap();
    assert!(err.is_none(), "{}", err.unwrap());
    // EPB, EPB, SPB, (custom block counted as frame 4), PB.
    let nums: Vec<_> = frames.iter().map(|f| f.number).collect();
    assert_eq!(nums, vec![1, 2, 3, 5]);
    let (frames, err) = read_bytes_as_stream(&valid_pcap(), "seed.pcap").unwrap();
    assert!(err.is_none());
    assert_eq!(frames.len(), 2);
}
