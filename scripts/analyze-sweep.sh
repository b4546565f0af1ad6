#!/usr/bin/env bash
# Runs every capture of other projects' test suites through the comparison
# of crates/offload-cli/tests/public_captures.rs (offload analyze against
# tshark's fields, its conversation table and tcptrace, per flow
# direction; offload gro and gso must run) and prints per-file agreement,
# per-figure totals and a per-suite table (decision 0245, docs/analyze.md).
# It fails only on an error, panic or hang of offload.
#
#   scripts/analyze-sweep.sh zeek=DIR tcpdump=DIR libpcap=DIR
#
# Each DIR is searched recursively for .pcap, .pcapng and .cap files;
# gzip-compressed captures (.pcap.gz, ...) are uncompressed into a private
# temporary directory first. The suites (Zeek testing/btest/Traces,
# tcpdump tests/, libpcap tests/) are never copied into this repository.
# Needs tshark and tcptrace (.ci/install).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$#" -eq 0 ]; then
  echo "usage: $0 NAME=DIR [NAME=DIR ...]   (e.g. zeek=... tcpdump=... libpcap=...)" >&2
  exit 2
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
suites=()
for arg in "$@"; do
  name=${arg%%=*}
  dir=${arg#*=}
  if [ "$name" = "$arg" ] || [ ! -d "$dir" ]; then
    echo "$0: $arg: want NAME=DIR with an existing DIR" >&2
    exit 2
  fi
  suites+=("$name=$(realpath "$dir")")
  gz="$tmp/$name-gz"
  while IFS= read -r -d '' f; do
    mkdir -p "$gz"
    rel=${f#"$dir"/}
    out="$gz/${rel//\//__}"
    out=${out%.gz}
    case "$out" in *.pcap | *.pcapng | *.cap) ;; *) out="$out.pcap" ;; esac
    gzip -dc "$f" >"$out"
  done < <(find "$dir" -type f \( -name '*.pcap.gz' -o -name '*.pcapng.gz' -o -name '*.cap.gz' -o -name '*.trace.gz' \) -print0)
  if [ -d "$gz" ]; then suites+=("$name=$gz"); fi
done

# OFFLOAD_SWEEP_BIN=PATH sweeps another build of offload; OFFLOAD_SWEEP_JOBS=N
# runs N files at a time (default 2).
OFFLOAD_SWEEP="${suites[*]}" exec cargo test --release --locked -p offload-cli \
  --test public_captures -- --exact analyze_agrees_with_tshark_and_tcptrace_on_public_captures \
  --nocapture
