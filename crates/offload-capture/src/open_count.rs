//! Counts the paths this crate opens for reading, so that tests can check
//! that a command opens its input exactly once. A leaf module: `input`,
//! `reader` and `stdio` all note their opens here without depending on
//! each other.

use std::sync::atomic::{AtomicU64, Ordering};

/// Paths opened for reading by this crate since the process started
/// ([`CaptureReader::open`](crate::CaptureReader::open),
/// [`CaptureInput::open`](crate::CaptureInput::open), spooling).
pub fn inputs_opened() -> u64 {
    OPENED.load(Ordering::Relaxed)
}

static OPENED: AtomicU64 = AtomicU64::new(0);

pub(crate) fn note_open() {
    OPENED.fetch_add(1, Ordering::Relaxed);
}
