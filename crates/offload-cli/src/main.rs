//! The `offload` binary: argument parsing and printing only. Every piece of
//! logic a library user could want lives in the library crates.
#![deny(unsafe_code)]

mod analyze;
mod bench;
mod capture;
mod capture_opts;
mod docs;
mod duration;
mod inspect;
mod lab;
mod tune;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "offload",
    version,
    about = "Linux network offloads (GRO, GSO, BIG TCP) made visible"
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Explain a capture's offload behaviour: flows, findings, GRO what-if (no file: the bundled sample).
    Analyze(analyze::AnalyzeArgs),
    /// Coalesce a capture as the kernel's GRO would (pcap/pcapng in and out).
    Gro(capture::GroArgs),
    /// Segment the super-packets of a capture as GSO/TSO would.
    Gso(capture::GsoArgs),
    /// Request/response, connect, stream and UDP packet-rate benchmarks.
    Bench(bench::BenchArgs),
    /// This host's offload state (devices, knobs, queues, IRQs) with ranked findings; --live measures GRO now.
    Inspect(inspect::InspectArgs),
    /// Apply a finding's fix or a profile (throughput, latency, packet-rate); dry-run unless --apply; --revert restores.
    Tune(tune::TuneArgs),
    /// One-command experiments in throw-away namespaces: list, run NAME.
    Lab(lab::LabArgs),
    /// Print shell completions (bash, zsh, fish, ...) generated from these options.
    Completions(docs::CompletionsArgs),
    /// Print the man page, or write one per subcommand with --dir.
    Man(docs::ManArgs),
}

fn main() -> std::process::ExitCode {
    reset_sigpipe();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Analyze(args) => analyze::run(args),
        Command::Gro(args) => capture::run_gro(args),
        Command::Gso(args) => capture::run_gso(args),
        Command::Bench(args) => bench::run(args),
        Command::Inspect(args) => inspect::run(args),
        Command::Tune(args) => tune::run(args),
        Command::Lab(args) => lab::run(args),
        Command::Completions(args) => docs::completions(args),
        Command::Man(args) => docs::man(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("offload: error: {}", error_chain(&err));
            // Stopped by SIGINT, SIGTERM or SIGHUP: exit as the shell expects.
            match offload_capture::tempfiles::signal_received() {
                Some(sig) => std::process::ExitCode::from((128 + sig) as u8),
                None => std::process::ExitCode::from(2),
            }
        }
    }
}

/// The error and its causes, skipping a cause whose text the message
/// before it already contains (our errors quote their I/O source).
fn error_chain(err: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in err.chain() {
        let c = cause.to_string();
        if !text.contains(&c) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&c);
        }
    }
    text
}

/// Dies quietly on a closed pipe (`offload ... | head`) like other Unix
/// tools, instead of panicking in `println!`.
#[allow(unsafe_code)] // one libc call, see SAFETY below
fn reset_sigpipe() {
    // SAFETY: called first thing in main, before any thread exists; it only
    // restores the default disposition of SIGPIPE, which Rust's runtime set
    // to "ignore".
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
