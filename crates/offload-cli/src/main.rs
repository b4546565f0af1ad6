//! The `offload` binary: argument parsing and printing only. Every piece of
//! logic a library user could want lives in the library crates.

mod bench;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "offload", version, about = "Linux network offloads (GRO, GSO, BIG TCP) made visible")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Request/response, connect, stream and UDP packet-rate benchmarks.
    Bench(bench::BenchArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
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
