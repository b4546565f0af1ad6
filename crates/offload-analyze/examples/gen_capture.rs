//! Generates a large synthetic capture for benchmarks: interleaved bulk TCP
//! flows at full MTU (IPv4 and IPv6, timestamps, incrementing IDs, ACKs
//! every second segment, a PSH every 64 KiB, a retransmission now and then),
//! written with the project's own pcap writer.
//!
//! Usage: gen_capture OUT.pcap MEGABYTES [FLOWS]

use offload::build::{timestamp_option, FrameSpec, TcpSpec};
use offload_capture::{CaptureWriter, FrameMeta, LinkType};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        return Err("usage: gen_capture OUT.pcap MEGABYTES [FLOWS]".into());
    }
    let target: u64 = args[2].parse::<u64>()? * 1_000_000;
    let flows: u32 = args.get(3).map_or(Ok(16), |s| s.parse())?;
    let mut w = CaptureWriter::create(&args[1], None)?;
    // Full-MTU segments: 1500 bytes of IP with the timestamp option.
    let mss4 = 1448usize;
    let mss6 = 1428usize;
    let mut seq = vec![1u32; flows as usize];
    let mut id = vec![0u16; flows as usize];
    let mut ts = 1_700_000_000_000_000_000i64;
    let (mut written, mut n) = (0u64, 0u64);
    while written < target {
        // Bursts of 8 segments per flow, flows taking turns, as NAPI sees them.
        for f in 0..flows {
            for k in 0..8u32 {
                let v6 = f % 4 == 3;
                let mss = if v6 { mss6 } else { mss4 };
                let (sp, dp) = (40000 + f as u16, 5201);
                let mut tcp = TcpSpec::data(sp, dp, seq[f as usize])
                    .with_timestamps(1000 + (n / 64) as u32, 77);
                if seq[f as usize] / 65536 != (seq[f as usize] + mss as u32) / 65536 {
                    tcp.flags |= offload::wire::tcp::flags::PSH;
                }
                let mut spec = if v6 {
                    let mut a = [0u8; 16];
                    a[0] = 0xfd;
                    a[15] = 2;
                    let mut b = a;
                    b[15] = 1;
                    a[14] = f as u8;
                    FrameSpec::tcp6(a, b, tcp)
                } else {
                    let mut s = FrameSpec::tcp4([10, 0, f as u8, 2], [10, 0, 0, 1], tcp);
                    s.v4_mut().id = id[f as usize];
                    s.v4_mut().df = true;
                    s
                };
                spec = spec.payload(vec![0x5a; mss]);
                // Every 5000th segment repeats an old one: a retransmission.
                if n % 5000 == 4999 {
                    spec.tcp_mut().seq = seq[f as usize].wrapping_sub(10 * mss as u32);
                } else {
                    seq[f as usize] = seq[f as usize].wrapping_add(mss as u32);
                }
                id[f as usize] = id[f as usize].wrapping_add(1);
                let frame = spec.build();
                ts += 1_200;
                w.write_frame(&FrameMeta::new(ts, LinkType(1), frame.len()), &frame)?;
                written += frame.len() as u64 + 16;
                n += 1;
                if k % 2 == 1 {
                    let mut ack = FrameSpec::tcp4(
                        [10, 0, 0, 1],
                        [10, 0, f as u8, 2],
                        TcpSpec::data(5201, 40000 + f as u16, 77),
                    );
                    ack.tcp_mut().ack = seq[f as usize];
                    ack.tcp_mut().options = timestamp_option(77, 1000).to_vec();
                    let a = ack.build();
                    ts += 300;
                    w.write_frame(&FrameMeta::new(ts, LinkType(1), a.len()), &a)?;
                    written += a.len() as u64 + 16;
                    n += 1;
                }
            }
        }
    }
    w.finish()?;
    eprintln!("gen_capture: {n} frames, {written} bytes");
    Ok(())
}
