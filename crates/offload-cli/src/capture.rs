//! `offload gro` and `offload gso`: argument parsing and printing.

use crate::capture_opts::{parse_gro_size, parse_mss, parse_mtu, CaptureOpts, DEFAULT_MTU};
use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use offload::gro::{KernelLine, UdpGro};
use offload::GroConfig;
use offload_capture::Control;
use offload_transform::{self as transform, GsoOptions, Outcome, ReadOptions};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// Arguments of `offload gro`.
#[derive(Debug, clap::Args)]
pub struct GroArgs {
    /// Input capture (pcap or pcapng).
    pub input: PathBuf,
    /// Output capture; the format follows the extension (.pcap, .pcapng).
    #[arg(short, long)]
    pub output: PathBuf,
    /// gro_max_size: the merged size limit for IPv6 (65536 default, up to 524280 for BIG TCP).
    #[arg(long, default_value_t = 65536, value_parser = parse_gro_size)]
    pub gro_max_size: u32,
    /// gro_ipv4_max_size: the merged size limit for IPv4.
    #[arg(long, default_value_t = 65536, value_parser = parse_gro_size)]
    pub gro_ipv4_max_size: u32,
    /// Idle gap after which held packets are flushed (e.g. 50us, 10ms).
    #[arg(long, default_value = "50us", value_parser = parse_duration)]
    pub flush_timeout: Duration,
    /// Do not verify TCP/UDP checksums (captures taken on a sender with checksum offload).
    #[arg(long)]
    pub no_checksum_check: bool,
    #[command(flatten)]
    pub capture: CaptureOpts,
    /// UDP destination port with a Geneve socket (repeatable; default 6081; `--geneve-port 0` for none).
    #[arg(long = "geneve-port", value_name = "PORT")]
    pub geneve_ports: Vec<u16>,
    /// Which plain UDP datagrams GRO coalesces: `all` (rx-udp-gro-forwarding, or a
    /// UDP_GRO socket on every port), `off`, or a comma-separated port list (UDP_GRO sockets).
    #[arg(long, default_value = "all", value_parser = parse_udp_gro)]
    pub udp_gro: UdpGro,
    /// Coalesce VLAN-tagged frames (kernels built with CONFIG_VLAN_8021Q; the reference kernel is not).
    #[arg(long)]
    pub vlan_gro: bool,
    /// Kernel line whose GRO rules apply: 6.1, 6.12, 6.18 or 7.x (default: the running kernel's line, else 6.18).
    #[arg(long, value_parser = parse_kernel)]
    pub kernel: Option<KernelLine>,
    /// Write what a working kernel would deliver where the kernel line loses packets
    /// (BIG TCP through IPv6-outer tunnels before 7.0); by default they are reported as lost.
    #[arg(long)]
    pub no_kernel_losses: bool,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Parses `--kernel`.
pub fn parse_kernel(s: &str) -> Result<KernelLine, String> {
    KernelLine::parse(s)
        .ok_or_else(|| format!("`{s}` is not a kernel line (6.1, 6.12, 6.18 or 7.x)"))
}

/// The running kernel's line (`/proc/sys/kernel/osrelease`), else 6.18.
pub fn running_kernel_line() -> KernelLine {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .and_then(|r| KernelLine::from_release(&r))
        .unwrap_or_default()
}

fn parse_udp_gro(s: &str) -> Result<UdpGro, String> {
    match s {
        "all" => Ok(UdpGro::AllPorts),
        "off" | "none" => Ok(UdpGro::Off),
        list => list
            .split(',')
            .map(|p| {
                p.trim()
                    .parse::<u16>()
                    .map_err(|_| format!("`{p}` is not a UDP port (use all, off or e.g. 443,4433)"))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(UdpGro::Ports),
    }
}

/// Arguments of `offload gso`.
#[derive(Debug, clap::Args)]
pub struct GsoArgs {
    /// Input capture (pcap or pcapng).
    pub input: PathBuf,
    /// Output capture; the format follows the extension (.pcap, .pcapng).
    #[arg(short, long)]
    pub output: PathBuf,
    /// Segment size; default: the GSO metadata `offload gro` stored, else per
    /// flow from the handshake's MSS options, the super-packets' common
    /// divisor, single segments or IP ID steps (docs/capture.md).
    #[arg(long, value_parser = parse_mss)]
    pub mss: Option<u32>,
    /// Link MTU used to tell super-packets from segments.
    #[arg(long, default_value_t = DEFAULT_MTU, value_parser = parse_mtu)]
    pub mtu: u32,
    /// Flow directions whose MSS evidence is kept at once (about 300 bytes
    /// each, at most 900); past it, directions without super-packets are forgotten
    /// first, then new flows are cut at the MTU-derived size (the summary
    /// says how many).
    #[arg(long, default_value_t = transform::DEFAULT_MAX_FLOWS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(2..))]
    pub max_flows: usize,
    #[command(flatten)]
    pub capture: CaptureOpts,
    /// Kernel line whose GSO rules apply: 6.1, 6.12, 6.18 or 7.x (default: the running kernel's line, else 6.18).
    #[arg(long, value_parser = parse_kernel)]
    pub kernel: Option<KernelLine>,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    crate::duration::parse(s)
}

fn progress_bar(total: Option<u64>) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::with_draw_target(total, ProgressDrawTarget::hidden());
    }
    let pb = ProgressBar::new(total.unwrap_or(0));
    pb.set_style(
        ProgressStyle::with_template(
            "{spinner} {bytes}/{total_bytes} {bar:30} {binary_bytes_per_sec} eta {eta}",
        )
        .expect("valid template"),
    );
    pb
}

/// The cancel flag set by SIGINT, SIGTERM or SIGHUP; the handlers also
/// remove every temporary file before the process ends
/// (`offload_capture::tempfiles`).
pub fn cancel_flag() -> Arc<AtomicBool> {
    offload_capture::tempfiles::cancel_on_signals()
}

fn file_len(p: &PathBuf) -> Option<u64> {
    std::fs::metadata(p).ok().map(|m| m.len())
}

/// Runs a transform of `input` with a progress bar and Ctrl-C handling.
fn with_progress<S>(
    input: &PathBuf,
    what: &str,
    run: impl FnOnce(&mut Control<'_>) -> Result<Outcome<S>, offload_capture::CaptureError>,
) -> anyhow::Result<Outcome<S>> {
    let pb = progress_bar(file_len(input));
    let cancel = cancel_flag();
    let mut on_progress = |b: u64| pb.set_position(b);
    let mut ctl = Control {
        on_progress: &mut on_progress,
        cancel: &cancel,
    };
    // The capture error names the file (once); say which command failed.
    let outcome = run(&mut ctl).with_context(|| what.to_string())?;
    pb.finish_and_clear();
    Ok(outcome)
}

/// Where the summary goes: standard output, or standard error when the
/// capture itself is written to standard output (`-o -`).
fn summary_out(output: &Path) -> Box<dyn Write> {
    if offload_capture::stdio::is_stdio(output) {
        Box::new(std::io::stderr().lock())
    } else {
        Box::new(std::io::stdout().lock())
    }
}

/// Warns about frames longer than the file's snapshot length (read whole).
pub fn warn_above_snaplen(input: &str, count: u64, first: u64) {
    if count > 0 {
        let first = if first > 0 {
            format!(" (first: frame {first})")
        } else {
            String::new()
        };
        eprintln!(
            "offload: warning: {input}: {count} frame(s) have a captured length above the file's \
             snapshot length{first}; read whole, as tshark does (--strict stops there)"
        );
    }
}

/// Warns about timestamps read or written as the nearest time that could
/// be (the summary's `timestamps_clamped`).
pub fn warn_timestamps_clamped(input: &str, output: &str, t: &transform::TimestampsClamped) {
    if t.input > 0 {
        eprintln!(
            "offload: warning: {input}: {} frame(s) have a timestamp outside the years 1677 to \
             2262 (a huge pcapng timestamp or if_tsoffset; first: frame {}); read with the \
             nearest time that range holds",
            t.input, t.first_input_frame
        );
    }
    if t.output > 0 {
        eprintln!(
            "offload: warning: {output}: {} frame(s) have a timestamp the output format cannot \
             hold (before 1970, or in pcap from 2106-02-07 on; first: output frame {}); written \
             with the nearest one it holds (write .pcapng to keep times after 2106)",
            t.output, t.first_output_frame
        );
    }
}

/// Reports an input error after the output was written; the exit code says it.
fn finish<S>(outcome: &Outcome<S>) -> ExitCode {
    match &outcome.input_error {
        Some(e) => {
            eprintln!("offload: error: {e}");
            eprintln!("offload: every frame before the error was processed and written");
            ExitCode::from(1)
        }
        None => ExitCode::SUCCESS,
    }
}

pub fn run_gro(args: GroArgs) -> anyhow::Result<ExitCode> {
    let cfg = GroConfig::default()
        .gro_max_size(args.gro_max_size)
        .gro_ipv4_max_size(args.gro_ipv4_max_size)
        .flush_timeout_ns(args.flush_timeout.as_nanos().min(u64::MAX as u128) as u64)
        .verify_checksums(!args.no_checksum_check)
        .udp(args.udp_gro.clone())
        .vxlan_ports(args.capture.vxlan_ports())
        .vlan_gro(args.vlan_gro)
        .kernel(args.kernel.unwrap_or_else(running_kernel_line))
        .kernel_losses(!args.no_kernel_losses)
        .geneve_ports(match args.geneve_ports.as_slice() {
            [] => vec![offload::wire::geneve::PORT],
            ports => ports.iter().copied().filter(|p| *p != 0).collect(),
        });
    let outcome = with_progress(&args.input, "offload gro", |ctl| {
        let read = ReadOptions {
            strict: args.capture.strict,
        };
        transform::gro_capture_with(&args.input, &args.output, &cfg, &read, ctl)
    })?;
    let s = &outcome.summary;
    let mut out = summary_out(&args.output);
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(s)?)?;
    } else {
        writeln!(out, "{} -> {}", s.input, s.output)?;
        writeln!(
            out,
            "kernel {}  gro_max_size {}  gro_ipv4_max_size {}  flush timeout {}  checksum check {}",
            cfg.kernel,
            s.settings.gro_max_size,
            s.settings.gro_ipv4_max_size,
            humantime::format_duration(Duration::from_nanos(s.settings.flush_timeout_ns)),
            if s.settings.checksum_check {
                "on"
            } else if s.settings.checksums_offloaded {
                "off (checksums left to offload)"
            } else {
                "off"
            }
        )?;
        if s.settings.checksums_offloaded {
            writeln!(
                out,
                "the capture's TCP/UDP checksums hold only the pseudo-header sum (left to the NIC, \
                 CHECKSUM_PARTIAL: a sender-side or veth capture); the kernel does not verify such \
                 packets, so neither did this run"
            )?;
        }
        writeln!(
            out,
            "udp gro {}  vxlan ports {:?}  vlan gro {}",
            s.settings.udp_gro,
            s.settings.vxlan_ports,
            if s.settings.vlan_gro { "on" } else { "off" }
        )?;
        writeln!(
            out,
            "frames in {}  packets out {}  merge ratio {:.2}  super-packets {}  largest {} B{}",
            s.frames_in,
            s.packets_out,
            s.merge_ratio,
            s.super_packets,
            s.largest_packet,
            if s.interrupted { "  (interrupted)" } else { "" }
        )?;
        writeln!(out)?;
        writeln!(
            out,
            "{:<10} {:>12} {:>12} {:>8}",
            "protocol", "frames in", "packets out", "ratio"
        )?;
        for p in &s.protocols {
            writeln!(
                out,
                "{:<10} {:>12} {:>12} {:>8.2}",
                p.protocol, p.frames_in, p.packets_out, p.merge_ratio
            )?;
        }
        writeln!(out)?;
        writeln!(out, "{:<28} {:>10}  kind", "flush reason", "count")?;
        for r in &s.flush_reasons {
            let kind = if r.pass_through {
                "not held"
            } else {
                "completed a held packet"
            };
            writeln!(out, "{:<28} {:>10}  {}", r.reason, r.count, kind)?;
        }
        for l in &s.lost {
            writeln!(
                out,
                "\nlost on kernel {}: {} packets ({} segments), {}: {}",
                s.settings.kernel, l.packets, l.segments, l.reason, l.citation
            )?;
        }
        if s.unsupported_link_frames > 0 {
            writeln!(
                out,
                "\n{} frames of unsupported link types copied unchanged",
                s.unsupported_link_frames
            )?;
        }
    }
    warn_above_snaplen(&s.input, s.frames_above_snaplen, s.first_above_snaplen);
    warn_timestamps_clamped(&s.input, &s.output, &s.timestamps_clamped);
    Ok(finish(&outcome))
}

pub fn run_gso(args: GsoArgs) -> anyhow::Result<ExitCode> {
    let opts = GsoOptions {
        mss: args.mss,
        mtu: args.mtu,
        vxlan_ports: args.capture.vxlan_ports(),
        read: ReadOptions {
            strict: args.capture.strict,
        },
        kernel: args.kernel.unwrap_or_else(running_kernel_line),
        max_flows: args.max_flows,
    };
    let outcome = with_progress(&args.input, "offload gso", |ctl| {
        transform::gso_capture(&args.input, &args.output, &opts, ctl)
    })?;
    let s = &outcome.summary;
    let mut out = summary_out(&args.output);
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(s)?)?;
    } else {
        writeln!(out, "{} -> {}  (kernel {})", s.input, s.output, s.kernel)?;
        writeln!(
            out,
            "frames in {}  frames out {}{}",
            s.frames_in,
            s.frames_out,
            if s.interrupted { "  (interrupted)" } else { "" }
        )?;
        writeln!(
            out,
            "  split        {:>10}  super-packets into {} segments{}",
            s.super_packets,
            s.segments_out,
            if s.header_only_super_packets > 0 {
                format!(
                    " ({} header-only: segments keep the captured bytes and their wire length)",
                    s.header_only_super_packets
                )
            } else {
                String::new()
            }
        )?;
        writeln!(
            out,
            "  one segment  {:>10}  written unchanged",
            s.single_segments
        )?;
        writeln!(
            out,
            "  copied       {:>10}  written unchanged, not segmentable",
            s.copied_unchanged
        )?;
        for r in &s.copied_reasons {
            writeln!(out, "    {:>10}  {}", r.frames, r.reason)?;
        }
        let t = &s.flow_table;
        writeln!(
            out,
            "flow table: peak {} of {} flow directions (--max-flows){}",
            t.peak_flows,
            t.max_flows,
            if t.forgotten_flows + t.untracked_frames + t.unlisted_super_packets == 0 {
                String::new()
            } else {
                format!(
                    "; {} forgotten without super-packets, {} frames of flows not tracked \
                     (cut at the MTU-derived size), {} super-packets not listed per flow",
                    t.forgotten_flows, t.untracked_frames, t.unlisted_super_packets
                )
            }
        )?;
        if !s.flow_sources.is_empty() {
            writeln!(out)?;
            writeln!(
                out,
                "{:<18} {:>8} {:>14}",
                "mss from", "flows", "super-packets"
            )?;
            for (src, flows) in &s.flow_sources {
                let packets = s
                    .mss_sources
                    .iter()
                    .find(|(p, _)| p == src)
                    .map_or(0, |p| p.1);
                writeln!(out, "{:<18} {flows:>8} {packets:>14}", src.name())?;
            }
            writeln!(out)?;
            writeln!(
                out,
                "{:<58} {:>6} {:<18} {:>8}",
                "flow", "mss", "from", "split"
            )?;
            for f in &s.flows {
                writeln!(
                    out,
                    "{:<58} {:>6} {:<18} {:>8}",
                    f.flow,
                    f.mss,
                    f.source.name(),
                    f.super_packets
                )?;
            }
        }
    }
    warn_above_snaplen(&s.input, s.frames_above_snaplen, s.first_above_snaplen);
    warn_timestamps_clamped(&s.input, &s.output, &s.timestamps_clamped);
    Ok(finish(&outcome))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_default_flush_timeout_is_the_engine_default() {
        // `--flush-timeout` defaults to the string "50us"; it must stay the
        // engine's documented default.
        let d = parse_duration("50us").unwrap();
        assert_eq!(d.as_nanos() as u64, offload::gro::DEFAULT_FLUSH_TIMEOUT_NS);
    }

    #[test]
    fn udp_gro_argument_forms() {
        assert_eq!(parse_udp_gro("all"), Ok(UdpGro::AllPorts));
        assert_eq!(parse_udp_gro("off"), Ok(UdpGro::Off));
        assert_eq!(
            parse_udp_gro("443,4433"),
            Ok(UdpGro::Ports(vec![443, 4433]))
        );
        assert!(parse_udp_gro("443,x").is_err());
    }
}
