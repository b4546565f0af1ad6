//! `offload bench`: argument parsing and printing for the benchmark.

/// Arguments of `offload bench` (filled in by the benchmark change).
#[derive(Debug, clap::Args)]
pub struct BenchArgs {}

pub fn run(_args: BenchArgs) -> anyhow::Result<std::process::ExitCode> {
    anyhow::bail!("offload bench is not built yet")
}
