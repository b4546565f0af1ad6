//! `-` for standard input and output, and inputs that can be read only once.
//!
//! [`CaptureReader::open`](crate::CaptureReader::open) reads standard input
//! for `-`; [`CaptureWriter::create`](crate::CaptureWriter::create) writes
//! standard output for `-` and streams (never seeks) into FIFOs and
//! character devices, in pcapng unless the name says otherwise. A FIFO or
//! `<(...)` opens like a file and is read once, front to back: the reader
//! never seeks.
//!
//! A command that must read its input twice (`offload gso` learns each
//! flow's MSS first; `offload analyze` runs parallel jobs over one file)
//! copies a one-shot input to a private temporary file first with
//! [`SpooledInput`]: the stream is read once, memory stays bounded, and the
//! copy is removed when the value is dropped (see [`crate::tempfiles`]).

use crate::error::{CaptureError, ErrorDetail, ErrorKind};
use crate::tempfiles::PrivateDir;
use std::fs::File;
use std::io;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// The name meaning standard input or output.
pub const STDIO: &str = "-";

/// True for `-`.
pub fn is_stdio(path: &Path) -> bool {
    path.as_os_str() == STDIO
}

/// True when `path` can be opened more than once with the same content: a
/// regular file (not `-`, a FIFO, a socket or `/dev/fd/N` of a pipe).
pub fn is_rereadable(path: &Path) -> bool {
    !is_stdio(path) && std::fs::metadata(path).is_ok_and(|m| m.is_file())
}

/// The display name of an input: `stdin` for `-`, else the path.
pub fn input_name(path: &Path) -> String {
    if is_stdio(path) {
        "stdin".into()
    } else {
        path.display().to_string()
    }
}

/// The display name of an output: `stdout` for `-`, else the path.
pub fn output_name(path: &Path) -> String {
    if is_stdio(path) {
        "stdout".into()
    } else {
        path.display().to_string()
    }
}

/// Standard input as a `File` (no second buffer in front of ours).
pub(crate) fn stdin_file() -> io::Result<File> {
    use std::os::fd::AsFd;
    Ok(File::from(io::stdin().as_fd().try_clone_to_owned()?))
}

/// Standard output as a `File`.
/// An I/O error on input `name` before any frame was read (`field` says
/// what failed: "open", "metadata", ...).
pub(crate) fn input_io_error(name: &str, field: &'static str, e: io::Error) -> CaptureError {
    CaptureError::from(ErrorDetail {
        file: name.to_string(),
        frame: None,
        last_frame: 0,
        offset: 0,
        structure: "file",
        field,
        kind: ErrorKind::Io(e),
    })
}

/// Opens input `path` for reading (`-`: standard input), counting the open
/// of a real path ([`inputs_opened`](crate::inputs_opened)).
pub(crate) fn open_input(path: &Path, name: &str) -> Result<File, CaptureError> {
    if is_stdio(path) {
        return stdin_file().map_err(|e| input_io_error(name, "open", e));
    }
    crate::open_count::note_open();
    File::open(path).map_err(|e| input_io_error(name, "open", e))
}

pub(crate) fn stdout_file() -> io::Result<File> {
    use std::os::fd::AsFd;
    Ok(File::from(io::stdout().as_fd().try_clone_to_owned()?))
}

/// An input that can be read as often as needed: the path itself when it is
/// a regular file, else a copy of the stream in a
/// [`PrivateDir`], removed when the value is
/// dropped (and on SIGINT, SIGTERM and SIGHUP once
/// [`cancel_on_signals`](crate::tempfiles::cancel_on_signals) is installed).
#[derive(Debug)]
pub struct SpooledInput {
    path: PathBuf,
    name: String,
    /// The copy's directory, when the input was copied.
    dir: Option<PrivateDir>,
}

impl SpooledInput {
    /// Copies `path` to a temporary file unless it is a regular file.
    pub fn new(path: &Path) -> Result<SpooledInput, CaptureError> {
        SpooledInput::new_cancellable(path, &AtomicBool::new(false))
    }

    /// Like [`SpooledInput::new`], and stops copying when `cancel` is set
    /// (checked at least every 200 ms, also while the stream is silent):
    /// the copy is removed and an error of kind
    /// [`std::io::ErrorKind::Interrupted`] returned.
    pub fn new_cancellable(path: &Path, cancel: &AtomicBool) -> Result<SpooledInput, CaptureError> {
        let name = input_name(path);
        if is_rereadable(path) {
            return Ok(SpooledInput {
                path: path.to_path_buf(),
                name,
                dir: None,
            });
        }
        let mut src = open_input(path, &name)?;
        let tmp_err = |field, e| {
            CaptureError::from(ErrorDetail {
                file: std::env::temp_dir().display().to_string(),
                frame: None,
                last_frame: 0,
                offset: 0,
                structure: "temporary copy of the input",
                field,
                kind: ErrorKind::Io(e),
            })
        };
        let dir = PrivateDir::new("input").map_err(|e| tmp_err("create", e))?;
        let (tmp, mut dst) = dir.create_file("input").map_err(|e| tmp_err("create", e))?;
        let spooled = SpooledInput {
            path: tmp,
            name: name.clone(),
            dir: Some(dir),
        };
        copy_until_cancelled(&mut src, &mut dst, cancel)
            .map_err(|e| input_io_error(&name, "read", e))?;
        Ok(spooled)
    }

    /// The path to read (the input or its copy).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The input's name for people (`stdin`, or the path given).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// True when the input was copied.
    pub fn is_copy(&self) -> bool {
        self.dir.is_some()
    }

    /// Replaces the copy's path by the input's name in `text` (messages
    /// produced while reading the copy).
    pub fn rename_in(&self, text: &str) -> String {
        if self.is_copy() {
            text.replace(&self.path.display().to_string(), &self.name)
        } else {
            text.to_string()
        }
    }
}

/// Copies `src` to `dst`, waiting for input at most 200 ms at a time so
/// that `cancel` is seen while a pipe's writer is silent.
fn copy_until_cancelled(src: &mut File, dst: &mut File, cancel: &AtomicBool) -> io::Result<()> {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let mut buf = vec![0u8; 1 << 16];
    let wait = Timespec {
        tv_sec: 0,
        tv_nsec: 200_000_000,
    };
    loop {
        if cancel.load(Ordering::Relaxed) {
            return Err(io::Error::new(
                io::ErrorKind::Interrupted,
                "interrupted while copying the input",
            ));
        }
        let mut fds = [PollFd::new(&*src, PollFlags::IN)];
        match poll(&mut fds, Some(&wait)) {
            Ok(0) => continue,
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
        match src.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => dst.write_all(&buf[..n])?,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}
