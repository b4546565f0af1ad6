//! offload-report: the reporting vocabulary every offload command shares.
//!
//! `offload analyze`, `offload inspect`, `offload lab` and `offload bench`
//! all end in the same things: ranked [`Finding`]s with a [`Severity`], a
//! fix and the evidence behind them; statistics over repeated runs
//! ([`stats`], including the one Student-t quantile [`stats::t95`]); and
//! HTML pages ([`html::escape`]). They live here once, so that a finding
//! or an interval means the same in every command's table, JSON and HTML.
//!
//! The crate depends on `serde` only. Kernel defaults (GRO sizes, the VXLAN
//! and Geneve ports) are not here: the engine (`offload`) owns them, and
//! every crate reads them from it (docs/decisions/0110-report-crate.md).
#![deny(unsafe_code)]

pub mod finding;
pub mod html;
pub mod stats;

pub use finding::{rank, Evidence, Finding, FlowRef, Severity};
