//! Per-packet sinks: `packets.csv` rows, written during the pass so the
//! table never sits in memory (the Parquet twin is
//! `columnar::PacketWriter`).

use crate::dissect::{Parsed, L4};
use std::io::{self, Write};

/// Columns of `packets.csv`.
pub const PACKET_CSV_HEADER: &str =
    "file,frame,time_ns,flow_id,ip_len,payload,ip_id,df,ttl,tos,seq,ack,flags,window,outer_ip_id,outer_df\n";

/// Writes one packet row. `flow` is the flow's index within its file.
pub fn write_packet_row<W: Write>(
    w: &mut W,
    file: usize,
    frame: u64,
    ts: u64,
    flow: usize,
    p: &Parsed,
) -> io::Result<()> {
    let (seq, ack, flags, win) = match p.l4 {
        L4::Tcp(t) => (
            t.seq.to_string(),
            t.ack.to_string(),
            t.flags.to_string(),
            t.window.to_string(),
        ),
        _ => Default::default(),
    };
    let (oid, odf) = match p.tunnel {
        Some(t) => (t.ip.id.to_string(), (t.ip.df as u8).to_string()),
        None => Default::default(),
    };
    writeln!(
        w,
        "{file},{frame},{ts},{flow},{},{},{},{},{},{},{seq},{ack},{flags},{win},{oid},{odf}",
        p.ip.ip_len,
        p.payload,
        if p.ip.v6 {
            String::new()
        } else {
            p.ip.id.to_string()
        },
        if p.ip.v6 {
            String::new()
        } else {
            (p.ip.df as u8).to_string()
        },
        p.ip.ttl,
        p.ip.tos,
    )
}
