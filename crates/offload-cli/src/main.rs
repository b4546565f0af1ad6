//! The `offload` binary: argument parsing and printing only. Every piece of
//! logic a library user could want lives in the library crates.

mod bench;
mod capture;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "offload",
    version,
    about = "Linux network offloads (GRO, GSO, BIG TCP) made visible"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Coalesce a capture as the kernel's GRO would (pcap/pcapng in and out).
    Gro(capture::GroArgs),
    /// Segment the super-packets of a capture as GSO/TSO would.
    Gso(capture::GsoArgs),
    /// Request/response, connect, stream and UDP packet-rate benchmarks.
    Bench(bench::BenchArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Gro(args) => capture::run_gro(args),
        Command::Gso(args) => capture::run_gso(args),
        Command::Bench(args) => bench::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("offload: error: {err:#}");
            std::process::ExitCode::from(2)
        }
    }
}
