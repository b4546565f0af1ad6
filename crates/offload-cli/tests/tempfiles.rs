//! Temporary files of the real `offload` binary: never at a name another
//! user can plant a symlink at, and gone on every exit path, SIGINT, SIGTERM
//! and SIGHUP included.
//!
//! Each test gives the binary its own `$TMPDIR`, so that what is left there
//! is exactly what the binary left.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{json_of, succeeded, BIN};
const SAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../samples/healthy-tcp.pcapng"
);

/// Names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// A victim file and a victim directory outside `$TMPDIR`, and a shell
/// prologue that plants symlinks to them at every name older versions used
/// for the process's temporary files (`$$` is the pid `offload` keeps after
/// `exec`): `offload-samples-PID` (a directory whose sample files link to
/// the victim), `offload-input-PID-N`, `offload-sample-PID-N.pcap`.
struct Trap {
    _outside: tempfile::TempDir,
    victim: std::path::PathBuf,
    victim_dir: std::path::PathBuf,
    tmp: tempfile::TempDir,
}

const VICTIM_TEXT: &[u8] = b"precious\n";

impl Trap {
    fn new() -> Trap {
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("victim");
        std::fs::write(&victim, VICTIM_TEXT).unwrap();
        let victim_dir = outside.path().join("victim-dir");
        std::fs::create_dir(&victim_dir).unwrap();
        for s in [
            "healthy-tcp.pcapng",
            "tso-sender.pcapng",
            "gro-receiver.pcapng",
            "vxlan-broken.pcapng",
            "bigtcp-sender.pcapng",
            "bigtcp.pcapng",
        ] {
            std::os::unix::fs::symlink(&victim, victim_dir.join(s)).unwrap();
        }
        Trap {
            _outside: outside,
            victim,
            victim_dir,
            tmp: tempfile::tempdir().unwrap(),
        }
    }

    /// `sh -c` text: plant the symlinks for this shell's pid, then exec.
    fn script(&self, exec: &str) -> String {
        format!(
            "t='{tmp}'; ln -s '{vd}' \"$t/offload-samples-$$\"; \
             for n in 0 1 2 3; do ln -s '{v}' \"$t/offload-input-$$-$n\"; done; \
             n=0; while [ $n -lt 400 ]; do ln -s '{v}' \"$t/offload-sample-$$-$n.pcap\"; n=$((n+1)); done; \
             exec {exec}",
            tmp = self.tmp.path().display(),
            vd = self.victim_dir.display(),
            v = self.victim.display(),
        )
    }

    fn command(&self, exec: &str) -> Command {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(self.script(exec))
            .env("TMPDIR", self.tmp.path());
        c
    }

    /// The victims are unchanged, and `$TMPDIR` holds only the planted links.
    fn check(&self) {
        assert_eq!(std::fs::read(&self.victim).unwrap(), VICTIM_TEXT);
        assert_eq!(
            names(&self.victim_dir).len(),
            6,
            "nothing added to the victim directory"
        );
        for e in std::fs::read_dir(&self.victim_dir).unwrap() {
            let m = std::fs::symlink_metadata(e.unwrap().path()).unwrap();
            assert!(m.file_type().is_symlink());
        }
        for n in names(self.tmp.path()) {
            let m = std::fs::symlink_metadata(self.tmp.path().join(&n)).unwrap();
            assert!(m.file_type().is_symlink(), "{n} left in $TMPDIR");
        }
    }
}

#[test]
fn analyze_samples_never_follow_a_planted_symlink() {
    let trap = Trap::new();
    let out = trap
        .command(&format!("'{BIN}' analyze --json"))
        .output()
        .unwrap();
    let v = json_of(&out);
    assert_eq!(v["inputs"].as_array().unwrap().len(), 6);
    assert!(v["inputs"][0]["frames"].as_u64().unwrap() > 100);
    trap.check();
}

#[test]
fn stdin_spool_never_follows_a_planted_symlink() {
    let trap = Trap::new();
    let out_dir = tempfile::tempdir().unwrap();
    for cmd in [
        format!(
            "'{BIN}' gso - -o '{}' --json < '{SAMPLE}'",
            out_dir.path().join("o.pcapng").display()
        ),
        format!("'{BIN}' analyze --json - < '{SAMPLE}'"),
    ] {
        succeeded(trap.command(&cmd).output().unwrap(), &cmd);
        trap.check();
    }
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it"]
fn inspect_sample_never_follows_a_planted_symlink() {
    // A namespace of its own: only its loopback is sampled.
    let trap = Trap::new();
    let out = trap
        .command(&format!(
            "unshare -n sh -c \"ip link set lo up; ping -c 3 -i 0.2 127.0.0.1 >/dev/null & \
             exec '{BIN}' inspect lo --live 1s --sample 4 --json\""
        ))
        .output()
        .unwrap();
    // `unshare -n` (no --fork) and both shells exec: offload keeps the pid
    // the prologue planted for.
    let v = json_of(&out);
    assert!(v["sample"]["pcap"].is_null());
    trap.check();
}

/// Sends `sig` to a real `offload gso - -o ...` reading a pipe whose writer
/// stays open, once its spool exists; the process must end with 128 + sig
/// and leave nothing in `$TMPDIR`.
fn spool_removed_on(sig: i32) {
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(BIN)
        .args(["gso", "-", "-o"])
        .arg(out_dir.path().join("o.pcapng"))
        .env("TMPDIR", tmp.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // Half the capture: the copy is under way and waits for more.
    let data = std::fs::read(SAMPLE).unwrap();
    stdin.write_all(&data[..data.len() / 2]).unwrap();
    stdin.flush().unwrap();
    let start = Instant::now();
    let spool = loop {
        let found: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.join("input").exists())
            .collect();
        if let Some(p) = found.first() {
            break p.join("input");
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no spool appeared in {}",
            tmp.path().display()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    // The spool fills: what was written reaches it.
    let start = Instant::now();
    while std::fs::metadata(&spool).map_or(0, |m| m.len()) < (data.len() / 2) as u64 {
        assert!(start.elapsed() < Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = child.id() as i32;
    // SAFETY: kill(2) on our own child's pid, which we have not waited for
    // (so it cannot have been reused).
    assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "offload gso did not end after signal {sig}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    drop(stdin);
    let mut err = String::new();
    use std::io::Read;
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status.code(), Some(128 + sig), "stderr: {err}");
    assert!(
        names(tmp.path()).is_empty(),
        "left after signal {sig}: {:?}",
        names(tmp.path())
    );
}

#[test]
fn stdin_spool_removed_on_sigint() {
    spool_removed_on(libc::SIGINT);
}

#[test]
fn stdin_spool_removed_on_sigterm() {
    spool_removed_on(libc::SIGTERM);
}

#[test]
fn stdin_spool_removed_on_sighup() {
    spool_removed_on(libc::SIGHUP);
}
