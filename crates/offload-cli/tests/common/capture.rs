//! The established tools on the capture side: tcpdump writing the captures
//! the kernel-driven tests compare on, and tshark reading captures back.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use offload_sys::NetNs;

use super::netns::command_in;

/// A running tcpdump writing every frame of one device to a file.
#[derive(Debug)]
pub struct Tcpdump {
    child: Child,
    /// tcpdump's stderr lines after its "listening on" line: its counts,
    /// on request (SIGUSR1) and on exit.
    lines: Receiver<String>,
    path: PathBuf,
}

/// tcpdump's counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpdumpStats {
    /// Frames written to the file.
    pub captured: u64,
    /// Frames the kernel queued for tcpdump, or dropped because its ring
    /// was full (libpcap's `ps_recv`: `PACKET_STATISTICS` `tp_packets`,
    /// which counts `tp_drops` too).
    pub received_by_filter: u64,
    /// Frames the kernel dropped because the ring was full (`tp_drops`).
    pub dropped_by_kernel: u64,
}

impl TcpdumpStats {
    /// Reads the three counts from tcpdump's text: the one-line form
    /// SIGUSR1 prints ("N packets captured, N packets received by filter,
    /// N packets dropped by kernel") or the three lines printed on exit.
    fn parse(text: &str) -> Option<TcpdumpStats> {
        let count = |what: &str| {
            let at = text.find(what)?;
            text[..at].split_whitespace().last()?.parse().ok()
        };
        Some(TcpdumpStats {
            captured: count(" packets captured")?,
            received_by_filter: count(" packets received by filter")?,
            dropped_by_kernel: count(" packets dropped by kernel")?,
        })
    }
}

impl Tcpdump {
    /// Starts tcpdump on `dev` inside `ns`, writing whole frames that
    /// match `filter` to `path`, and returns once it is listening: tcpdump
    /// prints "listening on" after its socket is bound with the filter
    /// set, so every frame from then on reaches its ring.
    ///
    /// No `--immediate-mode`: with it libpcap uses `TPACKET_V2`, whose
    /// fixed slots are sized for the largest frame the device could
    /// deliver (64 KiB on a veth with GSO), so the 64 MB buffer holds 1,023
    /// frames: a burst of 5,000 1,442-byte frames while tcpdump was stopped
    /// lost 3,977 (`-B 65536 --immediate-mode`), and a loaded run lost up
    /// to 1,433 of 3,640. Without it libpcap uses `TPACKET_V3`, whose
    /// blocks pack frames of any size: the same burst lost none. Its
    /// frames wait in a block until the block fills or its timeout (1 s)
    /// passes, which [`Tcpdump::stop`] waits for.
    pub fn start(ns: &NetNs, dev: &str, path: &Path, filter: &[&str]) -> Tcpdump {
        Tcpdump::start_snap(ns, dev, path, filter, 0)
    }

    /// [`Tcpdump::start`] with tcpdump's snap length `snaplen` (`-s`; 0
    /// keeps whole frames): a header-only capture as taken at line rate.
    pub fn start_snap(
        ns: &NetNs,
        dev: &str,
        path: &Path,
        filter: &[&str],
        snaplen: u32,
    ) -> Tcpdump {
        let snap = snaplen.to_string();
        let mut child = command_in(
            ns,
            "tcpdump",
            &["-i", dev, "-s", &snap, "-B", "65536", "-U", "-w"],
        )
        .arg(path)
        .args(filter)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tcpdump (apt-get install tcpdump)");
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        while err.read_line(&mut line).unwrap() > 0 && !line.contains("listening") {}
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in err.lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Tcpdump {
            child,
            lines,
            path: path.to_path_buf(),
        }
    }

    /// tcpdump's counts now, as it prints them on SIGUSR1.
    pub fn stats(&self) -> TcpdumpStats {
        super::signal(&self.child, libc::SIGUSR1);
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(10))
                .unwrap_or_else(|e| panic!("tcpdump on {}: no counts ({e})", self.path.display()));
            if let Some(s) = TcpdumpStats::parse(&line) {
                return s;
            }
        }
    }

    /// Waits until tcpdump has written every frame it received, and the
    /// count stayed the same for 300 ms (the last ACKs of a connection
    /// may still be crossing a userspace hop): then nothing is left in the
    /// ring for a stop to cut off.
    ///
    /// Counts that stay still for [`STILL`] with no kernel drop but
    /// `captured` below `received by filter` are accepted too, and the
    /// frames left are printed: a CI trial saw a receiver's tcpdump keep
    /// 3629 of 3630 (and 560 of 561) for 20 s with 0 drops. Not a block
    /// the retire timer left open: since 6.18 that timer is an hrtimer
    /// that re-arms itself every `tp_retire_blk_tov` (tcpdump asks for
    /// its 1 s timeout) and retires any block holding frames while the
    /// queue is not frozen (`prb_retire_rx_blk_timer_expired`,
    /// net/packet/af_packet.c; before 6.18 a `timer_list` refreshed on
    /// each block opened, same rule), and a frozen queue counts its
    /// losses in `tp_drops`. Nor frames queued before the filter: a
    /// 70,000-frame/s flood the filter rejects, sent while tcpdump
    /// started, left "0 packets received by filter" in 5 of 5 trials.
    /// The cause is not known; a kernel drop is never accepted.
    pub fn drain(&self) -> TcpdumpStats {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut last = None;
        let mut still_since = Instant::now();
        loop {
            std::thread::sleep(Duration::from_millis(300));
            let s = self.stats();
            if last != Some(s) {
                still_since = Instant::now();
            }
            if s.captured == s.received_by_filter && last == Some(s) {
                return s;
            }
            if s.dropped_by_kernel == 0
                && s.captured < s.received_by_filter
                && still_since.elapsed() >= STILL
            {
                eprintln!(
                    "tcpdump on {}: {} frame(s) received but never written, \
                     counts still for {STILL:?} with no kernel drop: {s:?}",
                    self.path.display(),
                    s.received_by_filter - s.captured
                );
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "tcpdump on {}: not drained after 20 s: {s:?}",
                self.path.display()
            );
            last = Some(s);
        }
    }

    /// Drains tcpdump, stops it as Ctrl-C would and returns its final
    /// counts, asserting that the capture is complete: a frame the capture
    /// lost would be a gap no tool could explain, and every figure compared
    /// on the capture would be wrong for a reason outside the analysis.
    /// The only frames allowed missing are those [`Tcpdump::drain`] found
    /// received and never written (at most that many); never a kernel
    /// drop.
    pub fn stop(mut self) -> TcpdumpStats {
        let drained = self.drain();
        let unwritten = drained.received_by_filter - drained.captured;
        super::signal(&self.child, libc::SIGINT);
        self.child.wait().unwrap();
        // The reader thread ends at tcpdump's end of stderr.
        let text: Vec<String> = self.lines.iter().collect();
        let stats = TcpdumpStats::parse(&text.join("\n"))
            .unwrap_or_else(|| panic!("tcpdump on {}: no counts in {text:?}", self.path.display()));
        eprintln!("tcpdump {}: {stats:?}", self.path.display());
        assert!(
            stats.dropped_by_kernel == 0
                && stats.captured <= stats.received_by_filter
                && stats.received_by_filter - stats.captured <= unwritten,
            "tcpdump on {}: capture incomplete: {stats:?} ({unwritten} unwritten when drained)",
            self.path.display()
        );
        stats
    }
}

/// How long counts with frames received but not written must stay the
/// same before [`Tcpdump::drain`] accepts them: three retire periods of
/// tcpdump's 1 s block timeout.
const STILL: Duration = Duration::from_secs(3);

/// `tshark -r CAPTURE ARGS`, asserted to have exited 0: its stdout.
/// tshark is the established reader the figures are checked against, so a
/// missing tshark fails the test, never skips it.
pub fn tshark(capture: &Path, args: &[&str]) -> String {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(capture)
        .args(args)
        .output()
        .expect("tshark (installed by .ci/install)");
    assert!(
        out.status.success(),
        "tshark -r {} {args:?}: {}",
        capture.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The frames tshark reads from `capture` given on its stdin (`tshark -r -`):
/// one summary line each.
pub fn tshark_frames_of(capture: &[u8]) -> usize {
    let mut cmd = Command::new("tshark");
    cmd.args(["-r", "-"]);
    let out = super::output_with_stdin(cmd, capture);
    assert!(
        out.status.success(),
        "tshark -r -: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).lines().count()
}
