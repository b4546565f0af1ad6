//! Capture reading: bytes per second through `CaptureReader`, by input kind.
//!
//! One 64 MiB pcap of 1514-byte frames and 66-byte ACKs (2:1, a bulk TCP
//! capture's mix) is written once to a temporary file and read from the page
//! cache (the first pass warms it). Each iteration reads every frame:
//!
//! * `file`: `CaptureReader::open` on the file, `read(2)` into the reader's
//!   buffer (the kernel copies the page cache: what `offload analyze` does);
//! * `memory`: `CaptureReader::from_reader` over the same bytes already in
//!   memory (a `memcpy` instead of the system call): the parser's own cost
//!   and a copy without the kernel's page-cache walk;
//!
//! each twice: touching every byte of every frame (what `offload analyze`
//! does when it verifies checksums) and touching the headers only (the first
//! 64 bytes, a capture whose checksums are not verified).
//!
//! `cargo bench -p offload-capture --bench reader`; throughput is in bytes
//! of the file per second.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use offload_capture::{CaptureFormat, CaptureReader, CaptureWriter, FrameMeta, LinkType};
use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

const FILE_BYTES: u64 = 64 << 20;

fn write_capture(path: &Path) {
    let out = std::fs::File::create(path).expect("create the capture");
    let mut w =
        CaptureWriter::from_writer(out, "bench.pcap", CaptureFormat::Pcap).expect("pcap writer");
    let frame: Vec<u8> = (0..1514u32).map(|i| i as u8).collect();
    let mut n = 0i64;
    while w.stats().bytes < FILE_BYTES {
        let len = if n % 3 == 2 { 66 } else { 1514 };
        let meta = FrameMeta::new(
            1_700_000_000_000_000_000 + n * 1000,
            LinkType::ETHERNET,
            len,
        );
        w.write_frame(&meta, &frame[..len]).expect("write a frame");
        n += 1;
    }
    w.finish().expect("finish the capture");
}

/// Reads every frame, folding `touch` bytes of each (all when `None`).
fn read_all(mut r: CaptureReader, touch: Option<usize>) -> u64 {
    let mut sum = 0u64;
    while let Some(f) = r.next_frame().expect("a good capture") {
        let d = match touch {
            Some(n) => &f.data[..n.min(f.data.len())],
            None => f.data,
        };
        sum = d.chunks(8).fold(sum, |s, c| {
            s.wrapping_add(c.iter().map(|&b| u64::from(b)).sum())
        });
    }
    sum
}

fn reader(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("bench.pcap");
    write_capture(&path);
    let bytes: &'static [u8] = Vec::leak(std::fs::read(&path).expect("the capture"));
    let len = bytes.len() as u64;
    let mut g = c.benchmark_group("capture_read");
    g.throughput(Throughput::Bytes(len));
    g.sample_size(20);
    g.measurement_time(Duration::from_secs(6));
    for (touch_name, touch) in [("every_byte", None), ("headers", Some(64))] {
        g.bench_with_input(BenchmarkId::new("file", touch_name), &touch, |b, &t| {
            b.iter(|| black_box(read_all(CaptureReader::open(&path).expect("open"), t)))
        });
        g.bench_with_input(BenchmarkId::new("memory", touch_name), &touch, |b, &t| {
            b.iter(|| {
                let src = std::io::Cursor::new(bytes);
                let r = CaptureReader::from_reader(src, "bench.pcap").expect("header");
                black_box(read_all(r, t))
            })
        });
    }
    g.finish();
}

criterion_group!(benches, reader);
criterion_main!(benches);
