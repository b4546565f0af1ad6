//! Older kernels for real: frames an experiment captured, run through the
//! GRO of Debian's 6.1 and 6.12 kernels, each booted in a throw-away QEMU
//! guest by `scripts/kernel-vm.sh`, and through the running kernel's.
//!
//! The host writes the frames (retargeted to the live-kernel oracle's
//! addresses: [`oracle_frame`]) as pcap files into a private directory
//! under the script's `target/`, which the guest mounts writable at the
//! same path. The guest runs this program's hidden `lab gro-replay`
//! command ([`replay_files`]): the [`KernelGro`] oracle (a TAP with
//! `IFF_NAPI`, a VXLAN device on port 4789) takes the frames in trains of
//! [`TRAIN_FRAMES`] and the guest writes the counts, with its `uname -r`,
//! as JSON beside them. Nothing is installed on the host; the guest's root
//! is the host's `/`, read-only (docs/decisions/0072-vm-kernel-oracle.md).
//!
//! Processes: the script runs in a process group of its own under
//! `setpriv --pdeathsig KILL` (the script starts QEMU the same way), so a
//! SIGKILL of this process ends the script and the guest; Ctrl-C (the
//! cancel flag) ends the group with SIGTERM. What a SIGKILL leaves (the
//! private directory, the script's job directory, a QEMU that outlived
//! its parent) is removed by a [`Sweeper`], a `sh` in a process group of
//! its own that acts when this process's end of its pipe closes
//! (docs/decisions/0241-guest-sweeper.md).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};
use offload::gro::KernelLine;
use offload::{Delivered, GroConfig, GroEngine};
use offload_capture::{CaptureFormat, CaptureReader, CaptureWriter, FrameMeta, LinkType};
use serde::{Deserialize, Serialize};

use crate::oracle::{
    engine_train, GroKnobs, KernelGro, VxlanConf, PEER_IPV4, PEER_MAC, TAP_IPV4, TAP_MAC,
};

/// The kernel lines a guest can boot (`scripts/kernel-vm.sh`).
pub const GUEST_LINES: [&str; 2] = ["6.1", "6.12"];

/// Frames per train: `NAPI_POLL_WEIGHT` (include/linux/netdevice.h), the
/// most packets one NAPI poll of a driver hands to GRO before it flushes.
pub const TRAIN_FRAMES: usize = 64;

/// `--kernels`: which guest kernels to boot.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum KernelChoice {
    /// Every guest kernel already cached (`target/kernels/<line>/ready`)
    /// when QEMU and the script are there; none otherwise.
    #[default]
    Auto,
    /// No guest: the engine's model only.
    None,
    /// Exactly these lines; an error when one cannot be booted (the
    /// script downloads a kernel that is not cached yet).
    Lines(Vec<String>),
}

impl FromStr for KernelChoice {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(KernelChoice::Auto),
            "none" => Ok(KernelChoice::None),
            list => {
                let lines: Vec<String> = list.split(',').map(|l| l.trim().to_string()).collect();
                for l in &lines {
                    if !GUEST_LINES.contains(&l.as_str()) {
                        return Err(format!(
                            "unknown kernel line {l:?}: auto, none, or a list of {}",
                            GUEST_LINES.join(", ")
                        ));
                    }
                }
                Ok(KernelChoice::Lines(lines))
            }
        }
    }
}

/// Guests to boot and how.
#[derive(Debug, Clone)]
pub struct Guests {
    /// `scripts/kernel-vm.sh`.
    pub script: PathBuf,
    /// Its kernel cache (`OFFLOAD_KERNEL_CACHE` or `<repo>/target/kernels`).
    pub cache: PathBuf,
    /// The writable share of the guest (`<repo>/target`).
    pub share: PathBuf,
    /// Lines to boot, oldest first.
    pub lines: Vec<String>,
    /// The command that runs [`replay_files`] (this program's hidden
    /// `lab gro-replay`); `--out FILE PCAP...` is appended.
    pub replay: Vec<OsString>,
}

/// Where `scripts/kernel-vm.sh` is: `$OFFLOAD_KERNEL_VM`, else the first
/// ancestor of the current directory or of this executable that has it.
pub fn find_script() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("OFFLOAD_KERNEL_VM") {
        return Some(PathBuf::from(p));
    }
    let mut starts = Vec::new();
    if let Ok(d) = std::env::current_dir() {
        starts.push(d);
    }
    if let Ok(e) = std::env::current_exe() {
        starts.push(e);
    }
    starts.iter().find_map(|s| {
        s.ancestors()
            .map(|a| a.join("scripts/kernel-vm.sh"))
            .find(|p| p.is_file())
    })
}

fn in_path(prog: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(prog).is_file()))
}

/// Resolves `--kernels`: `Ok(None)` when no guest is to be booted.
pub fn resolve(choice: &KernelChoice, replay: Vec<OsString>) -> anyhow::Result<Option<Guests>> {
    if *choice == KernelChoice::None {
        return Ok(None);
    }
    let found = find_script();
    let qemu = in_path("qemu-system-x86_64");
    let (script, root) = match found {
        Some(s) => {
            let root = s
                .parent()
                .and_then(Path::parent)
                .map(Path::to_path_buf)
                .ok_or_else(|| anyhow!("{}: not inside a repository", s.display()))?;
            (s, root)
        }
        None if *choice == KernelChoice::Auto => return Ok(None),
        None => bail!(
            "--kernels: scripts/kernel-vm.sh not found above the current directory or the executable (set OFFLOAD_KERNEL_VM)"
        ),
    };
    let cache = std::env::var_os("OFFLOAD_KERNEL_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/kernels"));
    let lines = match choice {
        KernelChoice::Auto => {
            if !qemu {
                return Ok(None);
            }
            GUEST_LINES
                .iter()
                .filter(|l| cache.join(l).join("ready").is_file())
                .map(|l| l.to_string())
                .collect()
        }
        KernelChoice::Lines(l) => {
            if !qemu {
                bail!("--kernels: qemu-system-x86_64 is not installed (Debian: qemu-system-x86)");
            }
            l.clone()
        }
        KernelChoice::None => Vec::new(),
    };
    if lines.is_empty() {
        return Ok(None);
    }
    Ok(Some(Guests {
        script,
        cache,
        share: root.join("target"),
        lines,
        replay,
    }))
}

/// Frames in and out of one kernel's GRO (or the engine's model of it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Replay {
    /// What the frames are (the file stem: an arm's name).
    pub name: String,
    /// Frames written.
    pub frames_in: u64,
    /// Packets GRO delivered.
    pub frames_out: u64,
    /// Trains of [`TRAIN_FRAMES`].
    pub trains: u64,
    /// Trains whose answer came from a clean run (no jiffy boundary or
    /// flush timer inside it; see [`KernelGro::run_train_detailed`]).
    pub clean_trains: u64,
}

impl Replay {
    /// Frames in per packet out.
    pub fn merge_ratio(&self) -> Option<f64> {
        (self.frames_out > 0).then(|| self.frames_in as f64 / self.frames_out as f64)
    }
}

/// What one kernel made of every file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelReplay {
    /// `uname -r` of the kernel that ran them.
    pub release: String,
    /// One entry per input file.
    pub files: Vec<Replay>,
}

/// The oracle's knobs for VXLAN frames: a VXLAN device on port 4789, GRO
/// at 64 KiB, and the 400 ms flush timeout of the conformance suite (so a
/// slow emulated guest does not flush a train by timer).
pub fn replay_knobs() -> GroKnobs {
    GroKnobs {
        flush_timeout: Duration::from_millis(400),
        vxlan: Some(VxlanConf {
            vni: 42,
            port: 4789,
        }),
        ..GroKnobs::default()
    }
}

/// An IPv4 frame readdressed for the oracle: Ethernet from [`PEER_MAC`] to
/// [`TAP_MAC`], IPv4 from [`PEER_IPV4`] to [`TAP_IPV4`], header checksum
/// and a non-zero UDP checksum recomputed; everything else (IP ID, DF,
/// the tunnelled packet) unchanged. `None` for anything else.
pub fn oracle_frame(frame: &[u8]) -> Option<Vec<u8>> {
    let mut f = frame.to_vec();
    if f.len() < 34 || f[12..14] != [0x08, 0x00] || f[14] >> 4 != 4 {
        return None;
    }
    let ihl = usize::from(f[14] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([f[16], f[17]]));
    if ihl < 20 || total < ihl || f.len() < 14 + total {
        return None;
    }
    f.truncate(14 + total);
    f[0..6].copy_from_slice(&TAP_MAC);
    f[6..12].copy_from_slice(&PEER_MAC);
    f[26..30].copy_from_slice(&PEER_IPV4.octets());
    f[30..34].copy_from_slice(&TAP_IPV4.octets());
    f[24] = 0;
    f[25] = 0;
    let sum = offload::checksum::checksum(&f[14..14 + ihl]);
    f[24..26].copy_from_slice(&sum.to_be_bytes());
    let l4 = 14 + ihl;
    // UDP (the VXLAN outer header): a zero checksum means none (IPv4).
    if f[23] == 17 && f.len() >= l4 + 8 && f[l4 + 6..l4 + 8] != [0, 0] {
        f[l4 + 6] = 0;
        f[l4 + 7] = 0;
        let pseudo = offload::checksum::pseudo_ipv4(
            PEER_IPV4.octets(),
            TAP_IPV4.octets(),
            17,
            (total - ihl) as u32,
        );
        let mut c = !offload::checksum::fold(offload::checksum::sum_bytes(pseudo, &f[l4..]));
        if c == 0 {
            c = 0xffff;
        }
        f[l4 + 6..l4 + 8].copy_from_slice(&c.to_be_bytes());
    }
    Some(f)
}

/// Writes `frames` as a pcap file `name` in `dir`.
pub fn write_frames(
    dir: &offload_capture::tempfiles::PrivateDir,
    name: &str,
    frames: &[Vec<u8>],
) -> anyhow::Result<PathBuf> {
    let (path, file) = dir
        .create_file(name)
        .with_context(|| format!("create {name}"))?;
    let shown = path.display().to_string();
    let mut w = CaptureWriter::from_writer(file, shown.clone(), CaptureFormat::Pcap)
        .map_err(|e| anyhow!("{shown}: {e}"))?;
    for f in frames {
        w.write_frame(&FrameMeta::new(0, LinkType::ETHERNET, f.len()), f)
            .map_err(|e| anyhow!("{shown}: {e}"))?;
    }
    w.finish().map_err(|e| anyhow!("{shown}: {e}"))?;
    Ok(path)
}

fn read_frames(path: &Path) -> anyhow::Result<Vec<Vec<u8>>> {
    let mut r = CaptureReader::open(path).map_err(|e| anyhow!("{}: {e}", path.display()))?;
    let mut out = Vec::new();
    while let Some(f) = r
        .next_frame()
        .map_err(|e| anyhow!("{}: {e}", path.display()))?
    {
        out.push(f.data.to_vec());
    }
    Ok(out)
}

/// `frames` through the running kernel's GRO, in trains of [`TRAIN_FRAMES`].
pub fn replay_frames(
    kernel: &mut KernelGro,
    name: &str,
    frames: &[Vec<u8>],
) -> anyhow::Result<Replay> {
    let mut r = Replay {
        name: name.into(),
        frames_in: 0,
        frames_out: 0,
        trains: 0,
        clean_trains: 0,
    };
    for train in frames.chunks(TRAIN_FRAMES) {
        let o = kernel
            .run_train_detailed(train)
            .with_context(|| format!("{name}: train {} through the kernel's GRO", r.trains + 1))?;
        r.frames_in += train.len() as u64;
        r.frames_out += o.frames.len() as u64;
        r.trains += 1;
        r.clean_trains += u64::from(o.clean);
    }
    Ok(r)
}

/// `frames` through the engine's model of `line`, in the same trains.
pub fn model_frames(line: KernelLine, name: &str, frames: &[Vec<u8>]) -> Replay {
    let mut r = Replay {
        name: name.into(),
        frames_in: 0,
        frames_out: 0,
        trains: 0,
        clean_trains: 0,
    };
    for train in frames.chunks(TRAIN_FRAMES) {
        let mut e = GroEngine::new(GroConfig::for_kernel(line));
        let mut out = 0u64;
        let mut push = |d: &Delivered<'_>| out += u64::from(d.lost.is_none());
        engine_train(&mut e, train, &mut push);
        r.frames_in += train.len() as u64;
        r.frames_out += out;
        r.trains += 1;
    }
    r
}

/// The running kernel's release.
pub fn running_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The hidden `lab gro-replay` command: every pcap of `inputs` through the
/// running kernel's GRO ([`replay_knobs`]); the counts go to `out` as
/// JSON ([`KernelReplay`]).
pub fn replay_files(inputs: &[PathBuf], out: &Path) -> anyhow::Result<KernelReplay> {
    let mut kernel = KernelGro::new(replay_knobs())
        .context("the kernel GRO oracle (needs root and /dev/net/tun)")?;
    let mut files = Vec::new();
    for p in inputs {
        let name = p
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        files.push(replay_frames(&mut kernel, &name, &read_frames(p)?)?);
    }
    let rep = KernelReplay {
        release: running_release(),
        files,
    };
    // A new file: O_EXCL, never through a symlink.
    use std::os::unix::fs::OpenOptionsExt as _;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(out)
        .with_context(|| format!("create {}", out.display()))?;
    serde_json::to_writer(f, &rep).with_context(|| format!("write {}", out.display()))?;
    Ok(rep)
}

/// A private directory for the guests' files in [`Guests::share`],
/// named after this process (`offload-lab-vm-<pid>-<random>`), after
/// removing what a SIGKILLed earlier run left there: its directory and
/// the script's job directory (`vm-job.<pid>`), when that process is gone.
pub fn private_dir(g: &Guests) -> anyhow::Result<offload_capture::tempfiles::PrivateDir> {
    if let Ok(entries) = std::fs::read_dir(&g.share) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let pid = name
                .strip_prefix("offload-lab-vm-")
                .and_then(|r| r.split('-').next())
                .or_else(|| name.strip_prefix("vm-job."));
            let Some(pid) = pid.and_then(|p| p.parse::<u32>().ok()) else {
                continue;
            };
            let dir_only = e.file_type().is_ok_and(|t| t.is_dir());
            if dir_only && !Path::new(&format!("/proc/{pid}")).exists() {
                // std's remove_dir_all never follows symlinks.
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    offload_capture::tempfiles::PrivateDir::new_in(
        &g.share,
        &format!("lab-vm-{}", std::process::id()),
    )
    .with_context(|| format!("a private directory in {}", g.share.display()))
}

/// What the sweeper does when its stdin reaches end of file: `start PID`
/// lines name script process groups, `done PID` lines take them back; each
/// group still named is killed (and waited for, at most 10 s) and its job
/// directory removed, then the private directory `$1`.
const SWEEP: &str = r#"
dir=$1 share=$2 live=" "
while read -r what pid; do
  case $what in
    start) live="$live$pid " ;;
    done) live=$(printf '%s' "$live" | sed "s/ $pid / /") ;;
  esac
done
for p in $live; do
  kill -KILL "-$p" 2>/dev/null
  n=0
  while kill -0 "-$p" 2>/dev/null && [ $n -lt 100 ]; do sleep 0.1; n=$((n+1)); done
  rm -rf -- "$share/vm-job.$p"
done
rm -rf -- "$dir"
"#;

/// Removes a guest run's leftovers however this process ends, SIGKILL
/// included: a `sh` in a process group of its own (so a terminal's Ctrl-C
/// does not reach it) waits on a pipe whose write end only this process
/// holds (std opens it close-on-exec, so the guests do not inherit it).
/// The kernel closes that end when this process dies; the sweeper then
/// kills the script groups it was told of with [`Sweeper::watch`] and not
/// released with [`Sweeper::release`], removes their job directories and
/// the private directory. Dropping it closes the pipe and waits for it.
#[derive(Debug)]
pub struct Sweeper {
    child: std::process::Child,
    tell: Option<std::process::ChildStdin>,
}

impl Sweeper {
    /// Starts the sweeper of private directory `dir` and of the job
    /// directories under `share`.
    pub fn start(dir: &Path, share: &Path) -> anyhow::Result<Sweeper> {
        use std::os::unix::process::CommandExt as _;
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(SWEEP)
            .arg("offload-lab-sweeper")
            .arg(dir)
            .arg(share)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .context("start the guests' sweeper (sh)")?;
        let tell = child.stdin.take();
        Ok(Sweeper { child, tell })
    }

    fn say(&mut self, line: &str) -> anyhow::Result<()> {
        use std::io::Write as _;
        let tell = self.tell.as_mut().context("sweeper closed")?;
        tell.write_all(line.as_bytes())
            .and_then(|()| tell.flush())
            .context("tell the guests' sweeper")
    }

    /// Process group `pgid` (a script started with `process_group(0)`) is
    /// to be killed, and its `vm-job.PGID` removed, if this process dies.
    pub fn watch(&mut self, pgid: u32) -> anyhow::Result<()> {
        self.say(&format!("start {pgid}\n"))
    }

    /// Group `pgid` has ended and been waited for: never kill it (its id
    /// may be reused).
    pub fn release(&mut self, pgid: u32) -> anyhow::Result<()> {
        self.say(&format!("done {pgid}\n"))
    }
}

impl Drop for Sweeper {
    fn drop(&mut self) {
        drop(self.tell.take());
        let _ = self.child.wait();
    }
}

/// Boots `line` and runs [`replay_files`] on `inputs` (pcaps inside
/// `dir`, a private directory under [`Guests::share`]). Ctrl-C (`cancel`)
/// ends the guest; its console goes to `dir` and its last lines into the
/// error when the guest fails.
pub fn run_guest(
    g: &Guests,
    line: &str,
    dir: &Path,
    inputs: &[PathBuf],
    cancel: &AtomicBool,
    sweeper: &mut Sweeper,
) -> anyhow::Result<KernelReplay> {
    use std::os::unix::process::CommandExt as _;
    let out = dir.join(format!("result-{line}.json"));
    let console_path = dir.join(format!("console-{line}.txt"));
    let console = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&console_path)
        .with_context(|| format!("create {}", console_path.display()))?;
    let mut cmd = Command::new("setpriv");
    cmd.arg("--pdeathsig")
        .arg("KILL")
        .arg(&g.script)
        .arg("run")
        .arg(line)
        .args(&g.replay)
        .arg("--out")
        .arg(&out)
        .args(inputs)
        .env("OFFLOAD_KERNEL_CACHE", &g.cache)
        .stdin(Stdio::null())
        .stdout(console.try_clone()?)
        .stderr(console)
        .process_group(0);
    let mut child = cmd
        .spawn()
        .with_context(|| format!("start {} (setpriv from util-linux)", g.script.display()))?;
    let pid = child.id();
    if let Err(e) = sweeper.watch(pid) {
        if let Some(p) = rustix::process::Pid::from_raw(pid as i32) {
            let _ = rustix::process::kill_process_group(p, rustix::process::Signal::KILL);
        }
        let _ = child.wait();
        return Err(e);
    }
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break Some(s);
        }
        if cancel.load(Ordering::Relaxed) {
            if let Some(p) = rustix::process::Pid::from_raw(pid as i32) {
                let _ = rustix::process::kill_process_group(p, rustix::process::Signal::TERM);
            }
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    // The script removes its job directory on exit; a killed one cannot.
    let _ = std::fs::remove_dir_all(g.share.join(format!("vm-job.{pid}")));
    sweeper.release(pid)?;
    let Some(status) = status else {
        bail!("interrupted: the {line} guest was stopped");
    };
    if !status.success() || !out.is_file() {
        let text = std::fs::read_to_string(&console_path).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(12).collect();
        bail!(
            "the {line} guest ({}) failed after {:.0} s ({status}); its console ended with:\n{}",
            g.script.display(),
            started.elapsed().as_secs_f64(),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    let text = std::fs::read_to_string(&out).with_context(|| format!("read {}", out.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parse {}", out.display()))
}

#[cfg(test)]
mod tests {

    /// The sweeper acts on end of file, as when this process is SIGKILLed:
    /// a watched group is killed and its job directory and the private
    /// directory removed; a released group is left alone.
    #[test]
    fn sweeper_kills_watched_groups_and_removes_their_files_on_eof() {
        use std::os::unix::process::CommandExt as _;
        let share = offload_capture::tempfiles::PrivateDir::new("sweeper-test").unwrap();
        let dir = share.path().join("offload-lab-vm-test");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("frames.pcap"), b"x").unwrap();
        let spawn = || {
            Command::new("sleep")
                .arg("600")
                .process_group(0)
                .spawn()
                .unwrap()
        };
        let (mut watched, mut released) = (spawn(), spawn());
        for c in [&watched, &released] {
            std::fs::create_dir(share.path().join(format!("vm-job.{}", c.id()))).unwrap();
        }
        let mut sweeper = Sweeper::start(&dir, share.path()).unwrap();
        sweeper.watch(watched.id()).unwrap();
        sweeper.watch(released.id()).unwrap();
        sweeper.release(released.id()).unwrap();
        drop(sweeper);
        let status = watched.wait().unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(libc::SIGKILL)
        );
        assert!(!dir.exists());
        assert!(!share
            .path()
            .join(format!("vm-job.{}", watched.id()))
            .exists());
        let kept = share.path().join(format!("vm-job.{}", released.id()));
        assert!(
            kept.exists(),
            "a released group's files are not the sweeper's"
        );
        assert!(
            released.try_wait().unwrap().is_none(),
            "released group killed"
        );
        released.kill().unwrap();
        released.wait().unwrap();
    }
    use super::*;

    #[test]
    fn kernels_option_parses() {
        assert_eq!("auto".parse(), Ok(KernelChoice::Auto));
        assert_eq!("none".parse(), Ok(KernelChoice::None));
        assert_eq!(
            "6.1,6.12".parse(),
            Ok(KernelChoice::Lines(vec!["6.1".into(), "6.12".into()]))
        );
        assert!("6.6".parse::<KernelChoice>().is_err());
    }

    #[test]
    fn oracle_frame_readdresses_and_keeps_checksums_valid() {
        // Ethernet + IPv4 (ID 0x1234, DF) + UDP to 4789 with a checksum.
        let mut f = vec![0u8; 14 + 20 + 8 + 4];
        f[12] = 0x08;
        f[14] = 0x45;
        f[16..18].copy_from_slice(&(20u16 + 8 + 4).to_be_bytes());
        f[18..20].copy_from_slice(&0x1234u16.to_be_bytes());
        f[20] = 0x40;
        f[22] = 64;
        f[23] = 17;
        f[26..30].copy_from_slice(&[10, 71, 0, 1]);
        f[30..34].copy_from_slice(&[10, 72, 0, 1]);
        f[36..38].copy_from_slice(&4789u16.to_be_bytes());
        f[38..40].copy_from_slice(&12u16.to_be_bytes());
        f[40] = 0xab;
        f[42..46].copy_from_slice(b"data");
        f.extend_from_slice(&[0, 0]); // Ethernet padding, dropped
        let o = oracle_frame(&f).expect("IPv4");
        assert_eq!(o.len(), 46);
        assert_eq!(&o[0..6], &TAP_MAC);
        assert_eq!(&o[30..34], &TAP_IPV4.octets());
        assert_eq!(&o[18..20], &[0x12, 0x34], "IP ID kept");
        assert_eq!(
            offload::checksum::checksum(&o[14..34]),
            0,
            "IP header checksum"
        );
        let pseudo = offload::checksum::pseudo_ipv4(PEER_IPV4.octets(), TAP_IPV4.octets(), 17, 12);
        assert!(offload::checksum::verify(pseudo, &o[34..]), "UDP checksum");
        assert!(oracle_frame(&o[..20]).is_none());
    }
}
