//! `offload lab list` and `offload lab run NAME`: argument parsing and
//! printing. The experiments, their statistics and their reports live in
//! offload-lab (`offload_lab::experiments`).

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::{json, Value};

use offload_lab::experiments::{self, guests, report, Options};

#[derive(Debug, Args)]
pub struct LabArgs {
    #[command(subcommand)]
    pub command: LabCommand,
}

#[derive(Debug, Subcommand)]
pub enum LabCommand {
    /// The scenarios, with the claim each one tests.
    List {
        /// JSON for programs.
        #[arg(long)]
        json: bool,
    },
    /// Run one scenario (see `offload lab list`).
    Run(RunArgs),
    /// Inside a guest kernel of `--kernels`: pcaps through this kernel's
    /// GRO, counts as JSON to --out.
    #[command(hide = true)]
    GroReplay {
        /// Where to write the counts (a new file).
        #[arg(long)]
        out: PathBuf,
        /// The pcaps.
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
    },
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Scenario name: big-tcp, vxlan-ip-id, udp-rx, many-flows.
    pub name: String,
    /// JSON for programs.
    #[arg(long)]
    pub json: bool,
    /// Also write an HTML report.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Measured time of each run, after a 1 s warm-up: seconds (3, 0.5) or
    /// with a unit (500ms, 2m).
    #[arg(long, value_parser = crate::duration::parse, default_value = "3")]
    pub duration: Duration,
    /// Pairs of runs per comparison (each arm runs this many times,
    /// interleaved with the others).
    #[arg(long, default_value_t = experiments::DEFAULT_RUNS)]
    pub runs: u32,
    /// many-flows only: the flow counts, comma-separated [default:
    /// 1000,5000,10000,20000,30000].
    #[arg(long, value_delimiter = ',')]
    pub flows: Option<Vec<u32>>,
    /// vxlan-ip-id only: older kernels that run the same frames through
    /// their GRO, each booted in a QEMU guest by scripts/kernel-vm.sh:
    /// `auto` (those already fetched, when QEMU is installed), `none`, or
    /// a list such as `6.1,6.12` (fetched if needed; an error when one
    /// cannot boot). Lines not measured are shown as the engine's model.
    #[arg(long, default_value = "auto", value_name = "auto|none|6.1,6.12")]
    pub kernels: guests::KernelChoice,
}

pub fn run(args: LabArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        LabCommand::List { json } => {
            if json {
                let list: Vec<Value> = experiments::all()
                    .iter()
                    .map(|e| json!({"name": e.name(), "claim": e.claim(), "source": e.source()}))
                    .collect();
                println!("{}", serde_json::to_string_pretty(&list)?);
            } else {
                for e in experiments::all() {
                    println!(
                        "{:<12} {}\n{:<12} source: {}",
                        e.name(),
                        e.claim(),
                        "",
                        e.source()
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        LabCommand::Run(args) => run_one(args),
        LabCommand::GroReplay { out, inputs } => {
            guests::replay_files(&inputs, &out)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn run_one(args: RunArgs) -> anyhow::Result<ExitCode> {
    let experiment = experiments::find(&args.name)?;
    let cancel = Arc::new(AtomicBool::new(false));
    let flag = cancel.clone();
    let _ = ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed));
    let guests = if experiment.name() == "vxlan-ip-id" {
        let exe = std::env::current_exe().context("this program's path (for the guests)")?;
        guests::resolve(
            &args.kernels,
            vec![exe.into(), "lab".into(), "gro-replay".into()],
        )?
    } else {
        None
    };
    let opts = Options {
        duration: args.duration,
        runs: args.runs,
        flows: args.flows,
        guests,
    };
    // Progress goes to stderr, so it is printed with --json too.
    let rep = experiments::run(experiment, &opts, &cancel, true)?;
    if let Some(path) = &args.html {
        std::fs::write(path, report::render_html(&rep))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if args.json {
        let mut out = std::io::stdout().lock();
        serde_json::to_writer_pretty(&mut out, &rep)?;
        writeln!(out)?;
    } else {
        print!("{}", report::render_text(&rep));
    }
    Ok(if rep.interrupted {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    })
}
