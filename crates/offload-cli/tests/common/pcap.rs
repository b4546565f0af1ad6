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
