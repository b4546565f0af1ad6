//! Classic pcap files written byte by byte (little-endian, Ethernet), as
//! libpcap's savefile format (pcap-savefile(5)) lays them out. The tests
//! write their inputs without the project's own writer, so a bug there
//! cannot hide in both the input and the reading of it.

/// Timestamp resolution of a pcap file, chosen by its magic number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// Magic 0xa1b2c3d4: the fraction is microseconds.
    Micros,
    /// Magic 0xa1b23c4d: the fraction is nanoseconds.
    Nanos,
}

/// The 24-byte global header: version 2.4, Ethernet (link type 1),
/// `snaplen`.
pub fn header(resolution: Resolution, snaplen: u32) -> Vec<u8> {
    let magic: u32 = match resolution {
        Resolution::Micros => 0xa1b2_c3d4,
        Resolution::Nanos => 0xa1b2_3c4d,
    };
    let mut h = Vec::with_capacity(24);
    h.extend_from_slice(&magic.to_le_bytes());
    h.extend_from_slice(&2u16.to_le_bytes());
    h.extend_from_slice(&4u16.to_le_bytes());
    // Time zone offset and accuracy: zero, as every writer sets them.
    h.extend_from_slice(&[0; 8]);
    h.extend_from_slice(&snaplen.to_le_bytes());
    h.extend_from_slice(&1u32.to_le_bytes());
    h
}

/// The 16-byte header of one record: seconds, the fraction in the file's
/// resolution, captured and original length.
pub fn record_header(sec: u32, frac: u32, caplen: u32, len: u32) -> [u8; 16] {
    let mut r = [0u8; 16];
    r[0..4].copy_from_slice(&sec.to_le_bytes());
    r[4..8].copy_from_slice(&frac.to_le_bytes());
    r[8..12].copy_from_slice(&caplen.to_le_bytes());
    r[12..16].copy_from_slice(&len.to_le_bytes());
    r
}

/// An Ethernet + IPv4 + TCP frame from `src:sport` to `dst:dport`, DF set,
/// TTL 64, checksums left zero (the tests that write millions of these
/// tell the reader not to verify them, or it does not). Bytes set by hand:
/// fast enough for millions of frames.
#[allow(clippy::too_many_arguments)]
pub fn tcp4(
    src: [u8; 4],
    sport: u16,
    dst: [u8; 4],
    dport: u16,
    flags: u8,
    seq: u32,
    ack: u32,
    window: u16,
    options: &[u8],
    payload: usize,
) -> Vec<u8> {
    let tcp_len = 20 + options.len();
    let ip_len = 20 + tcp_len + payload;
    let mut f = vec![0u8; 14 + ip_len];
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = &mut f[14..];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&(ip_len as u16).to_be_bytes());
    ip[6] = 0x40; // DF
    ip[8] = 64;
    ip[9] = 6;
    ip[12..16].copy_from_slice(&src);
    ip[16..20].copy_from_slice(&dst);
    let t = &mut f[34..];
    t[0..2].copy_from_slice(&sport.to_be_bytes());
    t[2..4].copy_from_slice(&dport.to_be_bytes());
    t[4..8].copy_from_slice(&seq.to_be_bytes());
    t[8..12].copy_from_slice(&ack.to_be_bytes());
    t[12] = ((tcp_len / 4) as u8) << 4;
    t[13] = flags;
    t[14..16].copy_from_slice(&window.to_be_bytes());
    t[20..20 + options.len()].copy_from_slice(options);
    f
}

/// The Internet checksum (RFC 1071) of `parts` concatenated, each part of
/// even length but the last.
fn internet_checksum(parts: &[&[u8]]) -> u16 {
    let mut sum = 0u32;
    for p in parts {
        for w in p.chunks(2) {
            sum += u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
        }
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Copies the classic pcap `from` (Ethernet; either byte order, micro- or
/// nanoseconds) to `to` with the sequence numbers of the TCP data sent
/// to port `port` moved by `delta` (modulo 2^32): its segments' sequence
/// numbers, and the ACK number and SACK edges (RFC 2018) of the segments
/// sent from it. The TCP checksum of every whole IPv4 or IPv6 (no extension
/// header) segment is recomputed, so the copy is the capture of the same
/// connection with other initial sequence numbers: a way to put the 2^32
/// wrap (RFC 793 section 3.3) where a test wants it.
pub fn shift_sequence(from: &std::path::Path, to: &std::path::Path, port: u16, delta: u32) {
    let d = std::fs::read(from).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
    let le = match d.get(..4) {
        Some([0xd4, 0xc3, 0xb2, 0xa1] | [0x4d, 0x3c, 0xb2, 0xa1]) => true,
        Some([0xa1, 0xb2, 0xc3, 0xd4] | [0xa1, 0xb2, 0x3c, 0x4d]) => false,
        _ => panic!("{}: not a classic pcap", from.display()),
    };
    let u32_at = |b: &[u8], i: usize| {
        let w = [b[i], b[i + 1], b[i + 2], b[i + 3]];
        if le {
            u32::from_le_bytes(w)
        } else {
            u32::from_be_bytes(w)
        }
    };
    assert_eq!(u32_at(&d, 20), 1, "{}: not Ethernet", from.display());
    let mut out = d[..24].to_vec();
    let mut off = 24;
    while off + 16 <= d.len() {
        let incl = u32_at(&d, off + 8) as usize;
        out.extend_from_slice(&d[off..off + 16]);
        let mut f = d[off + 16..off + 16 + incl].to_vec();
        off += 16 + incl;
        shift_frame(&mut f, port, delta);
        out.extend_from_slice(&f);
    }
    std::fs::write(to, out).unwrap_or_else(|e| panic!("{}: {e}", to.display()));
}

/// [`shift_sequence`] of one Ethernet frame.
fn shift_frame(f: &mut [u8], port: u16, delta: u32) {
    let be16 = |b: &[u8], i: usize| u16::from_be_bytes([b[i], b[i + 1]]) as usize;
    if f.len() < 14 {
        return;
    }
    // The IP header's start and end, the TCP segment's end in the IP
    // packet's length, and the pseudo-header's addresses.
    let (t, end, addrs) = match be16(f, 12) {
        0x0800 if f.len() >= 34 && f[23] == 6 => {
            let t = 14 + usize::from(f[14] & 15) * 4;
            (t, 14 + be16(f, 16), 26..34)
        }
        0x86dd if f.len() >= 54 && f[20] == 6 => (54, 54 + be16(f, 18), 22..54),
        _ => return,
    };
    if f.len() < t + 20 {
        return;
    }
    let add = |f: &mut [u8], i: usize| {
        let v = u32::from_be_bytes([f[i], f[i + 1], f[i + 2], f[i + 3]]).wrapping_add(delta);
        f[i..i + 4].copy_from_slice(&v.to_be_bytes());
    };
    let (sport, dport) = (be16(f, t) as u16, be16(f, t + 2) as u16);
    if dport == port {
        add(f, t + 4);
    } else if sport == port {
        if f[t + 13] & 0x10 != 0 {
            add(f, t + 8);
        }
        let opts_end = (t + usize::from(f[t + 12] >> 4) * 4).min(f.len());
        let mut o = t + 20;
        while o < opts_end {
            match f[o] {
                0 => break,
                1 => o += 1,
                kind => {
                    let Some(&len) = f.get(o + 1) else { break };
                    let len = usize::from(len).max(2);
                    if kind == 5 {
                        let mut e = o + 2;
                        while e + 4 <= (o + len).min(opts_end) {
                            add(f, e);
                            e += 4;
                        }
                    }
                    o += len;
                }
            }
        }
    } else {
        return;
    }
    if end <= f.len() && end >= t + 20 {
        f[t + 16..t + 18].fill(0);
        let seg_len = ((end - t) as u32).to_be_bytes();
        // The pseudo-header's words but the addresses: the length, then
        // zeros and the protocol (RFC 793 section 3.1; RFC 8200 section 8.1).
        let pseudo = [seg_len[2], seg_len[3], 0, 6];
        let sum = internet_checksum(&[&f[addrs], &pseudo, &f[t..end]]);
        f[t + 16..t + 18].copy_from_slice(&sum.to_be_bytes());
    }
}
