//! Runs GRO once over a train of 1514-byte frames, the same trains as
//! `benches/gro.rs`, for instruction counts under callgrind, which are
//! steady on a shared machine where wall time is not:
//!
//! ```text
//! cargo build --release -p offload --example gro_train
//! valgrind --tool=callgrind --toggle-collect='*run_gro*' \
//!     target/release/examples/gro_train tcp4 8 verify
//! ```
//!
//! Arguments: `tcp4|tcp6`, flow count, `verify|no-verify|valid` (software
//! verification, none, or the caller's "checksum already good" verdict),
//! with `+copy` for contiguous delivery (e.g. `valid+copy`; zero-copy is
//! the engine's default, and `+zc`, its old suffix, is accepted), optional
//! frame count (default 4096). Prints frames, deliveries and
//! instructions per frame are `Ir / frames` from callgrind's summary.

use offload::build::{FrameSpec, TcpSpec};
use offload::gro::RxChecksum;
use offload::{Delivered, GroConfig, GroEngine, Input, LinkKind};
use std::hint::black_box;

const MSS: usize = 1448;

fn tcp4(f: usize, i: usize) -> Vec<u8> {
    let src = [10, 1, (f >> 8) as u8, f as u8];
    let tcp = TcpSpec::data(10_000 + (f % 50_000) as u16, 5201, 1 + (i * MSS) as u32)
        .with_timestamps(1000, 2000);
    let mut s = FrameSpec::tcp4(src, [10, 2, 0, 1], tcp).payload(vec![(f ^ i) as u8; MSS]);
    s.v4_mut().id = i as u16;
    s.build()
}

fn tcp6(f: usize, i: usize) -> Vec<u8> {
    let mut src = [0u8; 16];
    src[0] = 0xfd;
    src[14] = (f >> 8) as u8;
    src[15] = f as u8;
    let mut dst = src;
    dst[1] = 2;
    let tcp = TcpSpec::data(10_000 + (f % 50_000) as u16, 5201, 1 + (i * MSS) as u32)
        .with_timestamps(1000, 2000);
    FrameSpec::tcp6(src, dst, tcp)
        .payload(vec![(f ^ i) as u8; MSS])
        .build()
}

#[inline(never)]
fn run_gro(cfg: &GroConfig, csum: RxChecksum, zero_copy: bool, frames: &[Vec<u8>]) -> u64 {
    let mut e = GroEngine::new(cfg.clone());
    e.set_zero_copy(zero_copy);
    let mut delivered = 0u64;
    let mut out = |d: &Delivered<'_>| {
        delivered += 1;
        black_box(d.data.len());
    };
    for (i, f) in frames.iter().enumerate() {
        let input = Input {
            data: f,
            link: LinkKind::Ethernet,
            timestamp_ns: 100 * i as u64,
            frame: i as u64 + 1,
            orig_len: f.len() as u32,
        };
        e.receive_with_checksum(input, csum, &mut out);
    }
    e.finish(&mut out);
    delivered
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let proto = args.get(1).map_or("tcp4", String::as_str);
    let flows: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1);
    let mode = args.get(3).map_or("verify", String::as_str);
    let total: usize = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(4096);
    let make = if proto == "tcp6" { tcp6 } else { tcp4 };
    let frames: Vec<Vec<u8>> = (0..total).map(|n| make(n % flows, n / flows)).collect();
    let cfg = GroConfig::default().verify_checksums(!mode.starts_with("no-verify"));
    let csum = if mode.starts_with("valid") {
        RxChecksum::Unnecessary { level: 0 }
    } else {
        RxChecksum::None
    };
    let d = run_gro(&cfg, csum, !mode.ends_with("+copy"), &frames);
    println!("{proto} flows={flows} mode={mode} frames={total} deliveries={d}");
}
