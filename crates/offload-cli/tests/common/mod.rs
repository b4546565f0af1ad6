//! Setup the offload-cli integration tests share: running the release
//! binary (on the host or inside a namespace), reading its output, its
//! peak memory, tcpdump captures, tshark, and hand-written pcap files.
//!
//! Each file under `tests/` is a crate of its own that compiles this
//! module whole (`mod common;`) and uses part of it; hence the
//! `dead_code` allowance. One implementation each, so that a fix (a
//! capture that must not drop frames, a child that must be reaped) is made
//! once and holds for every test.
#![allow(dead_code)]

pub mod capture;
pub mod differential;
pub mod netns;
pub mod pcap;
pub mod report_html;
pub mod tcp_figures;

use std::ffi::OsStr;
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

/// The release CLI cargo built for these tests: every test runs it as a
/// user would, never its library entry points, so argument parsing, exit
/// statuses and what reaches stdout and stderr are tested too.
pub const BIN: &str = env!("CARGO_BIN_EXE_offload");

/// `offload ARGS` on the host, its output collected.
pub fn offload(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run offload {args:?}: {e}"))
}

/// `offload analyze PATH --json` on the host: asserted to exit 0 without a
/// panic on stderr, its JSON report.
pub fn analyze_json(path: &Path) -> serde_json::Value {
    let out = Command::new(BIN)
        .arg("analyze")
        .arg(path)
        .arg("--json")
        .output()
        .unwrap_or_else(|e| panic!("run offload analyze {}: {e}", path.display()));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && !err.contains("panicked"),
        "offload analyze {}: {:?}\n{err}",
        path.display(),
        out.status
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("offload analyze {} --json: {e}", path.display()))
}

/// `out`, asserted to have exited 0; `what` and stderr name a failure.
pub fn succeeded(out: Output, what: &str) -> Output {
    assert!(
        out.status.success(),
        "{what}: status {:?}, stderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The JSON document on `out`'s stdout, once `out` is asserted to have
/// exited 0 (a failed run's stderr is the useful message, not a parse
/// error of its empty stdout).
pub fn json_of(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "status {:?}, stderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// Runs `cmd` with `input` on its stdin and collects its output. A thread
/// writes the input while this one reads the output: a child that writes
/// before it has read everything (tshark, `offload gro -`) would otherwise
/// fill one pipe while the test blocks on the other.
pub fn output_with_stdin(mut cmd: Command, input: &[u8]) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    let mut stdin = child.stdin.take().unwrap();
    let data = input.to_vec();
    let writer = std::thread::spawn(move || {
        // A child that stops reading early closes the pipe: not an error.
        let _ = stdin.write_all(&data);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

/// Sends `sig` to `child` (as Ctrl-C or `kill` would), asserting it was
/// delivered.
pub fn signal(child: &Child, sig: libc::c_int) {
    // SAFETY: kill(2) on our own child's pid, which is not reaped yet
    // (the caller still holds the `Child`), so the pid is not reused.
    let r = unsafe { libc::kill(child.id() as libc::pid_t, sig) };
    assert_eq!(r, 0, "kill: {}", std::io::Error::last_os_error());
}

/// Runs `offload ARGS` with stdout to `stdout_to` and returns its exit code
/// and its peak resident set in KiB (`ru_maxrss`, the VmHWM the kernel
/// kept for it). The child is reaped with wait4(2) itself: std's `wait`
/// would discard the child's rusage, and after it the pid is gone.
#[allow(clippy::zombie_processes)] // reaped by wait4 below, which also gives its rusage
pub fn run_peak(args: &[&OsStr], stdout_to: &Path) -> (i32, i64) {
    let child = Command::new(BIN)
        .args(args)
        .stdout(std::fs::File::create(stdout_to).unwrap())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child (never waited for through `child`),
    // writing into the two locals above.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid);
    assert!(libc::WIFEXITED(status));
    (libc::WEXITSTATUS(status), usage.ru_maxrss)
}
