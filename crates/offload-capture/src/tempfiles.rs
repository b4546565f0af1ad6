//! Private temporary files, removed on every exit path.
//!
//! Every temporary file `offload` writes (the copy of a stream that must be
//! read twice, the bundled samples `analyze` unpacks, the packets `inspect
//! --sample` captures) lives in a [`PrivateDir`]:
//!
//! * the directory is made by `mkdir(2)` with mode 0700 under a random name
//!   in `$TMPDIR` (mkdtemp(3) semantics, through the `tempfile` crate): an
//!   existing name, a symlink included, makes `mkdir` fail and another name
//!   is tried, so nothing another user planted is ever entered;
//! * files in it are opened `O_CREAT | O_EXCL | O_NOFOLLOW` with mode 0600
//!   ([`PrivateDir::create_file`]): never an existing file, never through a
//!   symlink;
//! * the directory is removed when the value is dropped (normal exit, error
//!   exit, unwinding) and, once [`cancel_on_signals`] is installed, on
//!   SIGINT, SIGTERM and SIGHUP: the first signal asks the running command
//!   to stop (its cancel flag), and the process is ended after removing
//!   every live [`PrivateDir`] on a second signal, or
//!   [`TERMINATION_GRACE`] after a SIGTERM or SIGHUP that did not end it
//!   (docs/decisions/0160-private-temp-files-and-signals.md).
//!
//! This one module is the only place that creates temporary files, so that
//! every one of them gets the same treatment.

use std::fs::File;
use std::io;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// How long a process that got SIGTERM or SIGHUP may take to stop by
/// itself (finish writing what it read, print its summary) before its
/// temporary files are removed and it is ended.
pub const TERMINATION_GRACE: Duration = Duration::from_secs(5);

/// Directories of live [`PrivateDir`]s, for removal from the signal thread.
static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Set once the process is being ended by a signal: no new directory.
static CLOSING: AtomicBool = AtomicBool::new(false);

/// The first termination signal received (0: none).
static RECEIVED: AtomicI32 = AtomicI32::new(0);

fn live() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// A private directory for temporary files, removed with everything in it
/// when dropped. See the module documentation.
#[derive(Debug)]
pub struct PrivateDir {
    path: PathBuf,
}

impl PrivateDir {
    /// Creates `$TMPDIR/offload-<purpose>-<random>` with mode 0700.
    pub fn new(purpose: &str) -> io::Result<PrivateDir> {
        PrivateDir::new_in(&std::env::temp_dir(), purpose)
    }

    /// Creates `<parent>/offload-<purpose>-<random>` with mode 0700.
    pub fn new_in(parent: &Path, purpose: &str) -> io::Result<PrivateDir> {
        let mut list = live();
        if CLOSING.load(Ordering::SeqCst) {
            return Err(io::Error::new(
                io::ErrorKind::Interrupted,
                "the process is ending (signal)",
            ));
        }
        let path = tempfile::Builder::new()
            .prefix(&format!("offload-{purpose}-"))
            .rand_bytes(12)
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(parent)?
            .keep();
        let guard = PrivateDir { path };
        // mkdir made it (never a symlink); the mode is 0700 or narrower
        // (umask can only take bits away).
        let meta = std::fs::symlink_metadata(&guard.path)?;
        if !meta.is_dir() || meta.permissions().mode() & 0o077 != 0 {
            return Err(io::Error::other(format!(
                "{} is not a private directory",
                guard.path.display()
            )));
        }
        list.push(guard.path.clone());
        Ok(guard)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Creates the new file `name` (a plain file name, no `/`) in the
    /// directory: `O_CREAT | O_EXCL | O_NOFOLLOW`, mode 0600, write only.
    pub fn create_file(&self, name: &str) -> io::Result<(PathBuf, File)> {
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("`{name}` is not a plain file name"),
            ));
        }
        let path = self.path.join(name);
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&path)?;
        Ok((path, file))
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        let mut list = live();
        // std's remove_dir_all never follows symlinks.
        let _ = std::fs::remove_dir_all(&self.path);
        list.retain(|p| p != &self.path);
    }
}

/// Removes every live [`PrivateDir`] and refuses new ones: the process is
/// about to end without running destructors.
pub fn remove_all() {
    let mut list = live();
    CLOSING.store(true, Ordering::SeqCst);
    for p in list.drain(..) {
        let _ = std::fs::remove_dir_all(&p);
    }
}

/// The termination signal the process received, if any (SIGINT, SIGTERM
/// or SIGHUP), once [`cancel_on_signals`] is installed.
pub fn signal_received() -> Option<i32> {
    match RECEIVED.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// Installs (once per process) the handling of SIGINT, SIGTERM and SIGHUP
/// and returns the cancel flag it sets: the first signal sets the flag (a
/// long pass stops, writes what it read and reports); a second signal, or
/// [`TERMINATION_GRACE`] after a SIGTERM or SIGHUP, removes every
/// [`PrivateDir`] and exits with status 128 + the signal number.
///
/// Later calls return the same flag. If the handlers cannot be installed,
/// the flag is returned anyway and the signals keep their default action
/// (the process ends at once, as before).
pub fn cancel_on_signals() -> Arc<AtomicBool> {
    static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();
    FLAG.get_or_init(|| {
        let flag = Arc::new(AtomicBool::new(false));
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        if let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) {
            let f = flag.clone();
            let spawned = std::thread::Builder::new()
                .name("offload-signals".into())
                .spawn(move || {
                    for sig in signals.forever() {
                        let first = RECEIVED
                            .compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst)
                            .is_ok();
                        if !first {
                            end_now(sig);
                        }
                        f.store(true, Ordering::SeqCst);
                        if sig != SIGINT {
                            let _ = std::thread::Builder::new()
                                .name("offload-grace".into())
                                .spawn(move || {
                                    std::thread::sleep(TERMINATION_GRACE);
                                    end_now(sig);
                                });
                        }
                    }
                });
            drop(spawned);
        }
        flag
    })
    .clone()
}

/// Removes the temporary files and ends the process as the signal would.
fn end_now(sig: i32) -> ! {
    remove_all();
    std::process::exit(128 + sig);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn private_dir_is_0700_and_removed_on_drop() {
        let parent = tempfile::tempdir().unwrap();
        let d = PrivateDir::new_in(parent.path(), "t").unwrap();
        let p = d.path().to_path_buf();
        let m = std::fs::symlink_metadata(&p).unwrap();
        assert!(m.is_dir());
        assert_eq!(m.mode() & 0o777, 0o700);
        let (f, _) = d.create_file("x").unwrap();
        assert_eq!(std::fs::metadata(&f).unwrap().mode() & 0o777, 0o600);
        assert!(live().contains(&p));
        drop(d);
        assert!(!p.exists());
        assert!(!live().contains(&p));
    }

    #[test]
    fn create_file_never_reuses_or_follows() {
        let parent = tempfile::tempdir().unwrap();
        let d = PrivateDir::new_in(parent.path(), "t").unwrap();
        d.create_file("a").unwrap();
        assert_eq!(
            d.create_file("a").unwrap_err().kind(),
            io::ErrorKind::AlreadyExists
        );
        let victim = parent.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        std::os::unix::fs::symlink(&victim, d.path().join("link")).unwrap();
        assert!(d.create_file("link").is_err());
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        for bad in ["", ".", "..", "a/b", "../x"] {
            assert_eq!(
                d.create_file(bad).unwrap_err().kind(),
                io::ErrorKind::InvalidInput
            );
        }
    }
}
