//! A capture input opened once and read by several readers.
//!
//! `offload analyze` may read one file with several jobs (statistics and
//! the GRO what-if on two cores) and looks at its first frames before the
//! pass (are checksums left to the NIC?). Opening the path again for each
//! would read a different file if the path was replaced meanwhile, and
//! cannot work for a FIFO. [`CaptureInput`] opens the path once; every
//! [`CaptureInput::reader`] starts at the beginning of that one open file
//! with positioned reads (`pread`), each with its own position. A stream
//! (`-`, a FIFO) gives one reader only: copy it first with
//! [`SpooledInput`](crate::SpooledInput) to read it more than once.

use crate::error::{CaptureError, ErrorDetail, ErrorKind};
use crate::reader::CaptureReader;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// One opened capture input. See the module documentation.
#[derive(Debug)]
pub struct CaptureInput {
    name: String,
    /// A regular file: any number of readers.
    file: Option<Arc<File>>,
    len: Option<u64>,
    /// A stream, until its one reader takes it.
    stream: Mutex<Option<File>>,
}

impl CaptureInput {
    /// Opens `path` (`-` for standard input) without reading it.
    pub fn open(path: &Path) -> Result<CaptureInput, CaptureError> {
        CaptureInput::open_as(path, crate::stdio::input_name(path))
    }

    /// Like [`CaptureInput::open`], naming the input `name` in errors (a
    /// [`SpooledInput`](crate::SpooledInput)'s copy keeps its input's name).
    pub fn open_as(path: &Path, name: String) -> Result<CaptureInput, CaptureError> {
        let io_err = |e, field| crate::stdio::input_io_error(&name, field, e);
        let f = crate::stdio::open_input(path, &name)?;
        let meta = f.metadata().map_err(|e| io_err(e, "metadata"))?;
        Ok(if meta.is_file() {
            CaptureInput {
                name,
                file: Some(Arc::new(f)),
                len: Some(meta.len()),
                stream: Mutex::new(None),
            }
        } else {
            CaptureInput {
                name,
                file: None,
                len: None,
                stream: Mutex::new(Some(f)),
            }
        })
    }

    /// The input's name in messages (`stdin` for `-`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// True when [`CaptureInput::reader`] can be called more than once.
    pub fn is_rereadable(&self) -> bool {
        self.file.is_some()
    }

    /// The file's size when it is a regular file.
    pub fn len(&self) -> Option<u64> {
        self.len
    }

    /// True for an empty regular file.
    pub fn is_empty(&self) -> bool {
        self.len == Some(0)
    }

    /// A reader from the beginning of the input (reads its file header now).
    /// A stream gives one reader; asking again is an error.
    pub fn reader(&self) -> Result<CaptureReader, CaptureError> {
        if let Some(f) = &self.file {
            let src = Positioned {
                file: f.clone(),
                pos: 0,
            };
            return CaptureReader::from_source(Box::new(src), self.name.clone(), self.len);
        }
        let taken = self.stream.lock().unwrap_or_else(|e| e.into_inner()).take();
        match taken {
            Some(f) => CaptureReader::from_source(Box::new(f), self.name.clone(), None),
            None => Err(CaptureError::from(ErrorDetail {
                file: self.name.clone(),
                frame: None,
                last_frame: 0,
                offset: 0,
                structure: "file",
                field: "read",
                kind: ErrorKind::Io(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "a stream can be read only once (copy it to a file first)",
                )),
            })),
        }
    }
}

/// Reads a shared open file from its own position (`pread`).
struct Positioned {
    file: Arc<File>,
    pos: u64,
}

impl Read for Positioned {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.file.read_at(buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}
