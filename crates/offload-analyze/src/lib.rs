//! offload-analyze: runs captures through the engine.
//!
//! - [`transform`]: `offload gro` / `offload gso`, capture to capture, with
//!   summaries (merge ratios, flush reasons) for people and programs.
#![deny(unsafe_code)]

pub mod transform;
