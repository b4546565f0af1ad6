//! Progress reporting and cancellation for long passes over captures.
//!
//! Every command that streams a capture (`gro`, `gso`, `analyze`) takes a
//! [`Control`]: it lives here, in the leaf crate, so that the transforms and
//! the analysis share it without depending on each other.

use std::sync::atomic::AtomicBool;

/// Progress reporting and cancellation for long transforms.
pub struct Control<'a> {
    /// Called every few thousand frames with the input bytes consumed.
    pub on_progress: &'a mut dyn FnMut(u64),
    /// Set (e.g. by a Ctrl-C handler) to stop reading; what was read is
    /// still completed and written.
    pub cancel: &'a AtomicBool,
}

impl std::fmt::Debug for Control<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Control").finish_non_exhaustive()
    }
}
