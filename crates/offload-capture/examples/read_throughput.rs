//! Measures read throughput of `CaptureReader` on a generated or given file.
//!
//! ```text
//! cargo run --release -p offload-capture --example read_throughput -- \
//!     --generate /tmp/ofl-1g.pcapng --size-mb 1024 [--mix acks|mtu|big|tiny] [--keep]
//! cargo run --release -p offload-capture --example read_throughput -- FILE
//! ```
//!
//! With `--generate` the file is written first (with this crate's writer) and
//! removed afterwards unless `--keep` is given. Each pass reads every frame and
//! folds one byte of each into a checksum so the work cannot be optimised away.
//! Reads come from the page cache after the first pass; the figure is the
//! parser's cost plus one `read` copy per MiB, not the disk's speed.

use std::path::PathBuf;
use std::time::Instant;

use offload_capture::{CaptureReader, CaptureWriter, FrameMeta, LinkType};

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mut path = None;
    let mut generate = false;
    let mut size_mb = 1024u64;
    let mut mix = String::from("mtu");
    let mut keep = false;
    let mut passes = 3;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--generate" => {
                generate = true;
                path = args.next().map(PathBuf::from);
            }
            "--size-mb" => size_mb = args.next().ok_or("--size-mb N")?.parse()?,
            "--mix" => mix = args.next().ok_or("--mix acks|mtu|big|tiny")?,
            "--passes" => passes = args.next().ok_or("--passes N")?.parse()?,
            "--keep" => keep = true,
            _ => path = Some(PathBuf::from(a)),
        }
    }
    let path = path.ok_or("usage: read_throughput [--generate] FILE")?;
    if generate {
        let t = Instant::now();
        let n = generate_file(&path, size_mb << 20, &mix)?;
        println!(
            "generated {} ({n} frames, mix {mix}) in {:.1} s",
            path.display(),
            t.elapsed().as_secs_f64()
        );
    }
    let result = measure(&path, passes);
    if generate && !keep {
        std::fs::remove_file(&path)?;
    }
    result
}

/// Frame sizes repeating in the file: `acks` = 66-byte ACKs and 1514-byte
/// segments 1:2 (a bulk TCP trace), `mtu` = all 1514, `big` = 64 KiB GRO frames,
/// `tiny` = all 66 bytes (the per-frame cost).
fn sizes(mix: &str) -> &'static [usize] {
    match mix {
        "acks" => &[66, 1514, 1514],
        "big" => &[65_546],
        "tiny" => &[66],
        _ => &[1514],
    }
}

fn generate_file(path: &PathBuf, bytes: u64, mix: &str) -> Result<u64, Box<dyn std::error::Error>> {
    let sizes = sizes(mix);
    let max = sizes.iter().copied().max().unwrap_or(1514);
    let payload: Vec<u8> = (0..max).map(|i| i as u8).collect();
    let mut w = CaptureWriter::create(path, None)?;
    let mut n = 0u64;
    while w.stats().bytes < bytes {
        let len = sizes[(n as usize) % sizes.len()];
        let meta = FrameMeta::new(
            1_700_000_000_000_000_000 + n as i64 * 1_000,
            LinkType::ETHERNET,
            len,
        );
        w.write_frame(&meta, &payload[..len])?;
        n += 1;
    }
    w.finish()?;
    Ok(n)
}

fn measure(path: &PathBuf, passes: u32) -> Result<(), Box<dyn std::error::Error>> {
    let size = std::fs::metadata(path)?.len();
    let mut best = f64::MAX;
    for pass in 1..=passes {
        let t = Instant::now();
        let mut r = CaptureReader::open(path)?;
        let mut frames = 0u64;
        let mut sum = 0u64;
        while let Some(f) = r.next_frame()? {
            frames += 1;
            sum = sum.wrapping_add(u64::from(f.data.last().copied().unwrap_or(0)))
                ^ f.timestamp_ns as u64;
        }
        let s = t.elapsed().as_secs_f64();
        best = best.min(s);
        println!(
            "pass {pass}: {frames} frames, {:.0} MB in {s:.3} s = {:.2} GB/s, {:.1} Mframes/s (checksum {sum:x})",
            size as f64 / 1e6,
            size as f64 / s / 1e9,
            frames as f64 / s / 1e6
        );
    }
    println!("best: {:.2} GB/s", size as f64 / best / 1e9);
    Ok(())
}
