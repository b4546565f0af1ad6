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
//! copy is removed when the value is dropped.

use crate::error::{CaptureError, ErrorDetail, ErrorKind};
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

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
/// a regular file, else a temporary copy of the stream.
#[derive(Debug)]
pub struct SpooledInput {
    path: PathBuf,
    name: String,
    temporary: bool,
}

static SPOOL_COUNTER: AtomicU32 = AtomicU32::new(0);

impl SpooledInput {
    /// Copies `path` to a temporary file unless it is a regular file.
    pub fn new(path: &Path) -> Result<SpooledInput, CaptureError> {
        let name = input_name(path);
        if is_rereadable(path) {
            return Ok(SpooledInput {
                path: path.to_path_buf(),
                name,
                temporary: false,
            });
        }
        let err = |field, e| input_io_error(&name, field, e);
        let mut src = open_input(path, &name)?;
        let tmp = std::env::temp_dir().join(format!(
            "offload-input-{}-{}",
            std::process::id(),
            SPOOL_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let spooled = SpooledInput {
            path: tmp.clone(),
            name: name.clone(),
            temporary: true,
        };
        let mut dst = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| {
                CaptureError::from(ErrorDetail {
                    file: tmp.display().to_string(),
                    frame: None,
                    last_frame: 0,
                    offset: 0,
                    structure: "temporary copy of the input",
                    field: "create",
                    kind: ErrorKind::Io(e),
                })
            })?;
        io::copy(&mut src, &mut dst).map_err(|e| err("read", e))?;
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
        self.temporary
    }

    /// Replaces the copy's path by the input's name in `text` (messages
    /// produced while reading the copy).
    pub fn rename_in(&self, text: &str) -> String {
        if self.temporary {
            text.replace(&self.path.display().to_string(), &self.name)
        } else {
            text.to_string()
        }
    }
}

impl Drop for SpooledInput {
    fn drop(&mut self) {
        if self.temporary {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}
