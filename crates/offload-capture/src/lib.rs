//! offload-capture: streaming pcap and pcapng reading and writing.
//!
//! The capture tools (`offload gro`, `offload gso`, `offload analyze`) stream
//! captures through the GRO/GSO engine with this crate. It is built for files
//! larger than memory and for BIG TCP super-packets:
//!
//! * [`CaptureReader`] reads pcap (microsecond and nanosecond magic, either byte
//!   order) and pcapng (sections of either byte order, several interfaces each
//!   with its own link type, `if_tsresol` including power-of-2 resolutions, and
//!   `if_tsoffset`; Enhanced, Simple and obsolete Packet blocks; other blocks
//!   skipped). It keeps one reusable buffer and returns zero-copy [`Frame`]s:
//!   no allocation per frame, constant memory.
//! * [`CaptureInput`] opens an input once and gives any number of readers
//!   of it (positioned reads on the one open file), for commands that read a
//!   capture more than once without opening its path again.
//! * [`CaptureWriter`] writes pcap or pcapng (chosen from the extension with
//!   [`CaptureFormat::from_path`]) with nanosecond timestamps and frames up to
//!   [`MAX_FRAME_LEN`], lossless by default; see [`Oversize`] for files that
//!   tshark must read (it stops at frames above [`WIRESHARK_MAX_CAPLEN`]).
//! * [`tempfiles`]: the private temporary directory every temporary file of
//!   the capture commands lives in, removed on every exit path including
//!   SIGINT, SIGTERM and SIGHUP.
//! * Every problem is a [`CaptureError`] naming the file, the frame number
//!   (1-based, as Wireshark numbers frames), the byte offset, the structure and
//!   field, and an [`ErrorKind`] with the numbers. The reader returns every good
//!   frame before the bad one, never panics, and never allocates on a length it
//!   has not checked.
//!
//! ```
//! use offload_capture::{CaptureFormat, CaptureReader, CaptureWriter, FrameMeta, LinkType};
//!
//! // Write two frames to an in-memory pcapng, then read them back.
//! let out = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
//! struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
//! impl std::io::Write for Shared {
//!     fn write(&mut self, b: &[u8]) -> std::io::Result<usize> { self.0.lock().unwrap().write(b) }
//!     fn flush(&mut self) -> std::io::Result<()> { Ok(()) }
//! }
//! let mut w = CaptureWriter::from_writer(Shared(out.clone()), "mem.pcapng", CaptureFormat::PcapNg)?;
//! w.write_frame(&FrameMeta::new(1_000_000_007, LinkType::RAW, 20), &[0x45; 20])?;
//! w.write_frame(&FrameMeta::new(2_000_000_000, LinkType::ETHERNET, 60), &[0; 60])?;
//! w.finish()?;
//!
//! let bytes = out.lock().unwrap().clone();
//! let mut r = CaptureReader::from_reader(std::io::Cursor::new(bytes), "mem.pcapng")?;
//! let f = r.next_frame()?.expect("first frame");
//! assert_eq!((f.number, f.link_type, f.timestamp_ns, f.data.len()), (1, LinkType::RAW, 1_000_000_007, 20));
//! let f = r.next_frame()?.expect("second frame");
//! assert_eq!((f.interface, f.link_type), (1, LinkType::ETHERNET));
//! assert!(r.next_frame()?.is_none());
//! # Ok::<(), offload_capture::CaptureError>(())
//! ```

#![forbid(unsafe_code)]

mod buffer;
mod control;
mod error;
mod format;
mod gso_meta;
mod input;
mod linktype;
mod open_count;
mod reader;
pub mod stdio;
pub mod tempfiles;
mod writer;

pub use control::Control;
pub use error::{CaptureError, ErrorDetail, ErrorKind};
pub use format::{CaptureFormat, MAX_FRAME_LEN, WIRESHARK_MAX_CAPLEN};
pub use gso_meta::GsoMeta;
pub use input::CaptureInput;
pub use linktype::LinkType;
pub use open_count::inputs_opened;
pub use reader::{CaptureReader, Frame, Interface, TsResolution};
pub use stdio::SpooledInput;
pub use writer::{CaptureWriter, FrameMeta, InterfaceDesc, Oversize, WriterStats};

#[cfg(test)]
mod tests {
    /// Readers and writers move to worker threads in the capture commands.
    #[test]
    fn reader_writer_and_error_are_send() {
        fn send<T: Send>() {}
        send::<crate::CaptureReader>();
        send::<crate::CaptureWriter>();
        send::<crate::CaptureError>();
    }
}
