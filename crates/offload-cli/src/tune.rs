//! `offload tune`: argument parsing and printing around
//! `offload_lab::inspect::tune`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;

use anyhow::{bail, Context};
use clap::Args;
use offload_lab::inspect::tune::{self, Knob, Target};
use offload_lab::inspect::{self, InspectOptions};

#[derive(Debug, Args)]
pub struct TuneArgs {
    /// Set a knob: DEV:gro_max_size=N (also gso_max_size, gro_ipv4_max_size,
    /// gso_ipv4_max_size), DEV:feature:NAME=on|off, DEV:sysfs:REL=V
    /// (gro_flush_timeout, queues/rx-0/rps_cpus, ...), DEV:ring:rx|tx=N,
    /// DEV:coalesce:FIELD=N, sysctl:KEY=V, irq:N=CPULIST. Repeatable.
    #[arg(long = "set", value_name = "KNOB=VALUE")]
    pub sets: Vec<String>,
    /// Apply the fix of every finding of this kind (`offload inspect`'s
    /// `kind`, e.g. big-tcp-half-done), on DEVICE only if given.
    #[arg(long, value_name = "KIND")]
    pub fix: Option<String>,
    /// Apply a named profile to the devices given with --dev:
    /// throughput, latency or packet-rate.
    #[arg(long, value_name = "NAME", requires = "dev")]
    pub profile: Option<String>,
    /// Devices for --profile and --fix.
    #[arg(long = "dev", value_name = "DEVICE")]
    pub dev: Vec<String>,
    /// The network namespace to change: a name under /run/netns (as `ip
    /// netns` makes them) or a path such as /proc/PID/ns/net. Without it,
    /// the current namespace.
    #[arg(long, value_name = "NAME|PATH")]
    pub netns: Option<String>,
    /// Allow changing the host: its own namespace, host-only sysctls
    /// (net.core.netdev_max_backlog, ...) and IRQ affinity.
    #[arg(long)]
    pub host: bool,
    /// Make the changes (without it, only print them).
    #[arg(long, conflicts_with = "revert")]
    pub apply: bool,
    /// Restore every value the state file recorded, and remove it.
    #[arg(long)]
    pub revert: bool,
    /// The state file (default /run/offload/tune-<target>.json).
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
    /// JSON for programs.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: TuneArgs) -> anyhow::Result<ExitCode> {
    let target = match &args.netns {
        Some(n) => Target::netns(n).with_context(|| format!("--netns {n}"))?,
        None => Target::current(),
    };
    let state_path = args
        .state
        .clone()
        .unwrap_or_else(|| tune::default_state_path(&target));
    if args.revert {
        let state = tune::revert(&target, &state_path).context("--revert")?;
        if args.json {
            println!("{}", serde_json::to_string_pretty(&state)?);
        } else {
            println!(
                "reverted {} change(s) in {}:",
                state.steps.len(),
                state.target
            );
            for s in &state.steps {
                println!("  {} = {} (was {})", s.knob.spec(), s.before, s.after);
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mut sets = Vec::new();
    for s in &args.sets {
        let (k, v) = s
            .split_once('=')
            .with_context(|| format!("--set {s}: expected KNOB=VALUE"))?;
        sets.push((
            Knob::parse(k).with_context(|| format!("--set {s}"))?,
            v.to_string(),
        ));
    }
    if let Some(kind) = &args.fix {
        let opts = InspectOptions {
            only: args.dev.clone(),
            window: std::time::Duration::from_millis(200),
            since_boot: false,
        };
        let cancel = AtomicBool::new(false);
        let ins = target
            .run(|| inspect::inspect(&opts, &cancel))
            .context("inspect for --fix")?;
        let mut found = false;
        for f in ins.findings.iter().filter(|f| f.kind == kind.as_str()) {
            found = true;
            for c in &f.changes {
                sets.push((Knob::parse(&c.knob)?, c.value.clone()));
            }
        }
        if !found {
            bail!("--fix {kind}: no such finding here now");
        }
    }
    if sets.is_empty() && args.profile.is_none() {
        bail!("nothing to do: give --set, --fix or --profile (or --revert)");
    }
    let plan = tune::plan(&target, &sets, args.profile.as_deref(), &args.dev).context("plan")?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&plan)?);
    } else {
        println!(
            "{} {} change(s) in {}:",
            if args.apply {
                "applying"
            } else {
                "would apply"
            },
            plan.steps.len(),
            plan.target
        );
        for s in &plan.steps {
            println!(
                "  {} : {} -> {}{}",
                s.knob.spec(),
                s.before,
                s.after,
                if s.host { "  (host)" } else { "" }
            );
        }
        for s in &plan.skipped {
            println!("  skipped {s}");
        }
    }
    if !args.apply {
        if !args.json {
            println!("nothing changed: add --apply to make these changes");
        }
        return Ok(ExitCode::SUCCESS);
    }
    tune::check_allowed(&target, &plan, args.host)?;
    if std::fs::symlink_metadata(&state_path).is_ok() {
        bail!(
            "state file {} exists: an earlier tune is not reverted (offload tune --revert first); nothing changed",
            state_path.display()
        );
    }
    if plan.steps.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    tune::apply(&target, &plan, &state_path).context("--apply")?;
    if !args.json {
        println!(
            "done; previous values in {} (offload tune --revert{}{} restores them)",
            state_path.display(),
            args.netns
                .as_deref()
                .map(|n| format!(" --netns {n}"))
                .unwrap_or_default(),
            args.state
                .as_deref()
                .map(|p| format!(" --state {}", p.display()))
                .unwrap_or_default()
        );
    }
    Ok(ExitCode::SUCCESS)
}
