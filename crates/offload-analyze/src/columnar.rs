//! Parquet output (cargo feature `parquet`): the same two tables as
//! `--csv` (flows and packets), columnar, for DuckDB, Spark or pandas.
//!
//! Packets are written while the pass reads, in row groups of
//! [`ROW_GROUP`] rows, so memory stays bounded; one file per input
//! (`packets.parquet`, or `packets-N.parquet` with several inputs:
//! `read_parquet('packets*.parquet')` reads them together). Columns that do
//! not apply to a packet (an IPv6 packet's IP ID, a UDP packet's sequence
//! number) are NULL.
//!
//! Without the feature every entry point returns
//! [`ColumnarError::NotBuilt`], so callers need no `cfg`.

use crate::dissect::Parsed;
use crate::report::Report;
use std::path::{Path, PathBuf};

/// Rows per row group.
pub const ROW_GROUP: usize = 65_536;

/// Why Parquet output failed.
#[derive(Debug)]
pub enum ColumnarError {
    /// This build has no Parquet support.
    NotBuilt,
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    Parquet {
        path: PathBuf,
        error: String,
    },
}

impl std::fmt::Display for ColumnarError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ColumnarError::NotBuilt => f.write_str(
                "this build has no Parquet output: rebuild with the cargo feature `offload-analyze/parquet`",
            ),
            ColumnarError::Io { path, error } => write!(f, "{}: {error}", path.display()),
            ColumnarError::Parquet { path, error } => write!(f, "{}: {error}", path.display()),
        }
    }
}

impl std::error::Error for ColumnarError {}

/// The packets file for input `file` of `inputs`.
pub fn packets_path(dir: &Path, file: usize, inputs: usize) -> PathBuf {
    if inputs == 1 {
        dir.join("packets.parquet")
    } else {
        dir.join(format!("packets-{file}.parquet"))
    }
}

/// True when this build writes Parquet.
pub const fn available() -> bool {
    cfg!(feature = "parquet")
}

#[cfg(not(feature = "parquet"))]
mod imp {
    use super::*;

    /// Streams packet rows into a Parquet file.
    #[derive(Debug)]
    pub struct PacketWriter;

    impl PacketWriter {
        pub fn create(_path: &Path) -> Result<Self, ColumnarError> {
            Err(ColumnarError::NotBuilt)
        }
        pub fn push(
            &mut self,
            _file: usize,
            _frame: u64,
            _ts: u64,
            _flow: usize,
            _p: &Parsed,
        ) -> Result<(), ColumnarError> {
            Err(ColumnarError::NotBuilt)
        }
        pub fn finish(self) -> Result<(), ColumnarError> {
            Err(ColumnarError::NotBuilt)
        }
    }

    /// Writes `flows.parquet` into `dir`.
    pub fn write_flows(_report: &Report, _dir: &Path) -> Result<(), ColumnarError> {
        Err(ColumnarError::NotBuilt)
    }
}

#[cfg(feature = "parquet")]
mod imp {
    use super::*;
    use crate::dissect::L4;
    use parquet::data_type::{
        BoolType, ByteArray, ByteArrayType, DoubleType, Int32Type, Int64Type,
    };
    use parquet::file::properties::WriterProperties;
    use parquet::file::writer::SerializedFileWriter;
    use parquet::schema::parser::parse_message_type;
    use std::fs::File;
    use std::sync::Arc;

    /// One column's values for a row group.
    enum Col {
        I32(Vec<i32>, Option<Vec<i16>>),
        I64(Vec<i64>, Option<Vec<i16>>),
        F64(Vec<f64>),
        Bool(Vec<bool>, Option<Vec<i16>>),
        Str(Vec<ByteArray>, Option<Vec<i16>>),
    }

    impl Col {
        fn clear(&mut self) {
            match self {
                Col::I32(v, d) => {
                    v.clear();
                    d.iter_mut().for_each(Vec::clear);
                }
                Col::I64(v, d) => {
                    v.clear();
                    d.iter_mut().for_each(Vec::clear);
                }
                Col::F64(v) => v.clear(),
                Col::Bool(v, d) => {
                    v.clear();
                    d.iter_mut().for_each(Vec::clear);
                }
                Col::Str(v, d) => {
                    v.clear();
                    d.iter_mut().for_each(Vec::clear);
                }
            }
        }
    }

    fn opt_i32(c: &mut Col, v: Option<i32>) {
        if let Col::I32(vals, Some(def)) = c {
            def.push(v.is_some() as i16);
            vals.extend(v);
        }
    }
    fn opt_i64(c: &mut Col, v: Option<i64>) {
        if let Col::I64(vals, Some(def)) = c {
            def.push(v.is_some() as i16);
            vals.extend(v);
        }
    }
    fn opt_bool(c: &mut Col, v: Option<bool>) {
        if let Col::Bool(vals, Some(def)) = c {
            def.push(v.is_some() as i16);
            vals.extend(v);
        }
    }
    fn req_i32(c: &mut Col, v: i32) {
        if let Col::I32(vals, None) = c {
            vals.push(v);
        }
    }
    fn req_i64(c: &mut Col, v: i64) {
        if let Col::I64(vals, None) = c {
            vals.push(v);
        }
    }
    fn req_f64(c: &mut Col, v: f64) {
        if let Col::F64(vals) = c {
            vals.push(v);
        }
    }
    fn str_col(c: &mut Col, v: Option<&str>) {
        if let Col::Str(vals, def) = c {
            if let Some(d) = def.as_mut() {
                d.push(v.is_some() as i16);
            }
            vals.extend(v.map(|s| ByteArray::from(s.as_bytes().to_vec())));
        }
    }

    fn perr(path: &Path) -> impl Fn(parquet::errors::ParquetError) -> ColumnarError + '_ {
        move |e| ColumnarError::Parquet {
            path: path.to_path_buf(),
            error: e.to_string(),
        }
    }

    /// Writes one row group from `cols` (schema order).
    fn write_group(
        w: &mut SerializedFileWriter<File>,
        cols: &mut [Col],
        path: &Path,
    ) -> Result<(), ColumnarError> {
        let mut rg = w.next_row_group().map_err(perr(path))?;
        for c in cols.iter_mut() {
            let Some(mut cw) = rg.next_column().map_err(perr(path))? else {
                break;
            };
            let r = match c {
                Col::I32(v, d) => cw.typed::<Int32Type>().write_batch(v, d.as_deref(), None),
                Col::I64(v, d) => cw.typed::<Int64Type>().write_batch(v, d.as_deref(), None),
                Col::F64(v) => cw.typed::<DoubleType>().write_batch(v, None, None),
                Col::Bool(v, d) => cw.typed::<BoolType>().write_batch(v, d.as_deref(), None),
                Col::Str(v, d) => cw
                    .typed::<ByteArrayType>()
                    .write_batch(v, d.as_deref(), None),
            };
            r.map_err(perr(path))?;
            cw.close().map_err(perr(path))?;
            c.clear();
        }
        rg.close().map_err(perr(path))?;
        Ok(())
    }

    fn open(path: &Path, schema: &str) -> Result<SerializedFileWriter<File>, ColumnarError> {
        let schema = Arc::new(parse_message_type(schema).map_err(perr(path))?);
        let file = File::create(path).map_err(|error| ColumnarError::Io {
            path: path.to_path_buf(),
            error,
        })?;
        SerializedFileWriter::new(file, schema, Arc::new(WriterProperties::builder().build()))
            .map_err(perr(path))
    }

    const PACKET_SCHEMA: &str = "message packet {
        REQUIRED INT32 file;
        REQUIRED INT64 frame;
        REQUIRED INT64 time_ns;
        REQUIRED INT64 flow_id;
        REQUIRED INT64 ip_len;
        REQUIRED INT64 payload;
        OPTIONAL INT32 ip_id;
        OPTIONAL BOOLEAN df;
        REQUIRED INT32 ttl;
        REQUIRED INT32 tos;
        OPTIONAL INT64 seq;
        OPTIONAL INT64 ack;
        OPTIONAL INT32 tcp_flags;
        OPTIONAL INT32 window;
        OPTIONAL INT32 outer_ip_id;
        OPTIONAL BOOLEAN outer_df;
    }";

    /// Streams packet rows into a Parquet file.
    pub struct PacketWriter {
        w: SerializedFileWriter<File>,
        cols: Vec<Col>,
        rows: usize,
        path: PathBuf,
    }

    impl std::fmt::Debug for PacketWriter {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("PacketWriter")
                .field("path", &self.path)
                .finish_non_exhaustive()
        }
    }

    impl PacketWriter {
        pub fn create(path: &Path) -> Result<Self, ColumnarError> {
            let opt = || Some(Vec::new());
            Ok(PacketWriter {
                w: open(path, PACKET_SCHEMA)?,
                cols: vec![
                    Col::I32(Vec::new(), None),
                    Col::I64(Vec::new(), None),
                    Col::I64(Vec::new(), None),
                    Col::I64(Vec::new(), None),
                    Col::I64(Vec::new(), None),
                    Col::I64(Vec::new(), None),
                    Col::I32(Vec::new(), opt()),
                    Col::Bool(Vec::new(), opt()),
                    Col::I32(Vec::new(), None),
                    Col::I32(Vec::new(), None),
                    Col::I64(Vec::new(), opt()),
                    Col::I64(Vec::new(), opt()),
                    Col::I32(Vec::new(), opt()),
                    Col::I32(Vec::new(), opt()),
                    Col::I32(Vec::new(), opt()),
                    Col::Bool(Vec::new(), opt()),
                ],
                rows: 0,
                path: path.to_path_buf(),
            })
        }

        pub fn push(
            &mut self,
            file: usize,
            frame: u64,
            ts: u64,
            flow: usize,
            p: &Parsed,
        ) -> Result<(), ColumnarError> {
            let c = &mut self.cols;
            req_i32(&mut c[0], file as i32);
            req_i64(&mut c[1], frame as i64);
            req_i64(&mut c[2], ts as i64);
            req_i64(&mut c[3], flow as i64);
            req_i64(&mut c[4], p.ip.ip_len as i64);
            req_i64(&mut c[5], p.payload as i64);
            opt_i32(&mut c[6], (!p.ip.v6).then_some(p.ip.id as i32));
            opt_bool(&mut c[7], (!p.ip.v6).then_some(p.ip.df));
            req_i32(&mut c[8], p.ip.ttl as i32);
            req_i32(&mut c[9], p.ip.tos as i32);
            let tcp = match p.l4 {
                L4::Tcp(t) => Some(t),
                _ => None,
            };
            opt_i64(&mut c[10], tcp.map(|t| t.seq as i64));
            opt_i64(&mut c[11], tcp.map(|t| t.ack as i64));
            opt_i32(&mut c[12], tcp.map(|t| t.flags as i32));
            opt_i32(&mut c[13], tcp.map(|t| t.window as i32));
            let outer = p.tunnel.filter(|t| !t.ip.v6);
            opt_i32(&mut c[14], outer.map(|t| t.ip.id as i32));
            opt_bool(&mut c[15], outer.map(|t| t.ip.df));
            self.rows += 1;
            if self.rows == ROW_GROUP {
                self.rows = 0;
                write_group(&mut self.w, &mut self.cols, &self.path)?;
            }
            Ok(())
        }

        pub fn finish(mut self) -> Result<(), ColumnarError> {
            if self.rows > 0 {
                write_group(&mut self.w, &mut self.cols, &self.path)?;
            }
            self.w.close().map_err(perr(&self.path))?;
            Ok(())
        }
    }

    /// Writes `flows.parquet` into `dir`: the columns of `flows.csv`.
    pub fn write_flows(report: &Report, dir: &Path) -> Result<(), ColumnarError> {
        let path = dir.join("flows.parquet");
        let sizes = &report.settings.gro_max_sizes;
        let mut schema = String::from(
            "message flow {
            REQUIRED INT64 flow_id; REQUIRED BINARY file (UTF8); REQUIRED BINARY protocol (UTF8);
            REQUIRED BINARY src (UTF8); REQUIRED INT32 sport; REQUIRED BINARY dst (UTF8); REQUIRED INT32 dport;
            OPTIONAL BINARY tunnel (UTF8); REQUIRED INT64 packets; REQUIRED INT64 bytes; REQUIRED INT64 payload_bytes;
            REQUIRED DOUBLE start_s; REQUIRED DOUBLE duration_s; REQUIRED DOUBLE throughput_bps;
            OPTIONAL INT64 observed_mss; REQUIRED INT64 retransmissions; REQUIRED INT64 out_of_order;
            REQUIRED INT64 above_mtu; REQUIRED BINARY ip_id_pattern (UTF8); REQUIRED BINARY df (UTF8);
            REQUIRED BINARY l4_checksum (UTF8);",
        );
        for s in sizes {
            schema.push_str(&format!(
                " REQUIRED INT64 stack_packets_{s}; REQUIRED DOUBLE merge_ratio_{s};"
            ));
        }
        schema.push('}');
        let mut w = open(&path, &schema)?;
        let req_s = || Col::Str(Vec::new(), None);
        let mut cols = vec![
            Col::I64(Vec::new(), None),
            req_s(),
            req_s(),
            req_s(),
            Col::I32(Vec::new(), None),
            req_s(),
            Col::I32(Vec::new(), None),
            Col::Str(Vec::new(), Some(Vec::new())),
            Col::I64(Vec::new(), None),
            Col::I64(Vec::new(), None),
            Col::I64(Vec::new(), None),
            Col::F64(Vec::new()),
            Col::F64(Vec::new()),
            Col::F64(Vec::new()),
            Col::I64(Vec::new(), Some(Vec::new())),
            Col::I64(Vec::new(), None),
            Col::I64(Vec::new(), None),
            Col::I64(Vec::new(), None),
            req_s(),
            req_s(),
            req_s(),
        ];
        for _ in sizes {
            cols.push(Col::I64(Vec::new(), None));
            cols.push(Col::F64(Vec::new()));
        }
        for f in &report.flows {
            let tunnel = f.tunnel.as_ref().map(|t| {
                format!(
                    "vxlan {}:{} -> {}:{} vni {}",
                    t.src, t.sport, t.dst, t.dport, t.vni
                )
            });
            req_i64(&mut cols[0], f.id as i64);
            str_col(&mut cols[1], Some(&f.file));
            str_col(&mut cols[2], Some(f.protocol));
            str_col(&mut cols[3], Some(&f.src));
            req_i32(&mut cols[4], f.sport as i32);
            str_col(&mut cols[5], Some(&f.dst));
            req_i32(&mut cols[6], f.dport as i32);
            str_col(&mut cols[7], tunnel.as_deref());
            req_i64(&mut cols[8], f.packets as i64);
            req_i64(&mut cols[9], f.bytes as i64);
            req_i64(&mut cols[10], f.payload_bytes as i64);
            req_f64(&mut cols[11], f.start_s);
            req_f64(&mut cols[12], f.duration_s);
            req_f64(&mut cols[13], f.throughput_bps);
            opt_i64(&mut cols[14], f.observed_mss.map(i64::from));
            req_i64(&mut cols[15], f.retransmissions as i64);
            req_i64(&mut cols[16], f.out_of_order as i64);
            req_i64(&mut cols[17], f.above_mtu.packets as i64);
            str_col(&mut cols[18], Some(f.ip.ip_id_pattern.name()));
            str_col(&mut cols[19], Some(f.ip.df));
            str_col(&mut cols[20], Some(f.l4_checksum));
            for (k, wi) in f.what_if.iter().enumerate() {
                req_i64(&mut cols[21 + 2 * k], wi.stack_packets as i64);
                req_f64(&mut cols[22 + 2 * k], wi.merge_ratio);
            }
        }
        write_group(&mut w, &mut cols, &path)?;
        w.close().map_err(perr(&path))?;
        Ok(())
    }
}

pub use imp::{write_flows, PacketWriter};
