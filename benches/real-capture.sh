#!/usr/bin/env bash
# Makes a capture of real kernel traffic for benches/analyze-peers.sh:
# iperf3 IPv4 and IPv6 bulk TCP between two network namespaces joined by a
# veth pair, captured with tcpdump on the receiver's side (data and ACKs,
# full snap length). TSO/GSO/GRO are off on the veth pair so that the capture
# holds wire-sized segments (1448-byte payloads), the hardest case for an
# analyser: most frames per byte. Transmit checksumming is off too, so every
# segment carries a full checksum, as on a physical receiver, and the
# analysers verify them.
#
# Usage: benches/real-capture.sh OUT.pcap [MEGABYTES]   (root; default 500 MB)
# The namespaces (ofl-rc-<pid>-a/b) are removed on every exit path.
#
# COMPARE=1 then runs the peers side by side on that capture and prints the
# table of docs/performance.md: offload analyze with one thread, the default
# and --threads 2, `tcptrace -l`, `tshark -q -z conv,tcp`. Every tool reads
# the same file from a warm page cache (it is read once before); RUNS=5
# rounds, each running every tool once in turn (so a load change hits all
# of them alike); per tool the median of its CPU time (user+system, `perf
# stat -e task-clock`, microsecond resolution) and of its wall time.
# Then each round's CPU times and ratios with the load average as it
# started, quietest first (on a shared machine the quiet rounds say what
# the code costs: analyze's CPU time has risen more with the load than
# tcptrace's, docs/performance.md).
# REUSE=1 compares on an existing OUT.pcap (no capture; an error if it is
# missing or empty).
# The tools read a copy of the capture in /dev/shm (tmpfs, removed on exit):
# on the VMs this project runs on, the page cache of a 500 MB file on disk
# loses tens of megabytes within seconds even with gigabytes free, so a
# "warm cache" run would time some disk reads too (the same for every tool,
# which compresses the ratios). SHM=0 reads OUT in place.
# OFFLOAD=path/to/offload (default target/release/offload); BASE=path/to/an
# older offload adds its --threads 1 row, run in the same rounds (before and
# after under the same load). Run it under the
# shared lock: flock /tmp/offload-bench.lock nice env COMPARE=1 benches/real-capture.sh ...
set -euo pipefail

OUT=${1:?usage: real-capture.sh OUT.pcap [MEGABYTES]}
MB=${2:-500}
if [ -n "${REUSE:-}" ]; then
    # Never capture over a file the caller meant to reuse.
    [ -s "$OUT" ] || { echo "real-capture: REUSE=1 but $OUT is missing or empty" >&2; exit 1; }
    [ -n "${COMPARE:-}" ] || exit 0
else
    for t in ip iperf3 tcpdump ethtool; do
        command -v "$t" >/dev/null || { echo "real-capture: $t not found (apt-get install iproute2 iperf3 tcpdump ethtool)" >&2; exit 1; }
    done
    A="ofl-rc-$$-a"
    B="ofl-rc-$$-b"
    PIDS=()
    cleanup() {
        for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
        wait 2>/dev/null || true
        ip netns del "$A" 2>/dev/null || true
        ip netns del "$B" 2>/dev/null || true
    }
    trap cleanup EXIT
    trap 'exit 130' INT TERM

    ip netns add "$A"
    ip netns add "$B"
    ip link add va netns "$A" type veth peer name vb netns "$B"
    ip -n "$A" addr add 10.77.0.1/24 dev va
    ip -n "$B" addr add 10.77.0.2/24 dev vb
    ip -n "$A" addr add fd77::1/64 dev va nodad
    ip -n "$B" addr add fd77::2/64 dev vb nodad
    for ns in "$A" "$B"; do
        ip -n "$ns" link set lo up
    done
    ip -n "$A" link set va up
    ip -n "$B" link set vb up
    ip netns exec "$A" ethtool -K va tx off tso off gso off gro off >/dev/null
    ip netns exec "$B" ethtool -K vb tx off tso off gso off gro off >/dev/null

    ip netns exec "$B" iperf3 -s -p 5201 -D --pidfile "/tmp/ofl-rc-$$.4.pid" >/dev/null
    ip netns exec "$B" iperf3 -s -p 5202 -D --pidfile "/tmp/ofl-rc-$$.6.pid" >/dev/null
    sleep 0.5
    PIDS+=("$(cat "/tmp/ofl-rc-$$.4.pid")" "$(cat "/tmp/ofl-rc-$$.6.pid")")
    rm -f "/tmp/ofl-rc-$$.4.pid" "/tmp/ofl-rc-$$.6.pid"

    ip netns exec "$B" tcpdump -i vb -s 0 -B 524288 -w "$OUT" tcp 2>"$OUT.tcpdump.log" &
    PIDS+=("$!")
    sleep 1
    # Half the bytes over IPv4, half over IPv6, at the same time; a rate cap
    # keeps tcpdump from dropping (a dropped frame would be a gap in the data).
    HALF=$((MB / 2))
    ip netns exec "$A" iperf3 -c 10.77.0.2 -p 5201 -n "${HALF}M" -b 300M -l 64K >/dev/null &
    C4=$!
    ip netns exec "$A" iperf3 -c fd77::2 -p 5202 -n "${HALF}M" -b 300M -l 64K >/dev/null &
    C6=$!
    wait "$C4" "$C6"
    sleep 1
    kill -INT "${PIDS[2]}"
    wait "${PIDS[2]}" 2>/dev/null || true
    cat "$OUT.tcpdump.log" >&2
    rm -f "$OUT.tcpdump.log"

    [ -n "${COMPARE:-}" ] || exit 0
    # The capture is done: stop the namespaces before measuring.
    cleanup
    trap - EXIT
fi
for t in tcptrace tshark perf bc; do
    command -v "$t" >/dev/null || { echo "real-capture: $t not found (apt-get install tcptrace tshark linux-perf bc)" >&2; exit 1; }
done
OFFLOAD=${OFFLOAD:-$(dirname "$0")/../target/release/offload}
RUNS=${RUNS:-5}
T=$(mktemp -d /tmp/ofl-rc-cmp.XXXXXX)
SHM_COPY=""
trap 'rm -rf "$T"; [ -z "$SHM_COPY" ] || rm -f "$SHM_COPY"' EXIT
BYTES=$(stat -c %s "$OUT")
CAP=$OUT
if [ "${SHM:-1}" != 0 ]; then
    if [ -d /dev/shm ] && [ "$(df --output=avail -B1 /dev/shm | tail -1)" -gt $((BYTES * 2)) ]; then
        SHM_COPY=$(mktemp /dev/shm/ofl-rc.XXXXXX.pcap)
        cp "$OUT" "$SHM_COPY"
        CAP=$SHM_COPY
    else
        echo "real-capture: /dev/shm too small, reading $OUT in place" >&2
    fi
fi
cat "$CAP" >/dev/null
TOOLS=(a1 ad a2 tt ts)
[ -z "${BASE:-}" ] || TOOLS+=(b1)
cmd_of() {
    case $1 in
        b1) echo "$BASE analyze $CAP --json --threads 1" ;;
        a1) echo "$OFFLOAD analyze $CAP --json --threads 1" ;;
        ad) echo "$OFFLOAD analyze $CAP --json" ;;
        a2) echo "$OFFLOAD analyze $CAP --json --threads 2" ;;
        tt) echo "tcptrace -l $CAP" ;;
        ts) echo "tshark -q -z conv,tcp -r $CAP" ;;
    esac
}
# One run: wall seconds and CPU seconds (task-clock: user+system of the
# process and its threads) appended to $T/<tool>.
run_one() {
    local t0 t1 cpu
    t0=$(date +%s%N)
    # shellcheck disable=SC2046
    perf stat -x, -e task-clock -o "$T/perf" -- $(cmd_of "$1") >/dev/null 2>"$T/err" || {
        echo "real-capture: failed: $(cmd_of "$1")" >&2; cat "$T/err" >&2; exit 1; }
    t1=$(date +%s%N)
    cpu=$(awk -F, '/task-clock/ {printf "%.4f", $1 / 1000}' "$T/perf")
    echo "$(echo "($t1 - $t0) / 1000000000" | bc -l) $cpu" >>"$T/$1"
}
for _ in $(seq "$RUNS"); do
    # The 1-minute load average as each round starts: the machine may be
    # shared, and the ratios move with its load (docs/performance.md).
    cut -d' ' -f1 /proc/loadavg >>"$T/load"
    for t in "${TOOLS[@]}"; do run_one "$t"; done
done
median() { sort -g | awk '{v[NR] = $1} END {m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.3f", m}'; }
declare -A W C
for t in "${TOOLS[@]}"; do
    W[$t]=$(cut -d' ' -f1 "$T/$t" | median)
    C[$t]=$(cut -d' ' -f2 "$T/$t" | median)
done
mbps() { printf '%.0f' "$(echo "$BYTES / 1000000 / $1" | bc -l)"; }
ratio() { printf '%.1f' "$(echo "$1 / $2" | bc -l)"; }
echo "capture: $OUT, $BYTES bytes, read from $CAP; $(date -u '+%Y-%m-%d %H:%M UTC'); load average $(cut -d' ' -f1-3 /proc/loadavg); median of $RUNS interleaved rounds"
echo
echo "| tool | wall s | CPU s (user+sys) | MB per CPU-second | CPU / offload analyze --threads 1 |"
echo "|---|---|---|---|---|"
row() { echo "| $1 | ${W[$2]} | ${C[$2]} | $(mbps "${C[$2]}") | $(ratio "${C[$2]}" "${C[a1]}") |"; }
row "offload analyze --threads 1" a1
row "offload analyze (default)" ad
row "offload analyze --threads 2" a2
row "tcptrace -l" tt
row "tshark -q -z conv,tcp" ts
[ -z "${BASE:-}" ] || row "BASE: $BASE analyze --threads 1" b1
# Round by round, quietest first: on a shared machine the quiet rounds are
# the ones that say what the code costs.
echo
echo "Round by round (CPU s; load = 1-minute load average as the round started), quietest first"
echo
echo "| round | load | offload analyze --threads 1 | tcptrace -l | tshark -q -z conv,tcp | tcptrace / offload | tshark / offload |"
echo "|---|---|---|---|---|---|---|"
for r in $(seq "$RUNS"); do
    l=$(sed -n "${r}p" "$T/load")
    a=$(sed -n "${r}p" "$T/a1" | cut -d' ' -f2)
    c=$(sed -n "${r}p" "$T/tt" | cut -d' ' -f2)
    s=$(sed -n "${r}p" "$T/ts" | cut -d' ' -f2)
    echo "$l | $r | $l | $a | $c | $s | $(printf "%.2f" "$(echo "$c / $a" | bc -l)") | $(printf "%.2f" "$(echo "$s / $a" | bc -l)") |"
done | sort -g | cut -d" " -f2-
