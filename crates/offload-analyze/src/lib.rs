//! offload-analyze: runs captures through the engine and explains them.
//!
//! - [`analyze`]: `offload analyze`: one streaming pass over one or more
//!   captures giving per-flow statistics ([`flow`]), the GRO what-if at
//!   several sizes under a kernel profile ([`whatif`]), and ranked findings
//!   ([`findings`]), gathered in a [`report::Report`] that renders as text
//!   ([`text`]), JSON (serde), HTML ([`html`]), CSV ([`export`]) and, with
//!   the cargo feature `parquet`, Parquet ([`columnar`]).
#![deny(unsafe_code)]

pub mod analysis;
pub mod columnar;
pub mod dissect;
pub mod export;
pub mod findings;
pub mod flow;
pub mod html;
pub mod report;
pub mod text;
pub mod whatif;

pub use analysis::{AnalyzeError, Options, DEFAULT_GRO_SIZES, DEFAULT_VXLAN_PORTS};
pub use report::{Analysis, Report};
pub use whatif::KernelProfile;

use std::path::PathBuf;

/// Analyses `inputs` (pcap/pcapng) in one streaming pass. On cancellation
/// (`ctl.cancel`) the report covers what was read and says `interrupted`.
pub fn analyze(
    inputs: &[PathBuf],
    opts: &Options,
    ctl: &mut offload_capture::Control<'_>,
) -> Result<Analysis, AnalyzeError> {
    let pass = analysis::run_pass(inputs, opts, ctl)?;
    Ok(report::build(pass, opts))
}
