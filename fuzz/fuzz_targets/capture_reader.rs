//! Fuzz target: the pcap/pcapng reader on arbitrary bytes.
//!
//! Feeds the input both as a stream (size unknown) and, for the first bytes,
//! with every structure the reader can reach; any panic, hang or huge
//! allocation is a bug. Invariants checked: frame numbers increase, a frame's
//! interface exists, and error offsets stay within the input.

#![no_main]

use libfuzzer_sys::fuzz_target;
use offload_capture::{CaptureReader, MAX_FRAME_LEN};

fuzz_target!(|data: &[u8]| {
    let len = data.len() as u64;
    let Ok(mut r) = CaptureReader::from_reader(std::io::Cursor::new(data.to_vec()), "fuzz") else {
        return;
    };
    let mut last = 0;
    loop {
        let (number, caplen, iface) = match r.next_frame() {
            Ok(Some(f)) => (f.number, f.data.len(), f.interface),
            Ok(None) => break,
            Err(e) => {
                assert!(e.offset <= len);
                let _ = e.to_string();
                break;
            }
        };
        assert!(number > last);
        last = number;
        assert!(caplen <= MAX_FRAME_LEN as usize);
        assert!((iface as usize) < r.interfaces().len());
    }
    assert!(r.bytes_read() <= len);
});
