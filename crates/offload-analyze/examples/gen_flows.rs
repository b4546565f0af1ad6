//! Generates a capture of many short flows, to measure memory against flow
//! count: FLOWS IPv4 TCP flows of two data segments each (100 bytes of
//! payload, incrementing IDs, valid checksums), every flow on its own
//! address/port pair, flows following each other in time.
//!
//! Usage: gen_flows OUT.pcap FLOWS

use offload::build::{FrameSpec, TcpSpec};
use offload_capture::{CaptureWriter, FrameMeta, LinkType};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        return Err("usage: gen_flows OUT.pcap FLOWS".into());
    }
    let flows: u32 = args[2].parse()?;
    let mut w = CaptureWriter::create(&args[1], None)?;
    let mut ts = 1_700_000_000_000_000_000i64;
    for f in 0..flows {
        let src = [10, (f >> 16) as u8, (f >> 8) as u8, f as u8];
        let sport = 10_000 + (f % 50_000) as u16;
        for k in 0..2u32 {
            let mut s =
                FrameSpec::tcp4(src, [192, 0, 2, 1], TcpSpec::data(sport, 443, 1 + k * 100))
                    .payload(vec![0x42; 100]);
            s.v4_mut().id = k as u16;
            s.v4_mut().df = true;
            let frame = s.build();
            w.write_frame(&FrameMeta::new(ts, LinkType(1), frame.len()), &frame)?;
            ts += 1_000;
        }
    }
    w.finish()?;
    eprintln!("gen_flows: {} frames, {flows} flows", 2 * flows as u64);
    Ok(())
}
