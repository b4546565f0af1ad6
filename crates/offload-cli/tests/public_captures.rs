//! `offload analyze`'s flow and TCP figures against tshark and tcptrace on
//! public captures nobody here made: the test suites of tcpdump and Zeek
//! (crates/offload-analyze/tests/data/public/, SOURCE.md says where each
//! file comes from and what it exercises). Our own captures are made the
//! way we expect; these are not (mid-flow starts, one direction only,
//! snap lengths, odd link layers, VLAN and QinQ, IPv6, pcapng,
//! nanosecond timestamps, retransmissions, SACK, window scaling, MPTCP,
//! VXLAN).
//!
//! Per flow direction, each figure is compared with the tolerance next to
//! it (docs/analyze.md, "Differential tests", lists them and every
//! deliberate difference). `offload gro` and `offload gso` must also run
//! cleanly on every file. Needs tshark and tcptrace (`.ci/install`).
//!
//! With `OFFLOAD_SWEEP="zeek=DIR tcpdump=DIR ..."` (set by
//! scripts/analyze-sweep.sh) the same test runs the same comparison over
//! every capture of those directories instead of the committed set: it
//! prints per-file agreement and per-figure totals, and fails only on an
//! error, panic or hang of `offload` (decision 0245).

mod common;

use common::tcp_figures::{self, rev, Dir, FLAGS};
use common::BIN;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../offload-analyze/tests/data/public")
}

/// The captures: every `.pcap`/`.pcapng` in the directory (SOURCE.md
/// names each).
fn captures() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(data_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pcap" || e == "pcapng"))
        .collect();
    v.sort();
    assert!(v.len() >= 20, "public captures missing: {}", v.len());
    v
}

/// Deliberate differences (docs/analyze.md): (file, figure, why). The
/// figure is still printed for the file, not asserted.
const DELIBERATE: &[(&str, &str, &str)] = &[
    (
        "kday4.pcap",
        "tcptrace actual data bytes",
        "an IPv4 total length (820) beyond the 66-byte frame: tcptrace counts the length \
         field's 768 payload bytes; tshark cuts the length to the frame, and so does offload",
    ),
    (
        "bigtcp-ipv4-vxlan-ipv4.pcap",
        "flow directions",
        BIG_TCP_TUNNEL,
    ),
    (
        "bigtcp-ipv4-vxlan-ipv4.pcap",
        "conv,tcp connections",
        BIG_TCP_TUNNEL,
    ),
    (
        "bigtcp-ipv4-vxlan-ipv6.pcap",
        "flow directions",
        BIG_TCP_TUNNEL,
    ),
    (
        "bigtcp-ipv4-vxlan-ipv6.pcap",
        "conv,tcp connections",
        BIG_TCP_TUNNEL,
    ),
    (
        "bigtcp-ipv6-vxlan-ipv4.pcap",
        "flow directions",
        BIG_TCP_TUNNEL,
    ),
    (
        "bigtcp-ipv6-vxlan-ipv4.pcap",
        "conv,tcp connections",
        BIG_TCP_TUNNEL,
    ),
    (
        "bigtcp-ipv6-vxlan-ipv6.pcap",
        "flow directions",
        BIG_TCP_TUNNEL,
    ),
    (
        "bigtcp-ipv6-vxlan-ipv6.pcap",
        "conv,tcp connections",
        BIG_TCP_TUNNEL,
    ),
    (
        "bigtcp-ipv4-geneve-ipv4.pcap",
        "flow directions",
        BIG_TCP_TUNNEL,
    ),
    (
        "bigtcp-ipv4-geneve-ipv4.pcap",
        "conv,tcp connections",
        BIG_TCP_TUNNEL,
    ),
    (
        "bigtcp-ipv4-geneve-ipv6.pcap",
        "flow directions",
        BIG_TCP_TUNNEL,
    ),
    (
        "bigtcp-ipv4-geneve-ipv6.pcap",
        "conv,tcp connections",
        BIG_TCP_TUNNEL,
    ),
    (
        "bigtcp-ipv6-geneve-ipv4.pcap",
        "flow directions",
        BIG_TCP_TUNNEL,
    ),
    (
        "bigtcp-ipv6-geneve-ipv4.pcap",
        "conv,tcp connections",
        BIG_TCP_TUNNEL,
    ),
    (
        "bigtcp-ipv6-geneve-ipv6.pcap",
        "flow directions",
        BIG_TCP_TUNNEL,
    ),
    (
        "bigtcp-ipv6-geneve-ipv6.pcap",
        "conv,tcp connections",
        BIG_TCP_TUNNEL,
    ),
    ("bigtcp-ipv6.pcap", "flow directions", BIG_TCP_IPV6),
    ("bigtcp-ipv6.pcap", "conv,tcp connections", BIG_TCP_IPV6),
];

/// tcpdump's suite (the sweep): BIG TCP in VXLAN and Geneve.
const BIG_TCP_TUNNEL: &str = "BIG TCP in a UDP tunnel, outer and UDP lengths 0: read as the \
    kernel sends it and tcpdump prints it (\"presumed BIG TCP\"); tshark 4.0 stops at the UDP \
    length (\"Bad length value 0 < 8\") and sees no TCP";

/// tcpdump's suite (the sweep): IPv6 BIG TCP without the jumbo option.
const BIG_TCP_IPV6: &str = "IPv6 BIG TCP without a jumbo option, payload length 0: read as \
    the kernel sends it and tcpdump prints it (\"presumed BIG TCP\"); tshark 4.0 calls the \
    IPv6 header malformed and sees no TCP";

const BACKWARDS: &str = "timestamps that go backwards: a flow starts at its first frame and \
    lasts to its latest timestamp, never before the file's first frame or negative (tshark \
    counts from the first frame, so times can be negative)";

/// tcpdump's suite (the sweep): a pcap sub-second field of one second
/// or more.
const INVALID_SUBSECOND: &str = "a pcap sub-second field of one second or more (invalid): read \
    as the value it holds, as libpcap hands it on; tshark 4.0 multiplies it in 32-bit \
    arithmetic, which wraps (2^31 us reads as 0 ns) and turns the file's time order around";

const STOPPED_IN_TCP: &str = "a segment whose TCP header or options tshark could not finish (cut \
    by the capture, or malformed): tshark's packet fields count it (and so does offload), its \
    conversation table leaves it out (packet-tcp.c queues the tap after the options)";

/// A class of deliberate differences: the figures it reads otherwise,
/// and why (docs/analyze.md). Each applies where its condition holds,
/// whichever file.
struct Class {
    figures: &'static [&'static str],
    why: &'static str,
}

/// tshark's conversation table leaves out a segment its dissection
/// stopped in.
const STOPPED_IN_TCP_CLASS: Class = Class {
    figures: &[
        "conv,tcp connections",
        "conv,tcp frames ->",
        "conv,tcp frames <-",
        "conv,tcp bytes ->",
        "conv,tcp bytes <-",
        "conv,tcp start (s)",
        "conv,tcp duration (s)",
    ],
    why: STOPPED_IN_TCP,
};

/// Timestamps that go backwards (tshark's `frame.time_delta` below 0).
const BACKWARDS_CLASS: Class = Class {
    figures: &[
        "duration (s)",
        "first packet (s)",
        "conv,tcp start (s)",
        "conv,tcp duration (s)",
    ],
    why: BACKWARDS,
};

/// tcpdump's suite (the sweep): files with a sub-second field of one
/// second or more.
const INVALID_SUBSECOND_FILES: [&str; 2] = [
    "timestamp_invalid_micro.pcap",
    "timestamp_invalid_nano.pcap",
];

/// tshark decrypts WireGuard with the keys a pcapng Decryption Secrets
/// Block holds (Wireshark's test/captures/wireguard-ping-tcp-dsb.pcapng)
/// and reads the TCP inside; offload decrypts nothing: it counts the
/// encrypted UDP flow (docs/analyze.md).
const DECRYPTED_CLASS: Class = Class {
    figures: &[
        "flow directions",
        "in tshark, not in offload",
        "conv,tcp connections",
        "conv,tcp frames ->",
        "conv,tcp frames <-",
        "conv,tcp bytes ->",
        "conv,tcp bytes <-",
        "conv,tcp start (s)",
        "conv,tcp duration (s)",
    ],
    why: "tshark decrypted it with keys the capture holds; offload decrypts nothing",
};

/// tshark dissects the packet header an sFlow sample copied as a TCP
/// segment; a sampled header is a copy of a packet seen elsewhere, not
/// traffic of this link, so offload leaves it out (docs/analyze.md;
/// Zeek's sflow_expanded.pcap, Suricata's filestore-5408).
const SAMPLED_CLASS: Class = Class {
    figures: DECRYPTED_CLASS.figures,
    why: "a header an sFlow sample copied is not traffic of this link: offload leaves it out",
};

const INVALID_SUBSECOND_CLASS: Class = Class {
    figures: &[
        "timestamps backwards said",
        "duration (s)",
        "conv,tcp duration (s)",
        "rtt samples",
        "rtt min (ms)",
        "rtt max (ms)",
    ],
    why: INVALID_SUBSECOND,
};

const NEGATIVE_RTT: &str = "an ACK timestamped before the segment it acknowledges gives no \
    RTT sample (tshark shows a negative ack_rtt)";

const TCPTRACE_READS_OTHERWISE: &str = "tcptrace reads these frames otherwise than tshark \
    (two VLAN tags, an IPv4 total length of 0 from a TSO capture, IP fragments, a length \
    field beyond the frame: docs/analyze.md); offload agrees with tshark";

/// Collected comparisons of one capture.
struct Check<'a> {
    file: String,
    fails: &'a mut Vec<String>,
    compared: &'a mut BTreeMap<&'static str, (u64, u64)>,
    /// Differences that are deliberate (docs/analyze.md), with why.
    deliberate: Vec<String>,
    /// tshark saw a TCP frame timestamped before the frame it follows.
    backwards: bool,
    /// tshark's dissection stopped inside a TCP header or its options.
    stopped_in_tcp: bool,
    /// tshark read TCP it decrypted.
    decrypted: bool,
    /// tshark read TCP in an sFlow sample.
    sampled: bool,
}

impl Check<'_> {
    /// `ours` against `theirs` within `tol` (absolute).
    fn cmp(&mut self, what: &'static str, dir: &str, ours: f64, theirs: f64, tol: f64) {
        let ok = (ours - theirs).abs() <= tol + 1e-9;
        let classes = [
            (self.backwards, &BACKWARDS_CLASS),
            (self.stopped_in_tcp, &STOPPED_IN_TCP_CLASS),
            (
                INVALID_SUBSECOND_FILES.contains(&self.file.as_str()),
                &INVALID_SUBSECOND_CLASS,
            ),
            (self.decrypted, &DECRYPTED_CLASS),
            (self.sampled, &SAMPLED_CLASS),
        ];
        let why = DELIBERATE
            .iter()
            .find(|d| d.0 == self.file && d.1 == what)
            .map(|d| d.2)
            .or_else(|| {
                classes
                    .iter()
                    .find(|(on, c)| *on && c.figures.contains(&what))
                    .map(|(_, c)| c.why)
            });
        if let (false, Some(why)) = (ok, why) {
            self.deliberate.push(format!(
                "{} {dir}: {what}: offload {ours} vs {theirs}: {why}",
                self.file
            ));
            return;
        }
        let e = self.compared.entry(what).or_default();
        e.0 += 1;
        e.1 += ok as u64;
        if !ok {
            self.fails.push(format!(
                "{} {dir}: {what}: offload {ours} vs {theirs} (tolerance {tol})",
                self.file
            ));
        }
    }
}

impl Check<'_> {
    /// A tcptrace figure: where tcptrace and tshark count the same frames
    /// differently (`tshark`), offload follows tshark, and a difference
    /// from tcptrace is deliberate when offload equals tshark's figure.
    fn cmp_tcptrace(&mut self, what: &'static str, dir: &str, ours: f64, theirs: f64, tshark: f64) {
        if ours != theirs && ours == tshark && tshark != theirs {
            self.deliberate.push(format!(
                "{} {dir}: {what}: offload {ours} vs {theirs}: {TCPTRACE_READS_OTHERWISE}",
                self.file
            ));
            return;
        }
        self.cmp(what, dir, ours, theirs, 0.0);
    }
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

fn show(d: &Dir) -> String {
    format!("{}:{} -> {}:{}", d.0, d.1, d.2, d.3)
}

/// The binary under test: cargo's, or in the sweep `OFFLOAD_SWEEP_BIN`
/// (a copy kept while the tree is rebuilt, or an older build to compare).
fn bin() -> String {
    std::env::var("OFFLOAD_SWEEP_BIN").unwrap_or_else(|_| BIN.to_string())
}

/// `offload analyze --json` of `path`: exit status 0, no panic.
fn analyze(path: &Path) -> Value {
    analyze_within(path, None).unwrap_or_else(|e| panic!("{e}"))
}

/// `offload analyze --json` of `path`, killed after `limit` (a hang, in
/// the sweep): its JSON, or why not (exit status, panic, hang).
fn analyze_within(path: &Path, limit: Option<Duration>) -> Result<Value, String> {
    let out = run_within(
        Command::new(bin()).arg("analyze").arg(path).arg("--json"),
        limit,
    )?;
    let err = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() || err.contains("panicked") {
        return Err(format!(
            "offload analyze {}: {:?}\n{err}",
            path.display(),
            out.status
        ));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("offload analyze --json: {e}"))
}

/// Runs `cmd` to its end, or kills it after `limit`.
fn run_within(cmd: &mut Command, limit: Option<Duration>) -> Result<Output, String> {
    let Some(limit) = limit else {
        return cmd.output().map_err(|e| e.to_string());
    };
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    // Read both pipes while waiting, so a full pipe cannot stall it.
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let to = std::thread::spawn(move || {
        let mut v = Vec::new();
        so.read_to_end(&mut v).map(|_| v)
    });
    let te = std::thread::spawn(move || {
        let mut v = Vec::new();
        se.read_to_end(&mut v).map(|_| v)
    });
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().map_err(|e| e.to_string())? {
            break st;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("hang: {cmd:?} still running after {limit:?}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ok(Output {
        status,
        stdout: to.join().unwrap().map_err(|e| e.to_string())?,
        stderr: te.join().unwrap().map_err(|e| e.to_string())?,
    })
}

/// `offload gro` and `offload gso` run cleanly and write captures tshark
/// reads.
fn transforms_run(path: &Path, tmp: &Path, limit: Option<Duration>) {
    for cmd in ["gro", "gso"] {
        let o = tmp.join(format!("{cmd}.pcapng"));
        let out = run_within(
            Command::new(bin()).arg(cmd).arg(path).arg("-o").arg(&o),
            limit,
        )
        .unwrap_or_else(|e| panic!("offload {cmd} {}: {e}", path.display()));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && !err.contains("panicked"),
            "offload {cmd} {}: {:?}\n{err}",
            path.display(),
            out.status
        );
        let t = Command::new("tshark")
            .args(["-n", "-r"])
            .arg(&o)
            .output()
            .unwrap();
        // An empty output (nothing to write) is not tshark's to read.
        assert!(
            t.status.success() || (limit.is_some() && !o.exists()),
            "tshark cannot read offload {cmd}'s output of {}",
            path.display()
        );
    }
}

/// Compares one capture (`v`, offload's analysis of it); returns the
/// number of directions compared (tshark's or offload's, the larger) and
/// the deliberate differences met.
fn compare(
    path: &Path,
    v: &Value,
    fails: &mut Vec<String>,
    compared: &mut BTreeMap<&'static str, (u64, u64)>,
) -> (usize, Vec<String>) {
    let name = path.file_name().unwrap().to_string_lossy().to_string();
    let ours = tcp_figures::offload_directions(v, &name);
    assert_eq!(v["other_flows"]["flows"].as_u64().unwrap_or(0), 0, "{name}");
    let ts = tcp_figures::tshark_directions(path);
    if ts.is_empty() && ours.is_empty() {
        return (0, Vec::new());
    }
    let tt = tcp_figures::tcptrace_directions(
        path,
        &[
            ("total packets:", "packets"),
            ("actual data bytes:", "payload"),
        ],
    );
    let mut c = Check {
        file: name.clone(),
        fails,
        compared,
        deliberate: Vec::new(),
        backwards: ts.values().any(|t| t.get("backwards") > 0.0),
        stopped_in_tcp: ts.values().any(|t| t.get("stopped_in_tcp") > 0.0),
        decrypted: ts.values().any(|t| t.get("decrypted") > 0.0),
        sampled: ts.values().any(|t| t.get("sampled") > 0.0),
    };
    // Whatever tshark sees going backwards, offload says so (it counts
    // every frame, tshark's count here only TCP ones).
    if c.backwards {
        c.cmp(
            "timestamps backwards said",
            "",
            (num(&v["inputs"][0]["timestamps_backwards"]) > 0.0) as u8 as f64,
            1.0,
            0.0,
        );
    }
    c.cmp(
        "flow directions",
        "",
        ours.len() as f64,
        ts.len() as f64,
        0.0,
    );
    for (d, t) in &ts {
        let dir = show(d);
        let Some(f) = ours.get(d) else {
            c.cmp("in tshark, not in offload", &dir, 0.0, 1.0, 0.0);
            continue;
        };
        // Flow figures: exact; times to the microsecond of pcap (and the
        // rounding of a float).
        c.cmp("packets", &dir, num(&f["packets"]), t.get("packets"), 0.0);
        c.cmp("bytes", &dir, num(&f["bytes"]), t.get("bytes"), 0.0);
        c.cmp(
            "payload bytes",
            &dir,
            num(&f["payload_bytes"]),
            t.get("payload"),
            0.0,
        );
        c.cmp(
            "first packet (s)",
            &dir,
            num(&f["start_s"]),
            t.get("first_s"),
            2e-6,
        );
        c.cmp(
            "duration (s)",
            &dir,
            num(&f["duration_s"]),
            t.get("last_s") - t.get("first_s"),
            2e-6,
        );
        // Wireshark's flags: the same definitions, exact.
        let tcp = &f["tcp"];
        for (k, _) in FLAGS {
            c.cmp(k, &dir, num(&tcp["wireshark"][k]), t.get(k), 0.0);
        }
        // RTT of this direction's data: the ACK RTTs the peer's segments
        // carry; count exact, min and max to 1.5 us (we print ms to 3
        // decimals).
        let mut acks = ts
            .get(&rev(d))
            .map(|p| p.rtt_ms.clone())
            .unwrap_or_default();
        let negative = acks.iter().filter(|r| **r < 0.0).count();
        if negative > 0 {
            acks.retain(|r| *r >= 0.0);
            c.deliberate.push(format!(
                "{name} {dir}: {negative} rtt samples: {NEGATIVE_RTT}"
            ));
        }
        let rtt = &tcp["rtt"];
        c.cmp(
            "rtt samples",
            &dir,
            num(&rtt["samples"]),
            acks.len() as f64,
            0.0,
        );
        if !acks.is_empty() {
            let min = acks.iter().copied().fold(f64::INFINITY, f64::min);
            let max = acks.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            c.cmp("rtt min (ms)", &dir, num(&rtt["min_ms"]), min, 0.0015);
            c.cmp("rtt max (ms)", &dir, num(&rtt["max_ms"]), max, 0.0015);
        }
        c.cmp(
            "segments with SACK",
            &dir,
            num(&tcp["sack"]["acks_with_sack"]),
            t.get("sack"),
            0.0,
        );
        if t.n.contains_key("window_max") {
            c.cmp(
                "window max",
                &dir,
                num(&tcp["window"]["max"]),
                t.get("window_max"),
                0.0,
            );
            c.cmp(
                "window min",
                &dir,
                num(&tcp["window"]["min"]),
                t.get("window_min"),
                0.0,
            );
        }
        // tcptrace where it decodes the connection (not inside tunnels).
        if let Some(r) = tt.get(d) {
            c.cmp_tcptrace(
                "tcptrace total packets",
                &dir,
                num(&f["packets"]),
                r.get("packets"),
                t.get("packets"),
            );
            c.cmp_tcptrace(
                "tcptrace actual data bytes",
                &dir,
                num(&f["payload_bytes"]),
                r.get("payload"),
                t.get("payload"),
            );
        }
    }
    // tshark's conversation table: per connection (all of tshark's
    // streams of one address and port pair together), frames and bytes
    // each way, start and duration.
    let mut conv: BTreeMap<Dir, tcp_figures::Conversation> = BTreeMap::new();
    for mut k in tcp_figures::tshark_conversations(path) {
        let mut d = (k.a.0.clone(), k.a.1, k.b.0.clone(), k.b.1);
        // A later stream of the pair may name its ends the other way
        // round (Suricata's split-handshake captures: the server's SYN
        // starts tshark's second stream): turned to the first's order.
        if rev(&d) != d && conv.contains_key(&rev(&d)) {
            d = rev(&d);
            std::mem::swap(&mut k.frames_a_to_b, &mut k.frames_b_to_a);
            std::mem::swap(&mut k.bytes_a_to_b, &mut k.bytes_b_to_a);
        }
        let Some(e) = conv.get_mut(&d) else {
            conv.insert(d, k);
            continue;
        };
        let add = |x: (u64, u64), y: (u64, u64)| (x.0 + y.0, x.1 + y.1);
        e.frames_a_to_b += k.frames_a_to_b;
        e.bytes_a_to_b = add(e.bytes_a_to_b, k.bytes_a_to_b);
        e.frames_b_to_a += k.frames_b_to_a;
        e.bytes_b_to_a = add(e.bytes_b_to_a, k.bytes_b_to_a);
        let end = (e.start_s + e.duration_s).max(k.start_s + k.duration_s);
        e.start_s = e.start_s.min(k.start_s);
        e.duration_s = end - e.start_s;
    }
    c.cmp(
        "conv,tcp connections",
        "",
        ours.keys()
            .filter(|d| !ours.contains_key(&rev(d)) || *d <= &rev(d))
            .count() as f64,
        conv.len() as f64,
        0.0,
    );
    for (d, k) in &conv {
        let (fab, bab, fba, bba) = (
            k.frames_a_to_b,
            k.bytes_a_to_b,
            k.frames_b_to_a,
            k.bytes_b_to_a,
        );
        let (start, end) = (k.start_s, k.start_s + k.duration_s);
        let dir = show(d);
        // A connection of an address and port with itself (Wireshark's
        // cose_*.pcap, 127.0.0.1:80 both ends) is one flow, its frames
        // "->" in tshark's table.
        let (ab, ba) = (ours.get(d), ours.get(&rev(d)).filter(|_| rev(d) != *d));
        let pk = |f: Option<&&Value>| f.map_or(0.0, |f| num(&f["packets"]));
        let by = |f: Option<&&Value>| f.map_or(0.0, |f| num(&f["bytes"]));
        c.cmp("conv,tcp frames ->", &dir, pk(ab), fab as f64, 0.0);
        c.cmp("conv,tcp frames <-", &dir, pk(ba), fba as f64, 0.0);
        // tshark prints 10 kB and more cut to whole kB: within its range.
        let within = |ours: f64, (lo, hi): (u64, u64)| {
            if ours >= lo as f64 && ours < hi as f64 {
                lo as f64
            } else {
                ours
            }
        };
        c.cmp(
            "conv,tcp bytes ->",
            &dir,
            within(by(ab), bab),
            bab.0 as f64,
            0.0,
        );
        c.cmp(
            "conv,tcp bytes <-",
            &dir,
            within(by(ba), bba),
            bba.0 as f64,
            0.0,
        );
        let span = |f: Option<&&Value>| {
            f.map(|f| {
                (
                    num(&f["start_s"]),
                    num(&f["start_s"]) + num(&f["duration_s"]),
                )
            })
        };
        let (s, e) = [span(ab), span(ba)]
            .into_iter()
            .flatten()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |a, b| {
                (a.0.min(b.0), a.1.max(b.1))
            });
        // tshark prints the start to the ns and the duration to 0.1 ms.
        c.cmp("conv,tcp start (s)", &dir, s, start, 2e-6);
        c.cmp("conv,tcp duration (s)", &dir, e - s, end - start, 6e-5);
    }
    (ts.len().max(ours.len()), c.deliberate)
}

#[test]
fn analyze_agrees_with_tshark_and_tcptrace_on_public_captures() {
    if let Ok(suites) = std::env::var("OFFLOAD_SWEEP") {
        return sweep(&suites);
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut fails = Vec::new();
    let mut compared = BTreeMap::new();
    let mut dirs = 0;
    let files = captures();
    for p in &files {
        let (n, deliberate) = compare(p, &analyze(p), &mut fails, &mut compared);
        dirs += n;
        for d in deliberate {
            eprintln!("deliberate: {d}");
        }
        transforms_run(p, tmp.path(), None);
    }
    eprintln!("{} captures, {dirs} flow directions:", files.len());
    for (what, (n, ok)) in &compared {
        eprintln!("  {what:<32} {ok:>5} of {n:>5} agree");
    }
    assert!(dirs >= 100, "too few directions compared: {dirs}");
    assert!(
        fails.is_empty(),
        "{} differences:\n{}",
        fails.len(),
        fails.join("\n")
    );
}

/// The captures of a suite directory, recursively: pcap and pcapng by
/// their usual names (tcpdump's tests also name them `.cap`).
fn suite_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("sweep: {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            suite_files(&p, out);
        } else if p
            .extension()
            .is_some_and(|e| e == "pcap" || e == "pcapng" || e == "cap")
        {
            out.push(p);
        }
    }
}

/// The text of a caught panic.
fn panic_text(e: &(dyn std::any::Any + Send)) -> String {
    e.downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// What the sweep found in one file.
#[derive(Default)]
struct Swept {
    /// The lines printed for the file.
    text: String,
    /// 0 no TCP, 1 TCP and agreeing, 2 TCP and differing, 3 not
    /// readable by tshark (nor read by offload).
    kind: usize,
    /// It agrees only with deliberate differences named.
    deliberate: bool,
    compared: BTreeMap<&'static str, (u64, u64)>,
    errors: Vec<String>,
}

/// One file of the sweep: `offload analyze`, `gro` and `gso` must end
/// within `limit` without a panic; a file tshark reads must be analysed
/// (not refused); its figures are compared as for the committed set.
fn sweep_one(name: &str, p: &Path, tmp: &Path, limit: Duration) -> Swept {
    use std::fmt::Write;
    let mut r = Swept::default();
    let mut cut = None;
    let v = match analyze_within(p, Some(limit)) {
        Ok(v) => v,
        Err(e) if damaged_at(&e).is_some() => {
            match good_part(p, tmp, limit, damaged_at(&e).unwrap_or_default()) {
                Ok((v, good, note)) => {
                    let _ = writeln!(r.text, "{name}: {note}");
                    cut = Some(good);
                    v
                }
                Err(why) => {
                    let _ = writeln!(r.text, "{name}: ERROR {why}\n{e}");
                    r.errors.push(format!("{name}: {why}\n{e}"));
                    return r;
                }
            }
        }
        Err(e) => {
            let clean = e.contains("offload: error:") && !e.contains("panicked");
            let tshark_reads = Command::new("tshark")
                .args(["-n", "-q", "-r"])
                .arg(p)
                .output()
                .is_ok_and(|o| o.status.success());
            if clean && !tshark_reads {
                let why = e.lines().nth(1).unwrap_or("");
                let _ = writeln!(r.text, "{name}: refused, as by tshark: {why}");
                r.kind = 3;
            } else {
                let _ = writeln!(r.text, "{name}: ERROR {e}");
                r.errors.push(format!("{name}: {e}"));
            }
            return r;
        }
    };
    // A damaged capture is compared by its good part (`good_part`).
    let p = cut.as_deref().unwrap_or(p);
    if let Err(e) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        transforms_run(p, tmp, Some(limit))
    })) {
        let e = panic_text(&*e);
        let _ = writeln!(r.text, "{name}: ERROR {e}");
        r.errors.push(format!("{name}: {e}"));
    }
    let mut fails = Vec::new();
    let mut mine = BTreeMap::new();
    let (dirs, deliberate) = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        compare(p, &v, &mut fails, &mut mine)
    })) {
        Ok(n) => n,
        Err(e) => {
            let e = panic_text(&*e);
            if e.starts_with("tshark -r") {
                let _ = writeln!(r.text, "{name}: tshark cannot read it");
                r.kind = 3;
                return r;
            }
            fails.push(format!("comparison stopped: {e}"));
            (1, Vec::new())
        }
    };
    if dirs == 0 && fails.is_empty() {
        let _ = writeln!(r.text, "{name}: no TCP");
        return r;
    }
    let (n, ok) = mine.values().fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    r.compared = mine;
    // Deliberate differences are named, never folded into "agrees".
    let why = if deliberate.is_empty() {
        String::new()
    } else {
        format!(", {} deliberate differences", deliberate.len())
    };
    r.deliberate = !deliberate.is_empty();
    if fails.is_empty() {
        r.kind = 1;
        let _ = writeln!(
            r.text,
            "{name}: agrees, {dirs} directions, {ok} of {n} figures{why}"
        );
    } else {
        r.kind = 2;
        let _ = writeln!(
            r.text,
            "{name}: DIFFERS, {dirs} directions, {ok} of {n} figures agree{why}"
        );
        for f in fails.iter().take(8) {
            let _ = writeln!(r.text, "    {f}");
        }
        if fails.len() > 8 {
            let _ = writeln!(r.text, "    ... {} more", fails.len() - 8);
        }
    }
    for d in deliberate.iter().take(4) {
        let _ = writeln!(r.text, "    deliberate: {d}");
    }
    if deliberate.len() > 4 {
        let _ = writeln!(r.text, "    ... {} more deliberate", deliberate.len() - 4);
    }
    r
}

/// The byte offset of the damaged record named by `offload analyze`'s
/// error `e` ("offload analyze: FILE: frame N at byte B: FIELD ..."), or
/// None when `e` is a panic, a hang or another error.
fn damaged_at(e: &str) -> Option<usize> {
    if e.contains("panicked") || e.starts_with("hang:") {
        return None;
    }
    e.lines()
        .filter(|l| l.starts_with("offload analyze: "))
        .find_map(|l| l.split(" at byte ").nth(1)?.split(':').next()?.parse().ok())
}

/// A capture damaged after its first frames (a record longer than the
/// rest of the file, as some of Suricata's tests are cut): tshark and
/// tcpdump print the frames before the damage and fail; `offload analyze`
/// must report the same frames, exit with status 1 and name the file,
/// frame and field. Writes the good part (the file cut at the damaged
/// record's first byte `at`) into `tmp`, for the comparison as a whole
/// capture; gives offload's report, that copy and a line for the sweep.
fn good_part(
    p: &Path,
    tmp: &Path,
    limit: Duration,
    at: usize,
) -> Result<(Value, PathBuf, String), String> {
    let tshark_reads = Command::new("tshark")
        .args(["-n", "-q", "-r"])
        .arg(p)
        .output()
        .is_ok_and(|o| o.status.success());
    if tshark_reads {
        return Err("offload stops at a record tshark reads".to_string());
    }
    let out = run_within(
        Command::new(bin()).arg("analyze").arg(p).arg("--json"),
        Some(limit),
    )?;
    if out.status.code() != Some(1) {
        return Err(format!("exit status {:?}, not 1", out.status));
    }
    let v: Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("no report of the frames before the damage: {e}"))?;
    let bytes = std::fs::read(p).map_err(|e| e.to_string())?;
    let dir = tmp.join("good-part");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let good = dir.join(p.file_name().unwrap_or_default());
    std::fs::write(&good, &bytes[..at.min(bytes.len())]).map_err(|e| e.to_string())?;
    let frames = num(&v["inputs"][0]["frames"]);
    Ok((
        v,
        good,
        format!("damaged at byte {at}, as tshark and tcpdump say; the {frames} frames before it compared:"),
    ))
}

/// The sweep (module doc): `suites` is `NAME=DIR ...`, a name may
/// repeat; `OFFLOAD_SWEEP_JOBS` files at a time (default 2). Per file
/// see [`sweep_one`]; a TCP capture "agrees" when every figure does.
fn sweep(suites: &str) {
    const LIMIT: Duration = Duration::from_secs(120);
    let jobs: usize = std::env::var("OFFLOAD_SWEEP_JOBS")
        .ok()
        .and_then(|j| j.parse().ok())
        .unwrap_or(2)
        .max(1);
    // Panics of the comparison are caught and reported per file.
    std::panic::set_hook(Box::new(|_| {}));
    let mut files = Vec::new();
    for spec in suites.split_whitespace() {
        let (suite, dir) = spec
            .split_once('=')
            .unwrap_or_else(|| panic!("sweep: {spec:?} is not NAME=DIR"));
        let mut v = Vec::new();
        suite_files(Path::new(dir), &mut v);
        for p in v {
            let rel = p.strip_prefix(dir).unwrap_or(&p).display().to_string();
            files.push((suite.to_string(), format!("{suite} {rel}"), p));
        }
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<std::sync::Mutex<Option<Swept>>> =
        files.iter().map(|_| Default::default()).collect();
    std::thread::scope(|sc| {
        for _ in 0..jobs {
            sc.spawn(|| {
                let tmp = tempfile::tempdir().unwrap();
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some((_, name, p)) = files.get(i) else {
                        break;
                    };
                    let r = sweep_one(name, p, tmp.path(), LIMIT);
                    *results[i].lock().unwrap() = Some(r);
                    if (i + 1).is_multiple_of(100) {
                        eprintln!("sweep: {} of {} files", i + 1, files.len());
                    }
                }
            });
        }
    });
    let _ = std::panic::take_hook();
    let mut errors = Vec::new();
    let mut compared: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    // Per suite: files, TCP captures, agreeing on every figure, not
    // readable by tshark, agreeing with deliberate differences named.
    let mut totals: BTreeMap<&str, [usize; 5]> = BTreeMap::new();
    for ((suite, _, _), r) in files.iter().zip(results) {
        let r = r.into_inner().unwrap().expect("every file swept");
        print!("{}", r.text);
        errors.extend(r.errors);
        for (k, (a, b)) in r.compared {
            let e = compared.entry(k).or_default();
            e.0 += a;
            e.1 += b;
        }
        let t = totals.entry(suite).or_default();
        t[0] += 1;
        match r.kind {
            1 => {
                [t[1], t[2]] = [t[1] + 1, t[2] + 1];
                t[4] += r.deliberate as usize;
            }
            2 => t[1] += 1,
            3 => t[3] += 1,
            _ => {}
        }
    }
    println!("\nfigures over every TCP capture:");
    for (what, (n, ok)) in &compared {
        println!("  {what:<32} {ok:>6} of {n:>6} agree");
    }
    println!(
        "\nsuite      files  TCP captures  all figures agree  (with deliberate differences)  not readable by tshark"
    );
    for (s, t) in &totals {
        println!(
            "{s:<10} {:>5}  {:>12}  {:>17}  {:>29}  {:>22}",
            t[0], t[1], t[2], t[4], t[3]
        );
    }
    assert!(
        errors.is_empty(),
        "{} errors, panics or hangs:\n{}",
        errors.len(),
        errors.join("\n")
    );
}
