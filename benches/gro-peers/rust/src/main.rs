//! gro-peers (Rust half): makes the frame trains every peer reads, and runs
//! offload's GRO engine, tun-rs's GRO and the memcpy/checksum floors over
//! them. `benches/gro-peers.sh` drives it beside the Go (wireguard-go) and
//! C (DPDK lib/gro) harnesses; every harness reads the same pcap files,
//! feeds them in the same batches, and prints one line in the same format:
//!
//! ```text
//! RESULT engine=<name> case=<file stem> frames=<n> batch=<b> out=<packets> ns_per_frame=<median CPU ns>
//! ```
//!
//! Batches: the train is cut into batches of `--batch` frames (128, the
//! batch size of tun-rs and wireguard-go, and DPDK's largest lightweight
//! GRO burst); each batch is copied, untimed, into the engine's own
//! receive buffers (as a TUN read or a NIC's DMA would leave it), then
//! coalesced and flushed (timed).
//!
//! Timing: the CPU time of the calling thread (`CLOCK_THREAD_CPUTIME_ID`)
//! around each batch, less the cost of the two clock reads, summed over
//! the train and divided by its frames; the median over `--reps` trains
//! (after one untimed warm-up train) is printed. The Go and C harnesses do
//! exactly the same.
//!
//! Subcommands:
//! - `gen DIR`: writes the synthetic trains (`tcp4-1.pcap`, `tcp4-8.pcap`,
//!   `tcp6-1.pcap`, `tcp6-8.pcap`, `tcp4-30000.pcap`, `tcp6-30000.pcap`):
//!   4096 Ethernet frames of 1514 bytes each, flows interleaved round-robin.
//! - `extract CAPTURE OUT.pcap [MIN_FLOWS]`: the first 4096 consecutive
//!   1514-byte TCP data frames of a real capture (pcap or pcapng), written
//!   as a plain pcap the other harnesses read.
//! - `run ENGINE PCAP [--batch N] [--reps N]` with ENGINE one of
//!   `offload`, `offload-valid`, `offload-noverify`, `offload-copy`,
//!   `offload-valid-copy`, `tun-rs`, `memcpy`, `checksum`,
//!   `checksum-tun-rs`, `copy-checksum`.

use std::hint::black_box;
use std::io::Write;
use std::path::Path;

use offload::build::{FrameSpec, TcpSpec};
use offload::{Delivered, GroConfig, GroEngine, Input, LinkKind, RxChecksum};

/// Frames per train.
const TRAIN: usize = 4096;
/// Ethernet frame length of every data frame.
const FRAME_LEN: usize = 1514;
/// Bytes of headroom before the IP header that tun-rs and wireguard-go need
/// for the virtio header: the Ethernet header's 14 bytes serve.
const ETH_LEN: usize = 14;

type BoxErr = Box<dyn std::error::Error>;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let r = match args.first().map(String::as_str) {
        Some("gen") if args.len() == 2 => generate(Path::new(&args[1])),
        Some("extract") if args.len() >= 3 => extract(
            Path::new(&args[1]),
            Path::new(&args[2]),
            args.get(3).map_or(Ok(1), |s| s.parse()).unwrap_or(1),
        ),
        Some("run") if args.len() >= 3 => run(&args[1], Path::new(&args[2]), &args[3..]),
        _ => Err("usage: gro-peers gen DIR | extract CAPTURE OUT.pcap [MIN_FLOWS] | run ENGINE PCAP [--batch N] [--reps N]".into()),
    };
    if let Err(e) = r {
        eprintln!("gro-peers: {e}");
        std::process::exit(1);
    }
}

// ---------------------------------------------------------------- frames

/// A deterministic payload (xorshift), so checksums see varied bytes.
fn payload(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Segment `i` of flow `f`, as a Linux sender makes it: timestamps option,
/// DF, IP ID incrementing per flow, ACK set, 1514 bytes on the wire.
fn tcp_frame(v6: bool, f: usize, i: usize) -> Vec<u8> {
    // 1514 - 14 (Ethernet) - IP header - 32 (TCP with timestamps).
    let mss = if v6 { 1428 } else { 1448 };
    let sport = 10_000 + (f % 50_000) as u16;
    let tcp = TcpSpec::data(sport, 5201, 1 + (i * mss) as u32)
        .with_timestamps(1000 + i as u32 / 1024, 2000);
    let data = payload((f as u64) << 32 | i as u64, mss);
    let frame = if v6 {
        let mut src = [0u8; 16];
        src[0] = 0xfd;
        src[13] = (f >> 16) as u8;
        src[14] = (f >> 8) as u8;
        src[15] = f as u8;
        let mut dst = src;
        dst[1] = 2;
        dst[13..16].fill(0);
        dst[15] = 1;
        FrameSpec::tcp6(src, dst, tcp).payload(data).build()
    } else {
        let src = [10, 1 + (f >> 16) as u8, (f >> 8) as u8, f as u8];
        let mut s = FrameSpec::tcp4(src, [10, 200, 0, 1], tcp).payload(data);
        s.v4_mut().id = i as u16;
        s.build()
    };
    assert_eq!(frame.len(), FRAME_LEN);
    frame
}

fn write_pcap(path: &Path, frames: &[Vec<u8>]) -> Result<(), BoxErr> {
    let mut out = Vec::with_capacity(24 + frames.len() * (16 + FRAME_LEN));
    // Classic pcap, microseconds, little endian, LINKTYPE_ETHERNET.
    out.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&0i32.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&65535u32.to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes());
    for (i, f) in frames.iter().enumerate() {
        out.extend_from_slice(&((i / 1_000_000) as u32).to_le_bytes());
        out.extend_from_slice(&((i % 1_000_000) as u32).to_le_bytes());
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(f);
    }
    std::fs::File::create(path)
        .and_then(|mut fl| fl.write_all(&out))
        .map_err(|e| format!("{}: {e}", path.display()).into())
}

fn generate(dir: &Path) -> Result<(), BoxErr> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for v6 in [false, true] {
        for flows in [1usize, 8, 30_000] {
            // Round-robin: frame n belongs to flow n % flows. With 30 000
            // flows no flow repeats within a train (every frame is a new
            // flow for the table), which is what 30 000 active flows look
            // like to a receive batch.
            let frames: Vec<Vec<u8>> = (0..TRAIN)
                .map(|n| tcp_frame(v6, n % flows, n / flows))
                .collect();
            let name = format!("tcp{}-{flows}.pcap", if v6 { 6 } else { 4 });
            write_pcap(&dir.join(&name), &frames)?;
        }
    }
    Ok(())
}

/// The first `TRAIN` consecutive full-sized (1514-byte) TCP data frames of a
/// real capture; frames of other sizes (ACKs, the last segment of a burst)
/// are skipped, as they would be cut out of a train of full frames.
fn extract(input: &Path, out: &Path, min_flows: usize) -> Result<(), BoxErr> {
    let mut r = offload_capture::CaptureReader::open(input)?;
    let mut frames = Vec::with_capacity(TRAIN);
    let mut flows = std::collections::HashSet::new();
    while let Some(f) = r.next_frame()? {
        if f.link_type != offload_capture::LinkType::ETHERNET || f.data.len() != FRAME_LEN {
            continue;
        }
        let d = f.data;
        let (is_tcp, ports) = match u16::from_be_bytes([d[12], d[13]]) {
            0x0800 => (d[23] == 6, &d[34..38]),
            0x86dd => (d[20] == 6, &d[54..58]),
            _ => (false, &d[..0]),
        };
        if !is_tcp {
            continue;
        }
        flows.insert(ports.to_vec());
        frames.push(d.to_vec());
        if frames.len() == TRAIN {
            break;
        }
    }
    if frames.len() < TRAIN {
        return Err(format!(
            "{}: only {} full-sized TCP frames, {TRAIN} needed",
            input.display(),
            frames.len()
        )
        .into());
    }
    if flows.len() < min_flows {
        return Err(format!(
            "{}: {} flows in the train, {min_flows} wanted",
            input.display(),
            flows.len()
        )
        .into());
    }
    write_pcap(out, &frames)?;
    eprintln!("{}: {TRAIN} frames, {} flows", out.display(), flows.len());
    Ok(())
}

/// Reads the plain pcap written by `gen`/`extract` (or any little-endian
/// Ethernet pcap).
fn read_pcap(path: &Path) -> Result<Vec<Vec<u8>>, BoxErr> {
    let mut r = offload_capture::CaptureReader::open(path)?;
    let mut frames = Vec::new();
    while let Some(f) = r.next_frame()? {
        frames.push(f.data.to_vec());
    }
    if frames.is_empty() {
        return Err(format!("{}: no frames", path.display()).into());
    }
    Ok(frames)
}

// ---------------------------------------------------------------- timing

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// An engine under test, batch by batch: `load` (untimed) puts the batch
/// into the engine's receive buffers, as a `recvmmsg`/TUN read or a NIC's
/// DMA would; `process` (timed) runs GRO over it and ends the batch;
/// `count` (untimed) says how many packets the batch became.
trait Engine {
    fn load(&mut self, batch: &[Vec<u8>]);
    fn process(&mut self);
    fn count(&mut self) -> u64;
}

/// What two back-to-back clock reads cost, subtracted from every batch.
fn clock_overhead_ns() -> u64 {
    let mut v: Vec<u64> = (0..1001)
        .map(|_| {
            let t0 = thread_cpu_ns();
            thread_cpu_ns() - t0
        })
        .collect();
    v.sort_unstable();
    v[v.len() / 2]
}

/// The verdict a NIC's `CHECKSUM_UNNECESSARY` or a vnet `DATA_VALID` gives.
const VALID: RxChecksum = RxChecksum::Unnecessary { level: 0 };

fn run(engine: &str, path: &Path, opts: &[String]) -> Result<(), BoxErr> {
    let mut batch = 128usize;
    let mut reps = 30usize;
    let mut it = opts.iter();
    while let Some(o) = it.next() {
        let mut val = || -> Result<usize, BoxErr> {
            Ok(it.next().ok_or(format!("{o} needs a value"))?.parse()?)
        };
        match o.as_str() {
            "--batch" => batch = val()?.max(1),
            "--reps" => reps = val()?.max(1),
            _ => return Err(format!("unknown option {o}").into()),
        }
    }
    let frames = read_pcap(path)?;
    let mut e: Box<dyn Engine> = match engine {
        "offload" => Box::new(Offload::new(true, RxChecksum::None, true, batch)),
        "offload-valid" => Box::new(Offload::new(true, VALID, true, batch)),
        "offload-noverify" => Box::new(Offload::new(false, RxChecksum::None, true, batch)),
        "offload-copy" => Box::new(Offload::new(true, RxChecksum::None, false, batch)),
        "offload-valid-copy" => Box::new(Offload::new(true, VALID, false, batch)),
        "tun-rs" => Box::new(TunRs::new(batch)),
        "memcpy" => Box::new(Floor::new(false, false, batch)),
        "checksum" => Box::new(Floor::new(true, false, batch)),
        "checksum-tun-rs" => Box::new(Floor::new(true, true, batch)),
        "copy-checksum" => Box::new(Floor::fused(batch)),
        _ => return Err(format!("unknown engine {engine}").into()),
    };
    let overhead = clock_overhead_ns();
    let mut samples = Vec::with_capacity(reps);
    let mut first_out = None;
    // Repetition 0 is an untimed warm-up (caches, allocators, predictors).
    for rep in 0..=reps {
        let (mut ns, mut out) = (0u64, 0u64);
        for chunk in frames.chunks(batch) {
            e.load(chunk);
            let t0 = thread_cpu_ns();
            e.process();
            let dt = thread_cpu_ns() - t0;
            ns += dt.saturating_sub(overhead);
            out += e.count();
        }
        if *first_out.get_or_insert(out) != out {
            return Err(format!("{engine}: {out} packets out, {first_out:?} before").into());
        }
        if rep > 0 {
            samples.push(ns as f64 / frames.len() as f64);
        }
    }
    let case = path.file_stem().map_or("?".into(), |s| s.to_string_lossy());
    println!(
        "RESULT engine={engine} case={case} frames={} batch={batch} out={} ns_per_frame={:.1}",
        frames.len(),
        first_out.unwrap_or(0),
        median(samples)
    );
    Ok(())
}

// ---------------------------------------------------------------- engines

/// `batch` receive buffers of `cap` bytes each, refilled for every batch.
struct RecvArea {
    bufs: Vec<Vec<u8>>,
    len: usize,
}

impl RecvArea {
    fn new(batch: usize, cap: usize) -> Self {
        RecvArea {
            bufs: (0..batch).map(|_| Vec::with_capacity(cap)).collect(),
            len: 0,
        }
    }

    fn load(&mut self, batch: &[Vec<u8>]) {
        for (b, f) in self.bufs.iter_mut().zip(batch) {
            b.clear();
            b.extend_from_slice(f);
        }
        self.len = batch.len();
    }

    fn frames(&self) -> &[Vec<u8>] {
        &self.bufs[..self.len]
    }
}

/// offload's engine through its public API: Ethernet frames in, one
/// `finish` per batch (the end of a receive batch, as napi_complete_done
/// flushes the kernel's GRO lists). `offload` verifies checksums (nothing
/// known of them), `offload-valid` gives each frame the verdict a NIC or a
/// vnet `DATA_VALID` header gives (`RxChecksum::Unnecessary`), and
/// `offload-noverify` turns verification off in the configuration. These
/// three use the engine's default delivery, zero-copy: the payload of every
/// held segment stays in its receive buffer and is delivered as a
/// `Delivered::frags` range, as DPDK chains mbufs and the kernel fills
/// `frags` (the receive buffers of a batch stay untouched until its
/// `finish`). `offload-valid` is the arm that does what DPDK's lib/gro
/// does: no checksum verified, no payload copied. The `-copy` arms ask
/// for contiguous packets (`GroEngine::set_zero_copy(false)`): each merged
/// payload is copied into its super-packet, as tun-rs and wireguard-go do.
struct Offload {
    engine: GroEngine,
    csum: RxChecksum,
    area: RecvArea,
    n: u64,
    delivered: u64,
}

impl Offload {
    fn new(verify: bool, csum: RxChecksum, zero_copy: bool, batch: usize) -> Self {
        let mut engine = GroEngine::new(GroConfig::default().verify_checksums(verify));
        engine.set_zero_copy(zero_copy);
        Offload {
            csum,
            engine,
            area: RecvArea::new(batch, 2048),
            n: 0,
            delivered: 0,
        }
    }
}

impl Engine for Offload {
    fn load(&mut self, batch: &[Vec<u8>]) {
        self.area.load(batch);
    }

    fn process(&mut self) {
        let mut delivered = 0u64;
        let mut out = |d: &Delivered<'_>| {
            delivered += 1;
            black_box((d.data.len(), d.frags.len()));
        };
        for f in self.area.frames() {
            self.n += 1;
            self.engine.receive_with_checksum(
                Input {
                    data: f,
                    link: LinkKind::Ethernet,
                    timestamp_ns: self.n * 100,
                    frame: self.n,
                    orig_len: f.len() as u32,
                },
                self.csum,
                &mut out,
            );
        }
        self.engine.finish(&mut out);
        self.delivered = delivered;
    }

    fn count(&mut self) -> u64 {
        self.delivered
    }
}

/// tun-rs's GRO (`GROTable::apply_gro`, what its `send_multiple` runs) over
/// the same frames as IP packets, the Ethernet header serving as headroom
/// for the virtio header. It coalesces in place, appending to the first
/// packet's buffer, so its buffers have 64 KiB of capacity, as tun-rs's
/// own examples allocate them.
struct TunRs {
    table: tun_rs::GROTable,
    area: RecvArea,
}

/// Written over the virtio-header room at load: a buffer whose marker
/// survives GRO was merged into another and is not written.
const MARKER: [u8; 10] = [0xa5; 10];

impl TunRs {
    fn new(batch: usize) -> Self {
        TunRs {
            table: tun_rs::GROTable::new(),
            area: RecvArea::new(batch, 65_536 + ETH_LEN),
        }
    }
}

impl Engine for TunRs {
    fn load(&mut self, batch: &[Vec<u8>]) {
        self.area.load(batch);
        for b in &mut self.area.bufs[..batch.len()] {
            b[ETH_LEN - 10..ETH_LEN].copy_from_slice(&MARKER);
        }
    }

    fn process(&mut self) {
        let n = self.area.len;
        self.table
            .apply_gro(&mut self.area.bufs[..n], ETH_LEN, false)
            .expect("tun-rs apply_gro");
    }

    fn count(&mut self) -> u64 {
        self.area
            .frames()
            .iter()
            .filter(|b| b[ETH_LEN - 10..ETH_LEN] != MARKER)
            .count() as u64
    }
}

/// The floors, over the same batches: `memcpy` copies each frame's TCP
/// payload once into a 64 KiB super-packet buffer (what a GRO that builds
/// contiguous packets must do at least); `checksum` computes one Internet
/// checksum over each frame's TCP segment (what verification must read at
/// least), with offload's checksum or with tun-rs's runtime-dispatched
/// (AVX2/SSE4.1) one; `copy-checksum` does both in one pass
/// (`offload::checksum::copy_and_sum`: what a copying GRO that verifies
/// must do at least).
struct Floor {
    checksum: bool,
    fused: bool,
    tun_rs: bool,
    area: RecvArea,
    buf: Vec<u8>,
    at: usize,
}

impl Floor {
    fn new(checksum: bool, tun_rs: bool, batch: usize) -> Self {
        Floor {
            checksum,
            fused: false,
            tun_rs,
            area: RecvArea::new(batch, 2048),
            buf: vec![0; 65_536],
            at: 0,
        }
    }
}

impl Floor {
    fn fused(batch: usize) -> Self {
        Floor {
            fused: true,
            ..Floor::new(false, false, batch)
        }
    }
}

impl Engine for Floor {
    fn load(&mut self, batch: &[Vec<u8>]) {
        self.area.load(batch);
    }

    fn process(&mut self) {
        let mut acc = 0u64;
        for f in &self.area.bufs[..self.area.len] {
            if self.fused {
                let l4 = l4_offset(f);
                let p = payload_offset(f);
                if self.at + f.len() - p > self.buf.len() {
                    black_box(&self.buf);
                    self.at = 0;
                }
                let end = self.at + f.len() - p;
                let h = offload::checksum::sum_bytes_scalar(0, &f[l4..p]);
                let sum = offload::checksum::copy_and_sum(h, &f[p..], &mut self.buf[self.at..end]);
                acc += u64::from(offload::checksum::fold(sum));
                self.at = end;
            } else if self.checksum {
                let seg = &f[l4_offset(f)..];
                acc += u64::from(if self.tun_rs {
                    tun_rs::checksum(seg, 0)
                } else {
                    offload::checksum::checksum(seg)
                });
            } else {
                let p = &f[payload_offset(f)..];
                if self.at + p.len() > self.buf.len() {
                    black_box(&self.buf);
                    self.at = 0;
                }
                self.buf[self.at..self.at + p.len()].copy_from_slice(p);
                self.at += p.len();
            }
        }
        black_box(acc);
        black_box(&self.buf);
    }

    fn count(&mut self) -> u64 {
        self.area.len as u64
    }
}

/// Offset of the TCP header of an Ethernet/IPv4 or IPv6/TCP frame.
fn l4_offset(f: &[u8]) -> usize {
    if f[12] == 0x86 {
        ETH_LEN + 40
    } else {
        ETH_LEN + usize::from(f[14] & 0xf) * 4
    }
}

/// Offset of the TCP payload of an Ethernet/IPv4 or IPv6/TCP frame.
fn payload_offset(f: &[u8]) -> usize {
    let l4 = l4_offset(f);
    l4 + usize::from(f[l4 + 12] >> 4) * 4
}
