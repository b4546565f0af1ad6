//! Parquet output (`--parquet DIR`, in every build): the report as tables
//! that DuckDB, Spark, Trino or pandas query across many captures at once.
//!
//! - `flows.parquet`: one row per flow, every scalar of the flow's `--json`
//!   record as a column (nested objects flattened with `_`: `above_mtu_packets`,
//!   `tunnel_outer_ip_df`), lists as JSON text, plus `stack_packets_<size>`
//!   and `merge_ratio_<size>` per `--gro-max-size`.
//! - `flow_what_if.parquet`: one row per flow and `--gro-max-size`: the
//!   per-flow GRO figures (stack packets, super-packets, merge ratio, the
//!   healthy-tunnel figure, flush reasons as JSON text).
//! - `findings.parquet`: one row per finding, flattened the same way.
//! - `hops.parquet`: with several captures, one row per flow and capture
//!   point (the report's `hops`).
//! - `packets.parquet` (`packets-N.parquet` with several inputs): one row
//!   per dissected frame, written while the pass reads, in row groups of
//!   [`ROW_GROUP`] rows, so memory stays bounded.
//!
//! The flow and finding tables are derived from the report's serde form,
//! so a field added to [`crate::report::FlowReport`] (or anything nested
//! in it) becomes a column without a change here. A column's type is the
//! JSON type of its values (integers INT64, other numbers DOUBLE, booleans,
//! text); every column but the packet table's keys is nullable, NULL where
//! it does not apply.

use crate::dissect::{Parsed, L4};
use crate::report::Report;
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, DoubleType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::Type;
use serde_json::Value;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Rows per row group.
pub const ROW_GROUP: usize = 65_536;

/// Why Parquet output failed.
#[derive(Debug)]
pub enum ColumnarError {
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

/// A column's physical type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Int,
    Float,
    Bool,
    Text,
}

/// One cell.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Null,
    Int(i64),
    Float(f64),
    Bool(bool),
    Text(String),
}

/// A column: name, type, and whether it may hold NULL.
#[derive(Debug, Clone)]
pub struct Column {
    pub name: String,
    pub kind: Kind,
    pub nullable: bool,
}

impl Column {
    pub fn new(name: &str, kind: Kind, nullable: bool) -> Column {
        Column {
            name: name.to_string(),
            kind,
            nullable,
        }
    }
}

/// One column's values of the row group being filled.
#[derive(Debug)]
enum Buf {
    Int(Vec<i64>),
    Float(Vec<f64>),
    Bool(Vec<bool>),
    Text(Vec<ByteArray>),
}

/// Writes rows of a fixed schema into one Parquet file, a row group at a
/// time.
pub struct TableWriter {
    w: SerializedFileWriter<File>,
    cols: Vec<Column>,
    bufs: Vec<Buf>,
    /// Definition levels of nullable columns (1 = value present).
    defs: Vec<Vec<i16>>,
    rows: usize,
    path: PathBuf,
}

impl std::fmt::Debug for TableWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableWriter")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

fn perr(path: &Path) -> impl Fn(parquet::errors::ParquetError) -> ColumnarError + '_ {
    move |e| ColumnarError::Parquet {
        path: path.to_path_buf(),
        error: e.to_string(),
    }
}

impl TableWriter {
    /// Creates `path` with the columns `cols` (names must be unique).
    pub fn create(path: &Path, cols: Vec<Column>) -> Result<TableWriter, ColumnarError> {
        use parquet::basic::{ConvertedType, Repetition, Type as Physical};
        let fields = cols
            .iter()
            .map(|c| {
                let physical = match c.kind {
                    Kind::Int => Physical::INT64,
                    Kind::Float => Physical::DOUBLE,
                    Kind::Bool => Physical::BOOLEAN,
                    Kind::Text => Physical::BYTE_ARRAY,
                };
                let mut b = Type::primitive_type_builder(&c.name, physical).with_repetition(
                    if c.nullable {
                        Repetition::OPTIONAL
                    } else {
                        Repetition::REQUIRED
                    },
                );
                if c.kind == Kind::Text {
                    b = b.with_converted_type(ConvertedType::UTF8);
                }
                b.build().map(Arc::new)
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(perr(path))?;
        let schema = Type::group_type_builder("schema")
            .with_fields(fields)
            .build()
            .map_err(perr(path))?;
        let file = File::create(path).map_err(|error| ColumnarError::Io {
            path: path.to_path_buf(),
            error,
        })?;
        let w = SerializedFileWriter::new(
            file,
            Arc::new(schema),
            Arc::new(WriterProperties::builder().build()),
        )
        .map_err(perr(path))?;
        let bufs = cols
            .iter()
            .map(|c| match c.kind {
                Kind::Int => Buf::Int(Vec::new()),
                Kind::Float => Buf::Float(Vec::new()),
                Kind::Bool => Buf::Bool(Vec::new()),
                Kind::Text => Buf::Text(Vec::new()),
            })
            .collect();
        Ok(TableWriter {
            w,
            defs: vec![Vec::new(); cols.len()],
            cols,
            bufs,
            rows: 0,
            path: path.to_path_buf(),
        })
    }

    /// Adds one row, its cells in column order. A cell of another type
    /// than its column is converted where that loses nothing (an integer
    /// into a DOUBLE column) and is NULL otherwise.
    pub fn push(&mut self, cells: impl IntoIterator<Item = Cell>) -> Result<(), ColumnarError> {
        let mut cells = cells.into_iter();
        for (i, buf) in self.bufs.iter_mut().enumerate() {
            let cell = cells.next().unwrap_or(Cell::Null);
            let present = match (buf, cell) {
                (Buf::Int(v), Cell::Int(x)) => {
                    v.push(x);
                    true
                }
                (Buf::Int(v), Cell::Bool(x)) => {
                    v.push(x as i64);
                    true
                }
                (Buf::Float(v), Cell::Float(x)) => {
                    v.push(x);
                    true
                }
                (Buf::Float(v), Cell::Int(x)) => {
                    v.push(x as f64);
                    true
                }
                (Buf::Bool(v), Cell::Bool(x)) => {
                    v.push(x);
                    true
                }
                (Buf::Text(v), Cell::Text(x)) => {
                    v.push(ByteArray::from(x.into_bytes()));
                    true
                }
                (Buf::Text(v), Cell::Int(x)) => {
                    v.push(ByteArray::from(x.to_string().into_bytes()));
                    true
                }
                (Buf::Text(v), Cell::Float(x)) => {
                    v.push(ByteArray::from(x.to_string().into_bytes()));
                    true
                }
                (Buf::Text(v), Cell::Bool(x)) => {
                    v.push(ByteArray::from(x.to_string().into_bytes()));
                    true
                }
                _ => false,
            };
            if self.cols[i].nullable {
                self.defs[i].push(present as i16);
            } else if !present {
                return Err(ColumnarError::Parquet {
                    path: self.path.clone(),
                    error: format!("column {} may not be NULL", self.cols[i].name),
                });
            }
        }
        self.rows += 1;
        if self.rows == ROW_GROUP {
            self.write_group()?;
        }
        Ok(())
    }

    fn write_group(&mut self) -> Result<(), ColumnarError> {
        let path = self.path.clone();
        let mut rg = self.w.next_row_group().map_err(perr(&path))?;
        for (i, buf) in self.bufs.iter_mut().enumerate() {
            let Some(mut cw) = rg.next_column().map_err(perr(&path))? else {
                break;
            };
            let def = self.cols[i].nullable.then_some(self.defs[i].as_slice());
            let r = match buf {
                Buf::Int(v) => cw.typed::<Int64Type>().write_batch(v, def, None),
                Buf::Float(v) => cw.typed::<DoubleType>().write_batch(v, def, None),
                Buf::Bool(v) => cw.typed::<BoolType>().write_batch(v, def, None),
                Buf::Text(v) => cw.typed::<ByteArrayType>().write_batch(v, def, None),
            };
            r.map_err(perr(&path))?;
            cw.close().map_err(perr(&path))?;
            match buf {
                Buf::Int(v) => v.clear(),
                Buf::Float(v) => v.clear(),
                Buf::Bool(v) => v.clear(),
                Buf::Text(v) => v.clear(),
            }
            self.defs[i].clear();
        }
        rg.close().map_err(perr(&path))?;
        self.rows = 0;
        Ok(())
    }

    /// Writes what is left and closes the file.
    pub fn finish(mut self) -> Result<(), ColumnarError> {
        if self.rows > 0 {
            self.write_group()?;
        }
        let path = self.path.clone();
        self.w.close().map_err(perr(&path))?;
        Ok(())
    }
}

/// Streams packet rows (`packets.parquet`) while the pass reads.
#[derive(Debug)]
pub struct PacketWriter(TableWriter);

/// The packet table's columns: the same as `packets.csv`.
fn packet_columns() -> Vec<Column> {
    let req = |n: &str| Column::new(n, Kind::Int, false);
    let opt = |n: &str, k: Kind| Column::new(n, k, true);
    vec![
        req("file"),
        req("frame"),
        req("time_ns"),
        req("flow_id"),
        req("ip_len"),
        req("payload"),
        opt("ip_id", Kind::Int),
        opt("df", Kind::Bool),
        req("ttl"),
        req("tos"),
        opt("seq", Kind::Int),
        opt("ack", Kind::Int),
        opt("tcp_flags", Kind::Int),
        opt("window", Kind::Int),
        opt("outer_ip_id", Kind::Int),
        opt("outer_df", Kind::Bool),
        req("captured_len"),
    ]
}

impl PacketWriter {
    pub fn create(path: &Path) -> Result<Self, ColumnarError> {
        TableWriter::create(path, packet_columns()).map(PacketWriter)
    }

    #[allow(clippy::too_many_arguments)]
    pub fn push(
        &mut self,
        file: usize,
        frame: u64,
        ts: u64,
        flow: usize,
        p: &Parsed,
        captured_len: usize,
    ) -> Result<(), ColumnarError> {
        let int = |x: i64| Cell::Int(x);
        let opt_int = |x: Option<i64>| x.map_or(Cell::Null, Cell::Int);
        let opt_bool = |x: Option<bool>| x.map_or(Cell::Null, Cell::Bool);
        let tcp = match p.l4 {
            L4::Tcp(t) => Some(t),
            _ => None,
        };
        let outer = p.tunnel.filter(|t| !t.ip.v6);
        self.0.push([
            int(file as i64),
            int(frame as i64),
            int(ts as i64),
            int(flow as i64),
            int(p.ip.ip_len as i64),
            int(p.payload as i64),
            opt_int((!p.ip.v6).then_some(p.ip.id as i64)),
            opt_bool((!p.ip.v6).then_some(p.ip.df)),
            int(p.ip.ttl as i64),
            int(p.ip.tos as i64),
            opt_int(tcp.map(|t| t.seq as i64)),
            opt_int(tcp.map(|t| t.ack as i64)),
            opt_int(tcp.map(|t| t.flags as i64)),
            opt_int(tcp.map(|t| t.window as i64)),
            opt_int(outer.map(|t| t.ip.id as i64)),
            opt_bool(outer.map(|t| t.ip.df)),
            int(captured_len as i64),
        ])
    }

    pub fn finish(self) -> Result<(), ColumnarError> {
        self.0.finish()
    }
}

/// Flattens a JSON object into `(column, cell)` pairs: nested objects
/// join their keys with `_`, lists become JSON text.
fn flatten(prefix: &str, v: &Value, out: &mut Vec<(String, Cell)>) {
    let name = |k: &str| {
        if prefix.is_empty() {
            k.to_string()
        } else {
            format!("{prefix}_{k}")
        }
    };
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match x {
                    Value::Object(_) => flatten(&name(k), x, out),
                    _ => out.push((name(k), cell(x))),
                }
            }
        }
        _ => out.push((prefix.to_string(), cell(v))),
    }
}

fn cell(v: &Value) -> Cell {
    match v {
        Value::Null => Cell::Null,
        Value::Bool(b) => Cell::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Cell::Int(i),
            None => Cell::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => Cell::Text(s.clone()),
        Value::Array(_) => Cell::Text(v.to_string()),
        Value::Object(_) => Cell::Text(v.to_string()),
    }
}

/// The kind a column takes from its cells: integers stay INT64 unless a
/// float is among them; a column with text, or with nothing but NULL, is
/// text.
fn merge_kind(k: Option<Kind>, c: &Cell) -> Option<Kind> {
    let this = match c {
        Cell::Null => return k,
        Cell::Int(_) => Kind::Int,
        Cell::Float(_) => Kind::Float,
        Cell::Bool(_) => Kind::Bool,
        Cell::Text(_) => Kind::Text,
    };
    Some(match (k, this) {
        (None, t) => t,
        (Some(a), b) if a == b => a,
        (Some(Kind::Int), Kind::Float) | (Some(Kind::Float), Kind::Int) => Kind::Float,
        _ => Kind::Text,
    })
}

/// Writes rows made by [`flatten`] (one `Vec` per row) as one table:
/// the `base` columns first (present even when no row has a value there,
/// e.g. `flow_id` when no finding names a flow, so that queries bind),
/// then the others in order of first appearance; every column nullable.
fn write_flattened(
    path: &Path,
    rows: Vec<Vec<(String, Cell)>>,
    base: &[(&str, Kind)],
) -> Result<(), ColumnarError> {
    let mut names: Vec<String> = Vec::new();
    let mut kinds: Vec<Option<Kind>> = Vec::new();
    let mut index = rustc_hash::FxHashMap::default();
    for (n, k) in base {
        index.insert(n.to_string(), names.len());
        names.push(n.to_string());
        kinds.push(Some(*k));
    }
    for row in &rows {
        for (n, c) in row {
            let i = *index.entry(n.clone()).or_insert_with(|| {
                names.push(n.clone());
                kinds.push(None);
                names.len() - 1
            });
            kinds[i] = merge_kind(kinds[i], c);
        }
    }
    let cols = names
        .iter()
        .zip(&kinds)
        .map(|(n, k)| Column::new(n, k.unwrap_or(Kind::Text), true))
        .collect();
    let mut w = TableWriter::create(path, cols)?;
    for row in rows {
        let mut cells = vec![Cell::Null; names.len()];
        for (n, c) in row {
            cells[index[&n]] = c;
        }
        w.push(cells)?;
    }
    w.finish()
}

/// Writes `flows.parquet`, `flow_what_if.parquet` and `findings.parquet`
/// into `dir`.
pub fn write_tables(report: &Report, dir: &Path) -> Result<(), ColumnarError> {
    let json_err = |path: &Path| {
        let path = path.to_path_buf();
        move |e: serde_json::Error| ColumnarError::Parquet {
            path: path.clone(),
            error: e.to_string(),
        }
    };
    let flows_path = dir.join("flows.parquet");
    let mut flows = Vec::with_capacity(report.flows.len());
    let mut what_if = Vec::new();
    for f in &report.flows {
        let mut v = serde_json::to_value(f).map_err(json_err(&flows_path))?;
        let wi = v.as_object_mut().and_then(|m| m.remove("what_if"));
        let mut row = Vec::new();
        flatten("", &v, &mut row);
        for w in &f.what_if {
            let s = w.gro_max_size;
            row.push((
                format!("stack_packets_{s}"),
                Cell::Int(w.stack_packets as i64),
            ));
            row.push((format!("merge_ratio_{s}"), Cell::Float(w.merge_ratio)));
        }
        flows.push(row);
        for w in wi.iter().filter_map(Value::as_array).flatten() {
            let mut row = vec![
                ("flow_id".to_string(), Cell::Int(f.id as i64)),
                ("file".to_string(), Cell::Text(f.file.clone())),
            ];
            flatten("", w, &mut row);
            what_if.push(row);
        }
    }
    write_flattened(
        &flows_path,
        flows,
        &[
            ("id", Kind::Int),
            ("file", Kind::Text),
            ("protocol", Kind::Text),
            ("description", Kind::Text),
        ],
    )?;
    write_flattened(
        &dir.join("flow_what_if.parquet"),
        what_if,
        &[
            ("flow_id", Kind::Int),
            ("file", Kind::Text),
            ("gro_max_size", Kind::Int),
            ("stack_packets", Kind::Int),
        ],
    )?;
    // Which hop (several captures): one row per flow and capture point.
    let hops_path = dir.join("hops.parquet");
    let mut hops = Vec::new();
    for h in &report.hops {
        for p in &h.points {
            let mut row = vec![
                ("flow".to_string(), Cell::Text(h.flow.clone())),
                (
                    "first_unmergeable".to_string(),
                    h.first_unmergeable.clone().map_or(Cell::Null, Cell::Text),
                ),
            ];
            let v = serde_json::to_value(p).map_err(json_err(&hops_path))?;
            flatten("", &v, &mut row);
            hops.push(row);
        }
    }
    write_flattened(
        &hops_path,
        hops,
        &[
            ("flow", Kind::Text),
            ("first_unmergeable", Kind::Text),
            ("capture", Kind::Text),
            ("flow_id", Kind::Int),
            ("mergeable", Kind::Bool),
        ],
    )?;
    let findings_path = dir.join("findings.parquet");
    let mut findings = Vec::with_capacity(report.findings.len());
    for f in &report.findings {
        let v = serde_json::to_value(f).map_err(json_err(&findings_path))?;
        let mut row = Vec::new();
        flatten("", &v, &mut row);
        findings.push(row);
    }
    write_flattened(
        &findings_path,
        findings,
        &[
            ("rank", Kind::Int),
            ("severity", Kind::Text),
            ("kind", Kind::Text),
            ("flow_id", Kind::Int),
            ("flow_description", Kind::Text),
            ("title", Kind::Text),
            ("evidence_file", Kind::Text),
            ("extra_packets", Kind::Int),
        ],
    )
}
