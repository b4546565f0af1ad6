//! The established tools on the capture side: tcpdump writing the captures
//! the kernel-driven tests compare on, and tshark reading captures back.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::Duration;

use offload_sys::NetNs;

use super::netns::command_in;

/// A running tcpdump writing every frame of one device to a file.
#[derive(Debug)]
pub struct Tcpdump {
    child: Child,
    /// tcpdump's stderr after its "listening on" line: the statistics it
    /// prints on exit.
    stderr: JoinHandle<String>,
    path: PathBuf,
}

/// The counts tcpdump prints on exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpdumpStats {
    /// Frames written to the file.
    pub captured: u64,
    /// Frames the kernel dropped because tcpdump's ring was full
    /// (libpcap's `ps_drop`, the socket's `PACKET_STATISTICS` `tp_drops`).
    pub dropped_by_kernel: u64,
}

impl Tcpdump {
    /// Starts tcpdump on `dev` inside `ns`, writing whole frames that
    /// match `filter` to `path`, and returns once it is listening.
    ///
    /// A 64 MB buffer: a frame tcpdump drops would be a gap no tool could
    /// explain. Immediate mode: libpcap hands every frame over at once, none
    /// waits in a ring block at exit.
    pub fn start(ns: &NetNs, dev: &str, path: &Path, filter: &[&str]) -> Tcpdump {
        let mut child = command_in(
            ns,
            "tcpdump",
            &[
                "-i",
                dev,
                "-s",
                "0",
                "-B",
                "65536",
                "--immediate-mode",
                "-U",
                "-w",
            ],
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
        let stderr = std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = err.read_to_string(&mut rest);
            rest
        });
        Tcpdump {
            child,
            stderr,
            path: path.to_path_buf(),
        }
    }

    /// Stops tcpdump as Ctrl-C would (it then writes out what it holds and
    /// prints its counts) and returns the counts.
    pub fn stop(mut self) -> TcpdumpStats {
        std::thread::sleep(Duration::from_millis(300));
        super::signal(&self.child, libc::SIGINT);
        self.child.wait().unwrap();
        let text = self.stderr.join().unwrap();
        let count = |what: &str| {
            text.lines()
                .find(|l| l.ends_with(what))
                .and_then(|l| l.split_whitespace().next())
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| {
                    panic!(
                        "tcpdump on {}: no \"{what}\" line in {text:?}",
                        self.path.display()
                    )
                })
        };
        let stats = TcpdumpStats {
            captured: count("packets captured"),
            dropped_by_kernel: count("packets dropped by kernel"),
        };
        eprintln!("tcpdump {}: {stats:?}", self.path.display());
        stats
    }
}

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
