//! The streaming pass: files in, flow statistics and GRO what-ifs out.
//!
//! Each input is opened once ([`CaptureInput`]); work is split into jobs,
//! each reading one file from its beginning through that open file. By
//! default a file is one job (statistics and every what-if size, each
//! checksum verified once) and jobs run on up to one thread per core, so
//! several files use several cores. With `--threads N` (`Options::threads`)
//! a lone file is split: one job computes the flow statistics and the
//! what-if sizes get jobs of their own, so that one capture uses N cores, at
//! the price of reading and dissecting it once per job (about 1.5x the CPU
//! time on a real capture: worth it only on an otherwise idle machine; see
//! docs/performance.md). Each job keeps constant memory per flow; nothing
//! holds frames.
//!
//! Ctrl-C (the `cancel` flag) stops every job at its next frame; what was
//! counted so far is still reported, marked `interrupted`.

use crate::dissect::{self, Parsed, L4};
use crate::figures::RunTotals;
use crate::flow::{eviction_set, FlowKey, FlowStats, OtherFlows};
use crate::options::Options;
use crate::whatif::WhatIfWorker;
use offload::Input;
use offload_capture::{CaptureError, CaptureInput, Control, SpooledInput};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Facts about one input file.
#[derive(Debug, Clone, Default)]
pub struct FileFacts {
    pub path: String,
    pub frames: u64,
    pub bytes: u64,
    /// Frames whose link type the engine cannot read.
    pub unsupported_link: u64,
    /// Frames without a readable IP/TCP/UDP header.
    pub unparsed: u64,
    pub link_types: Vec<u32>,
    pub first_ns: Option<u64>,
    pub last_ns: Option<u64>,
    /// The input turned bad here; everything before was analysed.
    pub error: Option<String>,
    pub interrupted: bool,
    /// Checksums in this capture were left to the NIC (CHECKSUM_PARTIAL):
    /// the what-if does not verify them, as the kernel trusts such packets.
    pub checksums_offloaded: bool,
    /// Frames whose captured length exceeded the snapshot length (read anyway).
    pub above_snaplen: u64,
    /// Frames whose timestamp lay outside the years 1677 to 2262 and was
    /// read as the nearest time that range holds, and the first of them
    /// (0: none; the capture layer's count, decision 0161).
    pub timestamps_clamped: u64,
    pub first_timestamp_clamped: u64,
    /// Frames timestamped earlier than the frame before them, and the
    /// first of them (0: none): the file is not in time order, so
    /// durations and RTTs around them are not what the wire saw.
    pub timestamps_backwards: u64,
    pub first_timestamp_backwards: u64,
    /// Frames the capture cut short, by where.
    pub snap: crate::figures::SnapCounts,
    /// Frames without an IP packet analysis reads, by reason: (reason,
    /// frames, first frame), in order of first appearance.
    pub link_skipped: Vec<(crate::link::Skip, u64, u64)>,
    /// IP fragments and their reassembly.
    pub fragments: crate::frag::FragCounts,
    /// IPComp payloads and their inflation.
    pub ipcomp: crate::ipcomp::IpcompCounts,
}

impl FileFacts {
    /// Counts frame `number` as skipped for `why` (a handful of reasons
    /// per file: a short list).
    fn skipped(&mut self, why: crate::link::Skip, number: u64) {
        match self.link_skipped.iter_mut().find(|s| s.0 == why) {
            Some(s) => s.1 += 1,
            None => self.link_skipped.push((why, 1, number)),
        }
    }
}

/// The raw result of the pass, before findings and formatting.
#[derive(Debug)]
pub struct PassResult {
    pub files: Vec<FileFacts>,
    /// All flows, file by file.
    pub flows: Vec<FlowStats>,
    /// Per size: the totals over all files.
    pub totals: Vec<RunTotals>,
    pub interrupted: bool,
    /// Flows evicted from the tables (least recently active), added up.
    pub other: OtherFlows,
}

/// A unit of work: one file, statistics and/or some what-if sizes.
struct Job {
    file: usize,
    stats: bool,
    /// Indices into `Options::gro_sizes`.
    sizes: Vec<usize>,
}

struct JobResult {
    file: usize,
    facts: Option<FileFacts>,
    flows: Vec<FlowStats>,
    other: OtherFlows,
    sizes: Vec<usize>,
    worker: Option<WhatIfWorker>,
}

/// Errors that stop the analysis before it produced anything.
#[derive(Debug)]
pub enum AnalyzeError {
    /// A file could not be opened or has no valid header.
    Open(CaptureError),
    /// The per-packet table could not be written.
    Output {
        path: PathBuf,
        error: std::io::Error,
    },
    /// Parquet output failed (or this build has none).
    Parquet(crate::columnar::ColumnarError),
}

impl std::fmt::Display for AnalyzeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AnalyzeError::Open(e) => write!(f, "{e}"),
            AnalyzeError::Output { path, error } => {
                write!(f, "cannot write {}: {error}", path.display())
            }
            AnalyzeError::Parquet(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for AnalyzeError {}

/// Runs the pass over `inputs`.
pub fn run_pass(
    inputs: &[PathBuf],
    opts: &Options,
    ctl: &mut Control<'_>,
) -> Result<PassResult, AnalyzeError> {
    // Each input is opened once, here, so that a wrong path fails before
    // minutes of work; every reader below (the checksum probe, the jobs)
    // reads that one open file from its own position. A stream (`-`, a
    // FIFO) is copied to a temporary file first (read once, too).
    let mut spools = Vec::new();
    let mut opened = Vec::with_capacity(inputs.len());
    for p in inputs {
        let input = if offload_capture::stdio::is_rereadable(p) {
            CaptureInput::open(p)
        } else {
            let s = SpooledInput::new(p).map_err(AnalyzeError::Open)?;
            let i = CaptureInput::open_as(s.path(), s.name().to_string());
            spools.push(s);
            i
        }
        .map_err(AnalyzeError::Open)?;
        // The file header, now.
        input.reader().map_err(AnalyzeError::Open)?;
        opened.push(input);
    }
    let opened = &opened;
    let threads = if opts.threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        opts.threads
    };
    // Splitting a file over jobs reads and dissects it once per job: it
    // costs about 1.5x the CPU for a shorter wall time on an idle machine
    // only. So by default (0) each file is one job and the cores share the
    // files; asking for threads (`--threads N`) splits a lone file.
    let jobs = plan(
        inputs.len(),
        opts.gro_sizes.len(),
        threads,
        opts.threads != 0,
    );
    let offloaded: Vec<bool> = opened
        .iter()
        .map(|i| opts.verify_checksums && probe_offloaded(i, &opts.vxlan_ports))
        .collect();
    let next = AtomicUsize::new(0);
    let progress = AtomicU64::new(0);
    let results: Mutex<Vec<JobResult>> = Mutex::new(Vec::new());
    let first_error: Mutex<Option<AnalyzeError>> = Mutex::new(None);
    let cancel: &AtomicBool = ctl.cancel;
    let workers = threads.min(jobs.len()).max(1);
    let csv_parts: Vec<PathBuf> = (0..inputs.len())
        .map(|i| match &opts.packet_csv {
            Some(p) => p.with_extension(format!("part{i}")),
            None => PathBuf::new(),
        })
        .collect();
    let evicted_parts: Vec<PathBuf> = (0..inputs.len())
        .map(|i| match &opts.evicted_csv {
            Some(p) => p.with_extension(format!("part{i}")),
            None => PathBuf::new(),
        })
        .collect();
    let evicted_parts = &evicted_parts;
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let (next, progress, results, first_error) = (&next, &progress, &results, &first_error);
    let (jobs, csv_parts, offloaded) = (&jobs, &csv_parts, &offloaded);
    std::thread::scope(|s| {
        for _ in 0..workers {
            let done = done_tx.clone();
            s.spawn(move || loop {
                let j = next.fetch_add(1, Ordering::Relaxed);
                let Some(job) = jobs.get(j) else {
                    let _ = done.send(());
                    break;
                };
                let csv = opts
                    .packet_csv
                    .as_ref()
                    .map(|_| csv_parts[job.file].as_path());
                let verify = opts.verify_checksums && !offloaded[job.file];
                let pq = opts
                    .parquet_dir
                    .as_ref()
                    .map(|d| crate::columnar::packets_path(d, job.file, inputs.len()));
                match run_job(
                    &inputs[job.file],
                    &opened[job.file],
                    job,
                    opts,
                    verify,
                    cancel,
                    progress,
                    csv,
                    pq,
                    inputs.len(),
                    opts.evicted_csv
                        .as_ref()
                        .map(|_| evicted_parts[job.file].as_path()),
                ) {
                    Ok(r) => results.lock().unwrap_or_else(|e| e.into_inner()).push(r),
                    Err(e) => {
                        first_error
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .get_or_insert(e);
                    }
                }
            });
        }
        // A worker that panicked drops its sender: then `recv` fails.
        drop(done_tx);
        // Report progress from this thread while the workers run.
        let divisor = jobs_per_file(jobs, inputs.len());
        let mut finished = 0;
        while finished < workers {
            (ctl.on_progress)(progress.load(Ordering::Relaxed) / divisor);
            match done_rx.recv_timeout(std::time::Duration::from_millis(50)) {
                Ok(()) => finished += 1,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
    });
    (ctl.on_progress)(progress.load(Ordering::Relaxed) / jobs_per_file(jobs, inputs.len()));
    if let Some(e) = first_error.lock().unwrap_or_else(|e| e.into_inner()).take() {
        return Err(e);
    }
    if let Some(out) = &opts.packet_csv {
        concat_parts(out, Some(crate::packets::PACKET_CSV_HEADER), csv_parts).map_err(|error| {
            AnalyzeError::Output {
                path: out.clone(),
                error,
            }
        })?;
    }
    if let Some(out) = &opts.evicted_csv {
        concat_parts(out, None, evicted_parts).map_err(|error| AnalyzeError::Output {
            path: out.clone(),
            error,
        })?;
    }
    let mut results = std::mem::take(&mut *results.lock().unwrap_or_else(|e| e.into_inner()));
    results.sort_by_key(|r| (r.file, r.facts.is_none()));
    Ok(assemble(inputs.len(), opts, results))
}

/// Bytes are counted by every job reading a file; progress is per file.
fn jobs_per_file(jobs: &[Job], files: usize) -> u64 {
    (jobs.len() / files.max(1)).max(1) as u64
}

/// One job per file when there are at least as many files as threads, or
/// when `split` is off; otherwise each file gets a statistics job and its
/// what-if sizes are dealt round-robin over `threads - 1` engine jobs, so
/// that every core has work. (Keeping all sizes of a file in one job lets
/// it verify each checksum once.)
fn plan(files: usize, sizes: usize, threads: usize, split: bool) -> Vec<Job> {
    let mut jobs = Vec::new();
    let split = split && files < threads && sizes > 0;
    for f in 0..files {
        if split {
            jobs.push(Job {
                file: f,
                stats: true,
                sizes: vec![],
            });
            let n = (threads - 1).clamp(1, sizes);
            for k in 0..n {
                jobs.push(Job {
                    file: f,
                    stats: false,
                    sizes: (0..sizes).filter(|i| i % n == k).collect(),
                });
            }
        } else {
            jobs.push(Job {
                file: f,
                stats: true,
                sizes: (0..sizes).collect(),
            });
        }
    }
    jobs
}

/// The per-job flow cap: the total shared evenly by the inputs.
fn per_job_cap(max_flows: usize, files: usize) -> usize {
    (max_flows / files.max(1)).max(64)
}

fn concat_parts(out: &Path, header: Option<&str>, parts: &[PathBuf]) -> std::io::Result<()> {
    let mut w = std::io::BufWriter::new(std::fs::File::create(out)?);
    if let Some(h) = header {
        w.write_all(h.as_bytes())?;
    }
    for p in parts {
        if let Ok(mut f) = std::fs::File::open(p) {
            std::io::copy(&mut f, &mut w)?;
            drop(f);
            let _ = std::fs::remove_file(p);
        }
    }
    w.flush()
}

const CANCEL_CHECK: u64 = 256;

/// Frames looked at to decide whether a capture's checksums are offloaded.
const CSUM_PROBE_FRAMES: usize = 2000;

/// True when the first frames of `path` carry checksums left for the NIC
/// (the pseudo-header sum only): a capture on a sending host, or on a
/// virtual link that passes packets with CHECKSUM_PARTIAL (veth, tap).
pub fn checksums_offloaded(path: &Path, vxlan_ports: &[u16]) -> bool {
    CaptureInput::open(path).is_ok_and(|i| probe_offloaded(&i, vxlan_ports))
}

/// [`checksums_offloaded`] on an opened input (a reader of its own).
fn probe_offloaded(input: &CaptureInput, vxlan_ports: &[u16]) -> bool {
    let Ok(mut r) = input.reader() else {
        return false;
    };
    for _ in 0..CSUM_PROBE_FRAMES {
        let Ok(Some(f)) = r.next_frame() else { break };
        let Ok(v) = crate::link::view(f.link_type.0, f.data, f.orig_len) else {
            continue;
        };
        let Some(p) = dissect::parse(v.link, v.data, v.orig_len, vxlan_ports) else {
            continue;
        };
        let st = match p.l4 {
            L4::Tcp(t) => dissect::l4_checksum(v.data, &p.ip, p.l4_off, t.checksum, false),
            L4::Udp { checksum, .. } => {
                dissect::l4_checksum(v.data, &p.ip, p.l4_off, checksum, true)
            }
            L4::Other => continue,
        };
        if st == dissect::CsumState::Offloaded {
            return true;
        }
    }
    false
}

#[allow(clippy::too_many_arguments)]
fn run_job(
    path: &Path,
    input: &CaptureInput,
    job: &Job,
    opts: &Options,
    verify: bool,
    cancel: &AtomicBool,
    progress: &AtomicU64,
    csv: Option<&Path>,
    parquet: Option<PathBuf>,
    nfiles: usize,
    evicted: Option<&Path>,
) -> Result<JobResult, AnalyzeError> {
    let mut reader = input.reader().map_err(AnalyzeError::Open)?;
    reader.set_snaplen_check(opts.strict);
    let mut facts = FileFacts {
        path: path.display().to_string(),
        checksums_offloaded: opts.verify_checksums && !verify,
        ..Default::default()
    };
    let mut worker = (!job.sizes.is_empty()).then(|| {
        WhatIfWorker::new(
            job.file,
            job.sizes.iter().map(|i| opts.gro_sizes[*i]).collect(),
            opts.kernel,
            verify,
            opts.vxlan_ports.clone(),
            per_job_cap(opts.max_flows, nfiles),
            opts.truncated == crate::options::TruncatedFrames::Headers,
            opts.flush_timeout_ns,
        )
    });
    let cap = per_job_cap(opts.max_flows, nfiles);
    let mut table = FlowTable::with_capacity(cap);
    let mut reasm = crate::frag::Reassembly::default();
    if let (true, Some(p)) = (job.stats, evicted) {
        let w = std::fs::File::create(p).map_err(|error| AnalyzeError::Output {
            path: p.to_path_buf(),
            error,
        })?;
        table.spill = Some(Spill {
            out: std::io::BufWriter::new(w),
            path: p.to_path_buf(),
            file_name: path.display().to_string(),
            sizes: opts.gro_sizes.len(),
            error: None,
        });
    }
    let mut csv_out = match (job.stats, csv) {
        (true, Some(p)) => Some(std::io::BufWriter::with_capacity(
            1 << 20,
            std::fs::File::create(p).map_err(|error| AnalyzeError::Output {
                path: p.to_path_buf(),
                error,
            })?,
        )),
        _ => None,
    };
    let mut pq_out = match (job.stats, parquet) {
        (true, Some(p)) => {
            Some(crate::columnar::PacketWriter::create(&p).map_err(AnalyzeError::Parquet)?)
        }
        _ => None,
    };
    let mut last_bytes = 0u64;
    let mut n = 0u64;
    loop {
        n += 1;
        if n.is_multiple_of(CANCEL_CHECK) {
            let b = reader.bytes_read();
            progress.fetch_add(b - last_bytes, Ordering::Relaxed);
            last_bytes = b;
            if cancel.load(Ordering::Relaxed) {
                facts.interrupted = true;
                break;
            }
        }
        let frame = match reader.next_frame() {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) => {
                facts.error = Some(e.to_string());
                break;
            }
        };
        facts.frames += 1;
        facts.bytes += frame.orig_len as u64;
        let ts = frame.timestamp_ns.max(0) as u64;
        if facts.first_ns.is_none() {
            facts.first_ns = Some(ts);
        }
        if facts.last_ns.is_some_and(|last| ts < last) {
            if facts.timestamps_backwards == 0 {
                facts.first_timestamp_backwards = frame.number;
            }
            facts.timestamps_backwards += 1;
        }
        facts.last_ns = Some(ts);
        if facts.link_types.last() != Some(&frame.link_type.0)
            && !facts.link_types.contains(&frame.link_type.0)
        {
            facts.link_types.push(frame.link_type.0);
        }
        // The engine's link types unchanged; others as the IP packet they
        // carry (crate::link), or skipped with the reason counted.
        let view = match crate::link::view(frame.link_type.0, frame.data, frame.orig_len) {
            Ok(v) => v,
            Err(why) => {
                if matches!(why, crate::link::Skip::UnsupportedLinkType(_)) {
                    facts.unsupported_link += 1;
                } else {
                    facts.unparsed += 1;
                }
                if job.stats && matches!(why, crate::link::Skip::Truncated { .. }) {
                    if let Some(s) = cut_link_header(
                        frame.link_type.0,
                        frame.data,
                        frame.orig_len,
                        &opts.vxlan_ports,
                    ) {
                        facts.snap.add(s, frame.data.len());
                    }
                }
                facts.skipped(why, frame.number);
                continue;
            }
        };
        let link = view.link;
        let mut parsed = dissect::parse(link, view.data, view.orig_len, &opts.vxlan_ports);
        // An IPComp payload inflated: the packet inside is the frame's,
        // for the statistics and the what-if's flow alike; `data` holds
        // the bytes its offsets refer to.
        let inflated = parsed.as_mut().and_then(|p| {
            inflate_ipcomp(
                view.data,
                p,
                &opts.vxlan_ports,
                &mut facts.ipcomp,
                frame.number,
            )
        });
        let data = inflated.as_deref().unwrap_or(view.data);
        if parsed.is_none() {
            facts.unparsed += 1;
            facts.skipped(crate::link::why_not_ip(link, view.data), frame.number);
        }
        let snap = if job.stats {
            // Snapshot lengths are of the whole frame, link header included.
            let s = dissect::snap(link, view.data, view.orig_len, &opts.vxlan_ports)
                .in_frame(view.link_header_len(frame.data));
            facts.snap.add(s, frame.data.len());
            s
        } else {
            dissect::Snap::Whole
        };
        // The flow's key, made once for the statistics and the what-if,
        // and passed to both by reference (not copied for each).
        let key = parsed.as_ref().map(FlowKey::of);
        let parsed = parsed.as_ref().zip(key.as_ref());
        // The table's slot of this frame's flow, when the table was
        // updated with this frame's key: the what-if finds its own slot
        // from it without comparing keys again.
        let mut hint = None;
        if job.stats {
            // IP fragments count once, as the datagram they complete
            // (crate::frag, as tshark reassembles them); the what-if
            // below still gets each fragment as captured.
            // A tunnel's outer fragments are put back together before its
            // inner packet is read (tshark reassembles the outer IP first).
            let datagram: Option<(Parsed, Vec<u8>)>;
            let datagram_key: FlowKey;
            let mut own_key = true;
            let stats = match parsed {
                Some((p, key)) if crate::frag::is_fragment(view.data, outer_ip(p)) => {
                    let ip = outer_ip(p);
                    match reasm.push(view.data, ip, p.complete, ts) {
                        crate::frag::Outcome::FirstUnheld => {
                            // A segment in a fragment has no known length:
                            // tshark counts the frame and its header fields
                            // but gives it no tcp.len (packet-tcp.c:
                            // `pinfo->fragmented` leaves `th_have_seglen`
                            // false); it counts no payload here.
                            datagram = Some((Parsed { payload: 0, ..*p }, Vec::new()));
                            datagram.as_ref().map(|(p, _)| (p, key, view.data))
                        }
                        crate::frag::Outcome::Complete(d) => {
                            let link = if ip.v6 {
                                offload::LinkKind::Ipv6
                            } else {
                                offload::LinkKind::Ipv4
                            };
                            let len = d.len() as u32;
                            datagram =
                                dissect::parse(link, &d, len, &opts.vxlan_ports).map(|mut p| {
                                    let ports = &opts.vxlan_ports;
                                    let counts = &mut facts.ipcomp;
                                    match inflate_ipcomp(&d, &mut p, ports, counts, frame.number) {
                                        Some(buf) => (p, buf),
                                        None => (p, d),
                                    }
                                });
                            own_key = false;
                            match &datagram {
                                Some((p, d)) => {
                                    datagram_key = FlowKey::of(p);
                                    Some((p, &datagram_key, d.as_slice()))
                                }
                                None => None,
                            }
                        }
                        _ => None,
                    }
                }
                Some((p, key)) => Some((p, key, data)),
                None => None,
            };
            if let Some((p, key, data)) = stats {
                let idx = table.update(
                    p,
                    key,
                    data,
                    frame.number,
                    ts,
                    frame.orig_len,
                    opts,
                    job.file,
                );
                table.note_snap(snap, frame.data.len());
                if own_key {
                    hint = table.hint();
                }
                if let Some(w) = pq_out.as_mut() {
                    w.push(job.file, frame.number, ts, idx, p, view.data.len())
                        .map_err(AnalyzeError::Parquet)?;
                }
                if let Some(w) = csv_out.as_mut() {
                    crate::packets::write_packet_row(w, job.file, frame.number, ts, idx, p)
                        .map_err(|error| AnalyzeError::Output {
                            path: csv.map(Path::to_path_buf).unwrap_or_default(),
                            error,
                        })?;
                }
            }
        }
        if let Some(w) = worker.as_mut() {
            w.feed(
                Input {
                    data: view.data,
                    link,
                    timestamp_ns: ts,
                    frame: frame.number,
                    orig_len: view.orig_len,
                },
                parsed,
                hint,
            );
        }
    }
    progress.fetch_add(reader.bytes_read() - last_bytes, Ordering::Relaxed);
    reasm.finish();
    facts.fragments = reasm.counts;
    facts.above_snaplen = reader.above_snaplen().0;
    (facts.timestamps_clamped, facts.first_timestamp_clamped) = reader.timestamps_clamped();
    if let Some(w) = worker.as_mut() {
        w.finish();
    }
    if let Some(s) = table.spill.take() {
        s.finish()?;
    }
    if let Some(w) = pq_out {
        w.finish().map_err(AnalyzeError::Parquet)?;
    }
    if let Some(mut w) = csv_out {
        w.flush().map_err(|error| AnalyzeError::Output {
            path: csv.map(Path::to_path_buf).unwrap_or_default(),
            error,
        })?;
    }
    Ok(JobResult {
        file: job.file,
        facts: job.stats.then_some(facts),
        other: table.other,
        flows: table.flows,
        sizes: job.sizes.clone(),
        worker,
    })
}

/// Where evicted flows' rows go (`--csv`: the tail of flows.csv).
#[derive(Debug)]
pub struct Spill {
    out: std::io::BufWriter<std::fs::File>,
    path: PathBuf,
    file_name: String,
    sizes: usize,
    error: Option<std::io::Error>,
}

impl Spill {
    fn write(&mut self, f: &FlowStats, peer: Option<&FlowStats>) {
        if self.error.is_some() {
            return;
        }
        let r =
            crate::report::flow_report(f.serial as usize, f, &self.file_name, 0, Vec::new(), peer);
        if let Err(e) = crate::export::write_flow_row(&mut self.out, &r, self.sizes) {
            self.error = Some(e);
        }
    }

    fn finish(mut self) -> Result<(), AnalyzeError> {
        match self.error.take() {
            Some(error) => Err(AnalyzeError::Output {
                path: self.path,
                error,
            }),
            None => self.out.flush().map_err(|error| AnalyzeError::Output {
                path: self.path,
                error,
            }),
        }
    }
}

/// The flows of one file, at most `cap` of them: when a new flow finds the
/// table full, the least recently active eighth is evicted into `other`
/// (and its rows to `spill`, when set).
#[derive(Debug)]
pub struct FlowTable {
    index: crate::key::FlowMap<u32>,
    /// Tunnelled flows with a VNI or GRE key by
    /// `FlowKey::without_tunnel_id`, to find the other direction when it
    /// uses another identifier.
    tunnel_pairs: crate::key::FlowMap<u32>,
    /// The last few frames' flows, which skip the hash lookup; the most
    /// recent is the previous frame's (its snap counts go there).
    recent: crate::key::Recent,
    pub flows: Vec<FlowStats>,
    cap: usize,
    next_serial: u64,
    pub other: OtherFlows,
    pub spill: Option<Spill>,
    /// Evictions so far: slots keep their flow within one epoch
    /// ([`crate::key::SlotHint`]).
    epoch: u64,
}

impl Default for FlowTable {
    fn default() -> Self {
        FlowTable::with_capacity(crate::options::DEFAULT_MAX_FLOWS)
    }
}

impl FlowTable {
    pub fn with_capacity(cap: usize) -> Self {
        FlowTable {
            index: Default::default(),
            tunnel_pairs: Default::default(),
            recent: Default::default(),
            // Reserved once, at the cap (or the default cap when larger):
            // growing by doubling would copy the table and hold old and
            // new at once, half again the table's size at its peak. Pages
            // never written (a capture of few flows) are never resident.
            flows: Vec::with_capacity(cap.clamp(1, crate::options::DEFAULT_MAX_FLOWS)),
            cap: cap.max(1),
            next_serial: 0,
            other: OtherFlows::default(),
            spill: None,
            epoch: 0,
        }
    }

    /// The slot of the flow last updated, for another table keyed by the
    /// same key ([`crate::key::SlotHint`]).
    #[inline]
    pub fn hint(&self) -> Option<crate::key::SlotHint> {
        self.recent.latest().map(|slot| crate::key::SlotHint {
            slot,
            epoch: self.epoch,
        })
    }

    /// Evicts the least recently active flows, keeping the others' order
    /// and their links to their reverse direction.
    fn evict(&mut self) {
        self.recent.clear();
        self.epoch += 1;
        let evict = eviction_set(self.flows.iter().map(|f| f.last_frame));
        let mut map = vec![u32::MAX; evict.len()];
        let mut kept = 0u32;
        for (i, f) in self.flows.iter().enumerate() {
            if evict[i] {
                self.other.add(f);
                if let Some(s) = self.spill.as_mut() {
                    s.write(f, f.reverse.and_then(|r| self.flows.get(r)));
                }
            } else {
                map[i] = kept;
                kept += 1;
            }
        }
        // In place: the table's allocation is reused, not rebuilt.
        let mut i = 0;
        self.flows.retain(|_| {
            i += 1;
            !evict[i - 1]
        });
        for f in &mut self.flows {
            f.reverse = f
                .reverse
                .and_then(|r| (map[r] != u32::MAX).then_some(map[r] as usize));
        }
        self.index.retain(|_, v| {
            let m = map[*v as usize];
            *v = m;
            m != u32::MAX
        });
        self.tunnel_pairs.retain(|_, v| {
            let m = map[*v as usize];
            *v = m;
            m != u32::MAX
        });
    }

    /// The slot of `key`, a new flow (evicting first when full) if unseen.
    fn lookup(&mut self, key: FlowKey, number: u64, ts: u64, sizes: usize, file: usize) -> usize {
        if let Some(&i) = self.index.get(&key) {
            return i as usize;
        }
        if self.flows.len() >= self.cap {
            self.evict();
        }
        let mut f = FlowStats::new(key, file, number, ts, sizes);
        f.serial = self.next_serial;
        self.next_serial += 1;
        let i = self.flows.len();
        // The other direction, when it came first: the two are linked for
        // the sequence analysis (ACKs, windows, RTT).
        // Tunnels included: the two directions of a tunnelled connection
        // share the tunnel's kind, and their outer addresses are swapped
        // (the outer UDP ports are not keyed). A direction without its
        // exact reverse pairs with the unpaired reverse direction under
        // another VNI or GRE key: Linux GRE may send and receive with
        // different keys (`ikey`, `okey`), Open vSwitch sets a VNI per
        // flow and direction. An exact reverse that comes later takes its
        // place (docs/decisions/0205-tunnelled-flow-keys.md).
        let keyed = key.tunnel.is_some_and(|t| t.id.is_some());
        let exact = self.index.get(&key.reverse()).copied();
        let reverse = exact
            .or_else(|| {
                let r = *self
                    .tunnel_pairs
                    .get(&key.reverse().without_tunnel_id())
                    .filter(|_| keyed)?;
                self.flows[r as usize].reverse.is_none().then_some(r)
            })
            .or_else(|| {
                // Mirrored traffic: the inner connection's other direction
                // in the same outer direction (FlowKey::mirrored), when
                // unpaired.
                let r = *self.index.get(&key.mirrored()?)?;
                self.flows[r as usize].reverse.is_none().then_some(r)
            })
            .or_else(|| {
                // Mirrored with a GRE key per direction: an ERSPAN-like
                // session that tunnels each direction under its own key
                // from one mirror (Zeek's erspan.pcap: keys 0 and
                // 0x02000000, outer addresses the same both ways).
                let m = key.mirrored()?.without_tunnel_id();
                let r = *self.tunnel_pairs.get(&m).filter(|_| keyed)?;
                self.flows[r as usize].reverse.is_none().then_some(r)
            });
        if let Some(r) = reverse {
            if let Some(o) = self.flows[r as usize].reverse {
                // Paired across identifiers before its exact reverse came.
                self.flows[o].reverse = None;
            }
            f.reverse = Some(r as usize);
            self.flows[r as usize].reverse = Some(i);
        }
        self.flows.push(f);
        self.index.insert(key, i as u32);
        if keyed {
            self.tunnel_pairs.insert(key.without_tunnel_id(), i as u32);
        }
        i
    }

    /// Counts how much of the frame just added ([`Self::update`]) the
    /// capture kept, in its flow.
    pub fn note_snap(&mut self, snap: dissect::Snap, captured: usize) {
        if let (Some(i), false) = (self.recent.latest(), snap == dissect::Snap::Whole) {
            self.flows[i as usize].snap.add(snap, captured);
        }
    }

    /// Adds a frame; returns its flow's serial (order of first appearance).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub fn update(
        &mut self,
        p: &Parsed,
        key: &FlowKey,
        data: &[u8],
        number: u64,
        ts: u64,
        orig_len: u32,
        opts: &Options,
        file: usize,
    ) -> usize {
        let idx = match self.recent.get(key) {
            Some(i) => i as usize,
            None => {
                let i = self.lookup(*key, number, ts, opts.gro_sizes.len(), file);
                self.recent.put(*key, i as u32);
                i
            }
        };
        let (flow, mut peer) = flow_and_peer(&mut self.flows, idx);
        let peer_analysis = peer.as_mut().and_then(|r| r.analysis.as_deref_mut());
        flow.update(p, data, number, ts, orig_len, opts.mtu, peer_analysis);
        if let L4::Tcp(t) = &p.l4 {
            if p.payload > 0 {
                let big = p.tunnel.as_ref().map_or(p.ip.ip_len, |t| t.ip.ip_len) > opts.mtu;
                flow.note_data(ts, t.seq, t.seq.wrapping_add(p.payload), big);
            }
            if t.flags & 0x10 != 0 {
                if let Some(r) = peer {
                    r.note_ack(ts, t.ack);
                }
            }
        }
        self.flows[idx].serial as usize
    }
}

/// Reads the packet in `p`'s IPComp payload, when it has one
/// (crate::ipcomp), into `p`, counting how it went; returns the bytes the
/// new offsets refer to. A fragment's payload waits for its datagram.
/// Runs for every frame: only `ipcomp_at`'s one comparison is inlined
/// into the frame loop, the rest is called for IPComp (or AH) frames.
#[inline(always)]
fn inflate_ipcomp(
    frame: &[u8],
    p: &mut Parsed,
    vxlan_ports: &[u16],
    counts: &mut crate::ipcomp::IpcompCounts,
    number: u64,
) -> Option<Vec<u8>> {
    let at = dissect::ipcomp_at(frame, p)?;
    inflate_ipcomp_at(frame, p, &at, vxlan_ports, counts, number)
}

#[cold]
#[inline(never)]
fn inflate_ipcomp_at(
    frame: &[u8],
    p: &mut Parsed,
    at: &dissect::IpcompAt,
    vxlan_ports: &[u16],
    counts: &mut crate::ipcomp::IpcompCounts,
    number: u64,
) -> Option<Vec<u8>> {
    if crate::frag::is_fragment(frame, &p.ip) {
        return None;
    }
    let r = crate::ipcomp::expand(frame, p, at, vxlan_ports);
    counts.add(r.as_ref().map(|r| r.2).map_err(|e| *e), number);
    let (q, buf, _) = r.ok()?;
    *p = q;
    Some(buf)
}

/// The IP header a frame's fragmentation is read from: a tunnel's outer
/// one (tshark reassembles it before reading the tunnel), else the only
/// one.
#[inline]
fn outer_ip(p: &Parsed) -> &dissect::IpFields {
    p.tunnel.as_ref().map_or(&p.ip, |t| &t.ip)
}

/// The flow at `idx` and its other direction, both mutable.
fn flow_and_peer(flows: &mut [FlowStats], idx: usize) -> (&mut FlowStats, Option<&mut FlowStats>) {
    match flows[idx].reverse {
        Some(r) if r != idx && r < flows.len() => {
            if r < idx {
                let (a, b) = flows.split_at_mut(idx);
                (&mut b[0], Some(&mut a[r]))
            } else {
                let (a, b) = flows.split_at_mut(r);
                (&mut a[idx], Some(&mut b[0]))
            }
        }
        _ => (&mut flows[idx], None),
    }
}

fn assemble(nfiles: usize, opts: &Options, results: Vec<JobResult>) -> PassResult {
    let mut files = vec![FileFacts::default(); nfiles];
    let mut per_file_flows: Vec<Vec<FlowStats>> = (0..nfiles).map(|_| Vec::new()).collect();
    let mut workers: Vec<(usize, Vec<usize>, WhatIfWorker)> = Vec::new();
    let mut other = OtherFlows::default();
    for r in results {
        if let Some(f) = r.facts {
            files[r.file] = f;
            per_file_flows[r.file] = r.flows;
            other.merge(&r.other);
        }
        if let Some(w) = r.worker {
            workers.push((r.file, r.sizes, w));
        }
    }
    let mut totals = vec![RunTotals::default(); opts.gro_sizes.len()];
    for (file, sizes, w) in &workers {
        let index: crate::key::FlowMap<usize> = w
            .flows
            .iter()
            .enumerate()
            .map(|(i, f)| (f.key, i))
            .collect();
        for (k, &si) in sizes.iter().enumerate() {
            totals[si].merge(&w.totals[k]);
        }
        for flow in &mut per_file_flows[*file] {
            if let Some(&i) = index.get(&flow.key) {
                if sizes.first() == Some(&0) {
                    flow.gro = w.flows[i]
                        .gro
                        .points
                        .iter()
                        .map(|g| crate::series::GroPoint {
                            t: g.t_ns.saturating_sub(flow.first_ns) as f64 / 1e9,
                            ..*g
                        })
                        .collect();
                }
                for (k, &si) in sizes.iter().enumerate() {
                    flow.what_if[si].merge(&w.flows[i].plain[k]);
                    flow.healthy_what_if[si].merge(&w.flows[i].healthy[k]);
                }
            }
        }
    }
    let interrupted = files.iter().any(|f| f.interrupted);
    // Links to the other direction index a file's own flows: make them
    // index the list of all files' flows. The lists are moved, not copied:
    // a copy of a full table (100,000 records of over a kilobyte) beside
    // the original was the pass's peak of memory.
    let mut all: Vec<FlowStats> = Vec::new();
    for mut flows in per_file_flows {
        let offset = all.len();
        for f in flows.iter_mut() {
            f.reverse = f.reverse.map(|r| r + offset);
        }
        if all.is_empty() {
            all = flows;
        } else {
            all.append(&mut flows);
        }
    }
    PassResult {
        files,
        flows: all,
        totals,
        interrupted,
        other,
    }
}

/// A frame the capture cut inside its link header (a long radiotap or PPI
/// header before 802.11 and LLC, at `tcpdump -s 96`): the snapshot length
/// that would have kept the headers GRO reads, found by reading the frame
/// with its missing bytes as filler (at most 512 of them: no link header
/// here is longer); a lower bound when the filler hides what follows.
/// None when the frame was not cut.
fn cut_link_header(
    linktype: u32,
    data: &[u8],
    orig_len: u32,
    vxlan_ports: &[u16],
) -> Option<dissect::Snap> {
    if data.len() as u64 >= orig_len as u64 {
        return None;
    }
    let mut padded = data.to_vec();
    padded.resize((orig_len as usize).min(data.len() + 512), 0);
    let Ok(view) = crate::link::view(linktype, &padded, orig_len) else {
        // Filler where the link header was cut reads as no IP (an LLC
        // header of zeros): the length that keeps the headers is unknown,
        // and more than what was captured.
        return Some(dissect::Snap::CutInHeaders {
            needed: (data.len() + 1).min(u32::MAX as usize) as u32,
        });
    };
    let lead = view.link_header_len(&padded);
    let kept = data.len().saturating_sub(lead).min(view.data.len());
    // Cut inside the link header itself, `kept` is 0 and the walk names
    // the first header after it.
    let snap = dissect::snap(view.link, &view.data[..kept], view.orig_len, vxlan_ports);
    Some(snap.in_frame(lead))
}

#[cfg(test)]
mod tests {
    use super::*;
    use offload::build::{vxlan_payload, FrameSpec, TcpSpec};

    /// A VXLAN frame of VNI `vni` from outer `a` to `b`, inner TCP from
    /// port `sport` to `dport`.
    fn vxlan(vni: u32, a: u8, b: u8, sport: u16, dport: u16) -> Vec<u8> {
        let (ia, ib) = if sport < dport { (1, 2) } else { (2, 1) };
        let inner = FrameSpec::tcp4(
            [10, 0, 0, ia],
            [10, 0, 0, ib],
            TcpSpec::data(sport, dport, 1),
        )
        .payload(vec![0; 10])
        .build();
        FrameSpec::udp4([192, 0, 2, a], [192, 0, 2, b], 40000 + a as u16, 4789)
            .payload(vxlan_payload(vni, &inner))
            .build()
    }

    fn add(t: &mut FlowTable, frame: &[u8], n: u64) -> usize {
        let p = dissect::parse(
            offload::LinkKind::Ethernet,
            frame,
            frame.len() as u32,
            &[4789],
        )
        .unwrap();
        let key = FlowKey::of(&p);
        t.update(
            &p,
            &key,
            frame,
            n,
            n * 1000,
            frame.len() as u32,
            &Options::default(),
            0,
        );
        *t.index.get(&key).unwrap() as usize
    }

    #[test]
    fn directions_pair_across_identifiers_until_the_exact_reverse_comes() {
        let mut t = FlowTable::default();
        // VNI 10 one way, VNI 11 back (Open vSwitch sets them per flow).
        let f = add(&mut t, &vxlan(10, 1, 2, 1000, 22), 1);
        let r = add(&mut t, &vxlan(11, 2, 1, 22, 1000), 2);
        assert_eq!((t.flows[f].reverse, t.flows[r].reverse), (Some(r), Some(f)));
        // The same connection in VNI 11 both ways: the exact reverse
        // takes the VNI 11 direction, the VNI 10 one is left unpaired.
        let f11 = add(&mut t, &vxlan(11, 1, 2, 1000, 22), 3);
        assert_eq!(t.flows[f11].reverse, Some(r));
        assert_eq!(t.flows[r].reverse, Some(f11));
        assert_eq!(t.flows[f].reverse, None);
        // Another connection: nothing to pair with.
        let o = add(&mut t, &vxlan(12, 2, 1, 80, 1001), 4);
        assert_eq!(t.flows[o].reverse, None);
    }

    #[test]
    fn mirrored_directions_pair_by_the_inner_connection() {
        // A mirror tunnels both directions from 1 to 2 (ERSPAN, a tap):
        // the inner connection's directions pair as tshark pairs them.
        let mut t = FlowTable::default();
        let f = add(&mut t, &vxlan(10, 1, 2, 1000, 22), 1);
        let r = add(&mut t, &vxlan(10, 1, 2, 22, 1000), 2);
        assert_eq!((t.flows[f].reverse, t.flows[r].reverse), (Some(r), Some(f)));
        // The exact reverse of the first direction takes its place.
        let e = add(&mut t, &vxlan(10, 2, 1, 22, 1000), 3);
        assert_eq!((t.flows[f].reverse, t.flows[e].reverse), (Some(e), Some(f)));
        assert_eq!(t.flows[r].reverse, None);
        // Mirrored under a key per direction (VNI 20 one way, 21 back).
        let mut t = FlowTable::default();
        let f = add(&mut t, &vxlan(20, 1, 2, 1000, 22), 1);
        let r = add(&mut t, &vxlan(21, 1, 2, 22, 1000), 2);
        assert_eq!((t.flows[f].reverse, t.flows[r].reverse), (Some(r), Some(f)));
    }

    /// The what-if's figures, per flow (by key) and in total, for frames
    /// `(flow, payload)` of TCP flows (IPv4 and IPv6 by flow number), with
    /// the table's slot hints (`SlotHint`, as `run_job` gives them) or
    /// without (every flow found by its key). The table holds at most
    /// `caps.0` flows, the worker `caps.1` (in `run_job` both have the
    /// same cap, but IP fragments can make them evict apart).
    fn what_if_figures(
        segs: &[(u8, u16)],
        caps: (usize, usize),
        hinted: bool,
    ) -> (Vec<String>, Vec<String>) {
        let opts = Options::default();
        let mut table = FlowTable::with_capacity(caps.0);
        let mut w = crate::whatif::WhatIfWorker::new(
            0,
            vec![65536, 185000],
            opts.kernel,
            true,
            vec![],
            caps.1,
            false,
            opts.flush_timeout_ns,
        );
        let mut seq = [1u32; 256];
        for (n, &(flow, len)) in segs.iter().enumerate() {
            let tcp = TcpSpec::data(40000 + flow as u16, 5201, seq[flow as usize]);
            seq[flow as usize] = seq[flow as usize].wrapping_add(len as u32);
            let spec = if flow % 2 == 0 {
                FrameSpec::tcp4([10, 0, 0, 1], [10, 0, 0, 2], tcp)
            } else {
                FrameSpec::tcp6([0xfd; 16], [0xfe; 16], tcp)
            };
            let f = spec.payload(vec![flow; len as usize]).build();
            let number = n as u64 + 1;
            let ts = number * 1000;
            let link = offload::LinkKind::Ethernet;
            let p = dissect::parse(link, &f, f.len() as u32, &[]).unwrap();
            let key = FlowKey::of(&p);
            let hint = if hinted {
                table.update(&p, &key, &f, number, ts, f.len() as u32, &opts, 0);
                table.hint()
            } else {
                None
            };
            let input = Input {
                data: &f,
                link,
                timestamp_ns: ts,
                frame: number,
                orig_len: f.len() as u32,
            };
            w.feed(input, Some((&p, &key)), hint);
        }
        w.finish();
        let mut flows: Vec<String> = w
            .flows
            .iter()
            .map(|f| format!("{:?} {:?} {:?}", f.key, f.last_frame, f.plain))
            .collect();
        flows.sort();
        (flows, w.totals.iter().map(|t| format!("{t:?}")).collect())
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        /// The what-if finds each frame's flow from the table's slot hint
        /// exactly as by its key: the same flows kept, the same figures,
        /// the same totals, while both tables evict (more flows than
        /// their caps), together or apart, and their slots move.
        #[test]
        fn hinted_what_if_equals_lookup_by_key(
            segs in proptest::collection::vec(
                (0u8..24, proptest::prelude::prop_oneof![
                    proptest::prelude::Just(1448u16), 1u16..1448
                ]),
                1..300,
            ),
            cap in 3usize..30,
            apart in proptest::prelude::any::<bool>(),
            other in 3usize..30,
        ) {
            let caps = (cap, if apart { other } else { cap });
            proptest::prop_assert_eq!(
                what_if_figures(&segs, caps, true),
                what_if_figures(&segs, caps, false)
            );
        }
    }
}
