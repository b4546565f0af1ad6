//! How `offload analyze --json`'s TCP figures map to tshark's fields and
//! tcptrace's lines, shared by the differential tests (kernel-made
//! captures in `analyze_differential.rs`, public captures in
//! `public_captures.rs`, other link types in `analyze_link_types.rs`):
//! one mapping, so all compare the same thing.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use super::capture::tshark;

/// Each of Wireshark's per-segment flags: the name under
/// `flows[].tcp.wireshark` and tshark's field.
pub const FLAGS: [(&str, &str); 14] = [
    ("retransmissions", "tcp.analysis.retransmission"),
    ("fast_retransmissions", "tcp.analysis.fast_retransmission"),
    (
        "spurious_retransmissions",
        "tcp.analysis.spurious_retransmission",
    ),
    ("out_of_order", "tcp.analysis.out_of_order"),
    ("lost_segments", "tcp.analysis.lost_segment"),
    ("acked_unseen_segments", "tcp.analysis.ack_lost_segment"),
    ("duplicate_acks", "tcp.analysis.duplicate_ack"),
    ("zero_windows", "tcp.analysis.zero_window"),
    ("zero_window_probes", "tcp.analysis.zero_window_probe"),
    (
        "zero_window_probe_acks",
        "tcp.analysis.zero_window_probe_ack",
    ),
    ("keep_alives", "tcp.analysis.keep_alive"),
    ("keep_alive_acks", "tcp.analysis.keep_alive_ack"),
    ("window_updates", "tcp.analysis.window_update"),
    ("window_full", "tcp.analysis.window_full"),
];

/// One flow direction by its (innermost) addresses and ports, as
/// `offload analyze` names it (`src`, `sport`, `dst`, `dport`).
pub type Dir = (String, u16, String, u16);

/// The reverse direction.
pub fn rev(d: &Dir) -> Dir {
    (d.2.clone(), d.3, d.0.clone(), d.1)
}

/// `offload analyze --json`'s TCP flow records by direction, each
/// direction asserted to be one record (`what` names the capture).
pub fn offload_directions<'a>(report: &'a Value, what: &str) -> BTreeMap<Dir, &'a Value> {
    let mut ours = BTreeMap::new();
    for f in report["flows"].as_array().expect("flows[]") {
        if f["protocol"] != "tcp" {
            continue;
        }
        let d = (
            f["src"].as_str().unwrap().to_string(),
            f["sport"].as_u64().unwrap() as u16,
            f["dst"].as_str().unwrap().to_string(),
            f["dport"].as_u64().unwrap() as u16,
        );
        let text = format!("{what}: {}:{} -> {}:{}", d.0, d.1, d.2, d.3);
        assert!(ours.insert(d, f).is_none(), "{text} twice");
    }
    ours
}

/// Figures of one direction, by name.
#[derive(Debug, Default, Clone)]
pub struct Figures {
    pub n: BTreeMap<&'static str, f64>,
    /// `ack_rtt` of the ACKs this direction sent (ms), for the peer's RTT.
    pub rtt_ms: Vec<f64>,
}

impl Figures {
    pub fn get(&self, k: &str) -> f64 {
        self.n.get(k).copied().unwrap_or(0.0)
    }

    /// The `pct`-th percentile (0..100, nearest rank below) of the ACK
    /// RTT samples this direction sent, in ms; `None` without samples.
    pub fn rtt_percentile_ms(&self, pct: usize) -> Option<f64> {
        let mut r = self.rtt_ms.clone();
        r.sort_by(f64::total_cmp);
        r.get(r.len() * pct / 100).copied()
    }

    fn add(&mut self, k: &'static str, x: f64) {
        *self.n.entry(k).or_default() += x;
    }
}

/// tshark's per-segment fields, summed per direction: packets, frame
/// bytes, TCP payload, first and last timestamp (relative to the file's
/// first frame), the window of non-SYN non-RST segments (min, max), the
/// largest `tcp.analysis.bytes_in_flight`,
/// frames with SACK blocks, frames marked CE and with ECE and with CWR,
/// each of [`FLAGS`], and the ACK RTT samples.
/// ICMP errors quoting a TCP header are left out (they are not the
/// connection's segments); a tunnelled segment counts under its inner
/// addresses.
pub fn tshark_directions(path: &Path) -> BTreeMap<Dir, Figures> {
    let fields = [
        "frame.protocols",
        "ip.src",
        "ip.dst",
        "ipv6.src",
        "ipv6.dst",
        "tcp.srcport",
        "tcp.dstport",
        "tcp.flags.syn",
        "tcp.flags.reset",
        "tcp.window_size",
        "tcp.analysis.ack_rtt",
        "tcp.options.sack_le",
        "frame.len",
        "tcp.len",
        "frame.time_relative",
        "frame.time_delta",
        "_ws.short",
        "_ws.malformed",
        "ipv6.opt.mipv6.home_address",
        "ipv6.routing.type",
        "ipv6.routing.segleft",
        "ipv6.routing.src.addr",
        "tcp.hdr_len",
        "tcp.analysis.bytes_in_flight",
        "ip.dsfield.ecn",
        "ipv6.tclass.ecn",
        "tcp.flags.ece",
        "tcp.flags.cwr",
    ];
    let mut args: Vec<&str> = vec![
        "-n",
        "-Y",
        "tcp && !icmp && !icmpv6",
        "-T",
        "fields",
        "-E",
        "separator=|",
        "-E",
        "aggregator=;",
    ];
    for f in fields.iter().chain(FLAGS.iter().map(|f| &f.1)) {
        args.extend(["-e", f]);
    }
    let out = tshark(path, &args);
    let mut m: BTreeMap<Dir, Figures> = BTreeMap::new();
    // A field occurs once per layer that has it; the first TCP layer is
    // the connection's segment (a TCP header inside its payload, as an
    // OpenFlow packet-in carries, is not), and the network header just
    // before it names the direction: a tunnel's inner one, not a packet
    // inside the payload.
    let nth = |s: &str, i: usize| s.split(';').nth(i).unwrap_or("").to_string();
    let first = |s: &str| nth(s, 0);
    let set = |s: &str| !s.is_empty() && s != "0" && s != "False";
    for line in out.lines() {
        let v: Vec<&str> = line.split('|').collect();
        if v.len() < fields.len() + FLAGS.len() || v[5].is_empty() {
            continue;
        }
        let layers: Vec<&str> = v[0].split(':').collect();
        let tcp_at = layers
            .iter()
            .position(|p| *p == "tcp")
            .unwrap_or(layers.len());
        let before_tcp = &layers[..tcp_at];
        let v6 = before_tcp
            .iter()
            .rfind(|p| **p == "ip" || **p == "ipv6")
            .is_some_and(|p| *p == "ipv6");
        let name = if v6 { "ipv6" } else { "ip" };
        let at = before_tcp.iter().filter(|p| **p == name).count().max(1) - 1;
        let (src, dst) = if v6 { (v[3], v[4]) } else { (v[1], v[2]) };
        let (Ok(sp), Ok(dp)) = (first(v[5]).parse::<u16>(), first(v[6]).parse::<u16>()) else {
            continue;
        };
        let (mut src, mut dst) = (nth(src, at), nth(dst, at));
        // The addresses tshark's conversations take (packet-ipv6.c): a
        // Home Address option's as the source, a Type 0 routing header's
        // last address as the destination while segments are left (the
        // innermost such header's).
        let last = |s: &str| s.rsplit(';').next().unwrap_or("").to_string();
        if v6 {
            if !v[18].is_empty() {
                src = last(v[18]);
            }
            if last(v[19]) == "0" && set(&last(v[20])) && !v[21].is_empty() {
                dst = last(v[21]);
            }
        }
        let key = (src, sp, dst, dp);
        let f = m.entry(key).or_default();
        f.add("packets", 1.0);
        f.add("bytes", v[12].parse().unwrap_or(0.0));
        f.add("payload", first(v[13]).parse().unwrap_or(0.0));
        let t: f64 = v[14].parse().unwrap_or(0.0);
        if v[15].parse::<f64>().is_ok_and(|d| d < 0.0) {
            f.add("backwards", 1.0);
        }
        // tshark's dissection stopped inside the TCP header or its
        // options (cut by the capture, or malformed): packet-tcp.c queues
        // its tap after the options, so the conversation table leaves the
        // segment out while these fields keep it.
        // So does a bogus header length (below 20: "Bogus TCP header
        // length", after the sequence analysis).
        if [v[16], v[17]]
            .iter()
            .any(|e| e.contains(": TCP") || e.contains(": MPTCP"))
            || first(v[22]).parse::<u32>().is_ok_and(|h| h < 20)
        {
            f.add("stopped_in_tcp", 1.0);
        }
        // tshark decrypted the packet around this segment (WireGuard
        // with its keys in a pcapng Decryption Secrets Block).
        if before_tcp.contains(&"wg") {
            f.add("decrypted", 1.0);
        }
        // A packet header an sFlow sample copied (seen elsewhere).
        if before_tcp.contains(&"sflow") {
            f.add("sampled", 1.0);
        }
        f.n.entry("first_s").or_insert(t);
        f.n.insert("last_s", t);
        if !set(&first(v[7])) && !set(&first(v[8])) {
            if let Ok(w) = first(v[9]).parse::<f64>() {
                let max = f.n.get("window_max").map_or(w, |m| m.max(w));
                f.n.insert("window_max", max);
                let min = f.n.get("window_min").map_or(w, |m| m.min(w));
                f.n.insert("window_min", min);
            }
        }
        if let Ok(r) = first(v[10]).parse::<f64>() {
            f.rtt_ms.push(r * 1e3);
        }
        if let Ok(b) = first(v[23]).parse::<f64>() {
            let max = f.n.get("bytes_in_flight_max").map_or(b, |m| m.max(b));
            f.n.insert("bytes_in_flight_max", max);
        }
        if !v[11].is_empty() {
            f.add("sack", 1.0);
        }
        // ECN: the codepoint of the network header before the TCP one
        // (a tunnel's inner), the first TCP layer's flags.
        let ecn = nth(if v6 { v[25] } else { v[24] }, at);
        f.add("ecn_ce", f64::from(u8::from(ecn == "3")));
        f.add("ece", f64::from(u8::from(set(&first(v[26])))));
        f.add("cwr", f64::from(u8::from(set(&first(v[27])))));
        for (i, (name, _)) in FLAGS.iter().enumerate() {
            if !v[fields.len() + i].is_empty() {
                f.add(name, 1.0);
            }
        }
    }
    m
}

/// One conversation of `tshark -q -z conv,tcp`: frames and bytes each
/// way, relative start and duration (s). `a` is the side tshark lists
/// first. tshark 4.0 prints a byte count of 10,000 or more in kB or MB,
/// cut to an integer: the bytes are then a range `[lo, hi)`.
#[derive(Debug, Clone)]
pub struct Conversation {
    pub a: (String, u16),
    pub b: (String, u16),
    pub frames_a_to_b: u64,
    pub bytes_a_to_b: (u64, u64),
    pub frames_b_to_a: u64,
    pub bytes_b_to_a: (u64, u64),
    pub start_s: f64,
    pub duration_s: f64,
}

/// Splits tshark's `address:port` (IPv6 addresses hold colons too).
fn addr_port(s: &str) -> Option<(String, u16)> {
    let (a, p) = s.rsplit_once(':')?;
    Some((a.trim_matches(['[', ']']).to_string(), p.parse().ok()?))
}

/// `tshark -q -z conv,tcp`: tshark's own conversation table.
pub fn tshark_conversations(path: &Path) -> Vec<Conversation> {
    let out = tshark(path, &["-n", "-q", "-z", "conv,tcp"]);
    let mut v = Vec::new();
    for line in out.lines() {
        let t: Vec<&str> = line.split_whitespace().collect();
        // A <-> B  frames bytes unit  frames bytes unit  frames bytes unit
        //          start duration ("<-" is B to A, listed first).
        if t.len() != 14 || t[1] != "<->" {
            continue;
        }
        let (Some(a), Some(b)) = (addr_port(t[0]), addr_port(t[2])) else {
            continue;
        };
        let bytes = |n: &str, unit: &str| -> Option<(u64, u64)> {
            let n: u64 = n.parse().ok()?;
            let k = match unit {
                "bytes" => return Some((n, n + 1)),
                "kB" => 1_000,
                "MB" => 1_000_000,
                "GB" => 1_000_000_000,
                _ => return None,
            };
            Some((n * k, (n + 1) * k))
        };
        let (Some(ba), Some(ab)) = (bytes(t[4], t[5]), bytes(t[7], t[8])) else {
            continue;
        };
        v.push(Conversation {
            a,
            b,
            frames_b_to_a: t[3].parse().unwrap_or(0),
            bytes_b_to_a: ba,
            frames_a_to_b: t[6].parse().unwrap_or(0),
            bytes_a_to_b: ab,
            start_s: t[12].parse().unwrap_or(f64::NAN),
            duration_s: t[13].parse().unwrap_or(f64::NAN),
        });
    }
    v
}

/// tcptrace -l -r -n: each direction's figures named as in `wanted`
/// (tcptrace's label, our name), summed over tcptrace's connections of
/// one address and port pair (a label starting "max " takes the largest).
/// Only figures that add up (or maxima) belong here.
pub fn tcptrace_directions(path: &Path, wanted: &[(&str, &'static str)]) -> BTreeMap<Dir, Figures> {
    let out = Command::new("tcptrace")
        .args(["-l", "-r", "-n"])
        .arg(path)
        .output()
        .expect("tcptrace (apt-get install tcptrace)");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut m: BTreeMap<Dir, Figures> = BTreeMap::new();
    let (mut a, mut b) = (None, None);
    for line in text.lines() {
        let t = line.trim();
        // tcptrace names the endpoints with letters across connections
        // (a and b, then c and d, ..., aa and ab): the first "host" line
        // of a connection is its first endpoint, the second its other.
        if t.starts_with("TCP connection ") {
            (a, b) = (None, None);
        } else if let Some((_, h)) = t
            .strip_prefix("host ")
            .and_then(|h| h.split_once(':'))
            .filter(|(l, _)| l.chars().all(|c| c.is_ascii_lowercase()))
        {
            if a.is_none() {
                a = addr_port(h.trim());
            } else {
                b = addr_port(h.trim());
            }
        }
        let (Some(ha), Some(hb)) = (&a, &b) else {
            continue;
        };
        for (label, name) in wanted {
            // A line opens with its label ("sack pkts sent:" is not
            // "dsack pkts sent:").
            if !t.starts_with(label) {
                continue;
            }
            let parts: Vec<&str> = t.split(label).collect();
            if parts.len() == 3 {
                let num = |s: &str| {
                    s.split_whitespace()
                        .next()
                        .and_then(|x| x.parse::<f64>().ok())
                };
                if let (Some(x), Some(y)) = (num(parts[1]), num(parts[2])) {
                    // tcptrace splits a reused address and port pair into
                    // several connections: their figures add up.
                    // A maximum is the largest of them.
                    let ab = (ha.0.clone(), ha.1, hb.0.clone(), hb.1);
                    let put = |f: &mut Figures, v: f64| {
                        if label.starts_with("max ") {
                            let m = f.n.entry(name).or_insert(v);
                            *m = m.max(v);
                        } else {
                            f.add(name, v);
                        }
                    };
                    put(m.entry(rev(&ab)).or_default(), y);
                    put(m.entry(ab).or_default(), x);
                }
            }
        }
    }
    m
}
