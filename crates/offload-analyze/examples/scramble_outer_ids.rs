//! Post-processes a real VXLAN capture into the "broken tunnel" sample:
//! every outer IPv4 header of a VXLAN frame gets DF cleared and a
//! scrambled IP ID (as some middleboxes and tunnel endpoints produce), and
//! its header checksum is recomputed. Nothing else changes: the inner
//! packets, timestamps and the outer UDP checksum (which does not cover
//! the IP ID) are the kernel's own.
//!
//! Usage: scramble_outer_ids IN OUT [VXLAN_PORT]

use offload::link::dissect_l2;
use offload::wire::ipv4::Ipv4;
use offload::LinkKind;
use offload_capture::{CaptureReader, CaptureWriter, FrameMeta};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        return Err("usage: scramble_outer_ids IN OUT [VXLAN_PORT]".into());
    }
    let port: u16 = args.get(3).map_or(Ok(4789), |p| p.parse())?;
    let mut r = CaptureReader::open(&args[1])?;
    let mut w = CaptureWriter::create(&args[2], None)?;
    // A fixed-seed generator: the sample is reproducible byte for byte.
    let mut state: u32 = 0x1234_5678;
    let mut changed = 0u64;
    while let Some(f) = r.next_frame()? {
        let mut data = f.data.to_vec();
        if let Some(link) = LinkKind::from_linktype(f.link_type.0) {
            if let Ok(l2) = dissect_l2(link, &data) {
                let off = l2.l3_offset;
                let is_vxlan =
                    data.len() > off + 24 && data[off] >> 4 == 4 && data[off + 9] == 17 && {
                        let ihl = (data[off] & 0x0f) as usize * 4;
                        data.len() > off + ihl + 4
                            && u16::from_be_bytes([data[off + ihl + 2], data[off + ihl + 3]])
                                == port
                    };
                if is_vxlan {
                    state = state.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    let mut ip = Ipv4::new_checked(&mut data[off..])?;
                    ip.set_ident((state >> 16) as u16);
                    let frag = ip.frag_word() & !0x4000;
                    ip.set_frag_word(frag);
                    ip.fill_header_checksum();
                    changed += 1;
                }
            }
        }
        let mut meta = FrameMeta::from(&f);
        meta.interface = None;
        w.write_frame(&meta, &data)?;
    }
    w.finish()?;
    eprintln!("scramble_outer_ids: rewrote the outer IPv4 header of {changed} VXLAN frames");
    Ok(())
}
