//! offload-analyze: runs captures through the engine and explains them.
//!
//! - [`analyze`]: `offload analyze`: one streaming pass ([`analysis`]) over
//!   one or more captures giving per-flow statistics ([`flow`]) and the GRO
//!   what-if at several sizes ([`whatif`]), with per-packet tables written
//!   as it reads ([`packets`], [`columnar`]); then [`assemble`] applies the
//!   kernel profile ([`kernel`]) and ranks the findings ([`findings`]) into
//!   a [`report::Report`] that renders as text ([`text`]), JSON (serde),
//!   HTML ([`html`]), CSV ([`export`]) and Parquet ([`columnar`]).
//!
//! Dependencies point one way (checked by scripts/check-module-cycles.py):
//! leaf modules hold the shared vocabulary ([`options`], [`kernel`],
//! [`key`], [`figures`], [`link`], [`dissect`]); the pass and the engine driver use
//! them; [`report`] is types only; renderers read the report and nothing
//! reads the renderers.
#![deny(unsafe_code)]

pub mod analysis;
pub mod assemble;
pub mod columnar;
pub mod dissect;
pub mod export;
pub mod figures;
pub mod findings;
pub mod flow;
pub mod frag;
pub mod hops;
pub mod html;
pub mod ipcomp;
pub mod kernel;
pub mod key;
pub mod link;
pub mod options;
pub mod packets;
pub mod report;
pub mod series;
pub mod tcp;
pub mod tcp_findings;
pub mod text;
pub mod whatif;

pub use analysis::AnalyzeError;
pub use options::{Options, DEFAULT_GRO_SIZES};
pub use report::{Analysis, Report};

use std::path::PathBuf;

/// Analyses `inputs` (pcap/pcapng) in one streaming pass. On cancellation
/// (`ctl.cancel`) the report covers what was read and says `interrupted`.
pub fn analyze(
    inputs: &[PathBuf],
    opts: &Options,
    ctl: &mut offload_capture::Control<'_>,
) -> Result<Analysis, AnalyzeError> {
    let pass = analysis::run_pass(inputs, opts, ctl)?;
    Ok(assemble::build(pass, opts))
}
