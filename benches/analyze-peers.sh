#!/usr/bin/env bash
# Runs `offload analyze` beside `tshark -q -z conv,tcp` and `tcptrace -l` on
# the same generated full-MTU capture and prints the figures and ratios for
# the `## offload analyze` section of docs/performance.md (WRITE=1 writes them).
#
# The capture (default 850 MB, 8 interleaved bulk TCP flows, IPv4 and IPv6,
# made by crates/offload-analyze/examples/gen_capture.rs) lives in a temporary
# directory that is removed on exit. Each tool runs RUNS times on a warm page
# cache; the best wall time is kept, with its user+system CPU time.
#
# It also runs the three on a capture of real kernel traffic
# (benches/real-capture.sh: iperf3 IPv4 and IPv6 between two namespaces,
# data and ACKs, full checksums, REAL_MB megabytes, default 500; needs root),
# the figure that counts: the generator's IPv6 flows carry no ACKs, which
# slows tcptrace and tshark down and flatters offload's ratios.
#
# Usage: benches/analyze-peers.sh [MEGABYTES]
# Env:   OFFLOAD=path/to/offload (default: target/release/offload, built here)
#        RUNS=3  WRITE=1 (replace the section of docs/performance.md; by
#        default the tables are only printed: that section also holds
#        hand-written analysis)  REAL_MB=500  NO_REAL=1 (skip it)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
MB=${1:-850}
RUNS=${RUNS:-3}
for t in tshark tcptrace /usr/bin/time; do
    command -v "$t" >/dev/null || { echo "analyze-peers: $t not found (apt-get install tshark tcptrace time)" >&2; exit 1; }
done

cd "$ROOT"
cargo build -q --release -p offload-analyze --example gen_capture
if [ -z "${OFFLOAD:-}" ]; then
    cargo build -q --release -p offload-cli
    OFFLOAD="$ROOT/target/release/offload"
fi
"$OFFLOAD" analyze --help >/dev/null || { echo "analyze-peers: $OFFLOAD has no analyze subcommand" >&2; exit 1; }

WORK=$(mktemp -d /tmp/ofl-analyze-bench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
CAP="$WORK/capture.pcap"
target/release/examples/gen_capture "$CAP" "$MB" 8 2>"$WORK/gen.log"
FRAMES=$(grep -o '[0-9]* frames' "$WORK/gen.log" | cut -d' ' -f1)
BYTES=$(stat -c %s "$CAP")
cat "$CAP" >/dev/null   # warm the page cache: we measure the tools, not the disk

# best_of NAME CMD...: prints "wall cpu" of the fastest of $RUNS runs.
best_of() {
    local best_wall="" best_cpu=""
    for _ in $(seq "$RUNS"); do
        /usr/bin/time -f "%e %U %S" -o "$WORK/time" "$@" >/dev/null 2>"$WORK/err" || {
            echo "analyze-peers: failed: $*" >&2; cat "$WORK/err" >&2; exit 1; }
        read -r wall user sys <"$WORK/time"
        cpu=$(printf '%.2f' "$(echo "$user + $sys" | bc -l)")
        if [ -z "$best_wall" ] || [ "$(echo "$wall < $best_wall" | bc -l)" = 1 ]; then
            best_wall=$wall; best_cpu=$cpu
        fi
    done
    echo "$best_wall $best_cpu"
}

# A 100 MB capture from the same generator: how the tools scale.
SMALL="$WORK/small.pcap"
target/release/examples/gen_capture "$SMALL" 100 8 2>/dev/null
SMALL_BYTES=$(stat -c %s "$SMALL")
read -r os_wall os_cpu < <(best_of "$OFFLOAD" analyze "$SMALL" --json)
read -r ss_wall ss_cpu < <(best_of tshark -q -z conv,tcp -r "$SMALL")
read -r ts_wall ts_cpu < <(best_of tcptrace -l "$SMALL")
rm -f "$SMALL"

REAL_SECTION=""
if [ -z "${NO_REAL:-}" ]; then
    REAL="$WORK/real.pcap"
    # The real capture is measured by real-capture.sh itself (interleaved
    # rounds, median task-clock CPU, a tmpfs copy): one method for both.
    REAL_TABLE=$(COMPARE=1 RUNS="$RUNS" OFFLOAD="$OFFLOAD" "$ROOT/benches/real-capture.sh" "$REAL" "${REAL_MB:-500}" 2>"$WORK/real.log")
    REAL_FRAMES=$(grep -o '^[0-9]* packets captured' "$WORK/real.log" | cut -d' ' -f1)
    rm -f "$REAL"
    REAL_SECTION=$(cat <<EOT

### On real kernel traffic (the figure that counts)

\`benches/real-capture.sh\` with \`COMPARE=1\`: iperf3 over IPv4 and IPv6 at
once between two namespaces, captured on the receiver (data and ACKs,
wire-sized segments, full checksums), $REAL_FRAMES frames.

$REAL_TABLE
EOT
)
fi

read -r o_wall o_cpu < <(best_of "$OFFLOAD" analyze "$CAP" --json --threads 2)
read -r o1_wall o1_cpu < <(best_of "$OFFLOAD" analyze "$CAP" --json --threads 1)
read -r s_wall s_cpu < <(best_of tshark -q -z conv,tcp -r "$CAP")
read -r t_wall t_cpu < <(best_of tcptrace -l "$CAP")

mbps() { printf '%.0f' "$(echo "$BYTES / 1000000 / $1" | bc -l)"; }
ratio() { printf '%.1f' "$(echo "$1 / $2" | bc -l)"; }
KERNEL=$(uname -r)
CPU=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')
LOAD=$(cut -d' ' -f1 /proc/loadavg)
SECTION=$(cat <<EOT
## offload analyze

Measured $(date -u +%Y-%m-%d) by \`benches/analyze-peers.sh $MB\` on $(nproc) cores ($CPU),
kernel $KERNEL, load average $LOAD at the end. Capture: $BYTES bytes, $FRAMES frames
(8 interleaved bulk TCP flows at full MTU, IPv4 and IPv6, ACKs, timestamps,
made by \`crates/offload-analyze/examples/gen_capture.rs\`), warm page cache,
best of $RUNS runs. \`offload analyze\` computes everything it reports: flow
statistics, the GRO what-if at 65536 and 185000 (engine with software
checksum verification) and the findings.

| tool | wall s | CPU s | MB/s (wall) | MB/s per CPU-second | time / offload analyze's (wall) | (CPU) |
|---|---|---|---|---|---|---|
| offload analyze --threads 2 | $o_wall | $o_cpu | $(mbps "$o_wall") | $(mbps "$o_cpu") | 1.0 | 1.0 |
| offload analyze --threads 1 | $o1_wall | $o1_cpu | $(mbps "$o1_wall") | $(mbps "$o1_cpu") | $(ratio "$o1_wall" "$o_wall") | $(ratio "$o1_cpu" "$o_cpu") |
| tshark -q -z conv,tcp | $s_wall | $s_cpu | $(mbps "$s_wall") | $(mbps "$s_cpu") | $(ratio "$s_wall" "$o_wall") | $(ratio "$s_cpu" "$o_cpu") |
| tcptrace -l | $t_wall | $t_cpu | $(mbps "$t_wall") | $(mbps "$t_cpu") | $(ratio "$t_wall" "$o_wall") | $(ratio "$t_cpu" "$o_cpu") |

Wall times depend on what else the machine runs (other builds and tests ran
beside this measurement: see the load average); CPU seconds are the steadier
figure. Where the CPU goes (\`perf record\`, one thread): the engine's flow
lookup and checksum verification about half, the capture reader's copy out
of the page cache about a sixth, dissection, flow statistics and attribution
the rest.

The same generator at 100 MB ($SMALL_BYTES bytes), best of $RUNS:

| tool | wall s | CPU s | time / offload analyze's (CPU) |
|---|---|---|---|
| offload analyze | $os_wall | $os_cpu | 1.0 |
| tshark -q -z conv,tcp | $ss_wall | $ss_cpu | $(ratio "$ss_cpu" "$os_cpu") |
| tcptrace -l | $ts_wall | $ts_cpu | $(ratio "$ts_cpu" "$os_cpu") |

tcptrace's time grows faster than the capture on this input (many
interleaved flows, an occasional retransmission), so its ratio on the large
capture says more about its behaviour on long multi-flow captures than about
its per-packet cost; compare the 100 MB row. The generator's IPv6 flows
carry no ACKs, which slows tcptrace and tshark down: judge the ratios on
the real-traffic table below. On a loaded machine the second thread can
cost more wall time than it saves (compare the two offload rows and the
load average).
$REAL_SECTION
EOT
)
echo "$SECTION"
[ -n "${WRITE:-}" ] || exit 0

DOC="$ROOT/docs/performance.md"
[ -f "$DOC" ] || printf '# Performance\n\nMeasured figures, each section with the command that produced it.\n' >"$DOC"
# Replace our section (from its heading to the next "## " heading) or append it.
python3 - "$DOC" "$SECTION" <<'PY'
import re, sys
path, section = sys.argv[1], sys.argv[2].rstrip() + "\n"
text = open(path).read()
pat = re.compile(r"^## offload analyze\n.*?(?=^## |\Z)", re.S | re.M)
if pat.search(text):
    text = pat.sub(lambda m: section + "\n", text, count=1)
else:
    text = text.rstrip() + "\n\n" + section
open(path, "w").write(text)
PY
echo "analyze-peers: wrote the figures into $DOC"
